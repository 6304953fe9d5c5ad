/* The cluster kernel of the fused step (CONFIG_FUSED_CLUSTER, sm90; fused/kernel.h): where a model with
 * hidden layers and its optimizer state fit in the shared memory of one cluster of BLOCKS thread blocks, that
 * cluster runs every step of a launch with the weights on chip, loaded at the launch's start and written back
 * at its end.
 *
 * Block c owns hidden units [c U, c U + U) of every hidden layer: layer 0's weight rows of those units (its
 * output units), every later layer's weight columns of them (its input units) with their optimizer state,
 * and a 16-bit copy of each hidden-to-hidden layer's rows of them. A step:
 *
 *   F0         layer 0's forward for the block's units: local (each block holds the whole batch, its bytes
 *              copied in by cp.async during the step before; F0 normalises them, once, into 16-bit operands
 *              that B0 reads back)
 *   F(l), l>0  a hidden-to-hidden layer: the previous layer's output all-gathered (16-bit), then the
 *              block's units from its copy of their rows; the last layer: the partial sums of the logits
 *              from the block's units and its weight columns, each sixteenth of the batch's rows to its
 *              block, which adds them, computes their softmax and dlogits, and all-gathers the dlogits
 *   B(l), l>0  the block's units' input gradient (dY . its weight columns), all-gathered where layer l - 1
 *              has an input gradient of its own to compute, and its weight columns' update (dY^T . its
 *              units) while the gradient travels; a hidden-to-hidden layer's updated columns then go to the
 *              blocks that hold those rows, for the next step's forward
 *   B0         layer 0's weight gradient + update: local
 *
 * Every exchange is pushed: a block stores what it shares into its peers' shared memory by st.async, which
 * counts the bytes against the receiver's mbarrier, and each block waits for its own, with no cluster
 * barrier inside a step (the all-gathers push 16-bit values, half the bytes the partial sums of a
 * hidden-to-hidden layer would, and a pushed all-gather took 0.70 us where a pulled one took 0.99 and a
 * pulled reduce-scatter of FP32 partial sums 1.46: docs/PERF.md v56). Deterministic: a fixed split of the
 * work and fixed orders of summation. The GEMMs are mma.sync m16n8k16 on 16-bit operands in shared memory
 * with FP32 accumulators; master weights and optimizer state in FP32, their 16-bit twins beside them
 * (layer 0's rounded as F0 reads them), rounded as the grid-wide kernel rounds its operands.
 *
 * Why no push overwrites what a block still reads (`Exchange`, `gathered`, `refresh_rows` below): every
 * exchange but the rows' refresh goes from every block to every block, in the same order on each, and a block
 * pushes exchange x + 1 only after waiting for its own bytes of x. A push of x' therefore follows every
 * block's push of x' - 1, so x' may rewrite a buffer that every block has read before pushing x' - 1; and the
 * bytes of x + 2 follow every block's wait for x, so two mbarriers taken in turn keep each phase's bytes
 * apart. */
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
#include "arch/sm90/dsmem.cuh"
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
 *   HIDDEN          the hidden width; HIDDEN_PAD: UNITS x BLOCKS, a hidden-to-hidden layer's extents (all
 *                   blocks' units); GATHER_LD: the row stride of a [.][HIDDEN_PAD] operand
 *   UNITS           the hidden units a block owns, a multiple of 8 (an n extent); UNITS_K: the same as a k
 *                   extent (a multiple of 16); UNITS_LD: the row stride of a [.][UNITS_K] operand
 *   BATCH           the batch; BATCH_PAD: padded to 16 rows; ROWS_PER_BLOCK: a block's rows of the softmax
 *   CLASSES_PAD     the classes padded to two n8 tiles
 *   MIDS, HIDDENS   hidden-to-hidden layers, hidden layers (at least 1: placeholders where there are none)
 *   MOMENTS         optimizer moments per parameter (at least 1)
 *   EXCHANGES       a step's exchanges but the rows' refreshes: a hidden layer's output all-gathered before
 *                   each hidden-to-hidden layer's forward, the logits' partial sums, the dlogits, and the
 *                   input gradient of each layer above layer 1 all-gathered */
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
constexpr int GATHER_LD = mma16_ld(HIDDEN_PAD);
constexpr int CLASSES_PAD = 16;
constexpr int BATCH = SNN_BATCH, BATCH_PAD = snn_round_up(SNN_BATCH, 16);
constexpr int INPUTS = SNN_INPUT_DIM;
static_assert(INPUTS % 16 == 0, "cluster kernel: the input's k extent in whole k16 steps");
static_assert(SNN_CLASSES <= CLASSES_PAD, "cluster kernel: the classes in two n8 tiles");
constexpr int MOMENTS = snn_imax(SNN_OPTIM_MOMENTS, 1);
constexpr int MIDS = snn_imax(LAYERS - 2, 1);
constexpr int HIDDENS = snn_imax(LAYERS - 1, 1);
constexpr int EXCHANGES = 2 * LAYERS - 2;
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
constexpr int DLOGITS_LD = mma16_ld(CLASSES_PAD);

