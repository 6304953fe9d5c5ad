#include "nn/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/runtime.h"
#include "kernels/cuda/gemm_dropout.h"
#include "kernels/cuda/gemm_split_k.h"
#include "mm/mm.h"
#include "snn_check.h"

#define F sizeof(float)
/* Widest activation gradient: the logits, or a hidden layer (the input needs none). */
#define GRAD_DIM SNN_MAX2(SNN_CLASSES, SNN_HIDDEN_MAX)
#if SNN_MM_PER_STEP
#define ARENA_ACT_WIDTHS SNN_INPUT_DIM /* the input batch only: the step allocates the rest */
#define ARENA_GRAD_FLOATS 0
#else
#define ARENA_ACT_WIDTHS SNN_ACT_WIDTHS
#define ARENA_GRAD_FLOATS (SNN_GRAD_BUFFERS * (size_t)SNN_BATCH * GRAD_DIM)
#endif
/* A twin region per FP32 range, padded to 128 bytes (kernels/cuda/twin.cuh). */
#define TWIN_PAD(elems) (((size_t)(elems) + 63) / 64 * 64)
#ifdef CONFIG_GEMM_TWINS
#define TWIN_BYTES                                                                                         \
    (2 * (TWIN_PAD(SNN_PARAMS) + TWIN_PAD((size_t)SNN_MAX_ROWS * ARENA_ACT_WIDTHS) + TWIN_PAD(ARENA_GRAD_FLOATS)))
#else
#define TWIN_BYTES 0
#endif

#ifdef CONFIG_STEP_FUSED
/* The fused step's buffers (kernels/fused.h), each aligned as an arena region: the row tiles' sums, the
 * second input batch and its labels, and an output-gradient buffer per layer (the layered step's are taken
 * in turn; a fused phase reads the gradients of two layers while it writes a third's). */
#define FUSED_PART_LOSS SNN_ARENA_ROUND(2 * SNN_FUSED_ROW_TILES * sizeof(double))
#define FUSED_PART_CORRECT SNN_ARENA_ROUND(2 * SNN_FUSED_ROW_TILES * sizeof(int32_t))
#define FUSED_INPUT SNN_ARENA_ROUND((size_t)SNN_MAX_ROWS * SNN_INPUT_DIM * F)
#define FUSED_LABELS SNN_ARENA_ROUND(SNN_MAX_ROWS)
#define FUSED_GRAD(l) SNN_ARENA_ROUND((size_t)SNN_BATCH * SNN_DIM((l) + 1) * F)
#define FUSED_SPLIT_WS SNN_ARENA_ROUND(SNN_FUSED_SPLIT_FLOATS * F)
#define FUSED_SPLIT_COUNT SNN_ARENA_ROUND(SNN_FUSED_SPLIT_SLOTS * SNN_FUSED_MAX_BLOCKS * sizeof(int32_t))
#define FUSED_GR_WS SNN_ARENA_ROUND(SNN_FUSED_GR_WS_BYTES)
#define FUSED_BYTES                                                                                        \
    (FUSED_PART_LOSS + FUSED_PART_CORRECT + FUSED_INPUT + FUSED_LABELS + (SNN_LAYERS - 1) * FUSED_GRAD(0) + \
     FUSED_GRAD(SNN_LAYERS - 1) + FUSED_SPLIT_WS + FUSED_GR_WS + FUSED_SPLIT_COUNT)
#else
#define FUSED_BYTES 0
#endif

#ifdef CONFIG_DP
#include "arch/cuda/dp.h"
/* The gradients as all-reduced, FP32 in the parameters' layout; or in BF16 as sent, beside the biases' FP32
 * sums (layer after layer) they are copied from, where the weights' are written in BF16 by their GEMM. Then
 * the figures' scratch. */
#ifdef CONFIG_DP_REDUCE_BF16
#define DP_GRADS SNN_ARENA_ROUND((size_t)(SNN_ACT_WIDTHS - SNN_INPUT_DIM) * F)
#define DP_GRADS16 SNN_ARENA_ROUND((size_t)SNN_PARAMS * sizeof(uint16_t))
#else
#define DP_GRADS SNN_ARENA_ROUND((size_t)SNN_PARAMS * F)
#define DP_GRADS16 0
#endif
#define GRADS_BYTES (DP_GRADS + DP_GRADS16 + 2 * (size_t)SNN_DP_FIGURES * 4)
#define GRADS_NAME "data-parallel gradients"
#elif defined(CONFIG_STEP_UPDATE_PASS)
/* Every layer's weight and bias gradients, in the parameters' layout, from their GEMMs to the update pass. */
#define GRADS_BYTES ((size_t)SNN_PARAMS * F)
#define GRADS_NAME "the gradients (update pass)"
#else
#define GRADS_BYTES 0
#define GRADS_NAME "gradients"
#endif

