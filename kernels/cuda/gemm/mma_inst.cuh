/* The mma.sync instruction of the configured precision (gemm/mma_shape.cuh derives its shape), for the
 * mma.sync GEMM (gemm/mma.cuh) and the benchmark of its ceiling (tools/lab/bench_gemm.cu). Device code only. */
#ifndef SNN_GEMM_MMA_INST_CUH
#define SNN_GEMM_MMA_INST_CUH

#include <stdint.h>

#include "kernels/cuda/gemm/mma_shape.cuh"
#if GEMM_MMA_TURING
#include "arch/sm75/mma.cuh"
#else
#include "arch/sm80/mma.cuh"
#endif

#if defined(CONFIG_PRECISION_FP16_ACC16)
typedef uint32_t GemmMmaAcc;
#else
typedef float GemmMmaAcc;
#endif

/* c += a . b over one k step. */
static __device__ __forceinline__ void gemm_mma(GemmMmaAcc (&c)[GEMM_MMA_ACC_REGS], const uint32_t (&a)[4],
                                                const uint32_t (&b)[2])
{
#if defined(CONFIG_PRECISION_FP16_ACC16)
    sm75_mma_16x8x8_f16_f16(c, a[0], a[1], b[0]);
    sm75_mma_16x8x8_f16_f16(c, a[2], a[3], b[1]);
#elif GEMM_MMA_TURING
    sm75_mma_16x8x8_f32_f16(c, a[0], a[1], b[0]);
    sm75_mma_16x8x8_f32_f16(c, a[2], a[3], b[1]);
#elif defined(CONFIG_PRECISION_TF32)
    sm80_mma_16x8x8_f32_tf32(c, a, b);
#elif defined(CONFIG_PRECISION_BF16)
    sm80_mma_16x8x16_f32_bf16(c, a, b);
#else
    sm80_mma_16x8x16_f32_f16(c, a, b);
#endif
}

/* Element e of an accumulator tile as FP32: e = 0, 1: (g, 2t + e); 2, 3: (g + 8, 2t + e - 2). */
static __device__ __forceinline__ float gemm_mma_acc(const GemmMmaAcc (&c)[GEMM_MMA_ACC_REGS], int e)
{
#if defined(CONFIG_PRECISION_FP16_ACC16)
    const float2 v = sm75_unpack_f16x2(c[e / 2]);
    return e % 2 ? v.y : v.x;
#else
    return c[e];
#endif
}

#endif
