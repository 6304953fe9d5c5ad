/* The training step's counter-based draws (kernels/noise.h): Philox4x32-10 against Random123's known
 * answers; augmentation's translations (their range and spread, determinism for a key, the gathered image
 * against a plain two-dimensional shift); dropout's mask (its rate, the survivors' scale, determinism, a
 * fresh mask per step and layer). The cases of a symbol the build leaves at 0 are skipped, saying so. One
 * line per case: "ok - <name>", "not ok - <name>: <why>" or "skip - <name>: <why>". */
#include "kernels/ops.h"
#include "snn_check.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void report(const char *name, const char *why)
{
    if (why[0])
        printf("not ok - noise: %s: %s\n", name, why);
    else
        printf("ok - noise: %s\n", name);
}

/* A case of a symbol the build leaves at 0 (off true): says so, skipped. */
static int skipped(const char *name, int off, const char *symbol)
{
    if (off)
        printf("skip - noise: %s: %s is 0\n", name, symbol);
    return off;
}

/* Random123's kat_vectors for philox4x32_10: counter, key, answer. */
static void check_philox(void)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
         0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
         0x5001e420, 0x24126ea1},
    };
    char why[256] = "";
    for (int i = 0; i < 3; i++) {
        const uint32_t *k = kat[i];
        snn_philox_out r = snn_philox(k[0], k[1], k[2], k[3], k[4], k[5]);
        if (memcmp(r.v, k + 6, sizeof(r.v)))
            set_why(why, "vector %d: %08x %08x %08x %08x, expected %08x %08x %08x %08x", i, r.v[0], r.v[1],
                    r.v[2], r.v[3], k[6], k[7], k[8], k[9]);
    }
    report("Philox4x32-10 gives Random123's known answers", why);
}

/* ---- augmentation ------------------------------------------------------------- */

#define DRAWS 20000

static void check_shift_draws(void)
{
    const char *name = "translations: every offset in [-S, S] drawn, evenly; the same key, the same draws";
    char why[256] = "";
    if (skipped(name, SNN_AUGMENT_SHIFT == 0, "CONFIG_TRAIN_AUGMENT_SHIFT"))
        return;
    const uint32_t key[2] = {7, 0}, other[2] = {8, 0};
    enum { SPAN = 2 * SNN_AUGMENT_SHIFT + 1 };
    long count[2][SPAN] = {{0}};
    int same_other = 0, same_epoch = 0;
    for (int i = 0; i < DRAWS; i++) {
        snn_shift s = snn_shift_of(key, 1, i / 100, i % 100), t = snn_shift_of(key, 1, i / 100, i % 100);
        if (s.dx != t.dx || s.dy != t.dy)
            set_why(why, "draw %d differs on a second call", i);
        if (abs(s.dx) > SNN_AUGMENT_SHIFT || abs(s.dy) > SNN_AUGMENT_SHIFT) {
            set_why(why, "draw %d is (%d, %d), beyond %d", i, s.dx, s.dy, SNN_AUGMENT_SHIFT);
            continue;
        }
        count[0][s.dx + SNN_AUGMENT_SHIFT]++;
        count[1][s.dy + SNN_AUGMENT_SHIFT]++;
        snn_shift o = snn_shift_of(other, 1, i / 100, i % 100), e = snn_shift_of(key, 2, i / 100, i % 100);
        same_other += o.dx == s.dx && o.dy == s.dy;
        same_epoch += e.dx == s.dx && e.dy == s.dy;
    }
    const double want = (double)DRAWS / SPAN, sigma = sqrt(want * (1.0 - 1.0 / SPAN));
    for (int axis = 0; axis < 2; axis++)
        for (int v = 0; v < SPAN; v++)
            if (fabs(count[axis][v] - want) > 5 * sigma)
                set_why(why, "%s = %d drawn %ld times in %d, expected %.0f +- %.0f", axis ? "dy" : "dx",
                        v - SNN_AUGMENT_SHIFT, count[axis][v], DRAWS, want, 5 * sigma);
    /* another key or epoch: independent draws, which agree on both offsets 1 / SPAN^2 of the time */
    const double agree = (double)DRAWS / (SPAN * SPAN), slack = 5 * sqrt(agree) + 5;
    if (fabs(same_other - agree) > slack || fabs(same_epoch - agree) > slack)
        set_why(why, "another key agrees on %d draws, another epoch on %d; independent draws agree on %.0f",
                same_other, same_epoch, agree);
    report(name, why);
}

