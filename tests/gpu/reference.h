/* What the GPU step tests start from and compare with: a GPU model and a
 * host model with the same parameters and random data, the host ops on
 * operands rounded as the GPU's GEMMs read them, the relative error, host
 * copies of device tensors and their error. Static functions: each test is one translation
 * unit. */
#ifndef SNN_TESTS_GPU_REFERENCE_H
#define SNN_TESTS_GPU_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch/runtime.h"
#include "kernels/ops.h"
#include "nn/model.h"
#include "snn_check.h"

/* v as the GPU's GEMMs read it in the configured precision. */
static inline float round_operand(float v)
{
#if defined(CONFIG_PRECISION_BF16) || defined(CONFIG_PRECISION_TF32)
    uint32_t u;
    memcpy(&u, &v, sizeof u);
#if defined(CONFIG_PRECISION_BF16)
    u = (u + 0x7fffu + ((u >> 16) & 1)) & 0xffff0000u; /* to nearest, ties to even (the twins) */
#else
    u = (u + 0x1000u) & 0xffffe000u; /* to nearest, ties away (cvt.rna.tf32.f32) */
#endif
    memcpy(&v, &u, sizeof v);
    return v;
#elif defined(CONFIG_PRECISION_FP16) || defined(CONFIG_PRECISION_FP16_ACC16)
    return (float)(_Float16)v; /* to nearest, ties to even (the twins) */
#else
    return v;
#endif
}

static inline float *rounded_copy(const float *src, long n)
{
    float *r = snn_xmalloc(n * sizeof(float), "rounded GEMM operand");
    for (long i = 0; i < n; i++)
        r[i] = round_operand(src[i]);
    return r;
}

static inline void rounded_forward(float *y, const float *x, const float *w, const float *b, int M, int N,
                                   int K, int relu, const snn_drop *drop)
{
    float *xr = rounded_copy(x, (long)M * K), *wr = rounded_copy(w, (long)N * K);
    host_linear_forward(y, NULL, xr, NULL, wr, NULL, b, M, N, K, relu, drop);
    free(xr);
    free(wr);
}

static inline void rounded_backward_input(float *dx, const float *dy, const float *w, const float *act,
                                          float scale, int M, int N, int K)
{
    float *dyr = rounded_copy(dy, (long)M * N), *wr = rounded_copy(w, (long)N * K);
    host_linear_backward_input(dx, NULL, dyr, NULL, wr, NULL, act, scale, M, N, K);
    free(dyr);
    free(wr);
}

/* The weights from the rounded operands; the bias, as on the GPU, from the
 * FP32 dY; the update at the host's copy of the step's factors. */
static inline void rounded_backward_weight_update(float *w, snn_state sw, float *b, snn_state sb, const float *dy,
                                                  const float *x, int M, int N, int K, const snn_rate *rate)
{
    float *dyr = rounded_copy(dy, (long)M * N), *xr = rounded_copy(x, (long)M * K);
    const snn_state none = {{NULL, NULL}};
    host_linear_backward_weight_update(w, NULL, sw, NULL, none, dyr, NULL, xr, NULL, M, N, K, rate);
    host_bias_update(b, sb, dy, M, N, rate);
    free(dyr);
    free(xr);
}

/* ||a - b|| / ||b||, relative L2; infinite if a has a non-finite value. */
static inline double rel_error(const float *a, const float *b, long n)
{
    double d = 0, r = 0;
    for (long i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* A host copy of n floats of device memory (NULL stays NULL). */
static inline float *fetch(const float *dev, long n)
{
    if (!dev)
        return NULL;
    float *h = snn_xmalloc(n * sizeof(float), "host copy of a GPU tensor");
    snn_rt_download(h, dev, n * sizeof(float));
    return h;
}

/* rel_error of n floats of device memory against the host's want. */
static inline double device_error(const float *dev, const float *want, long n)
{
    float *got = fetch(dev, n);
    const double e = rel_error(got, want, n);
    free(got);
    return e;
}

/* A model on the GPU and one in host memory, drawn from one seed (2024), with the same random data (seed
 * 2025) in both: the training images and labels, the sample order, then the test images and labels. */
static inline void reference_models(snn_model *gpu, snn_model *host, snn_plan *plan, snn_device_info *dev)
{
    snn_rng rng, data;
    snn_model_plan(plan);
    snn_rt_init(dev, plan->total);
    snn_rng_seed(&rng, 2024);
    snn_model_init(gpu, plan, snn_rt_alloc(plan->total), SNN_ON_TARGET, &rng);
    snn_rng_seed(&rng, 2024);
    snn_model_init(host, plan, snn_xmalloc(plan->total, "host arena"), SNN_ON_HOST, &rng);
    snn_rng_seed(&data, 2025);
    for (long i = 0; i < (long)SNN_TRAIN_COUNT * SNN_INPUT_DIM; i++)
        host->train_images[i] = (uint8_t)snn_rng_below(&data, 256);
    for (int i = 0; i < SNN_TRAIN_COUNT; i++)
        host->train_labels[i] = (uint8_t)snn_rng_below(&data, SNN_CLASSES);
    snn_rng_permutation(&data, host->order, SNN_FIT_COUNT);
    for (long i = 0; i < (long)SNN_TEST_COUNT * SNN_INPUT_DIM; i++)
        host->test_images[i] = (uint8_t)snn_rng_below(&data, 256);
    for (int i = 0; i < SNN_TEST_COUNT; i++)
        host->test_labels[i] = (uint8_t)snn_rng_below(&data, SNN_CLASSES);
    snn_rt_upload(gpu->train_images, host->train_images, (size_t)SNN_TRAIN_COUNT * SNN_INPUT_DIM);
    snn_rt_upload(gpu->train_labels, host->train_labels, SNN_TRAIN_COUNT);
    snn_rt_upload(gpu->order, host->order, SNN_FIT_COUNT * sizeof(int32_t));
    snn_rt_upload(gpu->test_images, host->test_images, (size_t)SNN_TEST_COUNT * SNN_INPUT_DIM);
    snn_rt_upload(gpu->test_labels, host->test_labels, SNN_TEST_COUNT);
}

#endif
