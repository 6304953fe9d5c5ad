/* --eval: a saved model's test-set figures, printed and logged. */
#ifndef SNN_EVALUATE_H
#define SNN_EVALUATE_H

#include <stdint.h>
#include <stdio.h>

#include "nn/train.h"

/* From every test image's logits (n x SNN_CLASSES) and label: the score the
 * device computed (or a committee of `members` models, app/committee.h), the
 * per-class accuracy and the confusion matrix (rows: true class, columns:
 * predicted, the first arg-max as the device's), to out and, as an
 * {"event":"evaluation"} line, to log (NULL: none). */
void snn_report_evaluation(const float *logits, const uint8_t *labels, int n, snn_score score, int members,
                           FILE *out, FILE *log);

/* The first arg-max of one row of logits. */
int snn_predicted_class(const float *logits);

/* One row of logits' class probabilities, their softmax in double (the largest logit subtracted first). */
void snn_class_probabilities(const float *logits, double *p);

#endif
