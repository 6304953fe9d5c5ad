/* The resident fused kernels' GEMM (kernels/cuda/fused/cluster.cu, grid_resident.cu): mma.sync with FP32
 * accumulators (in FP32 the same fragments' products on the CUDA cores) over views of operands (snn_op bits)
 * in shared memory or L2, its k split across warps where the tiles leave warps idle. */
#ifndef SNN_FUSED_MMA16_CUH
#define SNN_FUSED_MMA16_CUH

#include <stdint.h>

#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "arch/sm80/mma.cuh"
#include "kernels/cuda/step_common.cuh"
#include "snn_config.h"

#if !defined(CONFIG_PRECISION_BF16) && !defined(CONFIG_PRECISION_FP16) && !defined(CONFIG_PRECISION_TF32) && \
    !defined(CONFIG_PRECISION_FP32)
#error "the resident fused kernels multiply BF16, FP16, TF32 or FP32 operands"
#endif

/* The operands' element (snn_op, kernels/cuda/step_common.cuh): a fragment's 32-bit register holds OP_ELEMS
 * of them, and a k step is 32 bytes of a row, OP_KSTEP elements: m16n8k16 on 16-bit operands, m16n8k8 on TF32
 * (or FP32, mma16 below). Both instructions place a register's words alike (arch/sm80/mma.cuh), so that the
 * views below, in words, serve both; the bank layouts were chosen for 16-bit operands. */
constexpr int OP_ELEMS = 4 / (int)sizeof(snn_op), OP_KSTEP = 8 * OP_ELEMS;

/* A fragment's register from floats e[0], e[s], ... (OP_ELEMS of them), rounded; the first low. */
static __device__ __forceinline__ uint32_t snn_op_word(const float *e, int s)
{
    if constexpr (OP_ELEMS == 1)
        return snn_op_bits(e[0]);
    else
        return snn_twin_bits2(e[0], e[s]);
}
/* The same from operand bits h[0], h[s], ... */
static __device__ __forceinline__ uint32_t snn_op_word(const snn_op *h, int s)
{
    if constexpr (OP_ELEMS == 1)
        return h[0];
    else
        return (uint32_t)h[0] | (uint32_t)h[s] << 16;
}
/* Byte k of four normalised as the operands take it (snn_pixels_op_exact): by one multiply-add
 * (snn_pixel_fma), which rounds to the 16-bit or TF32 operand of snn_gather_pixel's value; in FP32, which
 * keeps every bit, by its divisions' products and corrections (snn_pixel_divided). */
static __device__ __forceinline__ float snn_pixel_op(uint32_t four, int k)
{
#ifdef CONFIG_PRECISION_FP32
    return snn_pixel_divided(snn_byte_value(four, k));
#else
    return snn_pixel_fma(four, k);
#endif
}
/* Pixel bytes p[0 .. 2 OP_ELEMS), normalised and rounded: two registers. */
static __device__ __forceinline__ uint2 snn_pixels_op(const uint8_t *p)
{
    if constexpr (OP_ELEMS == 1) {
        const uint32_t two = *reinterpret_cast<const uint16_t *>(p);
        return make_uint2(snn_op_bits(snn_pixel_op(two, 0)), snn_op_bits(snn_pixel_op(two, 1)));
    } else {
        return snn_pixels_twin4(*reinterpret_cast<const uint32_t *>(p));
    }
}

/* Whether snn_pixel_op's every byte is the operand snn_gather_pixel's value rounds to: true of both
 * datasets' means and deviations, in every precision. */
static inline bool snn_pixels_op_exact()
{
    for (int c = 0; c < 256; c++) {
#ifdef CONFIG_PRECISION_FP32
        const float op = snn_pixel_divided((float)c);
#else
        const float op = fmaf((float)c, SNN_PIXEL_FMA_SCALE, SNN_PIXEL_FMA_OFFSET);
#endif
        if (snn_op_bits(op) != snn_op_bits(snn_gather_pixel((uint8_t)c, SNN_PIXEL_MEAN, SNN_PIXEL_STD)))
            return false;
    }
    return true;
}

/* A row stride, in elements, for a matrix read QUAD's two words a thread (mma16_gemm): a half warp's four
 * rows of four 8-byte runs fall in distinct banks when rows lie 8 or 24 banks apart (32 bytes mod 64).
 * (Paired steps' 16-byte reads, PAIRS, meet two-way conflicts on it.) */
