/* PGM and PPM (netpbm), binary (P5, P6) and plain (P2, P3), parsed by hand.
 *
 * As strict as the netpbm format pages: the header is the magic, width,
 * height and maxval (1 to 65535), separated by whitespace, where # comments
 * (to the end of the line) may also stand. A binary raster starts after
 * exactly one whitespace byte and holds width x height samples (three per
 * pixel in PPM) of one byte, or two big-endian bytes when maxval > 255. A
 * plain raster is decimal numbers separated by whitespace and comments.
 * Every sample must be at most maxval; each is scaled to 0..255, rounding
 * to nearest. After the raster only whitespace may follow (and comments in
 * the plain formats): netpbm would read a second image there, and one file
 * gives one image here, so anything else is refused rather than ignored. */
#include "data/image_codec.h"

#include <stdio.h>
#include <stdlib.h>

#define PNM_MAX_MAXVAL 65535

struct pnm_reader {
    const struct image_input *in;
    const uint8_t *p, *end;
    const char *format; /* PGM or PPM */
    int plain, channels;
    unsigned long width, height, maxval;
    const uint8_t *token; /* the last number read, for messages */
    size_t token_len;
};

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static size_t offset(const struct pnm_reader *r) { return (size_t)(r->p - r->in->data); }

/* "'x'" or "byte 0x07" for a message. */
static const char *describe(uint8_t c, char buf[16])
{
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02x", c);
    return buf;
}

/* Skips whitespace and comments; returns how many bytes it skipped. */
static size_t skip_blank(struct pnm_reader *r, int comments)
{
    const uint8_t *start = r->p;
    while (r->p < r->end) {
        if (is_space(*r->p))
            r->p++;
        else if (comments && *r->p == '#')
            while (r->p < r->end && *r->p != '\n' && *r->p != '\r')
                r->p++;
        else
            break;
    }
    return (size_t)(r->p - start);
}

/* Reads the digits at r->p; above 999999999 the value saturates there. */
static unsigned long read_digits(struct pnm_reader *r)
{
    unsigned long v = 0;
    r->token = r->p;
    while (r->p < r->end && is_digit(*r->p)) {
        v = v > 99999999 ? 999999999 + 1ul : v * 10 + (unsigned long)(*r->p - '0');
        r->p++;
    }
    r->token_len = (size_t)(r->p - r->token);
    return v;
}

/* The last number's digits to print: at most 20 (the token is not a string). */
static int token_width(const struct pnm_reader *r) { return r->token_len > 20 ? 20 : (int)r->token_len; }

static int header_number(struct pnm_reader *r, const char *what, unsigned long *value)
{
    char c[16];
    size_t blank = skip_blank(r, 1);
    if (r->p == r->end)
        return snn_image_fail(r->in, "truncated %s header: it ends before the %s", r->format, what);
    if (!is_digit(*r->p))
        return snn_image_fail(r->in, "bad %s header: expected the %s at byte %zu, found %s", r->format, what,
                              offset(r), describe(*r->p, c));
    if (!blank)
        return snn_image_fail(r->in, "bad %s header: no whitespace before the %s at byte %zu", r->format, what,
                              offset(r));
    *value = read_digits(r);
    if (*value > 999999999)
        return snn_image_fail(r->in, "bad %s header: the %s %.*s%s is too large", r->format, what,
                              token_width(r), (const char *)r->token, r->token_len > 20 ? "..." : "");
    return 0;
}

