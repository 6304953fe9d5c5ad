/* MM_CUDA_ASYNC: the per-step tensors come from CUDA's stream-ordered
 * allocator (cudaMallocAsync on the engine's stream), its pool keeping every
 * byte it reserves (release threshold UINT64_MAX). */
#include "arch/runtime.h"
#include "mm/strategy.h"

static long calls;

void snn_mm_strategy_start(void) { snn_rt_async_init(); }

void *snn_mm_alloc(size_t bytes)
{
    calls++;
    return snn_rt_async_alloc(bytes);
}

void snn_mm_free(void *p) { snn_rt_async_free(p); }

void snn_mm_strategy_stats(snn_mm_stats *s)
{
    size_t reserved, used;
    snn_rt_async_usage(&reserved, &used);
    s->training_calls += calls;
    s->tensors = calls;
    s->reserved += reserved;
    s->peak_in_use += used;
}

void snn_mm_strategy_stop(void) { snn_rt_async_close(); }
