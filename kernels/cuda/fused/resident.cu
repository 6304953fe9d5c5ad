/* The resident fused step (CONFIG_FUSED_CLUSTER, sm90): where a model with hidden layers and its
 * optimizer state fit in the shared memory of one cluster of RES_CTAS thread blocks, that cluster runs every
 * step of a launch with the weights on chip, loaded at the launch's start and written back at its end.
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
 *              gradient's slices are exchanged through a cluster barrier, since every block needs all of it
 *   B0         layer 0's weight gradient + update: local
 *
 * so 2L - 2 cluster barriers a step for L linear layers, and no block reads another's weights. Partials and
 * gradient slices travel through distributed shared memory in two exchange buffers taken in turn: a buffer
 * is rewritten two exchanges later, after a barrier that every reader of it has passed. What a block reads
 * of its peers is kept small: the SM-to-SM network of one cluster moves only a few hundred GB/s (every block
 * summing every logit cost 3 us a step on 784-128-10 b64). The GEMMs are
 * mma.sync m16n8k16 on 16-bit operands in shared memory with FP32 accumulators; master weights and optimizer
 * state in FP32, their 16-bit twins beside them (layer 0's rounded as F0 reads them), rounded as the grid-wide
 * kernel rounds its operands.
 * Deterministic: a fixed split of the work and fixed orders of summation. */
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
#include "kernels/cuda/fused/mma16.cuh"
#include "kernels/cuda/fused/resident.h"
#include "kernels/cuda/fused/stamp.cuh"
#include "kernels/cuda/gather.cuh"
#include "kernels/fused.h"

namespace cg = cooperative_groups;

constexpr int RES_CTAS = 16; /* the cluster: the most an H100 schedules (a non-portable size) */
constexpr int RES_THREADS = CONFIG_FUSED_CLUSTER_THREADS, RES_WARPS = RES_THREADS / 32;
static_assert(RES_THREADS % 32 == 0, "resident step: whole warps (CONFIG_FUSED_CLUSTER_THREADS)");
constexpr int RES_L = SNN_LAYERS;
constexpr int RES_H = SNN_LAYERS > 1 ? SNN_HIDDEN : 16;              /* the hidden width */
constexpr int RES_U = res_up((RES_H + RES_CTAS - 1) / RES_CTAS, 8); /* units a block owns: an n extent */
constexpr int RES_UK = res_up(RES_U, 16);                           /* the same as a k extent */
constexpr int RES_UKLD = res_ld(RES_UK);                            /* rows of that extent */
/* The hidden width padded, as the hidden-to-hidden layers' output extent; without such a layer their code,
 * never run, shrinks to one tile. */
constexpr int RES_NH = SNN_LAYERS > 2 ? RES_U * RES_CTAS : 16;
constexpr int RES_NC = 16;                                          /* the classes, padded */
constexpr int RES_B = SNN_BATCH, RES_BP = res_up(SNN_BATCH, 16);
constexpr int RES_IN = SNN_INPUT_DIM;
static_assert(RES_IN % 16 == 0, "resident step: the input's k extent in whole k16 steps");
static_assert(SNN_CLASSES <= RES_NC, "resident step: the classes in two n8 tiles");
/* The normalised batch's row r at xn + res_xn_row(r): rows 2 mod 8 16-byte units apart, and each four one unit
 * further than the four before, so that a half warp's 8-byte stores of four rows (ResPixels::keep) and
 * ldmatrix's reads of eight (ResColumns) fall in distinct banks. */
constexpr int RES_XLD = res_up(RES_IN - 16, 64) + 16; /* in 16-bit elements: 16 mod 64 */
__host__ __device__ constexpr int res_xn_row(int r) { return r * RES_XLD + r / 4 * 8; }
/* res_xn_row(r0 + r) for r0 a multiple of 4, the part of r0 linear: what a loop can step */
__host__ __device__ constexpr int res_xn_row(int r0, int r) { return r0 * (RES_XLD + 2) + res_xn_row(r); }
/* Layer 0's FP32 weight rows, unit n's at w0 + res_w0_row(n): a pair's two rows 16 banks apart, F0's 16-byte
 * reads of two rows by a quarter warp (ResFloatRows) conflict-free; pairs 8 banks apart, B0's updates of rows
 * 2t (and of rows 2t + 1) by a warp conflict-free. */
constexpr int RES_W0LD = res_up(RES_IN - 16, 32) + 16; /* 16 mod 32 */
__host__ __device__ constexpr int res_w0_row(int n) { return n * RES_W0LD + n / 2 * 8; }
/* res_w0_row(n0 + n) for n0 even, the part of n0 linear */
__host__ __device__ constexpr int res_w0_row(int n0, int n) { return n0 * (RES_W0LD + 4) + res_w0_row(n); }
constexpr int RES_W0N = res_w0_row(RES_U);
constexpr int RES_D0LD = RES_BP + 8; /* layer 0's output gradient, transposed: B0's fragments conflict-free */
constexpr int RES_M = res_max(SNN_OPTIM_MOMENTS, 1);
constexpr int RES_MIDS = res_max(RES_L - 2, 1); /* hidden-to-hidden layers */
constexpr int RES_HIDS = res_max(RES_L - 1, 1); /* hidden layers */
constexpr int RES_DW = res_max(RES_NH, RES_NC); /* the widest output gradient */
using ResStepDraws = ResDraws<RES_H>;
constexpr int RES_BARRIERS = 2 * RES_L - 2;
/* The rows of the batch whose logits a block sums and whose softmax it computes: a sixteenth each. */
constexpr int RES_RPB = RES_BP / RES_CTAS;
static_assert(RES_BP % RES_CTAS == 0, "resident step: the padded batch in whole rows a block");


