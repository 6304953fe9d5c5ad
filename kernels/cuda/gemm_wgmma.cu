/* The engine's three GEMM roles on the Hopper kernel (gemm_wgmma.cuh), from
 * the 16-bit twins of their FP32 operands (kernels/cuda/twin.h), or in TF32
 * from the FP32 operands themselves (the forward role only: gemm_wgmma.h). */
#include <stdint.h>

#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_launch.cuh"
#include "kernels/cuda/gemm_wgmma.cuh"

static long runs;

/* What TMA reads for the FP32 operand p: its twin, or in TF32 p itself; NULL if it cannot (no twin, or
 * rows not in whole 16-byte chunks). */
static const GemmWgmmaElem *gemm_wgmma_operand(const float *p, int ld)
{
#if defined(CONFIG_PRECISION_TF32)
    return gemm_vec_aligned(p, ld) ? p : NULL;
#else
    const GemmWgmmaElem *t = cuda_twin_of(p);
    return snn_twin_rows_aligned(t, ld) ? t : NULL;
#endif
}

long gemm_wgmma_count(void) { return runs; }

/* The GEMM on wgmma if it reaches the thresholds and TMA can read both operands. */
template <int LA, int LB, class Epi>
static bool gemm_wgmma_take(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
{
    if (K < CONFIG_GEMM_WGMMA_MIN_K || 2.0 * M * N * K < CONFIG_GEMM_WGMMA_MIN_MFLOP * 1e6)
        return false;
    const GemmWgmmaElem *a = gemm_wgmma_operand(A, lda), *b = gemm_wgmma_operand(B, ldb);
    if (!a || !b)
        return false;
    typedef GemmWgmmaConfigTile T;
    if ((long)((M + T::BM - 1) / T::BM) * ((N + T::BN - 1) / T::BN) < gemm_sm_count())
        gemm_wgmma_run<LA, LB, Epi, GemmWgmmaSmallTile>(a, lda, b, ldb, M, N, K, epi);
    else
        gemm_wgmma_run<LA, LB, Epi, T>(a, lda, b, ldb, M, N, K, epi);
    runs++;
    return true;
}

template <int LA, int LB, class Epi>
bool gemm_wgmma_try(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
{
    if constexpr (GEMM_WG_K_MAJOR_ONLY && (LA != GEMM_K_CONTIG || LB != GEMM_K_CONTIG))
        return false; /* TF32 has no transposed operands */
    else
        return gemm_wgmma_take<LA, LB>(A, lda, B, ldb, M, N, K, epi);
}

/* The three roles' instances, and the weight gradient's stored (kernels/cuda/gemm.cu). */
template bool gemm_wgmma_try<GEMM_K_CONTIG, GEMM_K_CONTIG>(const float *, int, const float *, int, int, int, int,
                                                           const GemmEpiBiasRelu &);
template bool gemm_wgmma_try<GEMM_K_CONTIG, GEMM_R_CONTIG>(const float *, int, const float *, int, int, int, int,
                                                           const GemmEpiReluMask &);
template bool gemm_wgmma_try<GEMM_R_CONTIG, GEMM_R_CONTIG>(const float *, int, const float *, int, int, int, int,
                                                           const GemmEpiSgd &);
template bool gemm_wgmma_try<GEMM_R_CONTIG, GEMM_R_CONTIG>(const float *, int, const float *, int, int, int, int,
                                                           const GemmEpiStore &);
