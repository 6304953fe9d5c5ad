/* The GEMM tiles, one per role (GemmTileFwd, GemmTileDgrad, GemmTileWgrad, from CONFIG_GEMM_<ROLE>_*), the
 * operand layouts, the SIMT kernel's lane layout, and the checks Kconfig cannot express; each message names
 * the CONFIG_ symbols to change (make menuconfig, "Kernels", "GEMM tiles").
 *
 * Block tile BM x BN, BK deep per stage; warp tile WM x WN, (BM/WM) x (BN/WN) warps; WK: k per unrolled
 * inner step. SIMT lanes: the 32 lanes of a warp as LANES_M x LANES_N, each holding TM x TN accumulators in
 * groups of VM (VN) consecutive rows (columns), the groups LANES_M*VM (LANES_N*VN) apart, so that at each k
 * the lanes read distinct VM-float vectors side by side: broadcast within, no bank conflicts between. */
#ifndef SNN_GEMM_TILE_CUH
#define SNN_GEMM_TILE_CUH

#include "arch/cuda/target.h"
#include "snn_config.h"

/* Shared-memory tiles per block: the cp.async ring, or on sm75 one tile (the next waits in registers). */
#define GEMM_SMEM_STAGES (SNN_ARCH_HAS_CP_ASYNC ? CONFIG_GEMM_STAGES : 1)

/* How an operand, a tile of rows (M for A, N for B) by k, lies in memory (PTX's names):
 *   GEMM_K_MAJOR   k contiguous:    (r, k) at p[r*ld + k]  (A = X[M][K]; B = W[N][K])
 *   GEMM_MN_MAJOR  rows contiguous: (r, k) at p[k*ld + r]  (A = dY^T; B = W as [K][N]) */
enum { GEMM_K_MAJOR = 0, GEMM_MN_MAJOR = 1 };

/* The shape helpers below are evaluated at compile time, in host and device code. */
#define GEMM_HD static __host__ __device__

GEMM_HD constexpr int gemm_round4(int x) { return (x + 3) / 4 * 4; }

/* Row stride (floats) of a SIMT shared tile, MN-major: `rows` per k, a multiple of 4. An operand K-major in
 * global memory is transposed on the way in; an odd multiple of 4 makes those stores conflict-free. */
GEMM_HD constexpr int gemm_smem_stride(int rows, int layout)
{
    return layout == GEMM_K_MAJOR && (gemm_round4(rows) / 4) % 2 == 0 ? gemm_round4(rows) + 4 : gemm_round4(rows);
}

/* Lane layout of the SIMT kernel: LANES_N lanes along N, 32/LANES_N along M. Among the layouts that divide
 * the warp tile, the one with the fewest shared-memory loads per k (TM/VM + TN/VN); 0 when none fits. */
GEMM_HD constexpr int gemm_vec(int t) { return t % 4 == 0 ? 4 : t % 2 == 0 ? 2 : 1; }
GEMM_HD constexpr bool gemm_lanes_fit(int wm, int wn, int ln)
{
    return wn % ln == 0 && wm % (SNN_CUDA_WARP / ln) == 0;
}
GEMM_HD constexpr int gemm_lanes_cost(int wm, int wn, int ln)
{
    return (wm / (SNN_CUDA_WARP / ln)) / gemm_vec(wm / (SNN_CUDA_WARP / ln)) + (wn / ln) / gemm_vec(wn / ln);
}
GEMM_HD constexpr int gemm_pick_lanes_n(int wm, int wn)
{
    const int order[6] = {8, 4, 16, 2, 32, 1};
    int best = 0;
    for (int i = 0; i < 6; i++)
        if (gemm_lanes_fit(wm, wn, order[i]) &&
            (best == 0 || gemm_lanes_cost(wm, wn, order[i]) < gemm_lanes_cost(wm, wn, best)))
            best = order[i];
    return best;
}

/* One role's tile: block BM x BN x BK, warp WM x WN x WK. */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int WK_>
struct GemmTile {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, WK = WK_;
    static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
    static constexpr int THREADS = WARPS_M * WARPS_N * SNN_CUDA_WARP;
    static constexpr int THREAD_ELEMS = WM * WN / SNN_CUDA_WARP;
    /* Registers a lane may have: 255, and all threads of the block on one SM. */
    static constexpr int MAX_REGS = SNN_ARCH_REGS_PER_SM / THREADS < 255 ? SNN_ARCH_REGS_PER_SM / THREADS : 255;
    /* the SIMT kernel's lane layout */
    static constexpr int LANES_N = gemm_pick_lanes_n(WM, WN);
    static constexpr int LANES_M = LANES_N ? SNN_CUDA_WARP / LANES_N : 1;
    static constexpr int TM = WM / LANES_M;
    static constexpr int TN = LANES_N ? WN / LANES_N : 1;
    static constexpr int VM = gemm_vec(TM);
    static constexpr int VN = gemm_vec(TN);
    /* Bytes of one stage of the SIMT kernel's shared tiles for operands in layouts la, lb. */
    __host__ __device__ static constexpr int stage_bytes(int la, int lb)
    {
        return BK * (gemm_smem_stride(BM, la) + gemm_smem_stride(BN, lb)) * 4;
    }
};

