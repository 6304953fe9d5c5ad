/* The grid-wide fused kernel (fused/kernel.h): one cooperative kernel runs every step of an epoch, and
 * another the whole test set, with no host work inside; it trains any model the other fused kernels do not
 * fit, in every precision. A step is 2L phases (L linear layers) separated by grid-wide barriers; in each,
 * every block takes the phase's work items (GEMM block tiles, or k slices of them where the tiles alone would
 * leave blocks idle; bias columns) blockIdx.x, blockIdx.x + gridDim.x, ... and computes them with the layered
 * path's tile code (gemm_mma_tile, gemm_f32_tile) and epilogues, on the FP32 tensors rounded as staged:
 *
 *   F0 .. F(L-1)  forward layer l (bias, ReLU, dropout); F0 also gathers the next step's batch into the
 *                 other input buffer; F(L-1) ends each row tile with softmax, cross-entropy and dlogits
 *   B(L-1)        dX of layer L-1; the last block adds the step's per-tile losses in order
 *   B(l), l > 0   dX of layer l, and the weight gradient + update of layer l + 1 (its dX has read it)
 *   B0            the weight gradients + updates of layers 1 and 0
 *
 * Every buffer a phase reads is written by an earlier phase and rewritten by none of this one: the input
 * and its labels alternate by step parity, each layer's output gradient has its own buffer. Deterministic:
 * fixed tiles and slices for a grid size, fixed summation orders; the only atomics count a split tile's
 * finished slices (and the barrier's own). */
#include <stdint.h>
#include <stdio.h>

#include <algorithm>
#include <type_traits>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "kernels/cuda/gemm/bias.cuh"
#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/launch.cuh"
#include "kernels/cuda/fused/kernel.h"
#include "kernels/cuda/fused/stamp.cuh"
#include "kernels/cuda/fused/tile.cuh"
#include "kernels/cuda/gemm/tile.cuh"
#include "kernels/cuda/step_common.cuh"
#include "kernels/fused.h"
#ifdef CONFIG_GEMM_TENSOR_CORES
#include "kernels/cuda/gemm/mma.cuh"
#else
#include "kernels/cuda/gemm/simt.cuh"
#endif

namespace cg = cooperative_groups;

constexpr int FT_THREADS = FusedTile::THREADS;
/* Bias gradient items: BIAS_COLS columns, each summed by BIAS_SLICES threads over strided rows in the
 * layered bias kernel's order (gemm/bias.cuh; fused/tile.cuh checks that the slices divide the threads). */
constexpr int BIAS_SLICES = CONFIG_CUDA_BIAS_SLICES, BIAS_COLS = FT_THREADS / BIAS_SLICES;

/* Every tensor offset the GEMMs read is a multiple of 4 floats when the hidden width is (or there is no
 * hidden layer); the arena's regions and the fused buffers are 256-byte aligned. */
constexpr bool FUSED_OFFSETS4 = SNN_WIDTHS_MULTIPLE_OF(4);
#ifdef CONFIG_GEMM_TENSOR_CORES
constexpr bool FUSED_TRANSPOSES = false;
#else
constexpr bool FUSED_TRANSPOSES = true; /* the SIMT tiles are MN-major */
#endif
/* Floats per load of an operand in layout L with leading dimension LD, ROWS its tile's rows. */
template <int L, int ROWS, int LD>
constexpr bool FUSED_VEC4 = FUSED_OFFSETS4 &&
                            (LD % 4 == 0) && gemm_vec_allowed<FusedTile, L, ROWS, FUSED_TRANSPOSES>();
template <int L, int ROWS, int LD> constexpr int FUSED_VEC = FUSED_VEC4<L, ROWS, LD> ? 4 : 1;

