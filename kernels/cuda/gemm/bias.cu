/* The bias gradient, fused with its update or stored (gemm/bias.h): a block per CONFIG_CUDA_BIAS_COLS columns, in
 * CONFIG_CUDA_BIAS_SLICES row slices (gemm/bias.cuh). */
#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/launch.cuh"
#include "arch/cuda/stream.h"
#include "kernels/cuda/gemm/bias.cuh"
#include "kernels/cuda/gemm/bias.h"
#include "snn_config.h"

constexpr int BIAS_COLS = CONFIG_CUDA_BIAS_COLS, BIAS_SLICES = CONFIG_CUDA_BIAS_SLICES;
constexpr int BIAS_THREADS = BIAS_COLS * BIAS_SLICES;
static_assert(BIAS_THREADS <= 1024,
              "CONFIG_CUDA_BIAS_COLS x CONFIG_CUDA_BIAS_SLICES must be at most 1024 threads");

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

__global__ void __launch_bounds__(BIAS_THREADS)
    bias_update_kernel(float *b, snn_state sb, const float *__restrict__ dy, int M, int N, const snn_rate *rate)
{
    snn_grid_wait();
    gemm_bias_update_columns<BIAS_COLS, BIAS_SLICES>(b, sb, dy, M, N, rate, blockIdx.x * BIAS_COLS, threadIdx.x,
                                                     threadIdx.y);
}

__global__ void __launch_bounds__(BIAS_THREADS) bias_grad_kernel(float *gb, const float *__restrict__ dy, int ld, int M, int N)
{
    snn_grid_wait();
    gemm_bias_columns<BIAS_COLS, BIAS_SLICES>(dy, ld, M, N, blockIdx.x * BIAS_COLS, threadIdx.x, threadIdx.y,
                                              [&](int n, float g) { gb[n] = g; });
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

extern "C" void gemm_bias_update(float *b, snn_state sb, const float *dy, int M, int N, const snn_rate *rate)
{
    SNN_LAUNCH(bias_update_kernel, (N + BIAS_COLS - 1) / BIAS_COLS, dim3(BIAS_COLS, BIAS_SLICES), 0, b, sb,
               dy, M, N, rate);
}

extern "C" void gemm_bias_grad(float *gb, const float *dy, int ldy, int M, int N)
{
    SNN_LAUNCH(bias_grad_kernel, (N + BIAS_COLS - 1) / BIAS_COLS, dim3(BIAS_COLS, BIAS_SLICES), 0, gb, dy,
               ldy, M, N);
}
