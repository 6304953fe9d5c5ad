#include "app/model_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/json.h"
#include "data/safetensors.h"
#include "nn/train.h"
#include "snn_check.h"

#define FORMAT "staticnn 1"
/* weights and biases, their optimizer state, rng, order, losses, correct */
#define MAX_TENSORS ((2 + 2 * SNN_OPTIM_MOMENTS) * SNN_LAYERS + 4)
/* The optimizer state's tensors, named as PyTorch's optimizers name them: "momentum.0.weight", ... */
#if SNN_OPTIM_MOMENTS == 2
static const char *const state_prefix[] = {"exp_avg.", "exp_avg_sq."};
#else
static const char *const state_prefix[] = {"momentum."};
#endif

#if defined(CONFIG_NN_INIT_TORCH)
#define INIT_SYMBOL "NN_INIT_TORCH"
#elif defined(CONFIG_NN_INIT_XAVIER)
#define INIT_SYMBOL "NN_INIT_XAVIER"
#else
#define INIT_SYMBOL "NN_INIT_KAIMING"
#endif

/* The recipe's symbols (nn/Kconfig), those this build sets, as a defconfig says them. */
#define QUOTED(name) "CONFIG_" #name "=\"" CONFIG_##name "\"\n"
#if defined(CONFIG_TRAIN_OPTIMIZER_ADAMW)
#define RECIPE_OPTIMIZER                                                                                   \
    "CONFIG_TRAIN_OPTIMIZER_ADAMW=y\n" QUOTED(TRAIN_LR) QUOTED(TRAIN_ADAM_BETA1) QUOTED(TRAIN_ADAM_BETA2)     \
        QUOTED(TRAIN_ADAM_EPS)
#elif defined(CONFIG_TRAIN_NESTEROV)
#define RECIPE_OPTIMIZER QUOTED(TRAIN_LR) QUOTED(TRAIN_MOMENTUM) "CONFIG_TRAIN_NESTEROV=y\n"
#else
#define RECIPE_OPTIMIZER QUOTED(TRAIN_LR) QUOTED(TRAIN_MOMENTUM)
#endif
#define STRINGIFY(x) #x
#define NUMBER(name, value) "CONFIG_" #name "=" STRINGIFY(value) "\n"
#if defined(CONFIG_TRAIN_LR_STEP)
#define RECIPE_SCHEDULE                                                                                    \
    "CONFIG_TRAIN_LR_STEP=y\n" NUMBER(TRAIN_LR_STEP_EPOCHS, CONFIG_TRAIN_LR_STEP_EPOCHS) QUOTED(TRAIN_LR_GAMMA)
#elif defined(CONFIG_TRAIN_LR_COSINE)
#define RECIPE_SCHEDULE "CONFIG_TRAIN_LR_COSINE=y\n" QUOTED(TRAIN_LR_FINAL)
#elif defined(CONFIG_TRAIN_LR_WARMUP_COSINE)
#define RECIPE_SCHEDULE                                                                                    \
    "CONFIG_TRAIN_LR_WARMUP_COSINE=y\n" NUMBER(TRAIN_LR_WARMUP_STEPS, CONFIG_TRAIN_LR_WARMUP_STEPS)          \
        QUOTED(TRAIN_LR_FINAL)
#elif defined(CONFIG_TRAIN_LR_WARMUP_LINEAR)
#define RECIPE_SCHEDULE                                                                                    \
    "CONFIG_TRAIN_LR_WARMUP_LINEAR=y\n" NUMBER(TRAIN_LR_WARMUP_STEPS, CONFIG_TRAIN_LR_WARMUP_STEPS)          \
        QUOTED(TRAIN_LR_FINAL)
#else
#define RECIPE_SCHEDULE ""
#endif
#ifdef CONFIG_TRAIN_DROPOUT
#define RECIPE_DROPOUT QUOTED(TRAIN_DROPOUT)
#else
#define RECIPE_DROPOUT ""
#endif
#ifdef CONFIG_TRAIN_AUGMENT_AFFINE
#define RECIPE_AFFINE                                                                                      \
    "CONFIG_TRAIN_AUGMENT_AFFINE=y\n" QUOTED(TRAIN_AFFINE_ROTATE) QUOTED(TRAIN_AFFINE_SCALE)                  \
        QUOTED(TRAIN_AFFINE_SHEAR) QUOTED(TRAIN_AFFINE_TRANSLATE)
