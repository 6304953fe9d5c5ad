/* The caching pool (mm/pool.c) on a simulated device: an address space that
 * is never touched (the pool must not dereference what it manages) and a
 * stream whose events complete only when the test advances it. Cases: size
 * classes, splitting, coalescing (never across segments), stream-ordered
 * reuse, the cap, statistics, and long random sequences checked against an
 * oracle that owns every byte. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mm/pool.h"
#include "nn/rng.h"
#include "snn_check.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define FAKE_BASE ((uintptr_t)1 << 36)
#define MAX_SEGMENTS 4096

/* ---- the simulated device ----------------------------------------------------- */

typedef struct {
    uintptr_t base;
    size_t bytes;
    int freed;
} fake_segment;

typedef struct {
    uintptr_t next; /* where the next segment goes */
    size_t gap;     /* left between segments; 0: they are adjacent */
    size_t limit;   /* raw_alloc refuses past this many bytes held (0: no limit) */
    size_t held;
    fake_segment seg[MAX_SEGMENTS];
    int segments;
    long raw_allocs, refused, raw_frees, misuse; /* misuse: a bad raw_free or event call */
    uint64_t enqueued, passed;                   /* the stream: work enqueued, work done */
    uint64_t *event_at;                          /* the enqueued count when each was recorded */
    char *event_live;
    long events, events_cap, released, waits;
} fake;

static void *fake_raw_alloc(void *ctx, size_t bytes)
{
    fake *f = ctx;
    f->raw_allocs++;
    if ((f->limit && f->held + bytes > f->limit) || f->segments == MAX_SEGMENTS) {
        f->refused++;
        return NULL;
    }
    if (bytes % SNN_POOL_ALIGN)
        f->misuse++;
    f->seg[f->segments++] = (fake_segment){f->next, bytes, 0};
    uintptr_t base = f->next;
    f->next += bytes + f->gap;
    f->held += bytes;
    return (void *)base;
}

static void fake_raw_free(void *ctx, void *p)
{
    fake *f = ctx;
    f->raw_frees++;
    for (int i = 0; i < f->segments; i++)
        if (f->seg[i].base == (uintptr_t)p && !f->seg[i].freed) {
            f->seg[i].freed = 1;
            f->held -= f->seg[i].bytes;
            return;
        }
    f->misuse++;
}

static long event_index(fake *f, void *event)
{
    long i = (long)(uintptr_t)event - 1;
    if (i < 0 || i >= f->events || !f->event_live[i]) {
        f->misuse++;
        return -1;
    }
    return i;
}

static void *fake_event_record(void *ctx)
{
    fake *f = ctx;
    if (f->events == f->events_cap) {
        f->events_cap = f->events_cap ? 2 * f->events_cap : 1024;
        f->event_at = realloc(f->event_at, f->events_cap * sizeof(*f->event_at));
        f->event_live = realloc(f->event_live, f->events_cap);
        if (!f->event_at || !f->event_live)
            snn_die("out of memory for the simulated stream's events");
    }
    f->event_at[f->events] = f->enqueued;
    f->event_live[f->events] = 1;
    return (void *)(uintptr_t)++f->events;
}

static bool fake_event_done(void *ctx, void *event)
{
    fake *f = ctx;
    long i = event_index(f, event);
    return i >= 0 && f->event_at[i] <= f->passed;
}

static void fake_event_wait(void *ctx, void *event)
{
    fake *f = ctx;
    long i = event_index(f, event);
    f->waits++;
    if (i >= 0 && f->event_at[i] > f->passed)
        f->passed = f->event_at[i];
}

static void fake_event_release(void *ctx, void *event)
{
    fake *f = ctx;
    long i = event_index(f, event);
    if (i >= 0) {
        f->event_live[i] = 0;
        f->released++;
    }
}

static snn_pool_backend backend;

static fake *fake_new(size_t gap, size_t limit)
{
    fake *f = calloc(1, sizeof(*f));
    if (!f)
        snn_die("out of memory for the simulated device");
    f->next = FAKE_BASE;
    f->gap = gap;
    f->limit = limit;
    backend = (snn_pool_backend){f,
                                 fake_raw_alloc,
                                 fake_raw_free,
                                 fake_event_record,
                                 fake_event_done,
                                 fake_event_wait,
                                 fake_event_release};
    return f;
}

