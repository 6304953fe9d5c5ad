#define _DEFAULT_SOURCE /* realpath */
#include "app/options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/probs.h"
#include "nn/model.h"
#include "snn_check.h"
#include "snn_config.h"

static void usage(FILE *out)
{
    char shape[256];
    snn_model_shape(shape, sizeof(shape));
    fprintf(out,
            "usage: mnist [options]                      train the configured model (make menuconfig)\n"
            "       mnist --load MODEL --eval [--log F]  evaluate a saved model on the test set\n"
            "       mnist --load MODEL --predict IMAGE...  classify PNG, PGM or PPM images\n"
            "       mnist --load A --load B ... --eval | --predict IMAGE...  the same by a committee\n"
            "       mnist --load MODEL... --eval --probs PREFIX  and its probabilities as NumPy arrays\n\n"
            "Trains this build's MLP %s, batch %d, on %s (make menuconfig configures others).\n\n"
            "  --data DIR            dataset directory (default: %s)\n"
            "  --epochs N            train N epochs instead of the configured %d (with --resume: up to\n"
            "                        epoch N in all)\n"
            "  --max-steps N         stop each epoch after N steps (smoke tests, sanitizers)\n"
            "  --seed N              draw the initial weights and the sample orders from seed N\n"
            "                        instead of the configured %d\n"
            "  --digit-width W       scale each digit's columns so that its box is W pixels wide (1 to\n"
            "                        %d), training and test images alike; the saved model says so and\n"
            "                        --eval and --predict (and committees, member by member) scale\n"
            "                        its inputs the same way\n"
            "  --target-acc P        stop as soon as the %s set's accuracy reaches P %%, scored every\n"
            "                        %d steps and at each epoch's end; print and log the training\n"
            "                        and wall time it took\n"
            "  --keep-going          with --target-acc: record where the mark is first reached, and\n"
            "                        train the whole run (a fixed-length run, scored at its end)\n"
            "  --log FILE            write JSON lines: the config, every %d-th step's loss, each epoch,\n"
            "                        the memory strategy's figures, and with --eval the evaluation\n"
            "  --save FILE           write the final weights as safetensors (README: model files)\n"
            "  --load FILE           start from the weights of FILE (a --save file or a checkpoint);\n"
            "                        with --eval or --predict, given again (up to %d): a committee,\n"
            "                        the mean of its members' probabilities\n"
            "  --checkpoint FILE     write the whole training state to FILE every --checkpoint-every\n"
            "                        epochs, at the end, and when a signal stops the run\n"
            "  --checkpoint-every N  epochs between checkpoints (default 1)\n"
            "  --resume FILE         go on from a checkpoint: the same parameters, bit for bit, as a\n"
            "                        run that was never stopped\n"
            "  --eval                with --load: the test set's loss, accuracy, per-class accuracy\n"
            "                        and confusion matrix (first the validation split's loss and\n"
            "                        accuracy, where the build holds one out); trains nothing\n"
            "  --probs PREFIX        with --eval: write the class probabilities of each test image\n"
            "                        to PREFIX.test.npy (and of the validation split's, where it is\n"
            "                        scored, to PREFIX.validation.npy): float32, a row an image;\n"
            "                        tools/ensemble.py mixes committees of other shapes with them\n"
            "  --predict IMAGE...    with --load: each image's class and probability; any size,\n"
            "                        grey or colour, dark or light background (made MNIST-like)\n"
            "  --dump DIR            write the run's shape and numerics, initial parameters, each\n"
            "                        epoch's order and step losses, for tools/torch_parity.py\n"
            "  --help                this text\n\n"
            "SIGINT, SIGTERM or SIGHUP stops the run after the current step: --save and --checkpoint\n"
            "get the state as it is, --log the figures so far; the exit status is 128 + the signal.\n"
            "A second signal stops at once.\n",
            shape, SNN_BATCH, SNN_DATASET_NAME, SNN_DATA_DIR, CONFIG_TRAIN_EPOCHS, CONFIG_TRAIN_SEED,
            SNN_IMAGE_COLS, SNN_VALID_COUNT ? "validation" : "test", CONFIG_TRAIN_EVAL_EVERY,
            CONFIG_TRAIN_LOG_EVERY, SNN_MAX_MEMBERS);
}

/* A file or directory name: refused empty or ending in '/' before any work, rather than after it. */
static const char *parse_path(const char *opt, const char *text, int is_dir)
{
    if (!*text)
        snn_die("%s wants a %s name, not an empty one", opt, is_dir ? "directory" : "file");
    if (!is_dir && text[strlen(text) - 1] == '/')
        snn_die("%s wants a file name, not a directory: '%s'", opt, text);
    return text;
}

/* A percentage in (0, 100], as a fraction. */
static double parse_percent(const char *opt, const char *text)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end || end == text || !(v > 0 && v <= 100))
        snn_die("%s wants a percentage above 0 and at most 100, like 98 or 99.2, not '%s'", opt, text);
    return v / 100;
}

