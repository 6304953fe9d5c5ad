/* The fused step (CONFIG_STEP_FUSED) on the GPU against the host engine,
 * from identical parameters, zero optimizer state and random images and
 * labels.
 *
 * Op by op: one fused step, then every op it ran checked against the host
 * op on the inputs the GPU had (every layer's input, output and output
 * gradient stays in its own buffer), with the GEMM operands rounded as the
 * GPU reads them (tests/gpu/reference.h): the batch gather (bit for bit,
 * translated where the build augments), each forward layer and each input
 * gradient (through dropout's mask where the build drops units), softmax
 * and cross-entropy (the loss, the correct count, dlogits), each weight
 * gradient with its update.
 *
 * Then two fused steps in one launch, free-running against the FP32 host
 * engine (the loss of each within the precision's step tolerance); the
 * same 20 steps twice, bit for bit; and the fused evaluation of a random
 * test set against the layered one (same correct counts, losses within
 * the GEMM tolerance). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/runtime.h"
#include "kernels/fused.h"
#include "nn/train.h"
#include "snn_check.h"
#include "tests/gpu/reference.h"
#include "tests/gpu/tolerance.h"

static void verdict(int ok, const char *line)
{
    printf("%s - fused step (%s GEMMs): %s\n", ok ? "ok" : "not ok", SNN_PRECISION_NAME, line);
}

/* The GPU tensor dev (n floats) against want: relative error within tol. */
static void check(const char *what, const float *dev, const float *want, long n, double tol)
{
    const double e = device_error(dev, want, n);
    char line[256];
    snprintf(line, sizeof line, "%s (relative error %.2e, tolerance %.0e)", what, e, tol);
    verdict(e <= tol, line);
}

/* The host model's copy of the GPU model's state. */
#define STATE_FLOATS ((long)SNN_OPTIM_MOMENTS * SNN_PARAMS)
struct state {
    float *params, *optim;
};

static struct state take_state(const snn_model *m)
{
    struct state s = {snn_xmalloc(SNN_PARAMS * sizeof(float), "parameters"),
                      snn_xmalloc((STATE_FLOATS + 1) * sizeof(float), "optimizer state")};
    snn_model_get_state(m, s.params, s.optim);
    return s;
}

/* An update's tolerance: the precision's op tolerance, but in FP32 where the grid-resident kernel trains,
 * which adds a tile's products in its fragments' slot order rather than the host's k order
 * (kernels/cuda/fused/mma16.cuh): the tolerance for the same products summed in another order, which AdamW
 * needs where it turns gradients near 0 into whole steps (tests/gpu/tolerance.h). */
static double update_tolerance(void)
{
#ifndef CONFIG_GEMM_TENSOR_CORES
    if (strcmp(cuda_fused_kernel_name(), "grid-resident") == 0)
        return SNN_TOL_STEP_OP_REORDERED;
#endif
    return SNN_TOL_STEP_OP;
}