static void fake_free(fake *f)
{
    free(f->event_at);
    free(f->event_live);
    free(f);
}

static void work(fake *f) { f->enqueued++; }             /* a launch that uses the live blocks */
static void finish(fake *f) { f->passed = f->enqueued; } /* the stream catches up */

/* ---- walking the pool ------------------------------------------------------------ */

#define MAX_BLOCKS 65536
typedef struct {
    int seg;
    uintptr_t addr;
    size_t bytes;
    enum snn_pool_state state;
} seen_block;

typedef struct {
    seen_block b[MAX_BLOCKS];
    int n;
    size_t bytes[3]; /* by state */
} walk_result;

static void visit(void *arg, int seg, uintptr_t addr, size_t bytes, enum snn_pool_state state)
{
    walk_result *w = arg;
    if (w->n < MAX_BLOCKS)
        w->b[w->n++] = (seen_block){seg, addr, bytes, state};
    w->bytes[state] += bytes;
}

static walk_result *walk(snn_pool *p)
{
    static walk_result w;
    memset(w.bytes, 0, sizeof(w.bytes));
    w.n = 0;
    snn_pool_walk(p, visit, &w);
    return &w;
}

static snn_pool_stats stats(snn_pool *p)
{
    snn_pool_stats s;
    snn_pool_stats_get(p, &s);
    return s;
}

/* ---- reporting -------------------------------------------------------------------- */

static char why[512];
#define EXPECT(cond, ...)                                                                                    \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            snprintf(why, sizeof(why), __VA_ARGS__);                                                         \
            return 0;                                                                                        \
        }                                                                                                    \
    } while (0)

static char note[256];
static void run(const char *name, int (*test)(void))
{
    why[0] = note[0] = 0;
    if (test())
        printf("ok - pool: %s%s\n", name, note);
    else
        printf("not ok - pool: %s: %s\n", name, why);
}

/* The structure every pool must have: each segment tiled exactly by its
 * blocks, no two free blocks side by side, the byte counts of the blocks
 * equal to the statistics and to what the device handed out. */
static int check_structure(snn_pool *p, fake *f)
{
    walk_result *w = walk(p);
    snn_pool_stats s = stats(p);
    EXPECT(w->n < MAX_BLOCKS, "more than %d blocks", MAX_BLOCKS);
    int seg = -1;
    uintptr_t end = 0, seg_end = 0;
    for (int i = 0; i < w->n; i++) {
        const seen_block *b = &w->b[i];
        if (b->seg != seg) {
            EXPECT(seg < 0 || end == seg_end, "segment %d is not tiled to its end", seg);
            EXPECT(b->seg == seg + 1 && b->seg < f->segments, "segment %d out of order", b->seg);
            seg = b->seg;
            EXPECT(b->addr == f->seg[seg].base, "segment %d starts at %#lx, its block at %#lx", seg,
                   (unsigned long)f->seg[seg].base, (unsigned long)b->addr);
            seg_end = f->seg[seg].base + f->seg[seg].bytes;
        } else {
            EXPECT(b->addr == end, "a hole or overlap at %#lx in segment %d", (unsigned long)end, seg);
            EXPECT(!(b->state == SNN_POOL_FREE && w->b[i - 1].state == SNN_POOL_FREE),
                   "free neighbours at %#lx not coalesced", (unsigned long)b->addr);
        }
        EXPECT(b->addr % SNN_POOL_ALIGN == 0 && b->bytes % SNN_POOL_ALIGN == 0 && b->bytes > 0,
               "block %#lx+%zu not aligned", (unsigned long)b->addr, b->bytes);
        end = b->addr + b->bytes;
    }
    EXPECT(seg < 0 || end == seg_end, "the last segment is not tiled to its end");
    EXPECT(seg + 1 == f->segments, "%d segments walked, the device gave %d", seg + 1, f->segments);
    size_t total = w->bytes[0] + w->bytes[1] + w->bytes[2];
    EXPECT(total == s.reserved && s.reserved == f->held,
           "live %zu + free %zu + pending %zu = %zu, reserved %zu, the device holds %zu",
           w->bytes[SNN_POOL_LIVE], w->bytes[SNN_POOL_FREE], w->bytes[SNN_POOL_PENDING], total, s.reserved,
           f->held);
    EXPECT(w->bytes[SNN_POOL_LIVE] == s.in_use && w->bytes[SNN_POOL_FREE] == s.free &&
               w->bytes[SNN_POOL_PENDING] == s.pending,
           "the statistics (in use %zu, free %zu, pending %zu) disagree with the blocks", s.in_use, s.free,
           s.pending);
    EXPECT(f->misuse == 0, "the pool misused the device (%ld bad calls)", f->misuse);
    return 1;
}

