/* The forward GEMM of a linear layer, y = relu?(x . W^T + b), then a training step's dropout: one translation
 * unit per role, so that a board's GEMM kernels compile side by side (make -j). */
#include "arch/cuda/launch.cuh"
#include "kernels/cuda/gemm/run.cuh"
#include "kernels/cuda/gemm_dropout.h"
#include "kernels/noise.h"

/* A training step's draws where a replayed graph finds them: its epoch and step read from device memory
 * (read-only while the mask kernel runs). */
struct DropoutDrawsAt {
    uint32_t key[2];
    const int32_t *epoch, *step;
    __device__ __forceinline__ uint32_t keeps_run(int layer, uint32_t index, int n) const
    {
        return snn_dropout_keeps_run(key, __ldg(epoch), __ldg(step), layer, index, n);
    }
};

/* The mask: bit e % 8 of byte e / 8 for element first + e of the layer's output (gemm_dropout.h). */
static uint8_t *dropout_mask;
static long dropout_mask_bytes;

extern "C" void cuda_gemm_dropout_bind(uint8_t *mask, long bytes)
{
    dropout_mask = mask;
    dropout_mask_bytes = mask ? bytes : 0;
}

/* Bytes of the mask of n elements from `first` of hidden layer `layer`, a thread a byte: the same draws as
 * the epilogue's would be (snn_dropout_keeps_run), on every SM. */
static __global__ void dropout_mask_kernel(uint8_t *mask, long n, uint32_t first, int layer,
                                           DropoutDrawsAt at)
{
    snn_grid_wait();
    const long byte = blockIdx.x * (long)blockDim.x + threadIdx.x, e = 8 * byte;
    if (e < n)
        mask[byte] = (uint8_t)at.keeps_run(layer, first + (uint32_t)e, (int)(n - e < 8 ? n - e : 8));
}

/* The keep bits the forward epilogue reads (GemmEpiDropout's Draws): the mask's, element index - first. */
struct DropoutMaskAt {
    static constexpr bool READS = true;
    const uint8_t *mask;
    uint32_t first;
    /* n <= 32, as snn_dropout_keeps_run: the run's bits lie within five bytes, read no further than it */
    __device__ __forceinline__ uint32_t keeps_run(int, uint32_t index, int n) const
    {
        const uint32_t e = index - first, shift = e % 8;
        const uint8_t *p = mask + e / 8;
        uint64_t bits = p[0];
        for (int k = 1; 8 * k < (int)shift + n; k++)
            bits |= (uint64_t)p[k] << 8 * k;
        return (uint32_t)(bits >> shift & ((1ull << n) - 1));
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
            const long elems = (long)M * N, bytes = (elems + 7) / 8;
            const uint32_t first = (uint32_t)n.row0 * (uint32_t)N;
            if (bytes > dropout_mask_bytes)
                snn_die("dropout's mask holds %ld elements; a forward GEMM of %d x %d needs more",
                        8 * dropout_mask_bytes, M, N);
            if (bytes > 0)
                SNN_LAUNCH(dropout_mask_kernel, (unsigned)((bytes + 255) / 256), 256, 0, dropout_mask, elems,
                           first, (int)drop->layer, at);
            const GemmEpiDropout<DropoutMaskAt> dropped =
                gemm_epi_dropout(epi, drop->layer, first, DropoutMaskAt{dropout_mask, first});
            gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16),
                                                              K, M, N, K, dropped);
            return;
        }
    }
    gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16), K, M, N,
                                                      K, epi);
}
