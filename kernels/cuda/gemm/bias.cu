/* The bias gradient fused with its SGD update (gemm/bias.h). A block holds CONFIG_CUDA_BIAS_COLS columns;
 * its CONFIG_CUDA_BIAS_SLICES row slices sum rows ty, ty + slices, ... in order, then one thread adds the
 * slices' sums in order: a fixed order for a given M, deterministic without atomics. */
#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "kernels/cuda/gemm/bias.h"
#include "snn_config.h"

#define BIAS_COLS CONFIG_CUDA_BIAS_COLS
#define BIAS_SLICES CONFIG_CUDA_BIAS_SLICES
static_assert(BIAS_COLS * BIAS_SLICES <= 1024,
              "CONFIG_CUDA_BIAS_COLS x CONFIG_CUDA_BIAS_SLICES must be at most 1024 threads");

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

__global__ void __launch_bounds__(BIAS_COLS *BIAS_SLICES)
    bias_sgd_kernel(float *b, float *vb, const float *__restrict__ dy, int M, int N, float lr, float mu)
{
    __shared__ float part[BIAS_SLICES][BIAS_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int n = blockIdx.x * BIAS_COLS + tx;
    float s = 0.0f;
    if (n < N)
        for (int m = ty; m < M; m += BIAS_SLICES)
            s += dy[(size_t)m * N + n];
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && n < N) {
        float g = part[0][tx];
#pragma unroll
        for (int i = 1; i < BIAS_SLICES; ++i)
            g += part[i][tx];
        const float v = mu * vb[n] + g;
        vb[n] = v;
        b[n] -= lr * v;
    }
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

extern "C" void gemm_bias_sgd(float *b, float *vb, const float *dy, int M, int N, float lr, float mu)
{
    bias_sgd_kernel<<<(N + BIAS_COLS - 1) / BIAS_COLS, dim3(BIAS_COLS, BIAS_SLICES), 0, snn_stream()>>>(
        b, vb, dy, M, N, lr, mu);
    CUDA_CHECK_LAUNCH();
}
