/* The model: the layer table derived from the config, and every buffer of a
 * run, carved from the arena; under the POOL and CUDA_ASYNC strategies the
 * step allocates its own tensors instead (nn/train.c). */
#ifndef SNN_MODEL_H
#define SNN_MODEL_H

#include <stdint.h>

#include "kernels/ops.h"
#include "mm/arena.h"
#include "nn/rng.h"

typedef struct {
    int in, out;              /* weights are [out][in], as nn.Linear */
    float *w, *b, *vw, *vb;   /* parameters and their momentum */
} snn_layer;

typedef struct {
    const snn_kernels *kernels; /* the target's; a test may bind host kernels to host memory */
    snn_plan plan;
    void *arena;
    float lr, mu;
    float *params, *momentum;
    snn_layer layer[SNN_LAYERS];
    float *act[SNN_LAYERS + 1]; /* act[0]: the input batch; act[SNN_LAYERS]: the logits */
    float *grad[2];             /* activation gradients, ping-pong */
    /* Under SNN_MM_PER_STEP, act[1..] and grad[] are NULL between steps. */
    uint8_t *batch_labels;
    uint8_t *train_images, *train_labels, *test_images, *test_labels;
    int32_t *order;
    float *train_loss, *eval_loss;    /* one per step */
    int32_t *train_correct, *eval_correct;
    int32_t *train_step, *eval_step;  /* step counters, in device memory */
} snn_model;

/* Points every buffer of m into arena (laid out by m->plan, made here) and
 * selects the target's kernels. */
void snn_model_bind(snn_model *m, void *arena);

/* Hands the GEMMs their buffers in the arena: the split-K workspace
 * (tensor-core builds; kernels/cuda/gemm_split_k.h) and the 16-bit twins of
 * the parameters, activations and activation gradients (CONFIG_GEMM_TWINS;
 * kernels/cuda/twin.h), writing the parameters' twin from the parameters:
 * call once the parameters are in place on the device. Does nothing in builds
 * without tensor-core GEMMs. */
void snn_model_bind_gemm_buffers(snn_model *m);

/* Draws the initial parameters (the configured scheme) into params_host,
 * SNN_PARAMS floats in the arena's layout: W0, b0, W1, b1, ... */
void snn_model_draw_params(float *params_host, snn_rng *rng);

const char *snn_init_name(void);
/* "784-256-10" */
void snn_model_shape(char *buf, int len);

#endif
