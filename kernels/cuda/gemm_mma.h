/* The tensor-core GEMM's shape (kernels/cuda/gemm_mma.cu), derived from the
 * precision (CONFIG_PRECISION_*) and the target's path, and the compile-time
 * checks Kconfig cannot express; every message names the CONFIG_ symbols to
 * change (make menuconfig, "Kernels").
 *
 * Path        Turing (sm75, no cp.async): 16-bit shared tiles, ldmatrix,
 *             mma.sync m16n8k8. Ampere (sm80, and sm90 where wgmma does
 *             not run): FP32 shared tiles filled by cp.async, operands
 *             rounded as fragments are built, mma.sync m16n8k16 (FP16,
 *             BF16) or m16n8k8 (TF32); or, from the operands' 16-bit
 *             twins (CONFIG_GEMM_TWINS), 16-bit shared tiles filled by
 *             cp.async and ldmatrix, as on Turing.
 * Warp tile   WM x WN of the role's tile (gemm_config.h) in (WM/16) x
 *             (WN/8) instruction tiles; a fragment
 *             step covers GEMM_MMA_KSTEP of k: two m16n8k8 on Turing (one
 *             ldmatrix.x4 of A), one m16n8k16, or one m16n8k8 for TF32.
 * Shared rows Padded so that the reads of fragments are conflict-free:
 *             stride (in elements) an odd multiple of GEMM_MMA_PAD. */
#ifndef SNN_GEMM_MMA_H
#define SNN_GEMM_MMA_H

#include "kernels/cuda/gemm_config.h"

#define GEMM_MMA_TURING (!SNN_ARCH_HAS_CP_ASYNC)
#define GEMM_MMA_M 16
#define GEMM_MMA_N 8
#if defined(CONFIG_PRECISION_TF32)
#define GEMM_MMA_K 8
#define GEMM_MMA_KSTEP 8
#elif GEMM_MMA_TURING
#define GEMM_MMA_K 8
#define GEMM_MMA_KSTEP 16
#else
#define GEMM_MMA_K 16
#define GEMM_MMA_KSTEP 16
#endif
/* Accumulator registers per instruction tile: four FP32, or two f16x2. */
#if defined(CONFIG_PRECISION_FP16_ACC16)
#define GEMM_MMA_ACC_REGS 2
#else
#define GEMM_MMA_ACC_REGS 4
#endif
/* Bytes per shared element from FP32 operands: FP16 on Turing, FP32
 * (cp.async) on Ampere. The kernel on 16-bit twins has 2-byte tiles. */
#define GEMM_MMA_ELEM_BYTES (GEMM_MMA_TURING ? 2 : 4)

/* Padding unit of a shared line (elements) of `bytes`-byte elements. 16-bit
 * tiles (Turing; twins): ldmatrix reads 8 lines of 16 bytes; an odd
 * multiple of 8 halves puts them in 8 distinct 16-byte bank groups. FP32
 * tiles (Ampere): the lanes (g, t) of a warp read element (g, c t) of a
 * fragment, c = 2 for 16-bit pairs and 1 for TF32; k-major tiles (stride
 * along k) need c x stride = 8 mod 16 words, row-major tiles (pairs as one
 * 8-byte load per half-warp, TF32 as single words) need stride = 8 resp.
 * 4 mod 8 words. */
GEMM_HD constexpr int gemm_mma_pad(bool k_major, int bytes)
{
#if defined(CONFIG_PRECISION_TF32)
    return bytes == 2 ? 8 : k_major ? 8 : 4;
#else
    return bytes == 2 ? 8 : k_major ? 4 : 8;
#endif
}

/* Stride of a shared line holding `extent` elements: an odd multiple of the pad. */
GEMM_HD constexpr int gemm_mma_stride(int extent, bool k_major, int bytes)
{
    return ((extent + gemm_mma_pad(k_major, bytes) - 1) / gemm_mma_pad(k_major, bytes) | 1) *
           gemm_mma_pad(k_major, bytes);
}

/* Elements of one operand's shared tile: R_CONTIG operands are k-major
 * (BK lines of rows), K_CONTIG ones row-major (rows lines of BK). */
GEMM_HD constexpr int gemm_mma_tile_elems(int rows, int bk, bool k_contig, int bytes)
{
    return k_contig ? rows * gemm_mma_stride(bk, false, bytes) : bk * gemm_mma_stride(rows, true, bytes);
}

/* Bytes of one stage (A's and B's tiles) of `bytes`-byte elements. */
template <class T>
GEMM_HD constexpr int gemm_mma_stage_bytes(bool a_k_contig, bool b_k_contig, int bytes)
{
    return bytes * (gemm_mma_tile_elems(T::BM, T::BK, a_k_contig, bytes) +
                    gemm_mma_tile_elems(T::BN, T::BK, b_k_contig, bytes));
}

