#include "mm/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mm/ptrmap.h"
#include "snn_check.h"

#define ALIGN ((size_t)SNN_POOL_ALIGN)
#define SMALL_LOG2 12 /* below 4 KiB every multiple of ALIGN is a class */
#define SMALL_CLASSES (((size_t)1 << SMALL_LOG2) / ALIGN - 1)
#define SUB_CLASSES 8 /* classes per power of two from 4 KiB up */
#define BINS ((int)SMALL_CLASSES + (64 - SMALL_LOG2) * SUB_CLASSES)
#define LARGEST ((size_t)1 << 62)

typedef struct segment segment;
typedef struct block block;

struct block {
    uintptr_t addr;
    size_t size;
    enum snn_pool_state state;
    int bin; /* FREE: its bin */
    segment *seg;
    block *prev, *next;           /* neighbours in address order, within the segment */
    block *link_prev, *link_next; /* FREE: its bin's list; PENDING: the queue (link_next) */
    void *event;                  /* PENDING: recorded on the stream at the free */
};

struct segment {
    uintptr_t base;
    size_t size;
    int index;
    block *first; /* the block at base: splits and merges never move it */
    segment *next;
};

struct snn_pool {
    snn_pool_backend be;
    size_t cap, segment_bytes;
    block *bins[BINS]; /* free blocks, by the largest class not above their size */
    uint64_t nonempty[(BINS + 63) / 64];
    block *pending_head, *pending_tail; /* oldest free first */
    segment *segments, *last_segment;
    block *spare; /* recycled block records */
    snn_ptrmap live;
    snn_pool_stats st;
    char error[320];
};

static int log2_floor(size_t x) { return 63 - __builtin_clzll((unsigned long long)x); }

size_t snn_pool_round(size_t bytes)
{
    if (bytes > LARGEST)
        return 0;
    size_t r = bytes ? (bytes + ALIGN - 1) / ALIGN * ALIGN : ALIGN;
    if (r < ((size_t)1 << SMALL_LOG2))
        return r;
    size_t step = ((size_t)1 << log2_floor(r)) / SUB_CLASSES;
    return (r + step - 1) / step * step;
}

static int bin_of(size_t size)
{
    if (size < ((size_t)1 << SMALL_LOG2))
        return (int)(size / ALIGN) - 1;
    int k = log2_floor(size);
    size_t sub = (size - ((size_t)1 << k)) / (((size_t)1 << k) / SUB_CLASSES);
    return (int)SMALL_CLASSES + (k - SMALL_LOG2) * SUB_CLASSES + (int)sub;
}

/* ---- block records and bins ------------------------------------------------ */

static block *block_new(snn_pool *p)
{
    block *b = p->spare;
    if (b)
        p->spare = b->link_next;
    else
        b = snn_xmalloc(sizeof(*b), "a pool block record");
    memset(b, 0, sizeof(*b));
    return b;
}

static void block_recycle(snn_pool *p, block *b)
{
    b->link_next = p->spare;
    p->spare = b;
}

static void bin_insert(snn_pool *p, block *b)
{
    int i = bin_of(b->size);
    b->state = SNN_POOL_FREE;
    b->bin = i;
    b->link_prev = NULL;
    b->link_next = p->bins[i];
    if (b->link_next)
        b->link_next->link_prev = b;
    p->bins[i] = b;
    p->nonempty[i / 64] |= 1ull << (i % 64);
}

static void bin_remove(snn_pool *p, block *b)
{
    int i = b->bin;
    if (b->link_prev)
        b->link_prev->link_next = b->link_next;
    else
        p->bins[i] = b->link_next;
    if (b->link_next)
        b->link_next->link_prev = b->link_prev;
    if (!p->bins[i])
        p->nonempty[i / 64] &= ~(1ull << (i % 64));
}

static int next_nonempty(const snn_pool *p, int from)
{
    for (int w = from / 64; from < BINS && w < (BINS + 63) / 64; w++, from = w * 64) {
        uint64_t bits = p->nonempty[w] & (~0ull << (from % 64));
        if (bits)
            return w * 64 + __builtin_ctzll(bits);
    }
    return -1;
}

