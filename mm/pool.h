/* The caching pool of the POOL strategy: size classes, block splitting and
 * coalescing, stream-ordered reuse, a cap on reserved bytes. It never touches
 * the memory it manages: everything device-specific goes through a backend,
 * so the CUDA runtime, the host and the tests' simulated device drive the
 * same code.
 *
 * Reuse is stream-ordered: a freed block first waits, pending, behind an
 * event recorded on the stream at the free; it becomes reusable once the
 * stream has passed that event. The pool grows (raw_alloc, one segment at a
 * time) only when no free block fits, never beyond the cap; at the cap it
 * waits for the oldest pending free and tries again. Segments go back to the
 * backend only when the pool is destroyed. */
#ifndef SNN_POOL_H
#define SNN_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch/runtime.h" /* snn_pool_backend: the device under the pool */

#ifdef __cplusplus
extern "C" {
#endif

#define SNN_POOL_ALIGN SNN_RT_ALIGN /* every block: address and size */

typedef struct {
    long requests, releases;    /* snn_pool_alloc and snn_pool_free calls */
    long raw_allocs, raw_frees; /* backend calls: growth attempts (failed ones too), segments returned */
    long waits;                 /* event waits at the cap */
    long segments;
    size_t reserved; /* bytes in segments: in_use + pending + free */
    size_t in_use, pending, free;
    size_t peak_in_use, peak_reserved;
} snn_pool_stats;

typedef struct snn_pool snn_pool;

/* The size class of a request: a multiple of SNN_POOL_ALIGN up to 4 KiB,
 * then eight classes per power of two (so at most 1/8 is rounding). */
size_t snn_pool_round(size_t bytes);

/* cap: the most bytes the pool may reserve; segment: the least it grows by.
 * The backend must outlive the pool. */
snn_pool *snn_pool_new(const snn_pool_backend *backend, size_t cap, size_t segment);
/* All blocks must have been freed; waits for the pending ones, returns every segment. */
void snn_pool_destroy(snn_pool *p);

/* NULL when the request cannot be met (the cap, or the backend is out of
 * memory, with nothing pending to wait for): snn_pool_error says why. */
void *snn_pool_alloc(snn_pool *p, size_t bytes);
/* ptr's last use must already be enqueued on the stream. NULL is ignored; a
 * pointer the pool did not hand out is a fatal error. */
void snn_pool_free(snn_pool *p, void *ptr);
/* Makes the pending blocks whose events have completed reusable (the
 * allocator also does it on every request). */
void snn_pool_reclaim(snn_pool *p);

const char *snn_pool_error(const snn_pool *p);
void snn_pool_stats_get(const snn_pool *p, snn_pool_stats *s);

/* Every block in address order, segment by segment (for tests and dumps). */
enum snn_pool_state { SNN_POOL_FREE, SNN_POOL_LIVE, SNN_POOL_PENDING };
typedef void (*snn_pool_visit)(void *arg, int segment, uintptr_t addr, size_t bytes,
                               enum snn_pool_state state);
void snn_pool_walk(const snn_pool *p, snn_pool_visit visit, void *arg);

#ifdef __cplusplus
}
#endif
#endif
