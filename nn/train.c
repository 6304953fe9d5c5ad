/* From main() to a kernel, a call a line. The layered step on a CUDA target, to one GEMM's launch:
 *   main (app/mnist.c)                                   the run: its set-up, its epochs
 *   train_epoch (app/mnist.c)                            one epoch, its steps timed stretch by stretch
 *   snn_rt_run_step (arch/cuda/runtime.cu)               the step captured as a CUDA graph, replayed
 *   snn_train_step (nn/train.c)                          the schedule, through the table m->kernels
 *   cuda_linear_forward (kernels/cuda/gemm/forward.cu)   the forward role's epilogue
 *   gemm_run (kernels/cuda/gemm/run.cuh)                 which kernel, as run.cuh's tree shows
 *   gemm_mma (kernels/cuda/gemm/run.cuh)                 split-K or not; SNN_LAUNCH(gemm_mma_kernel...)
 * The fused step (CONFIG_STEP_FUSED), a stretch of steps in one launch:
 *   main, then train_epoch (app/mnist.c)
 *   snn_train_fused (nn/train.c)
 *   cuda_fused_train (kernels/cuda/fused/step.cu)        the first fused kernel that fits, in order
 *   train (kernels/cuda/fused/cluster.cu)                its launch; grid_resident.cu's, grid_wide.cu's alike
 * tests/host/test_docs.py checks that each function is defined in the file named beside it. */
#include "nn/train.h"

#include <stdio.h>
#include <stdlib.h>

#include "arch/dp.h"
#include "arch/runtime.h"
#ifdef CONFIG_DP
#include "arch/cuda/dp.h"
#include "kernels/cuda/gemm_bf16_grad.h"
#endif
#ifdef CONFIG_STEP_BESIDE
#include "arch/cuda/beside.h"
#endif
#include "kernels/ops.h"
#include "mm/mm.h"
#include "snn_check.h"

/* The step's own tensors: the layer outputs act[1..L] and the activation
 * gradients. Under MM_STATIC they are arena regions bound once, and take and
 * drop leave them be; under POOL and CUDA_ASYNC take allocates one where it is
 * first written and drop frees it after its last read, as a framework does. */
static float *take(float **slot, long floats)
{
    if (SNN_MM_PER_STEP)
        *slot = snn_mm_alloc((size_t)floats * sizeof(float));
    return *slot;
}

static void drop(float **slot)
{
    if (SNN_MM_PER_STEP) {
        snn_mm_free(*slot);
        *slot = NULL;
    }
}

#if defined(CONFIG_DP) || defined(CONFIG_STEP_UPDATE_PASS)
/* The parameters [at, at + n) updated from their gradients g (or the BF16 gradients g16 as all-reduced),
 * the twins rewritten beside them (layer 0's open the parameters', as its state the state's). */
static void update_range(snn_model *m, long at, long n, const float *g, const uint16_t *g16, int32_t *advance)
{
    const snn_layer *first = &m->layer[0];
    snn_state s = first->sw;
    for (int j = 0; j < SNN_OPTIM_MOMENTS; j++)
        s.m[j] += at;
    m->kernels->apply_update(m->params + at, first->w16 ? first->w16 + at : NULL, s, g, g16, n, m->clock.rate,
                             advance);
}
#endif

#ifdef CONFIG_DP
/* Data parallel, layer L's weight gradient a bucket at a time (snn_dp_bucket_rows), each all-reduced on the
 * communication stream as soon as it is written, before the layer's input gradient, so that the sums run
 * beside it (docs/PERF.md v44). */
