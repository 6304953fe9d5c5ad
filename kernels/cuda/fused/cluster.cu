/* The cluster kernel of the fused step (CONFIG_FUSED_CLUSTER, sm90; fused/kernel.h): where a model with
 * hidden layers and its optimizer state fit in the shared memory of one cluster of BLOCKS thread blocks, that
 * cluster runs every step of a launch with the weights on chip, loaded at the launch's start and written back
 * at its end.
 *
 * Block c owns hidden units [c U, c U + U) of every hidden layer: layer 0's weight rows of those units (its
 * output units) and every later layer's weight columns of them (its input units). A step:
 *
 *   F0         layer 0's forward for the block's units: local (each block holds the whole batch, its bytes
 *              copied in by cp.async during the step before; F0 normalises them, once, into 16-bit operands
 *              that B0 reads back)
 *   F(l), l>0  the product of the block's units with its weight columns, a partial sum of layer l's output
 *              -> a cluster barrier -> each block adds the cluster's partials of its own units (a hidden
 *              layer) or of the logits of its sixteenth of the batch's rows (the last layer), whose softmax
 *              and dlogits it computes -> a second barrier -> every block gathers every row's dlogits
 *   B(l), l>0  the block's units' input gradient (dY . its weight columns) and its weight columns' update
 *              (dY^T . its units); where layer l - 1 has an input gradient of its own to compute, the
 *              gradient's slices are exchanged through a cluster barrier, since every block needs all of it,
 *              and the update runs between the block's arrival and its wait
 *   B0         layer 0's weight gradient + update: local
 *
 * so 2L - 2 cluster barriers a step for L linear layers, and no block reads another's weights. Partials and
 * gradient slices travel through distributed shared memory in two exchange buffers taken in turn: a buffer
 * is rewritten two exchanges later, after a barrier that every reader of it has passed. What a block reads
 * of its peers is kept small: the SM-to-SM network of one cluster moves only a few hundred GB/s (every block
 * summing every logit cost 3 us a step on 784-128-10 b64). The GEMMs are
 * mma.sync m16n8k16 on 16-bit operands in shared memory with FP32 accumulators; master weights and optimizer
 * state in FP32, their 16-bit twins beside them (layer 0's rounded as F0 reads them), rounded as the
 * grid-wide kernel rounds its operands. Deterministic: a fixed split of the work and fixed orders of
 * summation. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include <type_traits>

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "arch/cuda/target.h"
#include "arch/sm80/cp_async.cuh"
#include "arch/sm80/mma.cuh"
#include "kernels/cuda/fused/kernel.h"
#include "kernels/cuda/fused/mma16.cuh"
#include "kernels/cuda/fused/resident.cuh"
#include "kernels/cuda/fused/stamp.cuh"
#include "kernels/cuda/step_common.cuh"
#include "kernels/fused.h"

namespace cg = cooperative_groups;

namespace resident_cluster
{

/* The schedule's extents (a block's shares and the layouts in shared memory are below, beside their use):
 *
 *   BLOCKS          16, the cluster: the most an H100 schedules (a non-portable size)
 *   THREADS         a block's (CONFIG_FUSED_CLUSTER_THREADS)
 *   HIDDEN          the hidden width; HIDDEN_PAD: UNITS x BLOCKS, the hidden-to-hidden layers' output extent
 *   UNITS           the hidden units a block owns, a multiple of 8 (an n extent); UNITS_K: the same as a k
 *                   extent (a multiple of 16); UNITS_LD: the row stride of a [.][UNITS_K] operand
 *   BATCH           the batch; BATCH_PAD: padded to 16 rows; ROWS_PER_BLOCK: a block's rows of the softmax
 *   CLASSES_PAD     the classes padded to two n8 tiles
 *   MIDS, HIDDENS   hidden-to-hidden layers, hidden layers (at least 1: placeholders where there are none)
 *   MOMENTS         optimizer moments per parameter (at least 1) */
constexpr int BLOCKS = 16;
constexpr int THREADS = CONFIG_FUSED_CLUSTER_THREADS, WARPS = THREADS / 32;
static_assert(THREADS % 32 == 0, "cluster kernel: whole warps (CONFIG_FUSED_CLUSTER_THREADS)");
constexpr int LAYERS = SNN_LAYERS;
constexpr int HIDDEN = RESIDENT_HIDDEN;
constexpr int UNITS = snn_round_up((HIDDEN + BLOCKS - 1) / BLOCKS, 8);
constexpr int UNITS_K = snn_round_up(UNITS, 16);
constexpr int UNITS_LD = mma16_ld(UNITS_K);
/* without a hidden-to-hidden layer, their code, never run, shrinks to one tile */
constexpr int HIDDEN_PAD = SNN_LAYERS > 2 ? UNITS *BLOCKS : 16;
constexpr int CLASSES_PAD = 16;
constexpr int BATCH = SNN_BATCH, BATCH_PAD = snn_round_up(SNN_BATCH, 16);
constexpr int INPUTS = SNN_INPUT_DIM;
static_assert(INPUTS % 16 == 0, "cluster kernel: the input's k extent in whole k16 steps");
static_assert(SNN_CLASSES <= CLASSES_PAD, "cluster kernel: the classes in two n8 tiles");
constexpr int MOMENTS = snn_imax(SNN_OPTIM_MOMENTS, 1);
constexpr int MIDS = snn_imax(LAYERS - 2, 1);
constexpr int HIDDENS = snn_imax(LAYERS - 1, 1);
constexpr int BARRIERS = 2 * LAYERS - 2;
constexpr int ROWS_PER_BLOCK = BATCH_PAD / BLOCKS;
static_assert(BATCH_PAD % BLOCKS == 0, "cluster kernel: the padded batch in whole rows a block");

