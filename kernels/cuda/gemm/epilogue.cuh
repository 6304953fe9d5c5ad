/* The epilogues of the GEMM roles: each C element, in FP32, goes through one of these functors in every
 * kernel, which also writes the 16-bit twin of what it writes where there is one (kernels/cuda/twin.h).
 * Two phases: in = epi.load(m, n) for a batch of elements (the bias; the mask's activation; the momentum and
 * weight), then epi.apply(m, n, value, in) for each, which writes the element and returns its twin's value.
 * The compiler cannot prove a later element's loads free of an earlier one's stores: loads first, a batch
 * costs one memory round trip instead of one per element. The tensor-core kernels hand over runs of V
 * consecutive elements (fragment pairs, V = 2; the wgmma kernel's quads, V = 4) that the vector methods
 * (InV, loadv, applyv, vec_aligned) read and write with one access per array (4V bytes of FP32, 2V of BF16)
 * where the arrays allow: a V-th of the memory instructions, which a weight gradient's update (k = the batch)
 * spends its time on.
 * An epilogue with per-element FP32 inputs may let a kernel copy them to shared memory ahead of use
 * (CONFIG_GEMM_WGMMA_EPI_STAGES): it names STAGED arrays, where element (m, n) of array a lies (staged), and
 * builds InV from the copies (staged_in); gemm_epi_staged<Epi>() is 0 for the others. */
#ifndef SNN_GEMM_EPILOGUE_CUH
#define SNN_GEMM_EPILOGUE_CUH

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/twin.cuh"
#include "kernels/optim.h"

/* What an epilogue that reads nothing per element loads. */
struct GemmEpiNothing {
};

/* V consecutive floats, aligned for one 4V-byte access. */
template <int V>
struct alignas(4 * V) GemmFloats {
    float f[V];
};
template <int V>
static __device__ __forceinline__ GemmFloats<V> gemm_ldv(const float *p)
{
    return *reinterpret_cast<const GemmFloats<V> *>(p);
}
template <int V>
static __device__ __forceinline__ void gemm_stv(float *p, const GemmFloats<V> &v)
{
    *reinterpret_cast<GemmFloats<V> *>(p) = v;
}

/* Epi::STAGED where the epilogue declares it, else 0. */
template <class Epi, class = void>
struct GemmEpiStagedArrays {
    static constexpr int value = 0;
};
template <class Epi>
struct GemmEpiStagedArrays<Epi, std::void_t<decltype(Epi::STAGED)>> {
    static constexpr int value = Epi::STAGED;
};
template <class Epi>
constexpr int gemm_epi_staged()
{
    return GemmEpiStagedArrays<Epi>::value;
}

/* Plain C[m][n] = v (the stored weight gradient, benchmarks, tests), at c + z slice in the block's split-K
 * slice z (a slice's partial sums: gemm/split_k.cuh). */
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
    template <int V>
    using InV = GemmEpiNothing;
    template <int V>
    __device__ __forceinline__ bool vec_aligned() const
    {
        return ld % V == 0 && slice % V == 0 && (uintptr_t)c % (4 * V) == 0;
    }
    template <int V>
    __device__ __forceinline__ InV<V> loadv(int, int) const
    {
        return {};
    }
    template <int V>
    __device__ __forceinline__ GemmFloats<V> applyv(int m, int n, GemmFloats<V> v, InV<V>) const
    {
        gemm_stv(c + blockIdx.z * slice + (size_t)m * ld + n, v);
        return v;
    }
};

/* C[m][n] rounded to BF16 (to nearest even), its bits at c: data parallelism's weight gradient written as its
 * BF16 all-reduce sends it (cuda_linear_backward_weight_bf16), 2 bytes an element and no copy. */
struct GemmEpiStoreBf16 {
    __nv_bfloat16 *c;
    int ld;
    static constexpr SnnTwin *twin = nullptr;
    typedef GemmEpiNothing In;
    __device__ __forceinline__ In load(int, int) const { return {}; }
    __device__ __forceinline__ float apply(int m, int n, float v, In) const
    {
        c[(size_t)m * ld + n] = __float2bfloat16_rn(v);
        return v;
    }
    template <int V> using InV = GemmEpiNothing;
    template <int V> __device__ __forceinline__ bool vec_aligned() const
    {
        return ld % V == 0 && (uintptr_t)c % (2 * V) == 0;
    }
    template <int V> __device__ __forceinline__ InV<V> loadv(int, int) const { return {}; }
    /* pairs packed, one 2V-byte store (V = 2 or 4) */
    template <int V>
    __device__ __forceinline__ GemmFloats<V> applyv(int m, int n, GemmFloats<V> v, InV<V>) const
    {
        __nv_bfloat16 *at = c + (size_t)m * ld + n;
        if constexpr (V == 1) {
            *at = __float2bfloat16_rn(v.f[0]);
        } else {
            static_assert(V == 2 || V == 4, "GemmEpiStoreBf16: runs of 1, 2 or 4");
            uint32_t pair[V / 2];
#pragma unroll
            for (int i = 0; i < V / 2; i++) {
                const __nv_bfloat162 b = __floats2bfloat162_rn(v.f[2 * i], v.f[2 * i + 1]);
                pair[i] = *reinterpret_cast<const uint32_t *>(&b);
            }
            if constexpr (V == 2)
                *reinterpret_cast<uint32_t *>(at) = pair[0];
            else
                *reinterpret_cast<uint2 *>(at) = make_uint2(pair[0], pair[1]);
        }
        return v;
    }
};

