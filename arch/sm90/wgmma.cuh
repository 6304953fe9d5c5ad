/* Hopper (sm_90a) warpgroup MMA: wgmma.mma_async m64nNk16 (FP16, BF16) and m64nNk8 (TF32) with FP32
 * accumulators, both operands read from shared memory through matrix descriptors (the per-N wrappers are
 * generated: tools/make/gen_sm90_wgmma.py), and the register reallocation between warpgroups (setmaxnreg).
 * Device code only. Accumulator fragment of m64nN (warp w of the warpgroup, lane l):
 *   d[4q + e] = C(16w + l/4 + 8(e/2), 8q + 2(l%4) + e%2), q < N/8. */
#ifndef SNN_SM90_WGMMA_CUH
#define SNN_SM90_WGMMA_CUH

#include <stdint.h>

#include "arch/sm90/mbarrier.cuh"
#include <generated/sm90_wgmma.h>

/* The descriptor of an operand tile laid out by TMA with the 128-byte swizzle: rows of 128 bytes (64 16-bit
 * elements, 32 FP32), 8 rows (1024 bytes) per swizzle atom, the tile on a 1024-byte boundary (base offset 0).
 * - K-major (a row runs along k): SBO, the stride between 8-row groups, is 1024 bytes; a k step (k16, or k8
 *   for TF32: 32 bytes) moves the start 32 bytes.
 * - MN-major (a row runs along m or n; "transposed", 16-bit only): 64 rows of k per 64 elements of m or n;
 *   8-k-row groups 1024 bytes apart (SBO), the 64-element blocks of m or n `lbo` bytes apart (LBO); a k16
 *   step moves the start 2048 bytes. */
static __device__ __forceinline__ uint64_t sm90_wgmma_desc_sw128(const void *tile, uint32_t lbo, uint32_t sbo)
{
    const uint64_t addr = sm90_smem_addr(tile);
    return ((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62); /* 1 << 62: 128-byte swizzle */
}

/* Orders this thread's register and shared-memory accesses before the wgmmas that follow. */
static __device__ __forceinline__ void sm90_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void sm90_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/* Waits until at most N committed groups are still running. */
template <int N> static __device__ __forceinline__ void sm90_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accesses to r across the asynchronous wgmma. */
template <int R> static __device__ __forceinline__ void sm90_wgmma_fence_regs(float (&r)[R])
{
#pragma unroll
    for (int i = 0; i < R; ++i)
        asm volatile("" : "+f"(r[i])::"memory");
}

/* Registers per thread of this warpgroup, from here on (a multiple of 8, 24..256). */
template <int R> static __device__ __forceinline__ void sm90_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> static __device__ __forceinline__ void sm90_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }

#endif
