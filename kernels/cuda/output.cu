/* The output layer's training step in two kernels (kernels/ops_proto.h, output_step;
 * CONFIG_CUDA_OUTPUT_STEP), where the layered ops take up to seven: its forward GEMM and the split's
 * reduction, softmax, the input-gradient GEMM, the weight-gradient GEMM, the bias sums, the update pass
 * (STEP_UPDATE_PASS). The layer has SNN_CLASSES outputs: its GEMMs are too thin for a tile and each of
 * those launches costs more than its work.
 *
 *   rows      a block a row: the row's logits (each thread a strided share of the k range, then a warp's
 *             butterflies, then the warps' sums in order), its softmax, loss and gradients (a class a lane,
 *             summed by butterflies), then its input gradient (each thread its share of the row's K elements,
 *             the classes summed in order as the host's GEMM sums); each block's loss kept for the columns.
 *   columns   OUT_COLS input columns a block: the weight gradients of those columns for every class (the
 *             batch in OUT_GROUPS strided shares, a warp's four by butterflies, then the warps' in order),
 *             and their update; one more block the biases' gradients and update, and the step's loss from
 *             the rows' blocks' (a tree); where asked, more blocks the input gradient's column sums, the
 *             biases' gradients of the layer below, in the bias kernel's order (gemm/bias.cuh), so that
 *             its weight gradient needs no bias kernel after it.
 *
 * The GEMM operands are the twins (CONFIG_GEMM_TWINS), read as the GEMMs read them; every sum has a fixed
 * order, so both kernels are deterministic. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/launch.cuh"
#include "kernels/cuda/gemm/bias.cuh"
#include "kernels/cuda/step_common.cuh"
#include "kernels/cuda/twin.cuh"
#include "kernels/ops.h"
#include "snn_check.h"
#include "snn_config.h"

constexpr int C = SNN_CLASSES;
constexpr int ROW_THREADS = 256; /* rows kernel: a block a row, each thread V of its inputs at a time */
constexpr int ROW_WARPS = ROW_THREADS / 32;
constexpr int ROW_BLOCKS = 1024; /* rows kernel: at most, striding over the rest */
constexpr int OUT_COLS = 8;      /* columns kernel: input columns a block */
constexpr int OUT_GROUPS = 64;   /* columns kernel: shares of the batch, a thread each per column */
constexpr int COL_THREADS = OUT_COLS * OUT_GROUPS;
constexpr int COL_CHUNK = 512;                  /* columns kernel: rows staged at a time */
constexpr int COL_PER = COL_CHUNK / OUT_GROUPS; /* a thread's rows of a chunk */
static_assert(COL_CHUNK * C % COL_THREADS == 0, "whole loops");
constexpr int BIAS_SLICES = CONFIG_CUDA_BIAS_SLICES;
constexpr int BELOW_COLS = COL_THREADS / BIAS_SLICES; /* columns kernel: dx's columns a bias block sums */
static_assert(BELOW_COLS >= 1, "CONFIG_CUDA_BIAS_SLICES must be at most the columns kernel's 512 threads");

/* V consecutive twins from t as floats: one 2V-byte load (V = 4: 8 bytes) or one at a time (V = 1). */
template <int V> static __device__ __forceinline__ void load_twins(const SnnTwin *t, float (&v)[V])
{
    if constexpr (V == 4) {
        const uint2 u = *reinterpret_cast<const uint2 *>(t);
        v[0] = snn_twin_value((snn_twin)(u.x & 0xffffu)), v[1] = snn_twin_value((snn_twin)(u.x >> 16));
        v[2] = snn_twin_value((snn_twin)(u.y & 0xffffu)), v[3] = snn_twin_value((snn_twin)(u.y >> 16));
    } else {
        v[0] = snn_twin_value(reinterpret_cast<const snn_twin *>(t)[0]);
    }
}

/* The rows kernel's blocks' losses and counts of right answers, which the columns kernel adds. */
static __device__ double out_block_loss[ROW_BLOCKS];
static __device__ int out_block_correct[ROW_BLOCKS];

/* The `blocks` losses and counts added in a tree of fixed order by a block of COL_THREADS threads: the step's
 * mean loss and count into loss[*step], correct[*step]. */
