/* The kernel API, written once and declared for each backend: include with
 * OP(name) defined as the backend's prefix (host_##name, cuda_##name).
 * Pointers are in the backend's memory (host memory for host_, device memory
 * for cuda_). Matrices are row-major; weights are [out][in] as in nn.Linear.
 * Calls are asynchronous on the GPU (one stream) and never synchronise. */
#include <stdint.h>

/* Forward role: Y[M,N] = X[M,K] . W[N,K]^T + b[N], then ReLU if relu.
 * b may be NULL (no bias). */
void OP(linear_forward)(float *y, const float *x, const float *w, const float *b,
                        int M, int N, int K, int relu);

/* Input-gradient role: dX[M,K] = (dY[M,N] . W[N,K]) * (act[M,K] > 0).
 * act is the layer's input activation (a ReLU output); NULL: no mask. */
void OP(linear_backward_input)(float *dx, const float *dy, const float *w, const float *act,
                               int M, int N, int K);

/* Weight-gradient role fused with SGD + momentum (PyTorch's convention):
 *   gW[N,K] = dY[M,N]^T . X[M,K];  vw = mu*vw + gW;  w -= lr*vw
 *   gb[N]   = sum_m dY[m,N];       vb = mu*vb + gb;  b -= lr*vb
 * From vw = vb = 0 the momentum buffers hold exactly the gradients. b may be
 * NULL (no bias: vb unused). */
void OP(linear_backward_weight_sgd)(float *w, float *vw, float *b, float *vb,
                                    const float *dy, const float *x,
                                    int M, int N, int K, float lr, float mu);

/* Batch gather and normalisation: for i < rows, with
 * r = order ? order[*step * rows + i] : *step * rows + i,
 *   x[i][j] = (images[r][j] / 255 - mean) / std  (j < SNN_INPUT_DIM),  y[i] = labels[r]. */
void OP(gather_batch)(float *x, uint8_t *y, const uint8_t *images, const uint8_t *labels,
                      const int32_t *order, const int32_t *step, int rows, float mean, float std);

/* Numerically stable softmax + cross-entropy over logits[rows][SNN_CLASSES]:
 *   loss[*step] = mean over rows of -log softmax(logits)[y],
 *   correct[*step] = rows whose first arg-max equals y,
 *   dlogits = (softmax - onehot(y)) / rows, unless dlogits is NULL.
 * Deterministic: no atomics. */
void OP(softmax_xent)(float *dlogits, float *loss, int32_t *correct, const float *logits,
                      const uint8_t *y, const int32_t *step, int rows);

/* *step += 1, in the backend's memory (so a captured step can be replayed). */
void OP(step_advance)(int32_t *step);
