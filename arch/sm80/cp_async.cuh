/* cp.async (sm_80+): global -> shared copies that bypass registers, grouped
 * with commit_group and waited on with wait_group. Device code only; the
 * caller includes it only on a target with SNN_ARCH_HAS_CP_ASYNC.
 *
 * src_bytes < size zero-fills the rest of the destination (src_bytes = 0: a
 * pure zero fill, nothing is read): this is how tiles are predicated. */
#ifndef SNN_SM80_CP_ASYNC_CUH
#define SNN_SM80_CP_ASYNC_CUH

#include <cuda_runtime.h>

static __device__ __forceinline__ unsigned sm80_smem_addr(const void *smem)
{
    return (unsigned)__cvta_generic_to_shared(smem);
}

/* 4 bytes, cached in L1 and L2 (.ca: the only form for sizes below 16). */
static __device__ __forceinline__ void sm80_cp_async_ca_4(void *smem, const void *gmem, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(sm80_smem_addr(smem)), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
}

/* The 16-byte copy: on sm_90 through L1 (.ca), as the L1-bypassing form (.cg) reaches L2 there in partial
 * lines, many more requests for the same tiles, and L2's tag lookups cap the operand stream (docs/PERF.md).
 * On sm_80 the bypassing form, CUTLASS's choice there (not measured by us). */
#if __CUDA_ARCH__ >= 900
#define SM80_CP_ASYNC_16 "cp.async.ca.shared.global"
#else
#define SM80_CP_ASYNC_16 "cp.async.cg.shared.global"
#endif

/* 16 bytes, src_bytes of them read; both addresses 16-byte aligned. */
static __device__ __forceinline__ void sm80_cp_async_16(void *smem, const void *gmem, int src_bytes)
{
    asm volatile(SM80_CP_ASYNC_16 " [%0], [%1], 16, %2;\n" ::"r"(sm80_smem_addr(smem)), "l"(gmem), "r"(src_bytes)
                 : "memory");
}

/* 16 bytes, all read: no fill size to compute. */
static __device__ __forceinline__ void sm80_cp_async_16(void *smem, const void *gmem)
{
    asm volatile(SM80_CP_ASYNC_16 " [%0], [%1], 16;\n" ::"r"(sm80_smem_addr(smem)), "l"(gmem) : "memory");
}

/* Closes the group of copies issued since the previous commit. */
static __device__ __forceinline__ void sm80_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's committed groups are pending. */
template <int N>
static __device__ __forceinline__ void sm80_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#endif