/* The optimizer state's arrays, each in the parameters' layout, 256-byte aligned as the parameters. */
#define STATE_STRIDE ((SNN_PARAMS + 63) / 64 * 64)

/* The clock region: the training step, the evaluation step, the epoch, padding; then the rate. */
#define CLOCK_COUNTERS 4

/* Unformatted: clang-format reads `COUNT * F` in these initialisers as a pointer declaration. */
/* clang-format off */
static const snn_plan_entry tensor_table[SNN_T_COUNT] = {
    [SNN_T_PARAMS] = {"parameters", SNN_PARAMS * F, 0},
    [SNN_T_OPTIM_STATE] = {SNN_OPTIM_MOMENTS == 2 ? "AdamW moments" : "momentum",
                           SNN_OPTIM_MOMENTS * STATE_STRIDE * F, 0},
    [SNN_T_ACTIVATIONS] = {SNN_MM_PER_STEP ? "input batch" : "activations",
                           (size_t)SNN_MAX_ROWS * ARENA_ACT_WIDTHS * F, 0},
    [SNN_T_ACT_GRADS] = {"activation gradients", ARENA_GRAD_FLOATS * F, 0},
    [SNN_T_BATCH_LABELS] = {"batch labels", SNN_MAX_ROWS, 0},
    [SNN_T_TRAIN_IMAGES] = {"train images (bytes)", (size_t)SNN_TRAIN_COUNT * SNN_INPUT_DIM, 0},
    [SNN_T_TRAIN_LABELS] = {"train labels", SNN_TRAIN_COUNT, 0},
    [SNN_T_TEST_IMAGES] = {"test images (bytes)", (size_t)SNN_TEST_COUNT * SNN_INPUT_DIM, 0},
    [SNN_T_TEST_LABELS] = {"test labels", SNN_TEST_COUNT, 0},
    [SNN_T_ORDER] = {"sample order", SNN_FIT_COUNT * sizeof(int32_t), 0},
    [SNN_T_STEP_LOSSES] = {"step losses", (SNN_STEPS_PER_EPOCH + SNN_EVAL_STEPS_MAX) * F, 0},
    [SNN_T_STEP_CORRECT] = {"step correct counts",
                            (SNN_STEPS_PER_EPOCH + SNN_EVAL_STEPS_MAX) * sizeof(int32_t), 0},
    [SNN_T_CLOCK] = {"step counters, rate", CLOCK_COUNTERS * sizeof(int32_t) + sizeof(snn_rate), 0},
    [SNN_T_TWINS] = {"16-bit twins", TWIN_BYTES, 0},
    [SNN_T_GEMM_WORKSPACE] = {"split-K sums, dropout masks",
                              (SNN_SPLIT_K_FLOATS * SNN_SPLIT_K_STREAMS + SNN_DROPOUT_MASK_FLOATS) * F, 0},
    [SNN_T_FUSED] = {"fused step buffers", FUSED_BYTES, 0},
    [SNN_T_GRADS] = {GRADS_NAME, GRADS_BYTES, 0},
};
/* clang-format on */

void snn_model_plan(snn_plan *plan) { snn_plan_make(plan, tensor_table, SNN_T_COUNT); }

void snn_model_print_plan(const snn_plan *plan, FILE *out)
{
    /* Floats per row of the layer outputs act[1..L]; their gradients take as many. */
    const size_t outputs = SNN_ACT_WIDTHS - SNN_INPUT_DIM;
    snn_plan_print(plan, out);
    if (SNN_MM_PER_STEP) {
        fprintf(out, "per-step tensors, allocated and freed each step by the %s strategy:\n", SNN_MM_NAME);
        fprintf(out, "  %-22s %14zu B (layer outputs 1..%d and their gradients)\n", "a training step",
                2 * (size_t)SNN_BATCH * outputs * F, SNN_LAYERS);
        fprintf(out, "  %-22s %14zu B (layer outputs 1..%d)\n", "an evaluation step",
                (size_t)SNN_EVAL_BATCH * outputs * F, SNN_LAYERS);
    }
}