/* The smallest free block that holds size (the lowest address among equals),
 * from the first bin that has one. */
static block *find_free(const snn_pool *p, size_t size)
{
    for (int i = next_nonempty(p, bin_of(size)); i >= 0; i = next_nonempty(p, i + 1)) {
        block *best = NULL;
        for (block *b = p->bins[i]; b; b = b->link_next)
            if (b->size >= size &&
                (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr)))
                best = b;
        if (best)
            return best;
    }
    return NULL;
}

/* b joins the free blocks, merged with its free neighbours (never across segments). */
static void make_free(snn_pool *p, block *b)
{
    block *n = b->next, *prev = b->prev;
    if (n && n->state == SNN_POOL_FREE) {
        bin_remove(p, n);
        b->size += n->size;
        b->next = n->next;
        if (b->next)
            b->next->prev = b;
        block_recycle(p, n);
    }
    if (prev && prev->state == SNN_POOL_FREE) {
        bin_remove(p, prev);
        prev->size += b->size;
        prev->next = b->next;
        if (prev->next)
            prev->next->prev = prev;
        block_recycle(p, b);
        b = prev;
    }
    bin_insert(p, b);
}

/* ---- the pool ---------------------------------------------------------------- */

snn_pool *snn_pool_new(const snn_pool_backend *backend, size_t cap, size_t segment)
{
    snn_pool *p = snn_xmalloc(sizeof(*p), "the memory pool");
    memset(p, 0, sizeof(*p));
    p->be = *backend;
    p->cap = cap / ALIGN * ALIGN;
    p->segment_bytes = segment < ALIGN ? ALIGN : segment / ALIGN * ALIGN;
    snn_ptrmap_init(&p->live);
    return p;
}

static void *segment_alloc(snn_pool *p, size_t bytes)
{
    p->st.raw_allocs++;
    void *base = p->be.raw_alloc(p->be.ctx, bytes);
    if (base && (uintptr_t)base % ALIGN)
        snn_die("the pool's backend returned a segment at %p, not aligned to %zu bytes", base, ALIGN);
    return base;
}

/* A new segment that holds size: the configured segment size or size if
 * larger, within the cap; exactly size if the device refuses more. */
static int grow(snn_pool *p, size_t size)
{
    size_t room = p->cap - p->st.reserved;
    if (size > room)
        return 0;
    size_t bytes = size > p->segment_bytes ? size : p->segment_bytes;
    if (bytes > room)
        bytes = room;
    void *base = segment_alloc(p, bytes);
    if (!base && bytes > size)
        base = segment_alloc(p, bytes = size);
    if (!base)
        return 0;
    segment *s = snn_xmalloc(sizeof(*s), "a pool segment record");
    block *b = block_new(p);
    *s = (segment){(uintptr_t)base, bytes, (int)p->st.segments++, b, NULL};
    if (p->last_segment)
        p->last_segment->next = s;
    else
        p->segments = s;
    p->last_segment = s;
    b->addr = s->base;
    b->size = bytes;
    b->seg = s;
    bin_insert(p, b);
    p->st.reserved += bytes;
    p->st.free += bytes;
    if (p->st.reserved > p->st.peak_reserved)
        p->st.peak_reserved = p->st.reserved;
    return 1;
}

static void *hand_out(snn_pool *p, block *b, size_t size)
{
    bin_remove(p, b);
    if (b->size > size) { /* split: the tail stays free */
        block *rest = block_new(p);
        rest->addr = b->addr + size;
        rest->size = b->size - size;
        rest->seg = b->seg;
        rest->prev = b;
        rest->next = b->next;
        if (b->next)
            b->next->prev = rest;
        b->next = rest;
        b->size = size;
        bin_insert(p, rest);
    }
    b->state = SNN_POOL_LIVE;
    snn_ptrmap_put(&p->live, b->addr, b);
    p->st.free -= size;
    p->st.in_use += size;
    if (p->st.in_use > p->st.peak_in_use)
        p->st.peak_in_use = p->st.in_use;
    return (void *)b->addr;
}

