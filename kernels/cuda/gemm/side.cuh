/* Work that a wgmma GEMM's producer warpgroup does beside its loads (gemm/wgmma.cuh), in its three warps that
 * issue none: work of another kernel in the step, which then needs no launch of its own (each costs the
 * layered step about 2 us, whatever its work: docs/PERF.md v49). A side job is a functor called once by each
 * of those warps, side(warp, warps), warp in 0 .. warps - 1 over the grid, where ACTIVE; none where not.
 * It runs after the producer's setmaxnreg.dec, within GEMM_WG_PRODUCER_REGS registers; SMALL_TILE_ONLY: only
 * beside the small tile's kernel (GemmWgmmaSmallTile), where the config's would spill it. The jobs: the bias
 * gradient below, and the next hidden layer's dropout mask beside a forward GEMM (gemm/forward.cu). */
#ifndef SNN_GEMM_SIDE_CUH
#define SNN_GEMM_SIDE_CUH

#include <cuda_runtime.h>

#include "kernels/cuda/gemm/bias.cuh"
#include "kernels/optim.h"
#include "snn_config.h"

struct GemmSideNone {
    static constexpr bool ACTIVE = false, SMALL_TILE_ONLY = false;
};

/* Whether the optimizer's update of a bias fits the producer's registers: AdamW's does not (its division's
 * slow path is a call, around which the update spills within GEMM_WG_PRODUCER_REGS). */
#if defined(CONFIG_TRAIN_OPTIMIZER_ADAMW)
constexpr bool GEMM_SIDE_UPDATE_FITS = false;
#else
constexpr bool GEMM_SIDE_UPDATE_FITS = true;
#endif

/* The bias gradient beside the weight gradient's GEMM: the sums of dY's N columns over its M rows (ld apart)
 * in the bias kernel's order (gemm/bias.cuh, CONFIG_CUDA_BIAS_SLICES slices), a warp 32 / SLICES columns at a
 * time, into out; with UPDATE, out is the biases, updated at *rate (state sb); out NULL, nothing. Inactive
 * where the slices do not divide a warp or the update does not fit: the bias kernel runs instead. */
template <bool UPDATE> struct GemmSideBias {
    static constexpr int SLICES = CONFIG_CUDA_BIAS_SLICES;
    static constexpr bool ACTIVE = 32 % SLICES == 0 && (!UPDATE || GEMM_SIDE_UPDATE_FITS),
                          SMALL_TILE_ONLY = false;
    float *out;
    snn_state sb;
    const snn_rate *rate;
    const float *dy;
    int ld, M, N;
    /* called only where ACTIVE (the kernel's `if constexpr`), so instantiated only there */
    __device__ void operator()(int warp, int warps) const
    {
        constexpr int COLS = 32 / SLICES;
        if (!out)
            return;
        for (int n0 = warp * COLS; n0 < N; n0 += warps * COLS)
            gemm_bias_columns_warp<SLICES>(dy, ld, M, N, n0, [&](int n, float g) {
                if constexpr (UPDATE)
                    snn_update_at(out, sb, (size_t)n, g, *rate);
                else
                    out[n] = g;
            });
    }
};

#endif
