/* The device side of split-K (gemm_split_k.h): the slice count of a GEMM
 * and the kernel that adds the slices' partial sums (stored by GemmEpiStore
 * with a slice stride) in order and applies the role's epilogue. Deterministic: the
 * slices are fixed by the shape and summed in slice order. */
#ifndef SNN_GEMM_SPLIT_K_CUH
#define SNN_GEMM_SPLIT_K_CUH

#include <stddef.h>

#include <cuda_runtime.h>

#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_split_k.h"

/* How the k tiles of a GEMM are cut: `slices` slices of `per` tiles each (the last may be shorter). */
struct GemmSplit {
    int slices, per;
};

/* The workspace, bound by cuda_gemm_split_k_bind. */
struct GemmSplitK {
    float *ws;
    long elems;
    long count;
    int last;
};
extern GemmSplitK gemm_split_k;

/* The most slices whose blocks still run in one wave (blocks x slices <=
 * slots, the blocks the GPU holds at once), each at least
 * CONFIG_GEMM_SPLIT_K_MIN_K deep, at most CONFIG_GEMM_SPLIT_K_MAX and as
 * many as the workspace holds. Rounded down: one more slice would start a
 * second wave, and a GEMM in two waves of s + 1 slices takes 2 / (s + 1) of
 * its unsplit time, against 1 / s in one wave of s, before the partial
 * sums' traffic (128 tiles of one block per SM on 132 SMs: 1 slice, not 2). */
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

/* C[m][n] = the sum of the slices' partials, in slice order, through epi. */
template <class Epi>
__global__ void gemm_split_k_reduce(const float *__restrict__ ws, int slices, int M, int N, Epi epi)
{
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

#endif
