/* The training recipe's arithmetic (nn/Kconfig): the learning-rate schedule, the optimizer's update of one
 * parameter, and label smoothing's targets and loss. One expression each, compiled for the host kernels and
 * for every GPU kernel that updates (the layered epilogues, the bias kernel, the fused step), so the
 * engines differ by rounding only. The recipe is fixed at compile time: what it does not use is compiled
 * out, a momentum of 0 keeps no momentum buffer and moves none. */
#ifndef SNN_OPTIM_H
#define SNN_OPTIM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "snn_config.h"

#ifdef __CUDACC__
#define SNN_HD static __host__ __device__ __forceinline__
#else
#define SNN_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Arrays of state per parameter: AdamW's two moments, SGD's momentum, or none. */
#if defined(CONFIG_TRAIN_OPTIMIZER_ADAMW)
#define SNN_OPTIM_MOMENTS 2
#elif CONFIG_TRAIN_MOMENTUM_NONZERO
#define SNN_OPTIM_MOMENTS 1
#else
#define SNN_OPTIM_MOMENTS 0
#endif

/* A tensor's optimizer state: SNN_OPTIM_MOMENTS arrays shaped like it, NULL beyond. */
typedef struct {
    float *m[2];
} snn_state;

/* One training step's factors, written by the schedule before the step's updates read them. */
typedef struct {
    float lr;   /* the learning rate */
    float keep; /* 1 - lr * weight decay: what decoupled weight decay leaves of a weight */
    float step; /* AdamW: lr / (1 - beta1^t), the bias-corrected step */
    float rsq;  /* AdamW: 1 / sqrt(1 - beta2^t) */
} snn_rate;

/* Where the schedule reads the time: step *step of epoch *epoch (0-based), of epoch_steps each, in a run
 * of total steps; rate is where it writes the step's factors. In the backend's memory. */
typedef struct {
    int32_t *epoch, *step;
    snn_rate *rate;
    int32_t epoch_steps, total;
} snn_clock;

/* The schedule's factor on the learning rate at update t (0-based) of total, epochs of epoch_steps; in
 * double, once per step, as PyTorch's schedulers compute it. */
SNN_HD double snn_schedule_factor(int32_t t, int32_t epoch_steps, int32_t total)
{
#if defined(CONFIG_TRAIN_LR_STEP)
    (void)total;
    return pow(CONFIG_TRAIN_LR_GAMMA_VALUE, (double)(t / epoch_steps / CONFIG_TRAIN_LR_STEP_EPOCHS));
#elif defined(CONFIG_TRAIN_LR_COSINE) || defined(CONFIG_TRAIN_LR_WARMUP_COSINE) || \
    defined(CONFIG_TRAIN_LR_WARMUP_LINEAR)
    (void)epoch_steps;
    const int32_t warm = SNN_LR_WARMUP;
    if (t < warm)
        return (t + 1.0) / warm;
    const int32_t span = total - warm > 1 ? total - warm : 1;
    const double p = (double)(t - warm) / span, end = CONFIG_TRAIN_LR_FINAL_VALUE; /* p: 0 .. 1 over the decay */
#if defined(CONFIG_TRAIN_LR_WARMUP_LINEAR)
    const double fall = 1.0 - p;
#else
    const double fall = 0.5 * (1.0 + cos(3.14159265358979323846 * p));
#endif
    return end + (1.0 - end) * fall;
#else
    (void)t, (void)epoch_steps, (void)total;
    return 1.0;
#endif
}

/* The factors of update t (0-based) of total, epochs of epoch_steps: computed in double, rounded once. */
SNN_HD snn_rate snn_rate_at(int32_t t, int32_t epoch_steps, int32_t total)
{
    const double lr = CONFIG_TRAIN_LR_VALUE * snn_schedule_factor(t, epoch_steps, total);
    snn_rate r;
    r.lr = (float)lr;
    r.keep = (float)(1.0 - lr * CONFIG_TRAIN_WEIGHT_DECAY_VALUE);
#if defined(CONFIG_TRAIN_OPTIMIZER_ADAMW)
    r.step = (float)(lr / (1.0 - pow(CONFIG_TRAIN_ADAM_BETA1_VALUE, t + 1.0)));
    r.rsq = (float)(1.0 / sqrt(1.0 - pow(CONFIG_TRAIN_ADAM_BETA2_VALUE, t + 1.0)));
#else
    r.step = r.rsq = 0.0f;
#endif
    return r;
}