#define GEMM_ROLE_TILE(R)                                                                                          \
    GemmTile<CONFIG_GEMM_##R##_BLOCK_M, CONFIG_GEMM_##R##_BLOCK_N, CONFIG_GEMM_##R##_BLOCK_K,                     \
             CONFIG_GEMM_##R##_WARP_M, CONFIG_GEMM_##R##_WARP_N, CONFIG_GEMM_##R##_WARP_K>
typedef GEMM_ROLE_TILE(FWD) GemmTileFwd;     /* Y = X W^T: M = batch, N = out, K = in */
typedef GEMM_ROLE_TILE(DGRAD) GemmTileDgrad; /* dX = dY W: M = batch, N = in, K = out */
typedef GEMM_ROLE_TILE(WGRAD) GemmTileWgrad; /* gW = dY^T X: M = out, N = in, K = batch */

/* ---- checks ---------------------------------------------------------------- */

static_assert(SNN_ARCH_HAS_CP_ASYNC || CONFIG_GEMM_STAGES == 2,
              "this target has no cp.async: CONFIG_GEMM_STAGES must be 2 (one tile in shared memory, the next "
              "in registers)");

/* The checks of role R's tile T that hold for every kernel. */
#define GEMM_CHECK_TILE(T, R)                                                                                      \
    static_assert(T::BM % T::WM == 0, "CONFIG_GEMM_" #R "_BLOCK_M must be a multiple of CONFIG_GEMM_" #R          \
                                      "_WARP_M (make menuconfig, Kernels, GEMM tiles)");                          \
    static_assert(T::BN % T::WN == 0, "CONFIG_GEMM_" #R "_BLOCK_N must be a multiple of CONFIG_GEMM_" #R          \
                                      "_WARP_N (make menuconfig, Kernels, GEMM tiles)");                          \
    static_assert(T::BK % T::WK == 0, "CONFIG_GEMM_" #R "_BLOCK_K must be a multiple of CONFIG_GEMM_" #R          \
                                      "_WARP_K (make menuconfig, Kernels, GEMM tiles)");                          \
    static_assert(T::THREADS >= SNN_CUDA_WARP,                                                                     \
                  "GEMM block has no warp: CONFIG_GEMM_" #R "_WARP_M/N must not exceed CONFIG_GEMM_" #R            \
                  "_BLOCK_M/N");                                                                                   \
    static_assert(T::THREADS <= SNN_CUDA_MAX_THREADS_PER_BLOCK,                                                    \
                  "GEMM block exceeds 1024 threads: (CONFIG_GEMM_" #R "_BLOCK_M / _WARP_M) x (CONFIG_GEMM_" #R     \
                  "_BLOCK_N / _WARP_N) warps must be at most 32: grow the warp tile or shrink the block tile");   \
    static_assert(T::WM * T::WN % SNN_CUDA_WARP == 0,                                                              \
                  "CONFIG_GEMM_" #R "_WARP_M x CONFIG_GEMM_" #R "_WARP_N must be a multiple of 32 (one share per " \
                  "lane)")

/* The SIMT kernel's own (the tensor-core kernel's are in gemm/mma_shape.cuh). */
#define GEMM_CHECK_SIMT_TILE(T, R)                                                                                 \
    static_assert(T::LANES_N != 0,                                                                                 \
                  "no 32-lane layout fits the warp tile: CONFIG_GEMM_" #R "_WARP_N must be divisible by L and "    \
                  "CONFIG_GEMM_" #R "_WARP_M by 32/L for some L in 1, 2, 4, 8, 16, 32 (e.g. both multiples of 8)"); \
    static_assert(T::TM * T::TN == T::THREAD_ELEMS, "GEMM lane layout: internal error");                          \
    static_assert(T::THREAD_ELEMS + T::TM + T::TN + 16 <= T::MAX_REGS,                                             \
                  "GEMM accumulators do not fit in registers: CONFIG_GEMM_" #R "_WARP_M x _WARP_N / 32 "          \
                  "accumulators per lane, plus operands, exceed min(255, 65536 / threads per block): shrink the "  \
                  "warp tile or use fewer warps per block (CONFIG_GEMM_" #R "_BLOCK_M/N)");                        \
    static_assert(GEMM_SMEM_STAGES * T::stage_bytes(GEMM_K_MAJOR, GEMM_K_MAJOR) <= SNN_ARCH_MAX_SMEM_PER_BLOCK,    \
                  "GEMM shared memory (stages x CONFIG_GEMM_" #R "_BLOCK_K x (CONFIG_GEMM_" #R "_BLOCK_M + "       \
                  "CONFIG_GEMM_" #R "_BLOCK_N + padding) x 4 bytes; one stage on sm75, CONFIG_GEMM_STAGES on "     \
                  "sm80/sm90) exceeds the target's per-block limit (arch/<target>/limits.h): lower "               \
                  "CONFIG_GEMM_STAGES or the block tile")

GEMM_CHECK_TILE(GemmTileFwd, FWD);
GEMM_CHECK_TILE(GemmTileDgrad, DGRAD);
GEMM_CHECK_TILE(GemmTileWgrad, WGRAD);
#ifndef CONFIG_GEMM_TENSOR_CORES
GEMM_CHECK_SIMT_TILE(GemmTileFwd, FWD);
GEMM_CHECK_SIMT_TILE(GemmTileDgrad, DGRAD);
GEMM_CHECK_SIMT_TILE(GemmTileWgrad, WGRAD);
#endif

#endif
