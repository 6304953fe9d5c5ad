/* mnist: the fixed-shape training run of the configured build. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/outfile.h"
#include "app/signals.h"
#include "arch/runtime.h"
#include "data/dataset.h"
#include "mm/mm.h"
#include "nn/train.h"
#include "snn_check.h"

typedef struct {
    const char *data_dir, *log_path, *dump_dir, *save_path;
    int max_steps, epochs;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mnist [options]\n"
            "Trains the MLP this build was configured for (make menuconfig) on " SNN_DATASET_NAME ".\n\n"
            "  --data DIR       dataset directory (default: " SNN_DATA_DIR ")\n"
            "  --log FILE       write JSON lines: the config, every %d-th step's loss, each epoch,\n"
            "                   and at the end the memory strategy's figures\n"
            "  --dump DIR       write the run's shape and numerics (meta.json), initial\n"
            "                   parameters (init.bin), each epoch's sample order (order-E.bin)\n"
            "                   and step losses (losses-E.bin), for tools/torch_parity.py\n"
            "  --save FILE      write the final parameters: little-endian float32, layer by layer,\n"
            "                   W [out][in] row-major then b [out]; inputs are (pixel/255 - mean)/std\n"
            "                   with mean %.4f, std %.4f (" SNN_DATASET_NAME ")\n"
            "  --epochs N       train N epochs instead of the configured %d\n"
            "  --max-steps N    stop each epoch after N steps (smoke tests, sanitizers)\n"
            "  --help           this text\n\n"
            "SIGINT or SIGTERM stops the run after the current step: --save gets the parameters as\n"
            "they are, --log the figures so far; the exit status is 130 or 143.\n",
            CONFIG_TRAIN_LOG_EVERY, (double)SNN_PIXEL_MEAN, (double)SNN_PIXEL_STD, CONFIG_TRAIN_EPOCHS);
}

static int parse_count(const char *opt, const char *text)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < 1 || v > 1000000000)
        snn_die("%s wants a positive whole number, not '%s'", opt, text);
    return (int)v;
}

static options parse_options(int argc, char **argv)
{
    static const struct option longs[] = {
        {"data", required_argument, 0, 'd'}, {"log", required_argument, 0, 'l'},
        {"dump", required_argument, 0, 'u'}, {"save", required_argument, 0, 's'},
        {"max-steps", required_argument, 0, 'm'}, {"epochs", required_argument, 0, 'e'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    options o = {SNN_DATA_DIR, NULL, NULL, NULL, SNN_STEPS_PER_EPOCH, CONFIG_TRAIN_EPOCHS};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'd': o.data_dir = optarg; break;
        case 'l': o.log_path = optarg; break;
        case 'u': o.dump_dir = optarg; break;
        case 's': o.save_path = optarg; break;
        case 'm': o.max_steps = parse_count("--max-steps", optarg); break;
        case 'e': o.epochs = parse_count("--epochs", optarg); break;
        case 'h': usage(stdout); exit(0);
        default: /* inside a cluster like -xy, optind has not moved past it yet */
            if (strncmp(argv[optind - 1], "--", 2) == 0)
                snn_die("unknown or incomplete option '%s' (see mnist --help)", argv[optind - 1]);
            snn_die("unknown option '-%c' (see mnist --help)", optopt);
        }
    }
    if (optind < argc)
        snn_die("unexpected argument '%s' (see mnist --help)", argv[optind]);
    if (o.max_steps > SNN_STEPS_PER_EPOCH)
        o.max_steps = SNN_STEPS_PER_EPOCH;
    return o;
}

/* A JSON string: quoted, with quotes, backslashes and control characters escaped. */
static void put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void dump_epoch_file(snn_out_dir *dump, const char *what, int epoch, const void *data, size_t bytes)
{
    char name[64];
    snprintf(name, sizeof(name), "%s-%d.bin", what, epoch);
    snn_out_dir_write(dump, name, data, bytes);
}

/* What tools/torch_parity.py needs to rebuild the run: the shape, the
 * schedule and the numerics (meta.json), and the initial parameters. */
