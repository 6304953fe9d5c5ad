/* Writing a 16-bit twin from its FP32 tensor (kernels/cuda/twin.cuh). */
#include "arch/cuda/check.h"
#include "arch/cuda/launch.cuh"
#include "arch/cuda/stream.h"
#include "kernels/cuda/twin.cuh"

__global__ void twin_write_kernel(SnnTwin *twin, const float *__restrict__ f32, long n)
{
    snn_grid_wait();
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        twin[i] = snn_twin_round(f32[i]);
}

extern "C" void cuda_write_twin(snn_twin *t, const float *x, long n)
{
    if (!t || n <= 0)
        return;
    const long blocks = (n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096;
    SNN_LAUNCH(twin_write_kernel, (unsigned)blocks, 256, 0, snn_twin_ptr(t), x, n);
}