static void reduce_weight_gradient(snn_model *m, const snn_layer *L, int l, const float *dy,
                                   const snn_twin *dy16, int B)
{
    const long at = (long)(L->w - m->params), rows = snn_dp_bucket_rows(L->in, SNN_DP_BUCKET_FLOATS);
#ifdef CONFIG_DP_REDUCE_BF16
    /* the biases' FP32 sums, layer after layer: copied to BF16 with the last bucket */
    long biases = 0;
    for (int j = 0; j < l; j++)
        biases += m->layer[j].out;
    float *gb = m->grads + biases;
#else
    float *gw = m->grads + at, *gb = gw + (long)L->out * L->in;
#endif
    for (long r0 = 0; r0 < L->out; r0 += rows) {
        const int n = snn_dp_bucket_n(L->out, r0, rows);
        const long floats = snn_dp_bucket_floats(L->out, L->in, r0, rows);
#ifdef CONFIG_DP_REDUCE_BF16
        /* the weights' gradients written as sent, BF16 from the GEMM's epilogue (a data-parallel build's
         * kernels are the GPU's) */
        cuda_linear_backward_weight_bf16(m->grads16 + at + r0 * L->in, gb + r0, dy + r0,
                                         dy16 ? dy16 + r0 : NULL, L->out, m->act[l], m->act16[l], B, n,
                                         L->in);
        snn_dp_reduce(at + r0 * L->in, floats, gb, floats - (long)n * L->in);
#else
        m->kernels->linear_backward_weight(gw + r0 * L->in, gb + r0, dy + r0, dy16 ? dy16 + r0 : NULL, L->out,
                                           m->act[l], m->act16[l], B, n, L->in);
        snn_dp_reduce(at + r0 * L->in, floats, NULL, 0);
#endif
    }
}

/* Each bucket updated on the update stream once summed, after the layer's input gradient has read the
 * weights before their update. */
static void update_reduced(snn_model *m, const snn_layer *L)
{
    const long at = (long)(L->w - m->params), rows = snn_dp_bucket_rows(L->in, SNN_DP_BUCKET_FLOATS);
    snn_dp_weights_read();
    for (long r0 = 0; r0 < L->out; r0 += rows) {
        const long from = at + r0 * L->in;
        snn_dp_update_begin();
        update_range(m, from, snn_dp_bucket_floats(L->out, L->in, r0, rows),
                     m->grads16 ? NULL : m->grads + from, m->grads16 ? m->grads16 + from : NULL, NULL);
        snn_dp_update_end();
    }
}
#else
#ifdef CONFIG_STEP_UPDATE_PASS
/* Where layer L's gradients are written, in the parameters' layout, biases after weights: one pass updates
 * every layer (update_pass). */
static float *weight_grads(snn_model *m, const snn_layer *L) { return m->grads + (L->w - m->params); }
static float *bias_grads(snn_model *m, const snn_layer *L)
{
    return weight_grads(m, L) + (long)L->out * L->in;
}
#endif

/* Layer L's weight gradient and update, after its input gradient (which reads the weights before it): fused
 * (one GEMM's epilogue), or the gradients written, for one pass over every layer after the last of them
 * (CONFIG_STEP_UPDATE_PASS); biases_summed: the output step has written the biases' (output_step's dx_sums).
 */
static void weight_step(snn_model *m, const snn_layer *L, int l, const float *dy, const snn_twin *dy16, int B,
                        int biases_summed)
{
    const snn_kernels *k = m->kernels;
#ifdef CONFIG_STEP_UPDATE_PASS
    k->linear_backward_weight(weight_grads(m, L), biases_summed ? NULL : bias_grads(m, L), dy, dy16, L->out,
                              m->act[l], m->act16[l], B, L->out, L->in);
#else
    (void)biases_summed;
    k->linear_backward_weight_update(L->w, L->w16, L->sw, L->b, L->sb, dy, dy16, m->act[l], m->act16[l], B, L->out,
                                     L->in, m->clock.rate);
#endif
}
#endif

/* The output layer's forward, loss and backward in one op (kernels/ops_proto.h, output_step). */
#ifdef CONFIG_CUDA_OUTPUT_STEP
#define OUTPUT_STEP 1
#else
#define OUTPUT_STEP 0
#endif
/* The output step sums the biases' gradients of the layer below it (output_step's dx_sums) where the update
 * pass reads them, so that layer's weight step launches no bias kernel (docs/PERF.md v49). */
#if OUTPUT_STEP && defined(CONFIG_STEP_UPDATE_PASS) && SNN_LAYERS > 1
#define SUMS_BELOW 1
static float *sums_below(snn_model *m) { return bias_grads(m, &m->layer[SNN_LAYERS - 2]); }
#else
#define SUMS_BELOW 0
static float *sums_below(snn_model *m) { return (void)m, NULL; }
#endif

#ifdef CONFIG_STEP_UPDATE_PASS
/* The update of every layer weight_step wrote gradients for (all but the output layer under
 * CONFIG_CUDA_OUTPUT_STEP), after the last of them: one kernel, not one a layer, as those layers lie one
 * after another from the parameters' start. The step's last op, it moves the clock's step on. */
static void update_pass(snn_model *m)
{
    update_range(m, 0, OUTPUT_STEP ? (long)(m->layer[SNN_LAYERS - 1].w - m->params) : SNN_PARAMS, m->grads,
                 NULL, m->clock.step);
}
#endif

