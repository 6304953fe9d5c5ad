/* The Hopper GEMM (CONFIG_GEMM_WGMMA, kernels/cuda/gemm/wgmma.cuh) on its
 * own, for every operand layout (A and B each K- or MN-major: the three
 * roles of a layer and the fourth combination; TF32: both K-major, the
 * only layout it has) and several block tiles (each wgmma N, one and two
 * m64 slices per consumer), on random 16-bit (TF32: FP32) operands of
 * awkward sizes with padded row strides. Reference: the exact products of
 * the same 16-bit values (TF32: of the FP32 values with their 13 low
 * mantissa bits cleared, which is what the tensor cores read, so a wgmma
 * that rounded instead would fail), summed in double on the host. An
 * element passes when |gpu - ref| <= 1e-5 x sum_k |a b| + 1e-30: FP32
 * accumulation of exact products, nothing looser. Outputs are poisoned with
 * NaN first, so an element never written fails, as does a write into a
 * row's padding past N; every case runs twice,
 * on the config's grid and on a grid of 3 blocks that each walk many tiles
 * (the persistent kernel's ring running on across tiles), and must be
 * bitwise identical. Each case runs again through the BF16-storing
 * epilogue (data parallelism's weight gradient), whose every element must
 * be the FP32 result rounded to nearest even, bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>
#include <vector>

#include "arch/runtime.h"
#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/wgmma.cuh"
#include "snn_check.h"
#include "tests/test_util.h"

#define TOL 1e-5

static int n_failed;

/* The value the tensor cores take from an element. */
static float to_host_float(GemmWgmmaElem x)
{
#if defined(CONFIG_PRECISION_TF32)
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
#elif defined(CONFIG_PRECISION_BF16)
    return __bfloat162float(x);
#else
    return __half2float(x);
#endif
}

static GemmWgmmaElem from_float(float x)
{
#if defined(CONFIG_PRECISION_TF32)
    return x;
#elif defined(CONFIG_PRECISION_BF16)
    return __float2bfloat16_rn(x);
#else
    return __float2half_rn(x);
#endif
}

/* A random operand of `rows` (M or N) by K in layout L, row stride padded past
 * its width to a multiple of 8 plus 8; the value the tensor cores take of
 * (r, k) in `val`. */
struct Operand {
    std::vector<GemmWgmmaElem> host;
    std::vector<float> val; /* [rows][K] */
    int ld;
    GemmWgmmaElem *dev;
};

static Operand make_operand(int layout, int rows, int K)
{
    Operand o;
    const int width = layout == GEMM_K_MAJOR ? K : rows, height = layout == GEMM_K_MAJOR ? rows : K;
    o.ld = (width + 7) / 8 * 8 + 8;
    o.host.resize((size_t)height * o.ld);
    o.val.resize((size_t)rows * K);
    for (size_t i = 0; i < o.host.size(); i++)
        o.host[i] = from_float(rng_uniform());
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < K; k++)
            o.val[(size_t)r * K + k] =
                to_host_float(layout == GEMM_K_MAJOR ? o.host[(size_t)r * o.ld + k] : o.host[(size_t)k * o.ld + r]);
    CUDA_CHECK(cudaMalloc(&o.dev, o.host.size() * sizeof(GemmWgmmaElem) + 16));
    CUDA_CHECK(cudaMemcpy(o.dev, o.host.data(), o.host.size() * sizeof(GemmWgmmaElem), cudaMemcpyHostToDevice));
    return o;
}

/* The same GEMM through GemmEpiStoreBf16 (data parallelism's BF16 weight gradient), on both grids: each
 * element the rounding to nearest even of the FP32 epilogue's `want`, bit for bit (the same sums). */
