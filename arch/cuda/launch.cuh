/* Every launch of the layered step's kernels, through snn_launch, on the engine's stream (snn_stream()).
 * Under CONFIG_CUDA_PDL (sm90) each is a programmatic dependent launch: the next kernel is launched as this
 * one's last blocks exit, before the grid's completion is processed, and its blocks wait at snn_grid_wait()
 * until this one's writes are visible. So every kernel launched here starts with snn_grid_wait(), before it
 * reads anything; each having waited for its own predecessor, it follows all those before. Elsewhere the
 * wait does nothing. A trigger earlier in each kernel (griddepcontrol.launch_dependents), which put the
 * next kernel's blocks on the SMs beside this one's, made every layered board slower (docs/PERF.md v37). */
#ifndef SNN_CUDA_LAUNCH_CUH
#define SNN_CUDA_LAUNCH_CUH

#include <utility>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "snn_config.h"

/* The first statement of a kernel that snn_launch launches. */
static __device__ __forceinline__ void snn_grid_wait()
{
#if defined(CONFIG_CUDA_PDL) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* kernel<<<grid, block, smem, snn_stream()>>>(args...), checked. */
template <class... Params, class... Args>
static void snn_launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args &&...args)
{
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = snn_stream();
#ifdef CONFIG_CUDA_PDL
    cudaLaunchAttribute pdl;
    pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &pdl;
    config.numAttrs = 1;
#endif
    CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
    CUDA_CHECK_LAUNCH();
}

#endif
