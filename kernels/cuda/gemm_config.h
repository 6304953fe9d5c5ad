/* The FP32 SIMT GEMM's shape, derived from the config, and the compile-time
 * checks Kconfig cannot express. Every message names the CONFIG_ symbols to
 * change (make menuconfig, "Kernels").
 *
 * Block tile  BM x BN (CONFIG_GEMM_BLOCK_M/N), BK deep per stage (BLOCK_K).
 * Warp tile   WM x WN (CONFIG_GEMM_WARP_M/N): (BM/WM) x (BN/WN) warps.
 * Lane layout the 32 lanes of a warp as LANES_M x LANES_N; a lane holds
 *             TM x TN = WM*WN/32 accumulators: TM rows in groups of VM
 *             consecutive rows, the groups LANES_M*VM apart (likewise TN, VN
 *             along N). At each k the lanes of a warp read LANES_M (LANES_N)
 *             distinct VM-float vectors from shared memory, side by side:
 *             broadcast within, no bank conflicts between.
 * Inner step  WK (CONFIG_GEMM_WARP_K): k values per fully unrolled inner step.
 * Stages      with cp.async (sm80, sm90): a ring of CONFIG_GEMM_STAGES shared
 *             tiles. Without (sm75): one shared tile plus the next tile in
 *             registers (the two stages).
 *
 * Shared tiles are k-major, s[k][row], row stride a multiple of 4 floats.
 * An operand whose rows are contiguous along k in global memory (X in
 * forward) is transposed on the way in; its stride is padded to an odd
 * multiple of 4 floats so those stores are conflict-free. */
#ifndef SNN_GEMM_CONFIG_H
#define SNN_GEMM_CONFIG_H

#include "arch/cuda/target.h"
#include "snn_config.h"

#define GEMM_BM CONFIG_GEMM_BLOCK_M
#define GEMM_BN CONFIG_GEMM_BLOCK_N
#define GEMM_BK CONFIG_GEMM_BLOCK_K
#define GEMM_WM CONFIG_GEMM_WARP_M
#define GEMM_WN CONFIG_GEMM_WARP_N
#define GEMM_WK CONFIG_GEMM_WARP_K
#define GEMM_WARPS_M (GEMM_BM / GEMM_WM)
#define GEMM_WARPS_N (GEMM_BN / GEMM_WN)
#define GEMM_THREADS (GEMM_WARPS_M * GEMM_WARPS_N * SNN_CUDA_WARP)
#define GEMM_THREAD_ELEMS (GEMM_WM * GEMM_WN / SNN_CUDA_WARP)
/* Shared-memory tiles per block: the ring, or one tile (+ registers) on sm75. */
#define GEMM_SMEM_STAGES (SNN_ARCH_HAS_CP_ASYNC ? CONFIG_GEMM_STAGES : 1)

/* How an operand lies in global memory, seen as a tile of rows (M for A, N
 * for B) by k:
 *   GEMM_K_CONTIG  element (r, k) at p[r*ld + k]  (A = X[M][K]; B = W[N][K])
 *   GEMM_R_CONTIG  element (r, k) at p[k*ld + r]  (A = dY^T; B = W as [K][N]) */
enum { GEMM_K_CONTIG = 0, GEMM_R_CONTIG = 1 };

/* The shape helpers below are evaluated at compile time, in host and device code. */
#define GEMM_HD static __host__ __device__

GEMM_HD constexpr int gemm_round4(int x) { return (x + 3) / 4 * 4; }

/* Row stride (floats) of a shared tile of `rows` rows per k. */
GEMM_HD constexpr int gemm_smem_stride(int rows, bool k_contig)
{
    return k_contig && (gemm_round4(rows) / 4) % 2 == 0 ? gemm_round4(rows) + 4 : gemm_round4(rows);
}

/* Bytes of shared memory for the layouts (a, b), and the most any layout needs. */
GEMM_HD constexpr int gemm_smem_bytes(bool a_k_contig, bool b_k_contig)
{
    return GEMM_SMEM_STAGES * GEMM_BK *
           (gemm_smem_stride(GEMM_BM, a_k_contig) + gemm_smem_stride(GEMM_BN, b_k_contig)) * 4;
}
#define GEMM_SMEM_BYTES_MAX gemm_smem_bytes(true, true)

/* Lane layout: LANES_N lanes along N, 32/LANES_N along M. Among the layouts
 * that divide the warp tile, take the one with the fewest shared-memory loads
 * per k (TM/VM + TN/VN); 0 when none fits. */
