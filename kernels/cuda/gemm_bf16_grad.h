/* Data parallelism's weight gradient as its BF16 all-reduce sends it (CONFIG_DP_REDUCE_BF16): the GEMM of
 * cuda_linear_backward_weight, its result rounded to BF16 (to nearest even) in the epilogue and the bits
 * written to gw16, instead of FP32 to gw and a copy to BF16 after it: 2 bytes a gradient instead of 4 + 4 + 2
 * (docs/PERF.md v45). The same bits as the copy's. The bias gradient gb (NULL: none) in FP32, as there. */
#ifndef SNN_GEMM_BF16_GRAD_H
#define SNN_GEMM_BF16_GRAD_H

#include <stdint.h>

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CONFIG_DP_REDUCE_BF16
void cuda_linear_backward_weight_bf16(uint16_t *gw16, float *gb, const float *dy, const snn_twin *dy16,
                                      int ldy, const float *x, const snn_twin *x16, int M, int N, int K);
#endif

#ifdef __cplusplus
}
#endif
#endif
