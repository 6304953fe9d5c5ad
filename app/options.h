/* The command line of mnist: what to train, load, save and report. */
#ifndef SNN_OPTIONS_H
#define SNN_OPTIONS_H

/* The most --load files one command takes: the members of a committee. */
#define SNN_MAX_MEMBERS 64

typedef struct {
    const char *data_dir, *log_path, *dump_dir, *save_path;
    const char *probs_prefix; /* --probs: --eval's probabilities to PREFIX.test.npy (PREFIX.validation.npy) */
    const char *load_path, *resume_path, *checkpoint_path; /* load_path: the first --load */
    const char *loads[SNN_MAX_MEMBERS];                      /* every --load, in order */
    int load_count;
    int max_steps, epochs, checkpoint_every;
    int seed;                /* CONFIG_TRAIN_SEED, or --seed */
    int digit_width;         /* --digit-width: each digit scaled to this width (data/digit.h); 0: as read */
    double target_acc;       /* --target-acc, a fraction; 0: none */
    int keep_going;          /* --keep-going: train the whole run past the target */
    int eval;                /* --eval: evaluate the loaded model, train nothing */
    char **images;           /* --predict: the images to classify (count of them) */
    int image_count;
} options;

/* Parses argv; a bad or contradictory command line is one message naming
 * the option and exit 1; --help prints the usage and exits 0. */
options snn_parse_options(int argc, char **argv);

#endif