/* Shared memory of one tile's ring, in the layouts (la, lb) of a role. */
template <int LA, int LB> constexpr int fused_ring_bytes()
{
#ifdef CONFIG_GEMM_TENSOR_CORES
    typedef GemmMmaRing<FusedTile, float, LA, LB> Ring;
    return Ring::STAGE_BYTES * Ring::STAGES;
#else
    return GEMM_SMEM_STAGES * FusedTile::stage_bytes(LA, LB);
#endif
}
constexpr int FUSED_SMEM =
    std::max({fused_ring_bytes<GEMM_K_MAJOR, GEMM_K_MAJOR>(), fused_ring_bytes<GEMM_K_MAJOR, GEMM_MN_MAJOR>(),
              fused_ring_bytes<GEMM_MN_MAJOR, GEMM_MN_MAJOR>()});

GEMM_HD constexpr int fused_tiles(int M, int N)
{
    return (M + FusedTile::BM - 1) / FusedTile::BM * ((N + FusedTile::BN - 1) / FusedTile::BN);
}
GEMM_HD constexpr int fused_bias_items(int N) { return (N + BIAS_COLS - 1) / BIAS_COLS; }

/* ---------------------------------------------------------------------------
 * work items
 * ------------------------------------------------------------------------- */

/* A k slice's partial tile, stored BM x BN from the tile's origin (m0, n0) at p. */
struct FusedEpiPartial {
    float *p;
    int m0, n0;
    static constexpr SnnTwin *twin = nullptr;
    static constexpr int ld = 0; /* no twin to index */
    typedef GemmEpiNothing In;
    __device__ __forceinline__ In load(int, int) const { return {}; }
    __device__ __forceinline__ float apply(int m, int n, float v, In) const
    {
        p[(m - m0) * FusedTile::BN + n - n0] = v;
        return v;
    }
    template <int V> using InV = GemmEpiNothing;
    template <int V> __device__ __forceinline__ bool vec_aligned() const
    {
        return FusedTile::BN % V == 0 && n0 % V == 0;
    }
    template <int V> __device__ __forceinline__ InV<V> loadv(int, int) const { return {}; }
    template <int V>
    __device__ __forceinline__ GemmFloats<V> applyv(int m, int n, GemmFloats<V> v, InV<V>) const
    {
        gemm_stv(p + (m - m0) * FusedTile::BN + n - n0, v);
        return v;
    }
};

/* epi, or epi followed by dropout of hidden layer `layer` where the build drops units and draws is given
 * (a training step): f called with the epilogue to use. */
template <class F>
static __device__ __forceinline__ auto fused_with_dropout(const GemmEpiBiasRelu &epi, int layer,
                                                          const SnnStepDraws *draws, F &&f)
{
    if constexpr (SNN_DROPOUT) {
        if (draws)
            return f(gemm_epi_dropout(epi, layer, 0, *draws));
    }
    return f(epi);
}

/* The k slices of a GEMM of `tiles` block tiles and k extent K: as many as keep the grid's blocks busy,
 * none empty, each at least CONFIG_FUSED_SLICE_KTILES k tiles deep (a slice's partial tile and its
 * share of the reduction cost some k tiles: docs/PERF.md). */
constexpr int FUSED_SLICE_KTILES = CONFIG_FUSED_SLICE_KTILES;
static __device__ __forceinline__ int fused_slices(int tiles, int K)
{
    const int ktiles = (K + FusedTile::BK - 1) / FusedTile::BK;
    const int want = max(1, min(ktiles / FUSED_SLICE_KTILES, (int)gridDim.x / tiles));
    const int per = (ktiles + want - 1) / want;
    return (ktiles + per - 1) / per;
}

/* Work items of C[M][N] = A . B^T over K: its tiles times their slices. */
static __device__ __forceinline__ int fused_items(int M, int N, int K)
{
    const int tiles = fused_tiles(M, N);
    return tiles * fused_slices(tiles, K);
}

/* Item `item` of C = A . B^T through epi (tile item / slices, slice item % slices; tiles row-major over
 * M x N). Split, the slice's partial tile goes to split slot `slot` and the block that completes a tile adds
 * its slices in order and applies epi. Whether this block completed the tile. */
