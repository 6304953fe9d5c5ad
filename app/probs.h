/* mnist --eval --probs PREFIX: the class probabilities of the model (or committee) on each image it scored,
 * as NumPy arrays, so that committees of models of different shapes, which no one build can load, can be
 * mixed outside it (tools/ensemble.py). */
#ifndef SNN_PROBS_H
#define SNN_PROBS_H

#include <stddef.h>

#include "app/outfile.h"

/* Writes to out (the caller commits it) a NumPy .npy file of float32, rows x SNN_CLASSES: row i the softmax
 * of logits' row i (for a committee's logits, the log of its members' mean probability: that mean back). */
void snn_write_probabilities(snn_out *out, const float *logits, int rows);

/* --probs PREFIX's file of the test set (PREFIX.test.npy) or of the validation split (PREFIX.validation.npy).
 */
void snn_probs_path(char *path, size_t len, const char *prefix, int validation);

#endif
