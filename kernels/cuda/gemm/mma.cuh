/* The tensor-core GEMM on mma.sync, in the configured precision (CONFIG_PRECISION_TF32, _FP16,
 * _FP16_ACC16, _BF16): C[m][n] = sum_k A(m,k) B(n,k), each element through the role's epilogue. Operands
 * stay FP32 in memory (the masters; the update in the epilogue is FP32) and are rounded to nearest even
 * either here, as they are staged, or by the kernels that write them, into 16-bit twins (CONFIG_GEMM_TWINS,
 * kernels/cuda/twin.h) read at half the bytes: the same products either way. Each shared tile keeps its
 * operand's layout, so global loads are wide and coalesced; the fragment loads read both layouts (shape:
 * gemm/mma_shape.cuh). Turing: registers -> FP16 shared tiles -> ldmatrix, m16n8k8. Ampere (and sm90 where
 * wgmma does not run): a cp.async ring; FP32 tiles rounded as fragments are built, or 16-bit tiles and
 * ldmatrix with the next k step's fragments loaded under this one's MMAs. mma.sync sums in a fixed order and
 * each C element is one lane's: deterministic. Any M, N, K: zero-filled loads, predicated stores. */
#ifndef SNN_GEMM_MMA_CUH
#define SNN_GEMM_MMA_CUH

#include <stdint.h>

#include <type_traits>

#include <cuda_runtime.h>

#include "arch/cuda/launch.cuh"
#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/launch.cuh"
#include "kernels/cuda/gemm/mma_inst.cuh"
#include "kernels/cuda/gemm/mma_shape.cuh"
#include "kernels/cuda/gemm/pipeline.cuh"
#include "kernels/cuda/gemm/split_k.cuh"

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

/* The shared element for global elements G: 16-bit twins as they are;
 * FP32 rounded to FP16 on Turing, kept on Ampere. */
template <class G>
using GemmMmaElem = std::conditional_t<sizeof(G) == 2, G, std::conditional_t<GEMM_MMA_TURING, __half, float>>;

/* An operand as this kernel stages it from global elements G: in its global layout (KW: whole k tiles). */
template <class T, int L, int ROWS, int VEC, class G, bool KW>
using GemmMmaOperand = GemmOperand<T, L, ROWS, VEC, L,
                                   gemm_mma_stride(L == GEMM_MN_MAJOR ? ROWS : T::BK, L, (int)sizeof(GemmMmaElem<G>)),
                                   GemmMmaElem<G>, G, KW>;

/* Fragments of one k step (GEMM_MMA_KSTEP) from a shared tile of E whose element (r, k) lies at
 * s[k * S + r] (MN-major) or s[r * S + k] (K-major); r0, k0: the instruction tile's origin. A fragments are
 * four registers (a0, a1: rows g, g + 8 at k; a2, a3: at k + 8), B fragments two (k, k + 8): one m16n8k16,
 * or two m16n8k8 on Turing. */
template <int LAYOUT, int S, class E>
struct GemmMmaFrag;

/* 16-bit tiles: ldmatrix (.trans for MN-major tiles). */
template <int LAYOUT, int S>
struct GemmMmaFragLdmatrix {
    static __device__ __forceinline__ void load_a(uint32_t (&a)[4], const void *tile, int r0, int k0, int lane)
    {
        const uint16_t *s = static_cast<const uint16_t *>(tile);
        const int i = lane / 8, j = lane % 8;
        if constexpr (LAYOUT == GEMM_MN_MAJOR)
            sm75_ldmatrix_x4_trans(a, s + (k0 + (i / 2) * 8 + j) * S + r0 + (i % 2) * 8);
        else
            sm75_ldmatrix_x4(a, s + (r0 + (i % 2) * 8 + j) * S + k0 + (i / 2) * 8);
    }
    static __device__ __forceinline__ void load_b(uint32_t (&b)[2], const void *tile, int n0, int k0, int lane)
    {
        const uint16_t *s = static_cast<const uint16_t *>(tile);
        const int i = lane / 8 % 2, j = lane % 8;
        if constexpr (LAYOUT == GEMM_MN_MAJOR)
            sm75_ldmatrix_x2_trans(b, s + (k0 + i * 8 + j) * S + n0);
        else
            sm75_ldmatrix_x2(b, s + (n0 + j) * S + k0 + i * 8);
    }
    /* Those of the n tiles n0 (b0) and n0 + 8 (b1), by one ldmatrix.x4. */
    static __device__ __forceinline__ void load_b2(uint32_t (&b0)[2], uint32_t (&b1)[2], const void *tile, int n0,
                                                   int k0, int lane)
    {
        const uint16_t *s = static_cast<const uint16_t *>(tile);
        const int i = lane / 8, j = lane % 8;
        uint32_t r[4];
        if constexpr (LAYOUT == GEMM_MN_MAJOR)
            sm75_ldmatrix_x4_trans(r, s + (k0 + (i % 2) * 8 + j) * S + n0 + (i / 2) * 8);
        else
            sm75_ldmatrix_x4(r, s + (n0 + (i / 2) * 8 + j) * S + k0 + (i % 2) * 8);
        b0[0] = r[0];
        b0[1] = r[1];
        b1[0] = r[2];
        b1[1] = r[3];
    }
};
template <int LAYOUT, int S>
struct GemmMmaFrag<LAYOUT, S, __half> : GemmMmaFragLdmatrix<LAYOUT, S> {
};
template <int LAYOUT, int S>
struct GemmMmaFrag<LAYOUT, S, __nv_bfloat16> : GemmMmaFragLdmatrix<LAYOUT, S> {
};