static void dump_start(snn_out_dir *dump, const snn_model *m, const float *params, const options *o)
{
    char path[4096];
    snn_out_dir_path(dump, "meta.json", path, sizeof(path));
    snn_out *meta = snn_out_open(path);
    FILE *f = snn_out_stream(meta);
    fprintf(f, "{\"dims\":[");
    for (int l = 0; l <= SNN_LAYERS; l++)
        fprintf(f, l ? ",%d" : "%d", SNN_DIM(l));
    fprintf(f,
            "],\"batch\":%d,\"epochs\":%d,\"steps_per_epoch\":%d,\"lr\":%.9g,\"momentum\":%.9g,"
            "\"pixel_mean\":%.9g,\"pixel_std\":%.9g,\"dataset\":\"%s\",\"target\":\"%s\",\"data_dir\":",
            SNN_BATCH, o->epochs, o->max_steps, CONFIG_TRAIN_LR_VALUE, CONFIG_TRAIN_MOMENTUM_VALUE,
            (double)SNN_PIXEL_MEAN, (double)SNN_PIXEL_STD, SNN_DATASET_NAME, SNN_TARGET_NAME);
    put_json_string(f, o->data_dir);
    fprintf(f, ",\"precision\":");
    const char *numerics = snn_model_numerics(m);
    if (numerics)
        put_json_string(f, numerics);
    else
        fprintf(f, "null");
    fprintf(f, "}\n");
    snn_out_commit(meta);
    snn_out_dir_write(dump, "init.bin", params, SNN_PARAMS * sizeof(float));
}

static void print_summary(const snn_device_info *dev, const options *o)
{
    char shape[256];
    snn_model_shape(shape, sizeof(shape));
    printf("staticnn: %s, MLP %s (%ld parameters), batch %d, %d epochs\n", SNN_DATASET_NAME, shape,
           (long)SNN_PARAMS, SNN_BATCH, o->epochs);
    printf("  SGD lr %s momentum %s, init %s, seed %d\n", CONFIG_TRAIN_LR, CONFIG_TRAIN_MOMENTUM,
           snn_init_name(), CONFIG_TRAIN_SEED);
    if (dev->cc)
        printf("  target %s on %s (compute capability %d.%d, %d SMs, %.1f GiB free)\n", SNN_TARGET_NAME,
               dev->name, dev->cc / 10, dev->cc % 10, dev->units, dev->free_bytes / 1073741824.0);
    else
        printf("  target %s on %s (%d threads)\n", SNN_TARGET_NAME, dev->name, dev->units);
    printf("  data %s: %d train, %d test; %d steps per epoch", o->data_dir, SNN_TRAIN_COUNT,
           SNN_TEST_COUNT, o->max_steps);
    if (o->max_steps < SNN_STEPS_PER_EPOCH)
        printf(" (limited by --max-steps)\n");
    else if (SNN_DROPPED_PER_EPOCH)
        printf(", the last %d samples of each shuffled epoch dropped (static shapes)\n", SNN_DROPPED_PER_EPOCH);
    else
        printf("\n");
}

static void load_dataset(snn_model *m, const char *dir)
{
    char err[512];
    size_t train = (size_t)SNN_TRAIN_COUNT * SNN_INPUT_DIM, test = (size_t)SNN_TEST_COUNT * SNN_INPUT_DIM;
    uint8_t *host = snn_xmalloc(train + test + SNN_TRAIN_COUNT + SNN_TEST_COUNT, "dataset staging");
    uint8_t *ti = host, *tl = ti + train, *vi = tl + SNN_TRAIN_COUNT, *vl = vi + test;
    if (snn_dataset_load(dir, ti, tl, vi, vl, err, sizeof(err)) != 0)
        snn_die("%s", err);
    snn_rt_upload(m->train_images, ti, train);
    snn_rt_upload(m->train_labels, tl, SNN_TRAIN_COUNT);
    snn_rt_upload(m->test_images, vi, test);
    snn_rt_upload(m->test_labels, vl, SNN_TEST_COUNT);
    snn_rt_sync();
    free(host);
}

static void progress(int epoch, int done, int total)
{
    int width = 40, filled = (int)((long)done * width / total);
    printf("\r  epoch %d [%.*s%*s] %3d%%", epoch, filled, "========================================",
           width - filled, "", (int)(100L * done / total));
    fflush(stdout);
}