/* Whether text is a whole decimal number in [lo, hi], into *v. */
static int whole_number(const char *text, long lo, long hi, int *v)
{
    char *end;
    errno = 0;
    long n = strtol(text, &end, 10);
    *v = (int)n;
    return !errno && !*end && end != text && n >= lo && n <= hi;
}

static int parse_seed(const char *text)
{
    int v;
    if (!whole_number(text, 0, 2147483647, &v))
        snn_die("--seed wants a whole number in [0, 2147483647], not '%s'", text);
    return v;
}

static int parse_digit_width(const char *text)
{
    int v;
    if (!whole_number(text, 1, SNN_IMAGE_COLS, &v))
        snn_die("--digit-width wants a whole number of pixels in [1, %d], not '%s'", SNN_IMAGE_COLS, text);
    return v;
}

static int parse_count(const char *opt, const char *text)
{
    int v;
    if (!whole_number(text, 1, 1000000000, &v))
        snn_die("%s wants a positive whole number, not '%s'", opt, text);
    return v;
}

/* Where path will be written: its directory resolved (links, ".", ".."),
 * then its name; as given where the directory does not resolve (the open
 * will say why). */
static void resolved(const char *path, char *out, size_t len)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    if (realpath(dir, real))
        snprintf(out, len, "%s/%s", real, name);
    else
        snprintf(out, len, "%s", path);
}

/* Options that make no sense together, each refused by name. */
static void check_combinations(const options *o, int epochs_given, int max_steps_given, int every_given,
                               int seed_given)
{
    const int infer = o->eval || o->image_count;
    if (infer && !o->load_path)
        snn_die("%s needs --load FILE: the model to %s", o->eval ? "--eval" : "--predict",
                o->eval ? "evaluate" : "classify with");
    const char *training_only[][2] = {{"--save", o->save_path}, {"--checkpoint", o->checkpoint_path},
                                      {"--resume", o->resume_path}, {"--dump", o->dump_dir},
                                      {"--epochs", epochs_given ? "" : NULL},
                                      {"--max-steps", max_steps_given ? "" : NULL},
                                      {"--seed", seed_given ? "" : NULL},
                                      {"--digit-width", o->digit_width ? "" : NULL},
                                      {"--target-acc", o->target_acc > 0 ? "" : NULL},
                                      {"--keep-going", o->keep_going ? "" : NULL}};
    for (size_t i = 0; infer && i < sizeof(training_only) / sizeof(training_only[0]); i++)
        if (training_only[i][1])
            snn_die("%s trains nothing: %s does not go with it", o->eval ? "--eval" : "--predict",
                    training_only[i][0]);
    if (!infer && o->load_count > 1)
        snn_die("--load given %d times: a run trains from one model's weights; several --load files make a "
                "committee for --eval or --predict",
                o->load_count);
    if (o->probs_prefix && !o->eval)
        snn_die("--probs writes the probabilities --eval scores: give --eval (and --load) with it");
    if (o->image_count && !o->eval && o->log_path)
        snn_die("--log records training and --eval; --predict prints its results");
    if (o->resume_path && o->load_path)
        snn_die("--resume loads the model from its checkpoint: --load does not go with it");
    if (o->resume_path && seed_given)
        snn_die("--resume goes on with its checkpoint's generator: --seed does not go with it");
    if (o->resume_path && o->digit_width)
        snn_die("--resume goes on at its checkpoint's digit width: --digit-width does not go with it");
    if (o->keep_going && !(o->target_acc > 0))
        snn_die("--keep-going trains past --target-acc's mark: give --target-acc P with it");
    if (o->target_acc > 0 && o->dump_dir)
        snn_die("--dump records whole epochs for tools/torch_parity.py: --target-acc does not go with it");
    if (o->resume_path && o->dump_dir)
        snn_die("--dump records a run from its start: it does not go with --resume");
    if (every_given && !o->checkpoint_path)
        snn_die("--checkpoint-every needs --checkpoint FILE");
    /* Each output is written whole and renamed: two of them on one name would leave only the last. */
    /* --probs' validation file too, even where this build scores no split: it removes an earlier one there */
    char probs[2][PATH_MAX + 16] = {"", ""};
    if (o->probs_prefix)
        for (int i = 0; i < 2; i++)
            snn_probs_path(probs[i], sizeof(probs[i]), o->probs_prefix, i);
    const char *outputs[][2] = {{"--save", o->save_path},
                                {"--checkpoint", o->checkpoint_path},
                                {"--log", o->log_path},
                                {"--dump", o->dump_dir},
                                {"--probs", o->probs_prefix ? probs[0] : NULL},
                                {"--probs", o->probs_prefix ? probs[1] : NULL}};
    enum { OUTPUTS = sizeof(outputs) / sizeof(outputs[0]) };
    char where[OUTPUTS][2 * PATH_MAX];
    for (int i = 0; i < OUTPUTS; i++)
        if (outputs[i][1])
            resolved(outputs[i][1], where[i], sizeof(where[i]));
    for (int i = 0; i < OUTPUTS; i++)
        for (int j = i + 1; j < OUTPUTS && outputs[i][1]; j++)
            if (outputs[j][1] && strcmp(where[i], where[j]) == 0)
                snn_die("%s and %s name the same file, %s: give each its own", outputs[i][0], outputs[j][0],
                        where[i]);
}