/* The factors of step `step` of epoch `epoch`. */
SNN_HD snn_rate snn_clock_rate_in(snn_clock c, int32_t epoch, int32_t step)
{
    return snn_rate_at(epoch * c.epoch_steps + step, c.epoch_steps, c.total);
}
/* Of step `step` of the clock's epoch. */
SNN_HD snn_rate snn_clock_rate_at(snn_clock c, int32_t step) { return snn_clock_rate_in(c, *c.epoch, step); }
/* Of the step the clock is at. */
SNN_HD snn_rate snn_clock_rate(snn_clock c) { return snn_clock_rate_at(c, *c.step); }

/* sqrtf(x), x >= 0, and m / d, d > 0, with the operands kept off the GPU's slow paths: sqrt.rn and div.rn
 * hand subnormal operands, and div.rn numerators near them (below 2^-100 here, with room to spare), to a
 * software routine per element. AdamW's moments of unused weights decay into that range and stay
 * (0.9 x 2^-149 rounds back to 2^-149), which slowed a step by a fifth over a run (docs/PERF.md v32).
 * Scaling by a power of two is exact, so both are IEEE's to the bit, but for a subnormal quotient, rounded
 * twice (once scaled, once scaled back): one unit of 2^-149 at most, which no weight update can show. The
 * GPU takes no branch at all (below). */
#ifdef __CUDA_ARCH__
/* sqrt.rn's and div.rn's fast paths as the compiler emits them (an estimate from the special function unit,
 * then Newton steps), correctly rounded where their range checks pass, written out without the branch to the
 * slow routine: its reconvergence kept the compiler from overlapping one parameter's update with the next
 * (docs/PERF.md v51). The callers keep the operands in range: x in [2^-100, 2^128); |n| in [2^-100, 2^128)
 * and d in [1, 2), so that no product or remainder leaves the normal range. */
static __device__ __forceinline__ float snn_sqrt_fast(float x)
{
    float r, s, h;
    asm volatile("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    asm("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(s) : "f"(x), "f"(r));
    asm("mul.rn.ftz.f32 %0, %1, 0f3F000000;" : "=f"(h) : "f"(r));
    return __fmaf_rn(__fmaf_rn(-s, s, x), h, s);
}

static __device__ __forceinline__ float snn_div_fast(float n, float d)
{
    float r;
    asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
    r = __fmaf_rn(r, __fmaf_rn(-d, r, 1.0f), r);
    const float q = __fmaf_rn(n, r, 0.0f);
    return __fmaf_rn(r, __fmaf_rn(-d, q, n), q);
}

/* n / d x f for |n| in [2^-100, 2^128), d > 0 finite (the caller discards what infinity gives), f 1 or
 * 2^-64: d's significand in [1, 2) divides, its exponent and f scale the quotient after, exactly where it is
 * normal (a subnormal one is rounded twice). */
static __device__ __forceinline__ float snn_div_scaled_d(float n, float d, float f)
{
    const int sub = d < 0x1p-126f;
    const uint32_t b = __float_as_uint(sub ? d * 0x1p64f : d), e = b >> 23; /* finite: [1, 254] */
    const float q = snn_div_fast(n, __uint_as_float((b & 0x007fffffu) | 0x3f800000u));
    const float q2 = __fmul_rn(q, e < 254 ? __uint_as_float((254 - e) << 23) : 0x1p-127f); /* x 2^(127 - e) */
    return __fmul_rn(q2, sub ? f * 0x1p64f : f);
}
#endif

SNN_HD float snn_sqrtf_scaled(float x)
{
    const int sub = x < 0x1p-100f;
    const float xs = sub ? x * 0x1p64f : x;
#ifdef __CUDA_ARCH__
    const float f = snn_sqrt_fast(xs), r = x == 0.0f || x == INFINITY ? x : f; /* +-0, infinity: themselves */
#else
    const float r = sqrtf(xs);
#endif
    return sub ? r * 0x1p-32f : r;
}

SNN_HD float snn_divf_scaled(float m, float d)
{
    const float a = fabsf(m);
    const int zero = a == 0.0f || d == INFINITY, tiny = a < 0x1p-100f;
    const float n = zero ? 1.0f : tiny ? m * 0x1p64f : m;
#ifdef __CUDA_ARCH__
    const float q = snn_div_scaled_d(n, d, tiny ? 0x1p-64f : 1.0f);
    return zero ? copysignf(0.0f, m) : q;
#else
    const float q = n / d;
    return zero ? copysignf(0.0f, m) : tiny ? q * 0x1p-64f : q; /* 0 / d; or a subnormal m flushed (host) */
#endif
}

