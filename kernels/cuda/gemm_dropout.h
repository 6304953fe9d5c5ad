/* Dropout's keep masks for the forward GEMMs (kernels/cuda/gemm/forward.cu): a training step's hidden layer
 * has its mask drawn, a bit an element, and the GEMM's epilogue reads the bits instead of drawing the Philox
 * numbers itself on the few blocks a batch-sized GEMM has. A layer's mask is drawn beside the work before
 * it (kernels/cuda/dropout_mask.cuh): the first hidden layer's beside the batch's gather, the next's beside
 * the forward GEMM before it (the wgmma kernel's side job, gemm/side.cuh); where neither ran, by a kernel of
 * its own over every SM. Two masks, hidden layer l's at l % 2, so that one is drawn while the other is read:
 * the GEMM workspace's region after the split-K partial sums, bound once at start-up. */
#ifndef SNN_GEMM_DROPOUT_H
#define SNN_GEMM_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "snn_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Two masks of the widest hidden layer at the training batch, each rounded up to whole floats (the
 * workspace's unit); none on the host, whose forward draws as it goes. */
#if defined(CONFIG_TARGET_CUDA)
#define SNN_DROPOUT_MASK_FLOATS                                                                              \
    (SNN_DROPOUT ? 2 * (((size_t)SNN_BATCH * SNN_HIDDEN_MAX + 31) / 32) : (size_t)0)
#else
#define SNN_DROPOUT_MASK_FLOATS ((size_t)0)
#endif

/* Binds bytes of device memory as the two masks, half each; NULL unbinds (a forward GEMM with dropout is
 * refused then). */
void cuda_gemm_dropout_bind(uint8_t *mask, long bytes);

#ifdef __cplusplus
}
#endif
#endif
