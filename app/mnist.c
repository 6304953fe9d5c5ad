/* mnist: the fixed-shape training run of the configured build, and the
 * evaluation and use of the models it saves. */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/committee.h"
#include "app/evaluate.h"
#include "app/json.h"
#include "app/model_file.h"
#include "app/options.h"
#include "app/outfile.h"
#include "app/predict.h"
#include "app/probs.h"
#include "app/signals.h"
#include "app/target.h"
#include "arch/dp.h"
#include "arch/runtime.h"
#ifdef CONFIG_DP
#include <fcntl.h>

#include "arch/cuda/dp.h"
#include <generated/dp_prediction.h> /* the data-parallel prediction (tools/make/kconfig.py) */
#endif
#include "data/dataset.h"
#include "data/digit.h"
#include "mm/mm.h"
#include "nn/train.h"
#include "snn_check.h"

static void dump_epoch_file(snn_out_dir *dump, const char *what, int epoch, const void *data, size_t bytes)
{
    char name[64];
    snprintf(name, sizeof(name), "%s-%d.bin", what, epoch);
    snn_out_dir_write(dump, name, data, bytes);
}

/* The training draws (kernels/noise.h, kernels/distort.h) of the first SNN_DUMP_DRAW_STEPS steps of epoch
 * `epoch` (from 1), as the host computes them (the GPU's are the same bits: tests/gpu/test_kernels): per
 * step, each row's (dx, dy) as int8 where the build translates, then each hidden layer's dropout mask of
 * [batch][width] units, one bit each, least significant first, where it drops units, then each row's affine
 * map (six float32: m00 m01 m10 m11 cx cy, the last two the centre plus the translation) where it distorts
 * so, then the first SNN_DUMP_FIELDS rows' elastic displacements (784 float32 dx, then 784 dy) where it
 * distorts so. What tools/torch_parity.py checks its own draws against. */
#define SNN_DUMP_DRAW_STEPS 50
#define SNN_DUMP_FIELD_ROWS 8 /* the rows of a step whose elastic fields are dumped: 6 KB each */
#define SNN_DUMP_FIELDS (SNN_BATCH < SNN_DUMP_FIELD_ROWS ? SNN_BATCH : SNN_DUMP_FIELD_ROWS)
static void dump_draws(snn_out_dir *dump, const snn_model *m, int epoch, int steps)
{
    if (!SNN_AUGMENT_SHIFT && !SNN_DROPOUT && !SNN_DISTORTS)
        return;
    const int n = steps < SNN_DUMP_DRAW_STEPS ? steps : SNN_DUMP_DRAW_STEPS;
    size_t per_step = SNN_AUGMENT_SHIFT ? 2 * (size_t)SNN_BATCH : 0;
    for (int l = 1; SNN_DROPOUT && l < SNN_LAYERS; l++) /* a bit a unit of each hidden layer, whole bytes */
        per_step += ((size_t)SNN_BATCH * SNN_DIM(l) + 7) / 8;
    const size_t maps = SNN_AFFINE ? (size_t)SNN_BATCH * sizeof(snn_affine) : 0,
                 fields = SNN_ELASTIC ? (size_t)SNN_DUMP_FIELDS * 2 * SNN_PIXELS * sizeof(float) : 0;
    per_step += maps + fields;
    uint8_t *draws = snn_xmalloc((size_t)n * per_step + 1, "the dumped draws");
    memset(draws, 0, (size_t)n * per_step + 1);
    uint8_t *at = draws;
    for (int s = 0; s < n; s++) {
        for (int i = 0; SNN_AUGMENT_SHIFT && i < SNN_BATCH; i++) {
            const snn_shift d = snn_shift_of(m->noise.key, epoch - 1, s, i);
            *at++ = (uint8_t)(int8_t)d.dx;
            *at++ = (uint8_t)(int8_t)d.dy;
        }
        for (int l = 0; SNN_DROPOUT && l < CONFIG_NN_HIDDEN_LAYERS; l++) {
            const uint32_t units = (uint32_t)SNN_BATCH * SNN_DIM(l + 1);
            for (uint32_t u = 0; u < units; u++)
                at[u / 8] |= (uint8_t)(snn_dropout_keeps(m->noise.key, epoch - 1, s, l, u) << (u % 8));
            at += (units + 7) / 8;
        }
        for (int i = 0; SNN_AFFINE && i < SNN_BATCH; i++, at += sizeof(snn_affine)) {
            const snn_affine a = snn_affine_of(m->noise.key, epoch - 1, s, i);
            memcpy(at, &a, sizeof(a));
        }
        for (int i = 0; SNN_ELASTIC && i < SNN_DUMP_FIELDS; i++, at += 2 * SNN_PIXELS * sizeof(float)) {
            float dx[SNN_PIXELS], dy[SNN_PIXELS], scratch[2 * SNN_PIXELS];
            snn_elastic_field(m->noise.key, epoch - 1, s, i, dx, dy, scratch);
            memcpy(at, dx, sizeof(dx));
            memcpy(at + sizeof(dx), dy, sizeof(dy));
        }
    }
    dump_epoch_file(dump, "draws", epoch, draws, (size_t)n * per_step);
    free(draws);
}

static cJSON *dims_array(void)
{
    int dims[SNN_LAYERS + 1];
    for (int l = 0; l <= SNN_LAYERS; l++)
        dims[l] = SNN_DIM(l);
    return snn_json_ints(dims, SNN_LAYERS + 1);
}

/* The training recipe (nn/Kconfig) as tools/torch_parity.py reads it: the optimizer, its settings, the
 * learning-rate schedule (its factor at update t of T: kernels/optim.h), label smoothing. */
