/* The engine's one stream: every copy and every launch goes on it, in
 * order, so nothing else needs synchronising (arch/cuda/runtime.cu). */
#ifndef SNN_CUDA_STREAM_H
#define SNN_CUDA_STREAM_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The non-blocking stream created by snn_rt_init (0 before it). */
cudaStream_t snn_stream(void);

#ifdef __cplusplus
}
#endif
#endif
