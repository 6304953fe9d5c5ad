/* The grid-resident fused step (CONFIG_FUSED_GRID_RESIDENT): where a model is too wide for one cluster
 * (fused/resident.cu) but each block's share of it fits in shared memory, a cooperative grid of
 * SNN_GR_BLOCKS blocks runs every step of a launch with the weights and their optimizer state on chip.
 *
 * Block c owns hidden units [8c, 8c + 8) of every hidden layer: their rows of each hidden layer's weights
 * (FP32, with moments) and their columns of the last layer's. What crosses blocks goes through L2 as 16-bit
 * operands (SNN_FUSED_GR_WS_BYTES): each hidden layer's output, by row and by unit; its output gradient by
 * row; the normalised batch by pixel; each hidden-to-hidden layer's twin, transposed, so that a block reads
 * the columns of its units as rows. A step, for L linear layers:
 *
 *   F0          layer 0 for the block's units, the images read in place and normalised as read; the
 *               block's pixels of the batch, transposed, for every block's update of layer 0
 *   F1 .. F(L-2) every block reads the whole previous output (the all-gather) and computes its units'
 *   F(L-1)      the logits' partial sums over the block's units -> barrier -> a block per row sums them,
 *               takes the softmax and writes the row's dlogits -> barrier
 *   B(L-1)      every block reads the dlogits: its units' gradient (local columns of the last layer),
 *               the last layer's update (its columns; the bias, every block the same)
 *   B(l)        each block's units' output gradient of layer l - 1 from the whole gradient of layer l and
 *               the twin's rows of its units (the all-gather again), then the update of its rows of layer
 *               l - 1 from it; layer 0's update, local, ends the step
 *
 * so 2L - 2 grid barriers a step (one after each hidden forward layer and after the softmax, one before
 * each hidden-to-hidden input gradient). A layer's update writes the twin of the next step's parity: its
 * input gradient, in the same or the next phase, reads this step's. The GEMMs are mma.sync m16n8k16 with
 * FP32 accumulators on operands rounded as the host reference rounds them; fixed splits and orders of
 * summation: deterministic. */
#include <stdint.h>
#include <stdio.h>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "kernels/cuda/fused/grid_resident.h"
#include "kernels/cuda/fused/mma16.cuh"
#include "kernels/cuda/fused/stamp.cuh"
#include "kernels/fused.h"

namespace cg = cooperative_groups;

/* 16 warps: the step waits on L2's latency, and 512 threads put twice 256's loads in flight (docs/PERF.md
 * v22) */
constexpr int GR_THREADS = 512, GR_WARPS = GR_THREADS / 32;
constexpr int GR_U = SNN_GR_UNITS, GR_P = SNN_GR_BLOCKS, GR_HP = SNN_GR_HP;
constexpr int GR_L = SNN_LAYERS, GR_NH = res_max(SNN_GR_NH, 1), GR_MIDS = res_max(SNN_GR_MIDS, 1);
constexpr int GR_H = SNN_LAYERS > 1 ? SNN_HIDDEN : 16;
constexpr int GR_B = SNN_BATCH, GR_BP = SNN_GR_BP, GR_IN = SNN_INPUT_DIM, GR_NC = 16;
constexpr int GR_M = res_max(SNN_OPTIM_MOMENTS, 1);
static_assert(GR_IN % 16 == 0 && GR_HP % 16 == 0, "grid-resident step: k extents in whole k16 steps");
static_assert(SNN_CLASSES <= GR_NC, "grid-resident step: the classes in two n8 tiles");
static_assert(GR_P <= SNN_FUSED_MAX_BLOCKS || SNN_FUSED_GR_WS_BYTES == 0,
              "grid-resident step: blocks stamped");
/* Operands read from L2: more k steps' loads in flight before their products than from shared memory (16 did
 * no better than 8). */
constexpr int GR_RUNS = 8;
/* FP32 rows read four k a thread by a quarter warp's two rows: 16 mod 32 floats apart, conflict-free. */
__host__ __device__ constexpr int gr_fld(int k) { return res_up(k - 16, 32) + 16; }
constexpr int GR_W0LD = gr_fld(GR_IN), GR_WLD = gr_fld(SNN_GR_MIDS > 0 ? GR_HP : 16);
constexpr int GR_DLD = res_ld(GR_BP); /* the block's output gradient as an operand, [unit][row] */
/* The block's pixels of the normalised batch, transposed in F0: a multiple of 4 pixels each. */
constexpr int GR_XS = res_up((GR_IN + GR_P - 1) / GR_P, 4);

