/* A grid barrier whose arrival and wait are two calls (fused/grid_resident.cu), so that a block can do work
 * of its own, which no other block reads, while the others arrive: a count of arrivals in global memory,
 * added to by each block's thread 0 with release semantics and read with acquire until every block of the
 * grid has arrived. It costs what cooperative groups' grid.sync() costs (docs/PERF.md v50). The count only
 * grows, wrapping; a block reads where it starts before the launch's first grid.sync(), when no block can
 * have arrived yet. */
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
};

#endif
