/* The GEMM dispatch every role's entry (kernels/cuda/gemm.cu's table) instantiates, and which kernel runs
 * a GEMM:
 *
 *   cuda_linear_forward, _backward_input, _backward_weight_update, _backward_weight, _backward_weight_bf16
 *   |- gemm_run                    the dispatch, in this order:
 *   |  |- gemm_wgmma_run           TMA + wgmma (sm90)            -> gemm_wgmma_kernel      gemm/wgmma.cuh
 *   |  |- gemm_mma                 from twins or FP32; split-K?  -> gemm_mma_kernel        gemm/mma.cuh
 *   |  |  `- gemm_split_k_reduce_launch  slices summed in order  -> gemm_split_k_reduce  gemm/split_k.cuh
 *   |  `- gemm_f32_launch          16-byte loads where allowed   -> gemm_f32_kernel        gemm/simt.cuh
 *   |- gemm_bias_update, _grad     (backward_weight[_update])    -> bias_update_kernel      gemm/bias.cu
 *   |                              unless wgmma summed them      -> GemmSideBias            gemm/side.cuh
 *   `- with dropout, the forward   a hidden layer's mask         -> dropout_mask_kernel     gemm/forward.cu
 *                                  unless drawn beside the GEMM  -> GemmSideDropoutMask     gemm/forward.cu
 *                                  before it, or the gather      -> gather_batch_kernel     ops.cu
 * Everything is asynchronous on the engine's stream and deterministic: no atomics, fixed summation orders. */
#ifndef SNN_GEMM_RUN_CUH
#define SNN_GEMM_RUN_CUH

#include <type_traits>

#include <cuda_runtime.h>

#include "kernels/cuda/gemm/bias.h"
#include "kernels/cuda/gemm/counters.h"
#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/launch.cuh"
#include "kernels/cuda/gemm/side.cuh"
#include "kernels/cuda/gemm/tile.cuh"
#include "kernels/cuda/gemm_split_k.h"
#include "kernels/cuda/twin.cuh"
#include "kernels/ops.h"
#ifdef CONFIG_GEMM_WGMMA
#include "kernels/cuda/gemm/wgmma.cuh"
#endif
#ifdef CONFIG_GEMM_TENSOR_CORES
#include "kernels/cuda/gemm/mma.cuh"
#include "kernels/cuda/gemm/split_k.cuh"
#else
#include "kernels/cuda/gemm/simt.cuh"
#endif

#ifdef CONFIG_GEMM_WGMMA
/* What TMA reads for the FP32 operand p with twin t: the twin, or in TF32 p itself; NULL if it cannot (no
 * twin, or rows not in whole 16-byte chunks). */
static inline const GemmWgmmaElem *gemm_wgmma_operand(const float *p, const SnnTwin *t, int ld)
{
#if defined(CONFIG_PRECISION_TF32)
    (void)t;
    return gemm_vec_aligned(p, ld) ? p : NULL;
#else
    (void)p;
    return snn_twin_rows_aligned(t, ld) ? t : NULL;
#endif
}
#endif

#ifdef CONFIG_GEMM_TENSOR_CORES
/* C = A . B^T on mma.sync from operands of G (FP32, or their 16-bit twins), launched on the engine's stream.
 * Where the block tiles fill at most half of one wave (the blocks the GPU holds at once), the k range is split
 * into slices, whose partial sums (slice z's at ws + z M N) gemm_split_k_reduce adds in order through epi. */
template <class T, int LA, int LB, class G, class Epi>
static void gemm_mma(const G *A, int lda, const G *B, int ldb, int M, int N, int K, const Epi &epi)
{
    typedef GemmMmaRing<T, G, LA, LB> Ring;
    const int per_sm = gemm_resident_blocks(T::THREADS, Ring::STAGE_BYTES * Ring::STAGES);
    const GemmSplit split = gemm_split_k_plan<T>(M, N, K, (long)gemm_sm_count() * per_sm);
    const GemmGrid g = gemm_grid<T, Ring::STAGE_BYTES, Ring::STAGES>(M, N, split.slices, split.per);
    if (split.slices == 1) {
        const auto kernel = gemm_mma_instance<T, LA, LB, Epi>(A, lda, B, ldb, K);
        SNN_LAUNCH(kernel, g.blocks, T::THREADS, g.smem, A, lda, B, ldb, M, N, K, split.per, epi);
        return;
    }
    const GemmEpiStore part = {gemm_split_k_ws(), N, (size_t)M * N};
    const auto kernel = gemm_mma_instance<T, LA, LB, GemmEpiStore>(A, lda, B, ldb, K);
    SNN_LAUNCH(kernel, g.blocks, T::THREADS, g.smem, A, lda, B, ldb, M, N, K, split.per, part);
    gemm_split_k_reduce_launch(split.slices, M, N, epi);
    gemm_runs.split_k++;
    gemm_split_last = split.slices;
}
#endif

