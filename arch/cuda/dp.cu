/* Data parallelism's collectives over NCCL (arch/cuda/dp.h). Each bucket of gradients is all-reduced on a
 * stream of its own, forked from the engine's stream by an event when the bucket is written, and updated on
 * a third once its all-reduce is done and the layer's input gradient has read the weights: the engine's
 * stream computes the next bucket's gradients and the input gradient meanwhile, and joins both streams at
 * the end of the step (docs/PERF.md v35, v44). The persistent GEMMs can leave NCCL SMs of its own
 * (DP_COMM_SMS). The forks and joins are events, so a captured step holds them as graph edges. Every NCCL and
 * CUDA call is checked. */
#include <stdio.h> /* printf, remove */
#include <stdlib.h> /* realloc, free */
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "arch/cuda/check.h"
#include "arch/cuda/dp.h"
#include "arch/cuda/stream.h"
#include "arch/runtime.h"
#include "snn_config.h"

#define NCCL_CHECK(call) nccl_check((call), #call, __FILE__, __LINE__)

static ncclComm_t g_comm;
static cudaStream_t g_comm_stream, g_update_stream;
static cudaEvent_t g_ready, g_read, g_done; /* the forks to the communication and update streams, the join */
static cudaEvent_t *g_reduced;              /* a bucket's all-reduce done, one a bucket of a step */
static int g_reduced_count;                 /* events made: the most buckets a step has sent */
static float *g_figures;
#ifdef CONFIG_DP_REDUCE_BF16
static __nv_bfloat16 *g_grads16; /* the BF16 gradients sent */
#else
static float *g_grads; /* the FP32 gradients sent */
#endif
static int g_sent, g_updated; /* buckets all-reduced, and updated, since the last join */

static void nccl_check(ncclResult_t r, const char *call, const char *file, int line)
{
    if (r == ncclSuccess || r == ncclInProgress)
        return;
    const char *last = g_comm ? ncclGetLastError(g_comm) : NULL;
    snn_die_at(file, line, "%s failed: %s%s%s\n  hint: NCCL_DEBUG=WARN says more (NCCL_DEBUG_FILE=nccl.%%h.%%p keeps "
               "the ranks' apart: the others' standard output is discarded); each rank needs a GPU of its "
               "own and a path to the others", call, ncclGetErrorString(r), last && *last ? ": " : "",
               last ? last : "");
}

void snn_dp_start(const snn_dp_place *p, const char *rendezvous)
{
    ncclUniqueId id;
    char err[512];
    if (snn_dp_nccl_env(err, sizeof(err)) && p->rank == 0)
        printf("note: %s\n", err);
    if (!rendezvous || !*rendezvous)
        snn_die("rank %d of %d (started by %s): name the rendezvous file in SNN_DP_RENDEZVOUS, a path every "
                "rank can read and none has written (on a shared filesystem across hosts)",
                p->rank, p->world, p->launcher);
    if (p->rank == 0) {
        NCCL_CHECK(ncclGetUniqueId(&id));
        if (snn_dp_rendezvous_write(rendezvous, &id, sizeof(id), err, sizeof(err)))
            snn_die("%s", err);
    } else if (snn_dp_rendezvous_read(rendezvous, &id, sizeof(id), 120.0, err, sizeof(err))) {
        snn_die("%s", err);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (SNN_DP_COMM_SMS > 0)
        config.maxCTAs = SNN_DP_COMM_SMS; /* the SMs the persistent GEMMs leave free */
    NCCL_CHECK(ncclCommInitRankConfig(&g_comm, p->world, id, p->rank, &config));
    if (p->rank == 0 && strcmp(p->launcher, "alone") != 0)
        remove(rendezvous); /* every rank has joined: the id is spent */
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_comm_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_update_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&g_ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g_read, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g_done, cudaEventDisableTiming));
}

void snn_dp_stop(void)
{
    if (!g_comm)
        return;
    snn_rt_release_steps(); /* a graph holding NCCL's work keeps the communicator from being destroyed */
    CUDA_CHECK(cudaDeviceSynchronize());
    NCCL_CHECK(ncclCommFinalize(g_comm)); /* every rank's work flushed, the ranks in step */
    NCCL_CHECK(ncclCommDestroy(g_comm));
    g_comm = NULL;
    CUDA_CHECK(cudaEventDestroy(g_ready));
    CUDA_CHECK(cudaEventDestroy(g_read));
    for (int i = 0; i < g_reduced_count; i++)
        CUDA_CHECK(cudaEventDestroy(g_reduced[i]));
    free(g_reduced);
    g_reduced = NULL;
    g_reduced_count = 0;
    CUDA_CHECK(cudaEventDestroy(g_done));
    CUDA_CHECK(cudaStreamDestroy(g_comm_stream));
    CUDA_CHECK(cudaStreamDestroy(g_update_stream));
}

void snn_dp_bind(float *grads, uint16_t *grads_bf16, float *figures)
{
#ifdef CONFIG_DP_REDUCE_BF16
    (void)grads; /* the biases' FP32 sums: snn_dp_reduce is handed them */
    g_grads16 = (__nv_bfloat16 *)grads_bf16;
#else
    g_grads = grads;
    (void)grads_bf16;
#endif
    g_figures = figures;
}

