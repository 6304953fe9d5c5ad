/* The pool backend (arch/runtime.h) on the host target: segments from the C heap,
 * and a "stream" that has always passed every event, since a host step has
 * finished when it returns. */
#include <stdlib.h>

#include "arch/runtime.h"

static void *host_raw_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return aligned_alloc(SNN_RT_ALIGN, (bytes + SNN_RT_ALIGN - 1) / SNN_RT_ALIGN * SNN_RT_ALIGN);
}

static void host_raw_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void *host_event_record(void *ctx) { return ctx; }

static bool host_event_done(void *ctx, void *event)
{
    (void)ctx, (void)event;
    return true;
}

static void host_event_nothing(void *ctx, void *event) { (void)ctx, (void)event; }

static const snn_pool_backend host_backend = {
    .ctx = NULL,
    .raw_alloc = host_raw_alloc,
    .raw_free = host_raw_free,
    .event_record = host_event_record,
    .event_done = host_event_done,
    .event_wait = host_event_nothing,
    .event_release = host_event_nothing,
};

const struct snn_pool_backend *snn_rt_pool_backend(void) { return &host_backend; }
void snn_rt_pool_backend_close(void) {}
