/* The bias gradient, fused with its update (kernels/optim.h) or stored, for COLS columns from n0 in one
 * block: thread (tx, ty) sums rows ty, ty + SLICES, ... of column n0 + tx, then one thread per column adds
 * the SLICES sums in order: a fixed order for a given M and SLICES (whatever COLS), deterministic without
 * atomics. The bias kernel (gemm/bias.cu) runs it once per block; the fused step (kernels/cuda/fused/) for
 * each of its bias items; the output step's columns kernel (kernels/cuda/output.cu) for the biases of the
 * layer below, in blocks of its own; a wgmma weight-gradient GEMM in its producer's idle warps, a warp at a
 * time (gemm_bias_columns_warp). */
#ifndef SNN_GEMM_BIAS_CUH
#define SNN_GEMM_BIAS_CUH

#include <stddef.h>

#include <cuda_runtime.h>

#include "kernels/optim.h"

/* Slice ty of column n's sum, rows ty, ty + SLICES, ... in order (dy's rows ld apart). */
template <int SLICES>
static __device__ __forceinline__ float gemm_bias_slice(const float *__restrict__ dy, int ld, int M, int n,
                                                        int ty)
{
    /* RUN rows' loads in flight before their additions, which keep their order: one L2 round trip a run
     * instead of one a row */
    constexpr int RUN = 16;
    float s = 0.0f;
    int m = ty;
    for (; m + (RUN - 1) * SLICES < M; m += RUN * SLICES) {
        float v[RUN];
#pragma unroll
        for (int i = 0; i < RUN; ++i)
            v[i] = dy[(size_t)(m + i * SLICES) * ld + n];
#pragma unroll
        for (int i = 0; i < RUN; ++i)
            s += v[i];
    }
    for (; m < M; m += SLICES)
        s += dy[(size_t)m * ld + n];
    return s;
}

/* Column n0 + tx's gradient, whole in thread (tx, 0); emit(n, g) there for each column n < N. Every thread
 * of the block calls it; those with ty >= SLICES only pass its barrier. */
template <int COLS, int SLICES, class Emit>
static __device__ __forceinline__ void gemm_bias_columns(const float *__restrict__ dy, int ld, int M, int N, int n0,
                                                         int tx, int ty, Emit emit)
{
    __shared__ float part[SLICES][COLS];
    const int n = n0 + tx;
    if (ty < SLICES)
        part[ty][tx] = n < N ? gemm_bias_slice<SLICES>(dy, ld, M, n, ty) : 0.0f;
    __syncthreads();
    if (ty == 0 && n < N) {
        float g = part[0][tx];
#pragma unroll
        for (int i = 1; i < SLICES; ++i)
            g += part[i][tx];
        emit(n, g);
    }
}

/* The same sums by one warp for 32 / SLICES columns from n0, without shared memory or a barrier: lane
 * tx + COLS ty sums slice ty of column n0 + tx, and the lanes of slice 0 add the others' in order, through
 * shuffles (the wgmma GEMM's idle producer warps, gemm/wgmma.cuh). */
template <int SLICES, class Emit>
static __device__ __forceinline__ void gemm_bias_columns_warp(const float *__restrict__ dy, int ld, int M,
                                                              int N, int n0, Emit emit)
{
    static_assert(32 % SLICES == 0, "a warp's lanes in whole columns");
    constexpr int COLS = 32 / SLICES;
    const int lane = threadIdx.x % 32, tx = lane % COLS, ty = lane / COLS, n = n0 + tx;
    const float s = n < N ? gemm_bias_slice<SLICES>(dy, ld, M, n, ty) : 0.0f;
    float g = s;
#pragma unroll
    for (int i = 1; i < SLICES; ++i) {
        const float t = __shfl_sync(0xffffffffu, s, tx + COLS * i);
        g += t;
    }
    if (ty == 0 && n < N)
        emit(n, g);
}

template <int COLS, int SLICES>
static __device__ __forceinline__ void gemm_bias_update_columns(float *b, snn_state sb, const float *__restrict__ dy,
                                                                int M, int N, const snn_rate *rate, int n0, int tx,
                                                                int ty)
{
    gemm_bias_columns<COLS, SLICES>(dy, N, M, N, n0, tx, ty,
                                    [&](int n, float g) { snn_update_at(b, sb, n, g, *rate); });
}

#endif
