/* GEMM benchmark: the configured GEMM path (precision, tiles) against cuBLAS
 * with the same types, on the MLP's own shapes and on large squares.
 *
 *   make O=DIR <board>_defconfig && make O=DIR && DIR/tools/bin/bench_gemm [MxNxK ...]
 *
 * With arguments, only those of its shapes (as in the table's second
 * column; a profiler's view of one shape) are run.
 *
 * Each shape is first checked: staticnn against cuBLAS, and both against the
 * FP32 host reference where the host can afford it (relative L2); then
 * timed: CUDA events around each call after warm-up, median of 30, TFLOP/s.
 * Each shape runs in the engine's GEMM role for it, without the role's
 * epilogue: a forward shape C[M,N] = A[M,K] . B[N,K]^T (X, W) at the
 * config's forward tile (no bias, no ReLU); a weight-gradient shape C[M,N]
 * = A^T B for A[K][M] and B[K][N] (dY, X: k is the batch) at the
 * weight-gradient tile, stored (cuda_linear_backward_weight: no SGD update).
 * cuBLAS gets the same layouts, with operands already in its input type
 * (its best case). The mma.sync kernel reads FP32 operands
 * and rounds them as it stages them, or, in builds with 16-bit twins
 * (CONFIG_GEMM_TWINS) and no wgmma, the same 16-bit operands as cuBLAS, as
 * twins. Tensor-core builds get a split-K workspace (16 Mi floats, more
 * than any config's), so the small shapes split as in the engine. With
 * CONFIG_GEMM_WGMMA the Hopper kernel is also timed, on the same 16-bit
 * (TF32: FP32) operands as cuBLAS, at several block tiles (the config's
 * first) and accumulator sets (a); in TF32 the engine's forward itself
 * runs on it where it can.
 * Tensor-core builds first measure the mma.sync ceiling of the GEMM's
 * instruction on this GPU (a kernel of register operands only, which no
 * GEMM on mma.sync can beat) and give each staticnn row's fraction of it:
 * on Hopper, where cuBLAS runs on wgmma, the ratio that says how good an
 * mma.sync kernel is. Last, each shape's memory floor: its operands read
 * once and C written once at the streaming rates measured first, the bound
 * of the shapes whose few FLOPs per byte leave the tensor cores idle. */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "arch/runtime.h"
#include "kernels/cuda/gemm/launch.cuh"
#include "kernels/cuda/gemm/tile.cuh"
#include "kernels/cuda/gemm_path.h"
#include "kernels/cuda/gemm_split_k.h"
#include "kernels/cuda/twin.cuh"
#include "kernels/ops.h"
#ifdef CONFIG_GEMM_TENSOR_CORES
#include "kernels/cuda/gemm/mma_inst.cuh"
#endif
#ifdef CONFIG_GEMM_WGMMA
#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/wgmma.cuh"
#endif

#define REPS 30
#define HOST_CHECK_MAX_MACS 1e10 /* the host reference takes about a second there */

#if defined(CONFIG_PRECISION_TF32)
#define PRECISION "tf32"
static const cudaDataType_t IN_TYPE = CUDA_R_32F;
static const cublasComputeType_t COMPUTE = CUBLAS_COMPUTE_32F_FAST_TF32;
#elif defined(CONFIG_PRECISION_FP16)
#define PRECISION "fp16 (fp32 accumulate)"
static const cudaDataType_t IN_TYPE = CUDA_R_16F;
static const cublasComputeType_t COMPUTE = CUBLAS_COMPUTE_32F;
#elif defined(CONFIG_PRECISION_FP16_ACC16)
#define PRECISION "fp16 (fp16 accumulate)"
static const cudaDataType_t IN_TYPE = CUDA_R_16F;
static const cublasComputeType_t COMPUTE = CUBLAS_COMPUTE_16F;
#elif defined(CONFIG_PRECISION_BF16)
#define PRECISION "bf16 (fp32 accumulate)"
static const cudaDataType_t IN_TYPE = CUDA_R_16BF;
static const cublasComputeType_t COMPUTE = CUBLAS_COMPUTE_32F;
#else
#define PRECISION "fp32"
static const cudaDataType_t IN_TYPE = CUDA_R_32F;
static const cublasComputeType_t COMPUTE = CUBLAS_COMPUTE_32F;
#endif