/* The normalised batch's row r at xn + xn_row(r): rows 2 mod 8 16-byte units apart, and each four one unit
 * further than the four before, so that a half warp's 8-byte stores of four rows (Pixels::keep) and
 * ldmatrix's reads of eight (Columns) fall in distinct banks. */
constexpr int PIXELS_LD = snn_round_up(INPUTS - 16, 64) + 16; /* in 16-bit elements: 16 mod 64 */
__host__ __device__ constexpr int xn_row(int r) { return r * PIXELS_LD + r / 4 * 8; }
/* xn_row(r0 + r) for r0 a multiple of 4, the part of r0 linear: what a loop can step */
__host__ __device__ constexpr int xn_row(int r0, int r) { return r0 * (PIXELS_LD + 2) + xn_row(r); }
/* Layer 0's FP32 weight rows, unit n's at w0 + w0_row(n): a pair's two rows 16 banks apart, F0's 16-byte
 * reads of two rows by a quarter warp (W0Rows) conflict-free; pairs 8 banks apart, B0's updates of rows
 * 2t (and of rows 2t + 1) by a warp conflict-free. The grid-resident kernel reorders its rows instead
 * (Mma16UnitRows), which measured slower here (docs/PERF.md v54). */
constexpr int W0_LD = snn_round_up(INPUTS - 16, 32) + 16; /* 16 mod 32 */
__host__ __device__ constexpr int w0_row(int n) { return n * W0_LD + n / 2 * 8; }
/* w0_row(n0 + n) for n0 even, the part of n0 linear */
__host__ __device__ constexpr int w0_row(int n0, int n) { return n0 * (W0_LD + 4) + w0_row(n); }
constexpr int W0_FLOATS = w0_row(UNITS);
constexpr int DGRAD0_LD =
    BATCH_PAD + 8; /* layer 0's output gradient, transposed: B0's fragments conflict-free */
constexpr int DGRAD_WIDEST = snn_imax(HIDDEN_PAD, CLASSES_PAD); /* the widest output gradient */

/* A hidden-to-hidden layer's weight columns of the block's units and the bias of those units; a model
 * without such a layer keeps a placeholder of one row, whose code never runs (the shared memory saved gives
 * 784-128-10 b64's blocks room for 384 threads' k-slice scratch). */
constexpr int MID_ROWS = SNN_LAYERS > 2 ? HIDDEN_PAD : 1;
struct Mid {
    alignas(16) snn_twin twin[MID_ROWS][UNITS_LD];
    float w[MID_ROWS][UNITS], wm[MOMENTS][MID_ROWS][UNITS];
    float b[UNITS], bm[MOMENTS][UNITS];
};

struct alignas(128) Shared {
    uint8_t next[BATCH_PAD][INPUTS];            /* the step's images; after F0, the next step's, copied in */
    alignas(16) snn_twin xn[xn_row(BATCH_PAD)]; /* the step's, translated, normalised and rounded (by F0) */
    alignas(16) float w0[W0_FLOATS], w0m[MOMENTS][W0_FLOATS]; /* no twin: F0 rounds as it reads (w0_row) */
    float b0[UNITS], b0m[MOMENTS][UNITS];
    Mid mid[MIDS];
    alignas(16) snn_twin wlt[CLASSES_PAD][UNITS_LD]; /* the last layer's columns of the block's units */
    float wl[CLASSES_PAD][UNITS], wlm[MOMENTS][CLASSES_PAD][UNITS];
    float bl[CLASSES_PAD], blm[MOMENTS][CLASSES_PAD]; /* its bias: every block keeps the same copy */
    float act[HIDDENS][BATCH_PAD][UNITS]; /* hidden outputs, the block's units (the ReLU's mask) */
    alignas(16) snn_twin acth[HIDDENS][BATCH_PAD][UNITS_LD];
    /* a hidden output's gradient, the block's units, by layer parity */
    float dgrad[snn_imin(2, HIDDENS)][BATCH_PAD][UNITS];
    alignas(16) snn_twin dgrad0[UNITS_K][DGRAD0_LD]; /* layer 0's, as an operand: [unit][row] */
    alignas(16) snn_twin
        dfull[BATCH_PAD * mma16_ld(DGRAD_WIDEST)]; /* a whole output gradient, row stride mma16_ld(width) */
    float logits[ROWS_PER_BLOCK][CLASSES_PAD];     /* the block's rows' (below), then their dlogits */
    /* partial sums, or gradient slices as snn_twin; 128-byte aligned, so that a peer's 32-byte reads of a row
     * each cross the SM-to-SM network as one sector, not two (docs/PERF.md, v20) */
    alignas(128) float exch[2][BATCH_PAD * DGRAD_WIDEST];
    float scratch[WARPS][16 * 8];  /* k slices' partial tiles */
    float rowloss[ROWS_PER_BLOCK]; /* the block's rows' loss and hit */
    int32_t rowright[ROWS_PER_BLOCK];
    int32_t samples[2][BATCH_PAD];
    snn_shift shift[BATCH_PAD];
    uint8_t labels[2][BATCH_PAD];
    snn_rate rate;
};
/* sizeof(Shared) passes 2^31 at the largest batches and widths, where the kernel never runs: clamped. */
constexpr int SMEM_BYTES = sizeof(Shared) < INT_MAX ? (int)sizeof(Shared) : INT_MAX;
constexpr bool FITS = SNN_HIDDEN > 0 && BATCH <= THREADS && sizeof(Shared) <= SNN_ARCH_MAX_SMEM_PER_BLOCK;