static void bind(snn_model *m, const snn_plan *plan, void *arena)
{
    memset(m, 0, sizeof(*m));
    m->plan = *plan;
    m->arena = arena;
#define AT(t) snn_plan_at(plan, arena, t)
    m->params = AT(SNN_T_PARAMS);
    m->state = AT(SNN_T_OPTIM_STATE);
    long at = 0; /* each tensor's offset in the parameters, and in each state array */
    for (int l = 0; l < SNN_LAYERS; l++) {
        snn_layer *L = &m->layer[l];
        L->in = SNN_DIM(l);
        L->out = SNN_DIM(l + 1);
        L->w = m->params + at;
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            L->sw.m[k] = m->state + k * STATE_STRIDE + at;
        at += (long)L->out * L->in;
        L->b = m->params + at;
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            L->sb.m[k] = m->state + k * STATE_STRIDE + at;
        at += L->out;
    }
    m->act[0] = AT(SNN_T_ACTIVATIONS);
    if (!SNN_MM_PER_STEP) {
        for (int l = 1; l <= SNN_LAYERS; l++)
            m->act[l] = m->act[l - 1] + (long)SNN_MAX_ROWS * SNN_DIM(l - 1);
        m->grad[0] = AT(SNN_T_ACT_GRADS);
        for (int g = 1; g < SNN_GRAD_BUFFERS; g++)
            m->grad[g] = m->grad[g - 1] + (long)SNN_BATCH * GRAD_DIM;
    }
    m->batch_labels = AT(SNN_T_BATCH_LABELS);
    m->train_images = AT(SNN_T_TRAIN_IMAGES);
    m->train_labels = AT(SNN_T_TRAIN_LABELS);
    m->test_images = AT(SNN_T_TEST_IMAGES);
    m->test_labels = AT(SNN_T_TEST_LABELS);
    m->test = (snn_eval_set){m->test_images, m->test_labels, SNN_EVAL_STEPS};
    m->valid = (snn_eval_set){m->train_images + (size_t)SNN_FIT_COUNT * SNN_INPUT_DIM,
                              m->train_labels + SNN_FIT_COUNT, SNN_VALID_STEPS};
    m->order = AT(SNN_T_ORDER);
    m->train_loss = AT(SNN_T_STEP_LOSSES);
    m->eval_loss = m->train_loss + SNN_STEPS_PER_EPOCH;
    m->train_correct = AT(SNN_T_STEP_CORRECT);
    m->eval_correct = m->train_correct + SNN_STEPS_PER_EPOCH;
    m->train_step = AT(SNN_T_CLOCK);
    m->eval_step = m->train_step + 1;
    m->clock = (snn_clock){.epoch = m->train_step + 2, .step = m->train_step,
                           .rate = (snn_rate *)(m->train_step + CLOCK_COUNTERS)};
    snn_model_set_run(m, CONFIG_TRAIN_EPOCHS, SNN_STEPS_PER_EPOCH, CONFIG_TRAIN_SEED);
#undef AT
}

/* The 16-bit twins (CONFIG_GEMM_TWINS): the region holds the twins of the
 * parameters, of the activations and of the activation gradients, each at
 * the offset of its FP32 tensor in its own range, each range padded to 128
 * bytes so that TMA can read its rows. */
static void bind_twins(snn_model *m)
{
    snn_twin *params16 = snn_plan_at(&m->plan, m->arena, SNN_T_TWINS);
    snn_twin *acts16 = params16 + TWIN_PAD(SNN_PARAMS);
    snn_twin *grads16 = acts16 + TWIN_PAD((size_t)SNN_MAX_ROWS * ARENA_ACT_WIDTHS);
    for (int l = 0; l < SNN_LAYERS; l++)
        m->layer[l].w16 = params16 + (m->layer[l].w - m->params);
    for (int l = 0; l <= SNN_LAYERS; l++)
        m->act16[l] = acts16 + (m->act[l] - m->act[0]);
    for (int g = 0; g < SNN_GRAD_BUFFERS && ARENA_GRAD_FLOATS; g++)
        m->grad16[g] = grads16 + (m->grad[g] - m->grad[0]);
}

