/* Data parallelism's collectives over NCCL (CONFIG_DP; arch/cuda/dp.cu): the communicator, each layer's
 * gradients all-reduced on a stream of their own as they are written and updated on a third, and the host's
 * figures summed over the ranks. Every rank makes the same calls in the same order. */
#ifndef SNN_CUDA_DP_H
#define SNN_CUDA_DP_H

#include <stdint.h>

#include "arch/dp.h"
#include "snn_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* After snn_rt_init: meets the other ranks through the rendezvous file (rank 0 writes NCCL's id, the
 * others read it) and joins the communicator; one clear message and exit 1 where that fails. */
void snn_dp_start(const snn_dp_place *p, const char *rendezvous);
void snn_dp_stop(void);

/* The figures summed at once at most: an epoch's steps. */
#define SNN_DP_FIGURES SNN_STEPS_PER_EPOCH

/* Binds the FP32 gradients (the parameters' layout; unused under DP_REDUCE_BF16, whose biases snn_dp_reduce
 * is handed), the BF16 gradients as sent (DP_REDUCE_BF16, else NULL), and the figures' scratch
 * (SNN_DP_FIGURES floats, then as many int32). */
void snn_dp_bind(float *grads, uint16_t *grads_bf16, float *figures);
/* A bucket of gradients (count floats from offset in the parameters' layout) is written on the engine's
 * stream: all-reduce it (the ranks' sum) on the communication stream, after what is enqueued so far. In FP32
 * they lie in the gradients' buffer (fp32 and n_fp32 unused). Under DP_REDUCE_BF16 they are summed in place
 * in the BF16 buffer: the weight gradient's GEMM wrote all but the last n_fp32 there
 * (cuda_linear_backward_weight_bf16), and those (the biases) are copied from the FP32 sums at fp32 here. */
void snn_dp_reduce(long offset, long count, const float *fp32, long n_fp32);
/* The engine's stream has enqueued the last read of the weights whose updates follow (the layer's input
 * gradient; for layer 0, which has none, its weight gradient): those updates run after it. */
void snn_dp_weights_read(void);
/* The update of the next bucket sent and not yet updated, in the order snn_dp_reduce sent them: what is
 * launched between snn_dp_update_begin and snn_dp_update_end runs on the update stream once that bucket's
 * all-reduce is done, beside the engine's stream. */
void snn_dp_update_begin(void);
void snn_dp_update_end(void);
/* The engine's stream waits for every all-reduce and update enqueued since the last join. */
void snn_dp_join(void);

/* The host arrays' sums over the ranks (a synchronisation): the steps' losses (each rank's share of the
 * batch's mean) and correct counts. */
void snn_dp_sum_figures(float *losses, int32_t *correct, int n);
/* 1 where any rank's flag is set (a synchronisation): a stop signal agreed on. */
int snn_dp_any(int flag);

#ifdef __cplusplus
}
#endif
#endif