static void add_recipe(cJSON *j)
{
    char recipe[512];
    snn_recipe_describe(recipe, sizeof(recipe));
    snn_json_string(j, "recipe", recipe);
    snn_json_float(j, "lr", SNN_LR);
    snn_json_float(j, "momentum", SNN_MOMENTUM);
#if defined(CONFIG_TRAIN_OPTIMIZER_ADAMW)
    snn_json_string(j, "optimizer", "adamw");
    snn_json_float(j, "beta1", SNN_ADAM_BETA1);
    snn_json_float(j, "beta2", SNN_ADAM_BETA2);
    snn_json_float(j, "eps", SNN_ADAM_EPS);
#else
    snn_json_string(j, "optimizer", "sgd");
    snn_json_add(j, "nesterov", cJSON_CreateBool(SNN_NESTEROV));
#endif
    snn_json_float(j, "weight_decay", SNN_WEIGHT_DECAY);
    snn_json_float(j, "label_smoothing", SNN_LABEL_SMOOTHING);
#if defined(CONFIG_TRAIN_LR_STEP)
    snn_json_string(j, "schedule", "step");
    snn_json_number(j, "lr_gamma", CONFIG_TRAIN_LR_GAMMA_VALUE);
    snn_json_number(j, "lr_step_epochs", CONFIG_TRAIN_LR_STEP_EPOCHS);
#elif defined(CONFIG_TRAIN_LR_COSINE) || defined(CONFIG_TRAIN_LR_WARMUP_COSINE)
    snn_json_string(j, "schedule", "cosine");
#elif defined(CONFIG_TRAIN_LR_WARMUP_LINEAR)
    snn_json_string(j, "schedule", "linear");
#else
    snn_json_string(j, "schedule", "constant");
#endif
#ifdef CONFIG_TRAIN_LR_FINAL_VALUE
    snn_json_number(j, "lr_final", CONFIG_TRAIN_LR_FINAL_VALUE);
#endif
    snn_json_number(j, "lr_warmup", SNN_LR_WARMUP);
    snn_json_number(j, "augment_shift", SNN_AUGMENT_SHIFT);
#ifdef CONFIG_TRAIN_AUGMENT_AFFINE
    cJSON *affine = snn_json_object();
    snn_json_number(affine, "rotate", CONFIG_TRAIN_AFFINE_ROTATE_VALUE);
    snn_json_number(affine, "scale", CONFIG_TRAIN_AFFINE_SCALE_VALUE);
    snn_json_number(affine, "shear", CONFIG_TRAIN_AFFINE_SHEAR_VALUE);
    snn_json_number(affine, "translate", CONFIG_TRAIN_AFFINE_TRANSLATE_VALUE);
    snn_json_add(j, "affine", affine);
#endif
#ifdef CONFIG_TRAIN_AUGMENT_ELASTIC
    cJSON *elastic = snn_json_object();
    snn_json_number(elastic, "alpha", CONFIG_TRAIN_ELASTIC_ALPHA_VALUE);
    snn_json_number(elastic, "sigma", CONFIG_TRAIN_ELASTIC_SIGMA_VALUE);
    snn_json_add(j, "elastic", elastic);
#endif
#ifdef CONFIG_TRAIN_DROPOUT_VALUE
    snn_json_number(j, "dropout", CONFIG_TRAIN_DROPOUT_VALUE);
#endif
}

/* What tools/torch_parity.py needs to rebuild the run: the shape, the
 * schedule and the numerics (meta.json), and the initial parameters. */
static void dump_start(snn_out_dir *dump, const snn_model *m, const float *params, const options *o)
{
    char path[4096];
    snn_out_dir_path(dump, "meta.json", path, sizeof(path));
    snn_out *meta = snn_out_open(path);
    cJSON *j = snn_json_object();
    snn_json_add(j, "dims", dims_array());
    snn_json_number(j, "batch", SNN_BATCH);
    snn_json_number(j, "epochs", o->epochs);
    snn_json_number(j, "steps_per_epoch", o->max_steps);
    snn_json_number(j, "validation_size", SNN_VALID_COUNT);
    snn_json_number(j, "seed", o->seed);
    snn_json_number(j, "digit_width", o->digit_width);
    add_recipe(j);
    snn_json_float(j, "pixel_mean", SNN_PIXEL_MEAN);
    snn_json_float(j, "pixel_std", SNN_PIXEL_STD);
    snn_json_string(j, "dataset", SNN_DATASET_NAME);
    snn_json_string(j, "target", SNN_TARGET_NAME);
    snn_json_string(j, "data_dir", o->data_dir);
    snn_json_string(j, "precision", snn_model_numerics(m));
    snn_json_put(snn_out_stream(meta), j);
    snn_out_commit(meta);
    snn_out_dir_write(dump, "init.bin", params, SNN_PARAMS * sizeof(float));
}

static void print_summary(const snn_device_info *dev, const options *o)
{
    char shape[256], recipe[512];
    const int infer = o->eval || o->image_count;
    snn_model_shape(shape, sizeof(shape));
    snn_recipe_describe(recipe, sizeof(recipe));
    printf("staticnn: %s, MLP %s (%ld parameters)", SNN_DATASET_NAME, shape, (long)SNN_PARAMS);
    if (o->eval)
        printf(", evaluation batch %d\n", SNN_EVAL_BATCH);
    else if (infer)
        printf("\n");
    else
        printf(", batch %d, %d epoch%s\n  %s, init %s, seed %d\n", SNN_BATCH, o->epochs, o->epochs == 1 ? "" : "s",
               recipe, snn_init_name(), o->seed);
    if (o->digit_width)
        printf("  each digit's columns scaled to %d pixels wide (--digit-width)\n", o->digit_width);
    if (dev->cc)
        printf("  target %s on %s (compute capability %d.%d, %d SMs, %.1f GiB free)\n", SNN_TARGET_NAME,
               dev->name, dev->cc / 10, dev->cc % 10, dev->units, dev->free_bytes / 1073741824.0);
    else
        printf("  target %s on %s (%d threads)\n", SNN_TARGET_NAME, dev->name, dev->units);
    if (infer)
        return;
    if (SNN_VALID_COUNT)
        printf("  data %s: %d train (the last %d held out for validation), %d test; %d steps per epoch",
               o->data_dir, SNN_FIT_COUNT, SNN_VALID_COUNT, SNN_TEST_COUNT, o->max_steps);
    else
        printf("  data %s: %d train, %d test; %d steps per epoch", o->data_dir, SNN_TRAIN_COUNT, SNN_TEST_COUNT,
               o->max_steps);
    if (o->max_steps < SNN_STEPS_PER_EPOCH)
        printf(" (limited by --max-steps)\n");
    else if (SNN_DROPPED_PER_EPOCH)
        printf(", the last %d samples of each shuffled epoch dropped (static shapes)\n", SNN_DROPPED_PER_EPOCH);
    else
        printf("\n");
}

