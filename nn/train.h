/* The schedule: one training step (gather, forward, loss, backward, update)
 * and one evaluation step, each a fixed sequence of kernel launches, and the
 * epoch around them. Nothing here synchronises with the device except the
 * reads at the end of an epoch. */
#ifndef SNN_TRAIN_H
#define SNN_TRAIN_H

#include "nn/model.h"

/* One step each (an evaluation step of the test or the validation set); they
 * read their step number from device memory, so they can be captured once and
 * replayed. Called through snn_rt_run_step. */
void snn_train_step(void *model);
void snn_test_step(void *model);
void snn_valid_step(void *model);

#ifdef CONFIG_STEP_FUSED
/* Steps first .. last - 1 of the epoch in one launch of the fused step (no
 * host work inside); the weights' 16-bit twins are rewritten after it. */
void snn_train_fused(snn_model *m, int first, int last);
#endif
#ifdef CONFIG_STEP_FUSED
#define SNN_STEP_NAME "fused"
#else
#define SNN_STEP_NAME "layered"
#endif
/* The training recipe (nn/Kconfig), one line: "SGD lr 0.02 momentum 0.9" and
 * what the build adds to it (Nesterov, weight decay, schedule, smoothing). */
void snn_recipe_describe(char *buf, int len);
/* Which training step this build runs, and why: one line. */
void snn_train_describe(char *buf, int len);

/* Draws this epoch's order (kept in order_host too) and sets the clock to
 * its first step; epoch counts from 0 (the schedule's time). */
void snn_epoch_begin(snn_model *m, snn_rng *rng, int32_t *order_host, int epoch);

/* Continues epoch `epoch` (from 0) from a checkpoint: its order, its next
 * step, and the losses and correct counts of the steps done (step of each). */
void snn_epoch_resume(snn_model *m, const int32_t *order_host, int epoch, int step, const float *losses_host,
                      const int32_t *correct_host);
/* The losses and correct counts of the epoch's first `steps` steps (data parallel: summed over the ranks). */
void snn_epoch_figures(snn_model *m, int steps, float *losses_host, int32_t *correct_host);

typedef struct {
    double loss, accuracy; /* mean over the steps or the test set */
} snn_score;

/* Reads back `steps` training steps' figures (losses_host gets each step's loss). */
snn_score snn_epoch_score(snn_model *m, int steps, float *losses_host);

typedef enum { SNN_SET_TEST, SNN_SET_VALID } snn_set;
/* "test", "validation" */
const char *snn_set_name(snn_set set);
/* Runs the whole set and scores it (a synchronisation). */
snn_score snn_evaluate(snn_model *m, snn_set set);
/* A set step by step without a graph, keeping every image's logits (its
 * snn_set_count x SNN_CLASSES floats; the test set: whatever test_images
 * holds). */
snn_score snn_evaluate_logits(snn_model *m, snn_set set, float *logits_host);
/* The images of a set: SNN_TEST_COUNT or SNN_VALID_COUNT. */
int snn_set_count(snn_set set);

#endif
