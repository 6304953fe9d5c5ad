/* Every launch of the layered step's kernels, through SNN_LAUNCH, on the engine's stream (snn_stream()).
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

/* The first statement of a kernel that SNN_LAUNCH launches. */
static __device__ __forceinline__ void snn_grid_wait()
{
#if defined(CONFIG_CUDA_PDL) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* kernel<<<grid, block, smem, snn_stream()>>>(args...), checked as CUDA_CHECK checks a call: a failure
 * reported at the caller's file and line, `call` naming the launch (SNN_LAUNCH). */
template <class... Params, class... Args>
static void snn_launch_at(const char *file, int line, const char *call, void (*kernel)(Params...), dim3 grid,
                          dim3 block, size_t smem, Args &&...args)
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
    cudaError_t e = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess)
        snn_cuda_fail_at(file, line, call, e);
#ifdef SNN_SYNC_CHECK
    snn_cuda_sync_check(file, line);
#endif
}
#define SNN_LAUNCH(kernel, ...)                                                                            \
    snn_launch_at(__FILE__, __LINE__, "SNN_LAUNCH(" #kernel ", ...)", kernel, __VA_ARGS__)

#endif