#ifdef CONFIG_STEP_FUSED
/* The fused step's view: the model's tensors and its own buffers. */
static void bind_fused(snn_model *m)
{
    static int32_t zeros[SNN_FUSED_SPLIT_SLOTS * SNN_FUSED_MAX_BLOCKS];
    snn_fused_net *n = &m->fused;
    unsigned char *at = snn_plan_at(&m->plan, m->arena, SNN_T_FUSED);
    for (int l = 0; l < SNN_LAYERS; l++)
        n->layer[l] = (snn_fused_layer){m->layer[l].w, m->layer[l].b, m->layer[l].sw, m->layer[l].sb};
    for (int l = 1; l <= SNN_LAYERS; l++)
        n->act[l] = m->act[l];
    n->part_loss = (double *)at;
    at += FUSED_PART_LOSS;
    n->part_correct = (int32_t *)at;
    at += FUSED_PART_CORRECT;
    n->input[0] = m->act[0];
    n->input[1] = (float *)at;
    at += FUSED_INPUT;
    n->labels[0] = m->batch_labels;
    n->labels[1] = at;
    at += FUSED_LABELS;
    for (int l = 0; l < SNN_LAYERS; at += FUSED_GRAD(l), l++)
        n->grad[l] = (float *)at;
    n->split_ws = (float *)at;
    at += FUSED_SPLIT_WS;
    n->gr_ws = at;
    at += FUSED_GR_WS;
    n->split_count = (int32_t *)at;
    snn_rt_upload(n->split_count, zeros, sizeof(zeros));
    n->train_images = m->train_images;
    n->train_labels = m->train_labels;
    n->order = m->order;
    n->train_loss = m->train_loss;
    n->eval_loss = m->eval_loss;
    n->train_correct = m->train_correct;
    n->eval_correct = m->eval_correct;
    n->train_step = m->train_step; /* n->clock, n->noise: snn_model_set_run, here and when the run's length is given */
}
#endif

static void put(int on_host, void *dst, const void *src, size_t bytes)
{
    if (on_host)
        memcpy(dst, src, bytes);
    else if (bytes)
        snn_rt_upload(dst, src, bytes);
}

/* A model in host memory (beside a GPU one) runs the host kernels. */
static int in_host_memory(const snn_model *m) { return m->kernels == &snn_host_kernels; }

void snn_model_refresh_twins(snn_model *m)
{
    if (!in_host_memory(m) && TWIN_BYTES)
        m->kernels->write_twin(m->layer[0].w16, m->params, SNN_PARAMS); /* layer 0's weights open the parameters */
}

void snn_model_set_run(snn_model *m, int epochs, int epoch_steps, uint64_t seed)
{
    m->clock.epoch_steps = epoch_steps;
    m->clock.total = epochs * epoch_steps;
    m->noise = snn_noise_of_seed(seed, m->clock.epoch);
#ifdef CONFIG_DP
    m->noise.row0 = snn_dp_self()->rank * SNN_LOCAL_BATCH; /* this rank's rows of each step */
    m->noise.batch = SNN_BATCH;
#endif
#ifdef CONFIG_STEP_FUSED
    m->fused.clock = m->clock;
    m->fused.noise = m->noise;
#endif
}

static void get(int on_host, void *dst, const void *src, size_t bytes)
{
    if (on_host)
        memcpy(dst, src, bytes);
    else if (bytes)
        snn_rt_download(dst, src, bytes);
}

void snn_model_get_state(const snn_model *m, float *params, float *state)
{
    get(in_host_memory(m), params, m->params, SNN_PARAMS * F);
    for (int k = 0; state && k < SNN_OPTIM_MOMENTS; k++)
        get(in_host_memory(m), state + k * SNN_PARAMS, m->state + k * STATE_STRIDE, SNN_PARAMS * F);
}

void snn_model_set_state(snn_model *m, const float *params, const float *state)
{
    put(in_host_memory(m), m->params, params, SNN_PARAMS * F);
    for (int k = 0; state && k < SNN_OPTIM_MOMENTS; k++)
        put(in_host_memory(m), m->state + k * STATE_STRIDE, state + k * SNN_PARAMS, SNN_PARAMS * F);
    snn_model_refresh_twins(m);
}

