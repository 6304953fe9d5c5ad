/* Image files decoded to 8-bit grayscale: PNG (through libpng), PGM and PPM
 * (netpbm, binary and plain). The format is told by the first bytes, never
 * by the file name.
 *
 * Colour becomes gray by Rec. 601 luma on the samples as stored (gamma and
 * colour-space chunks are not applied); samples deeper than 8 bits are
 * scaled to 0..255 with rounding; alpha (and a PNG's transparent colour) is
 * composited over white, so a digit drawn on a transparent canvas reads as
 * ink on paper.
 *
 * Every function that can fail returns 0, or -1 with a one-line message in
 * err that starts with the file's name and says what is wrong. */
#ifndef SNN_IMAGE_H
#define SNN_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Larger images are refused before anything is allocated for them. */
#define SNN_IMAGE_MAX_SIDE 16384
#define SNN_IMAGE_MAX_PIXELS (64L << 20)
#define SNN_IMAGE_MAX_FILE_BYTES (1L << 30)

typedef struct {
    int width, height;
    uint8_t *pixels; /* row-major, width * height bytes, malloc'd */
} snn_gray_image;

/* Reads and decodes the file at path. */
int snn_image_load(const char *path, snn_gray_image *img, char *err, size_t errlen);

/* Decodes len bytes of a file; name starts the error messages. */
int snn_image_decode(const uint8_t *data, size_t len, const char *name, snn_gray_image *img, char *err,
                     size_t errlen);

/* Frees the pixels and zeroes img; safe on a zeroed or already freed image. */
void snn_image_free(snn_gray_image *img);

#endif
