/* An image to a 28 x 28 MNIST-style digit (see digit.h). Integer arithmetic
 * throughout: the same pixels give the same bytes on every machine, and an
 * inverted image gives exactly what its original gives. */
#include "data/digit.h"

#include <stdio.h>
#include <string.h>

/* Pixel value -> MNIST level (0 background, 255 the strongest ink). */
struct levels {
    uint8_t lut[256];
};

struct box {
    size_t x, y, w, h;
};

/* The histogram of the outermost rows and columns, each pixel counted once. */
static void border_histogram(const snn_gray_image *img, uint64_t hist[256])
{
    size_t w = (size_t)img->width, h = (size_t)img->height;
    const uint8_t *px = img->pixels;
    memset(hist, 0, 256 * sizeof hist[0]);
    for (size_t x = 0; x < w; x++) {
        hist[px[x]]++;
        if (h > 1)
            hist[px[(h - 1) * w + x]]++;
    }
    for (size_t y = 1; y + 1 < h; y++) {
        hist[px[y * w]]++;
        if (w > 1)
            hist[px[y * w + w - 1]]++;
    }
}

static int no_digit(char *err, size_t errlen, const char *why)
{
    snprintf(err, errlen, "no digit found (%s)", why);
    return -1;
}

static int find_levels(const snn_gray_image *img, struct levels *lv, char *err, size_t errlen)
{
    uint64_t hist[256], sum = 0, count = 0;
    border_histogram(img, hist);
    for (unsigned v = 0; v < 256; v++) {
        sum += hist[v] * v;
        count += hist[v];
    }
    unsigned invert = sum > 127 * count ? 255 : 0; /* ink = v ^ invert = 255 - v when inverted */

    /* The border's lower median, in ink. */
    uint64_t seen = 0;
    unsigned background = 0;
    while (1) {
        seen += hist[background ^ invert];
        if (2 * seen >= count)
            break;
        background++;
    }

    uint8_t lo = 255, hi = 0;
    size_t n = (size_t)img->width * (size_t)img->height;
    for (size_t i = 0; i < n; i++) {
        lo = img->pixels[i] < lo ? img->pixels[i] : lo;
        hi = img->pixels[i] > hi ? img->pixels[i] : hi;
    }
    if (lo == hi)
        return no_digit(err, errlen, "the image is uniform");
    unsigned peak = invert ? 255u - lo : hi;
    unsigned contrast = peak - background;
    if (contrast < SNN_DIGIT_MIN_CONTRAST) {
        snprintf(err, errlen, "no digit found (the strongest ink is %u levels from the background, %d needed)",
                 contrast, SNN_DIGIT_MIN_CONTRAST);
        return -1;
    }
    for (unsigned v = 0; v < 256; v++) {
        unsigned ink = v ^ invert;
        unsigned level = ink <= background ? 0 : ((ink - background) * 255 + contrast / 2) / contrast;
        lv->lut[v] = (uint8_t)(level > 255 ? 255 : level);
    }
    return 0;
}

/* Whether any pixel of the w x h rectangle at (x, y) has a level above 0. */
static int any_ink(const snn_gray_image *img, const struct levels *lv, size_t x, size_t y, size_t w, size_t h)
{
    for (size_t j = y; j < y + h; j++)
        for (size_t i = x; i < x + w; i++)
            if (lv->lut[img->pixels[j * (size_t)img->width + i]])
                return 1;
    return 0;
}

/* The bounding box of the pixels above the ink threshold (there is one:
 * the peak's level is 255), widened on each side while the row or column
 * just outside holds any ink, by up to one output pixel's worth of source
 * pixels: that takes in the anti-aliased fringe that the threshold cuts,
 * at any resolution, but not the noise further out. */