void snn_model_init(snn_model *m, const snn_plan *plan, void *arena, snn_place place, snn_rng *rng)
{
    static const int32_t counters[CLOCK_COUNTERS] = {0};
#ifdef CONFIG_TARGET_CUDA
    const int on_host = place == SNN_ON_HOST;
#else
    const int on_host = 1;
    (void)place;
#endif
    bind(m, plan, arena);
    m->kernels = on_host ? &snn_host_kernels : SNN_TARGET_KERNELS;
    float *params = snn_xmalloc(SNN_PARAMS * F, "initial parameters");
    float *zeros = calloc(SNN_OPTIM_MOMENTS * STATE_STRIDE + 1, F);
    SNN_CHECK_SYS(zeros, "allocating the optimizer state's initial zeros");
    snn_model_draw_params(params, rng);
    put(on_host, m->params, params, SNN_PARAMS * F);
    put(on_host, m->state, zeros, SNN_OPTIM_MOMENTS * STATE_STRIDE * F);
    put(on_host, m->train_step, counters, sizeof(counters));
    m->kernels->schedule(m->clock);
    free(params);
    free(zeros);
    const snn_plan_entry *ws = &plan->region[SNN_T_GEMM_WORKSPACE];
    m->kernels->bind_workspace(ws->bytes ? snn_plan_at(plan, arena, SNN_T_GEMM_WORKSPACE) : NULL, (long)(ws->bytes / F));
    if (!on_host && TWIN_BYTES)
        bind_twins(m);
#ifdef CONFIG_STEP_FUSED
    if (!on_host)
        bind_fused(m);
#endif
#ifdef CONFIG_STEP_UPDATE_PASS
    m->grads = (float *)snn_plan_at(plan, arena, SNN_T_GRADS);
#endif
#ifdef CONFIG_DP
    unsigned char *dp = snn_plan_at(plan, arena, SNN_T_GRADS);
    m->grads = (float *)dp;
    m->grads16 = DP_GRADS16 ? (uint16_t *)(dp + DP_GRADS) : NULL;
    if (!on_host)
        snn_dp_bind(m->grads, m->grads16, (float *)(dp + DP_GRADS + DP_GRADS16));
#endif
    snn_model_refresh_twins(m);
}

static inline void draw_uniform(float *x, long n, double bound, snn_rng *rng)
{
    for (long i = 0; i < n; i++)
        x[i] = (float)((2.0 * snn_rng_uniform(rng) - 1.0) * bound);
}

static inline void draw_normal(float *x, long n, double std, snn_rng *rng)
{
    for (long i = 0; i < n; i++)
        x[i] = (float)(snn_rng_normal(rng) * std);
}

void snn_model_draw_params(float *p, snn_rng *rng)
{
    for (int l = 0; l < SNN_LAYERS; l++) {
        long in = SNN_DIM(l), out = SNN_DIM(l + 1);
        float *w = p, *b = p + out * in;
#if defined(CONFIG_NN_INIT_TORCH)
        draw_uniform(w, out * in, 1.0 / sqrt((double)in), rng);
        draw_uniform(b, out, 1.0 / sqrt((double)in), rng);
#elif defined(CONFIG_NN_INIT_XAVIER)
        draw_uniform(w, out * in, sqrt(6.0 / (double)(in + out)), rng);
        memset(b, 0, out * sizeof(float));
#else /* Kaiming normal, fan_in, for ReLU */
        draw_normal(w, out * in, sqrt(2.0 / (double)in), rng);
        memset(b, 0, out * sizeof(float));
#endif
        p = b + out;
    }
}

const char *snn_model_numerics(const snn_model *m)
{
#ifdef CONFIG_STEP_FUSED
    if (!in_host_memory(m))
        return SNN_PRECISION_NAME; /* the fused step rounds every operand as it stages it, as mma.sync reads it */
#endif
    return m->kernels->gemm_numerics();
}

const char *snn_init_name(void)
{
#if defined(CONFIG_NN_INIT_TORCH)
    return "torch-default";
#elif defined(CONFIG_NN_INIT_XAVIER)
    return "xavier-uniform";
#else
    return "kaiming-normal";
#endif
}

void snn_model_shape(char *buf, int len)
{
    int n = 0;
    for (int l = 0; l <= SNN_LAYERS && n < len; l++)
        n += snprintf(buf + n, len - n, l ? "-%d" : "%d", SNN_DIM(l));
}
