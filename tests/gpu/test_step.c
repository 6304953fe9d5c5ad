/* Two training steps on the GPU against the host engine, from identical
 * parameters, zero momentum and one batch of random images and labels.
 *
 * Op by op: the schedule (nn/train.c) runs on the CUDA kernels through a
 * table that checks every GEMM op it calls (forward, input gradient, weight
 * gradient with the update, or the weight gradient and then the update
 * pass) against the host op on the same inputs,
 * the GPU's own, with the GEMM operands rounded as the GPU's kernels read
 * them (the 16-bit twins, or TF32 by cvt.rna): both sum the same products
 * in FP32 and differ by summation order alone. Why on the GPU's inputs:
 * a free-running comparison of a deep net amplifies any difference, even
 * of summation order. An FP32 sum a few ulps off crosses a rounding
 * boundary of the 16-bit operand it becomes now and then, and a
 * pre-activation moved across zero flips its ReLU mask and the unit's
 * whole gradient with it. On the 784-wide, four-hidden-layer board in BF16
 * (H100) that took the gradients of a GPU step and of the rounded host
 * engine, run free, 1.2e-2 apart, where on the GPU's inputs every op
 * agrees to summation order.
 *
 * Free-running, against the plain FP32 host engine: the logits and the
 * loss of both steps within the precision's step tolerance, and every
 * gradient's distance as a diagnostic line ("# ..."): the precision's own
 * error, which grows with each ReLU a gradient passes back through (BF16 on
 * the 784-wide board: 5.3e-2 one layer from the output, 1.0e-1 four layers
 * from it; tools/lab/torch_grad_error.py measures PyTorch's own). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/runtime.h"
#include "nn/train.h"
#include "snn_check.h"
#include "tests/gpu/reference.h"
#include "tests/gpu/tolerance.h"

/* ---- op by op: the CUDA kernels, each GEMM op checked as it runs ---------- */

static int step_number, op_number;

/* The GPU's result dev against the host's want; the larger error so far. */
static double worse(double so_far, const float *dev, const float *want, long n)
{
    const double e = device_error(dev, want, n);
    return e > so_far || isnan(e) ? e : so_far;
}

/* Host copies of a layer's optimizer state: its nw weights' moments and its N biases'. */
static void fetch_state(snn_state sw, snn_state sb, long nw, int N, snn_state *hsw, snn_state *hsb)
{
    *hsw = *hsb = (snn_state){{NULL, NULL}};
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        hsw->m[k] = fetch(sw.m[k], nw), hsb->m[k] = fetch(sb.m[k], N);
}

/* The largest error of a layer's updated weights, biases and moments against the host's, whose moments
 * (fetch_state's) it frees. */
static double updated_error(const float *w, const float *hw, const float *b, const float *hb, snn_state sw,
                            snn_state hsw, snn_state sb, snn_state hsb, long nw, int N)
{
    double err = worse(0, w, hw, nw);
    err = worse(err, b, hb, N);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
        err = worse(err, sw.m[k], hsw.m[k], nw);
        err = worse(err, sb.m[k], hsb.m[k], N);
        free(hsw.m[k]), free(hsb.m[k]);
    }
    return err;
}

static void op_verdict(const char *what, int M, int N, int K, double err)
{
    printf("%s - training step %d (%s GEMMs), op %d: %s %dx%dx%d on the GPU's inputs (relative error %.2e, "
           "tolerance %.0e)\n",
           err <= SNN_TOL_STEP_OP ? "ok" : "not ok", step_number, SNN_PRECISION_NAME, ++op_number, what, M, N, K,
           err, SNN_TOL_STEP_OP);
}

static void checked_forward(float *y, snn_twin *y16, const float *x, const snn_twin *x16, const float *w,
                            const snn_twin *w16, const float *b, int M, int N, int K, int relu, const snn_drop *drop)
{
    float *hx = fetch(x, (long)M * K), *hw = fetch(w, (long)N * K), *hb = fetch(b, N);
    float *want = snn_xmalloc((size_t)M * N * sizeof(float), "host result");
    cuda_linear_forward(y, y16, x, x16, w, w16, b, M, N, K, relu, drop);
    int32_t step = 0, epoch = 0; /* the dropout's, read where the GPU's are */
    snn_drop hdrop = {.layer = 0};
    if (drop) {
        snn_rt_download(&step, drop->step, sizeof step);
        snn_rt_download(&epoch, drop->noise.epoch, sizeof epoch);
        hdrop = *drop;
        hdrop.step = &step, hdrop.noise.epoch = &epoch;
    }
    rounded_forward(want, hx, hw, hb, M, N, K, relu, drop ? &hdrop : NULL);
    op_verdict(drop ? "forward (bias, ReLU, dropout)" : relu ? "forward (bias, ReLU)" : "forward (bias)", M, N, K,
               worse(0, y, want, (long)M * N));
    free(hx), free(hw), free(hb), free(want);
}

