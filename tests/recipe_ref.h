/* The training recipe in double precision, written from its description in nn/Kconfig rather than from
 * kernels/optim.h: the reference the kernel tests hold the update, the schedule and label smoothing to. */
#ifndef SNN_TEST_RECIPE_REF_H
#define SNN_TEST_RECIPE_REF_H

#include <math.h>

#include "snn_config.h"

/* The learning rate of update t (from 0) of a run of total steps, epochs of epoch_steps. */
static inline double ref_lr(long t, long epoch_steps, long total)
{
    double f = 1.0;
#if defined(CONFIG_TRAIN_LR_STEP)
    f = pow(CONFIG_TRAIN_LR_GAMMA_VALUE, (double)(t / epoch_steps / CONFIG_TRAIN_LR_STEP_EPOCHS));
#elif defined(CONFIG_TRAIN_LR_COSINE) || defined(CONFIG_TRAIN_LR_WARMUP_COSINE) || \
    defined(CONFIG_TRAIN_LR_WARMUP_LINEAR)
    const long warm = SNN_LR_WARMUP;
    const double end = CONFIG_TRAIN_LR_FINAL_VALUE;
    if (t < warm) {
        f = (t + 1.0) / warm;
    } else {
        const double p = (double)(t - warm) / (total - warm > 1 ? total - warm : 1);
#if defined(CONFIG_TRAIN_LR_WARMUP_LINEAR)
        f = end + (1 - end) * (1 - p);
#else
        f = end + (1 - end) * (1 + cos(3.14159265358979323846 * p)) / 2;
#endif
    }
#endif
    (void)t, (void)epoch_steps, (void)total;
    return CONFIG_TRAIN_LR_VALUE * f;
}

/* Parameter w (gradient g, state s[2]) after update t with learning rate lr. */
static inline void ref_update(double *w, double *s, double g, double lr, long t)
{
    *w *= 1 - lr * CONFIG_TRAIN_WEIGHT_DECAY_VALUE;
#if defined(CONFIG_TRAIN_OPTIMIZER_ADAMW)
    const double b1 = CONFIG_TRAIN_ADAM_BETA1_VALUE, b2 = CONFIG_TRAIN_ADAM_BETA2_VALUE;
    s[0] = b1 * s[0] + (1 - b1) * g;
    s[1] = b2 * s[1] + (1 - b2) * g * g;
    const double m = s[0] / (1 - pow(b1, t + 1)), q = s[1] / (1 - pow(b2, t + 1));
    *w -= lr * m / (sqrt(q) + CONFIG_TRAIN_ADAM_EPS_VALUE);
#else
    const double mu = SNN_MOMENTUM;
    if (mu > 0) {
        s[0] = mu * s[0] + g;
        g = SNN_NESTEROV ? g + mu * s[0] : s[0];
    }
    *w -= lr * g;
    (void)t;
#endif
}

/* Class c's target for label y, and a row's loss from its logits z: smoothed where smooth. */
static inline double ref_target(int c, int y, int smooth)
{
    const double a = smooth ? CONFIG_TRAIN_LABEL_SMOOTHING_VALUE : 0.0;
    return (1 - a) * (c == y) + a / SNN_CLASSES;
}

static inline double ref_xent(const float *z, int y, int smooth)
{
    double max = z[0], sum = 0, loss = 0;
    for (int c = 1; c < SNN_CLASSES; c++)
        max = z[c] > max ? z[c] : max;
    for (int c = 0; c < SNN_CLASSES; c++)
        sum += exp((double)z[c] - max);
    for (int c = 0; c < SNN_CLASSES; c++)
        loss -= ref_target(c, y, smooth) * ((double)z[c] - max - log(sum));
    return loss;
}

#endif