/* The gathered batch of a training step against each image moved by its row's draw with plain loops. */
static void check_shifted_gather(void)
{
    const char *name = "augmented gather: each row the image moved by its draw, the background filling in";
    char why[256] = "";
    if (skipped(name, SNN_AUGMENT_SHIFT == 0, "CONFIG_TRAIN_AUGMENT_SHIFT"))
        return;
    enum { ROWS = 37, IMAGES = 80 };
    const int32_t step = 1;
    int32_t epoch = 4, order[IMAGES];
    uint8_t *images = snn_xmalloc((size_t)IMAGES * SNN_INPUT_DIM, "images"), labels[IMAGES], y[ROWS];
    for (long i = 0; i < (long)IMAGES * SNN_INPUT_DIM; i++)
        images[i] = (uint8_t)(1 + rng_next() % 255); /* never the background: a moved-in 0 shows */
    for (int i = 0; i < IMAGES; i++)
        order[i] = (i * 31) % IMAGES, labels[i] = (uint8_t)(i % SNN_CLASSES);
    float *x = snn_xmalloc((size_t)ROWS * SNN_INPUT_DIM * sizeof(float), "batch");
    const snn_noise noise = snn_noise_of_seed(0x123456789ull, &epoch);
    host_gather_batch(x, NULL, y, images, labels, order, &step, ROWS, 0.0f, 1.0f, noise, 0, NULL);
    int moved = 0;
    for (int i = 0; i < ROWS; i++) {
        const uint8_t *px = images + (long)order[step * ROWS + i] * SNN_INPUT_DIM;
        const snn_shift s = snn_shift_of(noise.key, epoch, step, i);
        moved += s.dx || s.dy;
        for (int r = 0; r < SNN_IMAGE_ROWS; r++)
            for (int c = 0; c < SNN_IMAGE_COLS; c++) {
                const int fr = r - s.dy, fc = c - s.dx;
                const int inside = fr >= 0 && fr < SNN_IMAGE_ROWS && fc >= 0 && fc < SNN_IMAGE_COLS;
                const float want = inside ? px[fr * SNN_IMAGE_COLS + fc] / 255.0f : 0.0f;
                if (x[(long)i * SNN_INPUT_DIM + r * SNN_IMAGE_COLS + c] != want)
                    set_why(why, "row %d pixel (%d, %d) moved by (%d, %d): %g, expected %g", i, r, c, s.dx, s.dy,
                            x[(long)i * SNN_INPUT_DIM + r * SNN_IMAGE_COLS + c], want);
            }
        if (y[i] != labels[order[step * ROWS + i]])
            set_why(why, "row %d's label %d is not its image's", i, y[i]);
    }
    if (moved < ROWS / 2)
        set_why(why, "only %d of %d rows moved", moved, ROWS);
    /* an evaluation gather (no draws) leaves the images as they are */
    const snn_noise none = {{0, 0}, NULL, 0, 0};
    host_gather_batch(x, NULL, y, images, labels, NULL, &step, ROWS, 0.0f, 1.0f, none, 0, NULL);
    for (long j = 0; j < (long)ROWS * SNN_INPUT_DIM; j++)
        if (x[j] != images[(long)step * ROWS * SNN_INPUT_DIM + j] / 255.0f) {
            set_why(why, "an evaluation gather moved pixel %ld", j);
            break;
        }
    report(name, why);
    free(images), free(x);
}

/* ---- dropout ------------------------------------------------------------------- */

