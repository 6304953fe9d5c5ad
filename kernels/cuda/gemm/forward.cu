/* The forward GEMM of a linear layer, y = relu?(x . W^T + b), then a training step's dropout: one translation
 * unit per role, so that a board's GEMM kernels compile side by side (make -j). */
#include "arch/cuda/launch.cuh"
#include "kernels/cuda/gemm/run.cuh"
#include "kernels/cuda/gemm_dropout.h"
#include "kernels/noise.h"

/* A training step's draws where a replayed graph finds them: its epoch and step read from device memory
 * (read-only while the step's forward pass runs). */
struct DropoutDrawsAt {
    uint32_t key[2];
    const int32_t *epoch, *step;
};

/* The masks: bit e % 8 of byte e / 8 for element first + e of the layer's output, hidden layer l's at
 * dropout_mask[l % 2] (gemm_dropout.h). */
static uint8_t *dropout_mask[2];
static long dropout_mask_bytes; /* each */

extern "C" void cuda_gemm_dropout_bind(uint8_t *mask, long bytes)
{
    dropout_mask_bytes = mask ? bytes / 2 : 0;
    dropout_mask[0] = mask;
    dropout_mask[1] = mask ? mask + dropout_mask_bytes : NULL;
}

/* Where a forward GEMM's side job drew the next hidden layer's mask: that layer's next forward with dropout
 * over the same elements reads it instead of drawing its own. Any other forward call forgets it. */
static struct {
    int layer;
    long elems;
    uint32_t first;
} drawn_ahead = {-1, 0, 0};

/* Bytes of the mask of n elements from `first` of hidden layer `layer`, drawn in step `step` of epoch
 * `epoch` (snn_dropout_keeps), by warp `warp` of `warps`: in passes of MASK_PASS_BYTES, each lane makes one
 * Philox call (4 elements) and a byte takes its 8 bits from the two or three lanes whose calls it spans.
 * Lean enough for a GEMM producer's registers (gemm/side.cuh); warp-uniform, as its shuffles ask. */
constexpr uint32_t MASK_PASS_BYTES = 15; /* byte 14's third call is lane 30's */

static __device__ __forceinline__ void dropout_mask_warp(uint8_t *mask, uint32_t n, uint32_t first, int layer,
                                                         const uint32_t key[2], int32_t epoch, int32_t step,
                                                         uint32_t warp, uint32_t warps)
{
    const uint32_t lane = threadIdx.x % 32, k = lane < MASK_PASS_BYTES ? lane : 0; /* this lane's byte */
    for (uint32_t b0 = MASK_PASS_BYTES * warp; 8 * b0 < n; b0 += MASK_PASS_BYTES * warps) {
        const snn_philox_out r = snn_dropout_draws(key, epoch, step, layer, 4 * (first / 4 + 2 * b0 + lane));
        const uint32_t nibble = snn_dropout_word_keeps(r, 0) | snn_dropout_word_keeps(r, 1) << 1 |
                                snn_dropout_word_keeps(r, 2) << 2 | snn_dropout_word_keeps(r, 3) << 3;
        const uint32_t bits =
            (__shfl_sync(0xffffffffu, nibble, 2 * k) | __shfl_sync(0xffffffffu, nibble, 2 * k + 1) << 4 |
             __shfl_sync(0xffffffffu, nibble, 2 * k + 2) << 8) >>
            first % 4;
        const uint32_t e = 8 * (b0 + lane);
        if (lane < MASK_PASS_BYTES && e < n)
            mask[e / 8] = (uint8_t)(n - e < 8 ? bits & ((1u << (n - e)) - 1) : bits);
    }
}

/* The mask on every SM. */
static __global__ void dropout_mask_kernel(uint8_t *mask, uint32_t n, uint32_t first, int layer,
                                           DropoutDrawsAt at)
{
    snn_grid_wait();
    dropout_mask_warp(mask, n, first, layer, at.key, __ldg(at.epoch), __ldg(at.step),
                      (blockIdx.x * blockDim.x + threadIdx.x) / 32, gridDim.x * blockDim.x / 32);
}

/* The next hidden layer's mask beside a forward GEMM (gemm/side.cuh); mask NULL, nothing. Only beside the
 * small tile: in the config tile's kernel (128 x 256) ptxas spills the Philox rounds within the producer's
 * registers, so there the mask kernel runs. */
struct GemmSideDropoutMask {
    static constexpr bool ACTIVE = true, SMALL_TILE_ONLY = true;
    uint8_t *mask;
    uint32_t n, first;
    int layer;
    DropoutDrawsAt at;
    __device__ void operator()(int warp, int warps) const
    {
        if (!mask)
            return;
        dropout_mask_warp(mask, n, first, layer, at.key, __ldg(at.epoch), __ldg(at.step), warp, warps);
    }
};

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
    const int ahead_layer = drawn_ahead.layer;
    drawn_ahead.layer = -1;
    if constexpr (SNN_DROPOUT) {
        if (drop) {
            const snn_noise &n = drop->noise;
            const DropoutDrawsAt at = {{n.key[0], n.key[1]}, n.epoch, drop->step};
            const int layer = (int)drop->layer;
            const long elems = (long)M * N, bytes = (elems + 7) / 8, next_elems = (long)M * drop->next_width;
            const uint32_t first = (uint32_t)n.row0 * (uint32_t)N,
                           next_first = (uint32_t)n.row0 * (uint32_t)drop->next_width;
            uint8_t *mask = dropout_mask[layer % 2];
            if ((elems > next_elems ? elems : next_elems) > 8 * dropout_mask_bytes)
                snn_die(
                    "dropout's masks hold %ld elements each; a forward GEMM of %d x %d (the next %d wide) "
                    "needs more",
                    8 * dropout_mask_bytes, M, N, drop->next_width);
            const bool ahead =
                ahead_layer == layer && drawn_ahead.elems == elems && drawn_ahead.first == first;
            if (ahead)
                gemm_runs.masks_ahead++;
            else if (bytes > 0)
                SNN_LAUNCH(dropout_mask_kernel,
                           (unsigned)((bytes + 8 * MASK_PASS_BYTES - 1) / (8 * MASK_PASS_BYTES)), 256, 0,
                           mask, (uint32_t)elems, first, layer, at);
            const GemmEpiDropout<DropoutMaskAt> dropped =
                gemm_epi_dropout(epi, layer, first, DropoutMaskAt{mask, first});
            const GemmSideDropoutMask side = {next_elems > 0 ? dropout_mask[(layer + 1) % 2] : NULL,
                                              (uint32_t)next_elems, next_first, layer + 1, at};
            if (gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(
                    x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16), K, M, N, K, dropped, side) &&
                next_elems > 0)
                drawn_ahead = {layer + 1, next_elems, next_first};
            return;
        }
    }
    (void)ahead_layer;
    gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16), K, M, N,
                                                      K, epi);
}