/* Everything freed and passed: one free block per segment; then destroyed,
 * the device holds nothing and every event is released. */
static int check_teardown(snn_pool *p, fake *f)
{
    finish(f);
    snn_pool_reclaim(p);
    if (!check_structure(p, f))
        return 0;
    walk_result *w = walk(p);
    snn_pool_stats s = stats(p);
    EXPECT(s.in_use == 0 && s.pending == 0 && s.free == s.reserved, "leak: %zu in use, %zu pending", s.in_use,
           s.pending);
    EXPECT(w->n == f->segments, "%d blocks over %d segments after freeing everything", w->n, f->segments);
    long segments = f->segments;
    snn_pool_destroy(p);
    EXPECT(f->held == 0 && f->raw_frees == segments, "after destroy the device holds %zu bytes (%ld frees)",
           f->held, f->raw_frees);
    EXPECT(f->released == f->events, "%ld events recorded, %ld released", f->events, f->released);
    EXPECT(f->misuse == 0, "the pool misused the device (%ld bad calls)", f->misuse);
    fake_free(f);
    return 1;
}

/* ---- cases ---------------------------------------------------------------------- */

static int test_size_classes(void)
{
    static const size_t cases[][2] = {
        {0, 256},
        {1, 256},
        {256, 256},
        {257, 512},
        {3840, 3840},
        {3841, 4096},
        {4096, 4096},
        {4097, 4608},
        {5000, 5120},
        {8192, 8192},
        {8193, 9216},
        {200704, 212992},
        {MIB, MIB},
        {MIB + 1, MIB + MIB / 8},
        {15 * MIB / 8 + 1, 2 * MIB},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        EXPECT(snn_pool_round(cases[i][0]) == cases[i][1], "round(%zu) = %zu, want %zu", cases[i][0],
               snn_pool_round(cases[i][0]), cases[i][1]);
    size_t prev = 0;
    int classes_in_octave = 0;
    for (size_t b = 1; b <= 3 * MIB; b += b < 65536 ? 1 : 97) {
        size_t r = snn_pool_round(b);
        EXPECT(r >= b && r % SNN_POOL_ALIGN == 0, "round(%zu) = %zu", b, r);
        EXPECT(r - b < SNN_POOL_ALIGN + b / 8, "round(%zu) = %zu wastes more than 1/8", b, r);
        EXPECT(r >= prev && snn_pool_round(r) == r, "round is not monotone or not idempotent at %zu", b);
        classes_in_octave += r != prev && r > 8192 && r <= 16384;
        prev = r;
    }
    EXPECT(classes_in_octave == 8, "%d classes in (8 KiB, 16 KiB], want 8", classes_in_octave);
    EXPECT(snn_pool_round((size_t)-1) == 0, "an impossible size has a class");

    fake *f = fake_new(0, 0);
    snn_pool *p = snn_pool_new(&backend, 64 * MIB, MIB);
    void *a = snn_pool_alloc(p, 5000);
    EXPECT(a && stats(p).in_use == 5120, "a 5000-byte request holds %zu bytes, want its class 5120",
           stats(p).in_use);
    EXPECT(!snn_pool_alloc(p, (size_t)-1) && strstr(snn_pool_error(p), "beyond any size class"),
           "an impossible request: '%s'", snn_pool_error(p));
    snn_pool_free(p, a);
    snprintf(note, sizeof(note), " (256-byte granules below 4 KiB, 8 classes per power of two above)");
    return check_teardown(p, f);
}

static int test_splitting(void)
{
    fake *f = fake_new(0, 0);
    snn_pool *p = snn_pool_new(&backend, 64 * MIB, MIB);
    char *a = snn_pool_alloc(p, 1000), *b = snn_pool_alloc(p, 3000);
    EXPECT((uintptr_t)a == FAKE_BASE, "the first block is not at the segment's start");
    EXPECT(b == a + 1024, "the second block is not cut from the remainder (at +%ld)", (long)(b - a));
    EXPECT(f->raw_allocs == 1 && stats(p).reserved == MIB, "%ld device calls, %zu reserved", f->raw_allocs,
           stats(p).reserved);
    walk_result *w = walk(p);
    EXPECT(w->n == 3 && w->b[2].state == SNN_POOL_FREE && w->b[2].bytes == MIB - 4096,
           "the segment is not live 1024, live 3072, free rest (%d blocks)", w->n);
    char *big = snn_pool_alloc(p, 3 * MIB);
    EXPECT(big && f->raw_allocs == 2 && f->seg[1].bytes == 3 * MIB,
           "a request above the segment size gets a segment of its own size");
    if (!check_structure(p, f))
        return 0;
    snn_pool_free(p, a);
    snn_pool_free(p, b);
    snn_pool_free(p, big);
    return check_teardown(p, f);
}

static int test_coalescing(void)
{
    fake *f = fake_new(0, 0);
    snn_pool *p = snn_pool_new(&backend, 64 * MIB, MIB);
    char *a = snn_pool_alloc(p, 64 * KIB), *b = snn_pool_alloc(p, 64 * KIB), *c = snn_pool_alloc(p, 64 * KIB);
    snn_pool_free(p, b);
    snn_pool_free(p, a);
    finish(f);
    snn_pool_reclaim(p);
    walk_result *w = walk(p);
    EXPECT(w->n == 3 && w->b[0].state == SNN_POOL_FREE && w->b[0].bytes == 128 * KIB,
           "freeing two neighbours does not leave one 128 KiB block (%d blocks, first %zu)", w->n,
           w->b[0].bytes);
    snn_pool_free(p, c);
    finish(f);
    snn_pool_reclaim(p);
    w = walk(p);
    EXPECT(w->n == 1 && w->b[0].bytes == MIB,
           "a free block between free neighbours does not merge with both");
    EXPECT(snn_pool_alloc(p, MIB) == a && f->raw_allocs == 1, "the merged segment is not reused whole");
    snn_pool_free(p, a);
    if (!check_teardown(p, f))
        return 0;

    /* Two segments the device happens to place side by side stay two. */
    f = fake_new(0, 0);
    p = snn_pool_new(&backend, 64 * MIB, MIB);
    char *x = snn_pool_alloc(p, MIB), *y = snn_pool_alloc(p, MIB);
    EXPECT(y == x + MIB, "the simulated device did not place the segments side by side");
    snn_pool_free(p, x);
    snn_pool_free(p, y);
    finish(f);
    snn_pool_reclaim(p);
    w = walk(p);
    EXPECT(w->n == 2 && w->b[0].seg == 0 && w->b[1].seg == 1, "free blocks merged across segments");
    char *z = snn_pool_alloc(p, 2 * MIB);
    EXPECT(z && f->raw_allocs == 3 && z != x, "a 2 MiB request is met from two adjacent 1 MiB segments");
    snn_pool_free(p, z);
    return check_teardown(p, f);
}

static int test_stream_order(void)
{
    fake *f = fake_new(0, 0);
    snn_pool *p = snn_pool_new(&backend, 64 * MIB, MIB);
    char *a = snn_pool_alloc(p, 4096);
    work(f);
    snn_pool_free(p, a);
    EXPECT(stats(p).pending == 4096, "a freed block is not pending");
    char *b = snn_pool_alloc(p, 4096);
    EXPECT(b && b != a, "a block is reused before the stream passed its free");
    work(f);
    snn_pool_free(p, b);
    f->passed = 1; /* past a's free, not b's */
    char *c = snn_pool_alloc(p, 4096);
    EXPECT(c == a, "a block the stream has passed is not reused (got +%ld)", (long)(c - a));
    EXPECT(stats(p).pending == 4096 && walk(p)->b[1].state == SNN_POOL_PENDING, "b is no longer pending");
    EXPECT(f->waits == 0 && stats(p).waits == 0, "the pool waited below its cap");
    snn_pool_free(p, c);
    return check_teardown(p, f);
}

static int test_cap(void)
{
    fake *f = fake_new(0, 0);
    snn_pool *p = snn_pool_new(&backend, 2 * MIB, MIB);
    char *x = snn_pool_alloc(p, MIB), *y = snn_pool_alloc(p, MIB);
    EXPECT(x && y && stats(p).reserved == 2 * MIB, "two segments under a 2 MiB cap");
    EXPECT(!snn_pool_alloc(p, MIB) && f->raw_allocs == 2, "the pool grew past its cap");
    EXPECT(strstr(snn_pool_error(p), "exceed the cap") && strstr(snn_pool_error(p), "2097152"),
           "the refusal does not name the cap: '%s'", snn_pool_error(p));
    work(f);
    snn_pool_free(p, x);
    char *z = snn_pool_alloc(p, MIB);
    EXPECT(z == x && stats(p).waits == 1 && f->waits == 1 && f->passed == 1,
           "at the cap the pool does not wait for the pending free and reuse it");
    EXPECT(!snn_pool_alloc(p, 3 * MIB) && strstr(snn_pool_error(p), "cap"), "a request above the cap");
    EXPECT(stats(p).waits == 1, "the pool waited with nothing pending");
    snn_pool_free(p, y);
    snn_pool_free(p, z);
    if (!check_teardown(p, f))
        return 0;

    /* The last segment is cut to the cap. */
    f = fake_new(0, 0);
    p = snn_pool_new(&backend, 3 * MIB / 2, MIB);
    x = snn_pool_alloc(p, MIB);
    y = snn_pool_alloc(p, 256 * KIB);
    EXPECT(y && f->segments == 2 && f->seg[1].bytes == MIB / 2, "the last segment is not cut to the cap");
    snn_pool_free(p, x);
    snn_pool_free(p, y);
    if (!check_teardown(p, f))
        return 0;

    /* A device out of memory below the cap: wait for a pending free, else a clear refusal. */
    f = fake_new(0, 3 * MIB / 2);
    p = snn_pool_new(&backend, 64 * MIB, MIB);
    x = snn_pool_alloc(p, MIB);
    EXPECT(!snn_pool_alloc(p, MIB) && strstr(snn_pool_error(p), "device refused"),
           "out of device memory: '%s'", snn_pool_error(p));
    work(f);
    snn_pool_free(p, x);
    y = snn_pool_alloc(p, MIB);
    EXPECT(y == x && f->waits == 1, "out of device memory, the pool does not wait for the pending free");
    snn_pool_free(p, y);
    snprintf(note, sizeof(note),
             " (growth refused past it, waits for the oldest pending free, clear refusals)");
    return check_teardown(p, f);
}

static int test_statistics(void)
{
    fake *f = fake_new(0, 0);
    snn_pool *p = snn_pool_new(&backend, 64 * MIB, MIB);
    void *a = snn_pool_alloc(p, 10000), *b = snn_pool_alloc(p, 20000);
    size_t peak = snn_pool_round(10000) + snn_pool_round(20000);
    snn_pool_free(p, a);
    finish(f);
    void *c = snn_pool_alloc(p, 5000), *d = snn_pool_alloc(p, 2 * MIB);
    peak = snn_pool_round(20000) + snn_pool_round(5000) + 2 * MIB > peak
               ? snn_pool_round(20000) + snn_pool_round(5000) + 2 * MIB
               : peak;
    snn_pool_free(p, b);
    snn_pool_free(p, c);
    snn_pool_free(p, d);
    snn_pool_stats s = stats(p);
    EXPECT(s.requests == 4 && s.releases == 4, "%ld requests, %ld releases", s.requests, s.releases);
    EXPECT(s.raw_allocs == 2 && s.raw_allocs == f->raw_allocs && s.segments == 2, "%ld device calls",
           s.raw_allocs);
    EXPECT(s.reserved == 3 * MIB && s.peak_reserved == 3 * MIB, "reserved %zu", s.reserved);
    EXPECT(s.peak_in_use == peak && s.in_use == 0, "peak in use %zu, want %zu", s.peak_in_use, peak);
    return check_teardown(p, f);
}

/* ---- the oracle ------------------------------------------------------------------ */

#define GRANULE SNN_POOL_ALIGN
#define SPAN (256 * MIB)

typedef struct {
    uintptr_t addr;
    size_t bytes;
} live_entry;

typedef struct {
    int *owner;      /* per granule of the simulated space: the live allocation's id + 1, or 0 */
    uint64_t *fence; /* per granule: the stream position of its last free */
    live_entry *live;
    int nlive;
} oracle;

static int own(oracle *o, fake *f, uintptr_t addr, size_t bytes, int id)
{
    EXPECT(addr >= FAKE_BASE && addr + bytes <= FAKE_BASE + SPAN, "%#lx is outside the simulated device",
           (unsigned long)addr);
    for (size_t g = (addr - FAKE_BASE) / GRANULE; g < (addr + bytes - FAKE_BASE + GRANULE - 1) / GRANULE;
         g++) {
        EXPECT(!o->owner[g], "allocation %d overlaps live allocation %d at %#lx", id, o->owner[g] - 1,
               (unsigned long)(FAKE_BASE + g * GRANULE));
        EXPECT(o->fence[g] <= f->passed,
               "%#lx reused before the stream passed its free (at %llu, passed %llu)",
               (unsigned long)(FAKE_BASE + g * GRANULE), (unsigned long long)o->fence[g],
               (unsigned long long)f->passed);
        o->owner[g] = id + 1;
    }
    return 1;
}

static void disown(oracle *o, fake *f, uintptr_t addr, size_t bytes)
{
    for (size_t g = (addr - FAKE_BASE) / GRANULE; g < (addr + bytes - FAKE_BASE + GRANULE - 1) / GRANULE;
         g++) {
        o->owner[g] = 0;
        o->fence[g] = f->enqueued;
    }
}

/* Every live block of the pool is one of the oracle's, of its size class. */
static int check_live(snn_pool *p, const oracle *o)
{
    walk_result *w = walk(p);
    int n = 0;
    for (int i = 0; i < w->n; i++) {
        if (w->b[i].state != SNN_POOL_LIVE)
            continue;
        n++;
        size_t g = (w->b[i].addr - FAKE_BASE) / GRANULE;
        int id = o->owner[g] - 1;
        EXPECT(id >= 0 && o->live[id].addr == w->b[i].addr &&
                   snn_pool_round(o->live[id].bytes) == w->b[i].bytes,
               "the live block %#lx+%zu is not a live allocation of its class", (unsigned long)w->b[i].addr,
               w->b[i].bytes);
    }
    EXPECT(n == o->nlive, "%d live blocks, %d live allocations", n, o->nlive);
    return 1;
}

/* After a refusal: nothing pending, no free block large enough, no room under the cap. */
static int check_refusal(snn_pool *p, size_t bytes, size_t cap)
{
    walk_result *w = walk(p);
    snn_pool_stats s = stats(p);
    size_t size = snn_pool_round(bytes);
    EXPECT(s.pending == 0, "refused %zu bytes with %zu pending", bytes, s.pending);
    for (int i = 0; i < w->n; i++)
        EXPECT(w->b[i].state != SNN_POOL_FREE || w->b[i].bytes < size,
               "refused %zu bytes with a free %zu-byte block", bytes, w->b[i].bytes);
    EXPECT(s.reserved + size > cap, "refused %zu bytes with room under the cap", bytes);
    return 1;
}

static int randomized(uint64_t seed, size_t gap, int ops, long *waits, long *refusals, int *segments)
{
    const size_t cap = 24 * MIB;
    fake *f = fake_new(gap, 0);
    snn_pool *p = snn_pool_new(&backend, cap, MIB);
    oracle o = {calloc(SPAN / GRANULE, sizeof(int)), calloc(SPAN / GRANULE, sizeof(uint64_t)),
                malloc(ops * sizeof(live_entry)), 0};
    int *ids = malloc(ops * sizeof(int)), nids = 0; /* the ids of the live allocations */
    if (!o.owner || !o.fence || !o.live || !ids)
        snn_die("out of memory for the oracle");
    snn_rng rng;
    snn_rng_seed(&rng, seed);
    size_t peak = 0;
    for (int op = 0; op < ops; op++) {
        uint32_t r = snn_rng_below(&rng, 100);
        int freeing = stats(p).in_use > cap / 2 ? r < 55 : r < 35;
        if (freeing && nids) {
            int k = (int)snn_rng_below(&rng, (uint32_t)nids), id = ids[k];
            ids[k] = ids[--nids];
            disown(&o, f, o.live[id].addr, snn_pool_round(o.live[id].bytes));
            snn_pool_free(p, (void *)o.live[id].addr);
            o.live[id].addr = 0;
            o.nlive--;
        } else if (r < 80) {
            /* log-uniform from 1 byte to 512 KiB, now and then up to 4 MiB */
            int bits = 1 + (int)snn_rng_below(&rng, snn_rng_below(&rng, 50) ? 19 : 22);
            size_t bytes = ((size_t)1 << (bits - 1)) + snn_rng_below(&rng, 1u << (bits - 1));
            void *ptr = snn_pool_alloc(p, bytes);
            if (!ptr) {
                ++*refusals;
                if (!check_refusal(p, bytes, cap))
                    return 0;
            } else {
                EXPECT((uintptr_t)ptr % SNN_POOL_ALIGN == 0, "%p is not aligned", ptr);
                if (!own(&o, f, (uintptr_t)ptr, snn_pool_round(bytes), op))
                    return 0;
                o.live[op] = (live_entry){(uintptr_t)ptr, bytes};
                o.nlive++;
                ids[nids++] = op;
                peak = stats(p).in_use > peak ? stats(p).in_use : peak;
            }
        } else if (r < 92) {
            f->enqueued += 1 + snn_rng_below(&rng, 3);
        } else {
            f->passed += snn_rng_below(&rng, (uint32_t)(f->enqueued - f->passed) + 1);
        }
        if (!check_structure(p, f) || !check_live(p, &o))
            return 0;
    }
    EXPECT(stats(p).peak_in_use == peak, "peak in use %zu, the oracle saw %zu", stats(p).peak_in_use, peak);
    *waits += stats(p).waits;
    *segments += f->segments;
    while (nids) {
        int id = ids[--nids];
        snn_pool_free(p, (void *)o.live[id].addr);
    }
    free(o.owner);
    free(o.fence);
    free(o.live);
    free(ids);
    return check_teardown(p, f);
}

static int test_randomized(void)
{
    const int ops = 20000;
    long waits = 0, refusals = 0;
    int segments = 0;
    if (!randomized(1, 0, ops, &waits, &refusals, &segments) ||
        !randomized(2, 64 * KIB, ops, &waits, &refusals, &segments) ||
        !randomized(3, 0, ops, &waits, &refusals, &segments))
        return 0;
    EXPECT(waits > 0, "the sequences never reached the cap with a free pending: the test does not test it");
    snprintf(note, sizeof(note),
             " (3 x %d random operations: no overlap, no reuse before the stream, every byte accounted for, "
             "no leak; %ld waits at the cap, %ld refusals, %d segments)",
             ops, waits, refusals, segments);
    return 1;
}

int main(void)
{
    run("size classes (rounding)", test_size_classes);
    run("splitting: a block is cut from a segment, the remainder reused", test_splitting);
    run("coalescing: free neighbours merge, never across segments", test_coalescing);
    run("stream-ordered reuse: not before the stream passed the free, then reused", test_stream_order);
    run("the cap on reserved bytes", test_cap);
    run("statistics: requests, device calls, reserved, peak in use", test_statistics);
    run("randomized alloc/free against an oracle", test_randomized);
    return 0;
}
