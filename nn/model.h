/* The model: its tensor table, every buffer of a run carved from one arena,
 * the layer table over it, and its start-up. Under the POOL and CUDA_ASYNC
 * strategies the step allocates its own tensors instead (nn/train.c). */
#ifndef SNN_MODEL_H
#define SNN_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "kernels/fused.h"
#include "kernels/ops.h"
#include "mm/arena.h"
#include "nn/rng.h"

/* Every tensor of a run, one arena region each (nn/model.c sizes them).
 * L layers, B batch, E evaluation batch, R = max(B, E) rows, S steps per
 * epoch, V evaluation steps (the larger set's); widths d0 = 784 .. dL = 10. */
enum snn_tensor {
    SNN_T_PARAMS,         /* per layer l: W [d(l+1)][d(l)] then b [d(l+1)]   float */
    SNN_T_OPTIM_STATE,    /* SNN_OPTIM_MOMENTS x the same layout (kernels/optim.h) float */
    SNN_T_ACTIVATIONS,    /* act l = 0..L: [R][d(l)], one after the other  float (only act 0 if per-step) */
    SNN_T_ACT_GRADS,      /* SNN_GRAD_BUFFERS x [B][max(10, width)], in turn float (none if per-step) */
    SNN_T_BATCH_LABELS,   /* [R]                                           uint8 */
    SNN_T_TRAIN_IMAGES,   /* [60000][784], the last CONFIG_TRAIN_VALIDATION_SIZE held out uint8 */
    SNN_T_TRAIN_LABELS,   /* [60000]                                       uint8 */
    SNN_T_TEST_IMAGES,    /* [10000][784]                                  uint8 */
    SNN_T_TEST_LABELS,    /* [10000]                                       uint8 */
    SNN_T_ORDER,          /* [SNN_FIT_COUNT] this epoch's sample order     int32 */
    SNN_T_STEP_LOSSES,    /* [S] training, then [V] evaluation losses      float */
    SNN_T_STEP_CORRECT,   /* [S] then [V] correct predictions              int32 */
    SNN_T_CLOCK,          /* the training step, the evaluation step, the epoch: int32; the step's rate */
    SNN_T_TWINS,          /* 16-bit twins of params, activations, act grads (CONFIG_GEMM_TWINS) */
    SNN_T_GEMM_WORKSPACE, /* split-K partial sums of the tensor-core GEMMs, float; dropout's mask, bits */
    SNN_T_FUSED,          /* the fused step's own buffers (CONFIG_STEP_FUSED, kernels/fused.h) */
    SNN_T_GRADS,          /* gradients before their update, float: data parallel (CONFIG_DP), all of them
                           * in the params' layout (DP_REDUCE_BF16: in BF16 as sent, the biases' also in
                           * FP32), the epoch's figures summed; under CONFIG_STEP_UPDATE_PASS all of them,
                           * in the params' layout */
    SNN_T_COUNT
};

typedef struct {
    int in, out;              /* weights are [out][in], as nn.Linear */
    float *w, *b;             /* parameters */
    snn_state sw, sb;         /* their optimizer state (kernels/optim.h) */
    snn_twin *w16;            /* the weights' 16-bit twin, or NULL (kernels/ops_proto.h) */
} snn_layer;

/* A set the model is scored on, SNN_EVAL_BATCH images a step: the test set, or the validation set held
 * out of the training images (CONFIG_TRAIN_VALIDATION_SIZE; no steps without one). */
typedef struct {
    const uint8_t *images, *labels;
    int steps;
} snn_eval_set;