/* The dataset's bytes as read, on the host: one allocation, freed with free(d.train_images). */
typedef struct {
    uint8_t *train_images, *train_labels, *test_images, *test_labels;
} host_dataset;

static host_dataset read_dataset(const char *dir)
{
    char err[512];
    size_t train = (size_t)SNN_TRAIN_COUNT * SNN_INPUT_DIM, test = (size_t)SNN_TEST_COUNT * SNN_INPUT_DIM;
    host_dataset d;
    d.train_images = snn_xmalloc(train + test + SNN_TRAIN_COUNT + SNN_TEST_COUNT, "dataset staging");
    d.train_labels = d.train_images + train;
    d.test_images = d.train_labels + SNN_TRAIN_COUNT;
    d.test_labels = d.test_images + test;
    if (snn_dataset_load(dir, d.train_images, d.train_labels, d.test_images, d.test_labels, err, sizeof(err)))
        snn_die("%s", err);
    return d;
}

/* Uploads the dataset, every digit scaled to digit_width first (0: as read; data/digit.h). */
static void upload_dataset(snn_model *m, host_dataset *d, int digit_width)
{
    if (digit_width) {
        snn_digits_set_width(d->train_images, SNN_TRAIN_COUNT, digit_width);
        snn_digits_set_width(d->test_images, SNN_TEST_COUNT, digit_width);
    }
    snn_rt_upload(m->train_images, d->train_images, (size_t)SNN_TRAIN_COUNT * SNN_INPUT_DIM);
    snn_rt_upload(m->train_labels, d->train_labels, SNN_TRAIN_COUNT);
    snn_rt_upload(m->test_images, d->test_images, (size_t)SNN_TEST_COUNT * SNN_INPUT_DIM);
    snn_rt_upload(m->test_labels, d->test_labels, SNN_TEST_COUNT);
    snn_rt_sync();
}

#ifndef CONFIG_STEP_FUSED /* a fused epoch shows no progress: it is one launch */
static void progress(int epoch, int done, int total)
{
    int width = 40, filled = (int)((long)done * width / total);
    printf("\r  epoch %d [%.*s%*s] %3d%%", epoch, filled, "========================================",
           width - filled, "", (int)(100L * done / total));
    fflush(stdout);
}
#endif

/* Where the run's results go; each opened before training, so that a name
 * that cannot be written is refused before the work, not after it. */
typedef struct {
    snn_out *log, *save;
    snn_out_dir *dump;
} outputs;

static outputs open_outputs(const options *o)
{
    outputs out = {0};
    if (snn_dp_self()->rank > 0) /* rank 0 writes the run's files */
        return out;
    if (o->save_path)
        out.save = snn_out_open(o->save_path);
    if (o->checkpoint_path) /* written afresh each time: only checked here */
        snn_out_abandon(snn_out_open(o->checkpoint_path));
    if (o->log_path)
        out.log = snn_out_open(o->log_path);
    if (o->dump_dir)
        out.dump = snn_out_dir_open(o->dump_dir, "meta.json");
    return out;
}

/* The set --target-acc watches: the validation set where the build holds one out. */
static snn_set target_set(void) { return SNN_VALID_COUNT ? SNN_SET_VALID : SNN_SET_TEST; }

/* The run's configuration; digit_width: the training's, or the one model's that --eval scores (-1: several
 * models, each member's own in its event). */
static void log_config(FILE *f, const snn_model *m, const snn_device_info *dev, const options *o,
                       size_t arena_bytes, const snn_progress *resumed, int digit_width)
{
    char shape[256];
    snn_model_shape(shape, sizeof(shape));
    cJSON *e = snn_json_event("config");
    snn_json_string(e, "target", SNN_TARGET_NAME);
    snn_json_string(e, "dataset", SNN_DATASET_NAME);
    snn_json_string(e, "shape", shape);
    snn_json_number(e, "batch", SNN_BATCH);
    snn_json_number(e, "epochs", o->epochs);
    snn_json_number(e, "steps_per_epoch", o->max_steps);
    add_recipe(e);
    snn_json_number(e, "seed", o->seed);
    snn_json_number(e, "validation_size", SNN_VALID_COUNT);
    if (digit_width >= 0)
        snn_json_number(e, "digit_width", digit_width);
    if (o->target_acc > 0) {
        snn_json_float(e, "target_acc", (float)o->target_acc);
        snn_json_string(e, "target_set", snn_set_name(target_set()));
        snn_json_number(e, "eval_every", CONFIG_TRAIN_EVAL_EVERY);
    }
    snn_json_string(e, "precision", SNN_PRECISION_NAME);
    snn_json_string(e, "numerics", snn_model_numerics(m));
    snn_json_string(e, "step", SNN_STEP_NAME);
    snn_json_float(e, "pixel_mean", SNN_PIXEL_MEAN);
    snn_json_float(e, "pixel_std", SNN_PIXEL_STD);
    snn_json_number(e, "arena_bytes", (double)arena_bytes);
    snn_json_string(e, "data_dir", o->data_dir);
    snn_json_string(e, "device", dev->name);
    snn_json_string(e, "model", o->load_path ? o->load_path : o->resume_path);
    if (resumed) {
        snn_json_number(e, "resumed_epoch", resumed->epoch);
        snn_json_number(e, "resumed_step", resumed->step);
    }
    snn_json_put(f, e);
}

/* A run that cannot go on: the log keeps its figures and the reason, the
 * parameters are not saved, one error line, exit 1. */
__attribute__((noreturn, format(printf, 2, 3))) static void fail_run(outputs *out, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (out->log) {
        cJSON *e = snn_json_event("error");
        snn_json_string(e, "message", msg);
        snn_json_put(snn_out_stream(out->log), e);
        snn_out_commit(out->log);
    }
    if (out->save)
        snn_out_abandon(out->save);
    if (out->dump)
        snn_out_dir_abandon(out->dump);
    snn_die("%s", msg);
}

