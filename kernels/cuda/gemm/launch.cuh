/* What the SIMT and mma.sync GEMM launchers (gemm_f32_launch, gemm_mma) share: whether an operand can
 * be loaded 16 bytes at a time, the GPU's capacity (SMs, blocks an SM holds), a kernel's opt-in to more than
 * the default 48 KB of dynamic shared memory, and gemm_grid, the grid over a role's tiles of M x N (x split-K
 * slices). */
#ifndef SNN_GEMM_LAUNCH_CUH
#define SNN_GEMM_LAUNCH_CUH

#include <limits.h>
#include <stdint.h>

#include <algorithm>

#include <cuda_runtime.h>

#include "arch/cuda/beside.h"
#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "kernels/cuda/gemm/tile.cuh"
#include "snn_check.h"
#include "snn_config.h"

/* Whether an operand of layout L can be loaded 4 floats at a time: MN-major when the tile's rows come in
 * fours, K-major when BK does, unless the kernel transposes it with cp.async (which cannot transpose 16
 * bytes)... */
template <class Tile, int L, int ROWS, bool TRANSPOSED>
static constexpr bool gemm_vec_allowed()
{
    return L == GEMM_MN_MAJOR ? ROWS % 4 == 0 : !(TRANSPOSED && SNN_ARCH_HAS_CP_ASYNC) && Tile::BK % 4 == 0;
}
/* ...and whether this operand is aligned for it. */
static inline bool gemm_vec_aligned(const float *p, int ld)
{
    return ld % 4 == 0 && ((uintptr_t)p & 15) == 0;
}

/* The GPU's multiprocessors. */
static inline int gemm_sm_count(void)
{
    static int n;
    if (!n) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    }
    return n;
}

/* The SMs a persistent GEMM grid spans: all but those data parallelism leaves to NCCL (DP_COMM_SMS). */
static inline int gemm_persistent_sms(void)
{
    const int n = gemm_sm_count() - SNN_DP_COMM_SMS;
    return n > 0 ? n : 1;
}

/* The SMs a persistent grid launched now spans: gemm_persistent_sms(), or the share of them the stream it
 * goes on has while a weight step runs beside an input gradient (arch/cuda/beside.h). A GEMM's tile is
 * chosen for the whole (gemm_persistent_sms), so its sums are the same either way. */
static inline int gemm_grid_sms(void)
{
#ifdef CONFIG_STEP_BESIDE
    return snn_beside_sms(gemm_persistent_sms());
#else
    return gemm_persistent_sms();
#endif
}

/* Blocks of `threads` threads with a ring of ring_bytes that one SM holds, by threads and shared memory.
 * Registers are not counted: the tiles they would hold to fewer blocks are the large ones, held to one or
 * two already by shared memory. */
static inline int gemm_resident_blocks(int threads_per_block, int ring_bytes)
{
    static int threads, smem, reserved;
    if (!threads) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
    }
    return std::max(1, std::min(threads / threads_per_block, smem / std::max(1, ring_bytes + reserved)));
}

/* KERNEL, opted in (once per kernel instance) to SMEM bytes of dynamic shared memory where that is more than
 * the default 48 KB. */
template <auto KERNEL, int SMEM>
static auto gemm_opted_in()
{
    if constexpr (SMEM > SNN_CUDA_SMEM_DEFAULT) {
        static bool opted_in;
        if (!opted_in) {
            CUDA_CHECK(cudaFuncSetAttribute((const void *)KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
            opted_in = true;
        }
    }
    return KERNEL;
}

/* A launch's grid, Tile's blocks over M x N (x slices of k), and a block's dynamic shared memory. */
struct GemmGrid {
    dim3 blocks;
    int smem;
};

/* The kernel's ring has STAGES shared tiles of STAGE_BYTES; a block that loads fewer k tiles (a short k, as
 * the weight gradient's batch, or a split-K slice) gets only the stages it fills: more blocks fit on an SM. */
template <class Tile, int STAGE_BYTES, int STAGES>
static GemmGrid gemm_grid(int M, int N, int slices, int ktiles_per_block)
{
    if ((M + Tile::BM - 1) / Tile::BM > 65535)
        snn_die("GEMM with %d rows exceeds the grid's 65535 x %d (its role's block tile M) rows", M, Tile::BM);
    const int stages = std::max(1, std::min(ktiles_per_block, STAGES));
    return {dim3((N + Tile::BN - 1) / Tile::BN, (M + Tile::BM - 1) / Tile::BM, slices), STAGE_BYTES * stages};
}

/* The copies address a tile's lines by 32-bit byte offsets from its origin (GemmOperand::issue): a tile's
 * lines of FP32 rows must span less than 4 GiB. */
template <class Tile>
static void gemm_check_ld(int lda, int ldb)
{
    constexpr long lines = std::max({Tile::BM, Tile::BN, Tile::BK});
    if ((long)std::max(lda, ldb) * lines * (long)sizeof(float) > (long)UINT_MAX)
        snn_die("GEMM leading dimension %d: %ld lines of a tile span more than 4 GiB (the copies' 32-bit offsets)",
                std::max(lda, ldb), lines);
}

#endif