#define CUBLAS_CHECK(call)                                                                              \
    do {                                                                                                \
        cublasStatus_t st_ = (call);                                                                    \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                               \
            snn_die_at(__FILE__, __LINE__, "%s failed: cuBLAS status %d", #call, (int)st_);            \
    } while (0)

struct shape {
    const char *what;
    int m, n, k;
    bool wgrad; /* in the weight-gradient role; else the forward */
};

static const shape shapes[] = {
    {"784x4 forward (batch 64)", 64, 784, 784, false},
    {"784x4 weight grad", 784, 784, 64, true},
    {"1024x3 forward (batch 32)", 32, 1024, 1024, false},
    {"8192x3 forward (batch 32)", 32, 8192, 8192, false},
    {"8192x3 weight grad", 8192, 8192, 32, true},
    {"99 % board layer 0 (batch 512)", 512, 1024, 784, false},
    {"99 % board forward (batch 512)", 512, 1024, 1024, false},
    {"99 % board weight grad", 1024, 1024, 512, true},
    {"2048x3 forward (batch 256)", 256, 2048, 2048, false},
    {"2048x3 weight grad", 2048, 2048, 256, true},
    {"4096 cubed", 4096, 4096, 4096, false},
    {"8192 cubed", 8192, 8192, 8192, false},
};

/* The n x k matrix of a k x n one (the host reference takes the forward's layouts). */
static std::vector<float> transposed(const std::vector<float> &p, int k, int n)
{
    std::vector<float> t((size_t)n * k);
    for (int i = 0; i < k; i++)
        for (int j = 0; j < n; j++)
            t[(size_t)j * k + i] = p[(size_t)i * n + j];
    return t;
}

/* Converts n floats to cuBLAS's input type, in device memory. */
__global__ void to_input_type(void *dst, const float *src, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (IN_TYPE == CUDA_R_16F)
        ((__half *)dst)[i] = __float2half_rn(src[i]);
    else if (IN_TYPE == CUDA_R_16BF)
        ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(src[i]);
    else
        ((float *)dst)[i] = src[i];
}

__global__ void to_float(float *dst, const void *src, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = COMPUTE == CUBLAS_COMPUTE_16F ? __half2float(((const __half *)src)[i]) : ((const float *)src)[i];
}

static void fill_random(float *dev, long n, unsigned seed)
{
    std::vector<float> h(n);
    for (long i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = ((seed >> 8) + 0.5f) / 16777216.0f * 2.0f - 1.0f; /* (-1, 1), never zero */
    }
    /* on the engine's stream, and waited for: a pageable cudaMemcpy may return before its DMA lands,
     * and the conversion kernels on the (non-blocking) engine stream would read stale data */
    CUDA_CHECK(cudaMemcpyAsync(dev, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, snn_stream()));
    CUDA_CHECK(cudaStreamSynchronize(snn_stream()));
}

static double median_ms(std::vector<float> &t)
{
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

template <class F> static double time_ms(F call)
{
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++)
        call();
    std::vector<float> t;
    for (int i = 0; i < REPS; i++) {
        float ms;
        CUDA_CHECK(cudaEventRecord(a, snn_stream()));
        call();
        CUDA_CHECK(cudaEventRecord(b, snn_stream()));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return median_ms(t);
}


/* The memory floor: this GPU's streaming rates, from kernels that read (and sum) or write FLOOR_BYTES as float4s,
 * far more than the L2 holds. A shape can run no faster than its operands read once and C written once at these
 * rates: on the memory-bound shapes (a batch of 32 against an 8192-wide layer) the ratio that says how much is
 * left. */
#define FLOOR_BYTES (512L << 20)

__global__ void floor_read(const float4 *__restrict__ p, long n, float *sink)
{
    float s = 0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const float4 v = p[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 1.0f) /* never: the buffer is zero; keeps the loads */
        *sink = s;
}

__global__ void floor_write(float4 *__restrict__ p, long n)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        p[i] = make_float4(0, 0, 0, 0);
}

struct memory_floor {
    double read, write; /* bytes per ms */
};

static memory_floor measure_memory_floor(void)
{
    const long n = FLOOR_BYTES / sizeof(float4);
    float4 *p;
    CUDA_CHECK(cudaMalloc(&p, FLOOR_BYTES + sizeof(float)));
    CUDA_CHECK(cudaMemsetAsync(p, 0, FLOOR_BYTES, snn_stream()));
    float *sink = (float *)(p + n);
    const int blocks = gemm_sm_count() * gemm_resident_blocks(256, 0); /* as many as the GPU holds */
    const double t_read = time_ms([&] {
        floor_read<<<blocks, 256, 0, snn_stream()>>>(p, n, sink);
        CUDA_CHECK_LAUNCH();
    });
    const double t_write = time_ms([&] {
        floor_write<<<blocks, 256, 0, snn_stream()>>>(p, n);
        CUDA_CHECK_LAUNCH();
    });
    CUDA_CHECK(cudaFree(p));
    return {FLOOR_BYTES / t_read, FLOOR_BYTES / t_write};
}

static std::vector<float> download(const float *dev, long n)
{
    std::vector<float> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static double rel_l2(const std::vector<float> &a, const std::vector<float> &b)
{
    long n = (long)a.size();
    double d = 0, r = 0;
    for (long i = 0; i < n; i++) {
        if (!std::isfinite(a[i]))
            return INFINITY;
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return std::sqrt(d / r);
}

#ifdef CONFIG_GEMM_TENSOR_CORES
/* The mma.sync ceiling: every warp issues the GEMM's instruction (gemm/mma_inst.cuh) on register
 * operands, CHAINS independent accumulations, ITERS times; no memory traffic, no fragment loads. */
#define CEILING_ITERS 2048
#define CEILING_THREADS 256
template <int CHAINS>
__global__ void __launch_bounds__(CEILING_THREADS) mma_ceiling_kernel(float *sink)
{
    uint32_t a[4], b[2];
    for (int i = 0; i < 4; i++)
        a[i] = threadIdx.x + i; /* small values; they do not change the rate */
    b[0] = threadIdx.x;
    b[1] = threadIdx.x + 1;
    GemmMmaAcc acc[CHAINS][GEMM_MMA_ACC_REGS] = {};
    for (int it = 0; it < CEILING_ITERS; ++it)
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            gemm_mma(acc[c], a, b);
    float sum = 0;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            sum += gemm_mma_acc(acc[c], e);
    sink[blockIdx.x * CEILING_THREADS + threadIdx.x] = sum;
}

/* TFLOP/s of mma_ceiling_kernel<CHAINS> with `per_sm` blocks of 8 warps per SM. */
template <int CHAINS>
static double mma_ceiling_at(int per_sm, float *sink)
{
    const int blocks = per_sm * gemm_sm_count();
    const double t = time_ms([&] {
        mma_ceiling_kernel<CHAINS><<<blocks, CEILING_THREADS, 0, snn_stream()>>>(sink);
        CUDA_CHECK_LAUNCH();
    });
    return 2.0 * GEMM_MMA_M * GEMM_MMA_N * GEMM_MMA_KSTEP * CHAINS * CEILING_ITERS *
           ((double)blocks * CEILING_THREADS / 32) / t / 1e9;
}

/* The best rate over 4 and 8 chains and 1, 2 and 4 blocks per SM. */
static double mma_ceiling(void)
{
    float *sink;
    CUDA_CHECK(cudaMalloc(&sink, (size_t)4 * gemm_sm_count() * CEILING_THREADS * sizeof(float)));
    double best = 0;
    for (int per_sm : {1, 2, 4})
        best = std::max({best, mma_ceiling_at<4>(per_sm, sink), mma_ceiling_at<8>(per_sm, sink)});
    CUDA_CHECK(cudaFree(sink));
    return best;
}
#endif

#ifdef CONFIG_GEMM_WGMMA
/* Rows of the wgmma kernel at block tile Tile on cuBLAS's operands (16-bit; FP32 in TF32), against cuBLAS's result
 * and time: a block per tile, and the persistent grid. */
template <class Tile>
static void bench_wgmma(const shape &s, const void *a_in, const void *b_in, float *c, const std::vector<float> &theirs,
                        double t_ref)
{
    const GemmWgmmaElem *a = (const GemmWgmmaElem *)a_in, *b = (const GemmWgmmaElem *)b_in;
    const long nc = (long)s.m * s.n;
    const double flop = 2.0 * s.m * s.n * s.k;
    for (int grid : {GEMM_WG_GRID_PER_TILE, GEMM_WG_GRID_RESIDENT}) {
        const char *how = grid == GEMM_WG_GRID_RESIDENT ? "persistent" : "block per tile";
        auto run = [&] {
            gemm_wgmma_run<GEMM_K_MAJOR, GEMM_K_MAJOR, GemmEpiStore, Tile>(a, s.k, b, s.k, s.m, s.n, s.k,
                                                                             GemmEpiStore{c, s.n}, grid);
        };
        CUDA_CHECK(cudaMemset(c, 0xff, nc * 4));
        run();
        CUDA_CHECK(cudaStreamSynchronize(snn_stream()));
        const double d = rel_l2(download(c, nc), theirs), t = time_ms(run);
        printf("| wgmma %dx%dx%d c%d s%d a%d, %s | %dx%dx%d | %.1f | %.1f | %.2f | %.1e | | | | | |\n",
               Tile::BM, Tile::BN, GEMM_WG_BK, Tile::CONSUMERS, Tile::STAGES, Tile::CHAINS, how, s.m, s.n,
               s.k, flop / t / 1e9, flop / t_ref / 1e9, t_ref / t, d);
    }
    /* the input-gradient role's layout: B read as [K][N] (MN-major; not in TF32); the same bytes, so timed only */
    if constexpr (!GEMM_WG_K_MAJOR_ONLY)
        if (s.n % 8 == 0) {
            const double t_mn = time_ms([&] {
                gemm_wgmma_run<GEMM_K_MAJOR, GEMM_MN_MAJOR, GemmEpiStore, Tile>(a, s.k, b, s.n, s.m, s.n, s.k,
                                                                                 GemmEpiStore{c, s.n});
            });
            printf("| wgmma %dx%dx%d c%d s%d, B MN-major | %dx%dx%d | %.1f | %.1f | %.2f | (timed only) | | | | | |\n",
                   Tile::BM, Tile::BN, GEMM_WG_BK, Tile::CONSUMERS, Tile::STAGES, s.m, s.n, s.k, flop / t_mn / 1e9,
                   flop / t_ref / 1e9, t_ref / t_mn);
        }
}

/* The block tiles timed, the config's first. */
template <class... Tiles>
static void bench_wgmma_tiles(const shape &s, const void *a_in, const void *b_in, float *c,
                              const std::vector<float> &theirs, double t_ref)
{
    (bench_wgmma<Tiles>(s, a_in, b_in, c, theirs, t_ref), ...);
}
#endif

/* Whether shape s is the one named "MxNxK". */
static bool is_named(const shape &s, const char *name)
{
    char own[48];
    snprintf(own, sizeof own, "%dx%dx%d", s.m, s.n, s.k);
    return !strcmp(own, name);
}

/* Whether the command line picks shape s (no arguments: every shape). */
static bool picked(const shape &s, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (is_named(s, argv[i]))
            return true;
    return argc < 2;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (std::none_of(std::begin(shapes), std::end(shapes), [&](const shape &s) { return is_named(s, argv[i]); })) {
            fprintf(stderr, "bench_gemm: no shape %s; the shapes are:", argv[i]);
            for (const shape &s : shapes)
                fprintf(stderr, " %dx%dx%d", s.m, s.n, s.k);
            fprintf(stderr, "\n");
            return 2;
        }
    snn_device_info dev;
    snn_rt_init(&dev, 0);
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    CUBLAS_CHECK(cublasSetStream(h, snn_stream()));
#ifdef CONFIG_GEMM_TENSOR_CORES
    const long ws_floats = 16L << 20;
    float *ws;
    CUDA_CHECK(cudaMalloc(&ws, ws_floats * sizeof(float)));
    cuda_gemm_split_k_bind(ws, ws_floats);
#endif
    CUBLAS_CHECK(cublasSetMathMode(h, COMPUTE == CUBLAS_COMPUTE_32F && IN_TYPE == CUDA_R_32F
                                          ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
    typedef GemmTileFwd T;
    typedef GemmTileWgrad W;
    printf("# GEMM %s, %s path, forward tile: block %dx%dx%d warp %dx%dx%d, weight-gradient tile: block %dx%dx%d "
           "warp %dx%dx%d, stages %d, on %s\n",
           PRECISION, SNN_TARGET_NAME, T::BM, T::BN, T::BK, T::WM, T::WN, T::WK, W::BM, W::BN, W::BK, W::WM, W::WN,
           W::WK, CONFIG_GEMM_STAGES, dev.name);
    double ceiling = 0; /* TFLOP/s; 0: not a tensor-core build */
#ifdef CONFIG_GEMM_TENSOR_CORES
    ceiling = mma_ceiling();
    printf("# mma.sync ceiling: %.1f TFLOP/s (m16n8k%d%s, register operands only: best of 4 and 8 chains per warp, "
           "1, 2 and 4 blocks of 8 warps per SM)\n",
           ceiling, GEMM_MMA_K, GEMM_MMA_KSTEP > GEMM_MMA_K ? " in pairs" : "");
#endif
    const memory_floor floor = measure_memory_floor();
    printf("# memory floor: reads %.2f TB/s, writes %.2f TB/s (streaming float4 kernels over %ld MiB); a shape's "
           "floor is A and B read once in cuBLAS's input type and C written once in FP32\n",
           floor.read / 1e9, floor.write / 1e9, FLOOR_BYTES >> 20);
    printf("| shape | M x N x K | staticnn TFLOP/s | cuBLAS TFLOP/s | staticnn / cuBLAS | ours vs cuBLAS | "
           "ours vs host | cuBLAS vs host | staticnn / mma.sync ceiling | memory floor TFLOP/s | staticnn / "
           "floor |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
#ifdef CONFIG_GEMM_WGMMA
    printf("# staticnn: the engine's forward on FP32 operands: mma.sync, or in TF32 wgmma where it takes it "
           "(\"on wgmma\"); wgmma rows follow each shape: the operands cuBLAS gets, block tile, consumer "
           "warpgroups (c) and stages (s) as named\n");
#endif
    for (const shape &s : shapes) {
        if (!picked(s, argc, argv))
            continue;
        long na = (long)s.m * s.k, nb = (long)s.n * s.k, nc = (long)s.m * s.n;
        float *a, *b, *c_ours, *c_ref;
        void *a_in, *b_in, *c_in;
        size_t elt = IN_TYPE == CUDA_R_32F ? 4 : 2, out_elt = COMPUTE == CUBLAS_COMPUTE_16F ? 2 : 4;
        CUDA_CHECK(cudaMalloc(&a, na * 4));
        CUDA_CHECK(cudaMalloc(&b, nb * 4));
        CUDA_CHECK(cudaMalloc(&c_ours, nc * 4));
        CUDA_CHECK(cudaMalloc(&c_ref, nc * 4));
        CUDA_CHECK(cudaMalloc(&a_in, na * elt));
        CUDA_CHECK(cudaMalloc(&b_in, nb * elt));
        CUDA_CHECK(cudaMalloc(&c_in, nc * out_elt));
        fill_random(a, na, 1u + s.m);
        fill_random(b, nb, 7u + s.n);
        to_input_type<<<(na + 255) / 256, 256, 0, snn_stream()>>>(a_in, a, na);
        to_input_type<<<(nb + 255) / 256, 256, 0, snn_stream()>>>(b_in, b, nb);
        CUDA_CHECK_LAUNCH();

        /* Row-major C[M,N] = A[M,K] B[N,K]^T is column-major C^T = B . A^T; the weight gradient's
         * C[M,N] = A[K][M]^T B[K][N] is column-major C^T = B^T . A. */
        const float one = 1, zero = 0;
        const __half one_h = __float2half(1.0f), zero_h = __float2half(0.0f);
        const void *alpha = COMPUTE == CUBLAS_COMPUTE_16F ? (const void *)&one_h : (const void *)&one;
        const void *beta = COMPUTE == CUBLAS_COMPUTE_16F ? (const void *)&zero_h : (const void *)&zero;
        cudaDataType_t out_type = COMPUTE == CUBLAS_COMPUTE_16F ? CUDA_R_16F : CUDA_R_32F;
        auto cublas = [&] {
            if (s.wgrad)
                CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, s.n, s.m, s.k, alpha, b_in, IN_TYPE, s.n,
                                          a_in, IN_TYPE, s.m, beta, c_in, out_type, s.n, COMPUTE,
                                          CUBLAS_GEMM_DEFAULT));
            else
                CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, s.n, s.m, s.k, alpha, b_in, IN_TYPE, s.k,
                                          a_in, IN_TYPE, s.k, beta, c_in, out_type, s.n, COMPUTE,
                                          CUBLAS_GEMM_DEFAULT));
        };
#if defined(CONFIG_GEMM_TWINS) && !defined(CONFIG_GEMM_WGMMA)
        /* the Ampere path on the 16-bit operands cuBLAS gets, as the twins the engine keeps */
        const snn_twin *a16 = (const snn_twin *)a_in, *b16 = (const snn_twin *)b_in;
#else
        const snn_twin *a16 = NULL, *b16 = NULL;
#endif
        auto ours = [&] {
            if (s.wgrad) /* dY = A [K][M] (the batch by the outputs), X = B [K][N] */
                cuda_linear_backward_weight(c_ours, NULL, a, a16, s.m, b, b16, s.k, s.m, s.n);
            else
                cuda_linear_forward(c_ours, NULL, a, a16, b, b16, NULL, s.m, s.n, s.k, 0, NULL);
        };
        cublas();
        to_float<<<(nc + 255) / 256, 256, 0, snn_stream()>>>(c_ref, c_in, nc);
        CUDA_CHECK_LAUNCH();
        /* the path the engine's call took: wgmma (TF32 builds: the forward role), or split-K */
        const cuda_gemm_counts before = cuda_gemm_counts_now();
        ours();
        const cuda_gemm_path path = cuda_gemm_path_since(before);
        const bool on_wgmma = path.wgmma;
        char split[32] = "";
        if (on_wgmma)
            snprintf(split, sizeof split, ", on wgmma");
        else if (path.split_slices)
            snprintf(split, sizeof split, ", split-K %d", path.split_slices);
        CUDA_CHECK(cudaStreamSynchronize(snn_stream()));
        std::vector<float> got = download(c_ours, nc), theirs = download(c_ref, nc);
        double diff = rel_l2(got, theirs);
        char vs_host[2][32] = {"-", "-"};
        if ((double)s.m * s.n * s.k <= HOST_CHECK_MAX_MACS) {
            std::vector<float> ha = download(a, na), hb = download(b, nb), ref(nc);
            if (s.wgrad) {
                ha = transposed(ha, s.k, s.m);
                hb = transposed(hb, s.k, s.n);
            }
            host_linear_forward(ref.data(), NULL, ha.data(), NULL, hb.data(), NULL, NULL, s.m, s.n, s.k, 0,
                                NULL);
            snprintf(vs_host[0], sizeof(vs_host[0]), "%.1e", rel_l2(got, ref));
            snprintf(vs_host[1], sizeof(vs_host[1]), "%.1e", rel_l2(theirs, ref));
        }

        double flop = 2.0 * s.m * s.n * s.k;
        double t_ours = time_ms(ours), t_ref = time_ms(cublas);
        char of_ceiling[16] = "-";
        if (ceiling > 0 && !on_wgmma)
            snprintf(of_ceiling, sizeof of_ceiling, "%.2f", flop / t_ours / 1e9 / ceiling);
        const double t_floor = (double)(na + nb) * elt / floor.read + (double)nc * 4 / floor.write;
        printf("| %s%s | %dx%dx%d | %.1f | %.1f | %.2f | %.1e | %s | %s | %s | %.1f | %.2f |\n", s.what, split, s.m,
               s.n, s.k, flop / t_ours / 1e9, flop / t_ref / 1e9, t_ref / t_ours, diff, vs_host[0], vs_host[1],
               of_ceiling, flop / t_floor / 1e9, t_floor / t_ours);
#ifdef CONFIG_GEMM_WGMMA
        if (!s.wgrad) /* the wgmma rows time the forward's layouts */
            bench_wgmma_tiles<GemmWgmmaConfigTile, GemmWgmmaSmallTile, GemmWgmmaTile<256, 128, 2, 4>,
                              GemmWgmmaTile<64, 128, 1, 8>, GemmWgmmaTile<64, 64, 1, 8>,
                              GemmWgmmaTile<64, 128, 1, 8, false, 2>>(s, a_in, b_in, c_ours, theirs, t_ref);
#endif
        fflush(stdout);
        for (void *p : {(void *)a, (void *)b, (void *)c_ours, (void *)c_ref, a_in, b_in, c_in})
            CUDA_CHECK(cudaFree(p));
    }
    CUBLAS_CHECK(cublasDestroy(h));
#ifdef CONFIG_GEMM_TENSOR_CORES
    cuda_gemm_split_k_bind(NULL, 0);
    CUDA_CHECK(cudaFree(ws));
#endif
    return 0;
}
