/* The CUDA_ASYNC strategy's device side: cudaMallocAsync and cudaFreeAsync on
 * the engine's stream, from the device's default memory pool, which keeps
 * what it reserves (release threshold UINT64_MAX) instead of returning it at
 * every synchronisation. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "arch/runtime.h"
#include "snn_check.h"

/* The pool attributes used here are 64-bit values (cuuint64_t in the driver API). */
static cudaMemPool_t g_pool;

void snn_rt_async_init(void)
{
    int dev = 0, supported = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev));
    if (!supported)
        snn_die(
            "GPU %d (or its driver) has no stream-ordered allocator (cudaMallocAsync): choose another memory "
            "strategy, CONFIG_MM_POOL or CONFIG_MM_STATIC (make menuconfig)",
            dev);
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&g_pool, dev));
    uint64_t threshold = UINT64_MAX, zero = 0;
    CUDA_CHECK(cudaMemPoolSetAttribute(g_pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    /* The high-water marks count from here. */
    CUDA_CHECK(cudaMemPoolSetAttribute(g_pool, cudaMemPoolAttrReservedMemHigh, &zero));
    CUDA_CHECK(cudaMemPoolSetAttribute(g_pool, cudaMemPoolAttrUsedMemHigh, &zero));
}

void *snn_rt_async_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaMallocAsync(&p, bytes, snn_stream()));
    return p;
}

void snn_rt_async_free(void *p) { CUDA_CHECK(cudaFreeAsync(p, snn_stream())); }

void snn_rt_async_usage(size_t *reserved, size_t *used)
{
    uint64_t r = 0, u = 0;
    CUDA_CHECK(cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrReservedMemHigh, &r));
    CUDA_CHECK(cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrUsedMemHigh, &u));
    *reserved = (size_t)r;
    *used = (size_t)u;
}

void snn_rt_async_close(void)
{
    CUDA_CHECK(cudaStreamSynchronize(snn_stream()));
    CUDA_CHECK(cudaMemPoolTrimTo(g_pool, 0));
}