#else
#define RECIPE_AFFINE ""
#endif
#ifdef CONFIG_TRAIN_AUGMENT_ELASTIC
#define RECIPE_ELASTIC "CONFIG_TRAIN_AUGMENT_ELASTIC=y\n" QUOTED(TRAIN_ELASTIC_ALPHA) QUOTED(TRAIN_ELASTIC_SIGMA)
#else
#define RECIPE_ELASTIC ""
#endif
#define RECIPE_SYMBOLS                                                                                     \
    RECIPE_OPTIMIZER QUOTED(TRAIN_WEIGHT_DECAY) RECIPE_SCHEDULE QUOTED(TRAIN_LABEL_SMOOTHING)               \
        NUMBER(TRAIN_AUGMENT_SHIFT, CONFIG_TRAIN_AUGMENT_SHIFT) RECIPE_AFFINE RECIPE_ELASTIC RECIPE_DROPOUT

/* The metadata: strings, as the format wants. */
typedef struct {
    char shape[256], module[1024], input[256], optimizer[512], config[1536];
    char pixel_mean[32], pixel_std[32], epoch[16], step[16], steps_per_epoch[16], batch[16], seed[16];
    char validation[16], digit_width[16];
    snn_st_meta meta[24];
    int count;
} metadata;

static void upper_symbol(char *dst, size_t len, const char *prefix, const char *name)
{
    int n = snprintf(dst, len, "%s", prefix);
    for (; *name && n > 0 && (size_t)n + 1 < len; name++)
        dst[n++] = *name == '-' ? '_' : (char)(*name >= 'a' && *name <= 'z' ? *name - 32 : *name);
    dst[n] = 0;
}

/* The configuration symbols that define the model and its training: each hidden layer's width as the
 * configuration gives it (NN_HIDDEN_WIDTH_k, 0: NN_HIDDEN_WIDTH). */
static void config_fragment(char *buf, size_t len, int seed)
{
    char dataset[64], precision[64], target[64], widths[256] = "";
    upper_symbol(dataset, sizeof(dataset), "CONFIG_DATASET_", SNN_DATASET_SLUG);
    upper_symbol(precision, sizeof(precision), "CONFIG_PRECISION_", SNN_PRECISION_NAME);
    upper_symbol(target, sizeof(target), "CONFIG_TARGET_", SNN_TARGET_NAME);
    for (int l = 1, n = 0; l < SNN_LAYERS; l++)
        if (SNN_DIM(l) != CONFIG_NN_HIDDEN_WIDTH)
            n += snprintf(widths + n, sizeof(widths) - n, "CONFIG_NN_HIDDEN_WIDTH_%d=%d\n", l, SNN_DIM(l));
    snprintf(buf, len,
             "%s=y\nCONFIG_NN_HIDDEN_LAYERS=%d\nCONFIG_NN_HIDDEN_WIDTH=%d\n%sCONFIG_" INIT_SYMBOL "=y\n"
             "CONFIG_TRAIN_BATCH_SIZE=%d\n%sCONFIG_TRAIN_SEED=%d\nCONFIG_TRAIN_VALIDATION_SIZE=%d\n%s=y\n%s=y\n",
             dataset, CONFIG_NN_HIDDEN_LAYERS, CONFIG_NN_HIDDEN_WIDTH, widths, SNN_BATCH, RECIPE_SYMBOLS, seed,
             SNN_VALID_COUNT, precision, target);
}

static void module_text(char *buf, size_t len)
{
    int n = snprintf(buf, len, "torch.nn.Sequential(");
    for (int l = 0; l < SNN_LAYERS && n > 0 && (size_t)n < len; l++)
        n += snprintf(buf + n, len - n, "%storch.nn.Linear(%d, %d)%s", l ? ", " : "", SNN_DIM(l), SNN_DIM(l + 1),
                      l + 1 < SNN_LAYERS ? ", torch.nn.ReLU()" : ")");
}

static void optimizer_text(char *buf, size_t len) { snn_recipe_describe(buf, (int)len); }

static void add(metadata *md, const char *key, const char *value)
{
    md->meta[md->count++] = (snn_st_meta){key, value};
}