__host__ __device__ constexpr int mma16_ld(int n)
{
    return snn_round_up(n, OP_KSTEP) % (2 * OP_KSTEP) == OP_KSTEP ? snn_round_up(n, OP_KSTEP)
                                                                  : snn_round_up(n, OP_KSTEP) + OP_KSTEP;
}

/* d += a b for one m16n8 tile and k step. FP32 takes the m16n8k8 fragments' products on the CUDA cores: each
 * lane's four outputs, over the step's eight slots in slot order, their operands shuffled from the lanes that
 * hold them (the sums' order is the slots', not the host's k order). */
static __device__ __forceinline__ void mma16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
#if defined(CONFIG_PRECISION_BF16)
    sm80_mma_16x8x16_f32_bf16(d, a, b);
#elif defined(CONFIG_PRECISION_FP16)
    sm80_mma_16x8x16_f32_f16(d, a, b);
#elif defined(CONFIG_PRECISION_TF32)
    sm80_mma_16x8x8_f32_tf32(d, a, b);
#else
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int j = 0; j < 8; j++) { /* slot j: A's rows g, g + 8 at lane (g, j % 4), B's n at lane (n, j % 4) */
        const float lo = __uint_as_float(__shfl_sync(~0u, a[j < 4 ? 0 : 2], 4 * g + j % 4)),
                    hi = __uint_as_float(__shfl_sync(~0u, a[j < 4 ? 1 : 3], 4 * g + j % 4)),
                    b0 = __uint_as_float(__shfl_sync(~0u, b[j < 4 ? 0 : 1], 8 * t + j % 4)),
                    b1 = __uint_as_float(__shfl_sync(~0u, b[j < 4 ? 0 : 1], 8 * t + 4 + j % 4));
        d[0] = fmaf(lo, b0, d[0]);
        d[1] = fmaf(lo, b1, d[1]);
        d[2] = fmaf(hi, b0, d[2]);
        d[3] = fmaf(hi, b1, d[3]);
    }
#endif
}

/* Operand views, in words of OP_ELEMS elements (a fragment's register). mma16_gemm asks an A operand for
 * a16(m0, k), the m16 x k-step fragment at rows m0.., k0 = k, and a B operand for b16(n0, k), the n8 x k-step
 * one; a step's words are 8 a row, thread t's at words t and t + 4 (16-bit: elements 2t, 2t + 1 and 2t + 8,
 * 2t + 9); QUAD: words 2t and 2t + 1 instead (16-bit: elements 4t .. 4t + 3), the same in both operands (the
 * same products, added by the tensor core in another order). Views built on frag<GAP>(i, k), the words at
 * elements (i, k) and (i, k + GAP), each with its first element low, as mma.sync reads a fragment's register,
 * get both from Mma16Pairs. PAIRS (mma16_gemm): two k steps' fragments at once, a16x2(m0, k, s0, s1) and
 * b16x2, thread t's words 4t .. 4t + 3 of the 16, the first two in step k's QUAD slots and the last two in
 * the next step's: one 16-byte load where QUAD makes two of 8 (views on frag8(i, k, lo, hi), the frag<QUAD's
 * GAP> of k and of k + 2 words). */
