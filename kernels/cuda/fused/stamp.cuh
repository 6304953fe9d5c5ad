/* The fused kernels' clock stamps for tools/bin/bench_step (kernels/fused.h, SNN_FUSED_CLOCKS): one step's
 * timeline, per phase each block's end of its work and block 0's release from the barrier after it. */
#ifndef SNN_FUSED_STAMP_CUH
#define SNN_FUSED_STAMP_CUH

#include "kernels/fused.h"

/* With net.clocks, the stamp of phase `phase` of step s: `released` after the phase's barrier. */
static __device__ __forceinline__ void fused_stamp(const snn_fused_net &net, int s, int phase, bool released)
{
    if (!net.clocks || s != net.clock_step || threadIdx.x != 0 || (released && blockIdx.x != 0))
        return;
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    net.clocks[phase * (SNN_FUSED_MAX_BLOCKS + 1) + (released ? SNN_FUSED_MAX_BLOCKS : blockIdx.x)] = t;
}

#endif
