/* Finite-difference check of the whole network's gradient.
 *
 * The engine runs one training step with lr = mu = 0, which leaves the
 * parameters as they are and its momentum buffers holding the gradient. An
 * independent double-precision forward pass of the same network, on the same
 * batch, gives central differences for a sample of parameters (every bias,
 * and weights drawn at random from every layer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/runtime.h"
#include "nn/train.h"
#include "snn_check.h"

/* It reads the gradient of the plain cross-entropy from SGD's momentum. */
#if SNN_OPTIM_MOMENTS == 1 && !defined(CONFIG_TRAIN_OPTIMIZER_ADAMW) && !CONFIG_TRAIN_LABEL_SMOOTHING_NONZERO
#define CHECKABLE 1
#else
#define CHECKABLE 0
#endif

#define EPS 1e-6 /* small, so that a step rarely crosses a ReLU kink */
#define WEIGHTS_PER_LAYER 60

/* Mean cross-entropy of the batch, everything in double. */
static double loss_of(const snn_model *m, const uint8_t *images, const uint8_t *labels)
{
    static double *act[2]; /* on the heap: 4 GB at the largest batch and width, past a static array's reach */
    for (int i = 0; i < 2 && !act[i]; i++)
        act[i] = snn_xmalloc(sizeof(double) * SNN_BATCH * SNN_MAX_DIM, "the double-precision activations");
    double loss = 0;
    for (int i = 0; i < SNN_BATCH * SNN_INPUT_DIM; i++)
        act[0][i] = (images[i] / 255.0 - SNN_PIXEL_MEAN) / SNN_PIXEL_STD;
    int cur = 0;
    for (int l = 0; l < SNN_LAYERS; l++, cur ^= 1) {
        const snn_layer *L = &m->layer[l];
        for (int r = 0; r < SNN_BATCH; r++)
            for (int o = 0; o < L->out; o++) {
                double s = L->b[o];
                for (int k = 0; k < L->in; k++)
                    s += act[cur][r * L->in + k] * L->w[(long)o * L->in + k];
                act[cur ^ 1][r * L->out + o] = (l + 1 < SNN_LAYERS && s < 0) ? 0 : s;
            }
    }
    for (int r = 0; r < SNN_BATCH; r++) {
        const double *z = &act[cur][r * SNN_CLASSES];
        double mx = z[0], sum = 0;
        for (int c = 1; c < SNN_CLASSES; c++)
            mx = fmax(mx, z[c]);
        for (int c = 0; c < SNN_CLASSES; c++)
            sum += exp(z[c] - mx);
        loss += log(sum) + mx - z[labels[r]];
    }
    return loss / SNN_BATCH;
}

static double numeric(snn_model *m, float *p, const uint8_t *images, const uint8_t *labels)
{
    float saved = *p;
    *p = (float)(saved + EPS);
    double up = loss_of(m, images, labels), h1 = *p - saved;
    *p = (float)(saved - EPS);
    double down = loss_of(m, images, labels), h2 = saved - *p;
    *p = saved;
    return (up - down) / (h1 + h2); /* the float steps actually taken */
}

static void check(const char *what, int layer, snn_model *m, float *params, float *grads, const long *idx,
                 int n, const uint8_t *images, const uint8_t *labels)
{
    double worst = 0, num2 = 0, diff2 = 0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        double a = grads[idx[i]], g = numeric(m, &params[idx[i]], images, labels);
        double err = fabs(a - g), scale = fabs(a) + fabs(g);
        num2 += g * g, diff2 += err * err;
        if (err > 2e-3 * scale + 1e-6)
            bad++;
        if (scale > 1e-6 && err / scale > worst)
            worst = err / scale;
    }
    double rel = num2 > 0 ? sqrt(diff2 / num2) : sqrt(diff2);
    if (bad > n / 50 || rel > 1e-4) /* a rare kink of a ReLU may be crossed */
        printf("not ok - gradient check layer %d %s: %d of %d off, relative error %.2e\n", layer, what, bad, n, rel);
    else
        printf("ok - gradient check layer %d %s (%d sampled, relative error %.2e, worst %.2e)\n", layer, what, n,
               rel, worst);
}

int main(void)
{
#if !CHECKABLE
    printf("skip - gradient check: skipped: this build's optimizer state is not SGD's momentum of the plain "
           "cross-entropy\n");
    return 0;
#endif
    snn_plan plan;
    snn_device_info dev;
    snn_model m;
    snn_rng rng;
    snn_model_plan(&plan);
    snn_rt_init(&dev, plan.total);
    snn_rng_seed(&rng, 12345);
    snn_model_init(&m, &plan, snn_rt_alloc(plan.total), SNN_ON_TARGET, &rng);

    for (long i = 0; i < (long)SNN_BATCH * SNN_INPUT_DIM; i++)
        m.train_images[i] = (uint8_t)snn_rng_below(&rng, 256);
    for (int i = 0; i < SNN_BATCH; i++)
        m.train_labels[i] = (uint8_t)snn_rng_below(&rng, SNN_CLASSES);
    for (int i = 0; i < SNN_FIT_COUNT; i++)
        m.order[i] = i;
    /* The step moves the weights at its schedule's rate; the momentum, from 0, gets the gradient (v = g), and
     * the weights are put back for the finite differences. */
    float *before = snn_xmalloc(SNN_PARAMS * sizeof(float), "the parameters before the step");
    memcpy(before, m.params, SNN_PARAMS * sizeof(float));
    snn_train_step(&m);
    memcpy(m.params, before, SNN_PARAMS * sizeof(float));
    free(before);

    long idx[WEIGHTS_PER_LAYER > SNN_MAX_DIM ? WEIGHTS_PER_LAYER : SNN_MAX_DIM];
    for (int l = 0; l < SNN_LAYERS; l++) {
        const snn_layer *L = &m.layer[l];
        long w0 = L->w - m.params, b0 = L->b - m.params;
        for (int i = 0; i < WEIGHTS_PER_LAYER; i++)
            idx[i] = w0 + snn_rng_below(&rng, (uint32_t)L->out * L->in);
        check("weights", l, &m, m.params, m.state, idx, WEIGHTS_PER_LAYER, m.train_images, m.train_labels);
        for (int i = 0; i < L->out; i++)
            idx[i] = b0 + i;
        check("biases", l, &m, m.params, m.state, idx, L->out, m.train_images, m.train_labels);
    }
    snn_rt_free(m.arena);
    return 0;
}