static void build_metadata(metadata *md, const snn_progress *p, snn_file_kind kind)
{
    memset(md, 0, sizeof(*md));
    snn_model_shape(md->shape, sizeof(md->shape));
    module_text(md->module, sizeof(md->module));
    snprintf(md->pixel_mean, sizeof(md->pixel_mean), "%s", snn_float_text(SNN_PIXEL_MEAN).text);
    snprintf(md->pixel_std, sizeof(md->pixel_std), "%s", snn_float_text(SNN_PIXEL_STD).text);
    snprintf(md->input, sizeof(md->input), "28x28 row-major, white on black, %s(pixel/255 - %s)/%s",
             p->digit_width ? "each digit's columns first scaled to digit_width (staticnn's data/digit.h), "
                            : "",
             md->pixel_mean, md->pixel_std);
    optimizer_text(md->optimizer, sizeof(md->optimizer));
    config_fragment(md->config, sizeof(md->config), p->seed);
    snprintf(md->epoch, sizeof(md->epoch), "%d", p->epoch);
    snprintf(md->step, sizeof(md->step), "%d", p->step);
    snprintf(md->steps_per_epoch, sizeof(md->steps_per_epoch), "%d", p->steps_per_epoch);
    snprintf(md->batch, sizeof(md->batch), "%d", SNN_BATCH);
    snprintf(md->seed, sizeof(md->seed), "%d", p->seed);
    snprintf(md->validation, sizeof(md->validation), "%d", SNN_VALID_COUNT);
    snprintf(md->digit_width, sizeof(md->digit_width), "%d", p->digit_width);
    add(md, "format", FORMAT);
    add(md, "kind", kind == SNN_FILE_CHECKPOINT ? "checkpoint" : "weights");
    add(md, "module", md->module);
    add(md, "shape", md->shape);
    add(md, "dataset", SNN_DATASET_NAME);
    add(md, "input", md->input);
    add(md, "pixel_mean", md->pixel_mean);
    add(md, "pixel_std", md->pixel_std);
    add(md, "target", SNN_TARGET_NAME);
    add(md, "precision", SNN_PRECISION_NAME);
    add(md, "optimizer", md->optimizer);
    add(md, "batch", md->batch);
    add(md, "init", snn_init_name());
    add(md, "seed", md->seed);
    add(md, "validation_size", md->validation);
    add(md, "digit_width", md->digit_width);
    add(md, "epoch", md->epoch);
    add(md, "step", md->step);
    add(md, "steps_per_epoch", md->steps_per_epoch);
    add(md, "config", md->config);
}

/* The tensors of a file of this kind, pointing into the host arrays given. */
typedef struct {
    char names[MAX_TENSORS][48];
    snn_st_tensor t[MAX_TENSORS];
    int count;
} tensor_list;

static void add_tensor(tensor_list *list, const char *name, snn_st_dtype dtype, int rank, int64_t d0, int64_t d1,
                       const void *data)
{
    snn_st_tensor *t = &list->t[list->count];
    snprintf(list->names[list->count], sizeof(list->names[0]), "%s", name);
    *t = (snn_st_tensor){.name = list->names[list->count], .dtype = dtype, .rank = rank, .shape = {d0, d1},
                         .data = data};
    list->count++;
}

static void add_params(tensor_list *list, const char *prefix, const float *p)
{
    char name[48];
    for (int l = 0; l < SNN_LAYERS; l++) {
        long in = SNN_DIM(l), out = SNN_DIM(l + 1);
        snprintf(name, sizeof(name), "%s%d.weight", prefix, 2 * l);
        add_tensor(list, name, SNN_ST_F32, 2, out, in, p);
        p += out * in;
        snprintf(name, sizeof(name), "%s%d.bias", prefix, 2 * l);
        add_tensor(list, name, SNN_ST_F32, 1, out, 0, p);
        p += out;
    }
}

static void list_tensors(tensor_list *list, snn_file_kind kind, const float *params, const float *state,
                         const snn_progress *p)
{
    list->count = 0;
    add_params(list, "", params);
    if (kind == SNN_FILE_WEIGHTS)
        return;
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        add_params(list, state_prefix[k], state + (long)k * SNN_PARAMS);
    add_tensor(list, "rng.state", SNN_ST_U64, 1, 4, 0, p->rng.s);
    add_tensor(list, "epoch.order", SNN_ST_I32, 1, SNN_FIT_COUNT, 0, p->order);
    add_tensor(list, "epoch.losses", SNN_ST_F32, 1, p->step, 0, p->losses);
    add_tensor(list, "epoch.correct", SNN_ST_I32, 1, p->step, 0, p->correct);
}

void snn_model_file_save(snn_out *out, const snn_model *m, const snn_progress *p, snn_file_kind kind)
{
    float *params = snn_xmalloc((1 + SNN_OPTIM_MOMENTS) * SNN_PARAMS * sizeof(float), "the parameters to save");
    float *state = params + SNN_PARAMS;
    snn_model_get_state(m, params, kind == SNN_FILE_CHECKPOINT ? state : NULL);
    metadata md;
    build_metadata(&md, p, kind);
    tensor_list list;
    list_tensors(&list, kind, params, state, p);
    char err[512];
    if (snn_st_write(snn_out_stream(out), "the output", list.t, list.count, md.meta, md.count, err, sizeof(err)))
        snn_die("%s", err);
    free(params);
    snn_out_commit(out); /* a write error is reported here */
}

