/* Tensor-core GEMM for the three roles of a linear layer, in the precision
 * the config chose (CONFIG_PRECISION_TF32, _FP16, _FP16_ACC16, _BF16): the
 * same C[m][n] = sum_k A(m,k) B(n,k), operand layouts and epilogues as the
 * FP32 kernel (gemm.cu), on mma.sync.
 *
 * Design: activations, weights and momentum stay FP32 in memory, the
 * masters, and the FP32 epilogues take FP32 results: the SGD update in the
 * weight-gradient epilogue is exact FP32 (no FP16 weight update that small
 * steps would vanish in). The operands are rounded to the precision either
 * by this kernel, as it stages FP32 tensors, or, with CONFIG_GEMM_TWINS, by
 * the kernels that write them, into 16-bit twins (kernels/cuda/twin.h) that
 * this kernel then reads at half the bytes. Both round to nearest even: the
 * same products either way.
 *
 * Shape (gemm_mma.h): the role's block and warp tiles
 * (CONFIG_GEMM_<ROLE>_BLOCK_* and _WARP_*), the warp tile in 16 x 8
 * instruction tiles. Each operand tile keeps its global layout in shared
 * memory (X, dY as rows along k; W, dY^T in the weight gradient as k lines
 * of rows), so global loads are wide and coalesced and need no
 * transposition; the fragment loads handle both.
 * - Turing (sm75): global -> registers (FP32) -> FP16 -> shared, the next
 *   tile in registers while the current one is used (gemm_pipeline.cuh);
 *   fragments by ldmatrix (.trans for k-major tiles); mma.sync m16n8k8.
 * - Ampere (sm80; sm90 where wgmma does not run): cp.async ring of
 *   CONFIG_GEMM_STAGES tiles (GemmMmaRing: the FP32-operand kernels of a
 *   build with twins as many as fit). From FP32 operands, FP32 tiles whose
 *   fragments are read from shared memory and rounded in registers (f16x2,
 *   bf16x2, or tf32 by cvt.rna); from twins, 16-bit tiles and ldmatrix, as
 *   on Turing, the next k step's fragments loaded while this one's MMAs
 *   run, across the ring's barrier (gemm_mainloop_overlapped). mma.sync
 *   m16n8k16, or m16n8k8 for TF32.
 * mma.sync sums in a fixed order, and each C element is owned by one lane:
 * deterministic, no atomics. Any M, N, K: loads zero-filled past K,
 * predicated stores. Where the tiles leave SMs idle the k range is split
 * (gemm_split_k.h); the slices' partial sums are added in slice order. */
#include <stdint.h>

#include <type_traits>

#include <cuda_runtime.h>

#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_launch.cuh"
#include "kernels/cuda/gemm_mma.h"
#include "kernels/cuda/gemm_mma_inst.cuh"
#include "kernels/cuda/gemm_pipeline.cuh"
#include "kernels/cuda/gemm_split_k.cuh"

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

/* The shared element for global elements G: 16-bit twins as they are;
 * FP32 rounded to FP16 on Turing, kept on Ampere. */
template <class G>
using GemmMmaElem = std::conditional_t<sizeof(G) == 2, G, std::conditional_t<GEMM_MMA_TURING, __half, float>>;

/* An operand as this kernel stages it from global elements G: kept in its global layout (KW: whole k tiles). */
template <class T, int L, int ROWS, int VEC, class G, bool KW>
using GemmMmaOperand = GemmOperand<T, L, ROWS, VEC, L == GEMM_R_CONTIG,
                                   gemm_mma_stride(L == GEMM_R_CONTIG ? ROWS : T::BK, L == GEMM_R_CONTIG,
                                                   (int)sizeof(GemmMmaElem<G>)),
                                   GemmMmaElem<G>, G, KW>;

/* Fragments of one k step (GEMM_MMA_KSTEP) from a shared tile of E whose
 * element (r, k) lies at s[k * S + r] (KMAJOR) or s[r * S + k]; r0, k0: the
 * instruction tile's origin. A fragments are four registers (a0, a1: rows
 * g, g + 8 at k; a2, a3: at k + 8), B fragments two (k, k + 8): one
 * m16n8k16, or two m16n8k8 on Turing. */