/* o[m][n] = e.out(v, in), for an epilogue e that writes one array o (row stride e.ld) from the value and
 * what it loaded; and the same for a run of V. */
template <class Epi>
static __device__ __forceinline__ float gemm_epi_map(const Epi &e, float *o, int m, int n, float v, float in)
{
    v = e.out(v, in);
    o[(size_t)m * e.ld + n] = v;
    return v;
}
template <int V, class Epi>
static __device__ __forceinline__ GemmFloats<V> gemm_epi_mapv(const Epi &e, float *o, int m, int n,
                                                              GemmFloats<V> v, const GemmFloats<V> &in)
{
#pragma unroll
    for (int i = 0; i < V; i++)
        v.f[i] = e.out(v.f[i], in.f[i]);
    gemm_stv(o + (size_t)m * e.ld + n, v);
    return v;
}

/* Forward: y = v (+ b[n]), then ReLU if relu. */
struct GemmEpiBiasRelu {
    float *y;
    SnnTwin *twin; /* of y */
    const float *b;
    int ld;
    int relu;
    typedef float In; /* b[n] (0 without a bias) */
    __device__ __forceinline__ In load(int, int n) const { return b ? b[n] : 0.0f; }
    __device__ __forceinline__ float out(float v, float bias) const
    {
        if (b)
            v += bias;
        if (relu)
            v = v < 0.0f ? 0.0f : v; /* as the host: NaN propagates, as torch.relu */
        return v;
    }
    __device__ __forceinline__ float apply(int m, int n, float v, In bias) const
    {
        return gemm_epi_map(*this, y, m, n, v, bias);
    }
    template <int V>
    using InV = GemmFloats<V>;
    template <int V>
    __device__ __forceinline__ bool vec_aligned() const
    {
        return ld % V == 0 && (uintptr_t)y % (4 * V) == 0 && (uintptr_t)b % (4 * V) == 0;
    }
    template <int V>
    __device__ __forceinline__ InV<V> loadv(int, int n) const
    {
        return b ? gemm_ldv<V>(b + n) : GemmFloats<V>{};
    }
    template <int V>
    __device__ __forceinline__ GemmFloats<V> applyv(int m, int n, GemmFloats<V> v, InV<V> bias) const
    {
        return gemm_epi_mapv<V>(*this, y, m, n, v, bias);
    }
};

/* Input gradient: dx = v x scale where the layer's input was positive (all if no act); scale: the kept units'
 * of the dropout that input went through (kernels/ops_proto.h). */
struct GemmEpiReluMask {
    float *dx;
    SnnTwin *twin; /* of dx */
    const float *act;
    int ld;
    float scale = 1.0f;
    typedef float In; /* the activation, 1 where there is no mask */
    __device__ __forceinline__ In load(int m, int n) const { return act ? act[(size_t)m * ld + n] : 1.0f; }
    __device__ __forceinline__ float out(float v, float a) const { return a > 0.0f ? v * scale : 0.0f; }
    __device__ __forceinline__ float apply(int m, int n, float v, In a) const
    {
        return gemm_epi_map(*this, dx, m, n, v, a);
    }
    template <int V>
    using InV = GemmFloats<V>;
    template <int V>
    __device__ __forceinline__ bool vec_aligned() const
    {
        return ld % V == 0 && (uintptr_t)dx % (4 * V) == 0 && (uintptr_t)act % (4 * V) == 0;
    }
    template <int V>
    __device__ __forceinline__ InV<V> loadv(int m, int n) const
    {
        if (act)
            return gemm_ldv<V>(act + (size_t)m * ld + n);
        GemmFloats<V> ones;
#pragma unroll
        for (int e = 0; e < V; e++)
            ones.f[e] = 1.0f;
        return ones;
    }
    template <int V>
    __device__ __forceinline__ GemmFloats<V> applyv(int m, int n, GemmFloats<V> v, InV<V> a) const
    {
        return gemm_epi_mapv<V>(*this, dx, m, n, v, a);
    }
};