/* A hidden-to-hidden layer's weight columns of the block's units and the bias of those units, and a 16-bit
 * copy of its rows of those units (refreshed from the columns' blocks after each update); a model without
 * such a layer keeps a placeholder of one row, whose code never runs (the shared memory saved gives
 * 784-128-10 b64's blocks room for 384 threads' k-slice scratch). */
constexpr int MID_ROWS = SNN_LAYERS > 2 ? HIDDEN_PAD : 1;
/* the all-gathers' rows, one where nothing is gathered (784-128-10 b64's blocks have no room for more) */
constexpr int GATHER_ROWS = SNN_LAYERS > 2 ? BATCH_PAD : 1;
constexpr int GATHER_BUFFERS = SNN_LAYERS > 2 ? 3 : 1;
struct Mid {
    alignas(16) snn_twin twin[MID_ROWS][UNITS_LD];
    alignas(16) snn_twin rows[UNITS][GATHER_LD];
    float w[MID_ROWS][UNITS], wm[MOMENTS][MID_ROWS][UNITS];
    float b[UNITS], bm[MOMENTS][UNITS];
};

/* What a block shares of its rows' softmax beside their dlogits: the sums of their dlogits by class (its
 * share of the last layer's bias gradient), their loss and hits; whole 16-byte stores. */
