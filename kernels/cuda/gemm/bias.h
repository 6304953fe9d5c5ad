/* The bias half of the weight-gradient role (kernels/ops_proto.h): gb[n] = sum_m dy[m][n] and its update,
 * b[n] = snn_update(b[n], gb[n], sb at n) (kernels/optim.h), for n < N, on the engine's stream (gemm/bias.cu). */
#ifndef SNN_GEMM_BIAS_H
#define SNN_GEMM_BIAS_H

#include "kernels/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

void gemm_bias_update(float *b, snn_state sb, const float *dy, int M, int N, const snn_rate *rate);
/* gb[n] = sum_m dy[m * ldy + n] alone, summed as gemm_bias_update sums it. */
void gemm_bias_grad(float *gb, const float *dy, int ldy, int M, int N);

#ifdef __cplusplus
}
#endif
#endif
