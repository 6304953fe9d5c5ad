/* What data/image.c shares with the format decoders, image_png.c and
 * image_pnm.c. Not part of the image API. */
#ifndef SNN_IMAGE_CODEC_H
#define SNN_IMAGE_CODEC_H

#include "data/image.h"

/* One file's bytes and where its error message goes. */
struct image_input {
    const uint8_t *data;
    size_t len;
    const char *name;
    char *err;
    size_t errlen;
};

/* Each fills img (pixels malloc'd) and returns 0, or returns -1 with the
 * message and img untouched. */
int snn_png_decode(const struct image_input *in, snn_gray_image *img);
int snn_pnm_decode(const struct image_input *in, snn_gray_image *img);

/* Writes "NAME: " and the formatted text to in->err; returns -1. */
__attribute__((format(printf, 2, 3))) int snn_image_fail(const struct image_input *in, const char *fmt, ...);

/* 0 if an image of width x height is within the limits of image.h, else -1
 * with a message saying so. */
int snn_image_check_size(const struct image_input *in, unsigned long width, unsigned long height);

/* Rec. 601 luma, weights in 1/32768 summing to 32768, so that r = g = b
 * gives back that value exactly. */
#define SNN_LUMA_R 9798
#define SNN_LUMA_G 19235
#define SNN_LUMA_B 3735

/* n pixels of 8-bit samples to gray: channels is 1 (gray), 2 (gray, alpha),
 * 3 (RGB) or 4 (RGBA); alpha is composited over white. */
void snn_gray_from_samples(const uint8_t *src, int channels, uint8_t *dst, size_t n);

#endif
