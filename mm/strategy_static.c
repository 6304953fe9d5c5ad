/* MM_STATIC: the arena is everything; nothing is allocated after start-up. */
#include "mm/strategy.h"
#include "snn_check.h"

void snn_mm_strategy_start(void) {}
void snn_mm_strategy_stats(snn_mm_stats *s) { (void)s; }
void snn_mm_strategy_stop(void) {}

void *snn_mm_alloc(size_t bytes)
{
    snn_die("snn_mm_alloc(%zu): the static strategy has no per-step tensors (a bug: check SNN_MM_PER_STEP)",
            bytes);
}

void snn_mm_free(void *p) { (void)p; }
