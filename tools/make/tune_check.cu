/* The autotuner's check of a candidate configuration (tools/make/tune.py): compiling this file, and nothing else,
 * runs every compile-time check a GEMM tile must pass on the configured target (the tiles of the three
 * roles, the mma.sync shape, the wgmma blocks, the fused step's tile), in about a second, where the build
 * that would fail on them takes a minute. It defines nothing. */
#include "kernels/cuda/gemm/tile.cuh"
#ifdef CONFIG_GEMM_TENSOR_CORES
#include "kernels/cuda/gemm/mma_shape.cuh"
#endif
#ifdef CONFIG_GEMM_WGMMA
#include "kernels/cuda/gemm/wgmma_shape.cuh"
/* the static_asserts in a block shape's body run when it is instantiated */
static_assert(sizeof(GemmWgmmaConfigTile) > 0 && sizeof(GemmWgmmaSmallTile) > 0 &&
                  sizeof(GemmWgmmaWgradTile) > 0 && sizeof(GemmWgmmaSmallWgradTile) > 0,
              "wgmma block shapes");
#ifdef CONFIG_GEMM_WGMMA_SMALL_WGRAD_PANEL
static_assert(sizeof(GemmWgmmaSmallPanelTile) > 0, "wgmma block shapes");
#endif
#endif
#ifdef CONFIG_STEP_FUSED
#include "kernels/cuda/fused/tile.cuh"
#endif
