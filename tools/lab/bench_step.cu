/* Where a training step's time goes: the configured model's step (the
 * schedule of nn/train.c) with every kernel call bracketed by CUDA events,
 * on random parameters and data.
 *
 *   make O=DIR <board>_defconfig && make O=DIR && DIR/tools/bin/bench_step
 *
 * Each call of the step is one row: the op, its shape, the path it took (for
 * the GEMMs: wgmma or mma.sync, and split-K slices), the median over STEPS
 * steps after WARMUP, and its share of the summed medians. Events between
 * kernels add a little to each; the graph-replayed step (./app/mnist) has
 * no such gaps, so the sum is above the app's step time, and the rows say
 * where it goes. Under STEP_BESIDE a row runs on its stream's share of the
 * SMs, alone: only the replayed step shows the two streams overlap.
 *
 * A layered build then times its step as ./app/mnist runs it (graph
 * replays, no events between kernels). In a fused build (CONFIG_STEP_FUSED)
 * it times the fused step instead: the
 * mean step of a launch of up to 400 steps (median of 5 launches), and one
 * step's timeline from the kernel's %globaltimer stamps: per phase, its
 * work (from the previous barrier's release to the last block's end of the
 * phase) and its barrier (from there to the release). */
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "arch/runtime.h"
#include "kernels/cuda/gemm_path.h"
#include "kernels/ops.h"
extern "C" { /* the nn headers are C */
#include "nn/model.h"
#include "nn/train.h"
}

#define WARMUP 5
#define STEPS 30

struct Call {
    std::string what;
    std::vector<float> ms;
};
static std::vector<Call> calls;
static size_t next_call;
static bool timing;

/* Runs f between two events, as call number next_call of the step. */
/* The milliseconds of what f queues on the engine's stream, by CUDA events around it. */
template <class F> static float event_ms(F f)
{
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    CUDA_CHECK(cudaEventRecord(a, snn_stream()));
    f();
    CUDA_CHECK(cudaEventRecord(b, snn_stream()));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return ms;
}

template <class F> static void timed(const std::string &what, F f)
{
    const cuda_gemm_counts before = cuda_gemm_counts_now();
    const float ms = event_ms(f);
    std::string name = what;
#ifdef CONFIG_GEMM_TENSOR_CORES
    const cuda_gemm_path path = cuda_gemm_path_since(before);
    if (what.rfind("linear", 0) == 0)
        name += path.wgmma ? " [wgmma]" : path.mma_twins ? " [mma.sync, twins]" : " [mma.sync]";
    if (path.split_slices)
        name += " [split-K " + std::to_string(path.split_slices) + "]";
#else
    (void)before;
#endif
    if (next_call == calls.size())
        calls.push_back({name, {}});
    if (timing)
        calls[next_call].ms.push_back(ms);
    next_call++;
}

static std::string dims(int M, int N, int K)
{
    char s[64];
    snprintf(s, sizeof s, " %dx%dx%d", M, N, K);
    return s;
}