/* Steps [from, from + n) of the epoch: any non-finite loss ends the run. */
static void check_finite(outputs *out, const float *losses, int from, int n, int epoch)
{
    for (int s = from; s < from + n; s++)
        if (!isfinite(losses[s]))
            fail_run(out, "training diverged: the loss is %s at epoch %d step %d (seen at the check after step %d); "
                     "lower CONFIG_TRAIN_LR (now %s) with make menuconfig", isnan(losses[s]) ? "NaN" : "infinite",
                     epoch, s + 1, from + n, CONFIG_TRAIN_LR);
}

/* A run that ends an epoch worse than a uniform guess has learnt nothing.
 * Judged on the epoch's last 10000 samples (at least CONFIG_TRAIN_CHECK_EVERY
 * steps), and only when the epoch had that many: a short run still sits
 * near ln 10, and a small batch's loss is noisy. */
static void check_learning(outputs *out, const float *losses, int steps, int epoch)
{
    const int n = SNN_MAX2(CONFIG_TRAIN_CHECK_EVERY, (10000 + SNN_BATCH - 1) / SNN_BATCH);
    if (steps < n)
        return;
    double sum = 0;
    for (int s = steps - n; s < steps; s++)
        sum += losses[s];
    if (sum / n > log(SNN_CLASSES))
        fail_run(out, "training collapsed: the mean loss of epoch %d's last %d steps is %.3f, above ln %d = %.3f, "
                 "a uniform guess's loss; the likely cause is a learning rate too high for batch %d: lower "
                 "CONFIG_TRAIN_LR (now %s) or raise CONFIG_TRAIN_BATCH_SIZE (make menuconfig)",
                 epoch, n, sum / n, SNN_CLASSES, log(SNN_CLASSES), SNN_BATCH, CONFIG_TRAIN_LR);
}

/* The run's state: the model, the generator, where the epoch is, the clocks. */
typedef struct {
    snn_model m;
    snn_rng rng;
    snn_progress at;     /* at.order, at.losses, at.correct: host copies */
    double train_s;      /* the training steps' time so far (the device's clock; evaluations not counted) */
    struct timespec t0;  /* when training began, for the wall time */
    snn_target target;   /* --target-acc */
} run_state;

/* An epoch's figures, as printed and logged. */
typedef struct {
    int steps, epoch_steps; /* trained, of the epoch's (fewer where the target stopped it) */
    snn_score train, valid, test;
    float ms;               /* its steps' time */
    double rate, train_s, wall_s;
} epoch_figures;

/* The whole state at the step reached, and a line in the log saying so; a
 * non-finite loss since the last check ends the run instead. */
static void write_checkpoint(outputs *out, const options *o, run_state *r)
{
    snn_epoch_figures(&r->m, r->at.step, r->at.losses, r->at.correct);
    check_finite(out, r->at.losses, 0, r->at.step, r->at.epoch);
    r->at.rng = r->rng;
    if (snn_dp_self()->rank > 0) /* it summed the figures with rank 0, which writes them */
        return;
    snn_model_file_save(snn_out_open(o->checkpoint_path), &r->m, &r->at, SNN_FILE_CHECKPOINT);
    if (out->log) {
        cJSON *e = snn_json_event("checkpoint");
        snn_json_number(e, "epoch", r->at.epoch);
        snn_json_number(e, "step", r->at.step);
        snn_json_string(e, "path", o->checkpoint_path);
        snn_json_put(snn_out_stream(out->log), e);
    }
}

/* Stopped by a signal after `steps` steps of the epoch: what was trained is
 * kept (--save, --checkpoint, --log), the half-written dump is dropped, exit
 * 128 + signal. */
__attribute__((noreturn)) static void stop_run(outputs *out, const options *o, run_state *r, int steps)
{
    int sig = snn_stop_signal() ? snn_stop_signal() : SIGTERM; /* none here: another rank's */
    r->at.step = steps;
    if (out->save)
        snn_model_file_save(out->save, &r->m, &r->at, SNN_FILE_WEIGHTS);
    if (o->checkpoint_path)
        write_checkpoint(out, o, r);
    if (snn_dp_self()->rank > 0) /* the stop agreed on: rank 0 reports it and exits with its status */
        exit(0);
    if (out->log) {
        cJSON *e = snn_json_event("interrupted");
        snn_json_string(e, "signal", snn_signal_name(sig));
        snn_json_number(e, "epoch", r->at.epoch);
        snn_json_number(e, "step", steps);
        snn_json_put(snn_out_stream(out->log), e);
        snn_out_commit(out->log);
    }
    if (out->dump)
        snn_out_dir_abandon(out->dump);
    fflush(stdout);
    fprintf(stderr, "mnist: interrupted by %s in epoch %d after step %d of %d%s%s%s%s\n", snn_signal_name(sig),
            r->at.epoch, steps, o->max_steps, o->save_path ? "; the weights as they are saved to " : "",
            o->save_path ? o->save_path : "", o->checkpoint_path ? "; the checkpoint written to " : "",
            o->checkpoint_path ? o->checkpoint_path : "");
    exit(128 + sig);
}

static void log_epoch(FILE *f, const float *losses, int epoch, const epoch_figures *g)
{
    for (int s = CONFIG_TRAIN_LOG_EVERY - 1; s < g->steps; s += CONFIG_TRAIN_LOG_EVERY) {
        cJSON *e = snn_json_event("step");
        snn_json_number(e, "epoch", epoch);
        snn_json_number(e, "step", s + 1);
        snn_json_float(e, "loss", losses[s]);
        snn_json_put(f, e);
    }
    cJSON *e = snn_json_event("epoch");
    snn_json_number(e, "epoch", epoch);
    if (g->steps < g->epoch_steps)
        snn_json_number(e, "steps", g->steps);
    snn_json_float(e, "train_loss", (float)g->train.loss);
    snn_json_float(e, "train_acc", (float)g->train.accuracy);
    if (SNN_VALID_COUNT) {
        snn_json_float(e, "valid_loss", (float)g->valid.loss);
        snn_json_float(e, "valid_acc", (float)g->valid.accuracy);
    }
    snn_json_float(e, "test_loss", (float)g->test.loss);
    snn_json_float(e, "test_acc", (float)g->test.accuracy);
    snn_json_float(e, "ms", g->ms);
    snn_json_number(e, "samples_per_s", round(g->rate));
    snn_json_float(e, "train_s", (float)g->train_s);
    snn_json_float(e, "wall_s", (float)g->wall_s);
    snn_json_put(f, e);
}