typedef struct {
    const snn_kernels *kernels; /* the target's, or the host's for a model in host memory */
    snn_plan plan;
    void *arena;
    float *params, *state;     /* state: SNN_OPTIM_MOMENTS arrays, each in the params' layout (layer[].sw, .sb) */
    snn_layer layer[SNN_LAYERS];
    float *act[SNN_LAYERS + 1]; /* act[0]: the input batch; act[SNN_LAYERS]: the logits */
    float *grad[SNN_GRAD_BUFFERS];                              /* activation gradients, taken in turn */
    snn_twin *act16[SNN_LAYERS + 1], *grad16[SNN_GRAD_BUFFERS]; /* their 16-bit twins, or NULL */
    /* Under SNN_MM_PER_STEP, act[1..] and grad[] are NULL between steps. */
    uint8_t *batch_labels;
    uint8_t *train_images, *train_labels, *test_images, *test_labels;
    snn_eval_set test, valid;         /* views of the images above */
    int32_t *order;
    float *train_loss, *eval_loss;    /* one per step */
    int32_t *train_correct, *eval_correct;
    int32_t *train_step, *eval_step;  /* step counters, in device memory */
    snn_clock clock;                  /* the schedule's: the epoch and train_step, and the step's rate */
    snn_noise noise;                  /* the training step's draws: the run's key, the clock's epoch */
#ifdef CONFIG_STEP_FUSED
    snn_fused_net fused;              /* the same tensors, and the fused step's own, for its kernels */
#endif
#if defined(CONFIG_DP) || defined(CONFIG_STEP_UPDATE_PASS)
    float *grads;                     /* gradients before their update: all, all-reduced (DP; the biases' FP32
                                       * sums under DP_REDUCE_BF16); or a layer's */
#endif
#ifdef CONFIG_DP
    uint16_t *grads16;                /* in BF16 as sent, all-reduced in place (DP_REDUCE_BF16), or NULL */
#endif
} snn_model;

/* The arena's plan for this build: the tensor table, laid out. */
void snn_model_plan(snn_plan *plan);
/* Prints the plan, and under POOL and CUDA_ASYNC what each step allocates. */
void snn_model_print_plan(const snn_plan *plan, FILE *out);

/* Where a model's arena lives: the target's memory and kernels, or host
 * memory and the host kernels (a reference beside a GPU model). */
typedef enum { SNN_ON_TARGET, SNN_ON_HOST } snn_place;

/* Binds every tensor into arena (laid out by plan), draws the initial
 * parameters from rng (the configured scheme), zeroes the optimizer state and
 * the step counters, and hands the GEMMs their buffers; the schedule spans
 * the configured epochs until snn_model_set_run says otherwise. The one
 * start-up of the program, the tests and the tools. */
void snn_model_init(snn_model *m, const snn_plan *plan, void *arena, snn_place place, snn_rng *rng);

/* The run's length, for the learning-rate schedule: epochs of epoch_steps
 * steps; and its seed, the key of its augmentation's and dropout's draws
 * (kernels/noise.h). Before the first step (a captured step keeps it). */
void snn_model_set_run(snn_model *m, int epochs, int epoch_steps, uint64_t seed);

/* The trained state in host arrays, in the arena's layout: the parameters
 * (SNN_PARAMS floats) and the optimizer state (SNN_OPTIM_MOMENTS x
 * SNN_PARAMS); reading it (for a checkpoint) and replacing it (loading one),
 * the latter refreshing the weights' 16-bit twin. state may be NULL: left as
 * it is. */
void snn_model_get_state(const snn_model *m, float *params_host, float *state_host);
void snn_model_set_state(snn_model *m, const float *params_host, const float *state_host);
/* Rewrites the weights' 16-bit twins (where there are any) from the FP32
 * weights, after these were written other than by the layered update: set
 * from the host, or trained by the fused step. */
void snn_model_refresh_twins(snn_model *m);

/* Draws the initial parameters into params_host, SNN_PARAMS floats in the
 * arena's layout: W0, b0, W1, b1, ... (snn_model_init does it for a model). */
void snn_model_draw_params(float *params_host, snn_rng *rng);

/* The model's GEMM numerics as tools/torch_parity.py names them, or NULL
 * where its GEMMs do not share one (kernels/ops_proto.h). */
const char *snn_model_numerics(const snn_model *m);

const char *snn_init_name(void);
/* "784-256-10" */
void snn_model_shape(char *buf, int len);

#endif
