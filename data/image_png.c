/* PNG through libpng, from memory.
 *
 * libpng reports an error by calling a handler of ours, which keeps the
 * message and longjmps back to the one setjmp, in read_png; warnings are
 * kept, never printed, except those about the image data (below), which
 * are errors. libpng's transformations bring every colour type
 * and bit depth to 8-bit gray, gray + alpha, RGB or RGBA (palette expanded,
 * 1/2/4-bit gray widened, the tRNS colour made alpha, 16 bits scaled with
 * rounding, Adam7 passes combined); snn_gray_from_samples makes gray and
 * composites the alpha as for every format. libpng's own rgb_to_gray and
 * background would work in linear light whenever a gAMA chunk is present:
 * the same pixels would give another gray depending on a chunk the drawing
 * program chose to write. */
#include "data/image_codec.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct png_reader {
    const struct image_input *in;
    png_structp png;
    png_infop info;
    size_t pos; /* bytes handed to libpng so far */
    png_uint_32 width, height;
    uint8_t *pixels;  /* the gray image */
    uint8_t *samples; /* libpng's rows: one, or all of them when interlaced */
    png_bytep *rows;  /* interlaced: each row's start in samples */
    int rows_read;    /* every row is read, and so the zlib stream has ended */
    /* Why reading stopped, when it did not finish. */
    int too_large;               /* the message is written */
    size_t idat_after;           /* the offset of an IDAT chunk after the zlib stream's end */
    size_t no_memory;            /* bytes that could not be allocated */
    int ran_out;                 /* the data ended where libpng wanted more */
    png_uint_32 io_state, chunk; /* where libpng was reading then */
    char error[160], warning[160];
};

static void on_error(png_structp png, png_const_charp msg)
{
    struct png_reader *r = png_get_error_ptr(png);
    snprintf(r->error, sizeof r->error, "%s", msg);
    png_longjmp(png, 1);
}

#define CHUNK_IDAT 0x49444154u /* "IDAT"; libpng's png_IDAT is private */

/* libpng finds some damage to the image data only after the last row, and
 * calls it a warning (a "benign error"): a zlib stream whose Adler-32
 * fails when that checksum lies in a later IDAT chunk, data past the
 * image's end ("Too much image data", "Extra compressed data"), an IDAT
 * chunk after another chunk. Any warning raised in IDAT is an error here;
 * those about ancillary chunks (a tEXt's CRC, say) stay warnings. */
static void on_warning(png_structp png, png_const_charp msg)
{
    struct png_reader *r = png_get_error_ptr(png);
    if (png_get_io_chunk_type(png) == CHUNK_IDAT)
        png_error(png, msg);
    snprintf(r->warning, sizeof r->warning, "%s", msg);
}

/* libpng skips, unread, IDAT chunks after the zlib stream has ended:
 * data past the image's end, as "Extra compressed data" in the last
 * one is. */
static void check_chunk_header(struct png_reader *r, const png_byte header[8])
{
    if (r->rows_read && memcmp(header + 4, "IDAT", 4) == 0 && png_get_uint_32(header) > 0) {
        r->idat_after = r->pos - 8;
        png_error(r->png, "IDAT after the image data");
    }
}

static void read_data(png_structp png, png_bytep dst, size_t n)
{
    struct png_reader *r = png_get_io_ptr(png);
    if (n > r->in->len - r->pos) {
        r->ran_out = 1;
        r->io_state = png_get_io_state(png);
        r->chunk = png_get_io_chunk_type(png);
        png_error(png, "the data ends early");
    }
    memcpy(dst, r->in->data + r->pos, n);
    r->pos += n;
    if (n == 8 && (png_get_io_state(png) & PNG_IO_MASK_LOC) == PNG_IO_CHUNK_HDR)
        check_chunk_header(r, dst);
}

/* 8 bits per sample, alpha from tRNS; the channels stay as they are. */
static void request_8bit(png_structp png, png_infop info)
{
    png_byte type = png_get_color_type(png, info);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_tRNS_to_alpha(png);
    if (png_get_bit_depth(png, info) == 16)
        png_set_scale_16(png);
}

static void *reader_alloc(struct png_reader *r, size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        r->no_memory = bytes;
        png_error(r->png, "out of memory");
    }
    return p;
}

/* Called after read_png's setjmp; a libpng error longjmps back there. */
static void read_pixels(struct png_reader *r)
{
    png_read_info(r->png, r->info);
    r->width = png_get_image_width(r->png, r->info);
    r->height = png_get_image_height(r->png, r->info);
    if (snn_image_check_size(r->in, r->width, r->height)) {
        r->too_large = 1;
        png_error(r->png, "too large");
    }
    request_8bit(r->png, r->info);
    int passes = png_set_interlace_handling(r->png);
    png_read_update_info(r->png, r->info);
    int channels = png_get_channels(r->png, r->info);
    size_t w = r->width, h = r->height, rowbytes = png_get_rowbytes(r->png, r->info);
    if (png_get_bit_depth(r->png, r->info) != 8 || channels < 1 || channels > 4 || rowbytes != w * (size_t)channels)
        png_error(r->png, "unexpected sample layout after the transformations");

    r->pixels = reader_alloc(r, w * h);
    if (passes == 1) {
        r->samples = reader_alloc(r, rowbytes);
        for (size_t y = 0; y < h; y++) {
            png_read_row(r->png, r->samples, NULL);
            snn_gray_from_samples(r->samples, channels, r->pixels + y * w, w);
        }
    } else { /* each Adam7 pass adds to rows of the previous ones */
        r->samples = reader_alloc(r, rowbytes * h);
        r->rows = reader_alloc(r, h * sizeof *r->rows);
        for (size_t y = 0; y < h; y++)
            r->rows[y] = r->samples + y * rowbytes;
        png_read_image(r->png, r->rows);
        for (size_t y = 0; y < h; y++)
            snn_gray_from_samples(r->rows[y], channels, r->pixels + y * w, w);
    }
    r->rows_read = 1; /* the last row's read has finished the zlib stream, its Adler-32 checked */
    png_read_end(r->png, NULL); /* the chunks after the image, their CRCs, IEND */
}

