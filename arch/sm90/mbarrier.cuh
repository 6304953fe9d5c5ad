/* Hopper (sm_90) shared-memory barriers (mbarrier) as the TMA pipeline uses
 * them: a barrier completes a phase when its expected arrivals have arrived
 * and, for a TMA stage, the bytes it announced have landed. Waiters name the
 * parity of the phase they wait for. Device code only. */
#ifndef SNN_SM90_MBARRIER_CUH
#define SNN_SM90_MBARRIER_CUH

#include <stdint.h>

static __device__ __forceinline__ uint32_t sm90_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void sm90_mbarrier_init(uint64_t *bar, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sm90_smem_addr(bar)), "r"(arrivals));
}

/* Makes the initialised barriers visible to the async proxy (TMA) and the other threads. */
static __device__ __forceinline__ void sm90_mbarrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

static __device__ __forceinline__ void sm90_mbarrier_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sm90_smem_addr(bar)) : "memory");
}

/* One arrival that also announces `bytes` of TMA traffic to wait for. */
static __device__ __forceinline__ void sm90_mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sm90_smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

/* Waits until the phase of parity `parity` has completed. A new barrier is
 * in phase 0, so waiting on parity 1 returns at once (the "previous" phase).
 * CLUSTER: acquiring at cluster scope what the cluster's blocks stored
 * against the barrier (arch/sm90/dsmem.cuh), not only the block's own. */
template <bool CLUSTER = false>
static __device__ __forceinline__ void sm90_mbarrier_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    do {
        if constexpr (CLUSTER)
            asm volatile(
                "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                "selp.u32 %0, 1, 0, p;\n}\n"
                : "=r"(done)
                : "r"(sm90_smem_addr(bar)), "r"(parity)
                : "memory");
        else
            asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, p;\n}\n"
                         : "=r"(done)
                         : "r"(sm90_smem_addr(bar)), "r"(parity)
                         : "memory");
    } while (!done);
}

#endif