static void checked_backward_input(float *dx, snn_twin *dx16, const float *dy, const snn_twin *dy16, const float *w,
                                   const snn_twin *w16, const float *act, float scale, int M, int N, int K)
{
    float *hdy = fetch(dy, (long)M * N), *hw = fetch(w, (long)N * K), *hact = fetch(act, (long)M * K);
    float *want = snn_xmalloc((size_t)M * K * sizeof(float), "host result");
    cuda_linear_backward_input(dx, dx16, dy, dy16, w, w16, act, scale, M, N, K);
    rounded_backward_input(want, hdy, hw, hact, scale, M, N, K);
    op_verdict(scale != 1.0f ? "input gradient (ReLU and dropout mask)"
               : act         ? "input gradient (ReLU mask)"
                             : "input gradient",
               M, K, N, worse(0, dx, want, (long)M * K));
    free(hdy), free(hw), free(hact), free(want);
}

/* The optimizer state and the updated parameters, all within the tolerance. */
static void checked_backward_weight_update(float *w, snn_twin *w16, snn_state sw, float *b, snn_state sb,
                                           const float *dy, const snn_twin *dy16, const float *x, const snn_twin *x16,
                                           int M, int N, int K, const snn_rate *rate)
{
    const long nw = (long)N * K;
    float *hw = fetch(w, nw), *hb = fetch(b, N);
    snn_state hsw, hsb;
    fetch_state(sw, sb, nw, N, &hsw, &hsb);
    float *hdy = fetch(dy, (long)M * N), *hx = fetch(x, (long)M * K);
    snn_rate hrate;
    snn_rt_download(&hrate, rate, sizeof hrate);
    cuda_linear_backward_weight_update(w, w16, sw, b, sb, dy, dy16, x, x16, M, N, K, rate);
    rounded_backward_weight_update(hw, hsw, hb, hsb, hdy, hx, M, N, K, &hrate);
    op_verdict("weight gradient and update", N, K, M, updated_error(w, hw, b, hb, sw, hsw, sb, hsb, nw, N));
    free(hw), free(hb), free(hdy), free(hx);
}

/* The weight and bias gradients alone (CONFIG_STEP_UPDATE_PASS; data parallelism's buckets): the weights'
 * against the host's GEMM on the operands as rounded, the biases' against sums of the FP32 dY. */
/* sums[n] = the sum over the M rows of a[m * ld + n], in double: a bias gradient's reference. */
static void column_sums(float *sums, const float *a, long ld, int M, int N)
{
    for (int n = 0; n < N; n++) {
        double sum = 0.0;
        for (int m = 0; m < M; m++)
            sum += a[m * ld + n];
        sums[n] = (float)sum;
    }
}

static void checked_backward_weight(float *gw, float *gb, const float *dy, const snn_twin *dy16, int ldy,
                                    const float *x, const snn_twin *x16, int M, int N, int K)
{
    const long nw = (long)N * K;
    const long ndy = (long)(M - 1) * ldy + N; /* dY's rows ldy apart, the last one N long */
    float *hdy = fetch(dy, ndy), *hx = fetch(x, (long)M * K);
    float *dyr = rounded_copy(hdy, ndy), *xr = rounded_copy(hx, (long)M * K);
    float *want = snn_xmalloc((size_t)(nw + N) * sizeof(float), "host result"), *want_b = want + nw;
    cuda_linear_backward_weight(gw, gb, dy, dy16, ldy, x, x16, M, N, K);
    host_linear_backward_weight(want, NULL, dyr, NULL, ldy, xr, NULL, M, N, K);
    double err = worse(0, gw, want, nw);
    if (gb) {
        column_sums(want_b, hdy, ldy, M, N);
        err = worse(err, gb, want_b, N);
    }
    op_verdict("weight gradient", N, K, M, err);
    free(hdy), free(hx), free(dyr), free(xr), free(want);
}