static void log_memory(FILE *f, const snn_mm_stats *s)
{
    cJSON *e = snn_json_event("memory");
    snn_json_string(e, "strategy", SNN_MM_NAME);
    snn_json_number(e, "startup_alloc_calls", s->startup_calls);
    snn_json_number(e, "training_alloc_calls", s->training_calls);
    snn_json_number(e, "tensors", s->tensors);
    snn_json_number(e, "waits", s->waits);
    snn_json_number(e, "arena_bytes", (double)s->arena);
    snn_json_number(e, "reserved_bytes", (double)s->reserved);
    snn_json_number(e, "peak_in_use_bytes", (double)s->peak_in_use);
    snn_json_put(f, e);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* A stop signal, agreed on by every rank where there are several: there only at the loss checks (after
 * steps that are multiples of CONFIG_TRAIN_CHECK_EVERY, `at`), where the ranks synchronise anyway. */
static int stop_now(int at)
{
#ifdef CONFIG_DP
    return at ? snn_dp_any(snn_stop_signal()) : 0;
#else
    (void)at;
    return snn_stop_signal();
#endif
}

#ifndef CONFIG_STEP_FUSED
/* After step s of the epoch (layered: a graph replay each), whose stretch
 * ends at `last`: the losses read back and checked a window of
 * CONFIG_TRAIN_CHECK_EVERY steps at a time (one synchronisation each, not one
 * per step); a stop signal ends the run after the step, except after the
 * epoch's last, where the stop waits for the epoch's end (its evaluation, log
 * and checkpoint) and the next epoch's order. */
static void step_done(outputs *out, const options *o, run_state *r, int s, int last)
{
    const int check = CONFIG_TRAIN_CHECK_EVERY, tty = isatty(STDOUT_FILENO);
    float *losses = r->at.losses;
    if ((s + 1) % check == 0) {
        snn_rt_download(losses + s + 1 - check, r->m.train_loss + s + 1 - check, check * sizeof(float));
#ifdef CONFIG_DP
        /* Each rank's loss is its share: summed, a rank's overflow ends every rank's run, not its own alone. */
        memset(r->at.correct + s + 1 - check, 0, check * sizeof(int32_t));
        snn_dp_sum_figures(losses + s + 1 - check, r->at.correct + s + 1 - check, check);
#endif
        check_finite(out, losses, s + 1 - check, check, r->at.epoch);
    }
    if (s + 1 < o->max_steps && stop_now((s + 1) % check == 0)) {
        if (tty)
            printf("\r%*s\r", 60, "");
        stop_run(out, o, r, s + 1);
    }
    if (tty && s % (o->max_steps / 100 + 1) == 0)
        progress(r->at.epoch, s, o->max_steps);
    if (tty && s + 1 == last)
        printf("\r%*s\r", 60, "");
}
#endif

/* --target-acc: the watched set scored after `steps` steps of the epoch. */
static void watch_target(outputs *out, run_state *r, int steps)
{
    const snn_score s = snn_evaluate(&r->m, r->target.set);
    const long done = (long)(r->at.epoch - 1) * r->at.steps_per_epoch + steps;
    snn_target_score(&r->target, s, r->at.epoch, steps, done, r->train_s, seconds_since(&r->t0),
                     out->log ? snn_out_stream(out->log) : NULL);
}

/* The epoch's row: its steps' mean training loss and accuracy, then each set's. */
static void print_epoch(int epoch, const epoch_figures *f)
{
    printf("%5d  %10.4f  %8.2f%%", epoch, f->train.loss, 100 * f->train.accuracy);
    if (SNN_VALID_COUNT)
        printf("  %10.4f  %8.2f%%", f->valid.loss, 100 * f->valid.accuracy);
    printf("  %9.4f  %7.2f%%  %8.1f ms  %11.0f%s\n", f->test.loss, 100 * f->test.accuracy, f->ms, f->rate,
           f->steps < f->epoch_steps ? "  (stopped at the target)" : "");
    fflush(stdout);
}

/* One epoch from step `first` (0, or where a checkpoint left it), in
 * stretches of CONFIG_TRAIN_EVAL_EVERY steps under --target-acc (each then
 * scored), else whole; it ends early where the target is reached. Each
 * stretch is timed with the device's clock, its scoring not. A stretch is
 * its steps, a graph replay each (snn_rt_run_step), or with the fused step
 * one launch, whose losses are checked at the epoch's end. */
static void train_epoch(outputs *out, const options *o, run_state *r, int first)
{
    snn_model *m = &r->m;
    const int epoch = r->at.epoch;
    float *losses = r->at.losses;
    epoch_figures f = {.epoch_steps = o->max_steps};
    int steps = first, checked = 0;
    if (stop_now(1))
        stop_run(out, o, r, first);
    snn_mark *start = snn_rt_mark_new(), *stop = snn_rt_mark_new();
    while (steps < o->max_steps && !snn_target_stops(&r->target)) {
        /* scored until the mark is reached; with --keep-going, whole after it */
        const int scoring = r->target.goal > 0 && !r->target.reached;
        const int every = scoring ? CONFIG_TRAIN_EVAL_EVERY : o->max_steps;
        int last = (steps / every + 1) * every;
        if (last > o->max_steps)
            last = o->max_steps;
        snn_rt_mark(start);
#ifdef CONFIG_STEP_FUSED
        snn_train_fused(m, steps, last);
#else
        for (int s = steps; s < last; s++) {
            snn_rt_run_step(snn_train_step, m);
            step_done(out, o, r, s, last);
        }
        checked = last / CONFIG_TRAIN_CHECK_EVERY * CONFIG_TRAIN_CHECK_EVERY;
#endif
        snn_rt_mark(stop);
        const float ms = snn_rt_elapsed_ms(start, stop);
        f.ms += ms;
        r->train_s += ms / 1e3;
        steps = last;
        if (scoring)
            watch_target(out, r, steps);
    }
    snn_rt_mark_free(start);
    snn_rt_mark_free(stop);
    f.steps = steps;
    f.train = snn_epoch_score(m, steps, losses);
    if (out->dump)
        dump_epoch_file(out->dump, "losses", epoch, losses, steps * sizeof(float));
    check_finite(out, losses, checked, steps - checked, epoch);
    check_learning(out, losses, steps, epoch);
    if (SNN_VALID_COUNT)
        f.valid = snn_evaluate(m, SNN_SET_VALID);
    f.test = snn_evaluate(m, SNN_SET_TEST);
    f.rate = (double)(steps - first) * SNN_BATCH / (f.ms / 1e3);
    f.train_s = r->train_s;
    f.wall_s = seconds_since(&r->t0);
    print_epoch(epoch, &f);
    r->at.step = steps;
    if (out->log)
        log_epoch(snn_out_stream(out->log), losses, epoch, &f);
}

static void start_model(snn_model *m, snn_rng *rng, const options *o, snn_device_info *dev, snn_plan *plan)
{
    snn_model_plan(plan);
    snn_rt_init(dev, plan->total);
    print_summary(dev, o);
    if (!o->eval && !o->image_count)
        snn_model_print_plan(plan, stdout);
    snn_rng_seed(rng, o->seed);
    snn_model_init(m, plan, snn_mm_start(plan->total), SNN_ON_TARGET, rng);
    if (!o->eval && !o->image_count) {
        char step[640];
        snn_train_describe(step, sizeof(step));
        printf("training step: %s\n", step);
#ifdef CONFIG_DP
        printf("data parallel: %d GPUs (ranks started by %s), %d rows of each step's %d a GPU, gradients all-reduced in "
               "%s over NCCL in buckets of %d MiB; predicted %s\n", SNN_DP_WORLD,
               strcmp(snn_dp_self()->launcher, "alone") ? snn_dp_self()->launcher : "this process", SNN_LOCAL_BATCH,
               SNN_BATCH, SNN_DP_REDUCE_NAME, CONFIG_DP_BUCKET_MB, SNN_DP_PREDICTION);
#endif
    }
}

#ifdef CONFIG_DP
static const char *env(const char *name) { return getenv(name); }

/* A training run of a data-parallel build: this process's place among the ranks, the others started where
 * it was started alone; each rank but 0 prints nothing but its errors. Returns the rendezvous file. */
static const char *start_ranks(void)
{
    char err[512];
    snn_dp_place p;
    if (snn_dp_place_read(&p, env, err, sizeof(err)) || snn_dp_place_check(&p, SNN_DP_WORLD, err, sizeof(err)))
        snn_die("%s", err);
    const char *rendezvous = getenv("SNN_DP_RENDEZVOUS");
    if (p.world == 1)
        p = snn_dp_spawn(SNN_DP_WORLD, &rendezvous);
    snn_dp_set(&p);
    snn_dp_on_abort(snn_out_remove_temporaries);
    if (p.rank > 0) {
        char who[32];
        snprintf(who, sizeof(who), "mnist: rank %d", p.rank);
        snn_check_name(who);
        int null = open("/dev/null", O_WRONLY);
        SNN_CHECK_SYS(null >= 0 && dup2(null, STDOUT_FILENO) >= 0, "discarding a rank's output");
        close(null);
    }
    return rendezvous;
}
#endif

/* A stop during --eval or --predict: what was printed stays, the log says
 * so, exit 128 + signal. */
__attribute__((noreturn)) static void stop_inference(snn_out *log)
{
    int sig = snn_stop_signal();
    if (log) {
        cJSON *e = snn_json_event("interrupted");
        snn_json_string(e, "signal", snn_signal_name(sig));
        snn_json_put(snn_out_stream(log), e);
        snn_out_commit(log);
    }
    fflush(stdout);
    fprintf(stderr, "mnist: interrupted by %s\n", snn_signal_name(sig));
    exit(128 + sig);
}

/* --eval on one set: the loaded model's figures, given the set at its digit width, or a committee's (each
 * member's figures first, as --eval of it alone, printed and logged); the logits and score. On the
 * validation split, which is scored before the test set so that models and committees can be chosen
 * without reading it, the figures are printed and logged (a "validation" event) here too. */
static snn_score evaluate_set(const options *o, snn_model *m, int width, snn_set set, const uint8_t *images,
                              float *logits, const uint8_t *labels, snn_out *log)
{
    const int valid = set == SNN_SET_VALID, count = o->load_count;
    snn_score score, scores[SNN_MAX_MEMBERS];
    int widths[SNN_MAX_MEMBERS];
    if (count == 1) {
        snn_upload_set(m, set, images, width);
        scores[0] = score = snn_evaluate_logits(m, set, logits);
    } else {
        score = snn_committee_logits(m, set, images, o->loads, count, logits, labels, scores, widths);
    }
    if (snn_stop_signal())
        stop_inference(log);
    float accuracy[SNN_MAX_MEMBERS];
    for (int i = 0; i < count; i++)
        accuracy[i] = (float)scores[i].accuracy;
    for (int i = 0; count > 1 && i < count; i++) {
        printf("member %d%s: loss %.4f, accuracy %.2f%%  %s\n", i + 1, valid ? ", validation set" : "",
               scores[i].loss, 100 * scores[i].accuracy, o->loads[i]);
        if (log && !valid) {
            cJSON *e = snn_json_event("member");
            snn_json_number(e, "member", i + 1);
            snn_json_string(e, "model", o->loads[i]);
            snn_json_number(e, "digit_width", widths[i]);
            snn_json_float(e, "loss", (float)scores[i].loss);
            snn_json_float(e, "accuracy", (float)scores[i].accuracy);
            snn_json_put(snn_out_stream(log), e);
        }
    }
    if (!valid)
        return score;
    printf("validation set: loss %.4f, accuracy %.2f%% (%ld of %d)", score.loss, 100 * score.accuracy,
           lround(score.accuracy * SNN_VALID_COUNT), SNN_VALID_COUNT);
    if (count > 1)
        printf(", the committee of %d", count);
    printf("\n");
    if (log) {
        cJSON *e = snn_json_event("validation");
        snn_json_float(e, "loss", (float)score.loss);
        snn_json_float(e, "accuracy", (float)score.accuracy);
        snn_json_number(e, "samples", SNN_VALID_COUNT);
        snn_json_number(e, "members", count);
        snn_json_add(e, "member_accuracy", snn_json_floats(accuracy, count));
        snn_json_put(snn_out_stream(log), e);
    }
    return score;
}

/* Whether every member was trained with this build's validation split held
 * out; else a note names the first that was not (its figures there would
 * read images it trained on) and the split is not scored. */
static int members_held_out(const options *o)
{
    char mine[16];
    snprintf(mine, sizeof(mine), "%d", SNN_VALID_COUNT);
    for (int i = 0; i < o->load_count; i++) {
        char theirs[16] = "none";
        if (snn_model_file_held_out(o->loads[i], theirs, sizeof(theirs)) && !strcmp(theirs, mine))
            continue;
        printf("validation set: not scored: %s was trained without this build's split of the last %d training "
               "images held out (its validation_size: %s)\n",
               o->loads[i], SNN_VALID_COUNT, theirs);
        return 0;
    }
    return 1;
}

/* --load FILE --eval and/or --predict: no training; with several --load
 * files, by their committee. */
static int infer(const options *o)
{
    snn_out *log = o->log_path ? snn_out_open(o->log_path) : NULL;
    snn_model m;
    snn_rng rng;
    snn_plan plan;
    snn_device_info dev;
    start_model(&m, &rng, o, &dev, &plan);
    int width = 0; /* the one model's digit width */
    if (o->load_count == 1) {
        width = snn_model_file_load(o->load_path, &m, NULL, SNN_FILE_WEIGHTS);
        printf("  model %s\n", o->load_path);
        if (width)
            printf("  its digits scaled to %d pixels wide, as it was trained\n", width);
    } else { /* each member loaded where it is scored (app/committee.c), its file checked then */
        printf("  committee of %d models, the mean of their probabilities\n", o->load_count);
    }
    if (o->eval) {
        const int rows = SNN_VALID_COUNT > SNN_TEST_COUNT ? SNN_VALID_COUNT : SNN_TEST_COUNT;
        float *logits = snn_xmalloc((size_t)rows * SNN_CLASSES * sizeof(float), "the images' logits");
        host_dataset d = read_dataset(o->data_dir);
        const uint8_t *valid_images = d.train_images + (size_t)SNN_FIT_COUNT * SNN_INPUT_DIM;
        upload_dataset(&m, &d, 0); /* each model's width is applied to the set it scores */
        if (log)
            log_config(snn_out_stream(log), &m, &dev, o, plan.total, NULL, o->load_count == 1 ? width : -1);
        const int held_out = SNN_VALID_COUNT && members_held_out(o);
        /* the test set's and the validation split's, opened before the work and put in place together after
         * it, so that a stopped or failed evaluation leaves the files of an earlier one as they were */
        snn_out *probs[2] = {NULL, NULL};
        char probs_path[2][PATH_MAX + 16];
        for (int i = 0; o->probs_prefix && i < 2; i++) {
            snn_probs_path(probs_path[i], sizeof(probs_path[i]), o->probs_prefix, i);
            probs[i] = i < 1 + held_out ? snn_out_open(probs_path[i]) : NULL;
        }
        if (held_out) {
            evaluate_set(o, &m, width, SNN_SET_VALID, valid_images, logits, d.train_labels + SNN_FIT_COUNT,
                         log);
            if (probs[1])
                snn_write_probabilities(probs[1], logits, SNN_VALID_COUNT);
        }
        const snn_score score =
            evaluate_set(o, &m, width, SNN_SET_TEST, d.test_images, logits, d.test_labels, log);
        snn_report_evaluation(logits, d.test_labels, SNN_TEST_COUNT, score, o->load_count, stdout,
                              log ? snn_out_stream(log) : NULL);
        if (probs[0]) {
            snn_write_probabilities(probs[0], logits, SNN_TEST_COUNT);
            snn_out_commit(probs[0]);
            if (probs[1])
                snn_out_commit(probs[1]);
            printf("probabilities written: %s%s%s\n", probs_path[0], held_out ? ", " : "",
                   held_out ? probs_path[1] : "");
            /* an earlier evaluation's split there would be mixed with this test set (tools/ensemble.py) */
            if (!held_out && unlink(probs_path[1]) == 0)
                printf("removed %s: an earlier evaluation's; this one scored no validation split\n",
                       probs_path[1]);
        }
        free(d.train_images);
        free(logits);
    }
    int failed = 0;
    if (o->image_count &&
        (failed = snn_predict_images(&m, width, o->loads, o->load_count, (const char *const *)o->images,
                                     o->image_count, stdout)) < 0)
        stop_inference(log);
    if (log)
        snn_out_commit(log);
    snn_mm_stop(m.arena);
    return failed ? 1 : 0;
}

/* Where the run's files went, once each is in place. */
static void print_written(const options *o)
{
    const char *what[][2] = {{"weights", o->save_path}, {"checkpoint", o->checkpoint_path},
                             {"log", o->log_path}, {"dump", o->dump_dir}};
    for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++)
        if (what[i][1])
            printf("%s written to %s\n", what[i][0], what[i][1]);
}

