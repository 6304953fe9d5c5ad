/* The epilogues of the three GEMM roles: each C element, in FP32, goes
 * through one of these functors, in the SIMT and the tensor-core kernels.
 * Each also writes the 16-bit twin of what it writes, where there is one
 * (kernels/cuda/twin.h; NULL otherwise).
 *
 * Two phases: a kernel first calls in = epi.load(m, n) for a batch of its
 * elements, then gemm_epi_one (or gemm_epi_pair for n, n + 1) for each:
 * epi.apply(m, n, value, in) writes the element and returns what its twin
 * (epi.twin) gets. load reads what the element needs from memory (the
 * mask's activation; the SGD update's momentum and weight). The compiler
 * cannot prove a later element's loads free of the earlier elements'
 * stores, so one load-and-store per element would cost a memory round trip
 * per element: with the loads first, a batch costs one. The tensor-core
 * kernels hand over a row of their fragment at a time (gemm_epi_row_pairs).
 *
 * The fragments hold elements in pairs (m, n), (m, n + 1), n even. An
 * epilogue with pair methods (In2, load2, apply2, pairs_aligned: the SGD
 * update and the plain store) reads and writes a pair with 8-byte accesses
 * where its arrays allow (even row stride, 8-byte aligned): half the memory
 * instructions of one element at a time. The weight-gradient GEMM of a wide
 * layer, whose k is the batch, spends its time there. */
#ifndef SNN_GEMM_EPILOGUE_CUH
#define SNN_GEMM_EPILOGUE_CUH

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include <cuda_runtime.h>

#include "kernels/cuda/twin.h"

/* What an epilogue that reads nothing per element loads. */
struct GemmEpiNothing {
};

/* Plain C[m][n] = v (the GEMM benchmarks and kernel tests), at c + z slice
 * in the block's split-K slice z (a slice's partial sums: gemm_split_k.cuh). */
struct GemmEpiStore {
    float *c;
    int ld;
    size_t slice = 0;
    static constexpr SnnTwin *twin = nullptr;
    typedef GemmEpiNothing In;
    __device__ __forceinline__ In load(int, int) const { return {}; }
    __device__ __forceinline__ float apply(int m, int n, float v, In) const
    {
        c[blockIdx.z * slice + (size_t)m * ld + n] = v;
        return v;
    }
    typedef GemmEpiNothing In2;
    __device__ __forceinline__ bool pairs_aligned() const
    {
        return ld % 2 == 0 && slice % 2 == 0 && (uintptr_t)c % 8 == 0;
    }
    __device__ __forceinline__ In2 load2(int, int) const { return {}; }
    __device__ __forceinline__ float2 apply2(int m, int n, float2 v, In2) const
    {
        *reinterpret_cast<float2 *>(c + blockIdx.z * slice + (size_t)m * ld + n) = v;
        return v;
    }
};

/* Forward: y = v (+ b[n]), then ReLU if relu. */
struct GemmEpiBiasRelu {
    float *y;
    SnnTwin *twin; /* of y */
    const float *b;
    int ld;
    int relu;
    typedef GemmEpiNothing In;
    __device__ __forceinline__ In load(int, int) const { return {}; }
    __device__ __forceinline__ float apply(int m, int n, float v, In) const
    {
        if (b)
            v += b[n];
        if (relu)
            v = v < 0.0f ? 0.0f : v; /* as the host: NaN propagates, as torch.relu */
        y[(size_t)m * ld + n] = v;
        return v;
    }
};

/* Input gradient: dx = v where the layer's input was positive (all if no act). */
struct GemmEpiReluMask {
    float *dx;
    SnnTwin *twin; /* of dx */
    const float *act;
    int ld;
    typedef float In; /* the activation, 1 where there is no mask */
    __device__ __forceinline__ In load(int m, int n) const { return act ? act[(size_t)m * ld + n] : 1.0f; }
    __device__ __forceinline__ float apply(int m, int n, float v, In a) const
    {
        if (!(a > 0.0f))
            v = 0.0f;
        dx[(size_t)m * ld + n] = v;
        return v;
    }
};

