/* Split-K for the mma.sync kernel (CONFIG_GEMM_SPLIT_K_MAX): a GEMM whose block tiles fill at most half of
 * one wave cuts its k range into slices, a block per tile and slice, in one wave; each slice stores its
 * partial sums in the workspace (GemmEpiStore with a slice stride), and gemm_split_k_reduce adds them in
 * slice order through the role's epilogue: deterministic, the slices fixed by the shape and the GPU. The
 * workspace is a region of the static arena, bound at start-up (kernels/cuda/gemm_split_k.h). */
#ifndef SNN_GEMM_SPLIT_K_CUH
#define SNN_GEMM_SPLIT_K_CUH

#include <stddef.h>

#include <cuda_runtime.h>

#include "arch/cuda/beside.h"
#include "arch/cuda/check.h"
#include "arch/cuda/launch.cuh"
#include "arch/cuda/stream.h"
#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm_split_k.h"

/* How the k tiles of a GEMM are cut: `slices` slices of `per` tiles each (the last may be shorter). */
struct GemmSplit {
    int slices, per;
};

/* The workspace, bound by cuda_gemm_split_k_bind (gemm/split_k.cu): elems floats a stream. */
struct GemmSplitK {
    float *ws;
    long elems;
};
extern GemmSplitK gemm_split_k;

/* The workspace of the stream launches go on now: under STEP_BESIDE the weight steps' stream has its own,
 * as its GEMMs run beside the engine's (arch/cuda/beside.h). */
static inline float *gemm_split_k_ws(void)
{
#ifdef CONFIG_STEP_BESIDE
    return gemm_split_k.ws + (snn_beside_on_side() ? gemm_split_k.elems : 0);
#else
    return gemm_split_k.ws;
#endif
}

/* The most slices whose blocks still run in one wave (blocks x slices <= slots, the blocks the GPU holds at
 * once), each at least CONFIG_GEMM_SPLIT_K_MIN_K deep, at most CONFIG_GEMM_SPLIT_K_MAX and as many as the
 * workspace holds. Rounded down: one more slice would start a second wave, which halves each block's work
 * and gains nothing, before the partial sums' traffic. */
template <class Tile>
static GemmSplit gemm_split_k_plan(int M, int N, int K, long slots)
{
    const int ktiles = (K + Tile::BK - 1) / Tile::BK;
    const long blocks = (long)((M + Tile::BM - 1) / Tile::BM) * ((N + Tile::BN - 1) / Tile::BN);
    long s = slots / blocks;
    s = s < CONFIG_GEMM_SPLIT_K_MAX ? s : CONFIG_GEMM_SPLIT_K_MAX;
    s = s < K / CONFIG_GEMM_SPLIT_K_MIN_K ? s : K / CONFIG_GEMM_SPLIT_K_MIN_K;
    s = s < gemm_split_k.elems / ((long)M * N) ? s : gemm_split_k.elems / ((long)M * N);
    if (s < 2)
        return {1, ktiles};
    const int per = (int)((ktiles + s - 1) / s);
    return {(ktiles + per - 1) / per, per}; /* no empty slice */
}

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

/* C[m][n] = the sum of the slices' partials, in slice order, through epi. */
template <class Epi>
__global__ void gemm_split_k_reduce(const float *__restrict__ ws, int slices, int M, int N, Epi epi)
{
    snn_grid_wait();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, mn = (size_t)M * N;
    if (i >= mn)
        return;
    const int m = (int)(i / N), n = (int)(i % N);
    const typename Epi::In in = epi.load(m, n);
    float v = ws[i];
    for (int z = 1; z < slices; ++z)
        v += ws[z * mn + i];
    gemm_epi_one(epi, m, n, v, in);
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

/* C[M,N] through epi from the workspace's `slices` slices of partial sums. */
template <class Epi>
static void gemm_split_k_reduce_launch(int slices, int M, int N, const Epi &epi)
{
    const size_t mn = (size_t)M * N;
    SNN_LAUNCH(gemm_split_k_reduce<Epi>, (unsigned)((mn + 255) / 256), 256, 0,
               (const float *)gemm_split_k_ws(), slices, M, N, epi);
}

#endif