/* A hidden-to-hidden layer's weight columns of the block's units and the bias of those units; a model
 * without such a layer keeps a placeholder of one row, whose code never runs (the shared memory saved gives
 * 784-128-10 b64's blocks room for 384 threads' k-slice scratch). */
constexpr int RES_MID_ROWS = SNN_LAYERS > 2 ? RES_NH : 1;
struct ResMid {
    alignas(16) res_half twin[RES_MID_ROWS][RES_UKLD];
    float w[RES_MID_ROWS][RES_U], wm[RES_M][RES_MID_ROWS][RES_U];
    float b[RES_U], bm[RES_M][RES_U];
};

struct alignas(128) ResShared {
    uint8_t next[RES_BP][RES_IN];             /* the step's images; after F0, the next step's, copied in */
    alignas(16) res_half xn[res_xn_row(RES_BP)]; /* the step's, translated, normalised and rounded (by F0) */
    alignas(16) float w0[RES_W0N], w0m[RES_M][RES_W0N]; /* no twin: F0 rounds as it reads (res_w0_row) */
    float b0[RES_U], b0m[RES_M][RES_U];
    ResMid mid[RES_MIDS];
    alignas(16) res_half wlt[RES_NC][RES_UKLD]; /* the last layer's columns of the block's units */
    float wl[RES_NC][RES_U], wlm[RES_M][RES_NC][RES_U];
    float bl[RES_NC], blm[RES_M][RES_NC]; /* its bias: every block keeps the same copy */
    float act[RES_HIDS][RES_BP][RES_U];   /* hidden outputs, the block's units (the ReLU's mask) */
    alignas(16) res_half acth[RES_HIDS][RES_BP][RES_UKLD];
    /* a hidden output's gradient, the block's units, by layer parity */
    float dgrad[res_min(2, RES_HIDS)][RES_BP][RES_U];
    alignas(16) res_half dgrad0[RES_UK][RES_D0LD]; /* layer 0's, as an operand: [unit][row] */
    alignas(16) res_half dfull[RES_BP * res_ld(RES_DW)]; /* a whole output gradient, row stride res_ld(width) */
    float logits[RES_RPB][RES_NC];        /* the block's rows' (below), then their dlogits */
    /* partial sums, or gradient slices as res_half; 128-byte aligned, so that a peer's 32-byte reads of a row
     * each cross the SM-to-SM network as one sector, not two (docs/PERF.md, v20) */
    alignas(128) float exch[2][RES_BP * RES_DW];
    float scratch[RES_WARPS][16 * 8];     /* k slices' partial tiles */
    float rowloss[RES_RPB];               /* the block's rows' loss and hit */
    int32_t rowright[RES_RPB];
    int32_t samples[2][RES_BP];
    snn_shift shift[RES_BP];
    uint8_t labels[2][RES_BP];
    snn_rate rate;
};
constexpr int RES_SMEM = sizeof(ResShared);
constexpr bool RES_FITS = SNN_LAYERS >= 2 && RES_B <= RES_THREADS && RES_SMEM <= SNN_ARCH_MAX_SMEM_PER_BLOCK;


/* ---------------------------------------------------------------------------
 * GEMM on shared memory
 * ------------------------------------------------------------------------- */


/* Image bytes, element (i, k) at p[i * SI + k], normalised and rounded as they are read, four k a thread.
 * KEEPS: res_gemm hands each A fragment back to keep(), which leaves it in out[res_xn_row(i) + k], where a
 * later GEMM finds the batch as 16-bit operands (F0 reads each byte once a block, so layer 0's update reads no
 * byte again). The stores wait for a run of loads: the compiler cannot tell out from p. */