/* The update pass on the GPU's gradients: the parameters and their state against the host's update. */
static void checked_apply_update(float *p, snn_twin *p16, snn_state s, const float *g, const uint16_t *g_bf16,
                                 long n, const snn_rate *rate, int32_t *advance)
{
    float *hp = fetch(p, n), *hg = fetch(g, n);
    uint16_t *hg16 = NULL;
    if (g_bf16) {
        hg16 = snn_xmalloc((size_t)n * sizeof(uint16_t), "host copy of BF16 gradients");
        snn_rt_download(hg16, g_bf16, (size_t)n * sizeof(uint16_t));
    }
    snn_state hs = {{NULL, NULL}};
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        hs.m[k] = fetch(s.m[k], n);
    snn_rate hrate;
    snn_rt_download(&hrate, rate, sizeof hrate);
    cuda_apply_update(p, p16, s, g, g_bf16, n, rate, advance);
    host_apply_update(hp, NULL, hs, hg, hg16, n, &hrate, NULL);
    double err = worse(0, p, hp, n);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
        err = worse(err, s.m[k], hs.m[k], n);
        free(hs.m[k]);
    }
    op_verdict("update pass", 1, (int)n, 1, err);
    free(hp), free(hg), free(hg16);
}

/* The output layer's step (CONFIG_CUDA_OUTPUT_STEP) as its four ops, each on the GPU's inputs: the logits
 * against the host's forward, the logits' gradients and loss against the host's softmax of the GPU's logits,
 * the input gradient and the update against the host's from the GPU's logits' gradients; and the input
 * gradient's column sums (the bias gradient below) against the host's, in double. */
static void checked_output_step(float *logits, float *dlogits, snn_twin *dlogits16, float *loss,
                                int32_t *correct, float *dx, snn_twin *dx16, const float *x,
                                const snn_twin *x16, float *w, snn_twin *w16, snn_state sw, float *b,
                                snn_state sb, const uint8_t *y, const int32_t *step, float scale, int M,
                                int K, const snn_rate *rate, float *dx_sums)
{
    const int N = SNN_CLASSES;
    const long nw = (long)N * K;
    float *hx = fetch(x, (long)M * K), *hw = fetch(w, nw), *hb = fetch(b, N), *w0 = fetch(w, nw);
    snn_state hsw, hsb;
    fetch_state(sw, sb, nw, N, &hsw, &hsb);
    uint8_t *hy = snn_xmalloc((size_t)M, "host copy of the labels");
    snn_rt_download(hy, y, (size_t)M);
    int32_t hstep;
    snn_rt_download(&hstep, step, sizeof hstep);
    snn_rate hrate;
    snn_rt_download(&hrate, rate, sizeof hrate);
    cuda_output_step(logits, dlogits, dlogits16, loss, correct, dx, dx16, x, x16, w, w16, sw, b, sb, y, step,
                     scale, M, K, rate, dx_sums);

    float *z = fetch(logits, (long)M * N), *dz = fetch(dlogits, (long)M * N);
    float *want = snn_xmalloc((size_t)M * (K > N ? K : N) * sizeof(float), "host result");
    rounded_forward(want, hx, w0, hb, M, N, K, 0, NULL);
    op_verdict("output step: forward (bias)", M, N, K, worse(0, logits, want, (long)M * N));

    float *hloss = snn_xmalloc((size_t)(hstep + 1) * sizeof(float), "host loss");
    int32_t *hcorrect = snn_xmalloc((size_t)(hstep + 1) * sizeof(int32_t), "host correct");
    host_softmax_xent(want, NULL, hloss, hcorrect, z, hy, &hstep, M);
    int32_t got_correct;
    snn_rt_download(&got_correct, correct + hstep, sizeof got_correct);
    double err = worse(0, dlogits, want, (long)M * N);
    err = worse(err, loss + hstep, hloss + hstep, 1);
    op_verdict(got_correct == hcorrect[hstep]
                   ? "output step: softmax and cross-entropy"
                   : "output step: softmax and cross-entropy (a wrong count correct)",
               M, N, 1, got_correct == hcorrect[hstep] ? err : INFINITY);

    if (dx) {
        rounded_backward_input(want, dz, w0, hx, scale, M, N, K);
        op_verdict("output step: input gradient (ReLU and dropout mask)", M, K, N,
                   worse(0, dx, want, (long)M * K));
    }
    if (dx_sums) { /* the layer below's bias gradient, in double from the GPU's dx */
        float *hdx = fetch(dx, (long)M * K);
        column_sums(want, hdx, K, M, K);
        op_verdict("output step: the bias gradient below (dx's column sums)", 1, K, M,
                   worse(0, dx_sums, want, K));
        free(hdx);
    }
    rounded_backward_weight_update(hw, hsw, hb, hsb, dz, hx, M, N, K, &hrate);
    op_verdict("output step: weight gradient and update", N, K, M,
               updated_error(w, hw, b, hb, sw, hsw, sb, hsb, nw, N));
    free(hx), free(hw), free(hb), free(w0), free(hy), free(z), free(dz), free(want), free(hloss),
        free(hcorrect);
}