/* ---- loading ------------------------------------------------------------------ */

/* A metadata value that must equal this build's (and be there, when
 * required); the message names the field. */
static void require_same(const snn_st_file *f, const char *path, const char *key, const char *mine,
                         const char *what, int required)
{
    const char *theirs = snn_st_meta_get(f, key);
    if (!theirs && required)
        snn_die("%s: its metadata has no '%s' (the %s): not a checkpoint this build wrote", path, key, what);
    if (theirs && strcmp(theirs, mine) != 0)
        snn_die("%s: the %s differs: the file's is %s, this build's is %s (a file for another build: configure "
                "this one to match with make menuconfig, or use the build that wrote it)",
                path, what, theirs, mine);
}

static int meta_int(const snn_st_file *f, const char *path, const char *key, int lo, int hi)
{
    const char *v = snn_st_meta_get(f, key);
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || n < lo || n > hi)
        snn_die("%s: the checkpoint's metadata '%s' is %s%s%s, not a whole number in [%d, %d]", path, key,
                v ? "'" : "missing", v ? v : "", v ? "'" : "", lo, hi);
    return (int)n;
}

static void check_metadata(const snn_st_file *f, const char *path, snn_file_kind kind)
{
    const char *format = snn_st_meta_get(f, "format"), *is = snn_st_meta_get(f, "kind");
    const int checkpoint = kind == SNN_FILE_CHECKPOINT;
    if (checkpoint && !format)
        snn_die("%s: its metadata has no 'format': not a file staticnn wrote; --resume wants a file written by "
                "--checkpoint", path);
    if (format && strcmp(format, FORMAT))
        snn_die("%s: written as '%s', this build reads '%s'", path, format, FORMAT);
    if (checkpoint && (!is || strcmp(is, "checkpoint")))
        snn_die("%s: not a checkpoint (its metadata's kind is %s); --resume wants a file written by "
                "--checkpoint, --load takes weights", path, is ? is : "missing");
    char shape[256], optimizer[sizeof(((metadata *)0)->optimizer)], batch[16], validation[16];
    snn_model_shape(shape, sizeof(shape));
    require_same(f, path, "shape", shape, "model shape", checkpoint);
    require_same(f, path, "dataset", SNN_DATASET_NAME, "dataset", checkpoint);
    if (!checkpoint)
        return;
    optimizer_text(optimizer, sizeof(optimizer));
    snprintf(batch, sizeof(batch), "%d", SNN_BATCH);
    require_same(f, path, "optimizer", optimizer, "optimizer", 1);
    require_same(f, path, "batch", batch, "batch size", 1);
    snprintf(validation, sizeof(validation), "%d", SNN_VALID_COUNT);
    require_same(f, path, "validation_size", validation, "validation split (images held out)", 0);
    const char *target = snn_st_meta_get(f, "target"), *precision = snn_st_meta_get(f, "precision");
    if ((target && strcmp(target, SNN_TARGET_NAME)) || (precision && strcmp(precision, SNN_PRECISION_NAME)))
        printf("note: %s was written by target %s in %s; this build runs %s in %s: training goes on, but not "
               "bitwise as the run that wrote it would have\n",
               path, target ? target : "?", precision ? precision : "?", SNN_TARGET_NAME, SNN_PRECISION_NAME);
}

/* Copies each listed tensor's bytes from the file, checking its dtype and
 * shape; a tensor of the file that known does not name is refused by name
 * (known: the list itself, or a checkpoint's names when --load takes a
 * checkpoint's weights and leaves the rest). */
static void read_tensors(const snn_st_file *f, const char *path, const tensor_list *list, const tensor_list *known)
{
    char err[512];
    for (int i = 0; i < list->count; i++) {
        const snn_st_tensor *want = &list->t[i], *t;
        if (!(t = snn_st_expect(f, want->name, want->dtype, want->rank, want->shape, err, sizeof(err))))
            snn_die("%s", err);
        memcpy((void *)want->data, t->data, snn_st_bytes(t));
        if (want->dtype == SNN_ST_F32)
            for (size_t k = 0; k < snn_st_bytes(t) / sizeof(float); k++)
                if (!isfinite(((const float *)want->data)[k]))
                    snn_die("%s: tensor '%s' holds a non-finite value at element %zu", path, want->name, k);
    }
    for (int i = 0; i < snn_st_count(f); i++) {
        const char *name = snn_st_at(f, i)->name;
        int is_known = 0;
        for (int j = 0; j < known->count && !is_known; j++)
            is_known = !strcmp(name, known->t[j].name);
        if (!is_known)
            snn_die("%s: tensor '%s' is not one of this model's (its %d Linear layers are 0.weight, 0.bias, ..., "
                    "%d.weight, %d.bias)", path, name, SNN_LAYERS, 2 * SNN_LAYERS - 2, 2 * SNN_LAYERS - 2);
    }
}


