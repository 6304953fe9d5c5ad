/* 16-bit twins of FP32 tensors, the GEMMs' operands (CONFIG_GEMM_TWINS).
 *
 * The GEMMs read 16-bit copies ("twins") of the FP32 tensors they take as
 * operands, the weights, the layer inputs and the activation gradients: at
 * half the bytes, and as TMA needs them on the wgmma path (TMA copies as
 * is). The FP32 tensors stay the masters (FP32 weights and update); every
 * kernel that writes a tensor with a twin also writes the twin, rounded to
 * nearest even: the same values the mma.sync kernels round FP32 operands
 * to as they stage them. The model lays the twins out beside their
 * tensors and hands them to every op as arguments (kernels/ops_proto.h):
 * a GEMM without twins runs on mma.sync from the FP32 tensors. */
#ifndef SNN_CUDA_TWIN_CUH
#define SNN_CUDA_TWIN_CUH

#include "kernels/ops.h"
#include "snn_config.h"

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "arch/sm80/mma.cuh"

#if defined(CONFIG_PRECISION_BF16)
typedef __nv_bfloat16 SnnTwin;
typedef __nv_bfloat162 SnnTwin2;
static __device__ __forceinline__ SnnTwin snn_twin_round(float v) { return __float2bfloat16_rn(v); }
static __device__ __forceinline__ SnnTwin2 snn_twin_round2(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
#else
typedef __half SnnTwin;
typedef __half2 SnnTwin2;
static __device__ __forceinline__ SnnTwin snn_twin_round(float v) { return __float2half_rn(v); }
static __device__ __forceinline__ SnnTwin2 snn_twin_round2(float lo, float hi) { return __floats2half2_rn(lo, hi); }
#endif

/* The same roundings as bits (snn_twin): what the fused kernels keep in shared memory and L2 and hand to
 * mma.sync as packed pairs, and the value of such bits. */
static __host__ __device__ __forceinline__ snn_twin snn_twin_bits(float v)
{
#if defined(CONFIG_PRECISION_BF16)
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
#else
    return __half_as_ushort(__float2half_rn(v));
#endif
}
/* (lo, hi) rounded, lo in the low half: an mma.sync operand register. */
static __device__ __forceinline__ uint32_t snn_twin_bits2(float lo, float hi)
{
#if defined(CONFIG_PRECISION_BF16)
    return sm80_pack_bf16x2(lo, hi);
#else
    return sm75_pack_f16x2(lo, hi);
#endif
}
static __device__ __forceinline__ float snn_twin_value(snn_twin h)
{
#if defined(CONFIG_PRECISION_BF16)
    return __uint_as_float((uint32_t)h << 16);
#else
    return __half2float(__ushort_as_half(h));
#endif
}
/* v rounded to the twin's precision, as a float: the value a 16-bit operand of v holds. */
static __device__ __forceinline__ float snn_twin_rounded(float v) { return snn_twin_value(snn_twin_bits(v)); }

/* t[i] = v rounded, where there is a twin. */
static __device__ __forceinline__ void snn_twin_store(SnnTwin *t, size_t i, float v)
{
    if (t)
        t[i] = snn_twin_round(v);
}

/* t[i .. i + V - 1] = v[0 .. V - 1] rounded (V = 2 or 4), where there is a
 * twin: one 2V-byte store where aligned, else pairs or single elements. */
template <int V>
static __device__ __forceinline__ void snn_twin_storev(SnnTwin *t, size_t i, const float (&v)[V])
{
    static_assert(V == 2 || V == 4, "snn_twin_storev: 2 or 4 elements");
    if (!t)
        return;
    SnnTwin2 h[V / 2];
#pragma unroll
    for (int j = 0; j < V / 2; j++)
        h[j] = snn_twin_round2(v[2 * j], v[2 * j + 1]);
    const uintptr_t at = (uintptr_t)(t + i);
    if constexpr (V == 4)
        if ((at & 7) == 0) {
            *reinterpret_cast<uint2 *>(t + i) =
                make_uint2(*reinterpret_cast<const uint32_t *>(&h[0]), *reinterpret_cast<const uint32_t *>(&h[1]));
            return;
        }
    if ((at & 3) == 0) {
#pragma unroll
        for (int j = 0; j < V / 2; j++)
            reinterpret_cast<SnnTwin2 *>(t + i)[j] = h[j];
    } else {
#pragma unroll
        for (int j = 0; j < V / 2; j++) {
            t[i + 2 * j] = h[j].x;
            t[i + 2 * j + 1] = h[j].y;
        }
    }
}

/* The device type behind a twin argument (snn_twin, kernels/ops.h). */
static inline SnnTwin *snn_twin_ptr(snn_twin *t) { return reinterpret_cast<SnnTwin *>(t); }
static inline const SnnTwin *snn_twin_ptr(const snn_twin *t) { return reinterpret_cast<const SnnTwin *>(t); }

/* Whether a twin's rows (ld elements apart) are whole 16-byte chunks from
 * p on: what TMA and 16-byte cp.async can read. */
static inline bool snn_twin_rows_aligned(const SnnTwin *p, int ld)
{
    return p && ld % 8 == 0 && (uintptr_t)p % 16 == 0;
}

#endif
