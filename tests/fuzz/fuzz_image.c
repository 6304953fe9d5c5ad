/* libFuzzer target for the image decoders and the digit recipe (data/image*.c,
 * data/digit.c), built with ASan and UBSan by tests/host/test_fuzz.sh. Each
 * input is decoded from memory as a file would be; an image that decodes
 * goes on through snn_digit_from_image. libpng and zlib are not
 * instrumented: libFuzzer sees only our side of a PNG, so most mutations of
 * one stop at a CRC check in libpng, while PGM and PPM are explored whole.
 * Bad input must only ever give -1 and a one-line message that starts with
 * the name; anything else aborts, as a sanitizer report does. */
#include "data/digit.h"
#include "data/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_message(const char *err, const char *prefix)
{
    if (strncmp(err, prefix, strlen(prefix)) != 0 || strchr(err, '\n') || strlen(err) <= strlen(prefix)) {
        fprintf(stderr, "fuzz_image: bad error message: \"%s\"\n", err);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    snn_gray_image img;
    uint8_t digit[SNN_DIGIT_PIXELS];
    if (snn_image_decode(data, size, "input", &img, err, sizeof err)) {
        check_message(err, "input: ");
        return 0;
    }
    if (img.width < 1 || img.height < 1 || img.width > SNN_IMAGE_MAX_SIDE || img.height > SNN_IMAGE_MAX_SIDE ||
        !img.pixels) {
        fprintf(stderr, "fuzz_image: decoded a %d x %d image\n", img.width, img.height);
        abort();
    }
    if (snn_digit_from_image(&img, digit, err, sizeof err))
        check_message(err, "no digit found (");
    snn_image_free(&img);
    return 0;
}