template <bool KMAJOR, int S, class E>
struct GemmMmaFrag;

/* 16-bit tiles: ldmatrix (.trans for k-major tiles). */
template <bool KMAJOR, int S>
struct GemmMmaFragLdmatrix {
    static __device__ __forceinline__ void load_a(uint32_t (&a)[4], const void *tile, int r0, int k0, int lane)
    {
        const uint16_t *s = static_cast<const uint16_t *>(tile);
        const int i = lane / 8, j = lane % 8;
        if constexpr (KMAJOR)
            sm75_ldmatrix_x4_trans(a, s + (k0 + (i / 2) * 8 + j) * S + r0 + (i % 2) * 8);
        else
            sm75_ldmatrix_x4(a, s + (r0 + (i % 2) * 8 + j) * S + k0 + (i / 2) * 8);
    }
    static __device__ __forceinline__ void load_b(uint32_t (&b)[2], const void *tile, int n0, int k0, int lane)
    {
        const uint16_t *s = static_cast<const uint16_t *>(tile);
        const int i = lane / 8 % 2, j = lane % 8;
        if constexpr (KMAJOR)
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
        if constexpr (KMAJOR)
            sm75_ldmatrix_x4_trans(r, s + (k0 + (i % 2) * 8 + j) * S + n0 + (i / 2) * 8);
        else
            sm75_ldmatrix_x4(r, s + (n0 + (i / 2) * 8 + j) * S + k0 + (i % 2) * 8);
        b0[0] = r[0];
        b0[1] = r[1];
        b1[0] = r[2];
        b1[1] = r[3];
    }
};
template <bool KMAJOR, int S>
struct GemmMmaFrag<KMAJOR, S, __half> : GemmMmaFragLdmatrix<KMAJOR, S> {
};
template <bool KMAJOR, int S>
struct GemmMmaFrag<KMAJOR, S, __nv_bfloat16> : GemmMmaFragLdmatrix<KMAJOR, S> {
};