static struct box ink_box(const snn_gray_image *img, const struct levels *lv)
{
    size_t w = (size_t)img->width, h = (size_t)img->height;
    size_t x0 = w, x1 = 0, y0 = h, y1 = 0;
    for (size_t y = 0; y < h; y++) {
        const uint8_t *row = img->pixels + y * w;
        for (size_t x = 0; x < w; x++)
            if (lv->lut[row[x]] > SNN_DIGIT_INK_THRESHOLD) {
                x0 = x < x0 ? x : x0;
                x1 = x > x1 ? x : x1;
                y0 = y < y0 ? y : y0;
                y1 = y;
            }
    }
    size_t longer = x1 - x0 > y1 - y0 ? x1 - x0 + 1 : y1 - y0 + 1;
    size_t fringe = (longer + SNN_DIGIT_BOX - 1) / SNN_DIGIT_BOX;
    for (size_t i = 0; i < fringe && x0 > 0 && any_ink(img, lv, x0 - 1, y0, 1, y1 - y0 + 1); i++)
        x0--;
    for (size_t i = 0; i < fringe && x1 + 1 < w && any_ink(img, lv, x1 + 1, y0, 1, y1 - y0 + 1); i++)
        x1++;
    for (size_t i = 0; i < fringe && y0 > 0 && any_ink(img, lv, x0, y0 - 1, x1 - x0 + 1, 1); i++)
        y0--;
    for (size_t i = 0; i < fringe && y1 + 1 < h && any_ink(img, lv, x0, y1 + 1, x1 - x0 + 1, 1); i++)
        y1++;
    return (struct box){x0, y0, x1 - x0 + 1, y1 - y0 + 1};
}

/* n source pixels onto m: in units where a source pixel is m long and a
 * destination pixel n long, both span n * m. */
static size_t overlap(size_t src, size_t dst, size_t n, size_t m)
{
    size_t lo = src * m > dst * n ? src * m : dst * n;
    size_t hi = (src + 1) * m < (dst + 1) * n ? (src + 1) * m : (dst + 1) * n;
    return hi > lo ? hi - lo : 0;
}

/* The box's levels scaled to out_w x out_h by area averaging: each output
 * pixel is the mean of the source area it covers, partial pixels weighted
 * by the part covered, upscaling as downscaling. */
static void scale_box(const snn_gray_image *img, const struct levels *lv, struct box b, size_t out_w, size_t out_h,
                      uint8_t out[SNN_DIGIT_BOX][SNN_DIGIT_BOX])
{
    uint64_t area = (uint64_t)b.w * b.h; /* of one output pixel, in units */
    for (size_t k = 0; k < out_h; k++) {
        uint64_t acc[SNN_DIGIT_BOX] = {0};
        for (size_t y = k * b.h / out_h; y * out_h < (k + 1) * b.h; y++) {
            const uint8_t *row = img->pixels + (b.y + y) * (size_t)img->width + b.x;
            uint64_t wy = overlap(y, k, b.h, out_h);
            for (size_t j = 0; j < out_w; j++) {
                uint64_t s = 0;
                for (size_t x = j * b.w / out_w; x * out_w < (j + 1) * b.w; x++)
                    s += overlap(x, j, b.w, out_w) * lv->lut[row[x]];
                acc[j] += wy * s;
            }
        }
        for (size_t j = 0; j < out_w; j++)
            out[k][j] = (uint8_t)((acc[j] + area / 2) / area);
    }
}

static int64_t ceil_div(int64_t a, int64_t b) /* b > 0 */
{
    return a / b + (a % b > 0);
}

/* Where the block's first pixel goes on one axis so that its centre of mass
 * (moment / mass, in block pixel indices) lands on SNN_DIGIT_CENTRE: rounded
 * half down, as MNIST's own ties are (the three of its 70000 digits whose
 * centre falls half a pixel off all have it at 13.5, none at 14.5), and
 * clamped so that all of the block stays in the field. */
static size_t place(int64_t moment, int64_t mass, size_t len)
{
    int64_t at = ceil_div(2 * (SNN_DIGIT_CENTRE * mass - moment) - mass, 2 * mass);
    int64_t last = SNN_DIGIT_SIDE - (int64_t)len;
    return (size_t)(at < 0 ? 0 : at > last ? last : at);
}

