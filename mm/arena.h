/* The arena: every buffer the engine uses, sized at compile time by a size
 * table and carved out of one allocation made at start-up. Under the POOL and
 * CUDA_ASYNC strategies (mm/mm.h) the step's own tensors, the layer outputs
 * and the activation gradients, are left out: the step allocates them. */
#ifndef SNN_ARENA_H
#define SNN_ARENA_H

#include <stddef.h>
#include <stdio.h>

#include "snn_config.h"

enum snn_region {
    SNN_R_PARAMS,        /* weights and biases, layer by layer */
    SNN_R_MOMENTUM,      /* SGD momentum, same layout (holds the gradient after step 1) */
    SNN_R_ACTIVATIONS,   /* input batch and each layer's output (only the input batch if SNN_MM_PER_STEP) */
    SNN_R_ACT_GRADS,     /* two ping-pong buffers of activation gradients (none if SNN_MM_PER_STEP) */
    SNN_R_BATCH_LABELS,  /* labels of the current batch */
    SNN_R_TRAIN_IMAGES,  /* the dataset, as bytes */
    SNN_R_TRAIN_LABELS,
    SNN_R_TEST_IMAGES,
    SNN_R_TEST_LABELS,
    SNN_R_ORDER,         /* this epoch's sample order */
    SNN_R_STEP_STATS,    /* per-step loss and correct count, train and eval, and the step counters */
    SNN_R_TWINS,         /* 16-bit twins of parameters, activations, gradients (CONFIG_GEMM_TWINS only) */
    SNN_R_SPLIT_K,       /* split-K partial sums of the tensor-core GEMMs (kernels/cuda/gemm_split_k.h) */
    SNN_R_COUNT
};

/* Widest activation gradient: the logits, or a hidden layer (the input needs none). */
#define SNN_GRAD_DIM SNN_MAX2(SNN_CLASSES, CONFIG_NN_HIDDEN_LAYERS ? SNN_HIDDEN : 0)
#define SNN_STEP_STATS_BYTES \
    ((size_t)(SNN_STEPS_PER_EPOCH + SNN_EVAL_STEPS) * (sizeof(float) + sizeof(int)) + 2 * sizeof(int))
#define SNN_ARENA_ALIGN 256
/* The twins region: 16-bit copies of the parameter, activation and
 * activation-gradient regions, each padded to 128 bytes (kernels/cuda/twin.h). */
#define SNN_TWIN_PAD(elems) (((size_t)(elems) + 63) / 64 * 64)

typedef struct {
    const char *name;
    size_t bytes;
    size_t offset;
} snn_plan_entry;

/* The plan: each region's size and its offset in the arena. */
typedef struct {
    snn_plan_entry region[SNN_R_COUNT];
    size_t total;
} snn_plan;

void snn_plan_make(snn_plan *plan);
/* Under POOL and CUDA_ASYNC the plan also says what the strategy allocates each step. */
void snn_plan_print(const snn_plan *plan, FILE *out);
static inline void *snn_plan_at(const snn_plan *plan, void *base, enum snn_region r)
{
    return (char *)base + plan->region[r].offset;
}

#endif