struct GrMid { /* a hidden-to-hidden layer's rows of the block's units */
    alignas(16) float w[GR_U][GR_WLD];
    float wm[GR_M][GR_U][GR_WLD];
    float b[GR_U], bm[GR_M][GR_U];
};

struct alignas(128) GrShared {
    alignas(16) float w0[GR_U][GR_W0LD];
    float w0m[GR_M][GR_U][GR_W0LD];
    float b0[GR_U], b0m[GR_M][GR_U];
    GrMid mid[GR_MIDS];
    float wl[GR_NC][GR_U], wlm[GR_M][GR_NC][GR_U]; /* the last layer's columns of the block's units */
    float bl[GR_NC], blm[GR_M][GR_NC];             /* its bias: every block keeps the same copy */
    float act[GR_NH][GR_BP][GR_U];                 /* hidden outputs of the block's units (the ReLU's mask) */
    float dg[GR_BP][GR_U];                         /* a hidden output's gradient, the block's units */
    alignas(16) res_half dgt[GR_U][GR_DLD];        /* the same as an operand */
    float dl[GR_BP][GR_NC];                        /* the dlogits */
    float z[GR_WARPS][GR_NC];                      /* a row's logits, a warp's */
    float scratch[GR_WARPS][16 * 8];               /* k slices' partial tiles */
    int32_t sample[GR_BP];                         /* the step's samples (padding rows: the first's) */
    const uint8_t *image[GR_BP];                   /* and their images */
    snn_rate rate;
};
constexpr int GR_SMEM = sizeof(GrShared);
constexpr bool GR_FITS = SNN_FUSED_GR_WS_BYTES > 0 && GR_SMEM <= SNN_GR_SMEM_MAX && !(SNN_AUGMENT_SHIFT > 0);

/* The workspace's tensors (SNN_FUSED_GR_WS_BYTES), each 256-byte aligned, in the order fused.h counts them:
 * their bytes. */
// clang-format off
constexpr size_t GR_WS_PARTS[] = {
    (size_t)2 * 2 * GR_NH * GR_BP * GR_HP,       /* hidden outputs [parity][layer][row][unit] */
    (size_t)2 * 2 * GR_NH * GR_BP * GR_HP,       /* the same, [parity][layer][unit][row] */
    (size_t)2 * GR_NH * GR_BP * GR_HP,           /* hidden output gradients [layer][row][unit] */
    (size_t)2 * 2 * GR_IN * GR_BP,               /* the normalised batch [parity][pixel][row] */
    (size_t)2 * 2 * SNN_GR_MIDS * GR_HP * GR_HP, /* twins [parity][layer][input unit][output unit] */
    (size_t)4 * (GR_P + 1) * GR_BP * GR_NC,      /* logits' partial sums [block][row][class], dlogits */
    (size_t)4 * GR_BP,                           /* each row's loss */
    (size_t)4 * GR_BP};                          /* and hit */
// clang-format on
__host__ __device__ constexpr size_t gr_ws_at(int part)
{
    return part == 0 ? 0 : gr_ws_at(part - 1) + (GR_WS_PARTS[part - 1] + 255) / 256 * 256;
}
static_assert(!GR_FITS || gr_ws_at(8) <= SNN_FUSED_GR_WS_BYTES,
              "grid-resident step: fused.h counts the workspace");

