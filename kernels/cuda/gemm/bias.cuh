/* The bias gradient, fused with its update (kernels/optim.h) or stored, for COLS columns from n0 in one
 * block: thread (tx, ty) sums rows ty, ty + SLICES, ... of column n0 + tx, then one thread per column adds
 * the SLICES sums in order: a fixed order for a given M and SLICES (whatever COLS), deterministic without
 * atomics. The bias kernel (gemm/bias.cu) runs it once per block; the fused step (kernels/cuda/fused/) for
 * each of its bias items; the output step's columns kernel (kernels/cuda/output.cu) for the biases of the
 * layer below, in blocks of its own. */
#ifndef SNN_GEMM_BIAS_CUH
#define SNN_GEMM_BIAS_CUH

#include <stddef.h>

#include <cuda_runtime.h>

#include "kernels/optim.h"

/* Column n0 + tx's gradient (dy's rows ld apart), whole in thread (tx, 0); emit(n, g) there for each column
 * n < N. Every thread of the block calls it; those with ty >= SLICES only pass its barrier. */
template <int COLS, int SLICES, class Emit>
static __device__ __forceinline__ void gemm_bias_columns(const float *__restrict__ dy, int ld, int M, int N, int n0,
                                                         int tx, int ty, Emit emit)
{
    __shared__ float part[SLICES][COLS];
    const int n = n0 + tx;
    float s = 0.0f;
    if (n < N && ty < SLICES) {
        /* RUN rows' loads in flight before their additions, which keep their order: one L2 round trip a run
         * instead of one a row */
        constexpr int RUN = 16;
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
    }
    if (ty < SLICES)
        part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && n < N) {
        float g = part[0][tx];
#pragma unroll
        for (int i = 1; i < SLICES; ++i)
            g += part[i][tx];
        emit(n, g);
    }
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