template <class Tile, int LA, int LB>
static void check_store_bf16(char *why, const Operand &a, const Operand &b, int M, int N, int K, int ldc,
                             const std::vector<float> &want)
{
    const size_t c_elems = (size_t)M * ldc;
    __nv_bfloat16 *c;
    CUDA_CHECK(cudaMalloc(&c, c_elems * sizeof(__nv_bfloat16)));
    std::vector<uint16_t> got(c_elems);
    for (int run = 0; run < 2 && !why[0]; run++) {
        CUDA_CHECK(cudaMemsetAsync(c, 0xff, c_elems * sizeof(__nv_bfloat16), snn_stream()));
        gemm_wgmma_run<LA, LB, GemmEpiStoreBf16, Tile>(
            a.dev, a.ld, b.dev, b.ld, M, N, K, GemmEpiStoreBf16{c, ldc}, run ? 3 : GEMM_WG_GRID_CONFIG);
        CUDA_CHECK(cudaStreamSynchronize(snn_stream()));
        CUDA_CHECK(cudaMemcpy(got.data(), c, c_elems * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
        for (int m = 0; m < M && !why[0]; m++)
            for (int n = 0; n < ldc; n++) {
                const size_t i = (size_t)m * ldc + n;
                if (n >= N) { /* the row's padding, poisoned */
                    if (got[i] != 0xffffu) {
                        set_why(why, "BF16 C[%d][%d], past N in the row's padding, was written on %s", m, n,
                                run ? "3 blocks" : "the config's grid");
                        break;
                    }
                    continue;
                }
                uint32_t u;
                memcpy(&u, &want[i], sizeof u);
                const uint16_t rounded = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
                if (got[i] != rounded) {
                    set_why(why, "BF16 C[%d][%d] = 0x%04x on %s, the FP32 epilogue's %.7g rounds to 0x%04x",
                            m, n, got[i], run ? "3 blocks" : "the config's grid", (double)want[i], rounded);
                    break;
                }
            }
    }
    CUDA_CHECK(cudaFree(c));
}

template <class Tile, int LA, int LB>
static void check(int M, int N, int K)
{
    static const char *lname[2] = {"K", "MN"};
    /* half the cases with rows of whole 16-byte quads (the epilogue's vector path), half without */
    const int ldc = (M + K) % 2 ? N + 3 : (N + 7) / 8 * 8;
    char name[160], why[256] = "";
    snprintf(name, sizeof name,
             "wgmma_%s tile %dx%dx%d s%d c%d sets %d panel %d A %s-major B %s-major M=%d N=%d K=%d ldc=%d",
             SNN_PRECISION_NAME, Tile::BM, Tile::BN, GEMM_WG_BK, Tile::STAGES, Tile::CONSUMERS, Tile::CHAINS,
             Tile::PANEL, lname[LA], lname[LB], M, N, K, ldc);
    Operand a = make_operand(LA, M, K), b = make_operand(LB, N, K);
    const size_t c_elems = (size_t)M * ldc;
    float *c;
    CUDA_CHECK(cudaMalloc(&c, c_elems * sizeof(float)));
    std::vector<float> got[2];
    for (int run = 0; run < 2; run++) {
        CUDA_CHECK(cudaMemsetAsync(c, 0xff, c_elems * sizeof(float), snn_stream()));
        gemm_wgmma_run<LA, LB, GemmEpiStore, Tile>(a.dev, a.ld, b.dev, b.ld, M, N, K, GemmEpiStore{c, ldc},
                                                   run ? 3 : GEMM_WG_GRID_CONFIG);
        CUDA_CHECK(cudaStreamSynchronize(snn_stream()));
        got[run].resize(c_elems);
        CUDA_CHECK(cudaMemcpy(got[run].data(), c, c_elems * sizeof(float), cudaMemcpyDeviceToHost));
    }
    double worst = 0;
    for (int m = 0; m < M && !why[0]; m++)
        for (int n = 0; n < N; n++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)a.val[(size_t)m * K + k] * b.val[(size_t)n * K + k];
                ref += p;
                mag += fabs(p);
            }
            const float g = got[0][(size_t)m * ldc + n];
            const double err = fabs(g - ref) / (mag + 1e-30);
            if (!isfinite(g) || err > TOL) {
                set_why(why, "C[%d][%d] = %.7g, expected %.7g (error %.1e of sum |ab|)", m, n, g, ref, err);
                break;
            }
            worst = err > worst ? err : worst;
        }
    for (int m = 0; m < M && !why[0]; m++)
        for (int n = N; n < ldc; n++) {
            uint32_t u;
            memcpy(&u, &got[0][(size_t)m * ldc + n], sizeof u);
            if (u != 0xffffffffu) {
                set_why(why, "C[%d][%d], past N in the row's padding, was written", m, n);
                break;
            }
        }
    if (!why[0] && memcmp(got[0].data(), got[1].data(), c_elems * sizeof(float)) != 0)
        set_why(why, "the run on 3 blocks differs");
    if (!why[0])
        check_store_bf16<Tile, LA, LB>(why, a, b, M, N, K, ldc, got[0]);
    if (why[0]) {
        printf("not ok - %s: %s\n", name, why);
        n_failed++;
    } else
        printf("ok - %s (error %.1e of sum |ab|; its BF16 store the rounding, bitwise)\n", name, worst);
    fflush(stdout);
    CUDA_CHECK(cudaFree(a.dev));
    CUDA_CHECK(cudaFree(b.dev));
    CUDA_CHECK(cudaFree(c));
}