template <class View> struct Mma16Pairs {
    static constexpr bool KEEPS = false; /* an A view that keeps what it reads: mma16_gemm hands it back */
    __device__ __forceinline__ void a16x2(int m0, int k, uint4 &s0, uint4 &s1) const
    {
        const int lane = threadIdx.x % 32, g = lane / 4;
        const View &v = static_cast<const View &>(*this);
        uint2 lo0, hi0, lo1, hi1;
        v.frag8(m0 + g, k + 4 * OP_ELEMS * (lane % 4), lo0, hi0);
        v.frag8(m0 + g + 8, k + 4 * OP_ELEMS * (lane % 4), lo1, hi1);
        s0 = make_uint4(lo0.x, lo1.x, lo0.y, lo1.y);
        s1 = make_uint4(hi0.x, hi1.x, hi0.y, hi1.y);
    }
    __device__ __forceinline__ void b16x2(int n0, int k, uint2 &s0, uint2 &s1) const
    {
        const int lane = threadIdx.x % 32;
        static_cast<const View &>(*this).frag8(n0 + lane / 4, k + 4 * OP_ELEMS * (lane % 4), s0, s1);
    }
    template <bool QUAD> __device__ __forceinline__ uint4 a16(int m0, int k) const
    {
        const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        constexpr int GAP = (QUAD ? 1 : 4) * OP_ELEMS;
        k += (QUAD ? 2 : 1) * OP_ELEMS * t;
        const View &v = static_cast<const View &>(*this);
        const uint2 a0 = v.template frag<GAP>(m0 + g, k), a1 = v.template frag<GAP>(m0 + g + 8, k);
        return make_uint4(a0.x, a1.x, a0.y, a1.y);
    }
    template <bool QUAD> __device__ __forceinline__ uint2 b16(int n0, int k) const
    {
        const int lane = threadIdx.x % 32;
        constexpr int GAP = (QUAD ? 1 : 4) * OP_ELEMS;
        return static_cast<const View &>(*this).template frag<GAP>(
            n0 + lane / 4, k + (QUAD ? 2 : 1) * OP_ELEMS * (lane % 4));
    }
};

/* Views whose element (i, k) lies at at(i, k) with a k step's elements contiguous in runs of at least
 * QUAD's two words: each fragment register one 4-byte load, QUAD's two words one of 8, paired steps' four
 * words (frag8) one of 16. */
template <class View> struct Mma16Runs : Mma16Pairs<View> {
    template <int GAP> __device__ __forceinline__ uint2 frag(int i, int k) const
    {
        const View &v = static_cast<const View &>(*this);
        if constexpr (GAP == OP_ELEMS)
            return *reinterpret_cast<const uint2 *>(v.at(i, k));
        else
            return make_uint2(*reinterpret_cast<const uint32_t *>(v.at(i, k)),
                              *reinterpret_cast<const uint32_t *>(v.at(i, k + GAP)));
    }
    __device__ __forceinline__ void frag8(int i, int k, uint2 &lo, uint2 &hi) const
    {
        const uint4 r = *reinterpret_cast<const uint4 *>(static_cast<const View &>(*this).at(i, k));
        lo = make_uint2(r.x, r.y), hi = make_uint2(r.z, r.w);
    }
};

/* A matrix of operand bits whose element (i, j) is p[i * SI + j * SJ]: contiguous rows (SJ 1) by runs, else
 * element by element. */
template <int SI, int SJ> struct Mma16Mat : Mma16Runs<Mma16Mat<SI, SJ>> {
    static_assert(SJ != 1 || SI % (2 * OP_ELEMS) == 0, "mma16 GEMM: rows of whole 8-byte runs");
    const snn_op *p;
    __device__ Mma16Mat(const snn_op *p) : p(p) {}
    __device__ __forceinline__ const snn_op *at(int i, int k) const { return p + i * SI + k * SJ; }
    template <int GAP> __device__ __forceinline__ uint2 frag(int i, int k) const
    {
        if constexpr (SJ == 1) {
            return Mma16Runs<Mma16Mat>::template frag<GAP>(i, k);
        } else {
            const snn_op *e = at(i, k);
            return make_uint2(snn_op_word(e, SJ), snn_op_word(e + GAP * SJ, SJ));
        }
    }
    __device__ __forceinline__ void frag8(int i, int k, uint2 &lo, uint2 &hi) const
    {
        static_assert(SJ == 1 && SI % (4 * OP_ELEMS) == 0,
                      "mma16 GEMM: paired steps read rows of whole 16-byte runs");
        Mma16Runs<Mma16Mat>::frag8(i, k, lo, hi);
    }
};

/* A matrix of operand bits in fragment tiles: element (i, k) in the tile of rows i / 16 and k step
 * k / OP_KSTEP, each tile 16 rows of one k step's 32 bytes, contiguous, a band's tiles in k order. The A
 * fragments a warp loads, 8 rows of one or two k steps, then lie in runs of 256 bytes, whole 128-byte lines:
 * by row, rows a line or more apart, the same loads reach twice the lines. Every block all-gathering such an
 * operand from L2 read it in about half the time (docs/PERF.md v65). KT: a row's k steps. */