/* Where the run's results go; each opened before training, so that a name
 * that cannot be written is refused before the work, not after it. */
typedef struct {
    snn_out *log, *save;
    snn_out_dir *dump;
} outputs;

static outputs open_outputs(const options *o)
{
    outputs out = {0};
    if (o->save_path)
        out.save = snn_out_open(o->save_path);
    if (o->log_path)
        out.log = snn_out_open(o->log_path);
    if (o->dump_dir)
        out.dump = snn_out_dir_open(o->dump_dir, "meta.json");
    return out;
}

static void log_config(FILE *f, const snn_device_info *dev, const options *o, size_t arena_bytes)
{
    char shape[256];
    snn_model_shape(shape, sizeof(shape));
    fprintf(f, "{\"event\":\"config\",\"target\":\"%s\",\"dataset\":\"%s\",\"shape\":\"%s\",\"batch\":%d,"
               "\"epochs\":%d,\"lr\":%.9g,\"momentum\":%.9g,\"seed\":%d,\"pixel_mean\":%.9g,\"pixel_std\":%.9g,"
               "\"arena_bytes\":%zu,\"data_dir\":",
            SNN_TARGET_NAME, SNN_DATASET_NAME, shape, SNN_BATCH, o->epochs, CONFIG_TRAIN_LR_VALUE,
            CONFIG_TRAIN_MOMENTUM_VALUE, CONFIG_TRAIN_SEED, (double)SNN_PIXEL_MEAN, (double)SNN_PIXEL_STD,
            arena_bytes);
    put_json_string(f, o->data_dir);
    fprintf(f, ",\"device\":");
    put_json_string(f, dev->name);
    fprintf(f, "}\n");
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
        fprintf(snn_out_stream(out->log), "{\"event\":\"error\",\"message\":");
        put_json_string(snn_out_stream(out->log), msg);
        fprintf(snn_out_stream(out->log), "}\n");
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

static void save_params(snn_out *save, snn_model *m, float *params)
{
    snn_rt_download(params, m->params, SNN_PARAMS * sizeof(float));
    fwrite(params, sizeof(float), SNN_PARAMS, snn_out_stream(save)); /* a failure is the commit's to report */
    snn_out_commit(save);
}

/* Stopped by a signal after `steps` steps of `epoch`: what was trained is
 * kept (--save, --log), the half-written dump is dropped, exit 128 + signal. */
__attribute__((noreturn)) static void stop_run(outputs *out, const options *o, snn_model *m, float *params,
                                               int epoch, int steps)
{
    int sig = snn_stop_signal();
    if (out->save)
        save_params(out->save, m, params);
    if (out->log) {
        fprintf(snn_out_stream(out->log), "{\"event\":\"interrupted\",\"signal\":\"%s\",\"epoch\":%d,\"step\":%d}\n",
                snn_signal_name(sig), epoch, steps);
        snn_out_commit(out->log);
    }
    if (out->dump)
        snn_out_dir_abandon(out->dump);
    fflush(stdout);
    fprintf(stderr, "mnist: interrupted by %s in epoch %d after step %d of %d%s%s\n", snn_signal_name(sig), epoch,
            steps, o->max_steps, o->save_path ? "; the parameters as they are saved to " : "",
            o->save_path ? o->save_path : "");
    exit(128 + sig);
}

int main(int argc, char **argv)
{
    options o = parse_options(argc, argv);
    snn_signals_install();
    outputs out = open_outputs(&o);
    snn_plan plan;
    snn_model_plan(&plan);
    snn_device_info dev;
    snn_rt_init(&dev, plan.total);
    print_summary(&dev, &o);
    snn_model_print_plan(&plan, stdout);

    snn_model m;
    snn_rng rng;
    snn_rng_seed(&rng, CONFIG_TRAIN_SEED);
    snn_model_init(&m, &plan, snn_mm_start(plan.total), SNN_ON_TARGET, &rng);
    load_dataset(&m, o.data_dir);
    float *params = snn_xmalloc(SNN_PARAMS * sizeof(float), "parameters");
    if (out.dump) {
        snn_rt_download(params, m.params, SNN_PARAMS * sizeof(float));
        dump_start(out.dump, &m, params, &o);
    }
    if (out.log)
        log_config(snn_out_stream(out.log), &dev, &o, plan.total);

    int32_t *order = snn_xmalloc(SNN_TRAIN_COUNT * sizeof(int32_t), "sample order");
    float *losses = snn_xmalloc(SNN_STEPS_PER_EPOCH * sizeof(float), "step losses");
    snn_mark *start = snn_rt_mark_new(), *stop = snn_rt_mark_new();
    int tty = isatty(STDOUT_FILENO), tick = o.max_steps / 100 + 1;
    const int check = CONFIG_TRAIN_CHECK_EVERY;
    printf("epoch  train loss  train acc  val loss  val acc     time      samples/s\n");
    fflush(stdout);
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        if (snn_stop_signal())
            stop_run(&out, &o, &m, params, epoch, 0);
        snn_epoch_begin(&m, &rng, order);
        if (out.dump)
            dump_epoch_file(out.dump, "order", epoch, order, SNN_TRAIN_COUNT * sizeof(int32_t));
        snn_rt_mark(start);
        for (int s = 0; s < o.max_steps; s++) {
            snn_rt_run_step(snn_train_step, &m);
            if ((s + 1) % check == 0) { /* one read-back per `check` steps, not per step */
                snn_rt_download(losses + s + 1 - check, m.train_loss + s + 1 - check, check * sizeof(float));
                check_finite(&out, losses, s + 1 - check, check, epoch);
            }
            if (snn_stop_signal()) {
                if (tty)
                    printf("\r%*s\r", 60, "");
                stop_run(&out, &o, &m, params, epoch, s + 1);
            }
            if (tty && s % tick == 0)
                progress(epoch, s, o.max_steps);
        }
        snn_rt_mark(stop);
        float ms = snn_rt_elapsed_ms(start, stop);
        if (tty)
            printf("\r%*s\r", 60, "");
        snn_score train = snn_epoch_score(&m, o.max_steps, losses);
        if (out.dump)
            dump_epoch_file(out.dump, "losses", epoch, losses, o.max_steps * sizeof(float));
        const int checked = o.max_steps / check * check; /* the windows the loop has read back */
        check_finite(&out, losses, checked, o.max_steps - checked, epoch);
        check_learning(&out, losses, o.max_steps, epoch);
        snn_score val = snn_evaluate(&m);
        double rate = (double)o.max_steps * SNN_BATCH / (ms / 1e3);
        printf("%5d  %10.4f  %8.2f%%  %8.4f  %6.2f%%  %8.1f ms  %11.0f\n", epoch, train.loss,
               100 * train.accuracy, val.loss, 100 * val.accuracy, ms, rate);
        fflush(stdout);
        if (out.log) {
            FILE *f = snn_out_stream(out.log);
            for (int s = CONFIG_TRAIN_LOG_EVERY - 1; s < o.max_steps; s += CONFIG_TRAIN_LOG_EVERY)
                fprintf(f, "{\"event\":\"step\",\"epoch\":%d,\"step\":%d,\"loss\":%.7g}\n", epoch, s + 1, losses[s]);
            fprintf(f, "{\"event\":\"epoch\",\"epoch\":%d,\"train_loss\":%.7g,\"train_acc\":%.6f,"
                       "\"val_loss\":%.7g,\"val_acc\":%.6f,\"ms\":%.3f,\"samples_per_s\":%.1f}\n",
                    epoch, train.loss, train.accuracy, val.loss, val.accuracy, ms, rate);
        }
    }
    if (out.save)
        save_params(out.save, &m, params);
    if (out.dump)
        snn_out_dir_commit(out.dump);
    snn_mm_stats mem;
    snn_mm_stats_get(&mem);
    snn_mm_print(&mem, stdout);
    if (out.log) {
        snn_mm_log(&mem, snn_out_stream(out.log));
        snn_out_commit(out.log);
    }
    free(order);
    free(losses);
    free(params);
    snn_rt_mark_free(start);
    snn_rt_mark_free(stop);
    snn_mm_stop(m.arena);
    return 0;
}
