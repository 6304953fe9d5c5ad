/* What each strategy (mm/strategy_*.c, one per build) gives mm/mm.c, besides
 * snn_mm_alloc and snn_mm_free. */
#ifndef SNN_MM_STRATEGY_H
#define SNN_MM_STRATEGY_H

#include "mm/mm.h"

void snn_mm_strategy_start(void);
void snn_mm_strategy_stats(snn_mm_stats *s); /* adds its figures to the arena's */
void snn_mm_strategy_stop(void);

#endif
