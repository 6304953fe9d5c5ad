/* The pool backend (arch/runtime.h) on a CUDA GPU: segments from cudaMalloc, and
 * events recorded on the engine's stream. Every free records one, so events
 * are kept for reuse rather than created and destroyed each time. */
#include <stdlib.h>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "arch/runtime.h"
#include "snn_check.h"

static cudaEvent_t *g_idle; /* created, not in use */
static size_t g_idle_count, g_idle_cap;

static void *cuda_raw_alloc(void *, size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* the pool reports the refusal itself, and may wait and retry */
        return NULL;
    }
    CUDA_CHECK(e);
    return p;
}

static void cuda_raw_free(void *, void *p) { CUDA_CHECK(cudaFree(p)); }

static void *cuda_event_record(void *)
{
    cudaEvent_t ev;
    if (g_idle_count)
        ev = g_idle[--g_idle_count];
    else
        CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ev, snn_stream()));
    return ev;
}

static bool cuda_event_done(void *, void *event)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady)
        return false;
    CUDA_CHECK(e);
    return true;
}

static void cuda_event_wait(void *, void *event) { CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event)); }

static void cuda_event_release(void *, void *event)
{
    if (g_idle_count == g_idle_cap) {
        size_t cap = g_idle_cap ? 2 * g_idle_cap : 64;
        cudaEvent_t *grown = (cudaEvent_t *)realloc(g_idle, cap * sizeof(*grown));
        if (!grown)
            snn_die("out of host memory keeping %zu CUDA events for the memory pool", cap);
        g_idle = grown;
        g_idle_cap = cap;
    }
    g_idle[g_idle_count++] = (cudaEvent_t)event;
}

static const snn_pool_backend cuda_backend = {
    NULL,
    cuda_raw_alloc,
    cuda_raw_free,
    cuda_event_record,
    cuda_event_done,
    cuda_event_wait,
    cuda_event_release,
};

const struct snn_pool_backend *snn_rt_pool_backend(void) { return &cuda_backend; }

void snn_rt_pool_backend_close(void)
{
    while (g_idle_count)
        CUDA_CHECK(cudaEventDestroy(g_idle[--g_idle_count]));
    free(g_idle);
    g_idle = NULL;
    g_idle_cap = 0;
}