void snn_pool_reclaim(snn_pool *p)
{
    /* One stream: its events complete in the order recorded, so the first
     * one not done ends the sweep. */
    block *b;
    while ((b = p->pending_head) && p->be.event_done(p->be.ctx, b->event)) {
        p->pending_head = b->link_next;
        if (!p->pending_head)
            p->pending_tail = NULL;
        p->be.event_release(p->be.ctx, b->event);
        b->event = NULL;
        p->st.pending -= b->size;
        p->st.free += b->size;
        make_free(p, b);
    }
}

static size_t largest_free(const snn_pool *p)
{
    for (int i = BINS - 1; i >= 0; i--) {
        size_t best = 0;
        for (const block *b = p->bins[i]; b; b = b->link_next)
            best = b->size > best ? b->size : best;
        if (best)
            return best;
    }
    return 0;
}

void *snn_pool_alloc(snn_pool *p, size_t bytes)
{
    p->st.requests++;
    size_t size = snn_pool_round(bytes);
    if (!size) {
        snprintf(p->error, sizeof(p->error), "a request of %zu bytes is beyond any size class", bytes);
        return NULL;
    }
    for (;;) {
        snn_pool_reclaim(p);
        block *b = find_free(p, size);
        if (b)
            return hand_out(p, b, size);
        if (grow(p, size))
            continue;
        if (!p->pending_head)
            break;
        p->be.event_wait(p->be.ctx, p->pending_head->event); /* at the cap: the oldest free */
        p->st.waits++;
    }
    if (size > p->cap - p->st.reserved)
        snprintf(
            p->error, sizeof(p->error),
            "cannot allocate %zu bytes (a %zu-byte block): %zu bytes in use, the largest free block is %zu "
            "bytes, and growing would exceed the cap (%zu of %zu bytes reserved)",
            bytes, size, p->st.in_use, largest_free(p), p->st.reserved, p->cap);
    else
        snprintf(p->error, sizeof(p->error),
                 "cannot allocate %zu bytes (a %zu-byte block): the device refused a new segment "
                 "(%zu bytes reserved, %zu in use, the largest free block is %zu bytes)",
                 bytes, size, p->st.reserved, p->st.in_use, largest_free(p));
    return NULL;
}

void snn_pool_free(snn_pool *p, void *ptr)
{
    if (!ptr)
        return;
    block *b = snn_ptrmap_take(&p->live, (uintptr_t)ptr);
    if (!b)
        snn_die("the memory pool was asked to free %p, which it did not hand out (or was freed already)",
                ptr);
    p->st.releases++;
    b->state = SNN_POOL_PENDING;
    b->event = p->be.event_record(p->be.ctx);
    b->link_next = NULL;
    if (p->pending_tail)
        p->pending_tail->link_next = b;
    else
        p->pending_head = b;
    p->pending_tail = b;
    p->st.in_use -= b->size;
    p->st.pending += b->size;
}

void snn_pool_destroy(snn_pool *p)
{
    if (!p)
        return;
    if (p->live.count)
        snn_die("the memory pool is shut down with %zu blocks (%zu bytes) still in use", p->live.count,
                p->st.in_use);
    while (p->pending_head) {
        p->be.event_wait(p->be.ctx, p->pending_tail->event);
        snn_pool_reclaim(p);
    }
    for (segment *s = p->segments, *next; s; s = next) {
        next = s->next;
        for (block *b = s->first, *n; b; b = n) {
            n = b->next;
            free(b);
        }
        p->be.raw_free(p->be.ctx, (void *)s->base);
        p->st.raw_frees++;
        free(s);
    }
    for (block *b = p->spare, *n; b; b = n) {
        n = b->link_next;
        free(b);
    }
    snn_ptrmap_clear(&p->live);
    free(p);
}

const char *snn_pool_error(const snn_pool *p) { return p->error; }
void snn_pool_stats_get(const snn_pool *p, snn_pool_stats *s) { *s = p->st; }

void snn_pool_walk(const snn_pool *p, snn_pool_visit visit, void *arg)
{
    for (const segment *s = p->segments; s; s = s->next)
        for (const block *b = s->first; b; b = b->next)
            visit(arg, s->index, b->addr, b->size, b->state);
}