/* A forward layer's epilogue (bias and ReLU, `base`) followed by dropout of hidden layer `layer`'s output:
 * element (m, n), index first + m x ld + n of the layer's output, kept as the draws d say (Draws::keeps_run,
 * bit e for element index + e of a run). Draws::READS: the bits are read from memory (a mask drawn ahead),
 * in the load phase with the bias, a batch of runs in one round trip; else they are drawn (Philox) in the
 * store phase, where no loaded value waits in a register across the draws' call.
 * Writes base.y and its twin; ld and twin are base's, which the kernels read as the epilogue's
 * (gemm_epi_dropout sets them). */
template <class Draws>
struct GemmEpiDropout {
    GemmEpiBiasRelu base;
    int ld, layer;
    uint32_t first;
    Draws d;
    SnnTwin *twin;
    struct In {
        GemmEpiBiasRelu::In bias;
        uint32_t keep;
    };
    __device__ __forceinline__ uint32_t index(int m, int n) const
    {
        return first + (uint32_t)m * (uint32_t)ld + (uint32_t)n;
    }
    __device__ __forceinline__ In load(int m, int n) const
    {
        return {base.load(m, n), Draws::READS ? d.keeps_run(layer, index(m, n), 1) : 0u};
    }
    __device__ __forceinline__ float apply(int m, int n, float v, In in) const
    {
        const uint32_t keep = Draws::READS ? in.keep : d.keeps_run(layer, index(m, n), 1);
        v = snn_dropout_by(keep, 0, base.out(v, in.bias));
        base.y[(size_t)m * ld + n] = v;
        return v;
    }
    template <int V> struct InV {
        GemmEpiBiasRelu::InV<V> bias;
        uint32_t keep;
    };
    template <int V>
    __device__ __forceinline__ bool vec_aligned() const
    {
        return base.vec_aligned<V>();
    }
    template <int V>
    __device__ __forceinline__ InV<V> loadv(int m, int n) const
    {
        return {base.loadv<V>(m, n), Draws::READS ? d.keeps_run(layer, index(m, n), V) : 0u};
    }
    template <int V>
    __device__ __forceinline__ GemmFloats<V> applyv(int m, int n, GemmFloats<V> v, InV<V> in) const
    {
        const uint32_t keep = Draws::READS ? in.keep : d.keeps_run(layer, index(m, n), V);
#pragma unroll
        for (int i = 0; i < V; i++)
            v.f[i] = snn_dropout_by(keep, i, base.out(v.f[i], in.bias.f[i]));
        gemm_stv(base.y + (size_t)m * ld + n, v);
        return v;
    }
};
template <class Draws>
static __host__ __device__ GemmEpiDropout<Draws> gemm_epi_dropout(const GemmEpiBiasRelu &base, int layer,
                                                                  uint32_t first, const Draws &d)
{
    return {base, base.ld, layer, first, d, base.twin};
}

/* Weight gradient g = gW[m][n] -> the optimizer's update of w[m][n] (kernels/optim.h), its state in
 * state.m[0 .. SNN_OPTIM_MOMENTS - 1] at the same index, the step's factors at *rate. */
struct GemmEpiUpdate {
    float *w;
    SnnTwin *twin; /* of w */
    snn_state state;
    int ld;
    const snn_rate *rate;
    static constexpr int S = SNN_OPTIM_MOMENTS > 0 ? SNN_OPTIM_MOMENTS : 1;
    struct In {
        float w, s[S];
    };
    __device__ __forceinline__ In load(int m, int n) const
    {
        const size_t i = (size_t)m * ld + n;
        In in;
        in.w = w[i];
#pragma unroll
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            in.s[k] = state.m[k][i];
        return in;
    }
    __device__ __forceinline__ float apply(int m, int n, float g, In in) const
    {
        const size_t i = (size_t)m * ld + n;
        const float wn = snn_update(in.w, g, in.s, *rate);
#pragma unroll
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            state.m[k][i] = in.s[k];
        w[i] = wn;
        return wn;
    }
    template <int V>
    struct InV {
        GemmFloats<V> w, s[S];
    };
    template <int V>
    __device__ __forceinline__ bool vec_aligned() const
    {
        bool ok = ld % V == 0 && (uintptr_t)w % (4 * V) == 0;
#pragma unroll
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            ok &= (uintptr_t)state.m[k] % (4 * V) == 0;
        return ok;
    }
    static constexpr int STAGED = 1 + SNN_OPTIM_MOMENTS; /* w, then the state */
    __device__ __forceinline__ const float *staged(int a, int m, int n) const
    {
        const size_t i = (size_t)m * ld + n;
        return a == 0 ? w + i : state.m[a - 1] + i;
    }
    template <int V>
    __device__ __forceinline__ InV<V> staged_in(const GemmFloats<V> (&v)[STAGED]) const
    {
        InV<V> in;
        in.w = v[0];
#pragma unroll
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            in.s[k] = v[1 + k];
        return in;
    }
    template <int V>
    __device__ __forceinline__ InV<V> loadv(int m, int n) const
    {
        const size_t i = (size_t)m * ld + n;
        InV<V> in;
#pragma unroll
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            in.s[k] = gemm_ldv<V>(state.m[k] + i);
        in.w = gemm_ldv<V>(w + i);
        return in;
    }
    template <int V>
    __device__ __forceinline__ GemmFloats<V> applyv(int m, int n, GemmFloats<V> g, InV<V> in) const
    {
        const size_t i = (size_t)m * ld + n;
        const snn_rate r = *rate;
        GemmFloats<V> wn;
#pragma unroll
        for (int e = 0; e < V; e++) {
            float s[S];
#pragma unroll
            for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
                s[k] = in.s[k].f[e];
            wn.f[e] = snn_update(in.w.f[e], g.f[e], s, r);
#pragma unroll
            for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
                in.s[k].f[e] = s[k];
        }
#pragma unroll
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            gemm_stv(state.m[k] + i, in.s[k]);
        gemm_stv(w + i, wn);
        return wn;
    }
};

