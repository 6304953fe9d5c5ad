/* The CUDA runtime of the engine (arch/runtime.h): device selection and
 * checks, the one allocation, copies and launches on one stream (data
 * parallelism's update redirected to its own, arch/cuda/dp.cu), the
 * captured step, timing marks. Every CUDA call is checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "arch/cuda/beside.h"
#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "arch/cuda/target.h"
#include "arch/dp.h"
#include "arch/runtime.h"
#include "snn_check.h"
#include "snn_config.h"

/* Distinct (step, ctx) pairs snn_rt_run_step can hold as graphs: the train
 * step and the eval step, with room to spare. */
#define SNN_RT_GRAPHS 4

static cudaStream_t g_stream;
static cudaStream_t g_redirect; /* where launches go instead, while data parallelism's update sets it */
static int g_device = -1;
static int g_driver; /* the driver's CUDA version, 12030 for 12.3 */

cudaStream_t snn_stream(void)
{
    return g_redirect ? g_redirect : g_stream;
}

void snn_stream_redirect(cudaStream_t s)
{
    g_redirect = s;
}

void snn_cuda_sync_check(const char *file, int line)
{
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(snn_stream(), &st); /* the stream the launch went on */
    if (e == cudaSuccess && st == cudaStreamCaptureStatusNone)
        e = cudaStreamSynchronize(snn_stream());
    if (e != cudaSuccess)
        snn_die_at(file, line, "kernel failed (found by the SNN_SYNC_CHECK synchronisation after its launch): %s (%s)\n  hint: %s",
                   cudaGetErrorString(e), cudaGetErrorName(e), snn_cuda_hint(e));
}

/* A trivial kernel: whether it loads tells if this build has code the GPU can run. */
__global__ void snn_rt_probe_kernel(void) {}

static double mib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

static int pick_device(int count)
{
    const char *env = getenv("SNN_DEVICE");
    const snn_dp_place *dp = snn_dp_self();
    if (dp->world > 1) { /* a data-parallel rank: the GPU of its rank on its host */
        if (env && *env)
            snn_die("SNN_DEVICE=%s: each data-parallel rank takes the GPU of its rank on its host; choose the "
                    "GPUs with CUDA_VISIBLE_DEVICES instead", env);
        if (dp->local_rank < count)
            return dp->local_rank;
        if (count == 1 && strcmp(dp->launcher, "alone") != 0) /* the launcher gave each process one GPU */
            return 0;
        snn_die("rank %d is rank %d on its host, which shows %d GPUs: start at most %d ranks a host, or give each "
                "one GPU (CUDA_VISIBLE_DEVICES, srun --gpus-per-task=1)", dp->rank, dp->local_rank, count, count);
    }
    if (!env || !*env)
        return 0;
    char *end = NULL;
    long d = strtol(env, &end, 10);
    if (*end != '\0' || d < 0 || d >= count)
        snn_die("SNN_DEVICE=%s is not a device index: this machine has %d CUDA GPU%s (0..%d)", env, count,
                count == 1 ? "" : "s", count - 1);
    return (int)d;
}

int snn_rt_gpu_present(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count > 0;
}