/* ---------------------------------------------------------------------------
 * GEMM on shared memory
 * ------------------------------------------------------------------------- */

/* Image bytes, element (i, k) at p[i * SI + k], normalised and rounded as they are read, four k a thread.
 * KEEPS: mma16_gemm hands each A fragment back to keep(), which leaves it in out[xn_row(i) + k], where a
 * later GEMM finds the batch as 16-bit operands (F0 reads each byte once a block, so layer 0's update reads
 * no byte again). The stores wait for a run of loads: the compiler cannot tell out from p. */
template <int SI> struct Pixels : Mma16Pairs<Pixels<SI>> {
    static_assert(SI % 4 == 0 && PIXELS_LD % 4 == 0, "cluster kernel: rows of whole 4-byte quads");
    static constexpr bool KEEPS = true;
    const uint8_t *p;
    snn_twin *out;
    __device__ Pixels(const uint8_t *p, snn_twin *out) : p(p), out(out) {}
    template <int GAP> __device__ __forceinline__ uint2 frag(int i, int k) const
    {
        static_assert(GAP == 2, "cluster kernel: image rows are read four k a thread");
        return snn_pixels_twin4(*reinterpret_cast<const uint32_t *>(p + i * SI + k));
    }
    /* the fragment a16<true>(m0, k) returned: rows m0 + g and m0 + g + 8, k + 4t .. k + 4t + 3 */
    __device__ __forceinline__ void keep(int m0, int k, uint4 f) const
    {
        const int lane = threadIdx.x % 32, g = lane / 4;
        k += 4 * (lane % 4);
        *reinterpret_cast<uint2 *>(out + xn_row(m0, g) + k) = make_uint2(f.x, f.z);
        *reinterpret_cast<uint2 *>(out + xn_row(m0, g + 8) + k) = make_uint2(f.y, f.w);
    }
};

/* The normalised batch stored by row, element (i, k) at p[xn_row(k) + i], as an A operand (i the pixel, k
 * the row) in the fragments' own k order: each 8 x 8 piece by ldmatrix.trans. */
struct Columns {
    static_assert(PIXELS_LD % 8 == 0, "cluster kernel: ldmatrix rows of whole 16-byte units");
    static constexpr bool KEEPS = false;
    const snn_twin *p;
    template <bool QUAD> __device__ __forceinline__ uint4 a16(int m0, int k) const
    {
        static_assert(!QUAD, "cluster kernel: ldmatrix reads fragments in their own k order");
        const int lane = threadIdx.x % 32,
                  piece = lane / 8; /* pieces (m, k): (0, 0), (8, 0), (0, 8), (8, 8) */
        uint32_t r[4];
        sm75_ldmatrix_x4_trans(r, p + xn_row(k, piece / 2 * 8 + lane % 8) + m0 + piece % 2 * 8);
        return make_uint4(r[0], r[1], r[2], r[3]);
    }
};

/* Layer 0's FP32 weight rows, unit n's at w0_row(n), as a B operand (Mma16FloatRows<W0Rows>). */
struct W0Rows {
    static_assert(W0_LD % 4 == 0, "cluster kernel: FP32 rows of whole 16-byte quads");
    static __device__ __forceinline__ int at(int n0, int n) { return w0_row(n0, n); }
};

/* ---------------------------------------------------------------------------
 * the model's state in and out
 * ------------------------------------------------------------------------- */

/* The block's share of the model, from it (in) or back to it; the last layer's bias, which every block
 * keeps, goes back from block 0. */
static __device__ void state_copy(Shared &S, const snn_fused_net &net, int c, bool in)
{
    const int u0 = c * UNITS;
    auto unit = [u0](int u) { return u0 + u < HIDDEN; };
    const snn_fused_layer &L0 = net.layer[0];
    for (int i = 0; i < UNITS; i++)
        snn_param_copy<THREADS>(
            in, 1, INPUTS, S.w0 + w0_row(i), 0, S.w0m[0] + w0_row(i), W0_FLOATS, nullptr, 0, L0.w, L0.sw,
            [&](int, int j) -> long { return unit(i) ? (long)(u0 + i) * INPUTS + j : -1; });
    auto column = [&](int o, int j) -> long { return unit(j) ? (long)o * HIDDEN + u0 + j : -1; };
    auto bias = [&](int, int j) -> long { return unit(j) ? u0 + j : -1; };
    snn_param_copy<THREADS>(in, 1, UNITS, S.b0, UNITS, &S.b0m[0][0], UNITS, nullptr, 0, L0.b, L0.sb, bias);
    for (int l = 1; l + 1 < LAYERS; l++) {
        Mid &M = S.mid[l - 1];
        const snn_fused_layer &L = net.layer[l];
        snn_param_copy<THREADS>(in, HIDDEN, UNITS, &M.w[0][0], UNITS, &M.wm[0][0][0], HIDDEN_PAD * UNITS,
                                &M.twin[0][0], UNITS_LD, L.w, L.sw, column);
        snn_param_copy<THREADS>(in, 1, UNITS, M.b, UNITS, &M.bm[0][0], UNITS, nullptr, 0, L.b, L.sb, bias);
    }
    const snn_fused_layer &LL = net.layer[LAYERS - 1];
    snn_param_copy<THREADS>(in, SNN_CLASSES, UNITS, &S.wl[0][0], UNITS, &S.wlm[0][0][0], CLASSES_PAD * UNITS,
                            &S.wlt[0][0], UNITS_LD, LL.w, LL.sw, column);
    if (in || c == 0)
        snn_param_copy<THREADS>(in, 1, SNN_CLASSES, S.bl, CLASSES_PAD, &S.blm[0][0], CLASSES_PAD, nullptr, 0,
                                LL.b, LL.sb, [](int, int j) -> long { return j; });
}