static __device__ void add_losses(int blocks, float *loss, int32_t *correct, const int32_t *step, int rows)
{
    double sum = 0.0;
    int right = 0;
    for (int i = threadIdx.x; i < blocks; i += COL_THREADS) {
        sum += out_block_loss[i];
        right += out_block_correct[i];
    }
    snn_block_sums<COL_THREADS>(sum, right);
    if (threadIdx.x == 0) {
        loss[*step] = (float)(sum / rows);
        correct[*step] = right;
    }
}

/* V = 4 where K % 4 == 0 and the rows of x16 and w16 start 8 bytes aligned, those of x and dx 16, else 1. */
template <int V>
__global__ void __launch_bounds__(ROW_THREADS, 4)
    output_rows_kernel(float *__restrict__ logits, float *__restrict__ dlogits,
                       SnnTwin *__restrict__ dlogits16, float *__restrict__ dx, SnnTwin *__restrict__ dx16,
                       const float *__restrict__ x, const SnnTwin *__restrict__ x16,
                       const SnnTwin *__restrict__ w16, const float *__restrict__ b,
                       const uint8_t *__restrict__ y, float scale, int rows, int K)
{
    snn_grid_wait();
    __shared__ float s_part[ROW_WARPS][C]; /* each warp's share of the row's logits */
    __shared__ float s_z[C];               /* the row's logits (label smoothing's loss reads them all) */
    __shared__ float s_d[C];               /* the row's logit gradients, rounded as the GEMM's operand */
    static_assert(C <= 16, "a class a lane of 16");
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float bias = b && lane % 16 < C ? b[lane % 16] : 0.0f; /* loaded once, before the rows */
    double my_loss = 0.0;                                        /* warp 0's */
    int my_correct = 0;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const int label = warp == 0 ? y[r] : 0;
        const SnnTwin *xr = x16 + (size_t)r * K;
        const float *ar = x + (size_t)r * K; /* the FP32 input: where it is > 0 (ReLU's derivative) */
        float acc[C] = {};
        for (int k = threadIdx.x * V; k < K; k += ROW_THREADS * V) {
            float xv[V];
            load_twins<V>(xr + k, xv);
#pragma unroll
            for (int c = 0; c < C; c++) {
                float wv[V];
                load_twins<V>(w16 + (size_t)c * K + k, wv);
#pragma unroll
                for (int j = 0; j < V; j++)
                    acc[c] = fmaf(xv[j], wv[j], acc[c]);
            }
        }
#pragma unroll
        for (int c = 0; c < C; c++) {
            acc[c] = snn_lanes_sum<32>(acc[c]);
            if (lane == c)
                s_part[warp][c] = acc[c];
        }
        __syncthreads();
        if (warp == 0) { /* the row's softmax: lane q (and q + 16) class q, SnnRowSoftmax over 16 lanes */
            const int q = lane % 16;
            float z[1] = {-INFINITY};
            if (q < C) {
                z[0] = s_part[0][q];
                for (int i = 1; i < ROW_WARPS; i++)
                    z[0] += s_part[i][q];
                z[0] += bias;
                if (lane == q)
                    s_z[q] = z[0];
            }
            __syncwarp();
            const SnnRowSoftmax<16, 1> sm(z);
            if (lane < C) {
                const float d = sm.grad(0, label, rows);
                logits[(size_t)r * C + lane] = z[0];
                dlogits[(size_t)r * C + lane] = d;
                snn_twin_store(dlogits16, (size_t)r * C + lane, d);
                s_d[lane] = snn_twin_rounded(d);
            }
            if (lane == 0) {
                my_loss += (double)sm.loss(s_z, label, true);
                my_correct += sm.arg == label;
            }
        }
        __syncthreads();
        if (!dx)
            continue;
        float d[C];
#pragma unroll
        for (int c = 0; c < C; c++)
            d[c] = s_d[c];
        for (int k = threadIdx.x * V; k < K; k += ROW_THREADS * V) {
            alignas(16) float s[V] = {};
#pragma unroll
            for (int c = 0; c < C; c++) { /* the classes in order, as the host's GEMM sums its k */
                float wv[V];
                load_twins<V>(w16 + (size_t)c * K + k, wv);
#pragma unroll
                for (int j = 0; j < V; j++)
                    s[j] = fmaf(d[c], wv[j], s[j]);
            }
            alignas(16) float a[V];
            snn_floats_load<V>(ar + k, a);
#pragma unroll
            for (int j = 0; j < V; j++)
                s[j] = a[j] > 0.0f ? s[j] * scale : 0.0f;
            const size_t i = (size_t)r * K + k;
            snn_floats_store<V>(dx + i, s);
            if constexpr (V == 4)
                snn_twin_storev<4>(dx16, i, s);
            else
                snn_twin_store(dx16, i, s[0]);
        }
    }
    if (threadIdx.x == 0) {
        out_block_loss[blockIdx.x] = my_loss;
        out_block_correct[blockIdx.x] = my_correct;
    }
}