void snn_rt_init(snn_device_info *info, size_t plan_bytes)
{
    int count = 0, driver = 0, runtime = 0;
    /* Reports 0, not an error, where no driver is installed (the runtime's own
     * message would blame the driver's version). */
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    g_driver = driver;
    if (driver == 0)
        snn_die("no NVIDIA driver found (no libcuda): this build targets %s and needs an NVIDIA GPU; on this "
                "machine build the host target: make host_defconfig && make", SNN_TARGET_NAME);
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0))
        snn_die("the NVIDIA driver finds no GPU: this build targets %s; on this machine build the host target: "
                "make host_defconfig && make", SNN_TARGET_NAME);
    if (e == cudaErrorInsufficientDriver)
        snn_die("the NVIDIA driver (CUDA %d.%d) is older than this build's CUDA runtime (%d.%d): update the "
                "driver, or build the host target: make host_defconfig && make",
                driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    CUDA_CHECK(e);

    int dev = pick_device(count);
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    int cc = prop.major * 10 + prop.minor;
    if (cc < SNN_TARGET_CC)
        snn_die("GPU %d (%s) has compute capability %d.%d, older than this build's target %s (%d.%d): "
                "build for this card (make help lists the boards) or the host target (make host_defconfig)",
                dev, prop.name, prop.major, prop.minor, SNN_TARGET_NAME, SNN_TARGET_CC / 10, SNN_TARGET_CC % 10);
#if defined(CONFIG_TARGET_SM90)
    /* sm_90a code (wgmma, TMA) runs on compute capability 9.0 only. */
    if (cc != 90)
        snn_die("GPU %d (%s) has compute capability %d.%d: this build's target %s is built as sm_90a, which "
                "runs on compute capability 9.0 only: build for this card (make help lists the boards)",
                dev, prop.name, prop.major, prop.minor, SNN_TARGET_NAME);
#endif
    CUDA_CHECK(cudaSetDevice(dev));
    g_device = dev;

    /* Can the GPU (and its driver) load this build's code at all? */
    cudaFuncAttributes fa;
    e = cudaFuncGetAttributes(&fa, snn_rt_probe_kernel);
    if (e != cudaSuccess)
        snn_die("GPU %d (%s, compute capability %d.%d) cannot load this build's code (%s path, "
                "CONFIG_CUDA_ARCH_OVERRIDE=%d): %s (%s)\n  hint: %s",
                dev, prop.name, prop.major, prop.minor, SNN_TARGET_NAME, CONFIG_CUDA_ARCH_OVERRIDE,
                cudaGetErrorString(e), cudaGetErrorName(e), snn_cuda_hint(e));

    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (free_b < plan_bytes)
        snn_die("GPU %d (%s) has %.1f MiB free of %.1f MiB; this build's memory plan needs %.1f MiB (%zu bytes): "
                "free the GPU or lower CONFIG_TRAIN_BATCH_SIZE, CONFIG_EVAL_BATCH_SIZE or the hidden widths "
                "(CONFIG_NN_HIDDEN_WIDTH, _WIDTH_k)",
                dev, prop.name, mib(free_b), mib(total_b), mib(plan_bytes), plan_bytes);

    if (!g_stream)
        CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
#ifdef CONFIG_STEP_BESIDE
    snn_beside_init(prop.multiProcessorCount);
#endif

    if (info) {
        memset(info, 0, sizeof *info);
        snprintf(info->name, sizeof info->name, "%s", prop.name);
        info->cc = cc;
        info->units = prop.multiProcessorCount;
        info->free_bytes = free_b;
        info->total_bytes = total_b;
    }
}

void *snn_rt_alloc(size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        (void)cudaGetLastError();
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
            free_b = total_b = 0;
        snn_die_at(__FILE__, __LINE__,
                   "cudaMalloc of %.1f MiB (%zu bytes) failed on GPU %d: %s (%s); %.1f MiB free of %.1f MiB\n"
                   "  hint: %s",
                   mib(bytes), bytes, g_device, cudaGetErrorString(e), cudaGetErrorName(e), mib(free_b),
                   mib(total_b), snn_cuda_hint(e));
    }
    return p;
}

void snn_rt_free(void *p)
{
    if (p)
        CUDA_CHECK(cudaFree(p));
}

/* Copies go on the stream launches go on (snn_stream()): a test's check inside a weight step on the second
 * stream (STEP_BESIDE) reads what that step wrote. */
void snn_rt_upload(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, snn_stream()));
}

void snn_rt_download(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, snn_stream()));
    CUDA_CHECK(cudaStreamSynchronize(snn_stream()));
}

void snn_rt_sync(void)
{
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}

/* ---- the step ---------------------------------------------------------------
 * With CONFIG_CUDA_GRAPH, each distinct (step, ctx) runs eagerly on its first
 * call (a warm-up: the first use of every kernel loads its module and sets its
 * shared-memory attribute outside any capture), is captured into a graph on
 * its second call and replayed from then on. Every call runs the step once.
 * snn_rt_prepare_step captures it at once, without running it, where that is
 * safe: its kernels then load inside the capture, which drivers before CUDA
 * 12.3 refuse, and NCCL connects on its first collective, outside any. Not
 * under SNN_SYNC_CHECK, whose check after each launch wants a run to check. */