/* ---------------------------------------------------------------------------
 * the batch
 * ------------------------------------------------------------------------- */

/* The images of samples[0 .. B) into x, by cp.async (16-byte rows' pieces), one group. */
static __device__ __forceinline__ void gather_images(uint8_t (*x)[INPUTS], const int32_t *samples,
                                                     const uint8_t *images)
{
    /* a warp a row, its lanes along the row; the warp's samples read before its first copy (a copy is
     * volatile asm with a memory clobber) */
    constexpr int PIECES = INPUTS / 16, ROWS = (BATCH + WARPS - 1) / WARPS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int32_t sample[ROWS];
#pragma unroll
    for (int j = 0; j < ROWS; j++)
        sample[j] = warp + j * WARPS < BATCH ? samples[warp + j * WARPS] : 0;
#pragma unroll
    for (int j = 0; j < ROWS; j++) {
        const int r = warp + j * WARPS;
        if (r < BATCH)
            for (int q = lane; q < PIECES; q += 32)
                sm80_cp_async_16(&x[r][16 * q], images + (size_t)sample[j] * INPUTS + 16 * q);
    }
    sm80_cp_async_commit();
}

/* Each image of the batch in S.next translated in place by its row's shift (kernels/noise.h, as the host), a
 * warp a row: the row's new bytes gathered into registers before any is written. */
static __device__ void translate(Shared &S)
{
    constexpr int PER = (INPUTS + 31) / 32;
    const int lane = threadIdx.x % 32;
    for (int r = threadIdx.x / 32; r < BATCH; r += WARPS) {
        uint8_t v[PER];
#pragma unroll
        for (int i = 0; i < PER; i++)
            v[i] = lane + 32 * i < INPUTS ? snn_shifted_pixel(S.next[r], lane + 32 * i, S.shift[r]) : 0;
        __syncwarp();
#pragma unroll
        for (int i = 0; i < PER; i++)
            if (lane + 32 * i < INPUTS)
                S.next[r][lane + 32 * i] = v[i];
        __syncwarp();
    }
}

/* ---------------------------------------------------------------------------
 * the step's element-wise ends
 * ------------------------------------------------------------------------- */

/* Hidden layer l's output at row m, the block's unit n, from its pre-activation v (bias added)
 * (resident_hidden_out): kept for the backward pass and as the next layer's operand. */
static __device__ __forceinline__ void hidden_out(Shared &S, const snn_fused_net &net, const SnnStepDraws &d,
                                                  int l, int u0, int m, int n, float v)
{
    v = resident_hidden_out(net, d, l, m, u0 + n, v);
    S.act[l][m][n] = v;
    S.acth[l][m][n] = snn_twin_bits(v);
}

/* The gradient of hidden layer l's output at row m, the block's unit n, from dY . W (v)
 * (resident_hidden_grad): FP32 in dgrad, as an operand at op[m sm + n sn]. */
static __device__ __forceinline__ void hidden_grad(Shared &S, const snn_fused_net &net, const SnnStepDraws &d,
                                                   int l, int u0, int m, int n, float v, snn_twin *op, int sm,
                                                   int sn)
{
    v = resident_hidden_grad(net, d, l, m, u0 + n, S.act[l][m][n], v);
    S.dgrad[l & 1][m][n] = v;
    op[m * sm + n * sn] = snn_twin_bits(v);
}

/* Lanes a row in the softmax: a power of two the block's threads cover its rows with, at most a warp. */
constexpr int row_lanes(int g)
{
    return g * 2 <= 32 && g * 2 * ROWS_PER_BLOCK <= THREADS ? row_lanes(g * 2) : g;
}
constexpr int ROW_LANES = row_lanes(1);
constexpr int ROW_CLASSES = (SNN_CLASSES + ROW_LANES - 1) / ROW_LANES; /* classes a lane */

typedef SnnRowSoftmax<ROW_LANES, ROW_CLASSES> RowSoftmax;

/* Softmax and cross-entropy of the logits of rows [r0, r0 + ROWS_PER_BLOCK), a row a group of ROW_LANES lanes
 * (RowSoftmax): dlogits in place, each row's loss and hit; tracing, the rows' logits and dlogits. The
 * block's threads all call it. */
