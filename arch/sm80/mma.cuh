/* Ampere (sm_80) tensor-core instructions: mma.sync m16n8k16 (FP16, BF16)
 * and m16n8k8 (TF32), FP32 accumulators. ldmatrix and the FP16 packing are
 * Turing's (arch/sm75/mma.cuh). Device code only.
 *
 * Fragments (g = lane / 4, t = lane % 4):
 *   m16n8k16, 16-bit pairs packed low element first:
 *     A 16x16 (row): a0 = (g, 2t..+1), a1 = (g+8, 2t..+1), a2 = (g, 2t+8..+9), a3 = (g+8, 2t+8..+9)
 *     B 16x8 (col):  b0 = (k 2t..+1, n g), b1 = (k 2t+8..+9, n g)
 *   m16n8k8 tf32, one value per register:
 *     A 16x8 (row):  a0 = (g, t), a1 = (g+8, t), a2 = (g, t+4), a3 = (g+8, t+4)
 *     B 8x8 (col):   b0 = (k t, n g), b1 = (k t+4, n g)
 *   C/D 16x8 (both): c0,c1 = (g, 2t), (g, 2t+1); c2,c3 = (g+8, 2t), (g+8, 2t+1) */
#ifndef SNN_SM80_MMA_CUH
#define SNN_SM80_MMA_CUH

#include <stdint.h>

#include <cuda_bf16.h>

#include "arch/sm75/mma.cuh"

static __device__ __forceinline__ void sm80_mma_16x8x16_f32_f16(float (&d)[4], const uint32_t (&a)[4],
                                                                 const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ void sm80_mma_16x8x16_f32_bf16(float (&d)[4], const uint32_t (&a)[4],
                                                                  const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ void sm80_mma_16x8x8_f32_tf32(float (&d)[4], const uint32_t (&a)[4],
                                                                 const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* (lo, hi) rounded to BF16, lo in the low half. */
static __device__ __forceinline__ uint32_t sm80_pack_bf16x2(float lo, float hi)
{
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

/* x rounded to TF32 (to nearest, ties away from zero), as mma's tf32 operand. */
static __device__ __forceinline__ uint32_t sm80_cvt_tf32(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

#endif
