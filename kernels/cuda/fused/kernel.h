/* The fused step's kernels, one interface: the entry points (fused/step.cu) walk FUSED_KERNELS in order and
 * hand a launch to the first that fits this build's model on this GPU. Each kernel file holds one schedule:
 * how a step's phases are split across blocks and which barrier separates them. */
#ifndef SNN_FUSED_KERNEL_H
#define SNN_FUSED_KERNEL_H

#include "kernels/fused.h"

struct FusedKernel {
    const char *name;
    /* Whether it trains this build's model on this GPU; where not, why, into why[len]. */
    bool (*fits)(char *why, int len);
    /* Training steps first .. last - 1 of the epoch, one launch, asynchronous. */
    void (*train)(const snn_fused_net &net, int first, int last);
    /* The launch as one line: blocks, threads, shared memory, barriers per step. */
    void (*describe)(char *buf, int len);
};

#ifdef CONFIG_FUSED_CLUSTER
extern const FusedKernel fused_cluster; /* the model in one cluster's shared memory (fused/cluster.cu) */
#endif
#ifdef CONFIG_FUSED_GRID_RESIDENT
extern const FusedKernel fused_grid_resident; /* the model in the grid's shared memory (grid_resident.cu) */
#endif
extern const FusedKernel
    fused_grid_wide; /* GEMM tiles between grid barriers (fused/grid_wide.cu); always fits */
/* A resident kernel's describe: its grid, `blocks` blocks after `grid` ("one cluster of ", or ""), of
 * `threads` threads each, the model in `smem` bytes of each block's shared memory, `units` of each hidden
 * layer a block, `syncs` of what names a step's synchronisations ("exchange", "grid barrier") a step. */
void fused_describe_resident(char *buf, int len, const char *grid, int blocks, int threads, int smem,
                             int units, int syncs, const char *sync);
/* The per-step losses and correct counts of an evaluation set: the grid-wide kernel's forward phases
 * (cuda_fused_evaluate). */
void fused_grid_wide_evaluate(const snn_fused_net &net, const uint8_t *images, const uint8_t *labels,
                              int steps);

#endif