void snn_train_step(void *model)
{
    snn_model *m = model;
    const snn_kernels *k = m->kernels;
    const int B = SNN_LOCAL_BATCH; /* this process's rows: the batch, or its share of it */
    k->gather_batch(m->act[0], m->act16[0], m->batch_labels, m->train_images, m->train_labels, m->order,
                    m->train_step, B, SNN_PIXEL_MEAN, SNN_PIXEL_STD, m->noise,
                    SNN_DROPOUT && SNN_LAYERS > 1 ? m->layer[0].out : 0, &m->clock);
    for (int l = 0; l < SNN_LAYERS - OUTPUT_STEP; l++) {
        const snn_layer *L = &m->layer[l];
        const int hidden = l + 1 < SNN_LAYERS;
        const snn_drop dropout = {m->noise, m->train_step, l, l + 2 < SNN_LAYERS ? m->layer[l + 1].out : 0};
        k->linear_forward(take(&m->act[l + 1], (long)B * L->out), m->act16[l + 1], m->act[l], m->act16[l], L->w,
                          L->w16, L->b, B, L->out, L->in, hidden, SNN_DROPOUT && hidden ? &dropout : NULL);
    }
    /* the layer the backward pass is at; grad[g] holds its output's gradient */
    int l = SNN_LAYERS - 1, g = 0;
    if (OUTPUT_STEP) {
        const snn_layer *L = &m->layer[l];
        k->output_step(take(&m->act[SNN_LAYERS], (long)B * SNN_CLASSES),
                       take(&m->grad[0], (long)B * SNN_CLASSES), m->grad16[0], m->train_loss,
                       m->train_correct, l > 0 ? take(&m->grad[1], (long)B * L->in) : NULL, m->grad16[1],
                       m->act[l], m->act16[l], L->w, L->w16, L->sw, L->b, L->sb, m->batch_labels,
                       m->train_step, SNN_DROPOUT_SCALE, B, L->in, m->clock.rate, sums_below(m));
        drop(&m->act[SNN_LAYERS]);
        drop(&m->grad[0]);
        if (l > 0)
            drop(&m->act[l]);
        l--, g = 1;
    } else {
        k->softmax_xent(take(&m->grad[0], (long)B * SNN_CLASSES), m->grad16[0], m->train_loss,
                        m->train_correct, m->act[SNN_LAYERS], m->batch_labels, m->train_step, B);
        drop(&m->act[SNN_LAYERS]);
    }
    for (; l >= 0; l--, g = (g + 1) % SNN_GRAD_BUFFERS) {
        const snn_layer *L = &m->layer[l];
        const int next = (g + 1) % SNN_GRAD_BUFFERS;
#ifdef CONFIG_DP
        reduce_weight_gradient(m, L, l, m->grad[g], m->grad16[g], B);
#endif
        /* dX uses the weights before their update: it runs before the update. act[l] is hidden layer l - 1's
         * output, dropped out: its mask and the kept units' scale are the dropout's derivative. */
        if (l > 0)
            k->linear_backward_input(take(&m->grad[next], (long)B * L->in), m->grad16[next], m->grad[g],
                                     m->grad16[g], L->w, L->w16, m->act[l], SNN_DROPOUT_SCALE, B, L->out,
                                     L->in);
#ifdef CONFIG_DP
        update_reduced(m, L);
#elif defined(CONFIG_STEP_BESIDE)
        /* beside what follows on the engine's stream: the next input gradient, or layer 0's weight step */
        if (l > 0)
            snn_beside_begin();
        weight_step(m, L, l, m->grad[g], m->grad16[g], B, SUMS_BELOW && l == SNN_LAYERS - 2);
        if (l > 0)
            snn_beside_end();
#else
        weight_step(m, L, l, m->grad[g], m->grad16[g], B, SUMS_BELOW && l == SNN_LAYERS - 2);
#endif
        drop(&m->grad[g]);
        if (l > 0)
            drop(&m->act[l]);
    }
#ifdef CONFIG_STEP_BESIDE
    snn_beside_join();
#endif
#ifdef CONFIG_DP
    snn_dp_join(); /* every bucket's update done before the schedule moves on */
    k->step_advance(m->clock.step);
#elif defined(CONFIG_STEP_UPDATE_PASS)
    update_pass(m);
#else
    k->step_advance(m->clock.step);
#endif
}

