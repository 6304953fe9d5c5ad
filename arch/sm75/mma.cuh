/* Turing (sm_75) tensor-core instructions: mma.sync m16n8k8 with FP16
 * operands, and ldmatrix. Device code only; valid on every later arch.
 *
 * Fragments (g = lane / 4, t = lane % 4), 16-bit pairs packed low element
 * first in a 32-bit register:
 *   A 16x8 (row):  a0 = (g, 2t..2t+1), a1 = (g+8, 2t..2t+1)
 *   B 8x8 (col):   b0 = (k 2t..2t+1, n g)
 *   C/D 16x8:      c0,c1 = (g, 2t), (g, 2t+1); c2,c3 = (g+8, 2t), (g+8, 2t+1)
 *                  (f16 accumulators: c0c1 and c2c3 packed as two f16x2) */
#ifndef SNN_SM75_MMA_CUH
#define SNN_SM75_MMA_CUH

#include <stdint.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

/* d = a . b + d, FP16 operands, FP32 accumulators. */
static __device__ __forceinline__ void sm75_mma_16x8x8_f32_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

/* d = a . b + d, FP16 operands, FP16 accumulators (two f16x2 registers). */
static __device__ __forceinline__ void sm75_mma_16x8x8_f16_f16(uint32_t (&d)[2], uint32_t a0, uint32_t a1,
                                                                uint32_t b0)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3}, {%4}, {%0,%1};\n"
                 : "+r"(d[0]), "+r"(d[1])
                 : "r"(a0), "r"(a1), "r"(b0));
}

/* Four (two) 8x8 16-bit matrices from shared memory: lanes 8i..8i+7 give the
 * addresses of matrix i's eight 16-byte rows; register i receives matrix i's
 * element pair (lane / 4, 2 (lane % 4)..+1). _trans transposes each matrix:
 * register i then holds rows 2 (lane % 4)..+1 of column lane / 4. */
static __device__ __forceinline__ void sm75_ldmatrix_x4(uint32_t (&r)[4], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"((unsigned)__cvta_generic_to_shared(row)));
}
static __device__ __forceinline__ void sm75_ldmatrix_x4_trans(uint32_t (&r)[4], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"((unsigned)__cvta_generic_to_shared(row)));
}
static __device__ __forceinline__ void sm75_ldmatrix_x2(uint32_t (&r)[2], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"((unsigned)__cvta_generic_to_shared(row)));
}
static __device__ __forceinline__ void sm75_ldmatrix_x2_trans(uint32_t (&r)[2], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"((unsigned)__cvta_generic_to_shared(row)));
}

/* (lo, hi) rounded to FP16, lo in the low half. */
static __device__ __forceinline__ uint32_t sm75_pack_f16x2(float lo, float hi)
{
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

/* The two FP16 values of a packed register, as floats. */
static __device__ __forceinline__ float2 sm75_unpack_f16x2(uint32_t r)
{
    return __half22float2(*reinterpret_cast<const __half2 *>(&r));
}

#endif