struct alignas(16) SoftmaxShare {
    float bias[CLASSES_PAD];
    double loss;
    int32_t right;
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
    alignas(16) snn_twin dslice[GATHER_ROWS][UNITS]; /* a later one's, the block's units, to all-gather */
    /* a hidden layer's output or gradient, every block's units: the all-gathers' buffers, in turn */
    alignas(16) snn_twin gathered[GATHER_BUFFERS][GATHER_ROWS][GATHER_LD];
    alignas(16) float partial[BATCH_PAD][CLASSES_PAD]; /* the block's partial sums of the logits */
    alignas(16) float partials[BLOCKS][ROWS_PER_BLOCK][CLASSES_PAD]; /* every block's of the block's rows */
    float logits[ROWS_PER_BLOCK][CLASSES_PAD];            /* the block's rows' (below), then their dlogits */
    alignas(16) snn_twin dl[ROWS_PER_BLOCK][CLASSES_PAD]; /* their dlogits as operands, to all-gather */
    alignas(16) snn_twin dlogits[BATCH_PAD][DLOGITS_LD];  /* every row's */
    SoftmaxShare share, shares[BLOCKS];                   /* the block's, and every block's */
    uint64_t exchanged[2];                                /* the exchanges' mbarriers, taken in turn */
    uint64_t refreshed[MIDS];                             /* the rows' of each hidden-to-hidden layer */
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

/* The block's share of the model, from it (in, with the rows' copies) or back to it; the last layer's bias,
 * which every block keeps, goes back from block 0. */
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
        for (int e = threadIdx.x; in && e < UNITS * HIDDEN; e += THREADS)
            if (unit(e / HIDDEN))
                M.rows[e / HIDDEN][e % HIDDEN] =
                    snn_twin_bits(L.w[(long)(u0 + e / HIDDEN) * HIDDEN + e % HIDDEN]);
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

/* The images of samples[LO .. HI) into rows LO .. HI of x, by cp.async (16-byte rows' pieces), one group. */
template <int LO, int HI>
static __device__ __forceinline__ void gather_images(uint8_t (*x)[INPUTS], const int32_t *samples,
                                                     const uint8_t *images)
{
    /* a warp a row, its lanes along the row; the warp's samples read before its first copy (a copy is
     * volatile asm with a memory clobber) */
    constexpr int PIECES = INPUTS / 16, ROWS = (HI - LO + WARPS - 1) / WARPS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int32_t sample[ROWS > 0 ? ROWS : 1];
#pragma unroll
    for (int j = 0; j < ROWS; j++)
        sample[j] = LO + warp + j * WARPS < HI ? samples[LO + warp + j * WARPS] : 0;
#pragma unroll
    for (int j = 0; j < ROWS; j++) {
        const int r = LO + warp + j * WARPS;
        if (r < HI)
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

/* The block's rows' share of the softmax, from its results: their dlogits as operands into S.dl, the sums of
 * their dlogits by class, their loss and hits into S.share. */
static __device__ void share_softmax(Shared &S, int r0)
{
    for (int i = threadIdx.x; i < ROWS_PER_BLOCK * CLASSES_PAD; i += THREADS)
        S.dl[i / CLASSES_PAD][i % CLASSES_PAD] =
            snn_twin_bits(S.logits[i / CLASSES_PAD][i % CLASSES_PAD]); /* padding is 0 */
    if (threadIdx.x < CLASSES_PAD) {
        float b = 0.0f;
        for (int i = 0; i < ROWS_PER_BLOCK; i++)
            b += S.logits[i][threadIdx.x];
        S.share.bias[threadIdx.x] = b;
    }
    if (threadIdx.x == 32) { /* another warp than the bias's */
        double loss = 0.0;
        int right = 0;
        for (int i = 0; i < ROWS_PER_BLOCK && r0 + i < BATCH; i++) {
            loss += (double)S.rowloss[i];
            right += S.rowright[i];
        }
        S.share.loss = loss;
        S.share.right = right;
    }
}

/* From every block's share: the last layer's bias updated from the bias shares summed in rank order (every
 * block keeps the same bias), and, by block 0, the step's loss and correct count. */
static __device__ void softmax_totals(Shared &S, const snn_fused_net &net, int c, int s, const snn_rate &rate)
{
    if (threadIdx.x < SNN_CLASSES) {
        float g = 0.0f;
#pragma unroll
        for (int q = 0; q < BLOCKS; q++)
            g += S.shares[q].bias[threadIdx.x];
        snn_param_update(&S.bl[threadIdx.x], &S.blm[0][threadIdx.x], CLASSES_PAD, nullptr, g, rate);
    }
    if (c == 0 && threadIdx.x == 32) {
        double loss = 0.0;
        int right = 0;
#pragma unroll
        for (int q = 0; q < BLOCKS; q++) {
            loss += S.shares[q].loss;
            right += S.shares[q].right;
        }
        net.train_loss[s] = (float)(loss / BATCH);
        net.train_correct[s] = right;
    }
}

/* Backward of layer l > 0, its output gradient dy [rows][LD] (N its outputs as stored, `outs` of them real),
 * in two parts: the block's units' input gradient through dx, from its weight columns' twin [N][UNITS_LD];
 * then the update of the columns (weights and moments [N][UNITS], the twin) from the gradient against its
 * units' inputs. */
template <int N, int LD, class Dx>
static __device__ __forceinline__ void input_gradient(Shared &S, const snn_twin *dy, const Dx &dx,
                                                      const snn_twin *twin)
{
    mma16_gemm<THREADS, BATCH_PAD, UNITS, N>(Mma16Mat<LD, 1>{dy}, Mma16Mat<1, UNITS_LD>{twin}, S.scratch, dx);
}
template <int N, int LD>
static __device__ __forceinline__ void columns_update(Shared &S, const snn_twin *dy, int l, int u0, int outs,
                                                      snn_twin *twin, float *w, float *wm,
                                                      const snn_rate &rate)
{
    mma16_gemm<THREADS, N, UNITS, BATCH_PAD>(
        Mma16Mat<1, LD>{dy}, Mma16Mat<1, UNITS_LD>{&S.acth[l - 1][0][0]}, S.scratch,
        mma16_update<true>(N * UNITS, rate, [&](int o, int n, float *&pw, float *&pm, snn_twin *&pt) {
            pw = &w[o * UNITS + n], pm = &wm[o * UNITS + n], pt = &twin[o * UNITS_LD + n];
            return o < outs && u0 + n < HIDDEN;
        }));
}

/* ---------------------------------------------------------------------------
 * the exchanges, pushed into the peers' shared memory (arch/sm90/dsmem.cuh)
 * ------------------------------------------------------------------------- */

/* 16 bytes at `from` in the block's shared memory to what `to` names in block rank's. */
struct Push {
    const void *from;
    void *to;
    int rank;
};

/* For each i < ITEMS, the push item(i), counted against the receiver's mbarrier `bar`. The block's threads
 * all call it. */
template <int ITEMS, class Item> static __device__ __forceinline__ void push(uint64_t *bar, const Item &item)
{
    for (int i = threadIdx.x; i < ITEMS; i += THREADS) {
        const Push p = item(i);
        sm90_store_peer_16(p.to, p.rank, *static_cast<const uint4 *>(p.from), bar);
    }
}

/* Waits for the phase of parity `parity` of the block's mbarrier `bar`, `bytes` of pushes. */
static __device__ __forceinline__ void receive(uint64_t *bar, uint32_t parity, uint32_t bytes)
{
    if (threadIdx.x == 0)
        sm90_mbarrier_arrive_expect_tx(bar, bytes);
    sm90_mbarrier_wait<true>(bar, parity);
}

/* Exchange k of step s, from every block to every block, counted from the launch's first step: its
 * mbarrier and the parity of its phase there. */
struct Exchange {
    uint64_t *bar;
    uint32_t parity;
    __device__ Exchange(Shared &S, int first, int s, int k)
    {
        const int x = (s - first) * EXCHANGES + k;
        bar = &S.exchanged[x & 1], parity = (uint32_t)(x >> 1) & 1;
    }
    __device__ void wait(uint32_t bytes) const { receive(bar, parity, bytes); }
};

/* The buffer of all-gather k of step s: a step's GATHERS (a hidden-to-hidden layer's input before its
 * forward, its output gradient after the layer above's input gradient) take the buffers in turn, counted
 * from the launch's first step. A gradient is read until the update after the next exchange: three
 * buffers. */
constexpr int GATHERS = 2 * (LAYERS - 2);
static __device__ __forceinline__ snn_twin *gathered(Shared &S, int first, int s, int k)
{
    return &S.gathered[((s - first) * GATHERS + k) % GATHER_BUFFERS][0][0];
}

/* The block's units' 16-bit values of every row, from + m LD + n, into `to` (a gathered buffer) of every
 * block. */
constexpr int UNIT_PIECES = UNITS / 8; /* 16-byte pieces of a row's units */
constexpr uint32_t GATHER_BYTES = BLOCKS * BATCH_PAD * UNITS * sizeof(snn_twin);
template <int LD>
static __device__ __forceinline__ void all_gather(const snn_twin *from, snn_twin *to, int u0, uint64_t *bar)
{
    static_assert(LD % 8 == 0, "cluster kernel: rows of whole 16-byte pieces");
    push<BLOCKS * BATCH_PAD * UNIT_PIECES>(bar, [&](int i) {
        const int q = i % BLOCKS, m = i / BLOCKS / UNIT_PIECES, n = i / BLOCKS % UNIT_PIECES * 8;
        return Push{from + m * LD + n, to + m * GATHER_LD + u0 + n, q};
    });
}

/* The block's columns of hidden-to-hidden layer l's twin, updated, into the rows' copies of the blocks that
 * own those rows. A block reads its copy in its forward before it pushes the layer's output (or the logits'
 * partial sums), which every block waits for before its update: one copy, and one mbarrier whose phases
 * follow the steps. */
constexpr uint32_t REFRESH_BYTES = BLOCKS * UNITS * UNITS * sizeof(snn_twin);
static __device__ __forceinline__ void refresh_rows(Shared &S, int l, int u0)
{
    Mid &M = S.mid[l - 1];
    push<BLOCKS * UNITS * UNIT_PIECES>(&S.refreshed[l - 1], [&](int i) {
        const int q = i % BLOCKS, o = i / BLOCKS / UNIT_PIECES, n = i / BLOCKS % UNIT_PIECES * 8;
        return Push{&M.twin[q * UNITS + o][n], &M.rows[o][u0 + n], q};
    });
}

/* Each row's partial sums of the logits to the block that owns the row. */
constexpr uint32_t PARTIAL_BYTES = BLOCKS * ROWS_PER_BLOCK * CLASSES_PAD * sizeof(float);
static __device__ __forceinline__ void scatter_partials(Shared &S, int c, uint64_t *bar)
{
    constexpr int PIECES = CLASSES_PAD / 4;
    push<BATCH_PAD * PIECES>(bar, [&](int i) {
        const int m = i / PIECES, j = i % PIECES * 4;
        return Push{&S.partial[m][j], &S.partials[c][m % ROWS_PER_BLOCK][j], m / ROWS_PER_BLOCK};
    });
}

/* The block's rows' dlogits and its share of the softmax to every block. */
constexpr int DL_PIECES = ROWS_PER_BLOCK * CLASSES_PAD / 8, SHARE_PIECES = sizeof(SoftmaxShare) / 16;
constexpr uint32_t SOFTMAX_BYTES = BLOCKS * (DL_PIECES + SHARE_PIECES) * 16;
static __device__ __forceinline__ void gather_softmax(Shared &S, int c, int r0, uint64_t *bar)
{
    push<BLOCKS *(DL_PIECES + SHARE_PIECES)>(bar, [&](int i) {
        const int q = i % BLOCKS, k = i / BLOCKS;
        if (k < DL_PIECES) {
            const int r = k / (CLASSES_PAD / 8), j = k % (CLASSES_PAD / 8) * 8;
            return Push{&S.dl[r][j], &S.dlogits[r0 + r][j], q};
        }
        return Push{reinterpret_cast<const uint4 *>(&S.share) + k - DL_PIECES,
                    reinterpret_cast<uint4 *>(&S.shares[c]) + k - DL_PIECES, q};
    });
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
    if (tid == 0) {
        for (int i = 0; i < 2; i++)
            sm90_mbarrier_init(&S.exchanged[i], 1);
        for (int l = 0; l < MIDS; l++)
            sm90_mbarrier_init(&S.refreshed[l], 1);
        sm90_mbarrier_init_fence();
    }
    if (tid < BATCH) {
        S.samples[first & 1][tid] = net.order[(long)first * BATCH + tid];
        if (first + 1 < last)
            S.samples[(first + 1) & 1][tid] = net.order[(long)(first + 1) * BATCH + tid];
        S.labels[first & 1][tid] = net.train_labels[S.samples[first & 1][tid]];
    }
    cluster.sync(); /* every block's mbarriers are ready before a peer pushes */
    const bool translates = snn_noise_translates(net.noise);
    gather_images<0, BATCH>(S.next, S.samples[first & 1], net.train_images);
    const int32_t epoch = *net.clock.epoch;

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
        /* the next batch's copies, issued in halves while the step's first two exchanges travel (in the
         * first alone they outlast its flight) */
        auto next_batch = [&](int k) {
            if (s + 1 < last && k == 0)
                gather_images<0, BATCH / 2>(S.next, S.samples[p ^ 1], net.train_images);
            if (s + 1 < last && k == 1)
                gather_images<BATCH / 2, BATCH>(S.next, S.samples[p ^ 1], net.train_images);
        };

        resident_trace_batch<THREADS>(
            net, p, [&](int r) { return S.next[r]; }, [&](int r) { return S.labels[p][r]; });

        /* F0 .. F(L-2): hidden layer l's output for the block's units, all-gathered where a hidden-to-hidden
         * layer follows */
        for (int l = 0; l + 1 < LAYERS; l++) {
            if (l == 0) {
                mma16_gemm<THREADS, BATCH_PAD, UNITS, INPUTS>(
                    Pixels<INPUTS>(&S.next[0][0], S.xn), Mma16FloatRows<W0Rows>{S.w0}, S.scratch,
                    [&](int m, int n, float v) { hidden_out(S, net, draws, 0, u0, m, n, v + S.b0[n]); });
            } else {
                Mid &M = S.mid[l - 1];
                if (s > first) /* the copy the step before refreshed */
                    receive(&S.refreshed[l - 1], (uint32_t)(s - 1 - first) & 1, REFRESH_BYTES);
                mma16_gemm<THREADS, BATCH_PAD, UNITS, HIDDEN_PAD>(
                    Mma16Mat<GATHER_LD, 1>{gathered(S, first, s, l - 1)},
                    Mma16Mat<GATHER_LD, 1>{&M.rows[0][0]}, S.scratch,
                    [&](int m, int n, float v) { hidden_out(S, net, draws, l, u0, m, n, v + M.b[n]); });
            }
            __syncthreads(); /* the output is whole; after F0, the batch's bytes are free for the next */
            /* built where nothing is exchanged too, its index then another's and never used: the code
             * measured faster so (docs/PERF.md v56) */
            const Exchange ex(S, first, s, l);
            if (l + 2 < LAYERS) {
                all_gather<UNITS_LD>(&S.acth[l][0][0], gathered(S, first, s, l), u0, ex.bar);
                next_batch(l);
            }
            fused_stamp(net, s, l, false);
            if (l + 2 < LAYERS)
                ex.wait(GATHER_BYTES);
            fused_stamp(net, s, l, true);
        }

        /* F(L-1): the logits' partial sums of the block's units to the rows' blocks; the block's rows'
         * softmax; their dlogits to every block */
        mma16_gemm<THREADS, BATCH_PAD, CLASSES_PAD, UNITS_K>(
            Mma16Mat<UNITS_LD, 1>{&S.acth[LAYERS - 2][0][0]}, Mma16Mat<UNITS_LD, 1>{&S.wlt[0][0]}, S.scratch,
            [&](int m, int n, float v) { S.partial[m][n] = v; });
        __syncthreads();
        const Exchange partials(S, first, s, LAYERS - 2);
        scatter_partials(S, c, partials.bar);
        next_batch(LAYERS - 2);
        partials.wait(PARTIAL_BYTES);
        constexpr int QUADS = (SNN_CLASSES + 3) / 4;
        for (int i = tid; i < ROWS_PER_BLOCK * QUADS; i += THREADS) {
            const int i0 = i / QUADS, m = r0 + i0, j = i % QUADS * 4;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4 /* unrolled whole, its loads hold registers that 384 threads a block do not have */
            for (int q = 0; q < BLOCKS; q++) {
                const float4 part = *reinterpret_cast<const float4 *>(&S.partials[q][i0][j]);
                v.x += part.x, v.y += part.y, v.z += part.z, v.w += part.w;
            }
            const float add[4] = {v.x, v.y, v.z, v.w};
            for (int k = 0; k < 4; k++)
                S.logits[i0][j + k] = m < BATCH && j + k < SNN_CLASSES ? add[k] + S.bl[j + k] : 0.0f;
        }
        __syncthreads();
        softmax_rows(S, net, r0, p);
        __syncthreads();
        share_softmax(S, r0);
        __syncthreads();
        const Exchange dlogits(S, first, s, LAYERS - 1);
        gather_softmax(S, c, r0, dlogits.bar);
        next_batch(LAYERS - 1);
        fused_stamp(net, s, LAYERS - 1, false);
        dlogits.wait(SOFTMAX_BYTES);
        fused_stamp(net, s, LAYERS - 1, true);
        softmax_totals(S, net, c, s, rate);

        /* B(L-1) .. B1 */
        for (int l = LAYERS - 1; l >= 1; l--) {
            const bool top = l == LAYERS - 1, exchange = l >= 2;
            /* the output gradient of a hidden-to-hidden layer, all-gathered in the phase before */
            const snn_twin *dy = top ? nullptr : gathered(S, first, s, 2 * LAYERS - 4 - l);
            snn_twin *op = exchange ? &S.dslice[0][0] : &S.dgrad0[0][0];
            const int sm = exchange ? UNITS : 1, sn = exchange ? 1 : DGRAD0_LD;
            auto dx = [&](int m, int n, float v) {
                hidden_grad(S, net, draws, l - 1, u0, m, n, v, op, sm, sn);
            };
            if (top) {
                input_gradient<CLASSES_PAD, DLOGITS_LD>(S, &S.dlogits[0][0], dx, &S.wlt[0][0]);
            } else {
                input_gradient<HIDDEN_PAD, GATHER_LD>(S, dy, dx, &S.mid[l - 1].twin[0][0]);
            }
            __syncthreads(); /* the weights are read before they change, and the slice is whole */
            /* the slice travels while the block updates its columns */
            const Exchange ex(S, first, s, 2 * LAYERS - 1 - l); /* likewise built where not used */
            if (exchange)
                all_gather<UNITS>(&S.dslice[0][0], gathered(S, first, s, 2 * LAYERS - 3 - l), u0, ex.bar);
            if (top) {
                columns_update<CLASSES_PAD, DLOGITS_LD>(S, &S.dlogits[0][0], l, u0, SNN_CLASSES, &S.wlt[0][0],
                                                        &S.wl[0][0], &S.wlm[0][0][0], rate);
            } else {
                Mid &M = S.mid[l - 1];
                columns_update<HIDDEN_PAD, GATHER_LD>(S, dy, l, u0, HIDDEN, &M.twin[0][0], &M.w[0][0],
                                                      &M.wm[0][0][0], rate);
                snn_bias_update<THREADS>(M.b, &M.bm[0][0], UNITS, &S.dgrad[l & 1][0][0], UNITS, BATCH, owned,
                                         rate);
                __syncthreads(); /* the twin is whole */
                if (s + 1 < last)
                    refresh_rows(S, l, u0);
            }
            const int phase = 2 * LAYERS - 1 - l;
            fused_stamp(net, s, phase, false);
            if (exchange)
                ex.wait(GATHER_BYTES);
            __syncthreads(); /* every push has read the slice before the next phase rewrites it */
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
    /* each block has received every push made to it; the barrier also keeps a block from leaving while its
     * own last pushes may be in flight (the guide's rule for distributed shared memory) */
    cluster.sync();
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
    fused_describe_resident(buf, len, "one cluster of ", BLOCKS, THREADS, SMEM_BYTES, UNITS, EXCHANGES,
                            "exchange");
}

} // namespace resident_cluster

const FusedKernel fused_cluster = {"cluster", resident_cluster::fits, resident_cluster::train,
                                   resident_cluster::describe};