/* One evaluation step of `set`; logits_host, where given, gets its logits (a
 * synchronisation, so never inside a captured step). */
static void eval_step(snn_model *m, const snn_eval_set *set, float *logits_host)
{
    const snn_kernels *k = m->kernels;
    const int B = SNN_EVAL_BATCH;
    static const snn_noise none; /* no draws: evaluation sees the images as they are, every unit */
    k->gather_batch(m->act[0], m->act16[0], m->batch_labels, set->images, set->labels, NULL, m->eval_step, B,
                    SNN_PIXEL_MEAN, SNN_PIXEL_STD, none, 0, NULL);
    for (int l = 0; l < SNN_LAYERS; l++) {
        const snn_layer *L = &m->layer[l];
        k->linear_forward(take(&m->act[l + 1], (long)B * L->out), m->act16[l + 1], m->act[l], m->act16[l], L->w,
                          L->w16, L->b, B, L->out, L->in, l + 1 < SNN_LAYERS, NULL);
        if (l > 0)
            drop(&m->act[l]);
    }
    k->softmax_xent(NULL, NULL, m->eval_loss, m->eval_correct, m->act[SNN_LAYERS], m->batch_labels, m->eval_step,
                    B);
    if (logits_host)
        snn_rt_download(logits_host, m->act[SNN_LAYERS], (size_t)B * SNN_CLASSES * sizeof(float));
    drop(&m->act[SNN_LAYERS]);
    k->step_advance(m->eval_step);
}

void snn_test_step(void *model) { eval_step(model, &((snn_model *)model)->test, NULL); }
void snn_valid_step(void *model) { eval_step(model, &((snn_model *)model)->valid, NULL); }

#ifdef CONFIG_STEP_FUSED
void snn_train_fused(snn_model *m, int first, int last)
{
    cuda_fused_train(&m->fused, first, last);
    snn_model_refresh_twins(m); /* the layered kernels (--eval, --predict) read the twins */
}
#endif

#if defined(CONFIG_TARGET_CUDA)
/* The default of arch/cuda/Kconfig's STEP choice, and why, for snn_train_describe: its rule, restated
 * (a Kconfig symbol derived from it would make a hand-edited width in .config a refused value). */
#if defined(CONFIG_TARGET_SM90) && defined(CONFIG_MM_STATIC) && SNN_HIDDEN_MAX <= CONFIG_FUSED_DEFAULT_WIDTH
#define STEP_DEFAULT_FUSED 1
#define STEP_DEFAULT_WHY "the default on sm90 up to %d hidden units"
#elif defined(CONFIG_TARGET_SM90)
#define STEP_DEFAULT_FUSED 0
#define STEP_DEFAULT_WHY "the default on sm90 above %d hidden units"
#else
#define STEP_DEFAULT_FUSED 0
#define STEP_DEFAULT_WHY "the default off sm90, where the fused step's crossover (%d hidden units on an H100) is not measured"
#endif
#endif

/* The schedule's words for snn_recipe_describe, "" for the constant one. */
static void schedule_text(char *buf, int len)
{
#if defined(CONFIG_TRAIN_LR_STEP)
    snprintf(buf, len, ", step decay x%s every %d epochs", CONFIG_TRAIN_LR_GAMMA, CONFIG_TRAIN_LR_STEP_EPOCHS);
#elif defined(CONFIG_TRAIN_LR_COSINE)
    snprintf(buf, len, ", cosine decay to %s x lr", CONFIG_TRAIN_LR_FINAL);
#elif defined(CONFIG_TRAIN_LR_WARMUP_COSINE)
    snprintf(buf, len, ", warm-up %d steps, cosine decay to %s x lr", CONFIG_TRAIN_LR_WARMUP_STEPS,
             CONFIG_TRAIN_LR_FINAL);
#elif defined(CONFIG_TRAIN_LR_WARMUP_LINEAR)
    snprintf(buf, len, ", warm-up %d steps, linear decay to %s x lr", CONFIG_TRAIN_LR_WARMUP_STEPS,
             CONFIG_TRAIN_LR_FINAL);
#else
    snprintf(buf, len, "%s", "");
#endif
}

