/* The engine's three GEMM roles on the Hopper kernel (gemm_wgmma.cuh), from
 * the 16-bit twins of their FP32 operands (kernels/cuda/twin.h). */
#include <stdint.h>

#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_launch.cuh"
#include "kernels/cuda/gemm_wgmma.cuh"

static long runs;

long gemm_wgmma_count(void) { return runs; }

template <int LA, int LB, class Epi>
bool gemm_wgmma_try(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
{
    if (K < CONFIG_GEMM_WGMMA_MIN_K || 2.0 * M * N * K < CONFIG_GEMM_WGMMA_MIN_MFLOP * 1e6)
        return false;
    const GemmWgmmaElem *a = cuda_twin_of(A), *b = cuda_twin_of(B);
    if (!snn_twin_rows_aligned(a, lda) || !snn_twin_rows_aligned(b, ldb))
        return false;
    typedef GemmWgmmaConfigTile T;
    if ((long)((M + T::BM - 1) / T::BM) * ((N + T::BN - 1) / T::BN) < gemm_sm_count())
        gemm_wgmma_run<LA, LB, Epi, GemmWgmmaSmallTile>(a, lda, b, ldb, M, N, K, epi);
    else
        gemm_wgmma_run<LA, LB, Epi, T>(a, lda, b, ldb, M, N, K, epi);
    runs++;
    return true;
}

/* The three roles' instances (kernels/cuda/gemm.cu). */
template bool gemm_wgmma_try<GEMM_K_CONTIG, GEMM_K_CONTIG>(const float *, int, const float *, int, int, int, int,
                                                           const GemmEpiBiasRelu &);
template bool gemm_wgmma_try<GEMM_K_CONTIG, GEMM_R_CONTIG>(const float *, int, const float *, int, int, int, int,
                                                           const GemmEpiReluMask &);
template bool gemm_wgmma_try<GEMM_R_CONTIG, GEMM_R_CONTIG>(const float *, int, const float *, int, int, int, int,
                                                           const GemmEpiSgd &);
