/* The forward GEMM of a linear layer, y = relu?(x . W^T + b), then a training step's dropout: one translation
 * unit per role, so that a board's GEMM kernels compile side by side (make -j). */
#include "kernels/cuda/gemm/run.cuh"
#include "kernels/noise.h"

/* A training step's draws where a replayed graph finds them: its epoch and step read from device memory
 * (read-only while the GEMM runs). */
struct DropoutDrawsAt {
    uint32_t key[2];
    const int32_t *epoch, *step;
    __device__ __forceinline__ uint32_t keeps_run(int layer, uint32_t index, int n) const
    {
        return snn_dropout_keeps_run(key, __ldg(epoch), __ldg(step), layer, index, n);
    }
};

extern "C" void cuda_linear_forward(float *y, snn_twin *y16, const float *x, const snn_twin *x16,
                                    const float *w, const snn_twin *w16, const float *b, int M, int N, int K,
                                    int relu, const snn_drop *drop)
{
    /* A = X [M][K], B = W [N][K]: both K-major. */
    const GemmEpiBiasRelu epi = {y, snn_twin_ptr(y16), b, N, relu};
    if constexpr (SNN_DROPOUT) {
        if (drop) {
            const snn_noise &n = drop->noise;
            const DropoutDrawsAt at = {{n.key[0], n.key[1]}, n.epoch, drop->step};
            const GemmEpiDropout<DropoutDrawsAt> dropped =
                gemm_epi_dropout(epi, drop->layer, (uint32_t)n.row0 * (uint32_t)N, at);
            gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16),
                                                              K, M, N, K, dropped);
            return;
        }
    }
    gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16), K, M, N,
                                                      K, epi);
}
