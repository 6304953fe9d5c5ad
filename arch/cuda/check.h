/* CUDA error checks: every runtime call and every launch. A failure prints
 * the call, CUDA's name and text for the error, a hint, file and line, and
 * exits 1 (through snn_die_at).
 *
 *   CUDA_CHECK(cudaMemcpyAsync(...));
 *   kernel<<<grid, block, smem, snn_stream()>>>(...);
 *   CUDA_CHECK_LAUNCH();
 *
 * (the layered step's kernels go through SNN_LAUNCH, arch/cuda/launch.cuh, which checks the same way)
 *
 * Build with EXTRA_NVCCFLAGS=-DSNN_SYNC_CHECK to also synchronise after
 * every launch (outside a graph capture), so an asynchronous fault is
 * reported at the launch that caused it. */
#ifndef SNN_CUDA_CHECK_H
#define SNN_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "snn_check.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to do about an error, in one line. */
static inline const char *snn_cuda_hint(cudaError_t e)
{
    switch (e) {
    case cudaErrorNoDevice:
        return "no CUDA GPU found: build the host target: make host_defconfig";
    case cudaErrorInsufficientDriver:
        return "the NVIDIA driver is older than this CUDA runtime: update the driver";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidPtx:
    case cudaErrorUnsupportedPtxVersion:
        return "this build has no code this GPU (or its driver) can load: pick the board's defconfig "
               "(make help), set CONFIG_CUDA_ARCH_OVERRIDE to the card, or update the driver";
    case cudaErrorMemoryAllocation:
        return "out of device memory: free the GPU or lower CONFIG_TRAIN_BATCH_SIZE, "
               "CONFIG_EVAL_BATCH_SIZE or the hidden widths (CONFIG_NN_HIDDEN_WIDTH, _WIDTH_k)";
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorLaunchFailure:
        return "a kernel faulted: run under compute-sanitizer, and rebuild with "
               "EXTRA_NVCCFLAGS=-DSNN_SYNC_CHECK to report it at the launch that caused it";
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchOutOfResources:
        return "a launch asks for more threads, registers or shared memory than the GPU has: "
               "check the CONFIG_GEMM_* tile shape";
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:
        return "the captured step did something a CUDA graph cannot hold (a synchronising call, "
               "an allocation): fix the step or disable CONFIG_CUDA_GRAPH";
    default:
        return "rebuild with EXTRA_NVCCFLAGS=-DSNN_SYNC_CHECK to find the failing launch";
    }
}

/* Dies for a failed CUDA call: its text, CUDA's name and text for e, and the hint, at file:line. */
__attribute__((noreturn)) static inline void snn_cuda_fail_at(const char *file, int line, const char *call,
                                                              cudaError_t e)
{
    snn_die_at(file, line, "%s failed: %s (%s)\n  hint: %s", call, cudaGetErrorString(e), cudaGetErrorName(e),
               snn_cuda_hint(e));
}

/* Synchronises the stream launches go on (snn_stream()) unless it is being captured (SNN_SYNC_CHECK
 * builds). */
void snn_cuda_sync_check(const char *file, int line);

#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t snn_err_ = (call);                                                    \
        if (snn_err_ != cudaSuccess)                                                      \
            snn_cuda_fail_at(__FILE__, __LINE__, #call, snn_err_);                        \
    } while (0)

#ifdef SNN_SYNC_CHECK
#define CUDA_CHECK_LAUNCH()                                \
    do {                                                   \
        CUDA_CHECK(cudaGetLastError());                    \
        snn_cuda_sync_check(__FILE__, __LINE__);           \
    } while (0)
#else
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
#endif

#endif