template <int LA, int LB, int VA, int VB, class Epi>
static __device__ __forceinline__ bool fused_gemm_item(unsigned char *smem, const snn_fused_net &net,
                                                       int slot, const float *A, int lda, const float *B,
                                                       int ldb, int M, int N, int K, int item, const Epi &epi)
{
    constexpr int BM = FusedTile::BM, BN = FusedTile::BN, AREA = BM * BN;
    const int tiles = fused_tiles(M, N), slices = fused_slices(tiles, K);
    const int tile = item / slices, slice = item % slices, tiles_n = (N + BN - 1) / BN;
    const int m0 = tile / tiles_n * BM, n0 = tile % tiles_n * BN;
    const int ktiles = (K + FusedTile::BK - 1) / FusedTile::BK, per = (ktiles + slices - 1) / slices;
    const int kt0 = slice * per, kt1 = min(kt0 + per, ktiles);
    auto run = [&](const auto &e) {
#ifdef CONFIG_GEMM_TENSOR_CORES
        gemm_mma_tile<FusedTile, float, LA, LB, VA, VB, false>(smem, A, lda, B, ldb, M, N, K, m0, n0, kt0,
                                                               kt1, e);
#else
        gemm_f32_tile<FusedTile, LA, LB, VA, VB>(reinterpret_cast<float *>(smem), A, lda, B, ldb, M, N, K, m0,
                                                 n0, kt0, kt1, e);
#endif
        __syncthreads(); /* the ring is the next tile's */
    };
    if (slices == 1) {
        run(epi);
        return true;
    }
    float *ws = net.split_ws + (size_t)slot * SNN_FUSED_MAX_BLOCKS * AREA + (size_t)tile * slices * AREA;
    run(FusedEpiPartial{ws + (size_t)slice * AREA, m0, n0});
    __shared__ int last;
    __threadfence(); /* this block's partial sums before its count */
    __syncthreads();
    int32_t *count = net.split_count + slot * SNN_FUSED_MAX_BLOCKS + tile;
    if (threadIdx.x == 0)
        last = atomicAdd(count, 1) == slices - 1;
    __syncthreads();
    if (!last)
        return false;
    __threadfence(); /* the other slices' sums after their counts */
    for (int e = threadIdx.x; e < AREA; e += FT_THREADS) {
        const int m = m0 + e / BN, n = n0 + e % BN;
        if (m >= M || n >= N)
            continue;
        float v = 0.0f;
#pragma unroll 4
        for (int j = 0; j < slices; ++j)
            v += __ldcg(ws + (size_t)j * AREA + e);
        gemm_epi_one(epi, m, n, v, epi.load(m, n));
    }
    if (threadIdx.x == 0)
        *count = 0; /* for the next phase that splits in this slot, a barrier away */
    __syncthreads();
    return true;
}

/* Y[rows][OUT] = X . W^T + b (ReLU and, in a training step (draws given), dropout unless the last layer):
 * A = X, B = W, both K-major. */
template <int IN, int OUT>
static __device__ __forceinline__ bool fused_forward_item(unsigned char *smem, const snn_fused_net &net,
                                                          int l, const float *x, int rows,
                                                          const SnnStepDraws *draws, int item)
{
    const snn_fused_layer &L = net.layer[l];
    const bool hidden = l + 1 < SNN_LAYERS;
    const GemmEpiBiasRelu epi = {net.act[l + 1], nullptr, L.b, OUT, hidden};
    return fused_with_dropout(epi, l, hidden ? draws : nullptr, [&](const auto &e) {
        return fused_gemm_item<GEMM_K_MAJOR, GEMM_K_MAJOR, FUSED_VEC<GEMM_K_MAJOR, FusedTile::BM, IN>,
                               FUSED_VEC<GEMM_K_MAJOR, FusedTile::BN, IN>>(smem, net, 0, x, IN, L.w, IN, rows,
                                                                           OUT, IN, item, e);
    });
}

/* dX[rows][IN] = (dY . W) * (act > 0), then through the dropout of layer l's input (act, dropped out, is its
 * mask; the kept units' scale): A = dY K-major, B = W as [OUT][IN], MN-major. */