/* The dataset's files are there: said before the plan and the model's start, not after them. */
static void check_data(const options *o)
{
    char err[512];
    if ((o->eval || !o->image_count) && snn_dataset_find(o->data_dir, err, sizeof(err)) != 0)
        snn_die("%s", err);
}

/* --load's weights or --resume's whole state, checked against this run's
 * options. */
static void start_from_files(const options *o, run_state *r)
{
    if (o->load_path) {
        const int theirs = snn_model_file_load(o->load_path, &r->m, NULL, SNN_FILE_WEIGHTS);
        printf("  starting from the weights of %s\n", o->load_path);
        if (theirs != o->digit_width)
            printf("note: %s was trained at digit width %d; this run trains at %d (--digit-width; 0: as the "
                   "dataset's)\n",
                   o->load_path, theirs, o->digit_width);
    }
    if (!o->resume_path)
        return;
    snn_model_file_load(o->resume_path, &r->m, &r->at, SNN_FILE_CHECKPOINT);
    if (r->at.steps_per_epoch != o->max_steps)
        snn_die("%s: its epochs have %d steps, this run's %d (--max-steps): resume with the same --max-steps",
                o->resume_path, r->at.steps_per_epoch, o->max_steps);
    if (r->at.epoch > o->epochs || (r->at.epoch == o->epochs && r->at.step == o->max_steps))
        snn_die("%s is at epoch %d step %d: --epochs %d leaves nothing to train; give --epochs above %d",
                o->resume_path, r->at.epoch, r->at.step, o->epochs, r->at.epoch - (r->at.step < o->max_steps));
    r->rng = r->at.rng;
    printf("  resuming %s at epoch %d after step %d of %d\n", o->resume_path, r->at.epoch, r->at.step,
           o->max_steps);
    if (r->at.digit_width)
        printf("  each digit's columns scaled to %d pixels wide, as the checkpoint's run\n",
               r->at.digit_width);
}