#if !GEMM_MMA_TURING
/* FP32 tiles (Ampere): elements read and rounded as the fragments are built. */
template <int LAYOUT, int S>
struct GemmMmaFrag<LAYOUT, S, float> {
    static __device__ __forceinline__ float at(const float *s, int r, int k)
    {
        return s[LAYOUT == GEMM_MN_MAJOR ? k * S + r : r * S + k];
    }
    static __device__ __forceinline__ void load_b2(uint32_t (&b0)[2], uint32_t (&b1)[2], const float *s, int n0, int k0,
                                                   int lane)
    {
        load_b(b0, s, n0, k0, lane);
        load_b(b1, s, n0 + GEMM_MMA_N, k0, lane);
    }
#if defined(CONFIG_PRECISION_TF32)
    static __device__ __forceinline__ uint32_t word(const float *s, int r, int k) { return sm80_cvt_tf32(at(s, r, k)); }
    static __device__ __forceinline__ void load_a(uint32_t (&a)[4], const float *s, int r0, int k0, int lane)
    {
        const int g = lane / 4, t = lane % 4;
        a[0] = word(s, r0 + g, k0 + t);
        a[1] = word(s, r0 + g + 8, k0 + t);
        a[2] = word(s, r0 + g, k0 + t + 4);
        a[3] = word(s, r0 + g + 8, k0 + t + 4);
    }
    static __device__ __forceinline__ void load_b(uint32_t (&b)[2], const float *s, int n0, int k0, int lane)
    {
        const int g = lane / 4, t = lane % 4;
        b[0] = word(s, n0 + g, k0 + t);
        b[1] = word(s, n0 + g, k0 + t + 4);
    }
#else
    /* Elements (r, k) and (r, k + 1), rounded and packed; one 8-byte load from a K-major tile. */
    static __device__ __forceinline__ uint32_t word(const float *s, int r, int k)
    {
        float2 v;
        if constexpr (LAYOUT == GEMM_MN_MAJOR)
            v = make_float2(at(s, r, k), at(s, r, k + 1));
        else
            v = *reinterpret_cast<const float2 *>(s + r * S + k);
#if defined(CONFIG_PRECISION_BF16)
        return sm80_pack_bf16x2(v.x, v.y);
#else
        return sm75_pack_f16x2(v.x, v.y);
#endif
    }
    static __device__ __forceinline__ void load_a(uint32_t (&a)[4], const float *s, int r0, int k0, int lane)
    {
        const int g = lane / 4, t = lane % 4;
        a[0] = word(s, r0 + g, k0 + 2 * t);
        a[1] = word(s, r0 + g + 8, k0 + 2 * t);
        a[2] = word(s, r0 + g, k0 + 2 * t + 8);
        a[3] = word(s, r0 + g + 8, k0 + 2 * t + 8);
    }
    static __device__ __forceinline__ void load_b(uint32_t (&b)[2], const float *s, int n0, int k0, int lane)
    {
        const int g = lane / 4, t = lane % 4;
        b[0] = word(s, n0 + g, k0 + 2 * t);
        b[1] = word(s, n0 + g, k0 + 2 * t + 8);
    }
#endif
};
#endif

/* The ring of the kernel on global elements G in layouts LA, LB: its stages, and the bytes of one. */
template <class T, class G, int LA, int LB>
struct GemmMmaRing {
    static constexpr int STAGES = gemm_mma_ring_stages<T>(LA, LB, sizeof(GemmMmaElem<G>));
    static constexpr int STAGE_BYTES = gemm_mma_stage_bytes<T>(LA, LB, sizeof(GemmMmaElem<G>));
};

/* One k step's fragments of a warp tile. */
template <class T>
struct GemmMmaFrags {
    uint32_t a[T::WM / GEMM_MMA_M][4];
    uint32_t b[T::WN / GEMM_MMA_N][2];
};

