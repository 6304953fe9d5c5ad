/* Launching a GEMM kernel, shared by the SIMT and the tensor-core kernels:
 * the global load width of each operand (4 floats where its layout and
 * alignment allow, else 1) picked at run time, the grid over the role's
 * tiles of M x N (and split-K slices), and the opt-in to more than the
 * default 48 KB of dynamic shared memory. */
#ifndef SNN_GEMM_LAUNCH_CUH
#define SNN_GEMM_LAUNCH_CUH

#include <limits.h>
#include <stdint.h>

#include <algorithm>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "kernels/cuda/gemm_config.h"
#include "snn_check.h"

/* Whether an operand of layout L can be loaded 4 floats at a time: R_CONTIG
 * when the tile's rows come in fours, K_CONTIG when BK does, unless the
 * kernel transposes it with cp.async (which cannot transpose 16 bytes)... */
template <class Tile, int L, int ROWS, bool TRANSPOSED>
static constexpr bool gemm_vec_allowed()
{
    return L == GEMM_R_CONTIG ? ROWS % 4 == 0 : !(TRANSPOSED && SNN_ARCH_HAS_CP_ASYNC) && Tile::BK % 4 == 0;
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

/* Blocks of `threads` threads with a ring of ring_bytes that one SM holds,
 * by threads and shared memory. Registers are not counted: the tiles they
 * would hold to fewer blocks are the large ones, held to one or two already
 * by shared memory. */
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

/* KERNEL<<<Tile's blocks over M x N (x slices of k), Tile::THREADS, smem>>>(args...)
 * on the engine's stream. The kernel's ring has STAGES shared tiles of
 * STAGE_BYTES; a block that loads fewer k tiles (a short k, as the weight
 * gradient's batch, or a split-K slice) gets only the stages it fills: more
 * blocks fit on an SM. */
template <class Tile, auto KERNEL, int STAGE_BYTES, int STAGES, class... Args>
static void gemm_launch(int M, int N, int slices, int ktiles_per_block, const Args &...args)
{
    constexpr int SMEM = STAGE_BYTES * STAGES;
    if constexpr (SMEM > SNN_CUDA_SMEM_DEFAULT) {
        static bool opted_in; /* once per kernel instance */
        if (!opted_in) {
            CUDA_CHECK(cudaFuncSetAttribute((const void *)KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
            opted_in = true;
        }
    }
    if ((M + Tile::BM - 1) / Tile::BM > 65535)
        snn_die("GEMM with %d rows exceeds the grid's 65535 x %d (its role's block tile M) rows", M, Tile::BM);
    const int stages = std::max(1, std::min(ktiles_per_block, STAGES));
    const dim3 grid((N + Tile::BN - 1) / Tile::BN, (M + Tile::BM - 1) / Tile::BM, slices);
    KERNEL<<<grid, Tile::THREADS, STAGE_BYTES * stages, snn_stream()>>>(args...);
    CUDA_CHECK_LAUNCH();
}

/* The copies address a tile's lines by 32-bit byte offsets from its origin
 * (GemmOperand::issue): a tile's lines of FP32 rows must span less than 4 GiB. */
template <class Tile>
static void gemm_check_ld(int lda, int ldb)
{
    constexpr long lines = std::max({Tile::BM, Tile::BN, Tile::BK});
    if ((long)std::max(lda, ldb) * lines * (long)sizeof(float) > (long)UINT_MAX)
        snn_die("GEMM leading dimension %d: %ld lines of a tile span more than 4 GiB (the copies' 32-bit offsets)",
                std::max(lda, ldb), lines);
}

/* C[M,N] = A . B^T (A: M x K, B: N x K in layouts LA, LB; M, N > 0) through
 * Kernel::launch<VA, VB>(A, lda, B, ldb, M, N, K, rest...), with the widest
 * loads (VA, VB) that CAN_A, CAN_B and the operands' alignment allow. */
template <class Kernel, bool CAN_A, bool CAN_B, class... Rest>
static void gemm_dispatch(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Rest &...rest)
{
    const bool va = CAN_A && gemm_vec_aligned(A, lda), vb = CAN_B && gemm_vec_aligned(B, ldb);
    if constexpr (CAN_A && CAN_B)
        if (va && vb)
            return Kernel::template launch<4, 4>(A, lda, B, ldb, M, N, K, rest...);
    if constexpr (CAN_A)
        if (va)
            return Kernel::template launch<4, 1>(A, lda, B, ldb, M, N, K, rest...);
    if constexpr (CAN_B)
        if (vb)
            return Kernel::template launch<1, 4>(A, lda, B, ldb, M, N, K, rest...);
    Kernel::template launch<1, 1>(A, lda, B, ldb, M, N, K, rest...);
}

#endif