template <int KT> struct Mma16Tiled : Mma16Runs<Mma16Tiled<KT>> {
    const snn_op *p;
    __device__ Mma16Tiled(const snn_op *p) : p(p) {}
    static __host__ __device__ constexpr int index(int i, int k)
    {
        return ((i / 16 * KT + k / OP_KSTEP) * 16 + i % 16) * OP_KSTEP + k % OP_KSTEP;
    }
    __device__ __forceinline__ const snn_op *at(int i, int k) const { return p + index(i, k); }
};

/* An FP32 matrix whose element (i, j) is p[i * SI + j * SJ], rounded to an operand as it is read: a block's
 * FP32 tiles (the dlogits, an activation, by row) as operands by column or by row. */
template <int SI, int SJ> struct Mma16FloatMat : Mma16Pairs<Mma16FloatMat<SI, SJ>> {
    const float *p;
    __device__ Mma16FloatMat(const float *p) : p(p) {}
    template <int GAP> __device__ __forceinline__ uint2 frag(int i, int k) const
    {
        const float *e = p + i * SI + k * SJ;
        return make_uint2(snn_op_word(e, SJ), snn_op_word(e + GAP * SJ, SJ));
    }
};

/* FP32 rows as a B operand, QUAD's two words a thread (one 16-byte load, in 32-bit one of 8), rounded as
 * read: unit n0 + n's k-th at p[Rows::at(n0, n) + k], n the unit within an n8 tile (Rows may keep n0's part
 * linear, what a loop can step). */
template <class Rows> struct Mma16FloatRows {
    const float *p;
    template <bool QUAD> __device__ __forceinline__ uint2 b16(int n0, int k) const
    {
        static_assert(QUAD, "mma16 GEMM: FP32 rows are read two words a thread");
        const int lane = threadIdx.x % 32;
        return words(p + Rows::at(n0, lane / 4) + k + 2 * OP_ELEMS * (lane % 4));
    }
    __device__ __forceinline__ void b16x2(int n0, int k, uint2 &s0, uint2 &s1) const
    {
        const int lane = threadIdx.x % 32;
        const float *e = p + Rows::at(n0, lane / 4) + k + 4 * OP_ELEMS * (lane % 4);
        if constexpr (OP_ELEMS == 1) {
            const float4 v = *reinterpret_cast<const float4 *>(e);
            s0 = make_uint2(snn_op_bits(v.x), snn_op_bits(v.y));
            s1 = make_uint2(snn_op_bits(v.z), snn_op_bits(v.w));
        } else {
            const float4 v0 = *reinterpret_cast<const float4 *>(e),
                         v1 = *reinterpret_cast<const float4 *>(e + 4);
            s0 = make_uint2(snn_twin_bits2(v0.x, v0.y), snn_twin_bits2(v0.z, v0.w));
            s1 = make_uint2(snn_twin_bits2(v1.x, v1.y), snn_twin_bits2(v1.z, v1.w));
        }
    }
    /* two words' elements from e on, rounded */
    static __device__ __forceinline__ uint2 words(const float *e)
    {
        if constexpr (OP_ELEMS == 1) {
            const float2 v = *reinterpret_cast<const float2 *>(e);
            return make_uint2(snn_op_bits(v.x), snn_op_bits(v.y));
        } else {
            const float4 v = *reinterpret_cast<const float4 *>(e);
            return make_uint2(snn_twin_bits2(v.x, v.y), snn_twin_bits2(v.z, v.w));
        }
    }
};
/* A block's FP32 rows of units, unit n's at row(n): LD floats apart, LD 8 mod 16, each eight units' rows in
 * the order 0 2 1 3 7 5 6 4. A quarter warp's 16-byte reads of units 2j and 2j + 1 (Mma16FloatRows::b16; its
 * paired reads, 8t apart, meet two-way conflicts) meet rows 16 banks apart, and an update epilogue's access
 * of units 2t (or 2t + 1) for t < 4, 8 k each (a thread's four elements of a tile, mma16_gemm where k is not
 * split), four rows 8 banks apart: both conflict-free. In unit order, rows 16 mod 32 apart serve the reads
 * and put the epilogue's four rows in one run of 8 banks. (Where k is split, a warp's 4 k of units 0-7 meet
 * units four rows apart: two-way.) */