/* f = the fragments of the warp tile at (wm, wn) at k from the shared tiles As, Bs. */
template <class T, class FragA, class FragB, class E>
static __device__ __forceinline__ void gemm_mma_load(GemmMmaFrags<T> &f, const E *As, const E *Bs, int wm, int wn,
                                                     int k, int lane)
{
    constexpr int TILES_M = T::WM / GEMM_MMA_M, TILES_N = T::WN / GEMM_MMA_N;
#pragma unroll
    for (int i = 0; i < TILES_M; ++i)
        FragA::load_a(f.a[i], As, wm + i * GEMM_MMA_M, k, lane);
#pragma unroll
    for (int j = 0; j + 1 < TILES_N; j += 2) /* two n tiles per load */
        FragB::load_b2(f.b[j], f.b[j + 1], Bs, wn + j * GEMM_MMA_N, k, lane);
    if constexpr (TILES_N % 2)
        FragB::load_b(f.b[TILES_N - 1], Bs, wn + (TILES_N - 1) * GEMM_MMA_N, k, lane);
}

/* acc += the products of one k step's fragments. */
template <class T>
static __device__ __forceinline__ void
    gemm_mma_step(GemmMmaAcc (&acc)[T::WM / GEMM_MMA_M][T::WN / GEMM_MMA_N][GEMM_MMA_ACC_REGS],
                  const GemmMmaFrags<T> &f)
{
#pragma unroll
    for (int j = 0; j < T::WN / GEMM_MMA_N; ++j)
#pragma unroll
        for (int i = 0; i < T::WM / GEMM_MMA_M; ++i)
            gemm_mma(acc[i][j], f.a[i], f.b[j]);
}

/* One block tile: C[m][n] = sum_k A(m,k) B(n,k) for m0 <= m < min(m0 + BM, M), n0 <= n < min(n0 + BN, N),
 * each through the epilogue epi, over the k tiles kt_begin .. kt_end - 1, staged in smem (the ring's
 * bytes). KW: K is a multiple of the block tile's (GemmOperand's WHOLE_K). The kernel below runs one per
 * block; the fused step (kernels/cuda/fused/) several per block. */
template <class T, class G, int LA, int LB, int VA, int VB, bool KW, class Epi>
static __device__ __forceinline__ void gemm_mma_tile(unsigned char *smem_bytes, const G *__restrict__ A, int lda,
                                                     const G *__restrict__ B, int ldb, int M, int N, int K, int m0,
                                                     int n0, int kt_begin, int kt_end, const Epi &epi)
{
    constexpr int TILES_M = T::WM / GEMM_MMA_M, TILES_N = T::WN / GEMM_MMA_N;
    typedef GemmMmaElem<G> E;
    constexpr int STAGES = GemmMmaRing<T, G, LA, LB>::STAGES;
    using OpA = GemmMmaOperand<T, LA, T::BM, VA, G, KW>;
    using OpB = GemmMmaOperand<T, LB, T::BN, VB, G, KW>;
    using FragA = GemmMmaFrag<OpA::kSmemLayout, OpA::kStride, E>;
    using FragB = GemmMmaFrag<OpB::kSmemLayout, OpB::kStride, E>;

    const int warp = threadIdx.x / SNN_CUDA_WARP, lane = threadIdx.x % SNN_CUDA_WARP;
    const int wm = (warp / T::WARPS_N) * T::WM, wn = (warp % T::WARPS_N) * T::WN;

    GemmMmaAcc acc[TILES_M][TILES_N][GEMM_MMA_ACC_REGS];
#pragma unroll
    for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int j = 0; j < TILES_N; ++j)
#pragma unroll
            for (int e = 0; e < GEMM_MMA_ACC_REGS; ++e)
                acc[i][j][e] = 0;

    constexpr int STEPS = T::BK / GEMM_MMA_KSTEP;
    E *smem = reinterpret_cast<E *>(smem_bytes);
    auto load = [&](GemmMmaFrags<T> &f, const E *As, const E *Bs, int step) {
        gemm_mma_load<T, FragA, FragB>(f, As, Bs, wm, wn, step * GEMM_MMA_KSTEP, lane);
    };
    auto step = [&](const GemmMmaFrags<T> &f) { gemm_mma_step<T>(acc, f); };
#if SNN_ARCH_HAS_CP_ASYNC
    /* 16-bit tiles only: ldmatrix loads fragments straight into their registers, where FP32 tiles build them
     * through loads and conversions whose temporaries, beside a second fragment set, spill */
    if constexpr (STEPS % 2 == 0 && sizeof(E) == 2)
        gemm_mainloop_overlapped<T, OpA, OpB, STAGES, STEPS, GemmMmaFrags<T>>(smem, A, lda, B, ldb, M, N, K, m0, n0,
                                                                             kt_begin, kt_end, load, step);
    else