/* The dump's start (the parameters as initialised, the recipe) and the
 * log's configuration record. */
static void start_outputs(outputs *out, const options *o, run_state *r, const snn_device_info *dev, size_t plan)
{
    if (out->dump) {
        float *params = snn_xmalloc(SNN_PARAMS * sizeof(float), "parameters");
        snn_model_get_state(&r->m, params, NULL);
        dump_start(out->dump, &r->m, params, o);
        free(params);
    }
    if (out->log)
        log_config(snn_out_stream(out->log), &r->m, dev, o, plan, o->resume_path ? &r->at : NULL,
                   r->at.digit_width);
}

/* Epoch `epoch` begun: its order drawn (and dumped), or, inside a resumed
 * epoch, the checkpoint's order and the figures of its steps so far. Its
 * first step. */
static int begin_epoch(outputs *out, const options *o, run_state *r, int epoch, int inside)
{
    r->at.epoch = epoch;
    if (inside) {
        snn_epoch_resume(&r->m, r->at.order, epoch - 1, r->at.step, r->at.losses, r->at.correct);
        return r->at.step;
    }
    snn_epoch_begin(&r->m, &r->rng, r->at.order, epoch - 1);
    if (out->dump) {
        dump_epoch_file(out->dump, "order", epoch, r->at.order, SNN_FIT_COUNT * sizeof(int32_t));
        dump_draws(out->dump, &r->m, epoch, o->max_steps);
    }
    r->at.step = 0;
    return 0;
}

