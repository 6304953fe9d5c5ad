/* The weight-gradient GEMM alone: gW = dY^T X written as it is, without the
 * update that the engine's op (cuda_linear_backward_weight_update) applies
 * in its epilogue. The benchmarks time it against cuBLAS, whose GEMM has no
 * such epilogue, in the role's layouts and at the role's tile; the GPU tests
 * check it. It runs where the engine's op runs: on wgmma where that kernel
 * takes the GEMM, else at the weight-gradient tile, split-K alike. */
#ifndef SNN_WEIGHT_GRAD_H
#define SNN_WEIGHT_GRAD_H

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gw[N][K] = dY^T X for dy[M][N] and x[M][K] (M: the batch), with their
 * twins or NULL (kernels/ops_proto.h), on the engine's stream. */
void cuda_linear_weight_grad(float *gw, const float *dy, const snn_twin *dy16, const float *x, const snn_twin *x16,
                             int M, int N, int K);

#ifdef __cplusplus
}
#endif
#endif