template <int LD> struct Mma16UnitRows {
    static_assert(LD % 16 == 8, "mma16 GEMM: FP32 rows of units 8 mod 16 floats apart");
    static __host__ __device__ constexpr int row(int n)
    {
        return ((n & ~7) + (int)(0x46573120u >> 4 * (n & 7) & 7u)) * LD;
    }
    /* the unit whose row is the r-th of them: the order is its own inverse */
    static __host__ __device__ constexpr int unit(int r) { return row(r) / LD; }
    /* n0 a multiple of 8, its part linear: what a loop can step */
    static __device__ __forceinline__ int at(int n0, int n) { return row(n0 + n); }
    /* Whether the two accesses above meet 32 distinct banks (k offsets shift every row alike): a quarter
     * warp's 16 floats of units 2j and 2j + 1, an epilogue's 8 of units 2t + odd for t < 4; and whether
     * unit() inverts row(). Its users assert it for their LD. */
    static constexpr bool conflict_free()
    {
        auto distinct = [](int rows, const int *at, int floats) {
            bool bank[32] = {};
            for (int i = 0; i < rows; i++)
                for (int f = 0; f < floats; f++) {
                    if (bank[(at[i] + f) % 32])
                        return false;
                    bank[(at[i] + f) % 32] = true;
                }
            return true;
        };
        for (int j = 0; j < 4; j++) {
            const int pair[2] = {row(2 * j), row(2 * j + 1)};
            if (!distinct(2, pair, 16))
                return false;
        }
        for (int odd = 0; odd < 2; odd++) {
            const int four[4] = {row(odd), row(2 + odd), row(4 + odd), row(6 + odd)};
            if (!distinct(4, four, 8))
                return false;
        }
        for (int r = 0; r < 8; r++)
            if (row(unit(r)) != r * LD)
                return false;
        return true;
    }
};

/* An epilogue whose element (m, n) is the gradient of the parameter that at(m, n, w, moments, twin) names
 * (false: padding), updated by snn_param_updates with the moments `stride` floats apart: where k is not split
 * (mma16_gemm), a thread's four elements of a tile together, their chains of arithmetic overlapping. PAIRED:
 * the twins of (m, n) and (m, n + 1), n even, adjacent and aligned for one store of both. */
template <bool PAIRED, class At> struct Mma16Update {
    int stride;
    snn_rate rate;
    At at;
    template <int N>
    __device__ __forceinline__ void updates(const int (&m)[N], const int (&n)[N], const float (&g)[N]) const
    {
        snn_param_updates<N, snn_op, PAIRED && N % 2 == 0>(
            g, stride, rate,
            [&](int i, float *&w, float *&mom, snn_op *&twin) { return at(m[i], n[i], w, mom, twin); });
    }
    __device__ __forceinline__ void operator()(int m, int n, float g) const { updates<1>({m}, {n}, {g}); }
};
template <bool PAIRED = false, class At>
__device__ __forceinline__ Mma16Update<PAIRED, At> mma16_update(int stride, const snn_rate &rate, At at)
{
    return {stride, rate, at};
}
template <class Epi> constexpr bool mma16_is_update = false;
template <bool PAIRED, class At> constexpr bool mma16_is_update<Mma16Update<PAIRED, At>> = true;

/* The k slices of a GEMM of `tiles` 16x8 tiles and kt k steps on `warps` warps: where the tiles leave warps
 * idle, as many as give each warp one. */
__host__ __device__ constexpr int mma16_slices(int warps, int tiles, int kt)
{
    return tiles >= warps ? 1 : snn_imin(warps / tiles, kt);
}

/* C[M][N] = sum over k < K of A(m, k) B(n, k), each element handed to epi(m, n, value) once: by the warp
 * that computed it (an update epilogue, mma16_update, a thread's four of a tile at once), or where k is
 * split, after the block's barrier, by a thread that adds the slices in order. The block's threads all call
 * it. QUAD (the views above): each thread's four k contiguous; off where a strided operand's rows 4 apart
 * share banks, and for ldmatrix in the fragments' own k order (a view whose ldmatrix rows it chooses can hold
 * QUAD's k instead). PAIRS: two k steps' fragments at once (the views above), both operands. CUT: only the
 * first kt_end k steps are summed, a count known at run time (neither operand is read past it). */
template <int THREADS, int M, int N, int K, bool QUAD = true, int RUNS = 4, bool CUT = false,
          bool PAIRS = false, class A, class B, class Epi>