template <class Tile, int LA, int LB>
static void check_sizes(void)
{
    static const int sizes[][3] = {{1, 1, 1},     {64, 64, 64},   {130, 70, 100}, {300, 520, 257},
                                   {257, 129, 1000}, {33, 1000, 40}, {1000, 33, 72}, {5, 7, 0}};
    for (const auto &s : sizes)
        if (gemm_wgmma_panel_holds<Tile>(s[2])) /* past its A panel, gemm_run takes another tile */
            check<Tile, LA, LB>(s[0], s[1], s[2]);
}

template <class Tile>
static void check_layouts(void)
{
    check_sizes<Tile, GEMM_K_MAJOR, GEMM_K_MAJOR>(); /* forward: X, W */
#if !GEMM_WG_K_MAJOR_ONLY
    check_sizes<Tile, GEMM_K_MAJOR, GEMM_MN_MAJOR>(); /* input gradient: dY, W as [K][N] */
    check_sizes<Tile, GEMM_MN_MAJOR, GEMM_MN_MAJOR>(); /* weight gradient: dY^T, X */
    check_sizes<Tile, GEMM_MN_MAJOR, GEMM_K_MAJOR>();
#endif
}

int main(void)
{
    if (!snn_rt_gpu_present()) {
        printf("skip - gpu wgmma GEMM: skipped: no GPU\n");
        return 0;
    }
    snn_device_info dev;
    snn_rt_init(&dev, 0);
    printf("# wgmma GEMM on %s (cc %d)\n", dev.name, dev.cc);
    check_layouts<GemmWgmmaConfigTile>();
    check_layouts<GemmWgmmaSmallTile>();
    check_layouts<GemmWgmmaTile<64, 192, 1, 2>>();
    check_layouts<GemmWgmmaTile<256, 128, 2, 4>>(); /* two m64 slices per consumer */
    check_layouts<GemmWgmmaTile<128, 128, 2, 4, true>>(); /* ping-pong: the whole tile per consumer */
    check_layouts<GemmWgmmaTile<64, 256, 2, 3, true>>();
    /* k tiles into two and three accumulator sets in turn */
    check_layouts<GemmWgmmaTile<64, 64, 1, gemm_wgmma_stages_fit(64, 64), false, 2>>();
    check_layouts<GemmWgmmaTile<64, 128, 1, gemm_wgmma_stages_fit(64, 128), false, 3>>();
    typedef GemmWgmmaTile<64, 64, 1, 4, false, 2> ShortRing; /* the weight gradient's (v60) */
    check_layouts<ShortRing>();
    /* the config's weight-gradient small tile, where it is neither the small tile nor the one above */
    if constexpr (!std::is_same_v<GemmWgmmaSmallWgradTile, GemmWgmmaSmallTile> &&
                  !std::is_same_v<GemmWgmmaSmallWgradTile, ShortRing>)
        check_layouts<GemmWgmmaSmallWgradTile>();
    /* A kept in shared memory across a block's run of tiles (every size here fits 16 k tiles; past 8, the
     * third skips it), one set and two; the config's, where it has one */
    check_layouts<GemmWgmmaTile<64, 64, 1, 4, false, 2, 16>>();
    check_layouts<GemmWgmmaTile<64, 128, 1, 2, false, 1, 16>>();
    check_layouts<GemmWgmmaTile<128, 64, 2, 4, false, 1, 8>>(); /* two consumers, their rows of one panel */
#ifdef CONFIG_GEMM_WGMMA_SMALL_WGRAD_PANEL
    check_layouts<GemmWgmmaSmallPanelTile>();
#endif
    return n_failed != 0;
}
