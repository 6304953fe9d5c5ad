/* The batch gather's arithmetic, one copy for the gather kernel (ops.cu) and the fused step
 * (fused/step.cu), so that both give the host's bits (kernels/ops_proto.h, gather_batch). */
#ifndef SNN_CUDA_GATHER_CUH
#define SNN_CUDA_GATHER_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/noise.h"

/* The sample in row i of the batch whose first row is `base` in the order (or in sample order, order NULL). */
static __device__ __forceinline__ long snn_gather_sample(const int32_t *order, long base, int i)
{
    return order ? (long)order[base + i] : base + i;
}

/* Byte j of the image px in row i of training step `step`'s batch: translated by the row's draw where the
 * step augments (noise.epoch given, CONFIG_TRAIN_AUGMENT_SHIFT), else as stored. */
static __device__ __forceinline__ uint8_t snn_gather_byte(const uint8_t *px, int j, int i, int32_t step,
                                                          const snn_noise &noise)
{
    if (!snn_noise_translates(noise))
        return px[j];
    return snn_shifted_pixel(px, j, snn_shift_of(noise.key, *noise.epoch, step, i));
}

/* A pixel byte normalised: (c / 255 - mean) / std. */
static __host__ __device__ __forceinline__ float snn_gather_pixel(uint8_t c, float mean, float std)
{
    return ((float)c / 255.0f - mean) / std;
}

#endif