extern "C" {
static void t_forward(float *y, snn_twin *y16, const float *x, const snn_twin *x16, const float *w,
                      const snn_twin *w16, const float *b, int M, int N, int K, int relu, const snn_drop *drop)
{
    timed("linear_forward" + dims(M, N, K) + (drop ? " dropout" : ""),
          [&] { cuda_linear_forward(y, y16, x, x16, w, w16, b, M, N, K, relu, drop); });
}
static void t_backward_input(float *dx, snn_twin *dx16, const float *dy, const snn_twin *dy16, const float *w,
                             const snn_twin *w16, const float *act, float scale, int M, int N, int K)
{
    timed("linear_backward_input" + dims(M, K, N),
          [&] { cuda_linear_backward_input(dx, dx16, dy, dy16, w, w16, act, scale, M, N, K); });
}
static void t_backward_weight_update(float *w, snn_twin *w16, snn_state sw, float *b, snn_state sb,
                                     const float *dy, const snn_twin *dy16, const float *x, const snn_twin *x16,
                                     int M, int N, int K, const snn_rate *rate)
{
    timed("linear_backward_weight_update" + dims(N, K, M),
          [&] { cuda_linear_backward_weight_update(w, w16, sw, b, sb, dy, dy16, x, x16, M, N, K, rate); });
}
static void t_backward_weight(float *gw, float *gb, const float *dy, const snn_twin *dy16, int ldy, const float *x,
                              const snn_twin *x16, int M, int N, int K)
{
    timed("linear_backward_weight" + dims(N, K, M),
          [&] { cuda_linear_backward_weight(gw, gb, dy, dy16, ldy, x, x16, M, N, K); });
}
static void t_apply_update(float *p, snn_twin *p16, snn_state s, const float *g, const uint16_t *g_bf16,
                           long n, const snn_rate *rate, int32_t *advance)
{
    timed("apply_update", [&] { cuda_apply_update(p, p16, s, g, g_bf16, n, rate, advance); });
}
static void t_gather(float *x, snn_twin *x16, uint8_t *y, const uint8_t *images, const uint8_t *labels,
                     const int32_t *order, const int32_t *step, int rows, float mean, float std,
                     snn_noise noise, int dropout_width, const snn_clock *clock)
{
    timed("gather_batch", [&] {
        cuda_gather_batch(x, x16, y, images, labels, order, step, rows, mean, std, noise, dropout_width,
                          clock);
    });
}
static void t_xent(float *dlogits, snn_twin *dlogits16, float *loss, int32_t *correct, const float *logits,
                   const uint8_t *y, const int32_t *step, int rows)
{
    timed("softmax_xent", [&] { cuda_softmax_xent(dlogits, dlogits16, loss, correct, logits, y, step, rows); });
}
static void t_output_step(float *logits, float *dlogits, snn_twin *dlogits16, float *loss, int32_t *correct,
                          float *dx, snn_twin *dx16, const float *x, const snn_twin *x16, float *w,
                          snn_twin *w16, snn_state sw, float *b, snn_state sb, const uint8_t *y,
                          const int32_t *step, float scale, int M, int K, const snn_rate *rate,
                          float *dx_sums)
{
    timed("output_step" + dims(M, SNN_CLASSES, K), [&] {
        cuda_output_step(logits, dlogits, dlogits16, loss, correct, dx, dx16, x, x16, w, w16, sw, b, sb, y,
                         step, scale, M, K, rate, dx_sums);
    });
}
static void t_advance(int32_t *step) { timed("step_advance", [&] { cuda_step_advance(step); }); }
static void t_schedule(snn_clock c)
{
    timed("schedule", [&] { cuda_schedule(c); });
}
}

static const snn_kernels timed_kernels = {
    .linear_forward = t_forward,
    .linear_backward_input = t_backward_input,
    .linear_backward_weight_update = t_backward_weight_update,
    .linear_backward_weight = t_backward_weight,
    .apply_update = t_apply_update,
    .gather_batch = t_gather,
    .softmax_xent = t_xent,
    .output_step = t_output_step,
    .step_advance = t_advance,
    .schedule = t_schedule,
    .write_twin = cuda_write_twin,
    .bind_workspace = cuda_bind_workspace,
    .gemm_numerics = cuda_gemm_numerics,
};

/* The steps of a timed run: from the first batch, at most an epoch's. */
constexpr int RUN_STEPS = SNN_STEPS_PER_EPOCH < 400 ? SNN_STEPS_PER_EPOCH : 400;

