/* The bias half of the weight-gradient role (kernels/ops_proto.h): gb[n] = sum_m dy[m][n] and its SGD update
 * with momentum, b -= lr * (vb = mu * vb + gb), for n < N, on the engine's stream (gemm/bias.cu). */
#ifndef SNN_GEMM_BIAS_H
#define SNN_GEMM_BIAS_H

#ifdef __cplusplus
extern "C" {
#endif

void gemm_bias_sgd(float *b, float *vb, const float *dy, int M, int N, float lr, float mu);

#ifdef __cplusplus
}
#endif
#endif
