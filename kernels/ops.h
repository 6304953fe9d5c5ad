/* The kernels, as functions per backend (host_*, cuda_*, each named in its
 * prototype's comment in kernels/ops_proto.h) and as a table the schedule
 * calls through, so that one schedule (nn/train.c) drives either. The host
 * kernels are always built: they are the reference of every GPU test. */
#ifndef SNN_OPS_H
#define SNN_OPS_H

#include <stdint.h>

#include "kernels/distort.h"
#include "kernels/noise.h"
#include "kernels/optim.h"
#include "snn_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The storage of a 16-bit twin: BF16 or FP16 bits, as the precision says. */
typedef uint16_t snn_twin;

#define OP(name) host_##name
#include "kernels/ops_proto.h"
#undef OP
/* The bias half of host_linear_backward_weight_update (kernels/ops_proto.h),
 * alone: for a reference whose bias gradient reads another dY (tests). */
void host_bias_update(float *b, snn_state sb, const float *dy, int M, int N, const snn_rate *rate);
/* The bias gradient of host_linear_backward_weight alone: gb[n] = the sum over m of dy[m * ldy + n]. */
void host_bias_grad(float *gb, const float *dy, int ldy, int M, int N);
/* The dropout half of host_linear_forward (kernels/ops_proto.h), alone, in place on t[rows][width]: for the
 * tests of the draws. */
void host_dropout(float *t, const snn_drop *drop, int rows, int width);

#ifdef CONFIG_TARGET_CUDA
#define OP(name) cuda_##name
#include "kernels/ops_proto.h"
#undef OP
#endif

typedef struct {
#define OP(name) (*name)
#include "kernels/ops_proto.h"
#undef OP
} snn_kernels;

/* clang-format off */
#define SNN_KERNEL_TABLE(prefix)                                                 \
    {                                                                            \
        .linear_forward = prefix##_linear_forward,                               \
        .linear_backward_input = prefix##_linear_backward_input,                 \
        .linear_backward_weight_update = prefix##_linear_backward_weight_update, \
        .linear_backward_weight = prefix##_linear_backward_weight,               \
        .apply_update = prefix##_apply_update,                                   \
        .gather_batch = prefix##_gather_batch,                                   \
        .softmax_xent = prefix##_softmax_xent,                                   \
        .output_step = prefix##_output_step,                                     \
        .step_advance = prefix##_step_advance,                                   \
        .schedule = prefix##_schedule,                                           \
        .write_twin = prefix##_write_twin,                                       \
        .bind_workspace = prefix##_bind_workspace,                               \
        .gemm_numerics = prefix##_gemm_numerics,                                 \
    }
/* clang-format on */

extern const snn_kernels snn_host_kernels;
#ifdef CONFIG_TARGET_CUDA
extern const snn_kernels snn_cuda_kernels;
#define SNN_TARGET_KERNELS (&snn_cuda_kernels)
#else
#define SNN_TARGET_KERNELS (&snn_host_kernels)
#endif

#ifdef __cplusplus
}
#endif
#endif