static __device__ void softmax_rows(Shared &S, const snn_fused_net &net, int r0, int p)
{
    const int i0 = threadIdx.x / ROW_LANES, r = r0 + i0; /* row i0 of the block's, r of the batch */
    const bool row = i0 < ROWS_PER_BLOCK && r < BATCH;
    float z[ROW_CLASSES];
#pragma unroll
    for (int i = 0; i < ROW_CLASSES; i++) {
        const int j = RowSoftmax::class_of(i);
        z[i] = row && j < SNN_CLASSES ? S.logits[i0][j] : -INFINITY;
    }
    const RowSoftmax sm(z);
    const int label = row ? S.labels[p][r] : 0;
    if (row && threadIdx.x % ROW_LANES == 0) {
        S.rowloss[i0] = sm.loss(S.logits[i0], label, true);
        S.rowright[i0] = sm.arg == label;
    }
    __syncwarp(); /* lane 0 has read the row's logits */
#pragma unroll
    for (int i = 0; i < ROW_CLASSES; i++) {
        const int j = RowSoftmax::class_of(i);
        if (row && j < SNN_CLASSES) {
            const float g = sm.grad(i, label, BATCH);
            S.logits[i0][j] = g;
            if (net.trace) {
                net.act[LAYERS][r * SNN_CLASSES + j] = z[i];
                net.grad[LAYERS - 1][r * SNN_CLASSES + j] = g;
            }
        }
    }
}

/* What a block shares of its rows' softmax: their dlogits as operands, the sums of their dlogits by class
 * (its share of the last layer's bias gradient), their loss and hits. */
struct SoftmaxShare {
    snn_twin dl[ROWS_PER_BLOCK][CLASSES_PAD];
    float bias[CLASSES_PAD];
    double loss;
    int32_t right;
};
static_assert(sizeof(SoftmaxShare) <= sizeof(Shared::exch[0]),
              "cluster kernel: the share in an exchange buffer");

/* The block's rows' share, from the softmax's results, into `mine`. */
static __device__ void share_softmax(const Shared &S, int r0, SoftmaxShare &mine)
{
    for (int i = threadIdx.x; i < ROWS_PER_BLOCK * CLASSES_PAD; i += THREADS)
        mine.dl[i / CLASSES_PAD][i % CLASSES_PAD] =
            snn_twin_bits(S.logits[i / CLASSES_PAD][i % CLASSES_PAD]); /* padding is 0 */
    if (threadIdx.x < CLASSES_PAD) {
        float b = 0.0f;
        for (int i = 0; i < ROWS_PER_BLOCK; i++)
            b += S.logits[i][threadIdx.x];
        mine.bias[threadIdx.x] = b;
    }
    if (threadIdx.x == 32) { /* another warp than the bias's */
        double loss = 0.0;
        int right = 0;
        for (int i = 0; i < ROWS_PER_BLOCK && r0 + i < BATCH; i++) {
            loss += (double)S.rowloss[i];
            right += S.rowright[i];
        }
        mine.loss = loss;
        mine.right = right;
    }
}

/* 16 bytes at p in block rank's shared memory. */
struct PeerAt {
    const void *p;
    int rank;
};

/* For each i < ITEMS, the 16 bytes at from(i) (a PeerAt) to to(i) in the block's shared memory: every
 * thread's remote loads issued before its first store, which the compiler may not pass (it cannot tell the
 * two apart). The block's threads all call it. */
template <int ITEMS, class From, class To>
static __device__ __forceinline__ void copy_peers(const cg::cluster_group &cluster, const From &from,
                                                  const To &to)
{
    constexpr int PER = (ITEMS + THREADS - 1) / THREADS;
    uint4 v[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int i = threadIdx.x + j * THREADS;
        if (i < ITEMS) {
            const PeerAt at = from(i);
            v[j] = *static_cast<const uint4 *>(cluster.map_shared_rank(at.p, at.rank));
        }
    }
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int i = threadIdx.x + j * THREADS;
        if (i < ITEMS)
            *reinterpret_cast<uint4 *>(to(i)) = v[j];
    }
}

/* Every block's share, `share` in each block's shared memory: every row's dlogits into dfull, the last
 * layer's bias updated from the bias shares summed in rank order (every block keeps the same bias), and, by
 * block 0, the step's loss and correct count. */
static __device__ void gather_softmax(Shared &S, const cg::cluster_group &cluster, const snn_fused_net &net,
                                      int c, int s, const SoftmaxShare *share, const snn_rate &rate)
{
    constexpr int LD = mma16_ld(CLASSES_PAD), COPIES = CLASSES_PAD / 8; /* 16-byte copies a row */
    copy_peers<BATCH_PAD * COPIES>(
        cluster,
        [&](int i) {
            return PeerAt{&share->dl[i / COPIES % ROWS_PER_BLOCK][i % COPIES * 8],
                          i / COPIES / ROWS_PER_BLOCK};
        },
        [&](int i) { return &S.dfull[i / COPIES * LD + i % COPIES * 8]; });
    if (threadIdx.x < SNN_CLASSES) {
        float part[BLOCKS], g = 0.0f;
#pragma unroll
        for (int q = 0; q < BLOCKS; q++)
            part[q] = *cluster.map_shared_rank(&share->bias[threadIdx.x], q);
#pragma unroll
        for (int q = 0; q < BLOCKS; q++)
            g += part[q];
        snn_param_update(&S.bl[threadIdx.x], &S.blm[0][threadIdx.x], CLASSES_PAD, nullptr, g, rate);
    }
    if (c == 0 && threadIdx.x == 32) {
        double loss = 0.0;
        int right = 0;
#pragma unroll
        for (int q = 0; q < BLOCKS; q++) {
            const SoftmaxShare *peer = cluster.map_shared_rank(share, q);
            loss += peer->loss;
            right += peer->right;
        }
        net.train_loss[s] = (float)(loss / BATCH);
        net.train_correct[s] = right;
    }
}