/* Stages of an instance's ring: CONFIG_GEMM_STAGES (one on Turing). In a
 * build with twins the 16-bit instances are the path the engine takes and
 * the stage count is sized for them; the FP32-operand instances, for
 * operands without twins, take as many of those stages as fit, at least 2:
 * their tiles are twice the bytes. */
template <class T>
GEMM_HD constexpr int gemm_mma_ring_stages(bool a_k_contig, bool b_k_contig, int bytes)
{
    int s = GEMM_SMEM_STAGES;
#ifdef CONFIG_GEMM_TWINS
    while (bytes == 4 && s > 2 &&
           s * gemm_mma_stage_bytes<T>(a_k_contig, b_k_contig, bytes) > SNN_ARCH_MAX_SMEM_PER_BLOCK)
        s--;
#endif
    return s;
}

/* The largest ring of any instance: each layout pair, with FP32 tiles
 * (16-bit on Turing) and 16-bit ones (twins). */
template <class T>
GEMM_HD constexpr int gemm_mma_smem_bytes_max(void)
{
    int m = 0;
    for (int l = 0; l < 8; l++) {
        const bool a = l & 1, b = l & 2;
        const int bytes = l & 4 ? 2 : GEMM_MMA_ELEM_BYTES;
        const int ring = gemm_mma_ring_stages<T>(a, b, bytes) * gemm_mma_stage_bytes<T>(a, b, bytes);
        m = ring > m ? ring : m;
    }
    return m;
}

/* Registers a lane needs: accumulators, one k step's fragments and (Turing)
 * the next tile in registers, plus addressing. */
template <class T>
GEMM_HD constexpr int gemm_mma_regs(void)
{
    return (T::WM / GEMM_MMA_M) * (T::WN / GEMM_MMA_N) * GEMM_MMA_ACC_REGS + 4 * (T::WM / GEMM_MMA_M) +
           2 * (T::WN / GEMM_MMA_N) + (GEMM_MMA_TURING ? (T::BM + T::BN) * T::BK / T::THREADS : 0) + 24;
}

/* ---- checks ---------------------------------------------------------------- */

#define GEMM_CHECK_MMA_TILE(T, R)                                                                                  \
    static_assert(T::WM % GEMM_MMA_M == 0,                                                                        \
                  "CONFIG_GEMM_" #R "_WARP_M must be a multiple of the tensor-core instruction's M, 16");          \
    static_assert(T::WN % GEMM_MMA_N == 0,                                                                        \
                  "CONFIG_GEMM_" #R "_WARP_N must be a multiple of the tensor-core instruction's N, 8");           \
    static_assert(T::WK % GEMM_MMA_KSTEP == 0,                                                                    \
                  "CONFIG_GEMM_" #R "_WARP_K must be a multiple of the tensor-core fragment step: 16 for "         \
                  "FP16/BF16 (m16n8k16, or two m16n8k8 per ldmatrix.x4 on Turing), 8 for TF32 (m16n8k8)");      \
    static_assert(gemm_mma_smem_bytes_max<T>() <= SNN_ARCH_MAX_SMEM_PER_BLOCK,                                     \
                  "tensor-core GEMM shared memory (stages x CONFIG_GEMM_" #R "_BLOCK_K x (CONFIG_GEMM_" #R         \
                  "_BLOCK_M + _BLOCK_N + padding) x 2 bytes on sm75 (one stage) and from twins, 4 bytes on "       \
                  "sm80/sm90 (CONFIG_GEMM_STAGES; with twins as many as fit, at least 2)) exceeds the target's "   \
                  "per-block limit (arch/<target>/limits.h): lower CONFIG_GEMM_STAGES or the block tile");        \
    static_assert(gemm_mma_regs<T>() <= T::MAX_REGS,                                                               \
                  "tensor-core GEMM registers: accumulators (CONFIG_GEMM_" #R "_WARP_M x _WARP_N / 32, per "       \
                  "lane), fragments and, on sm75, the next (CONFIG_GEMM_" #R "_BLOCK_M + _BLOCK_N) x _BLOCK_K "   \
                  "tile exceed min(255, 65536 / threads per block): shrink the warp or block tile")

GEMM_CHECK_MMA_TILE(GemmTileFwd, FWD);
GEMM_CHECK_MMA_TILE(GemmTileDgrad, DGRAD);
GEMM_CHECK_MMA_TILE(GemmTileWgrad, WGRAD);

/* C[M,N] = A . B^T (A: M x K, B: N x K in layouts LA, LB) at tile T, each C
 * element through epi, on the tensor cores, split-K where the tiles leave
 * SMs idle (gemm_split_k.h); asynchronous on the engine's stream. */
template <class T, int LA, int LB, class Epi>
void gemm_mma_run(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi);

/* GEMMs that ran on the operands' 16-bit twins so far (gemm_path.h). */
long gemm_mma_twin_count(void);

#endif
