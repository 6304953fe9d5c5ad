/* Host elementwise kernels: batch gather, dropout (host_linear_forward's), softmax + cross-entropy, step
 * counter and schedule. */
#include "kernels/ops.h"

#include <math.h>
#include <stddef.h>

#include "kernels/distort.h"
#include "snn_check.h"

#if defined(CONFIG_HOST_OPENMP) && defined(_OPENMP)
#define OMP(directive) _Pragma(directive)
#else
#define OMP(directive)
#endif

void host_gather_batch(float *x, snn_twin *x16, uint8_t *y, const uint8_t *images, const uint8_t *labels,
                       const int32_t *order, const int32_t *step, int rows, float mean, float std,
                       snn_noise noise, int dropout_width, const snn_clock *clock)
{
    (void)x16, (void)dropout_width; /* the host's forward draws its dropout as it goes */
    if (clock)
        host_schedule(*clock);
    const long first = snn_batch_first(noise, *step, rows);
    int shifted = snn_noise_translates(noise), distorted = snn_noise_distorts(noise);
    OMP("omp parallel for schedule(static) if (rows >= CONFIG_HOST_OPS_PARALLEL_MIN_ROWS)")
    for (int i = 0; i < rows; i++) {
        long r = order ? order[first + i] : first + i;
        const uint8_t *px = images + r * SNN_INPUT_DIM;
        float *row = x + (long)i * SNN_INPUT_DIM;
        const int32_t g = noise.row0 + i; /* the row of the whole batch: its draws */
        snn_shift s = shifted ? snn_shift_of(noise.key, *noise.epoch, *step, g) : (snn_shift){0, 0};
        uint8_t moved[SNN_INPUT_DIM], warped[SNN_INPUT_DIM];
        for (int j = 0; j < SNN_INPUT_DIM; j++)
            moved[j] = shifted ? snn_shifted_pixel(px, j, s) : px[j];
        if (distorted) { /* after the translation (kernels/distort.h) */
            float scratch[4 * SNN_PIXELS];
            snn_distort_image(moved, warped, noise.key, *noise.epoch, *step, g, scratch);
        }
        for (int j = 0; j < SNN_INPUT_DIM; j++)
            row[j] = ((float)(distorted ? warped[j] : moved[j]) / 255.0f - mean) / std;
        y[i] = labels[r];
    }
}

void host_dropout(float *t, const snn_drop *drop, int rows, int width)
{
    const snn_noise noise = drop->noise;
    const uint32_t n = (uint32_t)rows * (uint32_t)width, first = (uint32_t)noise.row0 * (uint32_t)width;
    OMP("omp parallel for schedule(static) if (rows >= CONFIG_HOST_OPS_PARALLEL_MIN_ROWS)")
    for (uint32_t i = 0; i < n; i++)
        t[i] = snn_dropout(noise.key, *noise.epoch, *drop->step, drop->layer, first + i, t[i]);
}

/* First index of the largest logit, as torch.argmax. */
static int argmax_first(const float *z)
{
    int best = 0;
    for (int j = 1; j < SNN_CLASSES; j++)
        if (z[j] > z[best])
            best = j;
    return best;
}

/* Loss of one row, -log softmax(z)[label] = log sum exp(z - max) - (z[label] - max), label-smoothed
 * where dz is given (a training step: kernels/optim.h); the softmax minus the targets, scaled, goes to dz
 * unless it is NULL. */
static float softmax_xent_row(float *dz, const float *z, int label, float scale)
{
    float max = z[argmax_first(z)];
    float e[SNN_CLASSES], sum = 0.0f;
    for (int j = 0; j < SNN_CLASSES; j++) {
        e[j] = expf(z[j] - max);
        sum += e[j];
    }
    if (dz)
        for (int j = 0; j < SNN_CLASSES; j++)
            dz[j] = (e[j] / sum - snn_xent_target(j, label)) * scale;
    return snn_xent_loss(logf(sum), max, z, label, dz != NULL);
}

void host_softmax_xent(float *dlogits, snn_twin *dlogits16, float *loss, int32_t *correct, const float *logits,
                       const uint8_t *y, const int32_t *step, int rows)
{
    (void)dlogits16;
    double total = 0.0;
    int32_t hits = 0;
    const int whole = rows * (dlogits ? SNN_DP_WORLD : 1); /* a training step's: its share of the batch */
    float scale = 1.0f / (float)whole;
    for (int i = 0; i < rows; i++) {
        const float *z = logits + (long)i * SNN_CLASSES;
        float *dz = dlogits ? dlogits + (long)i * SNN_CLASSES : NULL;
        total += softmax_xent_row(dz, z, y[i], scale);
        hits += argmax_first(z) == y[i];
    }
    loss[*step] = (float)(total / whole);
    correct[*step] = hits;
}

void host_output_step(float *logits, float *dlogits, snn_twin *dlogits16, float *loss, int32_t *correct,
                      float *dx, snn_twin *dx16, const float *x, const snn_twin *x16, float *w, snn_twin *w16,
                      snn_state sw, float *b, snn_state sb, const uint8_t *y, const int32_t *step,
                      float scale, int M, int K, const snn_rate *rate, float *dx_sums)
{
    (void)dlogits16, (void)dx16, (void)x16, (void)w16;
    host_linear_forward(logits, NULL, x, NULL, w, NULL, b, M, SNN_CLASSES, K, 0, NULL);
    host_softmax_xent(dlogits, NULL, loss, correct, logits, y, step, M);
    if (dx)
        host_linear_backward_input(dx, NULL, dlogits, NULL, w, NULL, x, scale, M, SNN_CLASSES, K);
    if (dx_sums && !dx)
        snn_die("host_output_step: dx's column sums asked for without dx");
    if (dx_sums)
        host_bias_grad(dx_sums, dx, K, M, K);
    host_linear_backward_weight_update(w, NULL, sw, b, sb, dlogits, NULL, x, NULL, M, SNN_CLASSES, K, rate);
}

void host_step_advance(int32_t *step) { *step += 1; }

void host_schedule(snn_clock c) { *c.rate = snn_clock_rate(c); }

void host_write_twin(snn_twin *t, const float *x, long n) { (void)t, (void)x, (void)n; }

const char *host_gemm_numerics(void) { return "fp32"; }