/* Backward of layer l > 0, its output gradient in dfull [rows][N] (N its outputs as stored, `outs` of them
 * real), in two parts: the block's units' input gradient through dx, from its weight columns' twin
 * [N][UNITS_LD]; then the update of the columns (weights and moments [N][UNITS], the twin) from the gradient
 * against its units' inputs. */
template <int N, class Dx>
static __device__ __forceinline__ void input_gradient(Shared &S, const Dx &dx, const snn_twin *twin)
{
    mma16_gemm<THREADS, BATCH_PAD, UNITS, N>(Mma16Mat<mma16_ld(N), 1>{S.dfull}, Mma16Mat<1, UNITS_LD>{twin},
                                             S.scratch, dx);
}
template <int N>
static __device__ __forceinline__ void columns_update(Shared &S, int l, int u0, int outs, snn_twin *twin,
                                                      float *w, float *wm, const snn_rate &rate)
{
    constexpr int LD = mma16_ld(N);
    mma16_gemm<THREADS, N, UNITS, BATCH_PAD>(
        Mma16Mat<1, LD>{S.dfull}, Mma16Mat<1, UNITS_LD>{&S.acth[l - 1][0][0]}, S.scratch,
        mma16_update(N * UNITS, rate, [&](int o, int n, float *&pw, float *&pm, snn_twin *&pt) {
            pw = &w[o * UNITS + n], pm = &wm[o * UNITS + n], pt = &twin[o * UNITS_LD + n];
            return o < outs && u0 + n < HIDDEN;
        }));
}

/* The cluster barrier between exchanges: a release fence over the block's own shared-memory writes, a relaxed
 * arrival, the wait, an acquire fence over its reads of the peers'. Only shared memory crosses blocks, so the
 * plain barrier's release, a GPU-scope fence that waits on every memory operation in flight (0.3-0.4 us a
 * barrier on an H100), buys nothing. The other direction, a peer's reads of a buffer before the buffer's
 * rewrite two exchanges later, rests on the hardware, not on these fences: every such read's value is used
 * (stored, added) before the peer's next arrival, so it has returned; a remote read whose value is not used
 * before the barrier (a prefetch) would need a release fence over shared::cluster. Every thread of each warp
 * arrives together: the aligned forms. Between arrival and wait a block may do work of its own that no peer
 * waits for. */
static __device__ __forceinline__ void cluster_arrive()
{
    asm volatile("fence.release.sync_restrict::shared::cta.cluster;\n\t"
                 "barrier.cluster.arrive.relaxed.aligned;"
                 :
                 :
                 : "memory");
}
static __device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.aligned;\n\t"
                 "fence.acquire.sync_restrict::shared::cluster.cluster;"
                 :
                 :
                 : "memory");
}
static __device__ __forceinline__ void cluster_sync()
{
    cluster_arrive();
    cluster_wait();
}

/* The sum over the cluster's blocks, in rank order, of the 4 floats at `at` (16-byte aligned) in each block's
 * shared memory: every block's loads issued before the first add. */
static __device__ __forceinline__ float4 sum_peers(const cg::cluster_group &cluster, const float *at)
{
    float4 part[BLOCKS];
#pragma unroll
    for (int q = 0; q < BLOCKS; q++)
        part[q] = *reinterpret_cast<const float4 *>(cluster.map_shared_rank(at, q));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int q = 0; q < BLOCKS; q++) {
        v.x += part[q].x;
        v.y += part[q].y;
        v.z += part[q].z;
        v.w += part[q].w;
    }
    return v;
}

/* ---------------------------------------------------------------------------
 * the kernel
 * ------------------------------------------------------------------------- */

