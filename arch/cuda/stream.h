/* The engine's one stream: every copy and every launch goes on it, in
 * order, so nothing else needs synchronising (arch/cuda/runtime.cu). The
 * exceptions are data parallelism's (arch/cuda/dp.cu: its all-reduces and
 * the updates after them) and the layered step's weight steps under
 * STEP_BESIDE (arch/cuda/beside.cu): they run on streams of their own,
 * forked from this one and joined to it by events. */
#ifndef SNN_CUDA_STREAM_H
#define SNN_CUDA_STREAM_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The non-blocking stream created by snn_rt_init (0 before it), or the one
 * snn_stream_redirect set. */
cudaStream_t snn_stream(void);
/* Until called again with 0, snn_stream() returns s: how arch/cuda/dp.cu and
 * arch/cuda/beside.cu put the engine's kernels on their streams. */
void snn_stream_redirect(cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
