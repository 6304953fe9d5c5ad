/* The resident fused step (CONFIG_FUSED_CLUSTER, kernels/cuda/fused/resident.cu): the model and its
 * optimizer state held in the shared memory of one thread-block cluster for a whole launch. The fused
 * step's entry points (fused/step.cu) hand a launch to it where it runs, to the grid-wide kernel otherwise. */
#ifndef SNN_FUSED_RESIDENT_H
#define SNN_FUSED_RESIDENT_H

#include "kernels/fused.h"

#ifdef CONFIG_FUSED_CLUSTER
/* Whether the resident kernel trains this build's model on this GPU; where not, why, into why[len] (if
 * why is not NULL). */
bool fused_resident_runs(char *why, int len);
/* Training steps first .. last - 1 of the epoch, one launch, asynchronous. */
void fused_resident_train(const snn_fused_net &net, int first, int last);
/* The launch as one line: cluster, threads, shared memory, barriers per step. */
void fused_resident_describe(char *buf, int len);
#endif

#endif
