/* Image files: reading, telling the format by its first bytes, the limits,
 * and the conversion to gray that every format shares. */
#include "data/image.h"

#include "data/image_codec.h"
#include "data/input.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int snn_image_fail(const struct image_input *in, const char *fmt, ...)
{
    int n = snprintf(in->err, in->errlen, "%s: ", in->name);
    if (n >= 0 && (size_t)n < in->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(in->err + n, in->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int snn_image_check_size(const struct image_input *in, unsigned long width, unsigned long height)
{
    if (width == 0 || height == 0)
        return snn_image_fail(in, "the image is %lu x %lu pixels: nothing to read", width, height);
    if (width > SNN_IMAGE_MAX_SIDE || height > SNN_IMAGE_MAX_SIDE ||
        (unsigned long long)width * height > (unsigned long long)SNN_IMAGE_MAX_PIXELS)
        return snn_image_fail(in, "the image is %lu x %lu pixels, too large (at most %d on a side and %ld pixels)",
                              width, height, SNN_IMAGE_MAX_SIDE, SNN_IMAGE_MAX_PIXELS);
    return 0;
}

void snn_gray_from_samples(const uint8_t *src, int channels, uint8_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++, src += channels) {
        unsigned v = src[0];
        if (channels >= 3)
            v = (SNN_LUMA_R * v + SNN_LUMA_G * src[1] + SNN_LUMA_B * src[2] + (1u << 14)) >> 15;
        if (channels == 2 || channels == 4) {
            unsigned a = src[channels - 1];
            v = (v * a + 255 * (255 - a) + 127) / 255;
        }
        dst[i] = (uint8_t)v;
    }
}

/* Formats we do not read, named so that the message can say what to convert. */
static const char *known_other_format(const uint8_t *d, size_t len)
{
    static const struct {
        size_t offset, len;
        const char *magic, *name;
    } formats[] = {
        {0, 3, "\xff\xd8\xff", "JPEG"}, {0, 4, "GIF8", "GIF"},     {0, 2, "BM", "BMP"},
        {0, 4, "II*\0", "TIFF"},        {0, 4, "MM\0*", "TIFF"},   {8, 4, "WEBP", "WebP"},
        {0, 2, "P1", "PBM"},            {0, 2, "P4", "PBM"},       {0, 2, "P7", "PAM"},
    };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (len >= formats[i].offset + formats[i].len &&
            memcmp(d + formats[i].offset, formats[i].magic, formats[i].len) == 0)
            return formats[i].name;
    return NULL;
}

int snn_image_decode(const uint8_t *data, size_t len, const char *name, snn_gray_image *img, char *err,
                     size_t errlen)
{
    const struct image_input in = {data, len, name, err, errlen};
    *img = (snn_gray_image){0};
    if (len == 0)
        return snn_image_fail(&in, "empty file");
    /* The rest of the signature is libpng's to check, and to report. */
    if (len >= 4 && memcmp(data, "\x89PNG", 4) == 0)
        return snn_png_decode(&in, img);
    if (len >= 2 && data[0] == 'P' && data[1] && strchr("2356", data[1]))
        return snn_pnm_decode(&in, img);
    const char *other = known_other_format(data, len);
    if (other)
        return snn_image_fail(&in, "not a PNG, PGM or PPM image (it looks like %s; convert it to PNG)", other);
    return snn_image_fail(&in, "not a PNG, PGM or PPM image");
}

/* The whole file, read through a pipe or device as well as a regular file. */
static int read_file(const struct image_input *in, uint8_t **data, size_t *len)
{
    struct stat st;
    int fd = snn_input_open(in->name, &st, in->err, in->errlen);
    if (fd < 0)
        return -1;
    size_t cap = 1u << 16, n = 0, got;
    if (S_ISREG(st.st_mode)) {
        if (st.st_size > SNN_IMAGE_MAX_FILE_BYTES) {
            close(fd);
            return snn_image_fail(in, "the file is %lld bytes, too large for an image (at most %ld)",
                                  (long long)st.st_size, SNN_IMAGE_MAX_FILE_BYTES);
        }
        cap = (size_t)st.st_size + 1; /* one more, to see the end without growing */
    }
    uint8_t *buf = malloc(cap);
    int rc = buf ? 0 : snn_image_fail(in, "out of memory reading %zu bytes", cap);
    while (!rc) {
        if (n == cap) {
            if (cap > SNN_IMAGE_MAX_FILE_BYTES) {
                rc = snn_image_fail(in, "the file is over %ld bytes, too large for an image",
                                    SNN_IMAGE_MAX_FILE_BYTES);
                break;
            }
            size_t grown = cap * 2 > SNN_IMAGE_MAX_FILE_BYTES ? SNN_IMAGE_MAX_FILE_BYTES + 1 : cap * 2;
            uint8_t *p = realloc(buf, grown);
            if (!p) {
                rc = snn_image_fail(in, "out of memory reading %zu bytes", grown);
                break;
            }
            buf = p;
            cap = grown;
        }
        int e = snn_input_read(fd, buf + n, cap - n, &got);
        if (e) {
            rc = snn_image_fail(in, "read error: %s", strerror(e));
            break;
        }
        n += got;
        if (n < cap)
            break; /* short only at the end of the file */
    }
    close(fd);
    if (!rc && n == 0)
        rc = snn_image_fail(in, "empty file%s", snn_input_empty_hint(&st));
    if (rc) {
        free(buf);
        return -1;
    }
    *data = buf;
    *len = n;
    return 0;
}

int snn_image_load(const char *path, snn_gray_image *img, char *err, size_t errlen)
{
    const struct image_input in = {NULL, 0, path, err, errlen};
    uint8_t *data = NULL;
    size_t len = 0;
    *img = (snn_gray_image){0};
    if (read_file(&in, &data, &len))
        return -1;
    int rc = snn_image_decode(data, len, path, img, err, errlen);
    free(data);
    return rc;
}

void snn_image_free(snn_gray_image *img)
{
    free(img->pixels);
    *img = (snn_gray_image){0};
}
