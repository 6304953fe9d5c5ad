/* Drawing a dropout mask (kernels/cuda/gemm_dropout.h), a warp at a time: in a kernel of its own, beside a
 * forward GEMM (its producer's side job) or beside the batch's gather. */
#ifndef SNN_CUDA_DROPOUT_MASK_CUH
#define SNN_CUDA_DROPOUT_MASK_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/noise.h"

/* Bytes of the mask of n elements from `first` of hidden layer `layer`, drawn in step `step` of epoch
 * `epoch` (snn_dropout_keeps), by warp `warp` of `warps`: in passes of MASK_PASS_BYTES, each lane makes one
 * Philox call (4 elements) and a byte takes its 8 bits from the two or three lanes whose calls it spans.
 * Lean enough for a GEMM producer's registers (gemm/side.cuh); warp-uniform, as its shuffles ask. */
constexpr uint32_t MASK_PASS_BYTES = 15; /* byte 14's third call is lane 30's */

static __device__ __forceinline__ void dropout_mask_warp(uint8_t *mask, uint32_t n, uint32_t first, int layer,
                                                         const uint32_t key[2], int32_t epoch, int32_t step,
                                                         uint32_t warp, uint32_t warps)
{
    const uint32_t lane = threadIdx.x % 32, k = lane < MASK_PASS_BYTES ? lane : 0; /* this lane's byte */
    for (uint32_t b0 = MASK_PASS_BYTES * warp; 8 * b0 < n; b0 += MASK_PASS_BYTES * warps) {
        const snn_philox_out r = snn_dropout_draws(key, epoch, step, layer, 4 * (first / 4 + 2 * b0 + lane));
        const uint32_t nibble = snn_dropout_word_keeps(r, 0) | snn_dropout_word_keeps(r, 1) << 1 |
                                snn_dropout_word_keeps(r, 2) << 2 | snn_dropout_word_keeps(r, 3) << 3;
        const uint32_t bits =
            (__shfl_sync(0xffffffffu, nibble, 2 * k) | __shfl_sync(0xffffffffu, nibble, 2 * k + 1) << 4 |
             __shfl_sync(0xffffffffu, nibble, 2 * k + 2) << 8) >>
            first % 4;
        const uint32_t e = 8 * (b0 + lane);
        if (lane < MASK_PASS_BYTES && e < n)
            mask[e / 8] = (uint8_t)(n - e < 8 ? bits & ((1u << (n - e)) - 1) : bits);
    }
}

/* A mask to draw: n elements from `first` of hidden layer `layer` into mask (NULL: none), in the training
 * step whose epoch and step lie at epoch and step (device memory, read-only while the forward pass runs:
 * where a replayed graph finds them). */
struct DropoutMaskJob {
    uint8_t *mask;
    uint32_t n, first;
    int layer;
    uint32_t key[2];
    const int32_t *epoch, *step;
    /* by warp `warp` of `warps`, every lane of each */
    __device__ __forceinline__ void draw(uint32_t warp, uint32_t warps) const
    {
        if (mask)
            dropout_mask_warp(mask, n, first, layer, key, __ldg(epoch), __ldg(step), warp, warps);
    }
};

/* The job that draws hidden layer `layer`'s mask for `rows` rows of `width` units (from row noise.row0), in
 * the training step of noise.epoch and step, beside other work (gemm/forward.cu): that layer's next forward
 * reads it instead of drawing its own. No mask where the build drops nothing or it would not fit (the
 * forward then refuses). For a job that will run before that forward. */
DropoutMaskJob cuda_dropout_mask_ahead(const snn_noise &noise, const int32_t *step, int layer, int rows,
                                       int width);

#endif
