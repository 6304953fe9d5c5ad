/* The grid-resident fused step (CONFIG_FUSED_GRID_RESIDENT, kernels/cuda/fused/grid_resident.cu): every block
 * of a cooperative grid keeps its share of each layer's weights and optimizer state in shared memory for a
 * whole launch; activations and gradients cross blocks through L2. The fused step's entry points
 * (fused/step.cu) hand a launch to it where it runs and the one-cluster kernel does not. */
#ifndef SNN_FUSED_GRID_RESIDENT_H
#define SNN_FUSED_GRID_RESIDENT_H

#include "kernels/fused.h"

#ifdef CONFIG_FUSED_GRID_RESIDENT
/* Whether this kernel trains this build's model on this GPU; where not, why, into why[len] (if why is not
 * NULL). */
bool fused_grid_resident_runs(char *why, int len);
/* Training steps first .. last - 1 of the epoch, one launch, asynchronous. */
void fused_grid_resident_train(const snn_fused_net &net, int first, int last);
/* The launch as one line: blocks, threads, shared memory, barriers per step. */
void fused_grid_resident_describe(char *buf, int len);
#endif

#endif