static int read_png(struct png_reader *r)
{
    if (setjmp(png_jmpbuf(r->png)))
        return -1;
    png_set_read_fn(r->png, r, read_data);
    /* Checked by default; said here, since a wrong Adler-32 is refused. The
     * last argument is a boolean (PNG_OPTION_OFF, 2, would turn the option
     * on); it returns the previous setting, or INVALID for an unknown
     * option, which this one is not. */
    png_set_option(r->png, PNG_IGNORE_ADLER32, 0);
    /* libpng's default limit (a million pixels a side) would pass images
     * that ours refuses with a message of its own. */
    png_set_user_limits(r->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    /* libpng reads a text, profile or palette-suggestion chunk whole, as
     * long as its length field says: a 121-byte file whose tEXt claims
     * 1.9 GB made it allocate that much (found by the image fuzzer). None of
     * them matters to a digit: skipped unread, as unknown chunks are. */
    static const png_byte unread[] = "tEXt\0zTXt\0iTXt\0iCCP\0sPLT\0eXIf";
    png_set_keep_unknown_chunks(r->png, PNG_HANDLE_CHUNK_NEVER, unread, (int)(sizeof(unread) / 5));
    read_pixels(r);
    return 0;
}

/* "the IDAT chunk", or "a chunk" when the type is not four letters. */
static const char *chunk_words(png_uint_32 type, char words[24])
{
    char name[5];
    for (int i = 0; i < 4; i++) {
        name[i] = (char)(type >> (24 - 8 * i) & 0xff);
        if (!((name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= 'a' && name[i] <= 'z')))
            return "a chunk";
    }
    name[4] = 0;
    snprintf(words, 24, "the %s chunk", name);
    return words;
}

static int ran_out_error(const struct png_reader *r)
{
    char words[24];
    const char *chunk = chunk_words(r->chunk, words);
    size_t len = r->in->len;
    switch (r->io_state & PNG_IO_MASK_LOC) {
    case PNG_IO_SIGNATURE:
        return snn_image_fail(r->in, "truncated PNG: the data ends inside the signature (%zu bytes)", len);
    case PNG_IO_CHUNK_DATA:
        return snn_image_fail(r->in, "truncated PNG: the data ends inside %s (%zu bytes)", chunk, len);
    case PNG_IO_CHUNK_CRC:
        return snn_image_fail(r->in, "truncated PNG: the data ends inside the CRC of %s (%zu bytes)", chunk, len);
    default:
        return snn_image_fail(r->in, "truncated PNG: the data ends before the IEND chunk (%zu bytes)", len);
    }
}

static int read_error(const struct png_reader *r)
{
    if (r->too_large)
        return -1;
    if (r->no_memory)
        return snn_image_fail(r->in, "out of memory allocating %zu bytes for a %lu x %lu image", r->no_memory,
                              (unsigned long)r->width, (unsigned long)r->height);
    if (r->ran_out)
        return ran_out_error(r);
    if (r->idat_after)
        return snn_image_fail(r->in, "corrupt PNG: an IDAT chunk at byte %zu, after the end of the image data",
                              r->idat_after);
    /* libpng says what is wrong with IHDR in a warning, then fails. */
    if (strcmp(r->error, "Invalid IHDR data") == 0 && r->warning[0])
        return snn_image_fail(r->in, "corrupt PNG (libpng: %s: %s)", r->error, r->warning);
    return snn_image_fail(r->in, "corrupt PNG (libpng: %s)", r->error);
}

int snn_png_decode(const struct image_input *in, snn_gray_image *img)
{
    struct png_reader r = {.in = in};
    int rc;
    r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, on_error, on_warning);
    if (r.png)
        r.info = png_create_info_struct(r.png);
    if (!r.info)
        rc = snn_image_fail(in, "cannot start libpng %s (out of memory or a library version mismatch%s%s)",
                            PNG_LIBPNG_VER_STRING, r.warning[0] ? ": " : "", r.warning);
    else if (read_png(&r))
        rc = read_error(&r);
    else
        rc = 0;
    png_destroy_read_struct(&r.png, &r.info, NULL);
    free(r.samples);
    free(r.rows);
    if (rc) {
        free(r.pixels);
        return -1;
    }
    img->width = (int)r.width;
    img->height = (int)r.height;
    img->pixels = r.pixels;
    return 0;
}
