/* The training step's random draws (nn/Kconfig: augmentation, dropout): counter-based, so each draw is a
 * pure function of the run's key and where it is made (epoch, step, what, index), the same bits on the host,
 * in a layered GPU kernel and in the fused step, in any order, with no generator state to carry. The
 * function is Philox4x32-10 (Salmon et al., SC'11; Random123's constants), the generator of cuRAND and
 * PyTorch's CUDA dropout; tools/lib/noise.py computes the same draws in numpy for the PyTorch parity. */
#ifndef SNN_NOISE_H
#define SNN_NOISE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/optim.h" /* SNN_HD */
#include "snn_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A training step's draws: the run's key (its seed) and where the step's epoch is, in the backend's memory.
 * epoch NULL: no draws (an evaluation step's gather). Data parallel, a process trains rows row0 ..
 * row0 + rows - 1 of each step's batch of `batch` rows, its row i taking row row0 + i's sample and draws
 * (rank x SNN_LOCAL_BATCH, SNN_BATCH); row0 0 and batch 0 (the rows given): the whole batch. */
typedef struct {
    uint32_t key[2];
    const int32_t *epoch;
    int32_t row0, batch;
} snn_noise;

typedef struct {
    uint32_t v[4];
} snn_philox_out;

SNN_HD snn_philox_out snn_philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1)
{
    for (int round = 0; round < 10; round++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    snn_philox_out out = {{c0, c1, c2, c3}};
    return out;
}

/* Whether a gather with these draws translates its images: a training step's, where the build augments. */
SNN_HD int snn_noise_translates(snn_noise n) { return SNN_AUGMENT_SHIFT > 0 && n.epoch != NULL; }

/* The key of a run's seed. */
SNN_HD snn_noise snn_noise_of_seed(uint64_t seed, const int32_t *epoch)
{
    snn_noise n = {{(uint32_t)seed, (uint32_t)(seed >> 32)}, epoch, 0, 0};
    return n;
}

/* Where row 0 of step `step`'s `rows` rows lies in the sample order. */
SNN_HD long snn_batch_first(snn_noise n, int32_t step, int rows)
{
    return (long)step * (n.batch ? n.batch : rows) + n.row0;
}

/* What a draw is for: the fourth counter word (the first three: index, step, epoch). */
enum { SNN_DRAW_SHIFT = 0, SNN_DRAW_DROPOUT = 1 /* + the layer */ };

/* An integer in [0, n) from 32 random bits: the high word of x n. */
SNN_HD int32_t snn_draw_below(uint32_t x, uint32_t n) { return (int32_t)(((uint64_t)x * n) >> 32); }

/* Augmentation: the translation of row `row` of the batch of step `step` of epoch `epoch`, each of dx, dy
 * uniform in [-S, S] (S = CONFIG_TRAIN_AUGMENT_SHIFT). */
typedef struct {
    int32_t dx, dy;
} snn_shift;

SNN_HD snn_shift snn_shift_of(const uint32_t key[2], int32_t epoch, int32_t step, int32_t row)
{
    const snn_philox_out r = snn_philox((uint32_t)row, (uint32_t)step, (uint32_t)epoch, SNN_DRAW_SHIFT, key[0],
                                        key[1]);
    const uint32_t n = 2 * SNN_AUGMENT_SHIFT + 1;
    snn_shift s = {snn_draw_below(r.v[0], n) - SNN_AUGMENT_SHIFT, snn_draw_below(r.v[1], n) - SNN_AUGMENT_SHIFT};
    return s;
}

/* Pixel p (row-major in the 28 x 28 image) of an image translated by s, read from the untranslated one
 * `px`: the pixel s away, or 0 (the background) where that falls outside. */
SNN_HD uint8_t snn_shifted_pixel(const uint8_t *px, int p, snn_shift s)
{
    const int y = p / SNN_IMAGE_COLS - s.dy, x = p % SNN_IMAGE_COLS - s.dx;
    return y >= 0 && y < SNN_IMAGE_ROWS && x >= 0 && x < SNN_IMAGE_COLS ? px[y * SNN_IMAGE_COLS + x] : 0;
}

/* Dropout (snn_dropout_keeps below): the Philox call of element `index`'s four, and whether its word of r
 * keeps the element. */
SNN_HD snn_philox_out snn_dropout_draws(const uint32_t key[2], int32_t epoch, int32_t step, int layer,
                                        uint32_t index)
{
    return snn_philox(index / 4, (uint32_t)step, (uint32_t)epoch, SNN_DRAW_DROPOUT + (uint32_t)layer, key[0],
                      key[1]);
}
SNN_HD int snn_dropout_word_keeps(snn_philox_out r, uint32_t index)
{
    const uint32_t q = index % 4, x = q == 0 ? r.v[0] : q == 1 ? r.v[1] : q == 2 ? r.v[2] : r.v[3];
    return (x >> 8) + 1u > SNN_DROPOUT_THRESHOLD; /* >= T, written so that T = 0 draws no "always true" warning */
}

/* Whether element `index` (row-major in its [rows][width] activation) of hidden layer `layer`'s output survives
 * in step `step` of epoch `epoch`. Four elements share a Philox call, each taking its word's top 24 bits, kept
 * where they are at least the drop probability's 24-bit threshold. */
SNN_HD int snn_dropout_keeps(const uint32_t key[2], int32_t epoch, int32_t step, int layer, uint32_t index)
{
    return snn_dropout_word_keeps(snn_dropout_draws(key, epoch, step, layer, index), index);
}

/* Element e of a run through dropout by the mask snn_dropout_keeps_run (below) gave: v scaled where it
 * survives, else 0. */
SNN_HD float snn_dropout_by(uint32_t keep, int e, float v)
{
    return keep >> e & 1 ? v * SNN_DROPOUT_SCALE : 0.0f;
}

/* Element `index` of hidden layer `layer`'s output, v, through dropout. */
SNN_HD float snn_dropout(const uint32_t key[2], int32_t epoch, int32_t step, int layer, uint32_t index, float v)
{
    return snn_dropout_by((uint32_t)snn_dropout_keeps(key, epoch, step, layer, index), 0, v);
}

/* Which of n <= 32 consecutive elements from `index` survive: bit e for element index + e, as
 * snn_dropout_keeps says, with one Philox call for the elements that share one (the grid-wide kernel's
 * epilogue runs of 2 or 4, one). */
SNN_HD uint32_t snn_dropout_keeps_run(const uint32_t key[2], int32_t epoch, int32_t step, int layer,
                                      uint32_t index, int n)
{
    snn_philox_out r = {{0, 0, 0, 0}};
    uint32_t keep = 0;
    for (int e = 0; e < n; e++) {
        const uint32_t i = index + (uint32_t)e;
        if (e == 0 || i % 4 == 0)
            r = snn_dropout_draws(key, epoch, step, layer, i);
        keep |= (uint32_t)snn_dropout_word_keeps(r, i) << e;
    }
    return keep;
}

/* A training step's dropout of hidden layer `layer`'s output, as a forward GEMM applies it after its ReLU
 * (kernels/ops_proto.h): rows from row noise.row0 of the batch, element i of the [rows][width] output taking
 * index noise.row0 x width + i, in step *step of epoch *noise.epoch (the backend's memory). next_width: the
 * width of hidden layer layer + 1 where the step's next forward drops its units too (0: none), whose mask a
 * GPU forward may draw beside this one (kernels/cuda/gemm_dropout.h). */
typedef struct {
    snn_noise noise;
    const int32_t *step;
    int32_t layer;
    int32_t next_width;
} snn_drop;

#ifdef __cplusplus
}
#endif
#endif
