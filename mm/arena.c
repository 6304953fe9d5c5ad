#include "mm/arena.h"

#include "snn_check.h"

void snn_plan_make(snn_plan *plan, const snn_plan_entry *table, int n)
{
    if (n > SNN_PLAN_MAX)
        snn_die("a plan of %d regions: SNN_PLAN_MAX is %d", n, SNN_PLAN_MAX);
    size_t offset = 0;
    for (int r = 0; r < n; r++) {
        plan->region[r] = table[r];
        plan->region[r].offset = offset;
        offset += SNN_ARENA_ROUND(table[r].bytes);
    }
    plan->count = n;
    plan->total = offset;
}

void snn_plan_print(const snn_plan *plan, FILE *out)
{
    size_t sum = 0;
    int regions = 0;
    for (int r = 0; r < plan->count; r++)
        regions += plan->region[r].bytes > 0;
    fprintf(out, "memory plan: one allocation, %d regions\n", regions);
    for (int r = 0; r < plan->count; r++) {
        if (!plan->region[r].bytes)
            continue;
        fprintf(out, "  %-22s %14zu B\n", plan->region[r].name, plan->region[r].bytes);
        sum += plan->region[r].bytes;
    }
    fprintf(out, "  %-22s %14zu B\n", "alignment padding", plan->total - sum);
    fprintf(out, "  %-22s %14zu B (%.1f MiB)\n", "total", plan->total, plan->total / 1048576.0);
}