struct GrWs {
    res_half *hact, *hactt, *dy, *xt, *wt;
    float *partial, *dlog, *rowloss;
    int32_t *rowright;
    __device__ explicit GrWs(unsigned char *at)
        : hact((res_half *)(at + gr_ws_at(0))), hactt((res_half *)(at + gr_ws_at(1))),
          dy((res_half *)(at + gr_ws_at(2))), xt((res_half *)(at + gr_ws_at(3))),
          wt((res_half *)(at + gr_ws_at(4))), partial((float *)(at + gr_ws_at(5))),
          dlog(partial + (size_t)GR_P * GR_BP * GR_NC), rowloss((float *)(at + gr_ws_at(6))),
          rowright((int32_t *)(at + gr_ws_at(7)))
    {
    }
    /* hidden layer l's output of step parity p, [row][unit] and [unit][row] */
    __device__ res_half *out(int p, int l) const { return hact + ((size_t)p * GR_NH + l) * GR_BP * GR_HP; }
    __device__ res_half *out_t(int p, int l) const { return hactt + ((size_t)p * GR_NH + l) * GR_BP * GR_HP; }
    __device__ res_half *grad(int l) const { return dy + (size_t)l * GR_BP * GR_HP; }    /* [row][unit] */
    __device__ res_half *batch_t(int p) const { return xt + (size_t)p * GR_IN * GR_BP; } /* [pixel][row] */
    /* hidden-to-hidden layer l's twin for steps of parity p, transposed: [input unit][output unit] */
    __device__ res_half *twin_t(int p, int l) const
    {
        return wt + ((size_t)p * GR_MIDS + l - 1) * GR_HP * GR_HP;
    }
};

/* The 16-bit operand's value. */
static __device__ __forceinline__ float gr_value(res_half h)
{
#ifdef CONFIG_PRECISION_BF16
    return __uint_as_float((uint32_t)h << 16);
#else
    return __half2float(__ushort_as_half(h));
#endif
}

/* ---------------------------------------------------------------------------
 * operand views (res_gemm)
 * ------------------------------------------------------------------------- */