/* a x b + c and a x b as the update computes them: on the GPU each as written, fused where an FMA is written
 * and rounded where a product is, so that every kernel computes the same bits (left to it, the compiler fused
 * a product into a sum where it liked, which differed between kernels); on the host, as ISO C rounds them,
 * which fuses nothing. */
#ifdef __CUDA_ARCH__
#define SNN_FMA(a, b, c) __fmaf_rn(a, b, c)
#define SNN_MUL(a, b) __fmul_rn(a, b)
#else
#define SNN_FMA(a, b, c) ((a) * (b) + (c))
#define SNN_MUL(a, b) ((a) * (b))
#endif

/* One parameter w with gradient g and its state s[SNN_OPTIM_MOMENTS] (read and rewritten): its new value.
 *   SGD:   v = mu v + g; d = g + mu v (Nesterov) or v; without momentum d = g;  w = keep w - lr d
 *   AdamW: m = b1 m + (1 - b1) g; q = b2 q + (1 - b2) g^2;  w = keep w - step m / (sqrt(q) rsq + eps)
 * as PyTorch's SGD (dampening 0) and AdamW compute them, weight decay decoupled in both. On the GPU, the
 * fused forms the wgmma epilogue had compiled to, and with decay the grid-wide fused kernel's (docs/PERF.md
 * v36). */
SNN_HD float snn_update(float w, float g, float *s, snn_rate r)
{
#if defined(CONFIG_TRAIN_OPTIMIZER_ADAMW)
    s[0] = SNN_FMA(g, SNN_ADAM_BETA1C, SNN_MUL(SNN_ADAM_BETA1, s[0]));
    s[1] = SNN_FMA(g, SNN_MUL(SNN_ADAM_BETA2C, g), SNN_MUL(SNN_ADAM_BETA2, s[1]));
    const float lr = r.step, d = snn_divf_scaled(s[0], SNN_FMA(snn_sqrtf_scaled(s[1]), r.rsq, SNN_ADAM_EPS));
#elif SNN_OPTIM_MOMENTS
    const float v = SNN_FMA(SNN_MOMENTUM, s[0], g);
    s[0] = v;
    const float lr = r.lr, d = SNN_NESTEROV ? SNN_FMA(SNN_MOMENTUM, v, g) : v;
#else
    (void)s;
    const float lr = r.lr, d = g;
#endif
    return SNN_WEIGHT_DECAY > 0.0f ? SNN_FMA(w, r.keep, -SNN_MUL(lr, d)) : SNN_FMA(-lr, d, w);
}

/* p[i] = snn_update(p[i], g, its state at i), the state read from st and written back: the update of
 * arrays indexed one element at a time (the host GEMM's epilogue, the bias kernels). */
SNN_HD void snn_update_at(float *p, snn_state st, size_t i, float g, snn_rate r)
{
    float s[2] = {0.0f, 0.0f};
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        s[k] = st.m[k][i];
    p[i] = snn_update(p[i], g, s, r);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        st.m[k][i] = s[k];
}

/* Label smoothing (PyTorch's label_smoothing = a): class c's target for label y, (1 - a)[c = y] + a/C. */
SNN_HD float snn_xent_target(int c, int y)
{
    const float hit = c == y ? 1.0f : 0.0f;
    return SNN_LABEL_SMOOTHING > 0.0f ? (1.0f - SNN_LABEL_SMOOTHING) * hit + SNN_LABEL_SMOOTHING / SNN_CLASSES
                                      : hit;
}

/* A row's loss, -sum_c target_c log softmax(z)_c, from lse = log sum exp(z - zmax) and the logits z:
 * lse - (z[y] - zmax) unsmoothed; smoothed, lse + zmax - (1 - a) z[y] - a mean(z). With smooth false (the
 * evaluation), the plain cross-entropy. */
SNN_HD float snn_xent_loss(float lse, float zmax, const float *z, int y, int smooth)
{
    if (!(smooth && SNN_LABEL_SMOOTHING > 0.0f))
        return lse - (z[y] - zmax);
    float mean = 0.0f;
    for (int c = 0; c < SNN_CLASSES; c++)
        mean += z[c] - zmax;
    mean /= SNN_CLASSES;
    return lse - (1.0f - SNN_LABEL_SMOOTHING) * (z[y] - zmax) - SNN_LABEL_SMOOTHING * mean;
}

#ifdef __cplusplus
}
#endif
#endif
