/* --target-acc P: the watched set's scores during training, and the first
 * that reaches P, with the training and wall time it took. */
#ifndef SNN_TARGET_H
#define SNN_TARGET_H

#include <stdio.h>

#include "nn/train.h"

/* A score of the watched set and where in the run it was taken. */
typedef struct {
    snn_score score;
    int epoch, step;  /* after step `step` of epoch `epoch` */
    long steps;       /* training steps in all by then */
    double train_s, wall_s;
} snn_target_mark;

typedef struct {
    double goal;           /* the accuracy to reach, a fraction; 0: no target */
    snn_set set;           /* the set watched */
    int goes_on;           /* --keep-going: the run trains its whole length past the mark */
    int reached;           /* hit: the first score >= goal */
    snn_target_mark hit, best;
} snn_target;

void snn_target_init(snn_target *t, double goal, snn_set set, int goes_on);

/* Whether the run ends here: the mark reached, and not --keep-going. */
static inline int snn_target_stops(const snn_target *t) { return t->reached && !t->goes_on; }

/* A score of the watched set after step `step` of epoch `epoch` (steps: in
 * all), train_s and wall_s into the run: logged (a "target_score" event); the
 * first that reaches the goal is printed and logged ("target"). log may be
 * NULL. */
void snn_target_score(snn_target *t, snn_score s, int epoch, int step, long steps, double train_s,
                      double wall_s, FILE *log);

/* The run ended short of the goal: one line, and a "target" event saying so. */
void snn_target_missed(const snn_target *t, FILE *log);

#endif