template <int IN, int OUT>
static __device__ __forceinline__ void fused_dgrad_item(unsigned char *smem, const snn_fused_net &net, int l,
                                                        int item)
{
    const GemmEpiReluMask epi = {net.grad[l - 1], nullptr, net.act[l], IN, SNN_DROPOUT_SCALE};
    fused_gemm_item<GEMM_K_MAJOR, GEMM_MN_MAJOR, FUSED_VEC<GEMM_K_MAJOR, FusedTile::BM, OUT>,
                    FUSED_VEC<GEMM_MN_MAJOR, FusedTile::BN, IN>>(
        smem, net, 0, net.grad[l], OUT, net.layer[l].w, IN, SNN_BATCH, IN, OUT, item, epi);
}

/* gW[OUT][IN] = dY^T . X -> the update at *rate: A = dY, B = X, both MN-major (k = the batch). */
template <int IN, int OUT>
static __device__ __forceinline__ void fused_wgrad_item(unsigned char *smem, const snn_fused_net &net,
                                                        const snn_rate *rate, int slot, int l, const float *x,
                                                        int item)
{
    const snn_fused_layer &L = net.layer[l];
    const GemmEpiUpdate epi = {L.w, nullptr, L.sw, IN, rate};
    fused_gemm_item<GEMM_MN_MAJOR, GEMM_MN_MAJOR, FUSED_VEC<GEMM_MN_MAJOR, FusedTile::BM, OUT>,
                    FUSED_VEC<GEMM_MN_MAJOR, FusedTile::BN, IN>>(smem, net, slot, net.grad[l], OUT, x, IN,
                                                                 OUT, IN, SNN_BATCH, item, epi);
}

/* Bias columns item * BIAS_COLS ..: gb = the sum over rows of dY, then b's update at *rate
 * (gemm/bias.cuh, the layered path's bias kernel's order for these slices). */
static __device__ __forceinline__ void fused_bias_item(const snn_fused_layer &L, const float *dy, int rows,
                                                       int out, const snn_rate *rate, int item)
{
    gemm_bias_update_columns<BIAS_COLS, BIAS_SLICES>(L.b, L.sb, dy, rows, out, rate, item * BIAS_COLS,
                                                     threadIdx.x % BIAS_COLS, threadIdx.x / BIAS_COLS);
    __syncthreads(); /* its shared sums are the next item's */
}

/* Softmax + cross-entropy of the logits' row tile `tile` (the block has just written it): each row's loss,
 * arg-max and (dlogits non-NULL) gradient by XENT_LANES adjacent threads (SnnRowSoftmax); the tile's loss sum
 * (in row order) and correct count into part_loss[tile], part_correct[tile]. */
