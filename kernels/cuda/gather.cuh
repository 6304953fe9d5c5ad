/* The batch gather's arithmetic, one copy for the gather kernel (ops.cu) and the fused step
 * (fused/step.cu), so that both give the host's bits (kernels/ops_proto.h, gather_batch). */
#ifndef SNN_CUDA_GATHER_CUH
#define SNN_CUDA_GATHER_CUH

#include <stdint.h>

#include <cuda_runtime.h>

/* The sample in row i of the batch whose first row is `base` in the order (or in sample order, order NULL). */
static __device__ __forceinline__ long snn_gather_sample(const int32_t *order, long base, int i)
{
    return order ? (long)order[base + i] : base + i;
}

/* A pixel byte normalised: (c / 255 - mean) / std. */
static __device__ __forceinline__ float snn_gather_pixel(uint8_t c, float mean, float std)
{
    return ((float)c / 255.0f - mean) / std;
}

#endif