void snn_recipe_describe(char *buf, int len)
{
    char optimizer[160], schedule[160], decay[64] = "", smoothing[64] = "", shift[64] = "", dropout[64] = "";
    char affine[128] = "", elastic[64] = "";
#if defined(CONFIG_TRAIN_OPTIMIZER_ADAMW)
    snprintf(optimizer, sizeof(optimizer), "AdamW lr %s betas %s %s eps %s", CONFIG_TRAIN_LR,
             CONFIG_TRAIN_ADAM_BETA1, CONFIG_TRAIN_ADAM_BETA2, CONFIG_TRAIN_ADAM_EPS);
#else
    snprintf(optimizer, sizeof(optimizer), "SGD lr %s momentum %s%s", CONFIG_TRAIN_LR, CONFIG_TRAIN_MOMENTUM,
             SNN_NESTEROV ? " nesterov" : "");
#endif
    schedule_text(schedule, sizeof(schedule));
    if (CONFIG_TRAIN_WEIGHT_DECAY_NONZERO)
        snprintf(decay, sizeof(decay), ", weight decay %s", CONFIG_TRAIN_WEIGHT_DECAY);
    if (CONFIG_TRAIN_LABEL_SMOOTHING_NONZERO)
        snprintf(smoothing, sizeof(smoothing), ", label smoothing %s", CONFIG_TRAIN_LABEL_SMOOTHING);
    if (SNN_AUGMENT_SHIFT)
        snprintf(shift, sizeof(shift), ", translation up to %d px", SNN_AUGMENT_SHIFT);
#ifdef CONFIG_TRAIN_AUGMENT_AFFINE
    snprintf(affine, sizeof(affine), ", affine up to %s deg, scale %s, shear %s, %s px", CONFIG_TRAIN_AFFINE_ROTATE,
             CONFIG_TRAIN_AFFINE_SCALE, CONFIG_TRAIN_AFFINE_SHEAR, CONFIG_TRAIN_AFFINE_TRANSLATE);
#endif
#ifdef CONFIG_TRAIN_AUGMENT_ELASTIC
    snprintf(elastic, sizeof(elastic), ", elastic alpha %s sigma %s", CONFIG_TRAIN_ELASTIC_ALPHA,
             CONFIG_TRAIN_ELASTIC_SIGMA);
#endif
#ifdef CONFIG_TRAIN_DROPOUT
    if (SNN_DROPOUT)
        snprintf(dropout, sizeof(dropout), ", dropout %s", CONFIG_TRAIN_DROPOUT);
#endif
    snprintf(buf, len, "%s%s%s%s%s%s%s%s", optimizer, decay, schedule, smoothing, shift, affine, elastic, dropout);
}

void snn_train_describe(char *buf, int len)
{
#if defined(CONFIG_STEP_FUSED)
    char launch[640], why[160];
    cuda_fused_describe(launch, sizeof(launch));
    if (STEP_DEFAULT_FUSED)
        snprintf(why, sizeof(why), STEP_DEFAULT_WHY, CONFIG_FUSED_DEFAULT_WIDTH);
    else
        snprintf(why, sizeof(why), "CONFIG_STEP_FUSED, chosen over the layered default");
    snprintf(buf, len, "fused, one persistent kernel per epoch (%s): %s", why, launch);
#elif defined(CONFIG_TARGET_CUDA) && !defined(CONFIG_MM_STATIC)
    snprintf(buf, len, "layered, a kernel per op (the fused step needs CONFIG_MM_STATIC)");
#elif defined(CONFIG_TARGET_CUDA)
    char why[160];
    if (STEP_DEFAULT_FUSED)
        snprintf(why, sizeof(why), "CONFIG_STEP_LAYERED, chosen over the fused default");
    else
        snprintf(why, sizeof(why), STEP_DEFAULT_WHY, CONFIG_FUSED_DEFAULT_WIDTH);
#ifdef CONFIG_CUDA_GRAPH
    snprintf(buf, len, "layered, a kernel per op, each step a CUDA graph replay (%s)", why);
#else
    snprintf(buf, len, "layered, a kernel per op (%s)", why);
#endif
#else
    snprintf(buf, len, "layered, the host kernels run directly");
#endif
}

/* The clock at step `step` of epoch `epoch`, and that step's rate. */
static void set_clock(snn_model *m, int epoch, int step)
{
    snn_rt_upload(m->clock.epoch, &epoch, sizeof(epoch));
    snn_rt_upload(m->clock.step, &step, sizeof(step));
    m->kernels->schedule(m->clock);
}