/* C[M,N] = A . B^T (A: M x K in layout LA, B: N x K in LB, gemm/tile.cuh) through epi, at the role's tile T;
 * true where the side job ran beside it (gemm/side.cuh), which only the wgmma kernel runs (a SMALL_TILE_ONLY
 * job only at the small tile):
 * 1. wgmma (CONFIG_GEMM_WGMMA) where K >= CONFIG_GEMM_WGMMA_MIN_K, 2MNK >= CONFIG_GEMM_WGMMA_MIN_MFLOP and
 *    TMA can read both operands (TF32: both K-major), at the config's block tile (the weight gradient's,
 *    WGRAD, gemm/wgmma_shape.cuh), or the small one (WGRAD: its ring's own depth, and its A panel where
 *    configured, K fits and a block walks three tiles or more) where that would leave SMs idle;
 * 2. a tensor-core precision: mma.sync, on the operands' 16-bit twins where both have them with rows in whole
 *    16-byte chunks, else on the FP32 operands, rounded as staged;
 * 3. FP32: the SIMT kernel. */
template <class T, int LA, int LB, bool WGRAD = false, class Epi, class Side = GemmSideNone>
static bool gemm_run(const float *A, const SnnTwin *tA, int lda, const float *B, const SnnTwin *tB, int ldb,
                     int M, int N, int K, const Epi &epi, const Side &side = Side())
{
    (void)side;
    if (M <= 0 || N <= 0)
        return false;
#ifdef CONFIG_GEMM_WGMMA
    if constexpr (!GEMM_WG_K_MAJOR_ONLY || (LA == GEMM_K_MAJOR && LB == GEMM_K_MAJOR))
        if (K >= CONFIG_GEMM_WGMMA_MIN_K && 2.0 * M * N * K >= CONFIG_GEMM_WGMMA_MIN_MFLOP * 1e6) {
            const GemmWgmmaElem *a = gemm_wgmma_operand(A, tA, lda), *b = gemm_wgmma_operand(B, tB, ldb);
            if (a && b) {
                typedef std::conditional_t<WGRAD, GemmWgmmaWgradTile, GemmWgmmaConfigTile> W;
                gemm_runs.wgmma++;
                if ((long)((M + W::BM - 1) / W::BM) * ((N + W::BN - 1) / W::BN) < gemm_persistent_sms()) {
#ifdef CONFIG_GEMM_WGMMA_SMALL_WGRAD_PANEL
                    if constexpr (WGRAD) {
                        /* a panel pays where a block walks at least three tiles (docs/PERF.md v61: two lost)
                         */
                        typedef GemmWgmmaSmallPanelTile P;
                        const long tiles = (long)((M + P::BM - 1) / P::BM) * ((N + P::BN - 1) / P::BN);
                        if (tiles >= 3L * gemm_persistent_sms() && gemm_wgmma_panel_holds<P>(K)) {
                            gemm_wgmma_run<LA, LB, Epi, P>(a, lda, b, ldb, M, N, K, epi, GEMM_WG_GRID_CONFIG,
                                                           side);
                            return Side::ACTIVE;
                        }
                    }
#endif
                    typedef std::conditional_t<WGRAD, GemmWgmmaSmallWgradTile, GemmWgmmaSmallTile> S;
                    gemm_wgmma_run<LA, LB, Epi, S>(a, lda, b, ldb, M, N, K, epi, GEMM_WG_GRID_CONFIG, side);
                    return Side::ACTIVE;
                }
                if constexpr (Side::SMALL_TILE_ONLY) {
                    gemm_wgmma_run<LA, LB, Epi, W>(a, lda, b, ldb, M, N, K, epi, GEMM_WG_GRID_CONFIG);
                    return false;
                } else {
                    gemm_wgmma_run<LA, LB, Epi, W>(a, lda, b, ldb, M, N, K, epi, GEMM_WG_GRID_CONFIG, side);
                    return Side::ACTIVE;
                }
            }
        }
#endif
    gemm_check_ld<T>(lda, ldb);
#ifdef CONFIG_GEMM_TENSOR_CORES
#ifdef CONFIG_GEMM_TWINS
    if (snn_twin_rows_aligned(tA, lda) && snn_twin_rows_aligned(tB, ldb)) {
        gemm_runs.mma_twins++;
        gemm_mma<T, LA, LB>(tA, lda, tB, ldb, M, N, K, epi);
        return false;
    }
#endif
    gemm_mma<T, LA, LB>(A, lda, B, ldb, M, N, K, epi);
#else
    gemm_f32_launch<T, LA, LB>(A, lda, B, ldb, M, N, K, epi);
#endif
    return false;
}

#endif
