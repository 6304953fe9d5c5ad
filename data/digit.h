/* Any gray image made into the model's input the way MNIST's digits were
 * made (LeCun, Cortes and Burges): white ink on black, the ink's bounding
 * box scaled with area averaging so that its longer side is 20 pixels,
 * placed in a 28 x 28 field with its centre of mass at pixel (14, 14)
 * (pixel indices; rounded half down and clamped so that nothing is cut).
 *
 * Before that, the image is brought to MNIST's levels. The border (the
 * outermost rows and columns) decides the polarity: a light border (mean
 * above 127) means dark ink on light paper, and the image is inverted
 * (255 - v, exactly). The border's median is the background: it becomes 0,
 * and the strongest ink 255, linearly, so that pencil on gray paper looks
 * like MNIST's ink. The ink's bounding box is that of the pixels above
 * SNN_DIGIT_INK_THRESHOLD on this scale, so that faint specks and noise do
 * not widen it. */
#ifndef SNN_DIGIT_H
#define SNN_DIGIT_H

#include "data/image.h"

#include <stddef.h>
#include <stdint.h>

#define SNN_DIGIT_SIDE 28
#define SNN_DIGIT_PIXELS (SNN_DIGIT_SIDE * SNN_DIGIT_SIDE)
#define SNN_DIGIT_BOX 20 /* the longer side of the scaled ink */
#define SNN_DIGIT_CENTRE 14 /* where the centre of mass goes, in pixel indices as MNIST's */
#define SNN_DIGIT_INK_THRESHOLD 32 /* of 255, after the levels: what counts for the bounding box */
#define SNN_DIGIT_MIN_CONTRAST 32  /* of 255: the strongest ink must differ this much from the background */

/* Writes 28 x 28 bytes, row-major, white digit on black, to out; returns 0,
 * or -1 with a one-line message in err: "no digit found (why)", or an image
 * larger than image.h's limits. */
int snn_digit_from_image(const snn_gray_image *img, uint8_t out[SNN_DIGIT_PIXELS], char *err, size_t errlen);

/* Width normalisation, as in Ciresan, Meier, Gambardella and Schmidhuber's
 * committees (2011, 2012), whose members each see the digits at another
 * width. Each of count digits (28 x 28 bytes, one after another) has its
 * columns scaled by area averaging, as above, so that the box of its
 * nonzero pixels is `width` (1 to 28) pixels wide; its rows stay as they
 * are. The box's first column moves right by half of (old width - width),
 * rounded up, so that its centre stays or moves half a pixel right; what
 * falls outside the 28 columns is cut. A blank digit stays blank. */
void snn_digits_set_width(uint8_t *digits, size_t count, int width);

#endif