__global__ void __launch_bounds__(THREADS, 1) train_kernel(snn_fused_net net, int first, int last)
{
    if constexpr (!FITS)
        return; /* never launched (fits): no code for a model that does not fit */
    Shared &S = resident_shared<Shared, THREADS, SMEM_BYTES>();
    cg::cluster_group cluster = cg::this_cluster();
    const int c = (int)cluster.block_rank(), u0 = c * UNITS, r0 = c * ROWS_PER_BLOCK, tid = threadIdx.x;
    const int owned = snn_imax(0, snn_imin(UNITS, HIDDEN - u0)); /* the block's units that are not padding */
    state_copy(S, net, c, true);
    if (tid < BATCH) {
        S.samples[first & 1][tid] = net.order[(long)first * BATCH + tid];
        if (first + 1 < last)
            S.samples[(first + 1) & 1][tid] = net.order[(long)(first + 1) * BATCH + tid];
        S.labels[first & 1][tid] = net.train_labels[S.samples[first & 1][tid]];
    }
    __syncthreads();
    const bool translates = snn_noise_translates(net.noise);
    gather_images(S.next, S.samples[first & 1], net.train_images);
    const int32_t epoch = *net.clock.epoch;
    int e = 0; /* exchanges so far: the buffer of the next is e & 1 */

    for (int s = first; s < last; ++s) {
        const int p = s & 1;
        const SnnStepDraws draws = {{net.noise.key[0], net.noise.key[1]}, epoch, s};
        fused_stamp(net, s, 2 * LAYERS, true);
        if (tid == 0)
            S.rate = snn_clock_rate_at(net.clock, s);
        if (translates && tid < BATCH)
            S.shift[tid] = snn_shift_of(net.noise.key, epoch, s, tid);
        sm80_cp_async_wait<0>();
        __syncthreads();
        const snn_rate rate = S.rate; /* in registers: the updates' epilogues read it per element */
        if (translates) {
            translate(S);
            __syncthreads();
        }
        int32_t next_sample = 0; /* of step s + 2, and the labels of s + 1: read now, stored at the end */
        uint8_t next_label = 0;
        if (tid < BATCH) {
            if (s + 2 < last)
                next_sample = net.order[(long)(s + 2) * BATCH + tid];
            if (s + 1 < last)
                next_label = net.train_labels[S.samples[p ^ 1][tid]];
        }

        resident_trace_batch<THREADS>(
            net, p, [&](int r) { return S.next[r]; }, [&](int r) { return S.labels[p][r]; });

        /* F0 */
        mma16_gemm<THREADS, BATCH_PAD, UNITS, INPUTS>(
            Pixels<INPUTS>(&S.next[0][0], S.xn), Mma16FloatRows<W0Rows>{S.w0}, S.scratch,
            [&](int m, int n, float v) { hidden_out(S, net, draws, 0, u0, m, n, v + S.b0[n]); });
        __syncthreads(); /* the batch's operand is whole, and its bytes' buffer free for the next */
        fused_stamp(net, s, 0, false);
        fused_stamp(net, s, 0, true);

        /* F1 .. F(L-1) */
        for (int l = 1; l < LAYERS; l++) {
            float *ex = S.exch[e & 1];
            const Mma16Mat<UNITS_LD, 1> in = {&S.acth[l - 1][0][0]};
            if (l + 1 < LAYERS)
                mma16_gemm<THREADS, BATCH_PAD, HIDDEN_PAD, UNITS_K>(
                    in, Mma16Mat<UNITS_LD, 1>{&S.mid[l - 1].twin[0][0]}, S.scratch,
                    [&](int m, int n, float v) { ex[m * HIDDEN_PAD + n] = v; });
            else
                mma16_gemm<THREADS, BATCH_PAD, CLASSES_PAD, UNITS_K>(
                    in, Mma16Mat<UNITS_LD, 1>{&S.wlt[0][0]}, S.scratch,
                    [&](int m, int n, float v) { ex[m * CLASSES_PAD + n] = v; });
            /* the step's first barrier: the next batch's copies issued while the peers arrive */
            auto sync = [&] {
                cluster_arrive();
                if (l == 1 && s + 1 < last)
                    gather_images(S.next, S.samples[p ^ 1], net.train_images);
                cluster_wait();
            };
            if (l + 1 < LAYERS) {
                fused_stamp(net, s, l, false);
                sync();
                fused_stamp(net, s, l, true);
                e++;
                for (int i = tid; i < BATCH_PAD * UNITS / 4; i += THREADS) {
                    const int m = i / (UNITS / 4), n = i % (UNITS / 4) * 4;
                    const float4 v = sum_peers(cluster, ex + m * HIDDEN_PAD + u0 + n);
                    const float *b = &S.mid[l - 1].b[n];
                    hidden_out(S, net, draws, l, u0, m, n, v.x + b[0]);
                    hidden_out(S, net, draws, l, u0, m, n + 1, v.y + b[1]);
                    hidden_out(S, net, draws, l, u0, m, n + 2, v.z + b[2]);
                    hidden_out(S, net, draws, l, u0, m, n + 3, v.w + b[3]);
                }
            } else { /* the block's rows' logits, their softmax, shared by a second barrier */
                sync();
                e++;
                constexpr int QUADS = (SNN_CLASSES + 3) / 4;
                for (int i = tid; i < ROWS_PER_BLOCK * QUADS; i += THREADS) {
                    const int i0 = i / QUADS, m = r0 + i0, j = i % QUADS * 4;
                    float4 v =
                        m < BATCH ? sum_peers(cluster, ex + m * CLASSES_PAD + j) : make_float4(0, 0, 0, 0);
                    const float add[4] = {v.x, v.y, v.z, v.w};
                    for (int k = 0; k < 4; k++)
                        S.logits[i0][j + k] = m < BATCH && j + k < SNN_CLASSES ? add[k] + S.bl[j + k] : 0.0f;
                }
                __syncthreads();
                softmax_rows(S, net, r0, p);
                __syncthreads();
                share_softmax(S, r0, *reinterpret_cast<SoftmaxShare *>(S.exch[e & 1]));
                fused_stamp(net, s, l, false);
                cluster_sync();
                fused_stamp(net, s, l, true);
                e++;
            }
            __syncthreads();
        }

        /* B(L-1) .. B1 */
        for (int l = LAYERS - 1; l >= 1; l--) {
            const bool top = l == LAYERS - 1, exchange = l >= 2;
            snn_twin *op = exchange ? reinterpret_cast<snn_twin *>(S.exch[e & 1]) : &S.dgrad0[0][0];
            const int sm = exchange ? UNITS : 1, sn = exchange ? 1 : DGRAD0_LD;
            auto dx = [&](int m, int n, float v) {
                hidden_grad(S, net, draws, l - 1, u0, m, n, v, op, sm, sn);
            };
            if (top) {
                gather_softmax(S, cluster, net, c, s,
                               reinterpret_cast<const SoftmaxShare *>(S.exch[(e - 1) & 1]), rate);
                __syncthreads();
                input_gradient<CLASSES_PAD>(S, dx, &S.wlt[0][0]);
            } else {
                input_gradient<HIDDEN_PAD>(S, dx, &S.mid[l - 1].twin[0][0]);
            }
            __syncthreads(); /* the input gradient has read the weights before they change */
            /* the block's slice of the gradient is written: its update while the peers arrive */
            if (exchange)
                cluster_arrive();
            if (top) {
                columns_update<CLASSES_PAD>(S, l, u0, SNN_CLASSES, &S.wlt[0][0], &S.wl[0][0], &S.wlm[0][0][0],
                                            rate);
            } else {
                Mid &M = S.mid[l - 1];
                columns_update<HIDDEN_PAD>(S, l, u0, HIDDEN, &M.twin[0][0], &M.w[0][0], &M.wm[0][0][0], rate);
                snn_bias_update<THREADS>(M.b, &M.bm[0][0], UNITS, &S.dgrad[l & 1][0][0], UNITS, BATCH, owned,
                                         rate);
            }
            const int phase = 2 * LAYERS - 1 - l;
            fused_stamp(net, s, phase, false);
            if (exchange) {
                __syncthreads(); /* the update has read dfull before the peers' gradient replaces it */
                cluster_wait();
                /* each block's [row][U] slice into the rows of dfull, 8 values a copy */
                const snn_twin *mine = reinterpret_cast<const snn_twin *>(S.exch[e & 1]);
                constexpr int COPIES = HIDDEN_PAD / 8;
                copy_peers<BATCH_PAD * COPIES>(
                    cluster,
                    [&](int i) {
                        const int col = i % COPIES * 8;
                        return PeerAt{mine + i / COPIES * UNITS + col % UNITS, col / UNITS};
                    },
                    [&](int i) { return &S.dfull[i / COPIES * mma16_ld(HIDDEN_PAD) + i % COPIES * 8]; });
                e++;
            }
            __syncthreads();
            fused_stamp(net, s, phase, true);
        }

        /* B0; with one n tile a thread's units are 2t and 2t + 1 in every tile: their rows found once */
        const int rows[2] = {w0_row(tid % 4 * 2), w0_row(tid % 4 * 2 + 1)};
        mma16_gemm<THREADS, INPUTS, UNITS, BATCH_PAD, false>(
            Columns{S.xn}, Mma16Mat<DGRAD0_LD, 1>{&S.dgrad0[0][0]}, S.scratch,
            mma16_update(W0_FLOATS, rate, [&](int k, int n, float *&w, float *&m, snn_twin *&twin) {
                const int at = (UNITS == 8 ? rows[n & 1] : w0_row(n)) + k;
                w = S.w0 + at, m = S.w0m[0] + at, twin = nullptr;
                return UNITS * BLOCKS == HIDDEN || u0 + n < HIDDEN;
            }));
        snn_bias_update<THREADS>(S.b0, &S.b0m[0][0], UNITS, &S.dgrad[0][0][0], UNITS, BATCH, owned, rate);
        if (tid < BATCH) {
            S.samples[p][tid] = next_sample;
            S.labels[p ^ 1][tid] = next_label;
        }
        __syncthreads();
        fused_stamp(net, s, 2 * LAYERS - 1, false);
        fused_stamp(net, s, 2 * LAYERS - 1, true);
    }
    cluster_sync(); /* no block leaves while another may read its exchange buffers */
    state_copy(S, net, c, false);
    if (c == 0 && tid == 0)
        *net.train_step = last;
}

