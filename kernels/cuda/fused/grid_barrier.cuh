/* A grid barrier whose arrival and wait are two calls (fused/grid_resident.cu), so that a block can do work
 * of its own, which no other block reads, while the others arrive; and records that carry their own arrival,
 * where readers can poll what they read instead of meeting its writers at a barrier. The barrier: a count of
 * arrivals in global memory, added to by each block's thread 0 with release semantics and read with acquire
 * until every block of the grid has arrived. It costs what cooperative groups' grid.sync() costs
 * (docs/PERF.md v50). The count only grows, wrapping; a block reads where it starts before the launch's first
 * grid.sync(), when no block can have arrived yet. */
#ifndef SNN_FUSED_GRID_BARRIER_CUH
#define SNN_FUSED_GRID_BARRIER_CUH

struct GridBarrier {
    unsigned *count;
    unsigned target; /* the count once every block has arrived at the block's latest barrier */

    /* Every thread of every block, before the launch's first grid.sync(). */
    __device__ explicit GridBarrier(unsigned *count) : count(count)
    {
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(target) : "l"(count) : "memory");
    }
    /* The block's writes so far are seen by every block once it has waited. The block's threads all call
     * it. */
    __device__ __forceinline__ void arrive()
    {
        __syncthreads();
        target += gridDim.x;
        if (threadIdx.x == 0)
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
    }
    /* Until every block has arrived. The block's threads all call it. */
    __device__ __forceinline__ void wait() const
    {
        if (threadIdx.x == 0)
            for (unsigned seen = 0;;) {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
                if ((int)(seen - target) >= 0)
                    break;
            }
        __syncthreads();
    }
    __device__ __forceinline__ void sync()
    {
        arrive();
        wait();
    }
    /* A value every block holds at the same point of the kernel, another after each arrival, never 0: the
     * tag of what a block writes there for others to poll (tagged_store). */
    __device__ __forceinline__ unsigned tag() const { return target | 1u; }
};

/* A 32-bit value and the tag of the step that wrote it (GridBarrier::tag), one 8-byte record stored and
 * loaded whole, so that a reader polls the values themselves until they carry its tag, instead of meeting
 * the writers at a barrier and then loading them: one trip through L2 instead of three (NCCL's LL
 * protocol). A cleared record, tag 0, is never current. */
__device__ __forceinline__ void tagged_store(uint64_t *at, float v, unsigned tag)
{
    const uint64_t r = (uint64_t)tag << 32 | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(at), "l"(r) : "memory");
}

/* Two adjacent records, 16-byte aligned: their values, and whether both carry the tag. */
__device__ __forceinline__ bool tagged_load2(const uint64_t *at, unsigned tag, float &v0, float &v1)
{
    uint64_t r0, r1;
    asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(r0), "=l"(r1) : "l"(at));
    v0 = __uint_as_float((unsigned)r0), v1 = __uint_as_float((unsigned)r1);
    return (unsigned)(r0 >> 32) == tag && (unsigned)(r1 >> 32) == tag;
}

#endif
