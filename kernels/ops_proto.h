/* The kernel API, written once and declared for each backend: include with
 * OP(name) defined as the backend's prefix (host_##name, cuda_##name). Each
 * prototype's comment starts with the two names it declares, so that a search
 * for one finds it here (tests/host/test_docs.py checks it).
 * Pointers are in the backend's memory (host memory for host_, device memory
 * for cuda_). Matrices are row-major; weights are [out][in] as in nn.Linear.
 * Calls are asynchronous on the GPU (one stream) and never synchronise.
 * A pointer named *16 is the 16-bit twin (CONFIG_GEMM_TWINS, kernels/ops.h)
 * of the FP32 tensor before it, or NULL: an op writes the twin of each
 * tensor it writes where one is given, and a GEMM reads its operands from
 * their twins where given. The host has no twins (always NULL). */
#include <stdint.h>

/* host_linear_forward, cuda_linear_forward: the forward role,
 * Y[M,N] = X[M,K] . W[N,K]^T + b[N], then ReLU if relu, then, where drop is given (a training step's hidden
 * layer), dropout: Y[i] = snn_dropout_keeps(..., drop->layer, drop->noise.row0 * N + i) ? Y[i] *
 * SNN_DROPOUT_SCALE : 0 (kernels/noise.h). b may be NULL (no bias). */
void OP(linear_forward)(float *y, snn_twin *y16, const float *x, const snn_twin *x16, const float *w,
                        const snn_twin *w16, const float *b, int M, int N, int K, int relu, const snn_drop *drop);

/* host_linear_backward_input, cuda_linear_backward_input: the input-gradient role,
 * dX[M,K] = (dY[M,N] . W[N,K]) * (act[M,K] > 0) * scale.
 * act is the layer's input activation (a ReLU output); NULL: no mask. Where that output went through
 * dropout, scale is SNN_DROPOUT_SCALE: a dropped unit's activation is 0 and a kept one's scaled, so the mask
 * and the scale are dropout's derivative too (else 1). */
void OP(linear_backward_input)(float *dx, snn_twin *dx16, const float *dy, const snn_twin *dy16, const float *w,
                               const snn_twin *w16, const float *act, float scale, int M, int N, int K);

/* host_linear_backward_weight_update, cuda_linear_backward_weight_update: the weight-gradient role fused
 * with the optimizer's update (kernels/optim.h) at the step's factors *rate:
 *   gW[N,K] = dY[M,N]^T . X[M,K];  w = snn_update(w, gW, sw)  element by element
 *   gb[N]   = sum_m dY[m,N];       b = snn_update(b, gb, sb)
 * sw and sb hold SNN_OPTIM_MOMENTS arrays each, shaped as w and b (SGD's momentum: from 0, after the first
 * step it holds exactly the gradient). b may be NULL (no bias: sb unused). */
void OP(linear_backward_weight_update)(float *w, snn_twin *w16, snn_state sw, float *b, snn_state sb,
                                       const float *dy, const snn_twin *dy16, const float *x, const snn_twin *x16,
                                       int M, int N, int K, const snn_rate *rate);

/* host_linear_backward_weight, cuda_linear_backward_weight: the weight-gradient role without the update,
 * for data parallelism (whose gradients are all-reduced before it) and the tests and tools:
 *   gw[N,K] = dY[M,N]^T . X[M,K];  gb[N] = sum_m dY[m,N]  (gb NULL: no bias)
 * each summed as linear_backward_weight_update sums it; dY's rows lie ldy floats apart (N; more for columns
 * of a wider dY, a range of a layer's outputs). */
void OP(linear_backward_weight)(float *gw, float *gb, const float *dy, const snn_twin *dy16, int ldy,
                                const float *x, const snn_twin *x16, int M, int N, int K);

/* host_apply_update, cuda_apply_update: the optimizer's update of n parameters from their gradients,
 * p[i] = snn_update(p[i], g[i], the state at i) at the step's factors *rate (kernels/optim.h), p16 (p's
 * twin, or NULL) rewritten beside it. g_bf16, where given, holds the gradients as BF16 bits instead of g
 * (data parallelism's all-reduced copy). advance, where given, the clock's step: *advance += 1, the training
 * step's end (the update reads the factors, not the step). */
void OP(apply_update)(float *p, snn_twin *p16, snn_state s, const float *g, const uint16_t *g_bf16, long n,
                      const snn_rate *rate, int32_t *advance);