/* The median ms of 5 runs of run(), each after reset() (untimed), after one more run as a warm-up. */
template <class R, class F> static float median_run_ms(R reset, F run)
{
    std::vector<float> ms;
    for (int r = 0; r < 6; r++) {
        reset();
        const float t = event_ms(run);
        if (r)
            ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

#ifndef CONFIG_STEP_FUSED
/* The step as ./app/mnist runs a layered build's: RUN_STEPS of them from the
 * first batch, each a CUDA graph replay where the build captures one (the
 * first run, a warm-up, loads the kernels and captures the graph); the mean
 * step of a run, median of 5 runs. The tuner compares builds by it. */
static void bench_replayed(snn_model &m, const char *device)
{
    const int32_t zero = 0;
    const float ms = median_run_ms([&] { snn_rt_upload(m.train_step, &zero, sizeof zero); },
                                   [&] {
                                       for (int s = 0; s < RUN_STEPS; s++)
                                           snn_rt_run_step(snn_train_step, &m);
                                   });
#ifdef CONFIG_CUDA_GRAPH
    const char *how = "a CUDA graph replay each";
#else
    const char *how = "launched directly";
#endif
    printf("\n# the step as ./app/mnist runs it on %s (%s): %d steps, %.2f us per step (median of 5 runs)\n",
           device, how, RUN_STEPS, 1e3 * ms / RUN_STEPS);
}
#else
/* The fused kernels' phases (kernels/cuda/fused/grid_wide.cu, cluster.cu, grid_resident.cu). */
static const char *phase_name(int p, char *buf, size_t len)
{
    const char *kernel = cuda_fused_kernel_name();
    const int l = 2 * SNN_LAYERS - 1 - p; /* a backward phase's layer */
    if (!strcmp(kernel, "grid-resident")) {
        if (p < SNN_LAYERS - 1)
            snprintf(buf, len, "F%d: forward layer %d, %s%s", p, p,
                     p == 0 ? "the images read in place" : "the previous output all-gathered",
                     p == SNN_LAYERS - 2 ? ", the logits' partial sums" : "");
        else if (p == SNN_LAYERS - 1)
            snprintf(buf, len, "F%d: the partial sums added, softmax a block per row", p);
        else if (l == 0)
            snprintf(buf, len, "B0: update of layer 0");
        else
            snprintf(buf, len, "B%d: input gradient of layer %d (%s)%s", l, l,
                     l == SNN_LAYERS - 1 ? "the dlogits read, its update" : "the gradient all-gathered",
                     l >= 2 ? "; in its barrier, the update of the layer below" : "");
        return buf;
    }
    if (!strcmp(kernel, "cluster")) {
        if (p < SNN_LAYERS - 1)
            snprintf(buf, len, "F%d: forward layer %d, the block's units%s%s", p, p,
                     p ? " from its copy of their rows" : "", p + 2 < SNN_LAYERS ? ", all-gathered" : "");
        else if (p == SNN_LAYERS - 1)
            snprintf(buf, len,
                     "F%d: forward layer %d, partial sums to the rows' blocks, their softmax, dlogits "
                     "all-gathered",
                     p, p);
        else if (l == 0)
            snprintf(buf, len, "B0: update of layer 0");
        else
            snprintf(buf, len, "B%d: input gradient and update of layer %d%s", l, l,
                     l >= 2 ? ", the gradient all-gathered" : "");
        return buf;
    }
    if (p < SNN_LAYERS)
        snprintf(buf, len, "F%d: forward layer %d%s%s", p, p, p == 0 ? ", next batch's gather" : "",
                 p == SNN_LAYERS - 1 ? ", softmax" : "");
    else if (l == 0)
        snprintf(buf, len, "B0: update of layer%s 0", SNN_LAYERS > 1 ? "s 1 and" : "");
    else if (l == SNN_LAYERS - 1)
        snprintf(buf, len, "B%d: input gradient of layer %d", l, l);
    else
        snprintf(buf, len, "B%d: input gradient of layer %d, update of layer %d", l, l, l + 1);
    return buf;
}

static void bench_fused(snn_model &m, const char *device)
{
    const float ms = median_run_ms([] {}, [&] { snn_train_fused(&m, 0, RUN_STEPS); });
    const int stride = SNN_FUSED_MAX_BLOCKS + 1, phases = 2 * SNN_LAYERS;
    std::vector<long long> c(SNN_FUSED_CLOCKS);
    long long *clocks = (long long *)snn_rt_alloc(c.size() * sizeof(long long));
    snn_rt_upload(clocks, c.data(), c.size() * sizeof(long long)); /* zeros: blocks past the grid stamp none */
    m.fused.clocks = clocks;
    m.fused.clock_step = RUN_STEPS / 2;
    snn_train_fused(&m, 0, RUN_STEPS);
    m.fused.clocks = NULL;
    snn_rt_download(c.data(), clocks, c.size() * sizeof(long long));
    snn_rt_free(clocks);
    char launch[640], name[128];
    cuda_fused_describe(launch, sizeof launch);
    printf("\n# the fused step on %s: %s\n", device, launch);
    printf("# the fused kernel: %s\n", cuda_fused_kernel_name());
    printf("# %d steps in one launch: %.2f us per step (median of 5 launches)\n", RUN_STEPS,
           1e3 * ms / RUN_STEPS);
    printf("# step %d's timeline from the kernel's clock stamps (us):\n", RUN_STEPS / 2);
    printf("| phase | work | barrier |\n|---|---|---|\n");
    long long start = c[phases * stride + SNN_FUSED_MAX_BLOCKS], total_work = 0, total_barrier = 0;
    for (int p = 0; p < phases; p++) {
        long long end = 0;
        for (int k = 0; k < SNN_FUSED_MAX_BLOCKS; k++)
            end = std::max(end, c[p * stride + k]);
        const long long release = c[p * stride + SNN_FUSED_MAX_BLOCKS];
        printf("| %s | %.2f | %.2f |\n", phase_name(p, name, sizeof name), (end - start) / 1e3,
               (release - end) / 1e3);
        total_work += end - start;
        total_barrier += release - end;
        start = release;
    }
    printf("| step | %.2f | %.2f |\n", total_work / 1e3, total_barrier / 1e3);
}
#endif

int main(void)
{
    snn_plan plan;
    snn_device_info dev;
    snn_model m;
    snn_rng rng;
    snn_model_plan(&plan);
    snn_rt_init(&dev, plan.total);
    void *arena = snn_rt_alloc(plan.total);
    /* random images (any values train), labels and order of zeros */
    std::vector<unsigned char> images((size_t)SNN_TRAIN_COUNT * SNN_INPUT_DIM);
    unsigned seed = 1;
    for (auto &c : images)
        c = (unsigned char)((seed = seed * 1664525u + 1013904223u) >> 24);
    snn_rng_seed(&rng, 1);
    snn_model_init(&m, &plan, arena, SNN_ON_TARGET, &rng);
    snn_rt_upload(m.train_images, images.data(), images.size());
    CUDA_CHECK(cudaMemset(m.train_labels, 0, SNN_TRAIN_COUNT));
    CUDA_CHECK(cudaMemset(m.order, 0, SNN_FIT_COUNT * sizeof(int32_t)));
    const snn_kernels *engine = m.kernels;
    m.kernels = &timed_kernels;

    for (int s = 0; s < WARMUP + STEPS; s++) {
        timing = s >= WARMUP;
        next_call = 0;
        snn_train_step(&m);
        CUDA_CHECK(cudaMemset(m.train_step, 0, sizeof(int32_t))); /* stay on the first batch */
    }
    char shape[128];
    snn_model_shape(shape, sizeof shape);
    printf("# one training step of %s, batch %d, %s GEMMs, on %s: median of %d steps (ms)\n", shape, SNN_BATCH,
           SNN_PRECISION_NAME, dev.name, STEPS);
    double total = 0;
    std::vector<double> med;
    for (auto &c : calls) {
        std::sort(c.ms.begin(), c.ms.end());
        med.push_back(c.ms[c.ms.size() / 2]);
        total += med.back();
    }
    printf("| call | ms | share |\n|---|---|---|\n");
    for (size_t i = 0; i < calls.size(); i++)
        printf("| %s | %.4f | %.1f %% |\n", calls[i].what.c_str(), med[i], 100 * med[i] / total);
    printf("| sum | %.4f | |\n", total);
#ifdef CONFIG_STEP_BESIDE
    printf(
        "# STEP_BESIDE: each row ran alone on its stream's share of the SMs (the events wait for it), so a\n"
        "# weight step and what runs beside it add up here; the replayed step below overlaps them\n");
#endif
    m.kernels = engine;
#ifdef CONFIG_STEP_FUSED
    bench_fused(m, dev.name);
#else
    bench_replayed(m, dev.name);
#endif
    snn_rt_free(arena);
    return 0;
}