constexpr int XENT_LANES = 4, XENT_PER = (SNN_CLASSES + XENT_LANES - 1) / XENT_LANES;
typedef SnnRowSoftmax<XENT_LANES, XENT_PER, false> FusedRowSoftmax; /* this kernel's order: doubling */
static_assert(FT_THREADS % XENT_LANES == 0, "fused step: threads per block a multiple of 4");
static __device__ __forceinline__ void fused_softmax_tile(const float *logits, const uint8_t *labels,
                                                          float *dlogits, int rows, int tile,
                                                          double *part_loss, int32_t *part_correct)
{
    __shared__ double s_loss[FusedTile::BM];
    __shared__ int s_correct[FusedTile::BM];
    const int r0 = tile * FusedTile::BM, lane = threadIdx.x % XENT_LANES;
    /* every thread takes part in the shuffles: the row index is uniform within a group of lanes */
    for (int i = threadIdx.x / XENT_LANES; i < FusedTile::BM; i += FT_THREADS / XENT_LANES) {
        const int r = r0 + i;
        const bool live = r < rows;
        const float *z = logits + (size_t)(live ? r : 0) * SNN_CLASSES;
        float v[XENT_PER];
#pragma unroll
        for (int j = 0; j < XENT_PER; ++j) {
            const int c = FusedRowSoftmax::class_of(j);
            v[j] = live && c < SNN_CLASSES ? z[c] : -INFINITY;
        }
        const FusedRowSoftmax sm(v);
        if (!live) {
            if (lane == 0) {
                s_loss[i] = 0.0;
                s_correct[i] = 0;
            }
            continue;
        }
        const int label = labels[r];
        if (dlogits)
#pragma unroll
            for (int j = 0; j < XENT_PER; ++j) {
                const int c = FusedRowSoftmax::class_of(j);
                if (c < SNN_CLASSES)
                    dlogits[(size_t)r * SNN_CLASSES + c] = sm.grad(j, label, rows);
            }
        if (lane == 0) {
            s_loss[i] = (double)sm.loss(z, label, dlogits != nullptr);
            s_correct[i] = sm.arg == label;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double loss = 0.0;
        int right = 0;
        for (int i = 0; i < FusedTile::BM; ++i) {
            loss += s_loss[i];
            right += s_correct[i];
        }
        part_loss[tile] = loss;
        part_correct[tile] = right;
    }
    __syncthreads();
}

/* loss[step], correct[step] from the row tiles' sums, added in tile order. */
static __device__ __forceinline__ void fused_step_figures(const double *part_loss,
                                                          const int32_t *part_correct, int rows, float *loss,
                                                          int32_t *correct, int step)
{
    if (threadIdx.x != 0)
        return;
    const int tiles = (rows + FusedTile::BM - 1) / FusedTile::BM;
    double sum = 0.0;
    int right = 0;
    for (int t = 0; t < tiles; ++t) {
        sum += part_loss[t];
        right += part_correct[t];
    }
    loss[step] = (float)(sum / rows);
    correct[step] = right;
}

/* Gathering batch `step` (rows of images by order, or in order where order is NULL) into x, normalised,
 * and its labels into y, translated where a training step augments (noise.epoch given): blocks from `from`
 * on share it, 4 pixels a thread (784 is 196 quads; x and the images' rows are 16- and 4-byte aligned). A
 * phase gives it to the blocks its tiles leave idle. */
static __device__ __forceinline__ void fused_gather(float *x, uint8_t *y, const uint8_t *images,
                                                    const uint8_t *labels, const int32_t *order, int step,
                                                    int rows, const snn_noise &noise, int from)
{
    static_assert(SNN_INPUT_DIM % 4 == 0, "fused gather: whole quads of pixels");
    constexpr int QUADS = SNN_INPUT_DIM / 4;
    if ((int)blockIdx.x < from)
        return;
    const long base = (long)step * rows;
    const int stride = (gridDim.x - from) * FT_THREADS;
    for (int i = (blockIdx.x - from) * FT_THREADS + threadIdx.x; i < rows * QUADS; i += stride) {
        const int row = i / QUADS, q = i % QUADS;
        const long r = snn_gather_sample(order, base, row);
        const uint8_t *px = images + r * SNN_INPUT_DIM;
        uchar4 p;
        if (snn_noise_translates(noise)) {
            const snn_shift sh = snn_shift_of(noise.key, *noise.epoch, step, row);
            p = make_uchar4(snn_shifted_pixel(px, 4 * q, sh), snn_shifted_pixel(px, 4 * q + 1, sh),
                            snn_shifted_pixel(px, 4 * q + 2, sh), snn_shifted_pixel(px, 4 * q + 3, sh));
        } else {
            p = *reinterpret_cast<const uchar4 *>(px + 4 * q);
        }
        auto norm = [](uint8_t c) { return snn_gather_pixel(c, SNN_PIXEL_MEAN, SNN_PIXEL_STD); };
        *reinterpret_cast<float4 *>(x + (size_t)row * SNN_INPUT_DIM + 4 * q) =
            make_float4(norm(p.x), norm(p.y), norm(p.z), norm(p.w));
        if (q == 0)
            y[row] = labels[r];
    }
}

/* The first block a phase of `items` work items leaves idle, or 0 where it leaves none. */
static __device__ __forceinline__ int fused_idle_from(int items)
{
    return items < (int)gridDim.x ? items : 0;
}

/* ---------------------------------------------------------------------------
 * phases
 * ------------------------------------------------------------------------- */

/* The widths of layer l as template arguments: where hidden-to-hidden layers share one shape, its kind is
 * first, hidden or last (the shapes a model has); else each layer its own (fused_with_layer). */
template <int N> using FusedInt = std::integral_constant<int, N>;
template <int L, class F> static __device__ __forceinline__ void fused_with_layer(int l, F &&f)
{
    if constexpr (L < SNN_LAYERS) {
        if (l == L)
            f(FusedInt<SNN_DIM(L)>(), FusedInt<SNN_DIM(L + 1)>());
        else
            fused_with_layer<L + 1>(l, f);
    }
}
template <class F> static __device__ __forceinline__ void fused_with_shape(int l, F &&f)
{
    if constexpr (!SNN_WIDTHS_UNIFORM || SNN_LAYERS < 3)
        fused_with_layer<0>(l, f);
    else if (l == 0)
        f(FusedInt<SNN_DIM(0)>(), FusedInt<SNN_DIM(1)>());
    else if (l == SNN_LAYERS - 1)
        f(FusedInt<SNN_DIM(SNN_LAYERS - 1)>(), FusedInt<SNN_CLASSES>());
    else
        f(FusedInt<SNN_HIDDEN>(), FusedInt<SNN_HIDDEN>());
}

/* Forward layer l over `rows` rows of x; the last layer's row tiles end with their softmax (dlogits: the
 * training step's gradient, or NULL) into the partial sums `part`, by the block that completes the tile.
 * draws: a training step's dropout, or NULL. Its work items. */
static __device__ int fused_forward_phase(unsigned char *smem, const snn_fused_net &net, int l,
                                          const float *x, const uint8_t *labels, float *dlogits, int rows,
                                          const SnnStepDraws *draws, double *part_loss, int32_t *part_correct)
{
    int items;
    fused_with_shape(l, [&](auto in, auto out) {
        constexpr int IN = decltype(in)::value, OUT = decltype(out)::value;
        const int tiles = fused_tiles(rows, OUT), slices = fused_slices(tiles, IN);
        items = tiles * slices;
        for (int i = blockIdx.x; i < items; i += gridDim.x)
            if (fused_forward_item<IN, OUT>(smem, net, l, x, rows, draws, i) && l == SNN_LAYERS - 1)
                fused_softmax_tile(net.act[l + 1], labels, dlogits, rows, i / slices, part_loss,
                                   part_correct);
    });
    return items;
}

/* The work items of layer l's weight gradient + update: its GEMM's items, then its bias columns; and item
 * `item` of them, a split GEMM's slices in split slot `slot`. */
static __device__ int fused_update_items(int l)
{
    return fused_items(SNN_DIM(l + 1), SNN_DIM(l), SNN_BATCH) + fused_bias_items(SNN_DIM(l + 1));
}
static __device__ void fused_update_item(unsigned char *smem, const snn_fused_net &net, const snn_rate *rate,
                                         int slot, int l, const float *x, int item)
{
    fused_with_shape(l, [&](auto in, auto out) {
        constexpr int IN = decltype(in)::value, OUT = decltype(out)::value;
        const int gemm = fused_items(OUT, IN, SNN_BATCH);
        if (item < gemm)
            fused_wgrad_item<IN, OUT>(smem, net, rate, slot, l, x, item);
        else
            fused_bias_item(net.layer[l], net.grad[l], SNN_BATCH, OUT, rate, item - gemm);
    });
}

/* Backward phase B(l) of a step whose input is x0 (see the file's opening comment); split slots: 0 the
 * input gradient, 1 the upper layer's update, 2 layer 0's. */
static __device__ void fused_backward_phase(unsigned char *smem, const snn_fused_net &net,
                                            const snn_rate *rate, int l, const float *x0)
{
    const int dgrad = l > 0 ? fused_items(SNN_BATCH, SNN_DIM(l), SNN_DIM(l + 1)) : 0;
    const int upper = l + 1 < SNN_LAYERS ? fused_update_items(l + 1) : 0;
    const int lower = l == 0 ? fused_update_items(0) : 0;
    for (int i = blockIdx.x; i < dgrad + upper + lower; i += gridDim.x) {
        if (i < dgrad)
            fused_with_shape(l, [&](auto in, auto out) {
                fused_dgrad_item<decltype(in)::value, decltype(out)::value>(smem, net, l, i);
            });
        else if (i < dgrad + upper)
            fused_update_item(smem, net, rate, 1, l + 1, net.act[l + 1], i - dgrad);
        else
            fused_update_item(smem, net, rate, 2, 0, x0, i - dgrad - upper);
    }
}

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

__global__ void __launch_bounds__(FT_THREADS, 1) fused_train_kernel(snn_fused_net net, int first, int last)
{
    extern __shared__ __align__(16) unsigned char fused_smem[];
    __shared__ snn_rate rate; /* the step's, read by its updates after the forward phases' barriers */
    cg::grid_group grid = cg::this_grid();
    fused_gather(net.input[first % 2], net.labels[first % 2], net.train_images, net.train_labels, net.order,
                 first, SNN_BATCH, net.noise, 0);
    grid.sync();
    const int32_t epoch = *net.clock.epoch;
    for (int s = first; s < last; ++s) {
        fused_stamp(net, s, 2 * SNN_LAYERS, true);
        if (threadIdx.x == 0)
            rate = snn_clock_rate_at(net.clock, s);
        const int p = s % 2;
        const SnnStepDraws draws = {{net.noise.key[0], net.noise.key[1]}, epoch, s};
        double *part_loss = net.part_loss + p * SNN_FUSED_ROW_TILES;
        int32_t *part_correct = net.part_correct + p * SNN_FUSED_ROW_TILES;
        for (int l = 0; l < SNN_LAYERS; ++l) {
            const int items =
                fused_forward_phase(fused_smem, net, l, l ? net.act[l] : net.input[p], net.labels[p],
                                    net.grad[SNN_LAYERS - 1], SNN_BATCH, &draws, part_loss, part_correct);
            if (l == 0 && s + 1 < last)
                fused_gather(net.input[p ^ 1], net.labels[p ^ 1], net.train_images, net.train_labels,
                             net.order, s + 1, SNN_BATCH, net.noise, fused_idle_from(items));
            fused_stamp(net, s, l, false);
            grid.sync();
            fused_stamp(net, s, l, true);
        }
        for (int l = SNN_LAYERS - 1; l >= 0; --l) {
            if (l == SNN_LAYERS - 1 && blockIdx.x == gridDim.x - 1)
                fused_step_figures(part_loss, part_correct, SNN_BATCH, net.train_loss, net.train_correct, s);
            fused_backward_phase(fused_smem, net, &rate, l, net.input[p]);
            fused_stamp(net, s, 2 * SNN_LAYERS - 1 - l, false);
            grid.sync();
            fused_stamp(net, s, 2 * SNN_LAYERS - 1 - l, true);
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *net.train_step = last;
}

__global__ void __launch_bounds__(FT_THREADS, 1)
    fused_eval_kernel(snn_fused_net net, const uint8_t *images, const uint8_t *labels, int steps)
{
    extern __shared__ __align__(16) unsigned char fused_smem[];
    cg::grid_group grid = cg::this_grid();
    const int E = SNN_EVAL_BATCH;
    const snn_noise none = {}; /* evaluation: the images as they are, every unit */
    fused_gather(net.input[0], net.labels[0], images, labels, nullptr, 0, E, none, 0);
    grid.sync();
    for (int s = 0; s < steps; ++s) {
        const int p = s % 2;
        for (int l = 0; l < SNN_LAYERS; ++l) {
            const int items = fused_forward_phase(
                fused_smem, net, l, l ? net.act[l] : net.input[p], net.labels[p], nullptr, E, nullptr,
                net.part_loss + p * SNN_FUSED_ROW_TILES, net.part_correct + p * SNN_FUSED_ROW_TILES);
            if (l == 0) {
                if (s + 1 < steps)
                    fused_gather(net.input[p ^ 1], net.labels[p ^ 1], images, labels, nullptr, s + 1, E, none,
                                 fused_idle_from(items));
                if (s > 0 && blockIdx.x == gridDim.x - 1)
                    fused_step_figures(net.part_loss + (p ^ 1) * SNN_FUSED_ROW_TILES,
                                       net.part_correct + (p ^ 1) * SNN_FUSED_ROW_TILES, E, net.eval_loss,
                                       net.eval_correct, s - 1);
            }
            grid.sync();
        }
    }
    const int p = (steps - 1) % 2;
    if (blockIdx.x == gridDim.x - 1)
        fused_step_figures(net.part_loss + p * SNN_FUSED_ROW_TILES,
                           net.part_correct + p * SNN_FUSED_ROW_TILES, E, net.eval_loss, net.eval_correct,
                           steps - 1);
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

/* Blocks the GPU holds at once for `kernel`, and the grid: CONFIG_FUSED_BLOCKS, or one per SM; at most
 * SNN_FUSED_MAX_BLOCKS (the split-K workspace's bound). */
static int fused_blocks(const void *kernel, int *resident)
{
    static bool opted_in[2];
    const int which = kernel == (const void *)fused_train_kernel;
    /* always: the kernel's static shared memory (the softmax partials) counts against the 48 KB a block gets
     * without it, so a ring of 48 KB or a little less would not fit (make tune found one) */
    if (!opted_in[which]) {
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, FUSED_SMEM));
        opted_in[which] = true;
    }
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, FT_THREADS, FUSED_SMEM));
    if (per_sm < 1)
        snn_die("the fused step's blocks (%d threads, %d B of shared memory) do not fit on an SM: shrink the "
                "Fused step GEMM tile or CONFIG_GEMM_STAGES",
                FT_THREADS, FUSED_SMEM);
    *resident = per_sm * gemm_sm_count();
    const int want = CONFIG_FUSED_BLOCKS ? CONFIG_FUSED_BLOCKS : gemm_sm_count();
    return std::min({want, *resident, SNN_FUSED_MAX_BLOCKS});
}

