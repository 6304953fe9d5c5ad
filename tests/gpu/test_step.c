/* A whole training step on the GPU against the host engine: the same schedule
 * (nn/train.c) runs with the CUDA kernels on the device arena and with the
 * host kernels on a host arena, from identical parameters, momentum and
 * batch. Compared: the loss, the logits, every gradient (momentum after a
 * step from zero momentum is the gradient), every updated parameter; then
 * after a second step, the momentum too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/runtime.h"
#include "nn/train.h"
#include "snn_check.h"
#include "tests/gpu/tolerance.h"


static double rel_error(const float *gpu, const float *host, long n)
{
    double d = 0, r = 0;
    for (long i = 0; i < n; i++) {
        if (!isfinite(gpu[i]))
            return INFINITY;
        d += ((double)gpu[i] - host[i]) * ((double)gpu[i] - host[i]);
        r += (double)host[i] * host[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* Relative L2, ||gpu - host|| / ||host||, against tol. */
static void compare(const char *what, const float *dev, const float *host, long n, double tol)
{
    float *got = snn_xmalloc(n * sizeof(float), "comparison");
    snn_rt_download(got, dev, n * sizeof(float));
    double e = rel_error(got, host, n);
    printf("%s - training step (%s GEMMs): %s (%ld values, relative error %.2e, tolerance %.0e)\n",
           e <= tol ? "ok" : "not ok", SNN_GEMM_PRECISION, what, n, e, tol);
    free(got);
}

static void compare_layers(const char *what, const snn_model *gpu, const snn_model *host, int momentum,
                           double tol)
{
    char name[96];
    for (int l = 0; l < SNN_LAYERS; l++) {
        const snn_layer *g = &gpu->layer[l], *h = &host->layer[l];
        snprintf(name, sizeof(name), "%s layer %d weights", what, l);
        compare(name, momentum ? g->vw : g->w, momentum ? h->vw : h->w, (long)h->out * h->in, tol);
        snprintf(name, sizeof(name), "%s layer %d biases", what, l);
        compare(name, momentum ? g->vb : g->b, momentum ? h->vb : h->b, h->out, tol);
    }
}

int main(void)
{
    if (!snn_rt_gpu_present()) {
        printf("skip - training step on the GPU: skipped: no GPU\n");
        return 0;
    }
    snn_plan plan;
    snn_device_info dev;
    snn_model gpu, host;
    snn_rng rng;
    snn_plan_make(&plan);
    snn_rt_init(&dev, plan.total);
    snn_model_bind(&gpu, snn_rt_alloc(plan.total));
    snn_model_bind(&host, snn_xmalloc(plan.total, "host arena"));
    host.kernels = &snn_host_kernels;

    snn_rng_seed(&rng, 2024);
    snn_model_draw_params(host.params, &rng);
    for (long i = 0; i < SNN_PARAMS; i++)
        host.momentum[i] = 0;
    for (long i = 0; i < (long)SNN_TRAIN_COUNT * SNN_INPUT_DIM; i++)
        host.train_images[i] = (uint8_t)snn_rng_below(&rng, 256);
    for (int i = 0; i < SNN_TRAIN_COUNT; i++)
        host.train_labels[i] = (uint8_t)snn_rng_below(&rng, SNN_CLASSES);
    snn_rng_permutation(&rng, host.order, SNN_TRAIN_COUNT);
    *host.train_step = 0;
    /* The whole arena (parameters, data, order, counters) goes up as it is. */
    snn_rt_upload(gpu.arena, host.arena, plan.total);
    snn_model_bind_gemm_buffers(&gpu);

    snn_train_step(&gpu);
    snn_train_step(&host);
    compare("logits", gpu.act[SNN_LAYERS], host.act[SNN_LAYERS], (long)SNN_BATCH * SNN_CLASSES, SNN_TOL_STEP);
    compare("loss", gpu.train_loss, host.train_loss, 1, SNN_TOL_STEP);
    compare_layers("gradient of", &gpu, &host, 1, SNN_TOL_STEP);
    compare_layers("updated", &gpu, &host, 0, SNN_TOL_STEP);

    snn_train_step(&gpu);
    snn_train_step(&host);
    compare("second step loss", gpu.train_loss + 1, host.train_loss + 1, 1, SNN_TOL_STEP2);
    compare_layers("second step momentum of", &gpu, &host, 1, SNN_TOL_STEP2);
    compare_layers("second step", &gpu, &host, 0, SNN_TOL_STEP2);
    snn_rt_free(gpu.arena);
    free(host.arena);
    return 0;
}
