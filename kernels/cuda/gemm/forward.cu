/* The forward GEMM of a linear layer, y = relu?(x . W^T + b): one translation unit per role, so that a
 * board's GEMM kernels compile side by side (make -j). */
#include "kernels/cuda/gemm/run.cuh"

extern "C" void cuda_linear_forward(float *y, snn_twin *y16, const float *x, const snn_twin *x16, const float *w,
                                    const snn_twin *w16, const float *b, int M, int N, int K, int relu)
{
    /* A = X [M][K], B = W [N][K]: both K-major. */
    const GemmEpiBiasRelu epi = {y, snn_twin_ptr(y16), b, N, relu};
    gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16), K, M, N, K, epi);
}