static __device__ __forceinline__ void mma16_gemm(const A &a, const B &b, float (*scratch)[16 * 8],
                                                  const Epi &epi, int kt_end = K / OP_KSTEP)
{
    constexpr int WARPS = THREADS / 32;
    static_assert(M % 16 == 0 && N % 8 == 0 && K % OP_KSTEP == 0,
                  "mma16 GEMM: whole m16n8 tiles and k steps");
    constexpr int MB = M / 16, NB = N / 8, KT = K / OP_KSTEP, KS = mma16_slices(WARPS, MB * NB, KT),
                  PER = (KT + KS - 1) / KS;
    constexpr int ITEMS = MB * NB * KS;
    /* two tiles a warp at once where every warp has two (then k is not split): their chains of mma and their
     * epilogues overlap */
    constexpr int P = ITEMS >= 2 * WARPS ? 2 : 1;
    /* a run of k steps' loads before their products: ldmatrix and mma are volatile asm, which the compiler
     * keeps in program order, and two warps a scheduler cannot hide a load a step */
    constexpr int RUN = snn_imin(RUNS, PER);
    /* one n tile and k not split: every tile has the same B fragments, loaded once where they fit in a few
     * registers (the updates' activations and output gradients: up to 8 k steps, 4 in TF32, whose 8 spilled
     * in 784-130x2-10 b64); not where k ends at run time, which would index them by a run-time step */
    constexpr bool BONCE = NB == 1 && KS == 1 && KT <= 4 * OP_ELEMS && !CUT;
    static_assert(!PAIRS || (QUAD && !A::KEEPS), "mma16 GEMM: paired steps are QUAD's slots, not kept");
    /* B loaded once pairs its steps from 0, the last alone where KT is odd: so do the loops below where runs
     * are the whole of k or a power of two long (halving runs then stay even but for a last single) */
    static_assert(!(PAIRS && BONCE) || RUN == KT || (RUN >= 2 && (RUN & (RUN - 1)) == 0),
                  "mma16 GEMM: B loaded once is paired as the runs pair their steps");
    uint2 bonce[BONCE ? KT : 1];
    if constexpr (BONCE) { /* paired as the steps below pair them: from 0, the last alone where KT is odd */
#pragma unroll
        for (int kt = 0; kt < KT; kt += PAIRS ? 2 : 1) {
            if constexpr (PAIRS)
                if (kt + 1 < KT) {
                    b.b16x2(0, kt * OP_KSTEP, bonce[kt], bonce[kt + 1]);
                    continue;
                }
            bonce[kt] = b.template b16<QUAD>(0, kt * OP_KSTEP);
        }
    }
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int item0 = threadIdx.x / 32; item0 < ITEMS; item0 += P * WARPS) {
        const int ks = item0 % KS, k1 = snn_imin(CUT ? snn_imin(KT, kt_end) : KT, (ks + 1) * PER);
        int m0[P], n0[P];
        bool on[P];
#pragma unroll
        for (int j = 0; j < P; j++) {
            const int item = item0 + j * WARPS, tile = (item < ITEMS ? item : item0) / KS;
            on[j] = item < ITEMS;
            m0[j] = tile / NB * 16;
            n0[j] = tile % NB * 8;
        }
        float d[P][4] = {};
        /* STEPS k steps from kt: their loads, then their products, then the kept fragments */
        auto steps = [&](auto n, int kt) {
            constexpr int STEPS = decltype(n)::value;
            uint4 af[P][STEPS];
            uint2 bf[P][STEPS];
#pragma unroll
            for (int u = 0; u < STEPS; u += PAIRS ? 2 : 1)
#pragma unroll
                for (int j = 0; j < P; j++) {
                    if constexpr (PAIRS)
                        if (u + 1 < STEPS) {
                            a.a16x2(m0[j], (kt + u) * OP_KSTEP, af[j][u], af[j][u + 1]);
                            if constexpr (BONCE)
                                bf[j][u] = bonce[kt + u], bf[j][u + 1] = bonce[kt + u + 1];
                            else
                                b.b16x2(n0[j], (kt + u) * OP_KSTEP, bf[j][u], bf[j][u + 1]);
                            continue;
                        }
                    af[j][u] = a.template a16<QUAD>(m0[j], (kt + u) * OP_KSTEP);
                    if constexpr (BONCE)
                        bf[j][u] = bonce[kt + u];
                    else
                        bf[j][u] = b.template b16<QUAD>(n0[j], (kt + u) * OP_KSTEP);
                }
#pragma unroll
            for (int u = 0; u < STEPS; u++)
#pragma unroll
                for (int j = 0; j < P; j++)
                    if (on[j]) {
                        const uint32_t a4[4] = {af[j][u].x, af[j][u].y, af[j][u].z, af[j][u].w};
                        const uint32_t b2[2] = {bf[j][u].x, bf[j][u].y};
                        mma16(d[j], a4, b2);
                    }
            if constexpr (A::KEEPS) {
                static_assert(QUAD, "mma16 GEMM: a kept operand's fragments are read four k a thread");
#pragma unroll
                for (int u = 0; u < STEPS; u++)
#pragma unroll
                    for (int j = 0; j < P; j++)
                        a.keep(m0[j], (kt + u) * OP_KSTEP, af[j][u]);
            }
        };
        /* whole runs, then the slice's last steps: no guard in a run, whose branches would keep each load's
         * uses beside it, and k offsets the compiler can step. After runs longer than 4 (operands from L2,
         * each run a round trip), the rest in runs of the powers of two below RUN, halving (even, so that
         * paired steps stay paired); else two at a time where steps pair, then one at a time. Paired, a run's
         * steps pair from its start. The same products in the same order for the same RUNS and PAIRS. */
        int kt = ks * PER;
#pragma unroll(BONCE ? KT : 1)
        for (; kt + RUN <= k1; kt += RUN)
            steps(std::integral_constant<int, RUN>{}, kt);
        if constexpr (RUN > 4) {
            auto halves = [&](auto run, auto &self) {
                constexpr int R = decltype(run)::value;
                if (kt + R <= k1) {
                    steps(run, kt);
                    kt += R;
                }
                if constexpr (R > 1)
                    self(std::integral_constant<int, R / 2>{}, self);
            };
            constexpr int HALF = [] {
                int h = 1;
                while (2 * h < RUN)
                    h *= 2;
                return h;
            }();
            halves(std::integral_constant<int, HALF>{}, halves);
        }
        if constexpr (PAIRS) {
#pragma unroll(BONCE ? KT : 1)
            for (; kt + 2 <= k1; kt += 2)
                steps(std::integral_constant<int, 2>{}, kt);
        }
#pragma unroll(BONCE ? KT : 1)
        for (; kt < k1; ++kt)
            steps(std::integral_constant<int, 1>{}, kt);
        /* an update's: a tile's elements of the thread together, n in pairs (Mma16Update's PAIRED) */
        if constexpr (KS == 1 && mma16_is_update<Epi>) {
#pragma unroll
            for (int j = 0; j < P; j++)
                if (on[j])
                    epi.updates({m0[j] + g, m0[j] + g, m0[j] + g + 8, m0[j] + g + 8},
                                {n0[j] + 2 * t, n0[j] + 2 * t + 1, n0[j] + 2 * t, n0[j] + 2 * t + 1}, d[j]);
        } else {
#pragma unroll
            for (int j = 0; j < P; j++) {
                if constexpr (KS == 1) {
                    if (on[j]) {
                        epi(m0[j] + g, n0[j] + 2 * t, d[j][0]);
                        epi(m0[j] + g, n0[j] + 2 * t + 1, d[j][1]);
                        epi(m0[j] + g + 8, n0[j] + 2 * t, d[j][2]);
                        epi(m0[j] + g + 8, n0[j] + 2 * t + 1, d[j][3]);
                    }
                } else {
                    float *s = scratch[item0];
                    s[g * 8 + 2 * t] = d[j][0];
                    s[g * 8 + 2 * t + 1] = d[j][1];
                    s[(g + 8) * 8 + 2 * t] = d[j][2];
                    s[(g + 8) * 8 + 2 * t + 1] = d[j][3];
                }
            }
        }
    }
    if constexpr (KS > 1) {
        __syncthreads();
        for (int e = threadIdx.x; e < M * N; e += THREADS) {
            const int m = e / N, n = e % N, tile = m / 16 * NB + n / 8, at = m % 16 * 8 + n % 8;
            float v = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks)
                v += scratch[tile * KS + ks][at];
            epi(m, n, v);
        }
    }
}

#endif