/* OUT_COLS columns a block: thread (group, col) sums rows group, group + OUT_GROUPS, ... of its column for
 * every class, a chunk of rows at a time (its twins loaded first, all in flight); then a warp's four groups
 * by butterflies, the warps' sums in order, and the update, whose operands its threads loaded first. Block
 * col_blocks sums and updates the biases; the blocks after it (where dx_sums is given) sum BELOW_COLS
 * columns of dx each into dx_sums. */
__global__ void __launch_bounds__(COL_THREADS, 1)
    output_columns_kernel(float *__restrict__ w, SnnTwin *__restrict__ w16, snn_state sw,
                          float *__restrict__ b, snn_state sb, const float *__restrict__ dlogits,
                          const SnnTwin *__restrict__ x16, int rows, int K, const snn_rate *__restrict__ rate,
                          int row_blocks, float *__restrict__ loss, int32_t *__restrict__ correct,
                          const int32_t *__restrict__ step, int col_blocks, float *__restrict__ dx_sums,
                          const float *__restrict__ dx)
{
    static_assert(OUT_COLS == 8 && COL_THREADS >= C * OUT_COLS, "a warp holds 4 groups of 8 columns");
    static_assert(C % 2 == 0, "a row's classes in pairs");
    snn_grid_wait();
    __shared__ __align__(8) float d[COL_CHUNK * C]; /* dlogits' rows rounded, as the GEMM reads them */
    __shared__ float part[COL_THREADS / 32][C][OUT_COLS + 1]; /* each warp's sums */
    if (blockIdx.x > col_blocks) {
        const int n0 = (blockIdx.x - col_blocks - 1) * BELOW_COLS;
        gemm_bias_columns<BELOW_COLS, BIAS_SLICES>(dx, K, rows, K, n0, threadIdx.x % BELOW_COLS,
                                                   threadIdx.x / BELOW_COLS,
                                                   [&](int n, float g) { dx_sums[n] = g; });
        return;
    }
    const snn_rate r = *rate;
    if (blockIdx.x == col_blocks) { /* the biases, from the FP32 gradients, as the bias kernel; the loss */
        if (b)
            for (int c = threadIdx.x / 32; c < C; c += COL_THREADS / 32) {
                const float g = snn_column_sum(dlogits, C, rows, c);
                if (threadIdx.x % 32 == 0)
                    snn_update_at(b, sb, (size_t)c, g, r);
            }
        add_losses(row_blocks, loss, correct, step, rows);
        return;
    }
    const int col = threadIdx.x % OUT_COLS, group = threadIdx.x / OUT_COLS, k = blockIdx.x * OUT_COLS + col;
    /* the threads of groups 0 .. C - 1 update weight (group, k) at the end: its operands loaded while the
     * sums are made */
    const bool updates = group < C && k < K;
    const size_t ui = (size_t)group * K + k;
    float p = 0.0f, st[2] = {0.0f, 0.0f};
    if (updates) {
        p = w[ui];
#pragma unroll
        for (int m = 0; m < SNN_OPTIM_MOMENTS; m++)
            st[m] = sw.m[m][ui];
    }
    const snn_twin *xt = reinterpret_cast<const snn_twin *>(x16);
    float acc[C] = {};
    for (int r0 = 0; r0 < rows; r0 += COL_CHUNK) {
        const int n = rows - r0 < COL_CHUNK ? rows - r0 : COL_CHUNK;
        float xv[COL_PER];
#pragma unroll
        for (int i = 0; i < COL_PER; i++) {
            const int row = group + i * OUT_GROUPS;
            xv[i] = k < K && row < n ? snn_twin_value(xt[(size_t)(r0 + row) * K + k]) : 0.0f;
        }
        __syncthreads(); /* the chunk before read by every thread */
#pragma unroll
        for (int i = 0; i < COL_CHUNK * C / COL_THREADS; i++) {
            const int at = threadIdx.x + i * COL_THREADS;
            if (at < n * C)
                d[at] = snn_twin_rounded(dlogits[(size_t)r0 * C + at]);
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < COL_PER; i++) {
            const int row = group + i * OUT_GROUPS;
            if (row < n)
#pragma unroll
                for (int c = 0; c < C; c += 2) { /* a row's classes two at a time: 8-byte shared loads */
                    const float2 dd = *reinterpret_cast<const float2 *>(&d[row * C + c]);
                    acc[c] = fmaf(dd.x, xv[i], acc[c]);
                    acc[c + 1] = fmaf(dd.y, xv[i], acc[c + 1]);
                }
        }
    }
#pragma unroll
    for (int c = 0; c < C; c++) { /* the warp's four groups of each column: lanes 8 and 16 apart */
        acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], 8);
        acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], 16);
        if (threadIdx.x % 32 < OUT_COLS)
            part[threadIdx.x / 32][c][col] = acc[c];
    }
    __syncthreads();
    if (!updates)
        return;
    float g = part[0][group][col];
    for (int i = 1; i < COL_THREADS / 32; i++)
        g += part[i][group][col];
    p = snn_update(p, g, st, r);
    w[ui] = p;