static int read_header(struct pnm_reader *r)
{
    r->format = r->p[1] == '2' || r->p[1] == '5' ? "PGM" : "PPM";
    r->plain = r->p[1] == '2' || r->p[1] == '3';
    r->channels = r->format[1] == 'G' ? 1 : 3;
    r->p += 2;
    if (header_number(r, "width", &r->width) || header_number(r, "height", &r->height) ||
        header_number(r, "maxval", &r->maxval))
        return -1;
    if (r->maxval < 1 || r->maxval > PNM_MAX_MAXVAL)
        return snn_image_fail(r->in, "bad %s header: maxval %lu is out of range (1 to %d)", r->format, r->maxval,
                              PNM_MAX_MAXVAL);
    if (snn_image_check_size(r->in, r->width, r->height))
        return -1;
    if (r->plain)
        return 0;
    if (r->p == r->end)
        return snn_image_fail(r->in, "truncated %s: the file ends after the header", r->format);
    if (!is_space(*r->p))
        return snn_image_fail(r->in, "bad %s header: expected one whitespace byte after the maxval, at byte %zu",
                              r->format, offset(r));
    r->p++;
    size_t bytes = r->width * r->height * (size_t)r->channels * (r->maxval > 255 ? 2 : 1);
    size_t have = (size_t)(r->end - r->p);
    if (have < bytes)
        return snn_image_fail(r->in, "truncated %s: the raster has %zu of %zu bytes", r->format, have, bytes);
    return 0;
}

/* The next sample, saturated at PNM_MAX_MAXVAL + 1; sample is its index. */
static int next_sample(struct pnm_reader *r, size_t sample, unsigned long *v)
{
    if (!r->plain) { /* the length is checked */
        *v = r->p[0];
        if (r->maxval > 255)
            *v = *v << 8 | r->p[1];
        r->p += r->maxval > 255 ? 2 : 1;
        return 0;
    }
    char c[16];
    skip_blank(r, 1);
    if (r->p == r->end)
        return snn_image_fail(r->in, "truncated %s: the raster ends after %zu of %zu samples", r->format, sample,
                              r->width * r->height * (size_t)r->channels);
    if (!is_digit(*r->p))
        return snn_image_fail(r->in, "bad %s raster: expected a decimal sample at byte %zu, found %s", r->format,
                              offset(r), describe(*r->p, c));
    *v = read_digits(r);
    if (*v > PNM_MAX_MAXVAL)
        *v = PNM_MAX_MAXVAL + 1;
    return 0;
}

static int read_raster(struct pnm_reader *r, uint8_t *pixels, uint8_t *row)
{
    size_t w = r->width, ch = (size_t)r->channels;
    for (size_t y = 0; y < r->height; y++) {
        for (size_t i = 0; i < w * ch; i++) {
            unsigned long v = 0;
            if (next_sample(r, y * w * ch + i, &v))
                return -1;
            if (v > r->maxval && r->plain)
                return snn_image_fail(r->in, "sample %.*s%s at column %zu, row %zu exceeds the maxval %lu",
                                      token_width(r), (const char *)r->token, r->token_len > 20 ? "..." : "",
                                      i / ch, y, r->maxval);
            if (v > r->maxval)
                return snn_image_fail(r->in, "sample %lu at column %zu, row %zu exceeds the maxval %lu", v, i / ch,
                                      y, r->maxval);
            row[i] = (uint8_t)((v * 255 + r->maxval / 2) / r->maxval);
        }
        snn_gray_from_samples(row, r->channels, pixels + y * w, w);
    }
    skip_blank(r, r->plain);
    if (r->p != r->end)
        return snn_image_fail(r->in, "unexpected data after the image at byte %zu (one image per file is read)",
                              offset(r));
    return 0;
}

int snn_pnm_decode(const struct image_input *in, snn_gray_image *img)
{
    struct pnm_reader r = {.in = in, .p = in->data, .end = in->data + in->len};
    if (read_header(&r))
        return -1;
    uint8_t *pixels = malloc(r.width * r.height);
    uint8_t *row = malloc(r.width * (size_t)r.channels);
    int rc = 0;
    if (!pixels || !row)
        rc = snn_image_fail(in, "out of memory for a %lu x %lu image", r.width, r.height);
    else
        rc = read_raster(&r, pixels, row);
    free(row);
    if (rc) {
        free(pixels);
        return -1;
    }
    img->width = (int)r.width;
    img->height = (int)r.height;
    img->pixels = pixels;
    return 0;
}