static void check_dropout(void)
{
    const char *name = "dropout: drops p of the units, scales the rest by 1 / (1 - p), a new mask each step, "
                       "runs as one at a time";
    char why[256] = "";
    if (skipped(name, !SNN_DROPOUT, "CONFIG_TRAIN_DROPOUT"))
        return;
    enum { ROWS = 129, WIDTH = 333 };
    const long n = (long)ROWS * WIDTH;
    int32_t epoch = 1, step = 3;
    const snn_noise noise = snn_noise_of_seed(42, &epoch);
    float *x = snn_xmalloc((size_t)n * sizeof(float), "activations"), *a = snn_xmalloc((size_t)n * sizeof(float), "a");
    float *b = snn_xmalloc((size_t)n * sizeof(float), "b");
    for (long i = 0; i < n; i++)
        x[i] = 1.0f + (float)(rng_next() % 1000) / 1000.0f;
    memcpy(a, x, (size_t)n * sizeof(float));
    memcpy(b, x, (size_t)n * sizeof(float));
    const snn_drop layer0 = {noise, &step, 0, 0}, layer1 = {noise, &step, 1, 0};
    host_dropout(a, &layer0, ROWS, WIDTH);
    host_dropout(b, &layer0, ROWS, WIDTH);
    if (memcmp(a, b, (size_t)n * sizeof(float)))
        set_why(why, "the same step's mask differs on a second call");
    long dropped = 0;
    for (long i = 0; i < n; i++) {
        if (a[i] == 0.0f)
            dropped++;
        else if (a[i] != x[i] * SNN_DROPOUT_SCALE)
            set_why(why, "element %ld kept as %.9g, expected %.9g x %.9g", i, a[i], x[i], SNN_DROPOUT_SCALE);
        if ((a[i] == 0.0f) == snn_dropout_keeps(noise.key, epoch, step, 0, (uint32_t)i))
            set_why(why, "element %ld against snn_dropout_keeps", i);
    }
    /* runs of 1 to 6 from every alignment, as a GEMM epilogue drops them: the bits of one at a time */
    for (uint32_t i0 = 0; i0 < 8; i0++)
        for (int len = 1; len <= 6; len++) {
            const uint32_t keep = snn_dropout_keeps_run(noise.key, epoch, step, 0, i0, len);
            for (int e = 0; e < len; e++) {
                const float run_e = snn_dropout_by(keep, e, x[i0 + e]);
                if (run_e != a[i0 + e])
                    set_why(why, "a run of %d from %u: element %d is %.9g, one by one %.9g", len, i0, e,
                            run_e, a[i0 + e]);
            }
        }
    const double p = (double)SNN_DROPOUT_THRESHOLD / 16777216.0, sigma = sqrt(n * p * (1 - p));
    if (fabs(dropped - n * p) > 5 * sigma)
        set_why(why, "%ld of %ld dropped, expected %.0f +- %.0f", dropped, n, n * p, 5 * sigma);
    /* another step, another layer: other masks, agreeing as independent ones do */
    int32_t next = step + 1;
    memcpy(b, x, (size_t)n * sizeof(float));
    const snn_drop next_step = {noise, &next, 0, 0};
    host_dropout(b, &next_step, ROWS, WIDTH);
    float *c = snn_xmalloc((size_t)n * sizeof(float), "c");
    memcpy(c, x, (size_t)n * sizeof(float));
    host_dropout(c, &layer1, ROWS, WIDTH);
    long same_step = 0, same_layer = 0;
    for (long i = 0; i < n; i++) {
        same_step += (a[i] == 0.0f) == (b[i] == 0.0f);
        same_layer += (a[i] == 0.0f) == (c[i] == 0.0f);
    }
    const double agree = n * (p * p + (1 - p) * (1 - p)), slack = 5 * sqrt(n * 0.25);
    if (fabs(same_step - agree) > slack || fabs(same_layer - agree) > slack)
        set_why(why, "the next step's mask agrees on %ld units, the next layer's on %ld; independent ones on %.0f",
                same_step, same_layer, agree);
    report(name, why);
    free(x), free(a), free(b), free(c);
}

int main(void)
{
    check_philox();
    check_shift_draws();
    check_shifted_gather();
    check_dropout();
    return 0;
}
