/* The mma.sync GEMM's shape (gemm/mma.cuh), derived from the precision (CONFIG_PRECISION_*) and the target,
 * and the checks Kconfig cannot express; each message names the CONFIG_ symbols to change (make menuconfig,
 * "Kernels"). Turing (sm75, no cp.async): 16-bit shared tiles, ldmatrix, m16n8k8. Ampere (sm80; sm90 where
 * wgmma does not run): FP32 tiles by cp.async, rounded as fragments are built, m16n8k16 (FP16, BF16) or
 * m16n8k8 (TF32); or from 16-bit twins (CONFIG_GEMM_TWINS) 16-bit tiles and ldmatrix, as on Turing. A warp
 * tile is (WM/16) x (WN/8) instruction tiles; a fragment step covers GEMM_MMA_KSTEP of k. Shared lines are
 * padded to an odd multiple of gemm_mma_pad() elements, so that fragment reads are conflict-free. */
#ifndef SNN_GEMM_MMA_SHAPE_CUH
#define SNN_GEMM_MMA_SHAPE_CUH

#include "kernels/cuda/gemm/tile.cuh"

#define GEMM_MMA_TURING (!SNN_ARCH_HAS_CP_ASYNC)
#define GEMM_MMA_M 16
#define GEMM_MMA_N 8
#if defined(CONFIG_PRECISION_TF32)
#define GEMM_MMA_K 8
#define GEMM_MMA_KSTEP 8
#elif GEMM_MMA_TURING
#define GEMM_MMA_K 8
#define GEMM_MMA_KSTEP 16 /* two m16n8k8 per ldmatrix.x4 of A */
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
/* Bytes per shared element from FP32 operands: FP16 on Turing, FP32 (cp.async) on Ampere. The kernel on
 * 16-bit twins has 2-byte tiles. */
#define GEMM_MMA_ELEM_BYTES (GEMM_MMA_TURING ? 2 : 4)

/* Padding unit (elements) of a shared line of a tile in `layout` of `bytes`-byte elements. 16-bit tiles:
 * ldmatrix reads 8 lines of 16 bytes; an odd multiple of 8 halves puts them in 8 distinct 16-byte bank
 * groups. FP32 tiles: the lanes (g, t) of a warp read element (g, c t) of a fragment, c = 2 for 16-bit pairs
 * and 1 for TF32; MN-major tiles (a line per k) need c x stride = 8 mod 16 words, K-major tiles
 * (pairs as one 8-byte load per half-warp, TF32 as single words) need stride = 8 resp. 4 mod 8 words. */
GEMM_HD constexpr int gemm_mma_pad(int layout, int bytes)
{
#if defined(CONFIG_PRECISION_TF32)
    return bytes == 2 ? 8 : layout == GEMM_MN_MAJOR ? 8 : 4;
#else
    return bytes == 2 ? 8 : layout == GEMM_MN_MAJOR ? 4 : 8;
#endif
}

/* Stride of a shared line holding `extent` elements: an odd multiple of the pad. */
GEMM_HD constexpr int gemm_mma_stride(int extent, int layout, int bytes)
{
    return ((extent + gemm_mma_pad(layout, bytes) - 1) / gemm_mma_pad(layout, bytes) | 1) *
           gemm_mma_pad(layout, bytes);
}

/* Elements of one operand's shared tile, which keeps the operand's layout: K-major, `rows` lines of BK;
 * MN-major, BK lines of rows. */
GEMM_HD constexpr int gemm_mma_tile_elems(int rows, int bk, int layout, int bytes)
{
    return layout == GEMM_K_MAJOR ? rows * gemm_mma_stride(bk, GEMM_K_MAJOR, bytes)
                                  : bk * gemm_mma_stride(rows, GEMM_MN_MAJOR, bytes);
}

/* Bytes of one stage (A's and B's tiles, layouts la, lb) of `bytes`-byte elements. */
template <class T>
GEMM_HD constexpr int gemm_mma_stage_bytes(int la, int lb, int bytes)
{
    return bytes * (gemm_mma_tile_elems(T::BM, T::BK, la, bytes) + gemm_mma_tile_elems(T::BN, T::BK, lb, bytes));
}

/* Stages of an instance's ring: CONFIG_GEMM_STAGES (one on Turing). In a build with twins the 16-bit
 * instances are the path the engine takes and the stage count is sized for them; the FP32-operand
 * instances, for operands without twins, take as many of those stages as fit, at least 2: their tiles are
 * twice the bytes. */
template <class T>
GEMM_HD constexpr int gemm_mma_ring_stages(int la, int lb, int bytes)
{
    int s = GEMM_SMEM_STAGES;
#ifdef CONFIG_GEMM_TWINS
    while (bytes == 4 && s > 2 && s * gemm_mma_stage_bytes<T>(la, lb, bytes) > SNN_ARCH_MAX_SMEM_PER_BLOCK)
        s--;
#endif
    return s;
}

/* The largest ring of any instance: each layout pair, with FP32 tiles (16-bit on Turing) and 16-bit ones
 * (twins). */
template <class T>
GEMM_HD constexpr int gemm_mma_smem_bytes_max(void)
{
    int m = 0;
    for (int l = 0; l < 8; l++) {
        const int la = l & 1 ? GEMM_MN_MAJOR : GEMM_K_MAJOR, lb = l & 2 ? GEMM_MN_MAJOR : GEMM_K_MAJOR;
        const int bytes = l & 4 ? 2 : GEMM_MMA_ELEM_BYTES;
        const int ring = gemm_mma_ring_stages<T>(la, lb, bytes) * gemm_mma_stage_bytes<T>(la, lb, bytes);
        m = ring > m ? ring : m;
    }
    return m;
}

/* Registers a lane needs: accumulators, one k step's fragments and (Turing) the next tile in registers,
 * plus addressing. */
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

#endif
