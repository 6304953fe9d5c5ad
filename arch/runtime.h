/* The runtime of the configured target: device selection and checks, device
 * memory (plain, raw with stream events, stream-ordered), copies, the step
 * replay, timing. arch/host/ implements it on the CPU, arch/cuda/ on a CUDA
 * GPU. */
#ifndef SNN_RUNTIME_H
#define SNN_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[256];      /* "NVIDIA H100 80GB HBM3", or the CPU's model name */
    int cc;              /* compute capability x10 (90); 0 on the host */
    int units;           /* multiprocessors, or host threads */
    size_t free_bytes;   /* memory free before the plan's allocation */
    size_t total_bytes;
} snn_device_info;

/* 1 when a CUDA GPU is there to run on (0 on the host target): GPU tests skip without one. */
int snn_rt_gpu_present(void);

/* Picks the device and checks it can run this build and hold plan_bytes; on
 * failure prints one message (what, and what to do) and exits non-zero. */
void snn_rt_init(snn_device_info *info, size_t plan_bytes);
void *snn_rt_alloc(size_t bytes);                 /* the one allocation (checked) */
void snn_rt_free(void *p);
void snn_rt_upload(void *dst, const void *src, size_t bytes);   /* host -> device */
void snn_rt_download(void *dst, const void *src, size_t bytes); /* device -> host, synchronous */
void snn_rt_sync(void);

/* Runs step(ctx) once. With CONFIG_CUDA_GRAPH the first call runs it directly
 * (loading its kernels outside any capture), the second captures it into a
 * graph as it runs, later calls replay that graph (every call, where
 * snn_rt_prepare_step captured it first): step must read everything that
 * changes between calls from device memory. */
void snn_rt_run_step(void (*step)(void *ctx), void *ctx);
/* Captures step(ctx) as its graph without running it, where that is safe (one process, a driver of CUDA
 * 12.3 or later, no SNN_SYNC_CHECK), so that its first snn_rt_run_step replays: the kernels' loading and the
 * capture happen before a run's clock starts, as PyTorch's warm-up and capture do. Elsewhere nothing. */
void snn_rt_prepare_step(void (*step)(void *ctx), void *ctx);
/* Destroys the steps' graphs (the next call of each runs it anew): before what they hold goes, as NCCL's
 * communicator, which waits for the graphs that use it. */
void snn_rt_release_steps(void);

/* The device's raw memory and the events of the engine's stream, as a
 * caching allocator (mm/pool.h) drives them. The events complete in the
 * order they were recorded; on the host, where every step has finished when
 * it returns, they are always complete. */
#define SNN_RT_ALIGN 256 /* raw_alloc's alignment */
typedef struct snn_pool_backend {
    void *ctx;                                     /* passed to every call */
    void *(*raw_alloc)(void *ctx, size_t bytes);   /* SNN_RT_ALIGN-aligned, or NULL when out of memory */
    void (*raw_free)(void *ctx, void *p);
    void *(*event_record)(void *ctx);              /* marks everything enqueued so far */
    bool (*event_done)(void *ctx, void *event);    /* has the stream passed it? (never blocks) */
    void (*event_wait)(void *ctx, void *event);    /* blocks until it has */
    void (*event_release)(void *ctx, void *event); /* the allocator is done with it */
} snn_pool_backend;
const snn_pool_backend *snn_rt_pool_backend(void);
/* Returns what the backend keeps (cached events). */
void snn_rt_pool_backend_close(void);

/* Stream-ordered allocation (CUDA targets only): cudaMallocAsync / cudaFreeAsync
 * on the engine's stream, from the device's default memory pool with its
 * release threshold raised to UINT64_MAX; usage: the pool's high-water marks
 * of reserved and used bytes. All checked. */
void snn_rt_async_init(void);
void *snn_rt_async_alloc(size_t bytes);
void snn_rt_async_free(void *p);
void snn_rt_async_usage(size_t *reserved, size_t *used);
void snn_rt_async_close(void);

/* Elapsed milliseconds between two marks on the device's timeline. */
typedef struct snn_mark snn_mark;
snn_mark *snn_rt_mark_new(void);
void snn_rt_mark(snn_mark *m);
float snn_rt_elapsed_ms(snn_mark *from, snn_mark *to); /* waits for `to` */
void snn_rt_mark_free(snn_mark *m);

#ifdef __cplusplus
}
#endif
#endif