/* The batch's images read in place, element (i, k) pixel k of row i's image, normalised as ResPixels. */
struct GrPixels : ResPairs<GrPixels> {
    const uint8_t *const *image;
    __device__ explicit GrPixels(const uint8_t *const *image) : image(image) {}
    template <int GAP> __device__ __forceinline__ uint2 frag(int i, int k) const
    {
        static_assert(GAP == 2, "grid-resident step: image rows are read four k a thread");
        const uint32_t four = *reinterpret_cast<const uint32_t *>(image[i] + k);
        float x[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            x[q] = fmaf(res_byte(four, q), RES_PIXEL_SCALE, RES_PIXEL_OFFSET);
        return make_uint2(res_round2(x[0], x[1]), res_round2(x[2], x[3]));
    }
};

/* FP32 rows, unit n's k-th at p[n * LD + k], as a B operand four k a thread, rounded as a twin holds them. */
template <int LD> struct GrFloatRows {
    static_assert(LD % 4 == 0, "grid-resident step: FP32 rows of whole 16-byte quads");
    const float *p;
    template <bool QUAD> __device__ __forceinline__ uint2 b16(int n0, int k) const
    {
        static_assert(QUAD, "grid-resident step: FP32 rows are read four k a thread");
        const int lane = threadIdx.x % 32;
        const float4 v = *reinterpret_cast<const float4 *>(p + (n0 + lane / 4) * LD + k + 4 * (lane % 4));
        return make_uint2(res_round2(v.x, v.y), res_round2(v.z, v.w));
    }
};

/* ---------------------------------------------------------------------------
 * the block's share of the model in and out
 * ------------------------------------------------------------------------- */

static __device__ void gr_state(GrShared &S, const snn_fused_net &net, int c, bool in)
{
    const int u0 = c * GR_U;
    auto row = [u0](int n, int k, int width) -> long {
        return u0 + n < GR_H ? (long)(u0 + n) * width + k : -1;
    };
    auto bias = [u0](int, int n) -> long { return u0 + n < GR_H ? u0 + n : -1; };
    const snn_fused_layer &L0 = net.layer[0];
    res_copy<GR_THREADS>(in, GR_U, GR_IN, &S.w0[0][0], GR_W0LD, &S.w0m[0][0][0], GR_U * GR_W0LD, nullptr, 0,
                         L0.w, L0.sw, [&](int n, int k) { return row(n, k, GR_IN); });
    res_copy<GR_THREADS>(in, 1, GR_U, S.b0, GR_U, &S.b0m[0][0], GR_U, nullptr, 0, L0.b, L0.sb, bias);
    for (int l = 1; l + 1 < GR_L; l++) {
        GrMid &M = S.mid[l - 1];
        const snn_fused_layer &L = net.layer[l];
        res_copy<GR_THREADS>(in, GR_U, GR_H, &M.w[0][0], GR_WLD, &M.wm[0][0][0], GR_U * GR_WLD, nullptr, 0,
                             L.w, L.sw, [&](int n, int k) { return row(n, k, GR_H); });
        res_copy<GR_THREADS>(in, 1, GR_U, M.b, GR_U, &M.bm[0][0], GR_U, nullptr, 0, L.b, L.sb, bias);
    }
    const snn_fused_layer &LL = net.layer[GR_L - 1];
    res_copy<GR_THREADS>(in, SNN_CLASSES, GR_U, &S.wl[0][0], GR_U, &S.wlm[0][0][0], GR_NC * GR_U, nullptr, 0,
                         LL.w, LL.sw,
                         [&](int j, int n) -> long { return u0 + n < GR_H ? (long)j * GR_H + u0 + n : -1; });
    if (in || c == 0)
        res_copy<GR_THREADS>(in, 1, SNN_CLASSES, S.bl, GR_NC, &S.blm[0][0], GR_NC, nullptr, 0, LL.b, LL.sb,
                             [](int, int j) -> long { return j; });
}

/* The twins of the block's rows of every hidden-to-hidden layer, both parities (padding 0). */
static __device__ void gr_write_twins(const GrShared &S, const GrWs &W, int u0)
{
    for (int l = 1; l + 1 < GR_L; l++)
        for (int e = threadIdx.x; e < GR_HP * GR_U; e += GR_THREADS) {
            const int k = e / GR_U, n = e % GR_U;
            const res_half h = res_round(k < GR_H ? S.mid[l - 1].w[n][k] : 0.0f);
            W.twin_t(0, l)[(size_t)k * GR_HP + u0 + n] = h;
            W.twin_t(1, l)[(size_t)k * GR_HP + u0 + n] = h;
        }
}

/* ---------------------------------------------------------------------------
 * the step's element-wise ends
 * ------------------------------------------------------------------------- */

typedef ResDraws<GR_H> GrDraws;

/* Hidden layer l's output at row m, the block's unit n, from its pre-activation v (bias added): ReLU and
 * dropout, 0 in padding; kept for the backward pass, and as every block's operand by row and by unit. */
static __device__ __forceinline__ void gr_hidden_out(GrShared &S, const GrWs &W, const snn_fused_net &net,
                                                     const GrDraws &d, int p, int l, int u0, int m, int n,
                                                     float v)
{
    const int unit = u0 + n;
    const bool real = m < GR_B && unit < GR_H;
    v = real ? d.drop(l, m, unit, v < 0.0f ? 0.0f : v) : 0.0f;
    S.act[l][m][n] = v;
    const res_half h = res_round(v);
    W.out(p, l)[m * GR_HP + unit] = h;
    W.out_t(p, l)[unit * GR_BP + m] = h;
    if (net.trace && real)
        net.act[l + 1][(size_t)m * GR_H + unit] = v;
}

/* The gradient of hidden layer l's output at row m, the block's unit n, from dY . W (v): through the ReLU's
 * mask and the forward pass's dropout, 0 in padding; FP32 for the bias, 16-bit for the update and, where a
 * layer below needs all of it (l > 0), for every block. */
static __device__ __forceinline__ void gr_hidden_grad(GrShared &S, const GrWs &W, const snn_fused_net &net,
                                                      const GrDraws &d, int l, int u0, int m, int n, float v)
{
    const int unit = u0 + n;
    const bool real = m < GR_B && unit < GR_H;
    v = real && S.act[l][m][n] > 0.0f ? d.drop(l, m, unit, v) : 0.0f;
    S.dg[m][n] = v;
    const res_half h = res_round(v);
    S.dgt[n][m] = h;
    if (l > 0)
        W.grad(l)[m * GR_HP + unit] = h;
    if (net.trace && real)
        net.grad[l][(size_t)m * GR_H + unit] = v;
}

/* The logits' partial sums over the block's units, [row][class], from the last hidden layer's outputs. */
static __device__ void gr_logits_partial(const GrShared &S, const GrWs &W, int c)
{
    float *part = W.partial + (size_t)c * GR_BP * GR_NC;
    for (int e = threadIdx.x; e < GR_BP * GR_NC; e += GR_THREADS) {
        const int m = e / GR_NC, j = e % GR_NC;
        float v = 0.0f;
        if (j < SNN_CLASSES)
#pragma unroll
            for (int n = 0; n < GR_U; n++)
                v += gr_value(res_round(S.act[GR_NH - 1][m][n])) * gr_value(res_round(S.wl[j][n]));
        part[e] = v;
    }
}

/* Softmax and cross-entropy of the batch's rows c, c + GR_P, ..., a warp a row (class j on lane j): the
 * logits summed over the blocks' partials in block order, the row's dlogits, loss and hit to the workspace;
 * padding rows' dlogits 0. Tracing, the logits and dlogits too. */
static __device__ void gr_softmax_rows(GrShared &S, const GrWs &W, const snn_fused_net &net, int c)
{
    const int warp = threadIdx.x / 32, j = threadIdx.x % 32;
    for (int r = c + warp * GR_P; r < GR_BP; r += GR_WARPS * GR_P) {
        const bool row = r < GR_B, cls = j < SNN_CLASSES;
        /* lane j adds the partials of blocks j, j + 32, ..., every load issued first; then a butterfly */
        constexpr int PER = (GR_P + 31) / 32;
        float4 part[PER][SNN_CLASSES / 4 + 1];
#pragma unroll
        for (int i = 0; i < PER; i++)
#pragma unroll
            for (int v = 0; v <= SNN_CLASSES / 4; v++)
                part[i][v] = j + 32 * i < GR_P
                                 ? reinterpret_cast<const float4 *>(
                                       W.partial + ((size_t)(j + 32 * i) * GR_BP + r) * GR_NC)[v]
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float sums[SNN_CLASSES];
#pragma unroll
        for (int k = 0; k < SNN_CLASSES; k++) {
            float v = 0.0f;
#pragma unroll
            for (int i = 0; i < PER; i++)
                v += reinterpret_cast<const float *>(&part[i][k / 4])[k % 4];
#pragma unroll
            for (int o = 16; o > 0; o /= 2) /* every lane adds the same pairs, so holds the same sum */
                v += __shfl_xor_sync(0xffffffffu, v, o);
            sums[k] = v;
        }
        float z = -INFINITY;
#pragma unroll
        for (int k = 0; k < SNN_CLASSES; k++)
            if (row && j == k)
                z = S.bl[k] + sums[k];
        if (row && cls)
            S.z[warp][j] = z;
        float zmax = z;
        int arg = cls ? j : SNN_CLASSES;
#pragma unroll
        for (int o = 16; o > 0; o /= 2) {
            const float zo = __shfl_xor_sync(0xffffffffu, zmax, o);
            const int ao = __shfl_xor_sync(0xffffffffu, arg, o);
            if (zo > zmax || (zo == zmax && ao < arg)) {
                zmax = zo;
                arg = ao;
            }
        }
        const float e = row && cls ? expf(z - zmax) : 0.0f;
        float sum = e;
#pragma unroll
        for (int o = 16; o > 0; o /= 2)
            sum += __shfl_xor_sync(0xffffffffu, sum, o);
        __syncwarp(); /* the row's logits in S.z */
        const int label = row ? net.train_labels[S.sample[r]] : 0;
        if (row && j == 0) {
            W.rowloss[r] = snn_xent_loss(logf(sum), zmax, S.z[warp], label, 1);
            W.rowright[r] = arg == label;
        }
        if (j < GR_NC) {
            const float g = row && cls ? (e / sum - snn_xent_target(j, label)) * (1.0f / (float)GR_B) : 0.0f;
            W.dlog[r * GR_NC + j] = g;
            if (net.trace && row && cls) {
                net.act[GR_L][r * SNN_CLASSES + j] = z;
                net.grad[GR_L - 1][r * SNN_CLASSES + j] = g;
            }
        }
        __syncwarp(); /* S.z read before the warp's next row */
    }
}

/* A hidden-to-hidden layer l's update of the block's rows from the gradient in S.dgt and the layer's inputs
 * of step parity p; the twin of parity p ^ 1 rewritten. */
static __device__ void gr_mid_update(GrShared &S, const GrWs &W, int p, int l, int u0, const snn_rate &rate)
{
    GrMid &M = S.mid[l - 1];
    res_half *twin = W.twin_t(p ^ 1, l);
    res_gemm<GR_THREADS, GR_HP, GR_U, GR_BP>(ResMat<GR_BP, 1>{W.out_t(p, l - 1)},
                                             ResMat<GR_DLD, 1>{&S.dgt[0][0]}, S.scratch,
                                             [&](int k, int n, float g) {
                                                 if (k < GR_H && u0 + n < GR_H)
                                                     res_update(&M.w[n][k], &M.wm[0][n][k], GR_U * GR_WLD,
                                                                &twin[(size_t)k * GR_HP + u0 + n], g, rate);
                                             });
}

/* The bias of hidden layer l's units (the block's), from the gradient in S.dg. */
static __device__ void gr_bias_update(GrShared &S, int l, int owned, const snn_rate &rate)
{
    float *b = l == 0 ? S.b0 : S.mid[l - 1].b, *bm = l == 0 ? &S.b0m[0][0] : &S.mid[l - 1].bm[0][0];
    res_bias_update<GR_THREADS>(b, bm, GR_U, &S.dg[0][0], GR_U, GR_B, owned, rate);
}

/* ---------------------------------------------------------------------------
 * the kernel
 * ------------------------------------------------------------------------- */

__global__ void __launch_bounds__(GR_THREADS, 1) gr_train_kernel(snn_fused_net net, int first, int last)
{
    extern __shared__ __align__(128) unsigned char gr_smem[];
    if constexpr (!GR_FITS)
        return; /* never launched (fused_grid_resident_runs): no code for a model that does not fit */
    GrShared &S = *reinterpret_cast<GrShared *>(gr_smem);
    cg::grid_group grid = cg::this_grid();
    const GrWs W(net.gr_ws);
    const int c = blockIdx.x, u0 = c * GR_U, tid = threadIdx.x;
    const int owned = res_max(0, res_min(GR_U, GR_H - u0)); /* the block's units that are not padding */

    res_clear<GR_THREADS>(gr_smem, GR_SMEM);
    __syncthreads();
    gr_state(S, net, c, true);
    __syncthreads();
    gr_write_twins(S, W, u0);
    grid.sync(); /* every twin whole before the first input gradient reads it */
    const int32_t epoch = *net.clock.epoch;

    for (int s = first; s < last; ++s) {
        const int p = s & 1;
        const GrDraws draws = {net.noise.key, epoch, s};
        fused_stamp(net, s, 2 * GR_L, true);
        if (tid == 0)
            S.rate = snn_clock_rate_at(net.clock, s);
        if (tid < GR_BP) {
            S.sample[tid] = net.order[(long)s * GR_B + (tid < GR_B ? tid : 0)];
            S.image[tid] = net.train_images + (size_t)S.sample[tid] * GR_IN;
        }
        __syncthreads();
        const snn_rate rate = S.rate; /* in registers: the updates' epilogues read it per element */
        if (net.trace && c == 0)
            for (int i = tid; i < GR_B * GR_IN; i += GR_THREADS) {
                net.input[p][i] =
                    snn_gather_pixel(S.image[i / GR_IN][i % GR_IN], SNN_PIXEL_MEAN, SNN_PIXEL_STD);
                if (i % GR_IN == 0)
                    net.labels[p][i / GR_IN] = net.train_labels[S.sample[i / GR_IN]];
            }

        /* F0, and the block's pixels of the batch transposed for layer 0's update */
        res_gemm<GR_THREADS, GR_BP, GR_U, GR_IN, true, GR_RUNS>(
            GrPixels(S.image), GrFloatRows<GR_W0LD>{&S.w0[0][0]}, S.scratch,
            [&](int m, int n, float v) { gr_hidden_out(S, W, net, draws, p, 0, u0, m, n, v + S.b0[n]); });
        for (int e = tid; e < GR_BP * (GR_XS / 4); e += GR_THREADS) {
            const int m = e % GR_BP, k = c * GR_XS + e / GR_BP * 4;
            if (k < GR_IN) {
                const uint32_t four = *reinterpret_cast<const uint32_t *>(S.image[m] + k);
#pragma unroll
                for (int q = 0; q < 4; q++)
                    W.batch_t(p)[(k + q) * GR_BP + m] =
                        res_round(fmaf(res_byte(four, q), RES_PIXEL_SCALE, RES_PIXEL_OFFSET));
            }
        }
        __syncthreads();

        /* F1 .. F(L-2): the previous output, all of it, against the block's rows */
        for (int l = 1; l + 1 < GR_L; l++) {
            fused_stamp(net, s, l - 1, false);
            grid.sync();
            fused_stamp(net, s, l - 1, true);
            res_gemm<GR_THREADS, GR_BP, GR_U, GR_HP, true, GR_RUNS>(
                ResMat<GR_HP, 1>{W.out(p, l - 1)}, GrFloatRows<GR_WLD>{&S.mid[l - 1].w[0][0]}, S.scratch,
                [&](int m, int n, float v) {
                    gr_hidden_out(S, W, net, draws, p, l, u0, m, n, v + S.mid[l - 1].b[n]);
                });
            __syncthreads();
        }

        /* F(L-1): partial sums, then a block per row: softmax, dlogits */
        gr_logits_partial(S, W, c);
        fused_stamp(net, s, GR_L - 2, false);
        grid.sync();
        fused_stamp(net, s, GR_L - 2, true);
        gr_softmax_rows(S, W, net, c);
        fused_stamp(net, s, GR_L - 1, false);
        grid.sync();
        fused_stamp(net, s, GR_L - 1, true);

        /* B(L-1): the last layer, from the dlogits every block reads */
        for (int e = tid; e < GR_BP * GR_NC; e += GR_THREADS)
            S.dl[e / GR_NC][e % GR_NC] = W.dlog[e];
        __syncthreads();
        res_bias_update<GR_THREADS>(S.bl, &S.blm[0][0], GR_NC, &S.dl[0][0], GR_NC, GR_B, SNN_CLASSES, rate);
        if (c == 0 && tid / 32 == GR_WARPS - 1) { /* the step's loss and hits: a warp, lanes by rows */
            double loss = 0.0;
            int right = 0;
            for (int r = tid % 32; r < GR_B; r += 32) {
                loss += (double)W.rowloss[r];
                right += W.rowright[r];
            }
#pragma unroll
            for (int o = 16; o > 0; o /= 2) {
                loss += __shfl_xor_sync(0xffffffffu, loss, o);
                right += __shfl_xor_sync(0xffffffffu, right, o);
            }
            if (tid % 32 == 0) {
                net.train_loss[s] = (float)(loss / GR_B);
                net.train_correct[s] = right;
            }
        }
        for (int e = tid; e < GR_BP * GR_U; e += GR_THREADS) {
            const int m = e / GR_U, n = e % GR_U;
            float v = 0.0f;
#pragma unroll
            for (int j = 0; j < SNN_CLASSES; j++)
                v += gr_value(res_round(S.dl[m][j])) * gr_value(res_round(S.wl[j][n]));
            gr_hidden_grad(S, W, net, draws, GR_NH - 1, u0, m, n, v);
        }
        __syncthreads(); /* the input gradient has read the last layer's columns before they change */
        for (int e = tid / 32; e < SNN_CLASSES * GR_U; e += GR_WARPS) { /* a warp a weight, lanes by rows */
            const int j = e / GR_U, n = e % GR_U;
            float g = 0.0f;
            for (int m = tid % 32; m < GR_B; m += 32)
                g += gr_value(res_round(S.dl[m][j])) * gr_value(res_round(S.act[GR_NH - 1][m][n]));
#pragma unroll
            for (int o = 16; o > 0; o /= 2)
                g += __shfl_xor_sync(0xffffffffu, g, o);
            if (tid % 32 == 0 && u0 + n < GR_H)
                res_update(&S.wl[j][n], &S.wlm[0][j][n], GR_NC * GR_U, nullptr, g, rate);
        }
        gr_bias_update(S, GR_NH - 1, owned, rate);
        if constexpr (GR_NH > 1)
            gr_mid_update(S, W, p, GR_NH - 1, u0, rate);
        fused_stamp(net, s, GR_L, false);

        /* B(L-2) .. B1: the whole output gradient of layer l against the twin's rows of the block's units */
        for (int l = GR_L - 2; l >= 1; l--) {
            const int phase = 2 * GR_L - 1 - l;
            grid.sync();
            fused_stamp(net, s, phase - 1, true);
            res_gemm<GR_THREADS, GR_BP, GR_U, GR_HP, true, GR_RUNS>(
                ResMat<GR_HP, 1>{W.grad(l)}, ResMat<GR_HP, 1>{W.twin_t(p, l) + (size_t)u0 * GR_HP}, S.scratch,
                [&](int m, int n, float v) { gr_hidden_grad(S, W, net, draws, l - 1, u0, m, n, v); });
            __syncthreads();
            gr_bias_update(S, l - 1, owned, rate);
            if (l - 1 > 0)
                gr_mid_update(S, W, p, l - 1, u0, rate);
            fused_stamp(net, s, phase, false);
        }
        fused_stamp(net, s, 2 * GR_L - 2, true); /* no barrier after the last input gradient */

        /* B0: layer 0's update, local */
        res_gemm<GR_THREADS, GR_IN, GR_U, GR_BP>(
            ResMat<GR_BP, 1>{W.batch_t(p)}, ResMat<GR_DLD, 1>{&S.dgt[0][0]}, S.scratch,
            [&](int k, int n, float g) {
                if (u0 + n < GR_H)
                    res_update(&S.w0[n][k], &S.w0m[0][n][k], GR_U * GR_W0LD, nullptr, g, rate);
            });
        __syncthreads();
        fused_stamp(net, s, 2 * GR_L - 1, false);
        fused_stamp(net, s, 2 * GR_L - 1, true);
    }
    gr_state(S, net, c, false);
    if (c == 0 && tid == 0)
        *net.train_step = last;
}

/* ---------------------------------------------------------------------------
 * launch
 * ------------------------------------------------------------------------- */

bool fused_grid_resident_runs(char *why, int len)
{
    char unused[160];
    if (!why) {
        why = unused;
        len = sizeof unused;
    }
    static int resident = -1; /* blocks the GPU holds at once; -1: not asked yet */
    static const bool exact = res_pixels_exact();
    if (!GR_FITS) {
        if (SNN_LAYERS < 2)
            snprintf(why, len, "a model without hidden layers has no units to share out");
        else if (SNN_AUGMENT_SHIFT > 0)
            snprintf(why, len,
                     "it reads the images in place and does not translate them (CONFIG_AUGMENT_SHIFT)");
        else
            snprintf(why, len, "a block's share of the model, %d KB of shared memory, exceeds %d KB",
                     (int)((SNN_GR_STATE_BYTES > GR_SMEM ? SNN_GR_STATE_BYTES : GR_SMEM) + 1023) / 1024,
                     SNN_GR_SMEM_MAX / 1024);
        return false;
    }
    if (!exact) {
        snprintf(why, len, "the dataset's pixel normalisation is not one multiply-add to 16 bits");
        return false;
    }
    if (resident < 0) {
        int dev, sms, coop, per_sm;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
        CUDA_CHECK(
            cudaFuncSetAttribute(gr_train_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, GR_SMEM));
        CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gr_train_kernel, GR_THREADS, GR_SMEM));
        resident = coop ? per_sm * sms : 0;
    }
    if (resident < GR_P)
        snprintf(why, len, "this GPU holds %d of its %d blocks at once (%d KB of shared memory each)",
                 resident, GR_P, (GR_SMEM + 1023) / 1024);
    return resident >= GR_P;
}

void fused_grid_resident_train(const snn_fused_net &net, int first, int last)
{
    if ((uintptr_t)net.gr_ws % 256)
        snn_die("grid-resident fused step: the workspace is not 256-byte aligned (internal error)");
    snn_fused_net n = net;
    void *args[] = {&n, &first, &last};
    CUDA_CHECK(cudaLaunchCooperativeKernel((const void *)gr_train_kernel, dim3(GR_P), dim3(GR_THREADS), args,
                                           GR_SMEM, snn_stream()));
    CUDA_CHECK_LAUNCH();
}

void fused_grid_resident_describe(char *buf, int len)
{
    const int barriers = 2 * GR_L - 2;
    snprintf(
        buf, len,
        "%d blocks of %d threads, the model resident in %d KB of shared memory each (%d units of each hidden "
        "layer a block), %d grid barrier%s per step",
        GR_P, GR_THREADS, (GR_SMEM + 1023) / 1024, GR_U, barriers, barriers == 1 ? "" : "s");
}
