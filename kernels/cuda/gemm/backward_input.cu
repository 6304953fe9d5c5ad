/* The input gradient of a linear layer, dx = (dy . W) masked by the ReLU (and a dropout's scale): its own
 * translation unit, as each role's. */
#include "kernels/cuda/gemm/run.cuh"

extern "C" void cuda_linear_backward_input(float *dx, snn_twin *dx16, const float *dy, const snn_twin *dy16,
                                           const float *w, const snn_twin *w16, const float *act, float scale,
                                           int M, int N, int K)
{
    /* GEMM (m, n, k) = (M, K, N): A = dY [M][N], K-major; B = W [N][K] is k x n, MN-major. */
    const GemmEpiReluMask epi = {dx, snn_twin_ptr(dx16), act, K, scale};
    gemm_run<GemmTileDgrad, GEMM_K_MAJOR, GEMM_MN_MAJOR>(dy, snn_twin_ptr(dy16), N, w, snn_twin_ptr(w16), K,
                                                         M, K, N, epi);
}
