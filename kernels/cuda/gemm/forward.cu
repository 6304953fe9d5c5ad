/* The forward GEMM of a linear layer, y = relu?(x . W^T + b), then a training step's dropout: one translation
 * unit per role, so that a board's GEMM kernels compile side by side (make -j). */
#include "arch/cuda/launch.cuh"
#include "kernels/cuda/gemm/run.cuh"
#include "kernels/cuda/dropout_mask.cuh"
#include "kernels/cuda/gemm_dropout.h"
#include "kernels/noise.h"

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

/* The mask a job drew beside other work (a forward GEMM's side job, the gather; mask NULL: none): the next
 * forward call, where it has dropout and its own job is that one (the same layer, elements and draws), reads
 * it instead of drawing its own. Any forward call forgets it. */
static DropoutMaskJob drawn_ahead;

static bool same_job(const DropoutMaskJob &a, const DropoutMaskJob &b)
{
    return a.mask == b.mask && a.n == b.n && a.first == b.first && a.layer == b.layer &&
           a.key[0] == b.key[0] && a.key[1] == b.key[1] && a.epoch == b.epoch && a.step == b.step;
}

/* The job that draws hidden layer `layer`'s mask for `rows` rows of `width` units, from row noise.row0 of
 * the batch (snn_drop), in the step of noise.epoch and step; no mask where it would not fit. */
static DropoutMaskJob mask_job(const snn_noise &noise, const int32_t *step, int layer, int rows, int width)
{
    const long elems = (long)rows * width;
    if (elems <= 0 || elems > 8 * dropout_mask_bytes)
        return DropoutMaskJob{};
    return {dropout_mask[layer % 2],
            (uint32_t)elems,
            (uint32_t)noise.row0 * (uint32_t)width,
            layer,
            {noise.key[0], noise.key[1]},
            noise.epoch,
            step};
}

DropoutMaskJob cuda_dropout_mask_ahead(const snn_noise &noise, const int32_t *step, int layer, int rows,
                                       int width)
{
    const DropoutMaskJob job = SNN_DROPOUT ? mask_job(noise, step, layer, rows, width) : DropoutMaskJob{};
    drawn_ahead = job;
    return job;
}

/* The mask on every SM. */
static __global__ void dropout_mask_kernel(DropoutMaskJob job)
{
    snn_grid_wait();
    job.draw((blockIdx.x * blockDim.x + threadIdx.x) / 32, gridDim.x * blockDim.x / 32);
}

/* The next hidden layer's mask beside a forward GEMM (gemm/side.cuh); job.mask NULL, nothing. Only beside
 * the small tile: in the config tile's kernel (128 x 256) ptxas spills the Philox rounds within the
 * producer's registers, so there the mask kernel runs. */
struct GemmSideDropoutMask {
    static constexpr bool ACTIVE = true, SMALL_TILE_ONLY = true;
    DropoutMaskJob job;
    __device__ void operator()(int warp, int warps) const { job.draw(warp, warps); }
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
    const DropoutMaskJob ahead = drawn_ahead;
    drawn_ahead = DropoutMaskJob{};
    if constexpr (SNN_DROPOUT) {
        if (drop) {
            const snn_noise &n = drop->noise;
            const int layer = (int)drop->layer;
            if ((long)M * (N > drop->next_width ? N : drop->next_width) > 8 * dropout_mask_bytes)
                snn_die(
                    "dropout's masks hold %ld elements each; a forward GEMM of %d x %d (the next %d wide) "
                    "needs more",
                    8 * dropout_mask_bytes, M, N, drop->next_width);
            const DropoutMaskJob own = mask_job(n, drop->step, layer, M, N);
            if (own.mask && same_job(ahead, own))
                gemm_runs.masks_ahead++;
            else if (own.mask) /* a pass a warp, 8 warps a block */
                SNN_LAUNCH(dropout_mask_kernel,
                           (unsigned)(((long)own.n + 64 * MASK_PASS_BYTES - 1) / (64 * MASK_PASS_BYTES)), 256,
                           0, own);
            const GemmEpiDropout<DropoutMaskAt> dropped =
                gemm_epi_dropout(epi, layer, own.first, DropoutMaskAt{dropout_mask[layer % 2], own.first});
            const GemmSideDropoutMask side = {mask_job(n, drop->step, layer + 1, M, drop->next_width)};
            if (gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(
                    x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16), K, M, N, K, dropped, side) &&
                side.job.mask)
                drawn_ahead = side.job;
            return;
        }
    }
    (void)ahead;
    gemm_run<GemmTileFwd, GEMM_K_MAJOR, GEMM_K_MAJOR>(x, snn_twin_ptr(x16), K, w, snn_twin_ptr(w16), K, M, N,
                                                      K, epi);
}
