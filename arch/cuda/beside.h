/* The layered step's second lane (CONFIG_STEP_BESIDE; arch/cuda/beside.cu): every layer's weight step but
 * layer 0's on a second stream, on all the GPU's SMs but STEP_BESIDE_SMS, while the engine's stream runs what
 * follows it on those (nn/train.c: the input gradient below, or layer 0's weight step). Both are persistent
 * GEMM grids of as many blocks as their share and one block an SM (their registers), so launched together
 * they fall on different SMs; nothing pins them there. Captured, the two streams are two branches of the
 * step's graph. */
#ifndef SNN_CUDA_BESIDE_H
#define SNN_CUDA_BESIDE_H

#ifdef __cplusplus
extern "C" {
#endif

/* At start-up, on a GPU of `sms` multiprocessors: the second stream and its events. One message and exit 1
 * where STEP_BESIDE_SMS leaves the weight step none. */
void snn_beside_init(int sms);
/* Launches go on the second stream from here, after everything enqueued on either stream so far: the
 * weight step before it has ended, and so has every read of the gradient buffer the next input gradient
 * writes. */
void snn_beside_begin(void);
/* Launches go on the engine's stream again, beside what the second stream runs. */
void snn_beside_end(void);
/* The engine's stream waits for what the second stream runs; launches have the whole GPU again. */
void snn_beside_join(void);
/* The SMs of `all` a persistent grid launched now spans: all, or the share of the stream it goes on. */
int snn_beside_sms(int all);
/* 1 while launches go on the second stream (snn_beside_begin .. snn_beside_end), else 0. */
int snn_beside_on_side(void);

#ifdef __cplusplus
}
#endif
#endif