/* ---------------------------------------------------------------------------
 * launch
 * ------------------------------------------------------------------------- */

static cudaLaunchConfig_t launch_config(cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(BLOCKS);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = SMEM_BYTES;
    cfg.stream = snn_stream();
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = BLOCKS;
    attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

static bool fits(char *why, int len)
{
    static int clusters = -1; /* of BLOCKS blocks the GPU holds at once; -1: not asked yet */
    if (!resident_fits(why, len, FITS, BATCH, THREADS, "CONFIG_FUSED_CLUSTER_THREADS", SMEM_BYTES,
                       SNN_ARCH_MAX_SMEM_PER_BLOCK))
        return false;
    if (clusters < 0) {
        CUDA_CHECK(
            cudaFuncSetAttribute(train_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
        CUDA_CHECK(cudaFuncSetAttribute(train_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = launch_config(&attr);
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, train_kernel, &cfg));
    }
    if (clusters < 1)
        snprintf(why, len, "this GPU holds no cluster of %d blocks with %d KB of shared memory each", BLOCKS,
                 (int)((sizeof(Shared) + 1023) / 1024));
    return clusters >= 1;
}

static void train(const snn_fused_net &net, int first, int last)
{
    if ((uintptr_t)net.train_images % 16)
        snn_die("cluster kernel: the training images are not 16-byte aligned (internal error)");
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = launch_config(&attr);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, train_kernel, net, first, last));
    CUDA_CHECK_LAUNCH();
}

static void describe(char *buf, int len)
{
    fused_describe_resident(buf, len, "one cluster of ", BLOCKS, THREADS, SMEM_BYTES, UNITS, BARRIERS,
                            "cluster");
}

} // namespace resident_cluster

const FusedKernel fused_cluster = {"cluster", resident_cluster::fits, resident_cluster::train,
                                   resident_cluster::describe};