/* The trained run's files (--save, the dump, the log's memory record), its
 * memory figures, and where its files went. */
static void finish_run(outputs *out, const options *o, run_state *r)
{
    if (out->save)
        snn_model_file_save(out->save, &r->m, &r->at, SNN_FILE_WEIGHTS);
    if (out->dump)
        snn_out_dir_commit(out->dump);
    snn_mm_stats mem;
    snn_mm_stats_get(&mem);
    snn_mm_print(&mem, stdout);
    if (out->log) {
        log_memory(snn_out_stream(out->log), &mem);
        snn_out_commit(out->log);
    }
    print_written(o);
    free(r->at.order);
    free(r->at.losses);
    free(r->at.correct);
    snn_mm_stop(r->m.arena);
}

/* A training run: the epochs from the start, or from where --resume's
 * checkpoint was. A checkpoint inside an epoch (from step 0: its order drawn)
 * goes on with that epoch's order; a complete epoch's starts the next one.
 * The run ends early where --target-acc's mark is reached. */
int main(int argc, char **argv)
{
    options o = snn_parse_options(argc, argv);
    snn_signals_install();
    check_data(&o);
    if (o.eval || o.image_count)
        return infer(&o);
#ifdef CONFIG_DP
    const char *rendezvous = start_ranks();
#endif
    outputs out = open_outputs(&o);
    run_state r = {0};
    snn_plan plan;
    snn_device_info dev;
    start_model(&r.m, &r.rng, &o, &dev, &plan);
#ifdef CONFIG_DP
    snn_dp_start(snn_dp_self(), rendezvous);
#endif
    r.at = (snn_progress){.epoch = 1,
                          .steps_per_epoch = o.max_steps,
                          .seed = o.seed,
                          .digit_width = o.digit_width,
                          .order = snn_xmalloc(SNN_FIT_COUNT * sizeof(int32_t), "sample order"),
                          .losses = snn_xmalloc(SNN_STEPS_PER_EPOCH * sizeof(float), "step losses"),
                          .correct = snn_xmalloc(SNN_STEPS_PER_EPOCH * sizeof(int32_t), "step counts")};
    start_from_files(&o, &r);
    snn_model_set_run(&r.m, o.epochs, o.max_steps, (uint64_t)r.at.seed); /* a checkpoint's seed, resumed */
    host_dataset d = read_dataset(o.data_dir);
    upload_dataset(&r.m, &d, r.at.digit_width);
    free(d.train_images);
    start_outputs(&out, &o, &r, &dev, plan.total);
    snn_target_init(&r.target, o.target_acc, target_set(), o.keep_going);

#ifndef CONFIG_STEP_FUSED
    snn_rt_prepare_step(snn_train_step, &r.m); /* loaded and captured before the clocks start */
#endif
    clock_gettime(CLOCK_MONOTONIC, &r.t0);
    const int resumed = o.resume_path != NULL;
    int epoch = resumed ? r.at.epoch : 1, inside = resumed && r.at.step < o.max_steps;
    if (resumed && !inside)
        epoch++;
    printf("epoch  train loss  train acc%s  test loss  test acc      time      samples/s\n",
           SNN_VALID_COUNT ? "  valid loss  valid acc" : "");
    fflush(stdout);
    for (; epoch <= o.epochs && !snn_target_stops(&r.target); epoch++, inside = 0) {
        train_epoch(&out, &o, &r, begin_epoch(&out, &o, &r, epoch, inside));
        if (o.checkpoint_path &&
            (epoch % o.checkpoint_every == 0 || epoch == o.epochs || snn_target_stops(&r.target)))
            write_checkpoint(&out, &o, &r);
    }
    if (r.target.goal > 0 && !r.target.reached)
        snn_target_missed(&r.target, out.log ? snn_out_stream(out.log) : NULL);
#ifdef CONFIG_DP
    snn_dp_stop(); /* before the arena its buffers lie in is freed */
#endif
    finish_run(&out, &o, &r);
    return snn_dp_spawned_wait();
}