#pragma unroll
    for (int m = 0; m < SNN_OPTIM_MOMENTS; m++)
        sw.m[m][ui] = st[m];
    snn_twin_store(w16, ui, p);
}

extern "C" void cuda_output_step(float *logits, float *dlogits, snn_twin *dlogits16, float *loss,
                                 int32_t *correct, float *dx, snn_twin *dx16, const float *x,
                                 const snn_twin *x16, float *w, snn_twin *w16, snn_state sw, float *b,
                                 snn_state sb, const uint8_t *y, const int32_t *step, float scale, int M,
                                 int K, const snn_rate *rate, float *dx_sums)
{
    if (dx_sums && !dx)
        snn_die("cuda_output_step: dx's column sums asked for without dx");
    if (M <= 0 || K <= 0) {
        if (dx_sums && K > 0) /* no rows: sums of none, as the bias kernel writes them */
            CUDA_CHECK(cudaMemsetAsync(dx_sums, 0, sizeof(float) * (size_t)K, snn_stream()));
        return;
    }
    if (SNN_DP_WORLD > 1)
        snn_die(
            "cuda_output_step: the output step updates from its own gradients, which data parallelism must "
            "all-reduce first");
    if (!x16 || !w16)
        snn_die(
            "cuda_output_step: the layer's input and weights need their 16-bit twins (CONFIG_GEMM_TWINS)");
    const bool vec =
        K % 4 == 0 && snn_aligned(x16, 8) && snn_aligned(w16, 8) && snn_aligned(x, 16) && snn_aligned(dx, 16);
    const unsigned grid = (unsigned)(M < ROW_BLOCKS ? M : ROW_BLOCKS);
    const int col_blocks = (K + OUT_COLS - 1) / OUT_COLS,
              below = dx_sums ? (K + BELOW_COLS - 1) / BELOW_COLS : 0;
    SNN_LAUNCH(vec ? output_rows_kernel<4> : output_rows_kernel<1>, grid, ROW_THREADS, 0, logits, dlogits,
               snn_twin_ptr(dlogits16), dx, snn_twin_ptr(dx16), x, snn_twin_ptr(x16),
               snn_twin_ptr((const snn_twin *)w16), b, y, scale, M, K);
    SNN_LAUNCH(output_columns_kernel, (unsigned)(col_blocks + 1 + below), COL_THREADS, 0, w,
               snn_twin_ptr(w16), sw, b, sb, dlogits, snn_twin_ptr(x16), M, K, rate, (int)grid, loss, correct,
               step, col_blocks, dx_sums, dx);
}