#ifdef CONFIG_CUDA_GRAPH
typedef struct {
    void (*step)(void *ctx);
    void *ctx;
    int calls;
    cudaGraphExec_t exec;
} snn_rt_graph;

static snn_rt_graph g_graphs[SNN_RT_GRAPHS];
static int g_ngraphs;

static snn_rt_graph *graph_entry(void (*step)(void *ctx), void *ctx)
{
    for (int i = 0; i < g_ngraphs; i++)
        if (g_graphs[i].step == step && g_graphs[i].ctx == ctx)
            return &g_graphs[i];
    if (g_ngraphs == SNN_RT_GRAPHS)
        snn_die("snn_rt_run_step: more than %d distinct (step, ctx) pairs to capture: raise SNN_RT_GRAPHS in "
                "arch/cuda/runtime.cu",
                SNN_RT_GRAPHS);
    snn_rt_graph *g = &g_graphs[g_ngraphs++];
    memset(g, 0, sizeof *g);
    g->step = step;
    g->ctx = ctx;
    return g;
}
#endif

#ifdef CONFIG_CUDA_GRAPH
static void capture(snn_rt_graph *g)
{
    cudaGraph_t graph = NULL;
    /* Data parallel, NCCL's own threads work while the step is captured: only this thread's calls are held
     * to the capture's rules. */
    CUDA_CHECK(cudaStreamBeginCapture(g_stream, SNN_DP_WORLD > 1 ? cudaStreamCaptureModeThreadLocal
                                                                 : cudaStreamCaptureModeGlobal));
    g->step(g->ctx);
    CUDA_CHECK(cudaStreamEndCapture(g_stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&g->exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
}
#endif

void snn_rt_run_step(void (*step)(void *ctx), void *ctx)
{
#ifdef CONFIG_CUDA_GRAPH
    snn_rt_graph *g = graph_entry(step, ctx);
    if (!g->exec && g->calls++ == 0) {
        step(ctx);
        return;
    }
    if (!g->exec)
        capture(g);
    CUDA_CHECK(cudaGraphLaunch(g->exec, g_stream));
#else
    step(ctx);
#endif
}

void snn_rt_prepare_step(void (*step)(void *ctx), void *ctx)
{
#if defined(CONFIG_CUDA_GRAPH) && !defined(CONFIG_DP) && !defined(SNN_SYNC_CHECK)
    if (g_driver < 12030)
        return;
    snn_rt_graph *g = graph_entry(step, ctx);
    if (!g->exec)
        capture(g);
#else
    (void)step, (void)ctx;
#endif
}

void snn_rt_release_steps(void)
{
#ifdef CONFIG_CUDA_GRAPH
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
    for (int i = 0; i < g_ngraphs; i++)
        if (g_graphs[i].exec)
            CUDA_CHECK(cudaGraphExecDestroy(g_graphs[i].exec));
    g_ngraphs = 0;
#endif
}

/* ---- timing marks (record them outside snn_rt_run_step) ---------------------- */

struct snn_mark {
    cudaEvent_t ev;
};

snn_mark *snn_rt_mark_new(void)
{
    snn_mark *m = (snn_mark *)snn_xmalloc(sizeof *m, "a timing mark");
    CUDA_CHECK(cudaEventCreate(&m->ev));
    return m;
}

void snn_rt_mark(snn_mark *m)
{
    CUDA_CHECK(cudaEventRecord(m->ev, g_stream));
}

float snn_rt_elapsed_ms(snn_mark *from, snn_mark *to)
{
    float ms = 0.0f;
    CUDA_CHECK(cudaEventSynchronize(to->ev));
    CUDA_CHECK(cudaEventElapsedTime(&ms, from->ev, to->ev));
    return ms;
}

void snn_rt_mark_free(snn_mark *m)
{
    if (!m)
        return;
    CUDA_CHECK(cudaEventDestroy(m->ev));
    free(m);
}