/* Weight gradient v = gW[m][n] -> SGD with momentum: vw = mu*vw + g; w -= lr*vw. */
struct GemmEpiSgd {
    float *w;
    SnnTwin *twin; /* of w */
    float *vw;
    int ld;
    float lr, mu;
    struct In {
        float vw, w;
    };
    __device__ __forceinline__ In load(int m, int n) const
    {
        const size_t i = (size_t)m * ld + n;
        return {vw[i], w[i]};
    }
    /* the update of one weight: its new momentum to v, its new value returned */
    __device__ __forceinline__ float step(float g, In in, float &v) const
    {
        v = mu * in.vw + g;
        return in.w - lr * v;
    }
    __device__ __forceinline__ float apply(int m, int n, float g, In in) const
    {
        const size_t i = (size_t)m * ld + n;
        float v;
        const float wn = step(g, in, v);
        vw[i] = v;
        w[i] = wn;
        return wn;
    }
    struct In2 {
        float2 vw, w;
    };
    __device__ __forceinline__ bool pairs_aligned() const
    {
        return ld % 2 == 0 && (uintptr_t)w % 8 == 0 && (uintptr_t)vw % 8 == 0;
    }
    __device__ __forceinline__ In2 load2(int m, int n) const
    {
        const size_t i = (size_t)m * ld + n;
        return {*reinterpret_cast<const float2 *>(vw + i), *reinterpret_cast<const float2 *>(w + i)};
    }
    __device__ __forceinline__ float2 apply2(int m, int n, float2 g, In2 in) const
    {
        const size_t i = (size_t)m * ld + n;
        float2 v, wn;
        wn.x = step(g.x, {in.vw.x, in.w.x}, v.x);
        wn.y = step(g.y, {in.vw.y, in.w.y}, v.y);
        *reinterpret_cast<float2 *>(vw + i) = v;
        *reinterpret_cast<float2 *>(w + i) = wn;
        return wn;
    }
};

/* Whether an epilogue has the pair methods. */
template <class Epi, class = void>
struct GemmEpiHasPairs : std::false_type {
};
template <class Epi>
struct GemmEpiHasPairs<Epi, std::void_t<typename Epi::In2>> : std::true_type {
};

/* Element (m, n) of C = v through epi, and its twin where there is one. */
template <class Epi>
static __device__ __forceinline__ void gemm_epi_one(const Epi &epi, int m, int n, float v, typename Epi::In in)
{
    const float out = epi.apply(m, n, v, in);
    snn_twin_store(epi.twin, (size_t)m * epi.ld + n, out);
}

/* Elements (m, n) and (m, n + 1): their twins in one 4-byte store where it
 * is aligned (half the stores, each a quarter of the sectors touched). */
template <class Epi>
static __device__ __forceinline__ void gemm_epi_pair(const Epi &epi, int m, int n, float v0, float v1,
                                                     typename Epi::In in0, typename Epi::In in1)
{
    const float out0 = epi.apply(m, n, v0, in0), out1 = epi.apply(m, n + 1, v1, in1);
    snn_twin_store2(epi.twin, (size_t)m * epi.ld + n, out0, out1);
}

/* Row m of a lane's share of C, as the tensor-core fragments hold it: P
 * pairs of columns n[p], n[p] + 1 (n[p] even and ascending) with values
 * v[p][0], v[p][1], each element inside M x N through epi, in the two
 * phases (all the row's loads, then its stores); by the pair methods where
 * the epilogue has them, its arrays allow and every pair lies inside N. */
template <int P, class Epi>
static __device__ __forceinline__ void gemm_epi_row_pairs(const Epi &epi, int m, int M, int N, const int (&n)[P],
                                                          const float (&v)[P][2])
{
    if (m >= M)
        return;
    if constexpr (GemmEpiHasPairs<Epi>::value)
        if (epi.pairs_aligned() && n[P - 1] + 1 < N) { /* every pair whole (n[] ascend); 8-byte accesses */
            typename Epi::In2 in[P];
#pragma unroll
            for (int p = 0; p < P; ++p)
                in[p] = epi.load2(m, n[p]);
#pragma unroll
            for (int p = 0; p < P; ++p) {
                const float2 out = epi.apply2(m, n[p], make_float2(v[p][0], v[p][1]), in[p]);
                snn_twin_store2(epi.twin, (size_t)m * epi.ld + n[p], out.x, out.y);
            }
            return;
        }
    typename Epi::In in[P][2];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
        for (int e = 0; e < 2; ++e)
            if (n[p] + e < N)
                in[p][e] = epi.load(m, n[p] + e);
#pragma unroll
    for (int p = 0; p < P; ++p) {
        if (n[p] + 1 < N)
            gemm_epi_pair(epi, m, n[p], v[p][0], v[p][1], in[p][0], in[p][1]);
        else if (n[p] < N)
            gemm_epi_one(epi, m, n[p], v[p][0], in[p][0]);
    }
}

#endif