#endif
        /* one k tile at a time, WK deep per unrolled step group */
        gemm_mainloop<T, OpA, OpB, STAGES>(smem, A, lda, B, ldb, M, N, K, m0, n0, kt_begin, kt_end,
                                           [&](const E *As, const E *Bs) {
#pragma unroll 1
                                               for (int kk = 0; kk < STEPS; kk += T::WK / GEMM_MMA_KSTEP)
#pragma unroll
                                                   for (int s = kk; s < kk + T::WK / GEMM_MMA_KSTEP; ++s) {
                                                       GemmMmaFrags<T> f;
                                                       load(f, As, Bs, s);
                                                       step(f);
                                                   }
                                           });

    /* the epilogue one row of the warp tile at a time (a whole tile's inputs would not fit in registers
     * beside the accumulators) */
    const int lm = m0 + wm + lane / 4, ln = n0 + wn + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int m[TILES_N], n[TILES_N];
            GemmFloats<2> v[TILES_N];
#pragma unroll
            for (int j = 0; j < TILES_N; ++j) {
                m[j] = lm + i * GEMM_MMA_M + h * 8;
                n[j] = ln + j * GEMM_MMA_N;
                v[j].f[0] = gemm_mma_acc(acc[i][j], 2 * h);
                v[j].f[1] = gemm_mma_acc(acc[i][j], 2 * h + 1);
            }
            gemm_epi_runs(epi, M, N, m, n, v);
        }
}

/* The block tile (blockIdx.y, blockIdx.x) over k tiles [z per, (z + 1) per) in the block's slice z. */
template <class T, class G, int LA, int LB, int VA, int VB, bool KW, class Epi>
__global__ void __launch_bounds__(T::THREADS)
    gemm_mma_kernel(const G *__restrict__ A, int lda, const G *__restrict__ B, int ldb, int M, int N, int K, int per,
                    Epi epi)
{
    snn_grid_wait();
    extern __shared__ __align__(16) unsigned char gemm_mma_smem[];
    const int kt_begin = blockIdx.z * per, kt_end = min(kt_begin + per, (K + T::BK - 1) / T::BK);
    gemm_mma_tile<T, G, LA, LB, VA, VB, KW>(gemm_mma_smem, A, lda, B, ldb, M, N, K, blockIdx.y * T::BM,
                                            blockIdx.x * T::BN, kt_begin, kt_end, epi);
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

/* The instance of gemm_mma_kernel for these operands (elements G in layouts LA, LB), opted in to its shared
 * memory: on twins the instance of 16-byte loads, with whole k tiles (KW: no zero-fill sizes) where K allows
 * and an operand is K-major; on FP32 operands, 4-float loads of each where its layout and alignment allow. */
template <class T, int LA, int LB, class Epi, class G>
static auto gemm_mma_instance(const G *A, int lda, const G *B, int ldb, int K)
{
    typedef GemmMmaRing<T, G, LA, LB> Ring;
    constexpr int SMEM = Ring::STAGE_BYTES * Ring::STAGES;
    if constexpr (sizeof(G) == 2) {
        if constexpr (SNN_ARCH_HAS_CP_ASYNC && (LA == GEMM_K_MAJOR || LB == GEMM_K_MAJOR))
            if (K % T::BK == 0)
                return gemm_opted_in<gemm_mma_kernel<T, G, LA, LB, 8, 8, true, Epi>, SMEM>();
        return gemm_opted_in<gemm_mma_kernel<T, G, LA, LB, 8, 8, false, Epi>, SMEM>();
    } else {
        constexpr bool CAN_A = gemm_vec_allowed<T, LA, T::BM, false>(), CAN_B = gemm_vec_allowed<T, LB, T::BN, false>();
        const bool va = CAN_A && gemm_vec_aligned(A, lda), vb = CAN_B && gemm_vec_aligned(B, ldb);
        if constexpr (CAN_A && CAN_B)
            if (va && vb)
                return gemm_opted_in<gemm_mma_kernel<T, G, LA, LB, 4, 4, false, Epi>, SMEM>();
        if constexpr (CAN_A)
            if (va)
                return gemm_opted_in<gemm_mma_kernel<T, G, LA, LB, 4, 1, false, Epi>, SMEM>();
        if constexpr (CAN_B)
            if (vb)
                return gemm_opted_in<gemm_mma_kernel<T, G, LA, LB, 1, 4, false, Epi>, SMEM>();
        return gemm_opted_in<gemm_mma_kernel<T, G, LA, LB, 1, 1, false, Epi>, SMEM>();
    }
}

#endif
