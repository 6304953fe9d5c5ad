/* test_image_load [-w WIDTH] [-o DIR] IMAGE...: decodes each image and
 * makes it a 28 x 28 digit (with -w, then WIDTH pixels wide:
 * snn_digits_set_width). Prints "PATH: W x H" per image, then the digit as 28
 * lines of hex; with -o, instead of the hex, writes DIR/NAME.gray (the decoded
 * image as a binary PGM) and DIR/NAME.digit (the 784 bytes), NAME being the
 * image's file name. An image that fails prints "mnist: error: MESSAGE" on
 * stderr, as the program would, and the others go on; the exit status is 1
 * if any failed, 2 on a usage or output error. Driven by test_images.sh. */
#include "data/digit.h"
#include "data/image.h"
#include "snn_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

SNN_STATIC_ASSERT(SNN_DIGIT_PIXELS == SNN_INPUT_DIM, "a digit is one input of the model");

static int write_file(const char *dir, const char *path, const char *ext, const char *header, const uint8_t *data,
                      size_t len)
{
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char out[4096];
    if (snprintf(out, sizeof out, "%s/%s.%s", dir, name, ext) >= (int)sizeof out) {
        fprintf(stderr, "test_image_load: output path too long: %s/%s\n", dir, name);
        return -1;
    }
    FILE *f = fopen(out, "wb");
    int ok = f && fputs(header, f) >= 0 && fwrite(data, 1, len, f) == len;
    if (f && fclose(f))
        ok = 0;
    if (!ok)
        fprintf(stderr, "test_image_load: cannot write %s: %s\n", out, strerror(errno));
    return ok ? 0 : -1;
}

static void print_hex(const uint8_t digit[SNN_DIGIT_PIXELS])
{
    for (int y = 0; y < SNN_DIGIT_SIDE; y++) {
        for (int x = 0; x < SNN_DIGIT_SIDE; x++)
            printf("%02x", digit[y * SNN_DIGIT_SIDE + x]);
        putchar('\n');
    }
}

/* 0, 1 if the image failed, 2 if its outputs could not be written. */
static int convert(const char *path, const char *dir, int width)
{
    char err[1024], header[64];
    snn_gray_image img;
    uint8_t digit[SNN_DIGIT_PIXELS];
    if (snn_image_load(path, &img, err, sizeof err)) {
        fprintf(stderr, "mnist: error: %s\n", err);
        return 1;
    }
    printf("%s: %d x %d\n", path, img.width, img.height);
    snprintf(header, sizeof header, "P5\n%d %d\n255\n", img.width, img.height);
    int rc = 0;
    if (dir && write_file(dir, path, "gray", header, img.pixels, (size_t)img.width * (size_t)img.height))
        rc = 2;
    else if (snn_digit_from_image(&img, digit, err, sizeof err)) {
        fprintf(stderr, "mnist: error: %s: %s\n", path, err);
        rc = 1;
    } else {
        if (width)
            snn_digits_set_width(digit, 1, width);
        if (dir)
            rc = write_file(dir, path, "digit", "", digit, sizeof digit) ? 2 : 0;
        else
            print_hex(digit);
    }
    snn_image_free(&img);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int first = 1, status = 0, width = 0;
    if (argc > 2 && strcmp(argv[first], "-w") == 0) {
        char *end;
        width = (int)strtol(argv[first + 1], &end, 10);
        width = *end || end == argv[first + 1] || width < 1 ? -1 : width; /* refused below */
        first += 2;
    }
    if (argc > first + 1 && strcmp(argv[first], "-o") == 0) {
        dir = argv[first + 1];
        first += 2;
    }
    if (first >= argc || width < 0 || width > SNN_DIGIT_SIDE) {
        fprintf(stderr, "usage: %s [-w WIDTH (1-%d)] [-o DIR] IMAGE...\n", argv[0], SNN_DIGIT_SIDE);
        return 2;
    }
    for (int i = first; i < argc; i++) {
        int rc = convert(argv[i], dir, width);
        status = rc > status ? rc : status;
        fflush(stdout);
    }
    return status;
}
