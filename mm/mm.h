/* The memory strategy of the build (CONFIG_MM_STATIC, _POOL, _CUDA_ASYNC) as
 * the program sees it: the start-up allocation (the arena of mm/arena.h), the
 * per-step tensors that POOL and CUDA_ASYNC allocate and free each step, and
 * the figures every strategy reports at the end. */
#ifndef SNN_MM_H
#define SNN_MM_H

#include <stddef.h>
#include <stdio.h>

#include "snn_config.h"

#if defined(CONFIG_MM_POOL)
#define SNN_MM_NAME "pool"
#define SNN_MM_PER_STEP 1
#elif defined(CONFIG_MM_CUDA_ASYNC)
#define SNN_MM_NAME "cuda-async"
#define SNN_MM_PER_STEP 1
#else
#define SNN_MM_NAME "static"
#define SNN_MM_PER_STEP 0 /* every tensor is an arena region */
#endif

typedef struct {
    long startup_calls;  /* device allocation calls before training */
    long training_calls; /* ... and during training and evaluation */
    long tensors;        /* per-step tensors allocated */
    long waits;          /* POOL: waits for the stream at the cap */
    size_t arena;        /* the start-up allocation */
    size_t reserved;     /* bytes held from the device, the arena included */
    size_t peak_in_use;  /* the most bytes in use at once, the arena included */
} snn_mm_stats;

/* Sets the strategy up and makes the start-up allocation; on failure, one
 * message and exit 1, as every call here. */
void *snn_mm_start(size_t arena_bytes);
/* A per-step tensor (POOL and CUDA_ASYNC; under STATIC a fatal error). */
void *snn_mm_alloc(size_t bytes);
/* Its last use must already be enqueued. */
void snn_mm_free(void *p);
void snn_mm_stats_get(snn_mm_stats *s);
/* Returns everything, the arena last. */
void snn_mm_stop(void *arena);

void snn_mm_print(const snn_mm_stats *s, FILE *out);

#endif