#if !GEMM_MMA_TURING
/* FP32 tiles (Ampere): elements read and rounded as the fragments are built. */
template <bool KMAJOR, int S>
struct GemmMmaFrag<KMAJOR, S, float> {
    static __device__ __forceinline__ float at(const float *s, int r, int k) { return s[KMAJOR ? k * S + r : r * S + k]; }
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
    /* Elements (r, k) and (r, k + 1), rounded and packed; one 8-byte load from a row-major tile. */
    static __device__ __forceinline__ uint32_t word(const float *s, int r, int k)
    {
        float2 v;
        if constexpr (KMAJOR)
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
    static constexpr bool A_K_CONTIG = LA == GEMM_K_CONTIG, B_K_CONTIG = LB == GEMM_K_CONTIG;
    static constexpr int STAGES = gemm_mma_ring_stages<T>(A_K_CONTIG, B_K_CONTIG, sizeof(GemmMmaElem<G>));
    static constexpr int STAGE_BYTES = gemm_mma_stage_bytes<T>(A_K_CONTIG, B_K_CONTIG, sizeof(GemmMmaElem<G>));
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

/* C[m][n] = sum_k A(m,k) B(n,k) for m < M, n < N, each through the
 * epilogue epi; over k tiles [z per, (z + 1) per) in the block's slice z.
 * KW: K is a multiple of the block tile's (GemmOperand's WHOLE_K). */
template <class T, class G, int LA, int LB, int VA, int VB, bool KW, class Epi>
__global__ void __launch_bounds__(T::THREADS)
    gemm_mma_kernel(const G *__restrict__ A, int lda, const G *__restrict__ B, int ldb, int M, int N, int K, int per,
                    Epi epi)
{
    constexpr int TILES_M = T::WM / GEMM_MMA_M, TILES_N = T::WN / GEMM_MMA_N;
    typedef GemmMmaElem<G> E;
    constexpr int STAGES = GemmMmaRing<T, G, LA, LB>::STAGES;
    using OpA = GemmMmaOperand<T, LA, T::BM, VA, G, KW>;
    using OpB = GemmMmaOperand<T, LB, T::BN, VB, G, KW>;
    using FragA = GemmMmaFrag<OpA::kKMajor, OpA::kStride, E>;
    using FragB = GemmMmaFrag<OpB::kKMajor, OpB::kStride, E>;
    extern __shared__ __align__(16) unsigned char gemm_mma_smem[];

    const int warp = threadIdx.x / SNN_CUDA_WARP, lane = threadIdx.x % SNN_CUDA_WARP;
    const int wm = (warp / T::WARPS_N) * T::WM, wn = (warp % T::WARPS_N) * T::WN;
    const int kt_begin = blockIdx.z * per, kt_end = min(kt_begin + per, (K + T::BK - 1) / T::BK);

    GemmMmaAcc acc[TILES_M][TILES_N][GEMM_MMA_ACC_REGS];
#pragma unroll
    for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int j = 0; j < TILES_N; ++j)
#pragma unroll
            for (int e = 0; e < GEMM_MMA_ACC_REGS; ++e)
                acc[i][j][e] = 0;

    constexpr int STEPS = T::BK / GEMM_MMA_KSTEP;
    E *smem = reinterpret_cast<E *>(gemm_mma_smem);
    auto load = [&](GemmMmaFrags<T> &f, const E *As, const E *Bs, int step) {
        gemm_mma_load<T, FragA, FragB>(f, As, Bs, wm, wn, step * GEMM_MMA_KSTEP, lane);
    };
    auto step = [&](const GemmMmaFrags<T> &f) { gemm_mma_step<T>(acc, f); };
#if SNN_ARCH_HAS_CP_ASYNC
    /* 16-bit tiles only: ldmatrix loads fragments straight into their registers, where FP32 tiles build them
     * through loads and conversions whose temporaries, beside a second fragment set, spilled (716 bytes per
     * thread on a 64x64 warp tile, ptxas) */
    if constexpr (STEPS % 2 == 0 && sizeof(E) == 2)
        gemm_mainloop_overlapped<T, OpA, OpB, STAGES, STEPS, GemmMmaFrags<T>>(smem, A, lda, B, ldb, M, N, K, kt_begin,
                                                                             kt_end, load, step);
    else
#endif
        /* one k tile at a time, WK deep per unrolled step group */
        gemm_mainloop<T, OpA, OpB, STAGES>(smem, A, lda, B, ldb, M, N, K, kt_begin, kt_end,
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
    const int m0 = blockIdx.y * T::BM + wm + lane / 4, n0 = blockIdx.x * T::BN + wn + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int m[TILES_N], n[TILES_N];
            GemmFloats<2> v[TILES_N];
#pragma unroll
            for (int j = 0; j < TILES_N; ++j) {
                m[j] = m0 + i * GEMM_MMA_M + h * 8;
                n[j] = n0 + j * GEMM_MMA_N;
                v[j].f[0] = gemm_mma_acc(acc[i][j], 2 * h);
                v[j].f[1] = gemm_mma_acc(acc[i][j], 2 * h + 1);
            }
            gemm_epi_runs(epi, M, N, m, n, v);
        }
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

GemmSplitK gemm_split_k;

extern "C" void cuda_gemm_split_k_bind(float *ws, long elems)
{
    gemm_split_k.ws = ws;
    gemm_split_k.elems = ws ? elems : 0;
}
extern "C" long cuda_gemm_split_k_count(void) { return gemm_split_k.count; }
extern "C" int cuda_gemm_split_k_last_slices(void) { return gemm_split_k.last; }

template <class T, int LA, int LB>
struct GemmMma {
    template <int VA, int VB, class G, class Epi>
    static void launch(const G *A, int lda, const G *B, int ldb, int M, int N, int K, GemmSplit split,
                       const Epi &epi)
    {
        /* whole k tiles spare the copies of a K_CONTIG operand their zero fill: on the twins' path */
        if constexpr (SNN_ARCH_HAS_CP_ASYNC && sizeof(G) == 2 && (LA == GEMM_K_CONTIG || LB == GEMM_K_CONTIG))
            if (K % T::BK == 0)
                return launch_kw<VA, VB, true>(A, lda, B, ldb, M, N, K, split, epi);
        launch_kw<VA, VB, false>(A, lda, B, ldb, M, N, K, split, epi);
    }
    template <int VA, int VB, bool KW, class G, class Epi>
    static void launch_kw(const G *A, int lda, const G *B, int ldb, int M, int N, int K, GemmSplit split,
                          const Epi &epi)
    {
        typedef GemmMmaRing<T, G, LA, LB> Ring;
        gemm_launch<T, gemm_mma_kernel<T, G, LA, LB, VA, VB, KW, Epi>, Ring::STAGE_BYTES, Ring::STAGES>(
            M, N, split.slices, split.per, A, lda, B, ldb, M, N, K, split.per, epi);
    }
};

static long twin_runs;
long gemm_mma_twin_count(void) { return twin_runs; }

/* launch(e) with the epilogue epi; split, with the partial-sum epilogue,
 * then the sum of the slices in order through epi. */
template <class Epi, class Launch>
static void gemm_mma_split_k(int M, int N, GemmSplit split, const Epi &epi, Launch &&launch)
{
    if (split.slices == 1)
        return launch(epi);
    launch(GemmEpiStore{gemm_split_k.ws, N, (size_t)M * N});
    const size_t mn = (size_t)M * N;
    gemm_split_k_reduce<<<(unsigned)((mn + 255) / 256), 256, 0, snn_stream()>>>(gemm_split_k.ws, split.slices, M, N,
                                                                               epi);
    CUDA_CHECK_LAUNCH();
    gemm_split_k.count++;
    gemm_split_k.last = split.slices;
}

/* The split-K plan of the kernel on global elements G at tile T: one wave of the blocks the GPU holds. */
template <class T, class G, int LA, int LB>
static GemmSplit gemm_mma_plan(int M, int N, int K)
{
    typedef GemmMmaRing<T, G, LA, LB> Ring;
    const int per_sm = gemm_resident_blocks(T::THREADS, Ring::STAGE_BYTES * Ring::STAGES);
    return gemm_split_k_plan<T>(M, N, K, (long)gemm_sm_count() * per_sm);
}

template <class T, int LA, int LB, class Epi>
void gemm_mma_run(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
{
    typedef GemmMma<T, LA, LB> Kernel;
#ifdef CONFIG_GEMM_TWINS
    const SnnTwin *ta = cuda_twin_of(A), *tb = cuda_twin_of(B);
    if (snn_twin_rows_aligned(ta, lda) && snn_twin_rows_aligned(tb, ldb)) {
        const GemmSplit split = gemm_mma_plan<T, SnnTwin, LA, LB>(M, N, K);
        twin_runs++;
        return gemm_mma_split_k(M, N, split, epi, [&](const auto &e) {
            Kernel::template launch<8, 8>(ta, lda, tb, ldb, M, N, K, split, e);
        });
    }
#endif
    constexpr bool can_a = gemm_vec_allowed<T, LA, T::BM, false>(), can_b = gemm_vec_allowed<T, LB, T::BN, false>();
    const GemmSplit split = gemm_mma_plan<T, float, LA, LB>(M, N, K);
    gemm_mma_split_k(M, N, split, epi, [&](const auto &e) {
        gemm_dispatch<Kernel, can_a, can_b>(A, lda, B, ldb, M, N, K, split, e);
    });
}

/* The three roles' instances, and the weight gradient's stored (kernels/cuda/gemm.cu). */
template void gemm_mma_run<GemmTileFwd, GEMM_K_CONTIG, GEMM_K_CONTIG>(const float *, int, const float *, int, int,
                                                                      int, int, const GemmEpiBiasRelu &);
template void gemm_mma_run<GemmTileDgrad, GEMM_K_CONTIG, GEMM_R_CONTIG>(const float *, int, const float *, int, int,
                                                                        int, int, const GemmEpiReluMask &);
template void gemm_mma_run<GemmTileWgrad, GEMM_R_CONTIG, GEMM_R_CONTIG>(const float *, int, const float *, int, int,
                                                                        int, int, const GemmEpiSgd &);
template void gemm_mma_run<GemmTileWgrad, GEMM_R_CONTIG, GEMM_R_CONTIG>(const float *, int, const float *, int, int,
                                                                        int, int, const GemmEpiStore &);