/* host_gather_batch, cuda_gather_batch: batch gather and normalisation: for i < rows, with
 * r = order ? order[f + i] : f + i, f = snn_batch_first(noise, *step, rows) (kernels/noise.h: *step * rows
 * where there is one process; a data-parallel training step's rows are its share of the batch),
 *   x[i][j] = (images[r][j] / 255 - mean) / std  (j < SNN_INPUT_DIM),  y[i] = labels[r].
 * A training step's gather (noise.epoch given) under CONFIG_TRAIN_AUGMENT_SHIFT reads each image translated
 * by snn_shift_of(noise.key, *noise.epoch, *step, noise.row0 + i) instead (kernels/noise.h). dropout_width >
 * 0: the step's first hidden layer, that wide, drops units, and a GPU gather may draw its mask beside the
 * batch (kernels/cuda/dropout_mask.cuh), which that layer's forward then reads. clock, where given (a
 * training step's gather, its first op): the step's factors into *clock->rate too (snn_clock_rate,
 * kernels/optim.h), for its updates. */
void OP(gather_batch)(float *x, snn_twin *x16, uint8_t *y, const uint8_t *images, const uint8_t *labels,
                      const int32_t *order, const int32_t *step, int rows, float mean, float std,
                      snn_noise noise, int dropout_width, const snn_clock *clock);

/* host_softmax_xent, cuda_softmax_xent: numerically stable softmax + cross-entropy over
 * logits[rows][SNN_CLASSES]:
 *   loss[*step] = mean over rows of -log softmax(logits)[y],
 *   correct[*step] = rows whose first arg-max equals y,
 *   dlogits = (softmax - onehot(y)) / rows, unless dlogits is NULL.
 * A training step's (dlogits given) rows are 1/SNN_DP_WORLD of its batch: its loss and gradient divide by
 * rows x SNN_DP_WORLD, this process's share of the batch's mean, which the all-reduce sums.
 * Deterministic: no atomics. */
void OP(softmax_xent)(float *dlogits, snn_twin *dlogits16, float *loss, int32_t *correct, const float *logits,
                      const uint8_t *y, const int32_t *step, int rows);

/* host_output_step, cuda_output_step: the output layer's training step, K inputs to SNN_CLASSES outputs,
 * in one op, as these ops compute it (up to the order of the sums):
 *   linear_forward(logits, x, w, b, M, SNN_CLASSES, K, no ReLU, no dropout);
 *   softmax_xent(dlogits, loss, correct, logits, y, step, M);
 *   linear_backward_input(dx, dlogits, w, act = x, scale, M, SNN_CLASSES, K), unless dx is NULL;
 *   linear_backward_weight_update(w, sw, b, sb, dlogits, x, M, SNN_CLASSES, K, rate);
 *   and where dx_sums is given (with dx: alone it is refused), dx's column sums over the M rows into it: the
 *   bias gradient of the layer below, as linear_backward_weight's gb of dY = dx (on the GPU, in the bias
 *   kernel's order).
 * b may be NULL (no bias); the GPU's (CONFIG_CUDA_OUTPUT_STEP) needs the twins of x and w. */
void OP(output_step)(float *logits, float *dlogits, snn_twin *dlogits16, float *loss, int32_t *correct,
                     float *dx, snn_twin *dx16, const float *x, const snn_twin *x16, float *w, snn_twin *w16,
                     snn_state sw, float *b, snn_state sb, const uint8_t *y, const int32_t *step, float scale,
                     int M, int K, const snn_rate *rate, float *dx_sums);

/* host_step_advance, cuda_step_advance: *step += 1, in the backend's memory (so a captured step can be
 * replayed). */
void OP(step_advance)(int32_t *step);

/* host_schedule, cuda_schedule: *c.rate = the factors of the step the clock is at (snn_clock_rate,
 * kernels/optim.h). */
void OP(schedule)(snn_clock c);

/* host_write_twin, cuda_write_twin: t[i] = x[i] rounded to the twin's 16 bits, i < n: after x was written
 * other than by an op (the initial parameters). */
void OP(write_twin)(snn_twin *t, const float *x, long n);

/* host_bind_workspace, cuda_bind_workspace: binds the GEMMs' scratch memory, floats of it, once at
 * start-up (the GPU's split-K partial sums, then two hidden layers' dropout masks; NULL for none, and then a
 * forward GEMM with dropout is refused); the host reserves its packing buffers instead, so that a run
 * allocates nothing after start-up. */
void OP(bind_workspace)(float *workspace, long floats);

/* host_gemm_numerics, cuda_gemm_numerics: the GEMMs' numerics as tools/torch_parity.py names them
 * ("fp32", "bf16", "tf32_wgmma", ...), or NULL where the model's GEMMs do not share one. */
const char *OP(gemm_numerics)(void);