/* What the device will index with or count from a checkpoint: the order a
 * permutation of the training set, each step's correct count within the
 * batch, the generator not stuck at zero. */
static void check_progress(const snn_progress *p, const char *path)
{
    uint8_t *seen = calloc(SNN_FIT_COUNT, 1);
    SNN_CHECK_SYS(seen, "allocating the order's check");
    for (int i = 0; i < SNN_FIT_COUNT; i++) {
        int32_t k = p->order[i];
        if (k < 0 || k >= SNN_FIT_COUNT || seen[k]++)
            snn_die("%s: tensor 'epoch.order' is not a permutation of the %d training samples (element %d is %d)",
                    path, SNN_FIT_COUNT, i, (int)k);
    }
    free(seen);
    for (int s = 0; s < p->step; s++)
        if (p->correct[s] < 0 || p->correct[s] > SNN_BATCH)
            snn_die("%s: tensor 'epoch.correct' holds %d at step %d, outside [0, %d]", path, (int)p->correct[s], s,
                    SNN_BATCH);
    if (!(p->rng.s[0] | p->rng.s[1] | p->rng.s[2] | p->rng.s[3]))
        snn_die("%s: tensor 'rng.state' is all zeros, a state the generator never reaches", path);
}

/* The digit width the file's model was trained at (0: as MNIST's; a file that names none was written before
 * --digit-width, so 0). */
static int digit_width(const snn_st_file *f, const char *path)
{
    const char *v = snn_st_meta_get(f, "digit_width");
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (v && (*v < '0' || *v > '9' || *end || n > SNN_IMAGE_COLS)) /* digits only: no sign, no space */
        snn_die("%s: its metadata's digit_width is '%s', not a whole number in [0, %d]", path, v,
                SNN_IMAGE_COLS);
    return (int)n;
}

int snn_model_file_held_out(const char *path, char *held_out, int len)
{
    char err[512];
    snn_st_file *f = snn_st_read(path, err, sizeof(err));
    if (!f)
        snn_die("%s", err);
    const char *v = snn_st_meta_get(f, "validation_size");
    if (v)
        snprintf(held_out, len, "%s", v);
    snn_st_close(f);
    return v != NULL;
}

int snn_model_file_load(const char *path, snn_model *m, snn_progress *p, snn_file_kind kind)
{
    char err[512];
    snn_st_file *f = snn_st_read(path, err, sizeof(err));
    if (!f)
        snn_die("%s", err);
    check_metadata(f, path, kind);
    const int width = digit_width(f, path);
    float *params = snn_xmalloc((1 + SNN_OPTIM_MOMENTS) * SNN_PARAMS * sizeof(float), "the parameters to load");
    float *state = params + SNN_PARAMS;
    tensor_list list;
    if (kind == SNN_FILE_CHECKPOINT) {
        p->epoch = meta_int(f, path, "epoch", 1, 1000000000);
        p->steps_per_epoch = meta_int(f, path, "steps_per_epoch", 1, SNN_STEPS_PER_EPOCH);
        p->step = meta_int(f, path, "step", 0, p->steps_per_epoch);
        p->seed = meta_int(f, path, "seed", 0, 2147483647);
        p->digit_width = width;
    }
    list_tensors(&list, kind, params, state, p);
    const char *is = snn_st_meta_get(f, "kind");
    tensor_list checkpoint; /* its names only */
    const snn_progress no_progress = {0};
    list_tensors(&checkpoint, SNN_FILE_CHECKPOINT, params, state, &no_progress);
    read_tensors(f, path, &list, kind == SNN_FILE_WEIGHTS && is && !strcmp(is, "checkpoint") ? &checkpoint : &list);
    if (kind == SNN_FILE_CHECKPOINT)
        check_progress(p, path);
    snn_model_set_state(m, params, kind == SNN_FILE_CHECKPOINT ? state : NULL);
    free(params);
    snn_st_close(f);
    return width;
}