#ifdef CONFIG_DP_REDUCE_BF16
__global__ void to_bf16_kernel(__nv_bfloat16 *dst, const float *src, long n)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

/* Up to 1024 blocks: fewer leave the copy bound by each thread's load latency (docs/PERF.md v30). */
static unsigned convert_blocks(long n)
{
    long b = (n + 255) / 256;
    return (unsigned)(b < 1024 ? b : 1024);
}
#endif

void snn_dp_reduce(long offset, long count, const float *fp32, long n_fp32)
{
    if (!g_comm)
        snn_die("internal error: a data-parallel step without a communicator (only ./app/mnist's training "
                "starts one: a test or tool cannot run a data-parallel build's step)");
    CUDA_CHECK(cudaEventRecord(g_ready, snn_stream()));
    CUDA_CHECK(cudaStreamWaitEvent(g_comm_stream, g_ready, 0));
#ifdef CONFIG_DP_REDUCE_BF16
    __nv_bfloat16 *sent = g_grads16 + offset;
    if (n_fp32 > 0) { /* the biases copied */
        to_bf16_kernel<<<convert_blocks(n_fp32), 256, 0, g_comm_stream>>>(sent + count - n_fp32, fp32,
                                                                          n_fp32);
        CUDA_CHECK_LAUNCH();
    }
    NCCL_CHECK(ncclAllReduce(sent, sent, (size_t)count, ncclBfloat16, ncclSum, g_comm, g_comm_stream));
#else
    (void)fp32, (void)n_fp32;
    float *g = g_grads + offset;
    NCCL_CHECK(ncclAllReduce(g, g, (size_t)count, ncclFloat32, ncclSum, g_comm, g_comm_stream));
#endif
    if (g_sent == g_reduced_count) { /* the first step makes them; the captured ones reuse them */
        cudaEvent_t *more = (cudaEvent_t *)realloc(g_reduced, (size_t)(g_sent + 1) * sizeof(*more));
        SNN_CHECK_SYS(more, "allocating the buckets' events");
        g_reduced = more;
        CUDA_CHECK(cudaEventCreateWithFlags(&g_reduced[g_reduced_count++], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventRecord(g_reduced[g_sent++], g_comm_stream));
}

void snn_dp_weights_read(void)
{
    CUDA_CHECK(cudaEventRecord(g_read, snn_stream()));
    CUDA_CHECK(cudaStreamWaitEvent(g_update_stream, g_read, 0));
}

void snn_dp_update_begin(void)
{
    if (g_updated == g_sent)
        snn_die("internal error: a data-parallel update of a bucket not all-reduced (%d sent)", g_sent);
    CUDA_CHECK(cudaStreamWaitEvent(g_update_stream, g_reduced[g_updated++], 0));
    snn_stream_redirect(g_update_stream);
}

void snn_dp_update_end(void)
{
    snn_stream_redirect(0);
}

void snn_dp_join(void)
{
    if (!g_sent)
        return;
    if (g_updated != g_sent)
        snn_die("internal error: %d of %d all-reduced buckets updated at the step's end", g_updated, g_sent);
    CUDA_CHECK(cudaEventRecord(g_done, g_comm_stream));
    CUDA_CHECK(cudaStreamWaitEvent(snn_stream(), g_done, 0));
    CUDA_CHECK(cudaEventRecord(g_done, g_update_stream));
    CUDA_CHECK(cudaStreamWaitEvent(snn_stream(), g_done, 0));
    g_sent = g_updated = 0;
}

/* Through the bound scratch of the figures, on the engine's stream. */
void snn_dp_sum_figures(float *losses, int32_t *correct, int n)
{
    if (n <= 0)
        return;
    if (n > SNN_DP_FIGURES)
        snn_die("internal error: %d figures to sum, the scratch holds %d", n, SNN_DP_FIGURES);
    const size_t fb = (size_t)n * sizeof(float), ib = (size_t)n * sizeof(int32_t);
    float *df = g_figures;
    int32_t *di = (int32_t *)(g_figures + SNN_DP_FIGURES);
    CUDA_CHECK(cudaMemcpyAsync(df, losses, fb, cudaMemcpyHostToDevice, snn_stream()));
    CUDA_CHECK(cudaMemcpyAsync(di, correct, ib, cudaMemcpyHostToDevice, snn_stream()));
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllReduce(df, df, (size_t)n, ncclFloat32, ncclSum, g_comm, snn_stream()));
    NCCL_CHECK(ncclAllReduce(di, di, (size_t)n, ncclInt32, ncclSum, g_comm, snn_stream()));
    NCCL_CHECK(ncclGroupEnd());
    CUDA_CHECK(cudaMemcpyAsync(losses, df, fb, cudaMemcpyDeviceToHost, snn_stream()));
    CUDA_CHECK(cudaMemcpyAsync(correct, di, ib, cudaMemcpyDeviceToHost, snn_stream()));
    CUDA_CHECK(cudaStreamSynchronize(snn_stream()));
}

int snn_dp_any(int flag)
{
    float f = flag ? 1.0f : 0.0f;
    int32_t unused = 0;
    snn_dp_sum_figures(&f, &unused, 1);
    return f > 0.0f;
}