/* Element (m, n) of C = v through epi, and its twin where there is one. */
template <class Epi>
static __device__ __forceinline__ void gemm_epi_one(const Epi &epi, int m, int n, float v, typename Epi::In in)
{
    const float out = epi.apply(m, n, v, in);
    snn_twin_store(epi.twin, (size_t)m * epi.ld + n, out);
}

/* P runs as gemm_epi_runs takes them, all inside C and vector-aligned, with their staged inputs already
 * loaded (in[p][a]: array a's V values). */
template <int V, int P, class Epi>
static __device__ __forceinline__ void gemm_epi_runs_given(const Epi &epi, const int (&m)[P], const int (&n)[P],
                                                           const GemmFloats<V> (&v)[P],
                                                           const GemmFloats<V> (&in)[P][Epi::STAGED])
{
#pragma unroll
    for (int p = 0; p < P; ++p)
        snn_twin_storev<V>(epi.twin, (size_t)m[p] * epi.ld + n[p],
                           epi.template applyv<V>(m[p], n[p], v[p], epi.template staged_in<V>(in[p])).f);
}

/* P runs of V consecutive elements of a lane's share of C: run p is row
 * m[p], columns n[p] .. n[p] + V - 1 (n[p] a multiple of V), values v[p].
 * Each element inside M x N goes through epi, in the two phases (all the
 * runs' loads, then their stores); by the vector methods where the
 * epilogue's arrays allow and every run lies inside M x N (then without a
 * predicate between the loads, which are issued together). */
template <int V, int P, class Epi>
static __device__ __forceinline__ void gemm_epi_runs(const Epi &epi, int M, int N, const int (&m)[P],
                                                     const int (&n)[P], const GemmFloats<V> (&v)[P])
{
    bool inside = true;
#pragma unroll
    for (int p = 0; p < P; ++p)
        inside &= m[p] < M && n[p] + V - 1 < N;
    if (inside && epi.template vec_aligned<V>()) {
        typename Epi::template InV<V> in[P];
#pragma unroll
        for (int p = 0; p < P; ++p)
            in[p] = epi.template loadv<V>(m[p], n[p]);
#pragma unroll
        for (int p = 0; p < P; ++p)
            snn_twin_storev<V>(epi.twin, (size_t)m[p] * epi.ld + n[p],
                               epi.template applyv<V>(m[p], n[p], v[p], in[p]).f);
        return;
    }
    typename Epi::In in[P][V];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
        for (int e = 0; e < V; ++e)
            if (m[p] < M && n[p] + e < N)
                in[p][e] = epi.load(m[p], n[p] + e);
#pragma unroll
    for (int p = 0; p < P; ++p) {
        if (m[p] >= M)
            continue;
        if (n[p] + V - 1 < N) { /* a whole run: its twin in as few stores as its alignment allows */
            float out[V];
#pragma unroll
            for (int e = 0; e < V; ++e)
                out[e] = epi.apply(m[p], n[p] + e, v[p].f[e], in[p][e]);
            snn_twin_storev<V>(epi.twin, (size_t)m[p] * epi.ld + n[p], out);
        } else {
#pragma unroll
            for (int e = 0; e < V; ++e)
                if (n[p] + e < N)
                    gemm_epi_one(epi, m[p], n[p] + e, v[p].f[e], in[p][e]);
        }
    }
}

#endif
