/* The arena: one allocation carved into named regions. The caller hands
 * the table of regions (nn/model.c's tensor table); the plan aligns each
 * region, gives it its offset, sums the total, and prints itself. */
#ifndef SNN_ARENA_H
#define SNN_ARENA_H

#include <stddef.h>
#include <stdio.h>

#define SNN_ARENA_ALIGN 256 /* every region's offset */
/* bytes rounded up to a whole number of SNN_ARENA_ALIGN: a region's footprint */
#define SNN_ARENA_ROUND(bytes) (((size_t)(bytes) + SNN_ARENA_ALIGN - 1) / SNN_ARENA_ALIGN * SNN_ARENA_ALIGN)
#define SNN_PLAN_MAX 24

typedef struct {
    const char *name;
    size_t bytes;
    size_t offset;
} snn_plan_entry;

typedef struct {
    snn_plan_entry region[SNN_PLAN_MAX];
    int count;
    size_t total;
} snn_plan;

/* Lays out n regions (names and sizes from table) one after the other. */
void snn_plan_make(snn_plan *plan, const snn_plan_entry *table, int n);
/* The regions that take bytes, the alignment padding and the total. */
void snn_plan_print(const snn_plan *plan, FILE *out);
static inline void *snn_plan_at(const snn_plan *plan, void *base, int region)
{
    return (char *)base + plan->region[region].offset;
}

#endif