/* One fused step from order step 0, each op checked on the GPU's inputs. */
static void op_by_op(snn_model *gpu, const snn_model *host)
{
    const double tol = SNN_TOL_STEP_OP, tol_update = update_tolerance();
    const int B = SNN_BATCH;
    const snn_fused_net *n = &gpu->fused;
    struct state old = take_state(gpu);
    const snn_rate rate = snn_rate_at(0, gpu->clock.epoch_steps, gpu->clock.total); /* epoch 0, step 0 */
    snn_train_fused(gpu, 0, 1);

    /* the gather: the same arithmetic as the host's, so bit for bit */
    float *x0 = fetch(n->input[0], (long)B * SNN_INPUT_DIM),
          *want_x0 = snn_xmalloc((size_t)B * SNN_INPUT_DIM * 4, "x0");
    uint8_t *labels = snn_xmalloc(B, "labels"), *want_labels = snn_xmalloc(B, "labels");
    int32_t zero = 0;
    snn_rt_download(labels, n->labels[0], B);
    host_gather_batch(want_x0, NULL, want_labels, host->train_images, host->train_labels, host->order, &zero,
                      B, SNN_PIXEL_MEAN, SNN_PIXEL_STD, host->noise, 0, NULL);
    const int same = !memcmp(x0, want_x0, (size_t)B * SNN_INPUT_DIM * 4) && !memcmp(labels, want_labels, B);
    verdict(same, "gather of step 0: images and labels bit for bit as the host's");

    float *x[SNN_LAYERS + 1], *dy[SNN_LAYERS];
    x[0] = x0;
    for (int l = 1; l <= SNN_LAYERS; l++)
        x[l] = fetch(n->act[l], (long)B * SNN_DIM(l));
    for (int l = 0; l < SNN_LAYERS; l++)
        dy[l] = fetch(n->grad[l], (long)B * SNN_DIM(l + 1));
    char what[160];
    for (int l = 0; l < SNN_LAYERS; l++) {
        const snn_layer *L = &gpu->layer[l];
        const float *w = old.params + (L->w - gpu->params), *b = old.params + (L->b - gpu->params);
        float *want = snn_xmalloc((size_t)B * L->out * 4, "forward");
        const snn_drop dropout = {host->noise, &zero, l, 0};
        const int hidden = l + 1 < SNN_LAYERS;
        rounded_forward(want, x[l], w, b, B, L->out, L->in, hidden, SNN_DROPOUT && hidden ? &dropout : NULL);
        snprintf(what, sizeof what, "layer %d forward %dx%dx%d on the GPU's inputs", l, B, L->out, L->in);
        check(what, n->act[l + 1], want, (long)B * L->out, tol);
        free(want);
    }
    float loss, *dlogits = snn_xmalloc((size_t)B * SNN_CLASSES * 4, "dlogits");
    int32_t correct, got_correct;
    host_softmax_xent(dlogits, NULL, &loss, &correct, x[SNN_LAYERS], labels, &zero, B);
    check("softmax + cross-entropy: dlogits", n->grad[SNN_LAYERS - 1], dlogits, (long)B * SNN_CLASSES, 1e-5);
    check("softmax + cross-entropy: the step's loss", n->train_loss, &loss, 1, 1e-5);
    snn_rt_download(&got_correct, n->train_correct, sizeof got_correct);
    snprintf(what, sizeof what, "softmax + cross-entropy: %d correct (host %d)", (int)got_correct,
             (int)correct);
    verdict(got_correct == correct, what);
    for (int l = SNN_LAYERS - 1; l >= 0; l--) {
        const snn_layer *L = &gpu->layer[l];
        const long nw = (long)L->out * L->in;
        const float *w = old.params + (L->w - gpu->params);
        if (l > 0) {
            float *want = snn_xmalloc((size_t)B * L->in * 4, "input gradient");
            rounded_backward_input(want, dy[l], w, x[l], SNN_DROPOUT_SCALE, B, L->out, L->in);
            snprintf(what, sizeof what, "layer %d input gradient %dx%dx%d on the GPU's inputs", l, B, L->in,
                     L->out);
            check(what, n->grad[l - 1], want, (long)B * L->in, tol);
            free(want);
        }
        float *hw = old.params + (L->w - gpu->params), *hb = old.params + (L->b - gpu->params);
        snn_state hsw = {{NULL, NULL}}, hsb = {{NULL, NULL}};
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
            hsw.m[k] = old.optim + k * SNN_PARAMS + (L->w - gpu->params);
            hsb.m[k] = old.optim + k * SNN_PARAMS + (L->b - gpu->params);
        }
        rounded_backward_weight_update(hw, hsw, hb, hsb, dy[l], x[l], B, L->out, L->in, &rate);
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
            snprintf(what, sizeof what, "layer %d weight gradient %dx%dx%d + update: optimizer state %d", l,
                     L->out, L->in, B, k);
            check(what, L->sw.m[k], hsw.m[k], nw, tol_update);
            snprintf(what, sizeof what, "layer %d bias gradient + update: the bias's optimizer state %d", l, k);
            check(what, L->sb.m[k], hsb.m[k], L->out, tol_update);
        }
        snprintf(what, sizeof what, "layer %d weight gradient + update: weights", l);
        check(what, L->w, hw, nw, tol_update);
        snprintf(what, sizeof what, "layer %d bias gradient + update: bias", l);
        check(what, L->b, hb, L->out, tol_update);
    }
    for (int l = 0; l <= SNN_LAYERS; l++)
        free(x[l]);
    for (int l = 0; l < SNN_LAYERS; l++)
        free(dy[l]);
    free(want_x0), free(labels), free(want_labels), free(dlogits), free(old.params), free(old.optim);
}

