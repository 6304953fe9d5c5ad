/* MM_POOL: the per-step tensors come from our caching pool (mm/pool.h) over
 * the target's device backend. */
#include "arch/runtime.h"
#include "mm/pool.h"
#include "mm/strategy.h"
#include "snn_check.h"

#define MIB ((size_t)1 << 20)

static snn_pool *pool;

void snn_mm_strategy_start(void)
{
    pool = snn_pool_new(snn_rt_pool_backend(), (size_t)CONFIG_MM_POOL_CAP_MIB * MIB,
                        (size_t)CONFIG_MM_POOL_SEGMENT_MIB * MIB);
}

void *snn_mm_alloc(size_t bytes)
{
    void *p = snn_pool_alloc(pool, bytes);
    if (!p)
        snn_die("memory pool: %s: raise CONFIG_MM_POOL_CAP_MIB (now %d) or lower CONFIG_TRAIN_BATCH_SIZE, "
                "CONFIG_EVAL_BATCH_SIZE or the hidden widths (CONFIG_NN_HIDDEN_WIDTH, _WIDTH_k; make menuconfig)",
                snn_pool_error(pool), CONFIG_MM_POOL_CAP_MIB);
    return p;
}

void snn_mm_free(void *p) { snn_pool_free(pool, p); }

void snn_mm_strategy_stats(snn_mm_stats *s)
{
    snn_pool_stats ps;
    snn_pool_stats_get(pool, &ps);
    s->training_calls += ps.raw_allocs;
    s->tensors = ps.requests;
    s->waits = ps.waits;
    s->reserved += ps.peak_reserved; /* segments are kept until shutdown */
    s->peak_in_use += ps.peak_in_use;
}

void snn_mm_strategy_stop(void)
{
    snn_pool_destroy(pool);
    pool = NULL;
    snn_rt_pool_backend_close();
}
