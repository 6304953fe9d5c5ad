#include "mm/mm.h"

#include <string.h>

#include "arch/runtime.h"
#include "mm/strategy.h"

static size_t arena_bytes;

void *snn_mm_start(size_t bytes)
{
    void *arena = snn_rt_alloc(bytes);
    arena_bytes = bytes;
    snn_mm_strategy_start();
    return arena;
}

void snn_mm_stats_get(snn_mm_stats *s)
{
    memset(s, 0, sizeof(*s));
    s->startup_calls = 1;
    s->arena = s->reserved = s->peak_in_use = arena_bytes;
    snn_mm_strategy_stats(s);
}

void snn_mm_stop(void *arena)
{
    snn_mm_strategy_stop();
    snn_rt_free(arena);
}

static double mib(size_t bytes) { return bytes / 1048576.0; }

void snn_mm_print(const snn_mm_stats *s, FILE *out)
{
    fprintf(out, "memory, strategy %s:\n", SNN_MM_NAME);
    fprintf(out, "  device allocation calls  %ld at start-up, %ld during training\n", s->startup_calls,
            s->training_calls);
    if (SNN_MM_PER_STEP)
        fprintf(out,
                "  per-step tensors         %ld allocated and freed (%ld waits for the stream at the cap)\n",
                s->tensors, s->waits);
    fprintf(out, "  reserved                 %14zu B (%.1f MiB): start-up allocation %zu B, strategy %zu B\n",
            s->reserved, mib(s->reserved), s->arena, s->reserved - s->arena);
    fprintf(out, "  peak in use              %14zu B (%.1f MiB)\n", s->peak_in_use, mib(s->peak_in_use));
}
