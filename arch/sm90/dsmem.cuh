/* Hopper (sm_90) stores into another block's shared memory within a cluster (distributed shared memory)
 * that announce themselves on the receiving block's mbarrier (arch/sm90/mbarrier.cuh): the receiver
 * expects the bytes of a phase and waits for it (sm90_mbarrier_wait<true>), with no cluster barrier. Device
 * code only. */
#ifndef SNN_SM90_DSMEM_CUH
#define SNN_SM90_DSMEM_CUH

#include <stdint.h>

#include "arch/sm90/mbarrier.cuh"

/* The address in block `rank`'s shared memory of what lies at p in this block's (every block of the
 * cluster has the same layout). */
static __device__ __forceinline__ uint32_t sm90_cluster_addr(const void *p, int rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(sm90_smem_addr(p)), "r"(rank));
    return r;
}

/* 16 bytes v to `to` in block rank's shared memory, counted against its mbarrier `bar` (both named by
 * their place in this block's layout) when they land. */
static __device__ __forceinline__ void sm90_store_peer_16(void *to, int rank, uint4 v, uint64_t *bar)
{
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
            sm90_cluster_addr(to, rank)),
        "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(sm90_cluster_addr(bar, rank))
        : "memory");
}

#endif