template <int SI> struct ResPixels : ResPairs<ResPixels<SI>> {
    static_assert(SI % 4 == 0 && RES_XLD % 4 == 0, "resident step: rows of whole 4-byte quads");
    static constexpr bool KEEPS = true;
    const uint8_t *p;
    res_half *out;
    __device__ ResPixels(const uint8_t *p, res_half *out) : p(p), out(out) {}
    template <int GAP> __device__ __forceinline__ uint2 frag(int i, int k) const
    {
        static_assert(GAP == 2, "resident step: image rows are read four k a thread");
        const uint32_t four = *reinterpret_cast<const uint32_t *>(p + i * SI + k);
        float x[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            x[q] = fmaf(res_byte(four, q), RES_PIXEL_SCALE, RES_PIXEL_OFFSET);
        return make_uint2(res_round2(x[0], x[1]), res_round2(x[2], x[3]));
    }
    /* the fragment a16<true>(m0, k) returned: rows m0 + g and m0 + g + 8, k + 4t .. k + 4t + 3 */
    __device__ __forceinline__ void keep(int m0, int k, uint4 f) const
    {
        const int lane = threadIdx.x % 32, g = lane / 4;
        k += 4 * (lane % 4);
        *reinterpret_cast<uint2 *>(out + res_xn_row(m0, g) + k) = make_uint2(f.x, f.z);
        *reinterpret_cast<uint2 *>(out + res_xn_row(m0, g + 8) + k) = make_uint2(f.y, f.w);
    }
};

/* The normalised batch stored by row, element (i, k) at p[res_xn_row(k) + i], as an A operand (i the pixel, k
 * the row) in the fragments' own k order: each 8 x 8 piece by ldmatrix.trans. */
struct ResColumns {
    static_assert(RES_XLD % 8 == 0, "resident step: ldmatrix rows of whole 16-byte units");
    static constexpr bool KEEPS = false;
    const res_half *p;
    template <bool QUAD> __device__ __forceinline__ uint4 a16(int m0, int k) const
    {
        static_assert(!QUAD, "resident step: ldmatrix reads fragments in their own k order");
        const int lane = threadIdx.x % 32, piece = lane / 8; /* pieces (m, k): (0, 0), (8, 0), (0, 8), (8, 8) */
        uint32_t r[4];
        sm75_ldmatrix_x4_trans(r, p + res_xn_row(k, piece / 2 * 8 + lane % 8) + m0 + piece % 2 * 8);
        return make_uint4(r[0], r[1], r[2], r[3]);
    }
};

/* Layer 0's FP32 weights, unit n's k-th at p[res_w0_row(n) + k], as a B operand four k a thread (one 16-byte
 * load), each pair rounded as a twin would hold it. */
struct ResFloatRows {
    static_assert(RES_W0LD % 4 == 0, "resident step: FP32 rows of whole 16-byte quads");
    const float *p;
    template <bool QUAD> __device__ __forceinline__ uint2 b16(int n0, int k) const
    {
        static_assert(QUAD, "resident step: FP32 rows are read four k a thread");
        const int lane = threadIdx.x % 32;
        const float4 v = *reinterpret_cast<const float4 *>(p + res_w0_row(n0, lane / 4) + k + 4 * (lane % 4));
        return make_uint2(res_round2(v.x, v.y), res_round2(v.z, v.w));
    }
};


/* ---------------------------------------------------------------------------
 * the model's state in and out
 * ------------------------------------------------------------------------- */

/* The block's share of the model, from it (in) or back to it; the last layer's bias, which every block
 * keeps, goes back from block 0. */
static __device__ void res_state(ResShared &S, const snn_fused_net &net, int c, bool in)
{
    const int u0 = c * RES_U;
    auto unit = [u0](int u) { return u0 + u < RES_H; };
    const snn_fused_layer &L0 = net.layer[0];
    for (int i = 0; i < RES_U; i++)
        res_copy<RES_THREADS>(in, 1, RES_IN, S.w0 + res_w0_row(i), 0, S.w0m[0] + res_w0_row(i), RES_W0N,
                              nullptr, 0, L0.w, L0.sw,
                              [&](int, int j) -> long { return unit(i) ? (long)(u0 + i) * RES_IN + j : -1; });
    auto column = [&](int o, int j) -> long { return unit(j) ? (long)o * RES_H + u0 + j : -1; };
    auto bias = [&](int, int j) -> long { return unit(j) ? u0 + j : -1; };
    res_copy<RES_THREADS>(in, 1, RES_U, S.b0, RES_U, &S.b0m[0][0], RES_U, nullptr, 0, L0.b, L0.sb, bias);
    for (int l = 1; l + 1 < RES_L; l++) {
        ResMid &M = S.mid[l - 1];
        const snn_fused_layer &L = net.layer[l];
        res_copy<RES_THREADS>(in, RES_H, RES_U, &M.w[0][0], RES_U, &M.wm[0][0][0], RES_NH * RES_U,
                              &M.twin[0][0], RES_UKLD, L.w, L.sw, column);
        res_copy<RES_THREADS>(in, 1, RES_U, M.b, RES_U, &M.bm[0][0], RES_U, nullptr, 0, L.b, L.sb, bias);
    }
    const snn_fused_layer &LL = net.layer[RES_L - 1];
    res_copy<RES_THREADS>(in, SNN_CLASSES, RES_U, &S.wl[0][0], RES_U, &S.wlm[0][0][0], RES_NC * RES_U,
                          &S.wlt[0][0], RES_UKLD, LL.w, LL.sw, column);
    if (in || c == 0)
        res_copy<RES_THREADS>(in, 1, SNN_CLASSES, S.bl, RES_NC, &S.blm[0][0], RES_NC, nullptr, 0, LL.b, LL.sb,
                              [](int, int j) -> long { return j; });
}

/* ---------------------------------------------------------------------------
 * the batch
 * ------------------------------------------------------------------------- */

/* The images of samples[0 .. B) into x, by cp.async (16-byte rows' pieces), one group. */
static __device__ __forceinline__ void res_gather(uint8_t (*x)[RES_IN], const int32_t *samples,
                                                  const uint8_t *images)
{
    /* a warp a row, its lanes along the row; the warp's samples read before its first copy (a copy is volatile
     * asm with a memory clobber) */
    constexpr int PIECES = RES_IN / 16, ROWS = (RES_B + RES_WARPS - 1) / RES_WARPS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int32_t sample[ROWS];
#pragma unroll
    for (int j = 0; j < ROWS; j++)
        sample[j] = warp + j * RES_WARPS < RES_B ? samples[warp + j * RES_WARPS] : 0;
#pragma unroll
    for (int j = 0; j < ROWS; j++) {
        const int r = warp + j * RES_WARPS;
        if (r < RES_B)
            for (int q = lane; q < PIECES; q += 32)
                sm80_cp_async_16(&x[r][16 * q], images + (size_t)sample[j] * RES_IN + 16 * q);
    }
    sm80_cp_async_commit();
}

/* Each image of the batch in S.next translated in place by its row's shift (kernels/noise.h, as the host), a
 * warp a row: the row's new bytes gathered into registers before any is written. */
static __device__ void res_translate(ResShared &S)
{
    constexpr int PER = (RES_IN + 31) / 32;
    const int lane = threadIdx.x % 32;
    for (int r = threadIdx.x / 32; r < RES_B; r += RES_WARPS) {
        uint8_t v[PER];
#pragma unroll
        for (int i = 0; i < PER; i++)
            v[i] = lane + 32 * i < RES_IN ? snn_shifted_pixel(S.next[r], lane + 32 * i, S.shift[r]) : 0;
        __syncwarp();
#pragma unroll
        for (int i = 0; i < PER; i++)
            if (lane + 32 * i < RES_IN)
                S.next[r][lane + 32 * i] = v[i];
        __syncwarp();
    }
}

/* ---------------------------------------------------------------------------
 * the step's element-wise ends
 * ------------------------------------------------------------------------- */

/* Hidden layer l's output at row m, the block's unit n, from its pre-activation v (bias added): ReLU and
 * dropout, 0 in padding; kept for the backward pass and as the next layer's operand. */
static __device__ __forceinline__ void res_hidden_out(ResShared &S, const snn_fused_net &net,
                                                      const ResStepDraws &d, int l, int u0, int m, int n,
                                                      float v)
{
    const int unit = u0 + n;
    const bool real = m < RES_B && unit < RES_H;
    v = real ? d.drop(l, m, unit, v < 0.0f ? 0.0f : v) : 0.0f;
    S.act[l][m][n] = v;
    S.acth[l][m][n] = res_round(v);
    if (net.trace && real)
        net.act[l + 1][(size_t)m * RES_H + unit] = v;
}

/* The gradient of hidden layer l's output at row m, the block's unit n, from dY . W (v): through the ReLU's
 * mask and the dropout of the forward pass, 0 in padding; FP32 in dgrad, as an operand at op[m sm + n sn]. */
static __device__ __forceinline__ void res_hidden_grad(ResShared &S, const snn_fused_net &net,
                                                       const ResStepDraws &d, int l, int u0, int m, int n,
                                                       float v, res_half *op, int sm, int sn)
{
    const int unit = u0 + n;
    const bool real = m < RES_B && unit < RES_H;
    v = real && S.act[l][m][n] > 0.0f ? d.drop(l, m, unit, v) : 0.0f;
    S.dgrad[l & 1][m][n] = v;
    op[m * sm + n * sn] = res_round(v);
    if (net.trace && real)
        net.grad[l][(size_t)m * RES_H + unit] = v;
}

/* Lanes a row in the softmax: a power of two the block's threads cover its rows with, at most a warp. */
constexpr int res_row_lanes(int g) { return g * 2 <= 32 && g * 2 * RES_RPB <= RES_THREADS ? res_row_lanes(g * 2) : g; }
constexpr int RES_ROW_LANES = res_row_lanes(1);
constexpr int RES_ROW_CLASSES = (SNN_CLASSES + RES_ROW_LANES - 1) / RES_ROW_LANES; /* classes a lane */

/* Softmax and cross-entropy of the logits of rows [r0, r0 + RES_RPB), a row a group of RES_ROW_LANES lanes
 * (class j on lane j % RES_ROW_LANES), the row's reductions by shuffles: dlogits in place, each row's loss
 * and hit; tracing, the rows' logits and dlogits. The arg max is the first maximal class, as the host's; the
 * loss is the host's function of the row. The block's threads all call it. */
static __device__ void res_softmax(ResShared &S, const snn_fused_net &net, int r0, int p)
{
    constexpr int G = RES_ROW_LANES;
    const int i0 = threadIdx.x / G, r = r0 + i0, q = threadIdx.x % G; /* row i0 of the block's, r of the batch */
    const bool row = i0 < RES_RPB && r < RES_B;
    float z[RES_ROW_CLASSES], e[RES_ROW_CLASSES];
    float zmax = -INFINITY;
    int arg = SNN_CLASSES;
#pragma unroll
    for (int i = 0; i < RES_ROW_CLASSES; i++) {
        const int j = q + i * G;
        z[i] = row && j < SNN_CLASSES ? S.logits[i0][j] : -INFINITY;
        if (z[i] > zmax) {
            zmax = z[i];
            arg = j;
        }
    }
#pragma unroll
    for (int o = G / 2; o > 0; o /= 2) {
        const float zo = __shfl_xor_sync(0xffffffffu, zmax, o);
        const int ao = __shfl_xor_sync(0xffffffffu, arg, o);
        if (zo > zmax || (zo == zmax && ao < arg)) {
            zmax = zo;
            arg = ao;
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < RES_ROW_CLASSES; i++) {
        e[i] = q + i * G < SNN_CLASSES ? expf(z[i] - zmax) : 0.0f;
        sum += e[i];
    }
#pragma unroll
    for (int o = G / 2; o > 0; o /= 2) /* a butterfly: every lane adds the same pairs, so holds the same sum */
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const int label = row ? S.labels[p][r] : 0;
    if (row && q == 0) {
        S.rowloss[i0] = snn_xent_loss(logf(sum), zmax, S.logits[i0], label, 1);
        S.rowright[i0] = arg == label;
    }
    __syncwarp(); /* lane 0 has read the row's logits */
#pragma unroll
    for (int i = 0; i < RES_ROW_CLASSES; i++) {
        const int j = q + i * G;
        if (row && j < SNN_CLASSES) {
            const float g = (e[i] / sum - snn_xent_target(j, label)) * (1.0f / (float)RES_B);
            S.logits[i0][j] = g;
            if (net.trace) {
                net.act[RES_L][r * SNN_CLASSES + j] = z[i];
                net.grad[RES_L - 1][r * SNN_CLASSES + j] = g;
            }
        }
    }
}

/* What a block shares of its rows' softmax: their dlogits as operands, the sums of their dlogits by class
 * (its share of the last layer's bias gradient), their loss and hits. */
struct ResSoftmaxShare {
    res_half dl[RES_RPB][RES_NC];
    float bias[RES_NC];
    double loss;
    int32_t right;
};
static_assert(sizeof(ResSoftmaxShare) <= sizeof(ResShared::exch[0]), "resident step: the share in an exchange buffer");

/* The block's rows' share, from the softmax's results, into `mine`. */
static __device__ void res_share_softmax(const ResShared &S, int r0, ResSoftmaxShare &mine)
{
    for (int i = threadIdx.x; i < RES_RPB * RES_NC; i += RES_THREADS)
        mine.dl[i / RES_NC][i % RES_NC] = res_round(S.logits[i / RES_NC][i % RES_NC]); /* padding is 0 */
    if (threadIdx.x < RES_NC) {
        float b = 0.0f;
        for (int i = 0; i < RES_RPB; i++)
            b += S.logits[i][threadIdx.x];
        mine.bias[threadIdx.x] = b;
    }
    if (threadIdx.x == 32) { /* another warp than the bias's */
        double loss = 0.0;
        int right = 0;
        for (int i = 0; i < RES_RPB && r0 + i < RES_B; i++) {
            loss += (double)S.rowloss[i];
            right += S.rowright[i];
        }
        mine.loss = loss;
        mine.right = right;
    }
}

/* 16 bytes at p in block rank's shared memory. */
struct ResPeerAt {
    const void *p;
    int rank;
};

/* For each i < ITEMS, the 16 bytes at from(i) (a ResPeerAt) to to(i) in the block's shared memory: every
 * thread's remote loads issued before its first store, which the compiler may not pass (it cannot tell the
 * two apart). The block's threads all call it. */
template <int ITEMS, class From, class To>
static __device__ __forceinline__ void res_copy_peers(const cg::cluster_group &cluster, const From &from, const To &to)
{
    constexpr int PER = (ITEMS + RES_THREADS - 1) / RES_THREADS;
    uint4 v[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int i = threadIdx.x + j * RES_THREADS;
        if (i < ITEMS) {
            const ResPeerAt at = from(i);
            v[j] = *static_cast<const uint4 *>(cluster.map_shared_rank(at.p, at.rank));
        }
    }
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int i = threadIdx.x + j * RES_THREADS;
        if (i < ITEMS)
            *reinterpret_cast<uint4 *>(to(i)) = v[j];
    }
}

/* Every block's share, `share` in each block's shared memory: every row's dlogits into dfull, the last layer's
 * bias updated from the bias shares summed in rank order (every block keeps the same bias), and, by block 0,
 * the step's loss and correct count. */
static __device__ void res_gather_softmax(ResShared &S, const cg::cluster_group &cluster, const snn_fused_net &net,
                                          int c, int s, const ResSoftmaxShare *share, const snn_rate &rate)
{
    constexpr int LD = res_ld(RES_NC), COPIES = RES_NC / 8; /* 16-byte copies a row */
    res_copy_peers<RES_BP * COPIES>(
        cluster,
        [&](int i) { return ResPeerAt{&share->dl[i / COPIES % RES_RPB][i % COPIES * 8], i / COPIES / RES_RPB}; },
        [&](int i) { return &S.dfull[i / COPIES * LD + i % COPIES * 8]; });
    if (threadIdx.x < SNN_CLASSES) {
        float part[RES_CTAS], g = 0.0f;
#pragma unroll
        for (int q = 0; q < RES_CTAS; q++)
            part[q] = *cluster.map_shared_rank(&share->bias[threadIdx.x], q);
#pragma unroll
        for (int q = 0; q < RES_CTAS; q++)
            g += part[q];
        res_update(&S.bl[threadIdx.x], &S.blm[0][threadIdx.x], RES_NC, nullptr, g, rate);
    }
    if (c == 0 && threadIdx.x == 32) {
        double loss = 0.0;
        int right = 0;
#pragma unroll
        for (int q = 0; q < RES_CTAS; q++) {
            const ResSoftmaxShare *peer = cluster.map_shared_rank(share, q);
            loss += peer->loss;
            right += peer->right;
        }
        net.train_loss[s] = (float)(loss / RES_B);
        net.train_correct[s] = right;
    }
}

/* Backward of layer l > 0, its output gradient in dfull [rows][N] (N its outputs as stored, `outs` of them
 * real): the block's units' input gradient through dx, then the update of its weight columns (twin
 * [N][RES_UKLD]; weights and moments [N][RES_U]) from the gradient against its units' inputs. */
template <int N, class Dx>
static __device__ __forceinline__ void res_backward(ResShared &S, const Dx &dx, int l, int u0, int outs,
                                                    res_half *twin, float *w, float *wm, const snn_rate &rate)
{
    constexpr int LD = res_ld(N);
    res_gemm<RES_THREADS, RES_BP, RES_U, N>(ResMat<LD, 1>{S.dfull}, ResMat<1, RES_UKLD>{twin}, S.scratch, dx);
    __syncthreads(); /* the input gradient has read the weights before they change */
    res_gemm<RES_THREADS, N, RES_U, RES_BP>(ResMat<1, LD>{S.dfull}, ResMat<1, RES_UKLD>{&S.acth[l - 1][0][0]},
                                            S.scratch, [&](int o, int n, float g) {
                                                if (o < outs && u0 + n < RES_H)
                                                    res_update(&w[o * RES_U + n], &wm[o * RES_U + n],
                                                               N * RES_U, &twin[o * RES_UKLD + n], g, rate);
                                            });
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
static __device__ __forceinline__ void res_cluster_arrive()
{
    asm volatile("fence.release.sync_restrict::shared::cta.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;" :::
                     "memory");
}
static __device__ __forceinline__ void res_cluster_wait()
{
    asm volatile("barrier.cluster.wait.aligned;\n\tfence.acquire.sync_restrict::shared::cluster.cluster;" ::: "memory");
}
static __device__ __forceinline__ void res_cluster_sync()
{
    res_cluster_arrive();
    res_cluster_wait();
}

/* The sum over the cluster's blocks, in rank order, of the 4 floats at `at` (16-byte aligned) in each block's
 * shared memory: every block's loads issued before the first add. */
static __device__ __forceinline__ float4 res_sum_peers(const cg::cluster_group &cluster, const float *at)
{
    float4 part[RES_CTAS];
#pragma unroll
    for (int q = 0; q < RES_CTAS; q++)
        part[q] = *reinterpret_cast<const float4 *>(cluster.map_shared_rank(at, q));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int q = 0; q < RES_CTAS; q++) {
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

__global__ void __launch_bounds__(RES_THREADS, 1) res_train_kernel(snn_fused_net net, int first, int last)
{
    extern __shared__ __align__(128) unsigned char res_smem[];
    if constexpr (!RES_FITS)
        return; /* never launched (fused_resident_runs): no code for a model that does not fit */
    ResShared &S = *reinterpret_cast<ResShared *>(res_smem);
    cg::cluster_group cluster = cg::this_cluster();
    const int c = (int)cluster.block_rank(), u0 = c * RES_U, r0 = c * RES_RPB, tid = threadIdx.x;
    const int owned = res_max(0, res_min(RES_U, RES_H - u0)); /* the block's units that are not padding */

    res_clear<RES_THREADS>(res_smem, RES_SMEM);
    __syncthreads();
    res_state(S, net, c, true);
    if (tid < RES_B) {
        S.samples[first & 1][tid] = net.order[(long)first * RES_B + tid];
        if (first + 1 < last)
            S.samples[(first + 1) & 1][tid] = net.order[(long)(first + 1) * RES_B + tid];
        S.labels[first & 1][tid] = net.train_labels[S.samples[first & 1][tid]];
    }
    __syncthreads();
    const bool translates = snn_noise_translates(net.noise);
    res_gather(S.next, S.samples[first & 1], net.train_images);
    const int32_t epoch = *net.clock.epoch;
    int e = 0; /* exchanges so far: the buffer of the next is e & 1 */

    for (int s = first; s < last; ++s) {
        const int p = s & 1;
        const ResStepDraws draws = {net.noise.key, epoch, s};
        fused_stamp(net, s, 2 * RES_L, true);
        if (tid == 0)
            S.rate = snn_clock_rate_at(net.clock, s);
        if (translates && tid < RES_B)
            S.shift[tid] = snn_shift_of(net.noise.key, epoch, s, tid);
        sm80_cp_async_wait<0>();
        __syncthreads();
        const snn_rate rate = S.rate; /* in registers: the updates' epilogues read it per element */
        if (translates) {
            res_translate(S);
            __syncthreads();
        }
        int32_t next_sample = 0; /* of step s + 2, and the labels of s + 1: read now, stored at the end */
        uint8_t next_label = 0;
        if (tid < RES_B) {
            if (s + 2 < last)
                next_sample = net.order[(long)(s + 2) * RES_B + tid];
            if (s + 1 < last)
                next_label = net.train_labels[S.samples[p ^ 1][tid]];
        }

        if (net.trace && c == 0)
            for (int i = tid; i < RES_B * RES_IN; i += RES_THREADS) {
                net.input[p][i] = snn_gather_pixel(S.next[i / RES_IN][i % RES_IN], SNN_PIXEL_MEAN, SNN_PIXEL_STD);
                if (i % RES_IN == 0)
                    net.labels[p][i / RES_IN] = S.labels[p][i / RES_IN];
            }

        /* F0 */
        res_gemm<RES_THREADS, RES_BP, RES_U, RES_IN>(
            ResPixels<RES_IN>(&S.next[0][0], S.xn), ResFloatRows{S.w0}, S.scratch,
            [&](int m, int n, float v) { res_hidden_out(S, net, draws, 0, u0, m, n, v + S.b0[n]); });
        __syncthreads(); /* the batch's operand is whole, and its bytes' buffer free for the next */
        fused_stamp(net, s, 0, false);
        fused_stamp(net, s, 0, true);

        /* F1 .. F(L-1) */
        for (int l = 1; l < RES_L; l++) {
            float *ex = S.exch[e & 1];
            const ResMat<RES_UKLD, 1> in = {&S.acth[l - 1][0][0]};
            if (l + 1 < RES_L)
                res_gemm<RES_THREADS, RES_BP, RES_NH, RES_UK>(
                    in, ResMat<RES_UKLD, 1>{&S.mid[l - 1].twin[0][0]}, S.scratch,
                    [&](int m, int n, float v) { ex[m * RES_NH + n] = v; });
            else
                res_gemm<RES_THREADS, RES_BP, RES_NC, RES_UK>(
                    in, ResMat<RES_UKLD, 1>{&S.wlt[0][0]}, S.scratch,
                    [&](int m, int n, float v) { ex[m * RES_NC + n] = v; });
            /* the step's first barrier: the next batch's copies issued while the peers arrive */
            auto sync = [&] {
                res_cluster_arrive();
                if (l == 1 && s + 1 < last)
                    res_gather(S.next, S.samples[p ^ 1], net.train_images);
                res_cluster_wait();
            };
            if (l + 1 < RES_L) {
                fused_stamp(net, s, l, false);
                sync();
                fused_stamp(net, s, l, true);
                e++;
                for (int i = tid; i < RES_BP * RES_U / 4; i += RES_THREADS) {
                    const int m = i / (RES_U / 4), n = i % (RES_U / 4) * 4;
                    const float4 v = res_sum_peers(cluster, ex + m * RES_NH + u0 + n);
                    const float *b = &S.mid[l - 1].b[n];
                    res_hidden_out(S, net, draws, l, u0, m, n, v.x + b[0]);
                    res_hidden_out(S, net, draws, l, u0, m, n + 1, v.y + b[1]);
                    res_hidden_out(S, net, draws, l, u0, m, n + 2, v.z + b[2]);
                    res_hidden_out(S, net, draws, l, u0, m, n + 3, v.w + b[3]);
                }
            } else { /* the block's rows' logits, their softmax, shared by a second barrier */
                sync();
                e++;
                constexpr int QUADS = (SNN_CLASSES + 3) / 4;
                for (int i = tid; i < RES_RPB * QUADS; i += RES_THREADS) {
                    const int i0 = i / QUADS, m = r0 + i0, j = i % QUADS * 4;
                    float4 v = m < RES_B ? res_sum_peers(cluster, ex + m * RES_NC + j) : make_float4(0, 0, 0, 0);
                    const float add[4] = {v.x, v.y, v.z, v.w};
                    for (int k = 0; k < 4; k++)
                        S.logits[i0][j + k] = m < RES_B && j + k < SNN_CLASSES ? add[k] + S.bl[j + k] : 0.0f;
                }
                __syncthreads();
                res_softmax(S, net, r0, p);
                __syncthreads();
                res_share_softmax(S, r0, *reinterpret_cast<ResSoftmaxShare *>(S.exch[e & 1]));
                fused_stamp(net, s, l, false);
                res_cluster_sync();
                fused_stamp(net, s, l, true);
                e++;
            }
            __syncthreads();
        }

        /* B(L-1) .. B1 */
        for (int l = RES_L - 1; l >= 1; l--) {
            const bool top = l == RES_L - 1, exchange = l >= 2;
            res_half *op = exchange ? reinterpret_cast<res_half *>(S.exch[e & 1]) : &S.dgrad0[0][0];
            const int sm = exchange ? RES_U : 1, sn = exchange ? 1 : RES_D0LD;
            auto dx = [&](int m, int n, float v) { res_hidden_grad(S, net, draws, l - 1, u0, m, n, v, op, sm, sn); };
            if (top) {
                res_gather_softmax(S, cluster, net, c, s, reinterpret_cast<const ResSoftmaxShare *>(S.exch[(e - 1) & 1]),
                                   rate);
                __syncthreads();
                res_backward<RES_NC>(S, dx, l, u0, SNN_CLASSES, &S.wlt[0][0], &S.wl[0][0], &S.wlm[0][0][0], rate);
            } else {
                ResMid &M = S.mid[l - 1];
                res_backward<RES_NH>(S, dx, l, u0, RES_H, &M.twin[0][0], &M.w[0][0], &M.wm[0][0][0], rate);
                res_bias_update<RES_THREADS>(M.b, &M.bm[0][0], RES_U, &S.dgrad[l & 1][0][0], RES_U, RES_B,
                                             owned, rate);
            }
            const int phase = 2 * RES_L - 1 - l;
            fused_stamp(net, s, phase, false);
            if (exchange) {
                res_cluster_sync();
                /* each block's [row][U] slice into the rows of dfull, 8 values a copy */
                const res_half *mine = reinterpret_cast<const res_half *>(S.exch[e & 1]);
                constexpr int COPIES = RES_NH / 8;
                res_copy_peers<RES_BP * COPIES>(
                    cluster,
                    [&](int i) {
                        const int col = i % COPIES * 8;
                        return ResPeerAt{mine + i / COPIES * RES_U + col % RES_U, col / RES_U};
                    },
                    [&](int i) { return &S.dfull[i / COPIES * res_ld(RES_NH) + i % COPIES * 8]; });
                e++;
            }
            __syncthreads();
            fused_stamp(net, s, phase, true);
        }

        /* B0; with one n tile a thread's units are 2t and 2t + 1 in every tile: their rows found once */
        const int rows[2] = {res_w0_row(tid % 4 * 2), res_w0_row(tid % 4 * 2 + 1)};
        res_gemm<RES_THREADS, RES_IN, RES_U, RES_BP, false>(
            ResColumns{S.xn}, ResMat<RES_D0LD, 1>{&S.dgrad0[0][0]}, S.scratch, [&](int k, int n, float g) {
                const int at = (RES_U == 8 ? rows[n & 1] : res_w0_row(n)) + k;
                if (RES_U * RES_CTAS == RES_H || u0 + n < RES_H)
                    res_update(S.w0 + at, S.w0m[0] + at, RES_W0N, nullptr, g, rate);
            });
        res_bias_update<RES_THREADS>(S.b0, &S.b0m[0][0], RES_U, &S.dgrad[0][0][0], RES_U, RES_B, owned, rate);
        if (tid < RES_B) {
            S.samples[p][tid] = next_sample;
            S.labels[p ^ 1][tid] = next_label;
        }
        __syncthreads();
        fused_stamp(net, s, 2 * RES_L - 1, false);
        fused_stamp(net, s, 2 * RES_L - 1, true);
    }
    res_cluster_sync(); /* no block leaves while another may read its exchange buffers */
    res_state(S, net, c, false);
    if (c == 0 && tid == 0)
        *net.train_step = last;
}

/* ---------------------------------------------------------------------------
 * launch
 * ------------------------------------------------------------------------- */

static cudaLaunchConfig_t res_config(cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(RES_CTAS);
    cfg.blockDim = dim3(RES_THREADS);
    cfg.dynamicSmemBytes = RES_SMEM;
    cfg.stream = snn_stream();
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = RES_CTAS;
    attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

bool fused_resident_runs(char *why, int len)
{
    char unused[160];
    if (!why) {
        why = unused;
        len = sizeof unused;
    }
    static int clusters = -1; /* of RES_CTAS blocks the GPU holds at once; -1: not asked yet */
    static const bool exact = res_pixels_exact(); /* a property of the build: checked once */
    if (!exact) {
        snprintf(why, len, "the dataset's pixel normalisation is not one multiply-add to 16 bits");
        return false;
    }
    if (!RES_FITS) {
        if (SNN_LAYERS < 2)
            snprintf(why, len, "a model without hidden layers has no units to share out");
        else if (RES_B > RES_THREADS) /* a thread fetches each sample of the next batches */
            snprintf(why, len, "the batch, %d, exceeds the %d threads of a block (CONFIG_FUSED_CLUSTER_THREADS)",
                     RES_B, RES_THREADS);
        else
            snprintf(why, len, "the model's share per block, %d KB of shared memory, exceeds sm90's %d KB",
                     (RES_SMEM + 1023) / 1024, SNN_ARCH_MAX_SMEM_PER_BLOCK / 1024);
        return false;
    }
    if (clusters < 0) {
        CUDA_CHECK(cudaFuncSetAttribute(res_train_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, RES_SMEM));
        CUDA_CHECK(cudaFuncSetAttribute(res_train_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = res_config(&attr);
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, res_train_kernel, &cfg));
    }
    if (clusters < 1)
        snprintf(why, len, "this GPU holds no cluster of %d blocks with %d KB of shared memory each", RES_CTAS,
                 (RES_SMEM + 1023) / 1024);
    return clusters >= 1;
}

void fused_resident_train(const snn_fused_net &net, int first, int last)
{
    if ((uintptr_t)net.train_images % 16)
        snn_die("resident fused step: the training images are not 16-byte aligned (internal error)");
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = res_config(&attr);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, res_train_kernel, net, first, last));
    CUDA_CHECK_LAUNCH();
}

void fused_resident_describe(char *buf, int len)
{
    snprintf(buf, len,
             "one cluster of %d blocks of %d threads, the model resident in %d KB of shared memory each "
             "(%d units of each hidden layer a block), %d cluster barrier%s per step",
             RES_CTAS, RES_THREADS, (RES_SMEM + 1023) / 1024, RES_U, RES_BARRIERS, RES_BARRIERS == 1 ? "" : "s");
}