void snn_epoch_begin(snn_model *m, snn_rng *rng, int32_t *order_host, int epoch)
{
    snn_rng_permutation(rng, order_host, SNN_FIT_COUNT);
    snn_rt_upload(m->order, order_host, SNN_FIT_COUNT * sizeof(int32_t));
    set_clock(m, epoch, 0);
}

void snn_epoch_resume(snn_model *m, const int32_t *order_host, int epoch, int step, const float *losses_host,
                      const int32_t *correct_host)
{
    snn_rt_upload(m->order, order_host, SNN_FIT_COUNT * sizeof(int32_t));
    set_clock(m, epoch, step);
    if (!step)
        return;
    /* Data parallel, each rank's figures are its share, summed when read: the checkpoint's sums count once. */
    const int share = SNN_DP_WORLD > 1 && snn_dp_self()->rank > 0;
    void *zero = share ? calloc((size_t)step, 4) : NULL; /* 4: a float's and an int32's bytes */
    SNN_CHECK_SYS(!share || zero, "allocating the resumed figures");
    snn_rt_upload(m->train_loss, share ? zero : (const void *)losses_host, step * sizeof(float));
    snn_rt_upload(m->train_correct, share ? zero : (const void *)correct_host, step * sizeof(int32_t));
    free(zero);
}

void snn_epoch_figures(snn_model *m, int steps, float *losses_host, int32_t *correct_host)
{
    snn_rt_download(losses_host, m->train_loss, steps * sizeof(float));
    snn_rt_download(correct_host, m->train_correct, steps * sizeof(int32_t));
#ifdef CONFIG_DP
    snn_dp_sum_figures(losses_host, correct_host, steps); /* each rank's are its share */
#endif
}

/* The mean loss and the accuracy of `steps` steps of `rows` rows. */
static snn_score score(const float *losses_host, const int32_t *correct, int steps, int rows)
{
    double loss = 0, right = 0;
    for (int s = 0; s < steps; s++) {
        loss += losses_host[s];
        right += correct[s];
    }
    return (snn_score){loss / steps, right / ((double)steps * rows)};
}

snn_score snn_epoch_score(snn_model *m, int steps, float *losses_host)
{
    int32_t *correct = snn_xmalloc(steps * sizeof(int32_t), "step statistics");
    snn_epoch_figures(m, steps, losses_host, correct);
    const snn_score s = score(losses_host, correct, steps, SNN_BATCH);
    free(correct);
    return s;
}

/* An evaluation's figures (every rank scores the whole set). */
static snn_score eval_score(snn_model *m, int steps)
{
    float losses[SNN_EVAL_STEPS_MAX];
    int32_t correct[SNN_EVAL_STEPS_MAX];
    snn_rt_download(losses, m->eval_loss, steps * sizeof(float));
    snn_rt_download(correct, m->eval_correct, steps * sizeof(int32_t));
    return score(losses, correct, steps, SNN_EVAL_BATCH);
}

const char *snn_set_name(snn_set set) { return set == SNN_SET_VALID ? "validation" : "test"; }

/* A set, step by step: replayed as a graph, or run directly keeping each
 * step's logits (a synchronisation per step). */
static snn_score evaluate(snn_model *m, snn_set which, float *logits_host)
{
    static const int32_t zero = 0;
    const snn_eval_set *set = which == SNN_SET_VALID ? &m->valid : &m->test;
    if (!set->steps)
        snn_die("internal error: scoring the %s set of a build without one", snn_set_name(which));
    snn_rt_upload(m->eval_step, &zero, sizeof(zero));
#ifdef CONFIG_STEP_FUSED
    if (!logits_host && m->kernels != &snn_host_kernels) {
        cuda_fused_evaluate(&m->fused, set->images, set->labels, set->steps);
        return eval_score(m, set->steps);
    }
#endif
    for (int s = 0; s < set->steps; s++) {
        if (logits_host)
            eval_step(m, set, logits_host + (size_t)s * SNN_EVAL_BATCH * SNN_CLASSES);
        else
            snn_rt_run_step(which == SNN_SET_VALID ? snn_valid_step : snn_test_step, m);
    }
    return eval_score(m, set->steps);
}

snn_score snn_evaluate(snn_model *m, snn_set set) { return evaluate(m, set, NULL); }

snn_score snn_evaluate_logits(snn_model *m, snn_set set, float *logits_host)
{
    return evaluate(m, set, logits_host);
}

int snn_set_count(snn_set set) { return set == SNN_SET_VALID ? SNN_VALID_COUNT : SNN_TEST_COUNT; }