GEMM_HD constexpr int gemm_vec(int t) { return t % 4 == 0 ? 4 : t % 2 == 0 ? 2 : 1; }
GEMM_HD constexpr bool gemm_lanes_fit(int ln)
{
    return GEMM_WN % ln == 0 && GEMM_WM % (SNN_CUDA_WARP / ln) == 0;
}
GEMM_HD constexpr int gemm_lanes_cost(int ln)
{
    return (GEMM_WM / (SNN_CUDA_WARP / ln)) / gemm_vec(GEMM_WM / (SNN_CUDA_WARP / ln)) +
           (GEMM_WN / ln) / gemm_vec(GEMM_WN / ln);
}
GEMM_HD constexpr int gemm_pick_lanes_n()
{
    const int order[6] = {8, 4, 16, 2, 32, 1};
    int best = 0;
    for (int i = 0; i < 6; i++)
        if (gemm_lanes_fit(order[i]) && (best == 0 || gemm_lanes_cost(order[i]) < gemm_lanes_cost(best)))
            best = order[i];
    return best;
}
static constexpr int GEMM_LANES_N = gemm_pick_lanes_n();
static constexpr int GEMM_LANES_M = GEMM_LANES_N ? SNN_CUDA_WARP / GEMM_LANES_N : 1;
static constexpr int GEMM_TM = GEMM_WM / GEMM_LANES_M;
static constexpr int GEMM_TN = GEMM_LANES_N ? GEMM_WN / GEMM_LANES_N : 1;
static constexpr int GEMM_VM = gemm_vec(GEMM_TM);
static constexpr int GEMM_VN = gemm_vec(GEMM_TN);

/* ---- checks ---------------------------------------------------------------- */

static_assert(GEMM_BM % GEMM_WM == 0,
              "CONFIG_GEMM_BLOCK_M must be a multiple of CONFIG_GEMM_WARP_M (make menuconfig, Kernels)");
static_assert(GEMM_BN % GEMM_WN == 0,
              "CONFIG_GEMM_BLOCK_N must be a multiple of CONFIG_GEMM_WARP_N (make menuconfig, Kernels)");
static_assert(GEMM_BK % GEMM_WK == 0,
              "CONFIG_GEMM_BLOCK_K must be a multiple of CONFIG_GEMM_WARP_K (make menuconfig, Kernels)");
static_assert(GEMM_THREADS >= SNN_CUDA_WARP,
              "GEMM block has no warp: CONFIG_GEMM_WARP_M/N must not exceed CONFIG_GEMM_BLOCK_M/N");
static_assert(GEMM_THREADS <= SNN_CUDA_MAX_THREADS_PER_BLOCK,
              "GEMM block exceeds 1024 threads: (CONFIG_GEMM_BLOCK_M/CONFIG_GEMM_WARP_M) x "
              "(CONFIG_GEMM_BLOCK_N/CONFIG_GEMM_WARP_N) warps must be at most 32: grow the warp tile or "
              "shrink the block tile");
static_assert(GEMM_WM * GEMM_WN % SNN_CUDA_WARP == 0,
              "CONFIG_GEMM_WARP_M x CONFIG_GEMM_WARP_N must be a multiple of 32 (one share per lane)");
/* Registers a lane may have: 255, and all threads of the block on one SM. */
#define GEMM_MAX_REGS (SNN_ARCH_REGS_PER_SM / GEMM_THREADS < 255 ? SNN_ARCH_REGS_PER_SM / GEMM_THREADS : 255)
static_assert(SNN_ARCH_HAS_CP_ASYNC || CONFIG_GEMM_STAGES == 2,
              "this target has no cp.async: CONFIG_GEMM_STAGES must be 2 (one tile in shared memory, the next "
              "in registers)");

/* The SIMT kernel's own (the tensor-core kernel's are in gemm_mma.h). */
#ifndef CONFIG_GEMM_TENSOR_CORES
static_assert(GEMM_LANES_N != 0,
              "no 32-lane layout fits the warp tile: CONFIG_GEMM_WARP_N must be divisible by L and "
              "CONFIG_GEMM_WARP_M by 32/L for some L in 1, 2, 4, 8, 16, 32 (e.g. both multiples of 8)");
static_assert(GEMM_TM * GEMM_TN == GEMM_THREAD_ELEMS, "GEMM lane layout: internal error");
static_assert(GEMM_THREAD_ELEMS + GEMM_TM + GEMM_TN + 16 <= GEMM_MAX_REGS,
              "GEMM accumulators do not fit in registers: CONFIG_GEMM_WARP_M x CONFIG_GEMM_WARP_N / 32 "
              "accumulators per lane, plus operands, exceed min(255, 65536 / threads per block): shrink the "
              "warp tile or use fewer warps per block (CONFIG_GEMM_BLOCK_M/N)");
static_assert(GEMM_SMEM_BYTES_MAX <= SNN_ARCH_MAX_SMEM_PER_BLOCK,
              "GEMM shared memory (stages x CONFIG_GEMM_BLOCK_K x (CONFIG_GEMM_BLOCK_M + CONFIG_GEMM_BLOCK_N "
              "+ padding) x 4 bytes; one stage on sm75, CONFIG_GEMM_STAGES on sm80/sm90) exceeds the target's "
              "per-block limit (arch/<target>/limits.h): lower CONFIG_GEMM_STAGES, CONFIG_GEMM_BLOCK_K or "
              "CONFIG_GEMM_BLOCK_M/N");

#endif

#endif