/* Both models back to the parameters p and zero optimizer state, at step 0. */
static void restart(snn_model *gpu, snn_model *host, const float *p)
{
    float *zeros = calloc(STATE_FLOATS + 1, sizeof(float));
    SNN_CHECK_SYS(zeros, "zeros");
    snn_model_set_state(gpu, p, zeros);
    snn_model_set_state(host, p, zeros);
    const int32_t zero = 0;
    snn_rt_upload(gpu->train_step, &zero, sizeof zero);
    host->train_step[0] = 0;
    host_schedule(host->clock);
    free(zeros);
}

int main(void)
{
    if (!snn_rt_gpu_present()) {
        printf("skip - fused step on the GPU: skipped: no GPU\n");
        return 0;
    }
    snn_plan plan;
    snn_device_info dev;
    snn_model gpu, host;
    reference_models(&gpu, &host, &plan, &dev);
    char launch[640];
    snn_train_describe(launch, sizeof launch);
    printf("# %s\n", launch);
    struct state initial = take_state(&gpu);

    gpu.fused.trace = 1; /* the resident kernels write each step's tensors where op_by_op reads them */
    op_by_op(&gpu, &host);
    gpu.fused.trace = 0;

    /* two steps in one launch, free-running against the FP32 host engine */
    restart(&gpu, &host, initial.params);
    snn_train_fused(&gpu, 0, 2);
    snn_train_step(&host);
    snn_train_step(&host);
    check("loss of step 1, free-running against the FP32 host engine", gpu.train_loss, host.train_loss, 1,
          SNN_TOL_STEP);
    check("loss of step 2, free-running against the FP32 host engine", gpu.train_loss + 1,
          host.train_loss + 1, 1, SNN_TOL_STEP2);
    int32_t counter;
    snn_rt_download(&counter, gpu.train_step, sizeof counter);
    verdict(counter == 2, "the step counter after steps 0 and 1 is 2");

    /* determinism: 20 steps twice, in one launch and in three */
    restart(&gpu, &host, initial.params);
    snn_train_fused(&gpu, 0, 20);
    struct state a = take_state(&gpu);
    restart(&gpu, &host, initial.params);
    snn_train_fused(&gpu, 0, 7);
    snn_train_fused(&gpu, 7, 8);
    snn_train_fused(&gpu, 8, 20);
    struct state b = take_state(&gpu);
    const int identical =
        !memcmp(a.params, b.params, SNN_PARAMS * 4) && !memcmp(a.optim, b.optim, STATE_FLOATS * 4);
    verdict(identical, "20 steps in one launch and in launches of 7, 1 and 12: bit for bit");

    /* evaluation: fused against layered, on the trained weights */
    snn_score fused = snn_evaluate(&gpu, SNN_SET_TEST);
    float *fused_losses = fetch(gpu.eval_loss, SNN_EVAL_STEPS);
    float *logits = snn_xmalloc((size_t)SNN_TEST_COUNT * SNN_CLASSES * 4, "logits");
    snn_score layered = snn_evaluate_logits(&gpu, SNN_SET_TEST, logits);
    check("evaluation losses of each test batch against the layered step's", gpu.eval_loss, fused_losses,
          SNN_EVAL_STEPS, SNN_TOL_GEMM);
    const double images = fabs(fused.accuracy - layered.accuracy) * SNN_TEST_COUNT;
    char line[160];
    snprintf(line, sizeof line,
             "evaluation accuracy %.2f%%, the layered step's %.2f%%: %.0f images apart (at most 2)",
             100 * fused.accuracy, 100 * layered.accuracy, images);
    verdict(lround(images) <= 2, line); /* a count: 2 images apart can compute as 2.0000001 */

    free(initial.params), free(initial.optim), free(a.params), free(a.optim), free(b.params), free(b.optim);
    free(fused_losses), free(logits);
    snn_rt_free(gpu.arena);
    free(host.arena);
    return 0;
}
