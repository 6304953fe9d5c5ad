/* The weight gradient of a linear layer, dy^T . x, with the optimizer's update fused into its epilogue, and
 * alone (stored: data parallelism, the tests and the tools; in BF16, data parallelism's all-reduce): one GEMM
 * kernel, one translation unit. The bias gradient (and update) beside it: on wgmma in the GEMM's idle
 * producer warps (GemmSideBias), else in a kernel of its own; the same sums either way. */
#include "kernels/cuda/gemm/run.cuh"
#include "kernels/cuda/gemm_bf16_grad.h"

extern "C" void cuda_linear_backward_weight_update(float *w, snn_twin *w16, snn_state sw, float *b, snn_state sb,
                                                   const float *dy, const snn_twin *dy16, const float *x,
                                                   const snn_twin *x16, int M, int N, int K, const snn_rate *rate)
{
    /* GEMM (m, n, k) = (N, K, M), the batch reduced: A = dY [M][N] is k x m, B = X [M][K] is k x n: both
     * MN-major. */
    const GemmEpiUpdate epi = {w, snn_twin_ptr(w16), sw, K, rate};
    const GemmSideBias<true> bias = {b, sb, rate, dy, N, M, N};
    const bool summed = gemm_run<GemmTileWgrad, GEMM_MN_MAJOR, GEMM_MN_MAJOR, true>(
        dy, snn_twin_ptr(dy16), N, x, snn_twin_ptr(x16), K, N, K, M, epi, bias);
    if (b && N > 0 && !summed)
        gemm_bias_update(b, sb, dy, M, N, rate);
}

extern "C" void cuda_linear_backward_weight(float *gw, float *gb, const float *dy, const snn_twin *dy16, int ldy,
                                            const float *x, const snn_twin *x16, int M, int N, int K)
{
    /* the GEMM of cuda_linear_backward_weight_update, stored */
    const GemmSideBias<false> bias = {gb, {{nullptr, nullptr}}, nullptr, dy, ldy, M, N};
    const bool summed = gemm_run<GemmTileWgrad, GEMM_MN_MAJOR, GEMM_MN_MAJOR, true>(
        dy, snn_twin_ptr(dy16), ldy, x, snn_twin_ptr(x16), K, N, K, M, GemmEpiStore{gw, K}, bias);
    if (gb && N > 0 && !summed)
        gemm_bias_grad(gb, dy, ldy, M, N);
}

#ifdef CONFIG_DP_REDUCE_BF16
extern "C" void cuda_linear_backward_weight_bf16(uint16_t *gw16, float *gb, const float *dy,
                                                 const snn_twin *dy16, int ldy, const float *x,
                                                 const snn_twin *x16, int M, int N, int K)
{
    const GemmSideBias<false> bias = {gb, {{nullptr, nullptr}}, nullptr, dy, ldy, M, N};
    const bool summed = gemm_run<GemmTileWgrad, GEMM_MN_MAJOR, GEMM_MN_MAJOR, true>(
        dy, snn_twin_ptr(dy16), ldy, x, snn_twin_ptr(x16), K, N, K, M,
        GemmEpiStoreBf16{(__nv_bfloat16 *)gw16, K}, bias);
    if (gb && N > 0 && !summed)
        gemm_bias_grad(gb, dy, ldy, M, N);
}
#endif