options snn_parse_options(int argc, char **argv)
{
    // clang-format off
    enum {
        DATA = 256, LOG, DUMP, SAVE, LOAD, RESUME, CHECKPOINT, EVERY, EVAL, PREDICT, MAX_STEPS, EPOCHS, SEED,
        TARGET, KEEP_GOING, DIGIT_WIDTH, PROBS, HELP
    };
    static const struct option longs[] = {
        {"data", required_argument, 0, DATA},         {"log", required_argument, 0, LOG},
        {"dump", required_argument, 0, DUMP},         {"save", required_argument, 0, SAVE},
        {"load", required_argument, 0, LOAD},         {"resume", required_argument, 0, RESUME},
        {"checkpoint", required_argument, 0, CHECKPOINT}, {"checkpoint-every", required_argument, 0, EVERY},
        {"eval", no_argument, 0, EVAL},               {"predict", no_argument, 0, PREDICT},
        {"max-steps", required_argument, 0, MAX_STEPS}, {"epochs", required_argument, 0, EPOCHS},
        {"seed", required_argument, 0, SEED},         {"target-acc", required_argument, 0, TARGET},
        {"keep-going", no_argument, 0, KEEP_GOING},   {"digit-width", required_argument, 0, DIGIT_WIDTH},
        {"probs", required_argument, 0, PROBS},       {"help", no_argument, 0, HELP},
        {0, 0, 0, 0}};
    // clang-format on
    options o = {.data_dir = SNN_DATA_DIR, .max_steps = SNN_STEPS_PER_EPOCH, .epochs = CONFIG_TRAIN_EPOCHS,
                 .checkpoint_every = 1, .seed = CONFIG_TRAIN_SEED};
    int c, predict = 0, epochs_given = 0, max_steps_given = 0, every_given = 0, seed_given = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case DATA: o.data_dir = parse_path("--data", optarg, 1); break;
        case LOG: o.log_path = parse_path("--log", optarg, 0); break;
        case DUMP: o.dump_dir = parse_path("--dump", optarg, 1); break;
        case SAVE: o.save_path = parse_path("--save", optarg, 0); break;
        case LOAD:
            if (o.load_count == SNN_MAX_MEMBERS)
                snn_die("--load given more than %d times: a committee has at most %d members", SNN_MAX_MEMBERS,
                        SNN_MAX_MEMBERS);
            o.loads[o.load_count++] = parse_path("--load", optarg, 0);
            o.load_path = o.loads[0];
            break;
        case RESUME: o.resume_path = parse_path("--resume", optarg, 0); break;
        case CHECKPOINT: o.checkpoint_path = parse_path("--checkpoint", optarg, 0); break;
        case EVERY: o.checkpoint_every = parse_count("--checkpoint-every", optarg), every_given = 1; break;
        case EVAL: o.eval = 1; break;
        case PREDICT: predict = 1; break;
        case MAX_STEPS: o.max_steps = parse_count("--max-steps", optarg), max_steps_given = 1; break;
        case EPOCHS: o.epochs = parse_count("--epochs", optarg), epochs_given = 1; break;
        case SEED: o.seed = parse_seed(optarg), seed_given = 1; break;
        case TARGET: o.target_acc = parse_percent("--target-acc", optarg); break;
        case KEEP_GOING: o.keep_going = 1; break;
        case DIGIT_WIDTH: o.digit_width = parse_digit_width(optarg); break;
        case PROBS:
            o.probs_prefix = parse_path("--probs", optarg, 0);
            break;
        case HELP: usage(stdout); exit(0);
        default: /* inside a cluster like -xy, optind has not moved past it yet */
            if (strncmp(argv[optind - 1], "--", 2) == 0)
                snn_die("unknown or incomplete option '%s' (see mnist --help)", argv[optind - 1]);
            snn_die("unknown option '-%c' (see mnist --help)", optopt);
        }
    }
    if (predict) {
        o.images = argv + optind;
        o.image_count = argc - optind;
        if (!o.image_count)
            snn_die("--predict needs at least one image file");
    } else if (optind < argc)
        snn_die("unexpected argument '%s' (see mnist --help)", argv[optind]);
    if (o.max_steps > SNN_STEPS_PER_EPOCH)
        o.max_steps = SNN_STEPS_PER_EPOCH;
    check_combinations(&o, epochs_given, max_steps_given, every_given, seed_given);
    return o;
}
