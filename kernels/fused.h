/* The fused training step (CONFIG_STEP_FUSED): one persistent kernel runs a
 * whole epoch (kernels/cuda/fused/step.cu). What it reads and writes is
 * handed over once per launch as one struct of device pointers: the model's
 * tensors (nn/model.h) and the few buffers only the fused step has. */
#ifndef SNN_FUSED_H
#define SNN_FUSED_H

#include <stdint.h>

#include "kernels/noise.h"
#include "kernels/optim.h"
#include "snn_config.h"

#ifdef CONFIG_STEP_FUSED

#ifdef __cplusplus
extern "C" {
#endif

/* Row tiles of the logits GEMM: one loss and correct count per tile and step. */
#define SNN_FUSED_ROW_TILES ((SNN_MAX_ROWS + CONFIG_GEMM_FUSED_BLOCK_M - 1) / CONFIG_GEMM_FUSED_BLOCK_M)

/* Split-K: a phase's GEMMs (at most 3) whose tiles leave blocks idle split k into slices; each slice's
 * partial tile goes to the GEMM's slot of the workspace, and the block that finishes a tile's last slice
 * adds them in slice order. The grid is at most SNN_FUSED_MAX_BLOCKS blocks, so is a split GEMM's
 * slices x tiles. */
#define SNN_FUSED_MAX_BLOCKS 264
#define SNN_FUSED_SPLIT_SLOTS 3
#define SNN_FUSED_SPLIT_FLOATS                                                                               \
    ((long)SNN_FUSED_SPLIT_SLOTS * SNN_FUSED_MAX_BLOCKS * CONFIG_GEMM_FUSED_BLOCK_M *                        \
     CONFIG_GEMM_FUSED_BLOCK_N)

/* The timeline of one step in %globaltimer ns, for tools/bin/bench_step: per phase p (0 .. 2L - 1),
 * clocks[p][b] each block b's end of the phase's work and clocks[p][SNN_FUSED_MAX_BLOCKS] block 0's
 * passing of the barrier after it; clocks[2L][SNN_FUSED_MAX_BLOCKS] the step's start. */
#define SNN_FUSED_CLOCKS ((2 * SNN_LAYERS + 1) * (SNN_FUSED_MAX_BLOCKS + 1))

/* The grid-resident step's workspace in L2 (kernels/cuda/fused/grid_resident.cu): the hidden layers' outputs
 * and output gradients as operands (16-bit, or TF32 and FP32 in 32 bits: SNN_GR_OP_BYTES), by row and by
 * unit; the normalised batch by pixel; each hidden-to-hidden layer's twin transposed; the logits' partial
 * sums, the dlogits, each row's loss and hit; where blocks share units (SNN_GR_SPLIT), layer 0's partial sums
 * by slice; the grid barrier's count of arrivals. Two of most, taken by step parity. Empty where the kernel
 * is not built, where its first need, each block's FP32 weights and moments of 8 units of every layer (of
 * layer 0, its slice of the inputs), cannot fit in shared memory, or where the batch exceeds a block's
 * threads: it never runs there. */
/* The one hidden width the resident kernels split across blocks; where there is none (no hidden layer, or
 * layers of different widths: they never run there) a placeholder that keeps their extents whole. */
#define SNN_RESIDENT_WIDTH (SNN_HIDDEN > 0 ? SNN_HIDDEN : 16)
#define SNN_GR_UNITS 8                                             /* hidden units a block owns */
#define SNN_GR_BLOCKS (((SNN_RESIDENT_WIDTH + 7) / 8 + 1) / 2 * 2) /* even: a 16-wide k extent */
#ifdef CONFIG_FUSED_GRID_RESIDENT_SPLIT
#define SNN_GR_SPLIT CONFIG_FUSED_GRID_RESIDENT_SPLIT /* blocks sharing each block's units */
#else
#define SNN_GR_SPLIT 1
#endif
#define SNN_GR_SLICE_KT ((SNN_INPUT_DIM / 16 + SNN_GR_SPLIT - 1) / SNN_GR_SPLIT) /* k16 steps of a slice */
#define SNN_GR_XP (SNN_GR_SLICE_KT * 16 * SNN_GR_SPLIT)   /* layer 0's inputs, padded to whole slices */
#define SNN_GR_HP (SNN_GR_BLOCKS * SNN_GR_UNITS)          /* the hidden width, padded */
#define SNN_GR_BP ((SNN_BATCH + 15) / 16 * 16)            /* the batch, padded */
#define SNN_GR_NH (SNN_LAYERS - 1)                        /* hidden layers */
#define SNN_GR_MIDS (SNN_LAYERS > 2 ? SNN_LAYERS - 2 : 0) /* hidden-to-hidden layers */
#define SNN_GR_R256(b) (((size_t)(b) + 255) / 256 * 256)
#if defined(CONFIG_PRECISION_TF32) || defined(CONFIG_PRECISION_FP32)
#define SNN_GR_OP_BYTES 4 /* an operand in L2: an FP32 word (in TF32 rounded) */
#else
#define SNN_GR_OP_BYTES 2 /* a 16-bit twin */
#endif
#define SNN_GR_STATE_BYTES                                                                                   \
    (SNN_GR_UNITS * (SNN_GR_SLICE_KT * 16 + SNN_GR_MIDS * SNN_GR_HP) * 4 * (1 + SNN_OPTIM_MOMENTS))
/* A block's shared memory where the kernel may run: an H100's, opted in, also for an sm80 build (which the
 * tests run on one); the launch asks the GPU whether its blocks fit. */
#define SNN_GR_SMEM_MAX (227 * 1024)
#if defined(CONFIG_FUSED_GRID_RESIDENT) && SNN_HIDDEN > 0 && SNN_GR_STATE_BYTES <= SNN_GR_SMEM_MAX &&        \
    SNN_GR_BP <= CONFIG_FUSED_GRID_RESIDENT_THREADS
#define SNN_GR_OPS(n) SNN_GR_R256(SNN_GR_OP_BYTES *(size_t)(n))
#define SNN_FUSED_GR_WS_BYTES                                                                                \
    (2 * SNN_GR_OPS((size_t)2 * SNN_GR_NH * SNN_GR_BP * SNN_GR_HP) +                                         \
     SNN_GR_OPS((size_t)SNN_GR_NH * SNN_GR_BP * SNN_GR_HP) + SNN_GR_OPS((size_t)2 * SNN_GR_XP * SNN_GR_BP) + \
     SNN_GR_OPS((size_t)2 * SNN_GR_MIDS * SNN_GR_HP * SNN_GR_HP) +                                           \
     SNN_GR_R256((size_t)(8 * SNN_GR_BLOCKS + 4) * SNN_GR_BP * 16) +                                         \
     2 * SNN_GR_R256((size_t)4 * SNN_GR_BP) +                                                                \
     SNN_GR_R256(SNN_GR_SPLIT > 1 ? (size_t)4 * SNN_GR_SPLIT * SNN_GR_BLOCKS * SNN_GR_BP * SNN_GR_UNITS      \
                                  : 0) +                                                                     \
     SNN_GR_R256(4))
#else
#define SNN_FUSED_GR_WS_BYTES 0
#endif

typedef struct {
    float *w, *b;
    snn_state sw, sb; /* as snn_layer */
} snn_fused_layer;

typedef struct {
    snn_fused_layer layer[SNN_LAYERS];
    float *act[SNN_LAYERS + 1]; /* outputs of layers 1..L, [SNN_MAX_ROWS][width]; act[0] unused */
    float *input[2];            /* two input batches [SNN_MAX_ROWS][784]: step s reads s % 2 while s + 1's is
                                 * gathered into the other */
    uint8_t *labels[2];         /* their labels */
    float *grad[SNN_LAYERS];    /* each layer's output gradient, [SNN_BATCH][its outputs] */
    double *part_loss;          /* [2][SNN_FUSED_ROW_TILES]: per row tile, for steps of each parity */
    int32_t *part_correct;      /* the same */
    float *split_ws;            /* SNN_FUSED_SPLIT_FLOATS */
    unsigned char *gr_ws;       /* SNN_FUSED_GR_WS_BYTES, 256-byte aligned */
    int32_t *split_count;       /* [SNN_FUSED_SPLIT_SLOTS][SNN_FUSED_MAX_BLOCKS], zero between uses */
    const uint8_t *train_images, *train_labels;
    const int32_t *order;          /* this epoch's sample order */
    float *train_loss, *eval_loss; /* per step, as the layered step writes them */
    int32_t *train_correct, *eval_correct;
    int32_t *train_step; /* set to the launch's last step + 1 */
    long long *clocks;   /* NULL, or SNN_FUSED_CLOCKS stamps of step clock_step (tools/bin/bench_step) */
    int clock_step;
    int trace;       /* the resident kernels (fused/cluster.cu, grid_resident.cu) keep a step's tensors on
                      * chip: nonzero, they also write them where the grid-wide kernel works on them (input,
                      * labels, act, grad), for tests/gpu/test_fused */
    snn_clock clock; /* the model's: the schedule's epoch and run length (kernels/optim.h) */
    snn_noise noise; /* the model's: the run's key for augmentation and dropout (kernels/noise.h) */
} snn_fused_net;

/* Training steps first .. last - 1 of the epoch, one launch, asynchronous. */
void cuda_fused_train(const snn_fused_net *net, int first, int last);
/* The per-step losses and correct counts of an evaluation set (`steps` batches of SNN_EVAL_BATCH images
 * and labels, in order) into eval_loss and eval_correct: one launch, asynchronous. */
void cuda_fused_evaluate(const snn_fused_net *net, const uint8_t *images, const uint8_t *labels, int steps);
/* Which fused kernel trains (kernels/cuda/fused/kernel.h): "cluster", "grid-resident" or "grid-wide". */
const char *cuda_fused_kernel_name(void);
/* Its launch as one line: the kernel, blocks, threads, barriers per step, and why each kernel before it in
 * the order of preference does not fit. */
void cuda_fused_describe(char *buf, int len);

#ifdef __cplusplus
}
#endif

#endif
#endif
