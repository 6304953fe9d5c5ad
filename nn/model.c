#include "nn/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/gemm_split_k.h"
#include "kernels/cuda/twin.h"
#include "mm/mm.h"

void snn_model_bind(snn_model *m, void *arena)
{
    memset(m, 0, sizeof(*m));
    snn_plan_make(&m->plan);
    m->arena = arena;
    m->kernels = SNN_TARGET_KERNELS;
    m->lr = SNN_LR;
    m->mu = SNN_MOMENTUM;
#define AT(r) snn_plan_at(&m->plan, arena, r)
    m->params = AT(SNN_R_PARAMS);
    m->momentum = AT(SNN_R_MOMENTUM);
    float *p = m->params, *v = m->momentum;
    for (int l = 0; l < SNN_LAYERS; l++) {
        snn_layer *L = &m->layer[l];
        L->in = SNN_DIM(l);
        L->out = SNN_DIM(l + 1);
        L->w = p, L->vw = v;
        p += (long)L->out * L->in, v += (long)L->out * L->in;
        L->b = p, L->vb = v;
        p += L->out, v += L->out;
    }
    m->act[0] = AT(SNN_R_ACTIVATIONS);
    if (!SNN_MM_PER_STEP) {
        for (int l = 1; l <= SNN_LAYERS; l++)
            m->act[l] = m->act[l - 1] + (long)SNN_MAX_ROWS * SNN_DIM(l - 1);
        m->grad[0] = AT(SNN_R_ACT_GRADS);
        m->grad[1] = m->grad[0] + (long)SNN_BATCH * SNN_GRAD_DIM;
    }
    m->batch_labels = AT(SNN_R_BATCH_LABELS);
    m->train_images = AT(SNN_R_TRAIN_IMAGES);
    m->train_labels = AT(SNN_R_TRAIN_LABELS);
    m->test_images = AT(SNN_R_TEST_IMAGES);
    m->test_labels = AT(SNN_R_TEST_LABELS);
    m->order = AT(SNN_R_ORDER);
    m->train_loss = AT(SNN_R_STEP_STATS);
    m->eval_loss = m->train_loss + SNN_STEPS_PER_EPOCH;
    m->train_correct = (int32_t *)(m->eval_loss + SNN_EVAL_STEPS);
    m->eval_correct = m->train_correct + SNN_STEPS_PER_EPOCH;
    m->train_step = m->eval_correct + SNN_EVAL_STEPS;
    m->eval_step = m->train_step + 1;
#undef AT
}

void snn_model_bind_gemm_buffers(snn_model *m)
{
#ifdef CONFIG_GEMM_TENSOR_CORES
    const snn_plan_entry *ws = &m->plan.region[SNN_R_SPLIT_K];
    cuda_gemm_split_k_bind(ws->bytes ? snn_plan_at(&m->plan, m->arena, SNN_R_SPLIT_K) : NULL,
                           (long)(ws->bytes / sizeof(float)));
#endif
#ifdef CONFIG_GEMM_TWINS
    uint16_t *twin = snn_plan_at(&m->plan, m->arena, SNN_R_TWINS);
    const long params = SNN_PARAMS;
    const long acts = m->plan.region[SNN_R_ACTIVATIONS].bytes / sizeof(float);
    const long grads = m->plan.region[SNN_R_ACT_GRADS].bytes / sizeof(float);
    cuda_twin_unbind_all();
    cuda_twin_bind(m->params, twin, params);
    twin += SNN_TWIN_PAD(params);
    cuda_twin_bind(m->act[0], twin, acts);
    twin += SNN_TWIN_PAD(acts);
    if (grads)
        cuda_twin_bind(m->grad[0], twin, grads);
    cuda_twin_refresh(m->params, params);
#endif
    (void)m;
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