static const snn_kernels checked_cuda_kernels = {
    .linear_forward = checked_forward,
    .linear_backward_input = checked_backward_input,
    .linear_backward_weight_update = checked_backward_weight_update,
    .linear_backward_weight = checked_backward_weight,
    .apply_update = checked_apply_update,
    .gather_batch = cuda_gather_batch,
    .softmax_xent = cuda_softmax_xent,
    .output_step = checked_output_step,
    .step_advance = cuda_step_advance,
    .schedule = cuda_schedule,
    .write_twin = cuda_write_twin,
    .bind_workspace = cuda_bind_workspace,
    .gemm_numerics = cuda_gemm_numerics,
};

/* ---- free-running: against the FP32 host engine ------------------------------ */

static void compare(const char *what, const float *gpu, const float *fp32, long n, double tol)
{
    const double e = device_error(gpu, fp32, n);
    printf("%s - training step (%s GEMMs): %s (%ld values, relative error %.2e against the FP32 host engine, "
           "tolerance %.0e)\n",
           e <= tol ? "ok" : "not ok", SNN_PRECISION_NAME, what, n, e, tol);
}

/* The optimizer state of every layer (SGD's momentum: the gradients after the first step), as diagnostics. */
static void report_state(const snn_model *gpu, const snn_model *fp32)
{
    for (int l = 0; l < SNN_LAYERS; l++)
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
            const snn_layer *g = &gpu->layer[l], *f = &fp32->layer[l];
            float *w = fetch(g->sw.m[k], (long)f->out * f->in), *b = fetch(g->sb.m[k], f->out);
            printf("# training step %d (%s GEMMs), free-running: optimizer state %d of layer %d: relative error "
                   "%.2e (weights), %.2e (biases) against the FP32 host engine\n",
                   step_number, SNN_PRECISION_NAME, k, l, rel_error(w, f->sw.m[k], (long)f->out * f->in),
                   rel_error(b, f->sb.m[k], f->out));
            free(w), free(b);
        }
}

static void train_step_compare(snn_model *gpu, snn_model *fp32, double tol)
{
    step_number++;
    op_number = 0;
    snn_train_step(gpu);
    snn_train_step(fp32);
    char what[64];
    if (step_number == 1)
        compare("logits", gpu->act[SNN_LAYERS], fp32->act[SNN_LAYERS], (long)SNN_BATCH * SNN_CLASSES, tol);
    snprintf(what, sizeof what, "loss of step %d", step_number);
    compare(what, gpu->train_loss + step_number - 1, fp32->train_loss + step_number - 1, 1, tol);
    report_state(gpu, fp32);
}

int main(void)
{
    if (!snn_rt_gpu_present()) {
        printf("skip - training step on the GPU: skipped: no GPU\n");
        return 0;
    }
#ifdef CONFIG_DP
    printf("skip - training step on the GPU: skipped: a data-parallel build's step all-reduces among its ranks "
           "(check_dp in tests/gpu/run.sh trains it on 2 and 4 GPUs)\n");
    return 0;
#endif
    snn_plan plan;
    snn_device_info dev;
    snn_model gpu, fp32;
    reference_models(&gpu, &fp32, &plan, &dev);
    gpu.kernels = &checked_cuda_kernels;

    train_step_compare(&gpu, &fp32, SNN_TOL_STEP);
    train_step_compare(&gpu, &fp32, SNN_TOL_STEP2);
    snn_rt_free(gpu.arena);
    free(fp32.arena);
    return 0;
}
