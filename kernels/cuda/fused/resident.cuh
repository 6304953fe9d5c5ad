/* What the two resident kernels (fused/cluster.cu, fused/grid_resident.cu) share beyond the step's device
 * code (kernels/cuda/step_common.cuh) and their GEMM (fused/mma16.cuh): a block's shared memory at the start,
 * the element-wise ends of a hidden layer's output and gradient, the trace of the batch, and why a model does
 * not fit. Both give each block some units of every hidden layer; `unit` below is one of the model's. */
#ifndef SNN_FUSED_RESIDENT_CUH
#define SNN_FUSED_RESIDENT_CUH

#include <stdio.h>

#include "kernels/cuda/fused/mma16.cuh"
#include "kernels/cuda/step_common.cuh"
#include "kernels/fused.h"

/* The hidden width (kernels/fused.h: a placeholder where the kernels never run). */
constexpr int RESIDENT_HIDDEN = SNN_RESIDENT_WIDTH;

/* The block's shared memory as a Shared, zeroed (BYTES of it: a Shared and what follows it), so that padding
 * reads as 0. */
template <class Shared, int THREADS, int BYTES = sizeof(Shared)>
static __device__ __forceinline__ Shared &resident_shared()
{
    extern __shared__ __align__(128) unsigned char smem[];
    snn_smem_clear<THREADS>(smem, BYTES);
    __syncthreads();
    return *reinterpret_cast<Shared *>(smem);
}

/* Hidden layer l's output at row m of the batch, `unit`, from its pre-activation v (bias added): ReLU and
 * dropout, 0 in padding (a row past the batch, a unit past the width); traced. */
static __device__ __forceinline__ float resident_hidden_out(const snn_fused_net &net, const SnnStepDraws &d,
                                                            int l, int m, int unit, float v)
{
    const bool real = m < SNN_BATCH && unit < RESIDENT_HIDDEN;
    v = real ? d.drop(l, (uint32_t)(m * RESIDENT_HIDDEN + unit), v < 0.0f ? 0.0f : v) : 0.0f;
    if (net.trace && real)
        net.act[l + 1][(size_t)m * RESIDENT_HIDDEN + unit] = v;
    return v;
}

/* The gradient of hidden layer l's output at row m, `unit`, from dY . W (v), where that output was `out`:
 * through the ReLU's mask and the forward pass's dropout, 0 in padding; traced. */
static __device__ __forceinline__ float resident_hidden_grad(const snn_fused_net &net, const SnnStepDraws &d,
                                                             int l, int m, int unit, float out, float v)
{
    const bool real = m < SNN_BATCH && unit < RESIDENT_HIDDEN;
    v = real && out > 0.0f ? d.drop(l, (uint32_t)(m * RESIDENT_HIDDEN + unit), v) : 0.0f;
    if (net.trace && real)
        net.grad[l][(size_t)m * RESIDENT_HIDDEN + unit] = v;
    return v;
}

/* Tracing, block 0 writes step parity p's batch as the layered gather would: row r's pixels normalised from
 * the bytes image(r), its label label(r). The block's threads all call it. */
template <int THREADS, class Image, class Label>
static __device__ void resident_trace_batch(const snn_fused_net &net, int p, const Image &image,
                                            const Label &label)
{
    if (!net.trace || blockIdx.x != 0)
        return;
    for (int i = threadIdx.x; i < SNN_BATCH * SNN_INPUT_DIM; i += THREADS) {
        const int r = i / SNN_INPUT_DIM;
        net.input[p][i] = snn_gather_pixel(image(r)[i % SNN_INPUT_DIM], SNN_PIXEL_MEAN, SNN_PIXEL_STD);
        if (i % SNN_INPUT_DIM == 0)
            net.labels[p][r] = label(r);
    }
}

/* Whether a resident kernel whose compile-time checks came to `fits` runs this build's model, and where not,
 * why: a thread fetches each of the batch's `rows` samples, so they are at most its `threads` (the Kconfig
 * symbol `threads_symbol`); a block's share of the model takes `smem` bytes of at most `smem_max`; F0 reads
 * the pixels without a division (snn_pixel_op), to the operand bits of the dataset's normalisation. */
static inline bool resident_fits(char *why, int len, bool fits, int rows, int threads,
                                 const char *threads_symbol, int smem, int smem_max)
{
    static const bool exact = snn_pixels_op_exact(); /* a property of the build: checked once */
    if (fits && exact)
        return true;
    if (SNN_LAYERS < 2)
        snprintf(why, len, "a model without hidden layers has no units to share out");
    else if (!SNN_WIDTHS_UNIFORM)
        snprintf(why, len, "its hidden layers differ in width, where it shares out one width's units");
    else if (rows > threads)
        snprintf(why, len, "the batch, %d rows, exceeds the %d threads of a block (%s)", rows, threads,
                 threads_symbol);
    else if (!fits)
        snprintf(why, len,
                 "a block's share of the model, %d KB of shared memory, exceeds the %d KB a block has",
                 (smem + 1023) / 1024, smem_max / 1024);
    else
        snprintf(why, len,
                 "F0's arithmetic does not give the operand bits of the dataset's normalised pixels");
    return false;
}

#endif
