/* The fused step's tile (CONFIG_GEMM_FUSED_*) and the checks Kconfig cannot express: those of every GEMM tile
 * on this build's kernel, and the fused step's own. Shared by the grid-wide kernel (fused/grid_wide.cu) and
 * the autotuner's check (tools/make/tune_check.cu). */
#ifndef SNN_FUSED_TILE_CUH
#define SNN_FUSED_TILE_CUH

#include "kernels/cuda/gemm/tile.cuh"
#include "snn_config.h"
#ifdef CONFIG_GEMM_TENSOR_CORES
#include "kernels/cuda/gemm/mma_shape.cuh"
#endif

typedef GEMM_ROLE_TILE(FUSED) FusedTile;
GEMM_CHECK_TILE(FusedTile, FUSED);
#ifdef CONFIG_GEMM_TENSOR_CORES
GEMM_CHECK_MMA_TILE(FusedTile, FUSED);
#else
GEMM_CHECK_SIMT_TILE(FusedTile, FUSED);
#endif
/* the grid-wide kernel sums each bias column as the layered bias kernel does, in CONFIG_CUDA_BIAS_SLICES
 * slices of a block's threads */
static_assert(FusedTile::THREADS % CONFIG_CUDA_BIAS_SLICES == 0,
              "the Fused step tile's threads must be a multiple of CONFIG_CUDA_BIAS_SLICES");
static_assert(
    CONFIG_GEMM_FUSED_BLOCK_N >= SNN_CLASSES,
    "CONFIG_GEMM_FUSED_BLOCK_N must cover the 10 classes: the block that computes a row tile of the "
    "logits also takes their softmax");

#endif