static void fused_launch(const void *kernel, void **args)
{
    int resident;
    const int blocks = fused_blocks(kernel, &resident);
    CUDA_CHECK(cudaLaunchCooperativeKernel(kernel, blocks, FT_THREADS, args, FUSED_SMEM, snn_stream()));
    CUDA_CHECK_LAUNCH();
}

/* The 4-float loads FUSED_VEC allows assume 16-byte aligned tensors. */
static void fused_check_alignment(const snn_fused_net &net)
{
    const void *p[] = {net.input[0],   net.input[1],         net.act[1],
                       net.layer[0].w, net.layer[0].sw.m[0], net.layer[0].sw.m[1]};
    for (const void *q : p)
        if ((uintptr_t)q % 16)
            snn_die("fused step: a tensor at %p is not 16-byte aligned (internal error)", q);
    for (const float *g : net.grad)
        if ((uintptr_t)g % 16)
            snn_die("fused step: a gradient buffer at %p is not 16-byte aligned (internal error)",
                    (const void *)g);
}

void fused_grid_wide_evaluate(const snn_fused_net &net, const uint8_t *images, const uint8_t *labels,
                              int steps)
{
    fused_check_alignment(net);
    snn_fused_net n = net;
    void *args[] = {&n, &images, &labels, &steps};
    fused_launch((const void *)fused_eval_kernel, args);
}

namespace grid_wide
{

static bool fits(char *, int) { return true; }

static void train(const snn_fused_net &net, int first, int last)
{
    fused_check_alignment(net);
    snn_fused_net n = net;
    void *args[] = {&n, &first, &last};
    fused_launch((const void *)fused_train_kernel, args);
}

static void describe(char *buf, int len)
{
    int resident;
    const int blocks = fused_blocks((const void *)fused_train_kernel, &resident);
    snprintf(
        buf, len,
        "%d blocks of %d threads (%s; %d fit at once), %d KB shared memory each, %d grid barriers per step",
        blocks, FT_THREADS, CONFIG_FUSED_BLOCKS ? "CONFIG_FUSED_BLOCKS" : "one per SM", resident,
        (FUSED_SMEM + 1023) / 1024, 2 * SNN_LAYERS);
}

} // namespace grid_wide

const FusedKernel fused_grid_wide = {"grid-wide", grid_wide::fits, grid_wide::train, grid_wide::describe};