int snn_digit_from_image(const snn_gray_image *img, uint8_t out[SNN_DIGIT_PIXELS], char *err, size_t errlen)
{
    struct levels lv;
    if (img->width < 1 || img->height < 1 || !img->pixels)
        return no_digit(err, errlen, "the image is empty");
    /* Beyond the decoders' limits the sums of scale_box could overflow. */
    if (img->width > SNN_IMAGE_MAX_SIDE || img->height > SNN_IMAGE_MAX_SIDE ||
        (int64_t)img->width * img->height > SNN_IMAGE_MAX_PIXELS) {
        snprintf(err, errlen, "the image is %d x %d pixels, more than an image may have (see image.h)", img->width,
                 img->height);
        return -1;
    }
    if (find_levels(img, &lv, err, errlen))
        return -1;
    struct box b = ink_box(img, &lv);
    size_t longer = b.w > b.h ? b.w : b.h;
    size_t out_w = (2 * b.w * SNN_DIGIT_BOX + longer) / (2 * longer); /* rounded; the longer side gives 20 */
    size_t out_h = (2 * b.h * SNN_DIGIT_BOX + longer) / (2 * longer);
    out_w = out_w ? out_w : 1;
    out_h = out_h ? out_h : 1;
    uint8_t scaled[SNN_DIGIT_BOX][SNN_DIGIT_BOX];
    scale_box(img, &lv, b, out_w, out_h, scaled);

    int64_t mass = 0, mx = 0, my = 0;
    for (size_t k = 0; k < out_h; k++)
        for (size_t j = 0; j < out_w; j++) {
            mass += scaled[k][j];
            mx += (int64_t)j * scaled[k][j];
            my += (int64_t)k * scaled[k][j];
        }
    if (mass == 0) {
        snprintf(err, errlen, "no digit found (the ink of the %zu x %zu box is too thin to show at %zu x %zu)", b.w,
                 b.h, out_w, out_h);
        return -1;
    }
    size_t x0 = place(mx, mass, out_w), y0 = place(my, mass, out_h);
    memset(out, 0, SNN_DIGIT_PIXELS);
    for (size_t k = 0; k < out_h; k++)
        memcpy(out + (y0 + k) * SNN_DIGIT_SIDE + x0, scaled[k], out_w);
    return 0;
}

/* One digit of snn_digits_set_width. */
static void set_width(uint8_t digit[SNN_DIGIT_PIXELS], int width)
{
    size_t x0 = SNN_DIGIT_SIDE, x1 = 0;
    for (size_t i = 0; i < SNN_DIGIT_PIXELS; i++)
        if (digit[i]) {
            x0 = i % SNN_DIGIT_SIDE < x0 ? i % SNN_DIGIT_SIDE : x0;
            x1 = i % SNN_DIGIT_SIDE > x1 ? i % SNN_DIGIT_SIDE : x1;
        }
    if (x0 > x1)
        return;
    const size_t w = x1 - x0 + 1, out_w = (size_t)width;
    const int64_t at = (int64_t)x0 + ceil_div((int64_t)w - width, 2);
    for (size_t k = 0; k < SNN_DIGIT_SIDE; k++) {
        uint8_t *row = digit + k * SNN_DIGIT_SIDE, src[SNN_DIGIT_SIDE];
        memcpy(src, row, SNN_DIGIT_SIDE);
        memset(row, 0, SNN_DIGIT_SIDE);
        for (size_t j = 0; j < out_w; j++) {
            if (at + (int64_t)j < 0 || at + (int64_t)j >= SNN_DIGIT_SIDE)
                continue;
            uint64_t s = 0; /* in units where a source pixel is out_w long and an output pixel w */
            for (size_t x = j * w / out_w; x * out_w < (j + 1) * w; x++)
                s += overlap(x, j, w, out_w) * src[x0 + x];
            row[at + (int64_t)j] = (uint8_t)((s + w / 2) / w);
        }
    }
}

void snn_digits_set_width(uint8_t *digits, size_t count, int width)
{
    for (size_t i = 0; i < count; i++)
        set_width(digits + i * SNN_DIGIT_PIXELS, width);
}
