/* --predict: a saved model classifies the user's own images. */
#ifndef SNN_PREDICT_H
#define SNN_PREDICT_H

#include <stdio.h>

#include "nn/model.h"

/* Reads each image (PNG, PGM or PPM, any size), makes it an MNIST digit
 * (data/digit.h), classifies it with m (as loaded, where `members` is 1:
 * the digit scaled to the digit_width it was trained at; else with the
 * committee of the files models[0 .. members), loaded in turn, each given
 * the digits at its own width, app/committee.h) and prints "PATH: CLASS (P%), then CLASS (P%)" to out. A
 * file that cannot be read or holds no digit gets one error line on stderr
 * and the others go on. Returns how many failed, or -1 when a stop signal
 * came (checked between files; those read before it are still classified
 * and printed). The static shapes run the images through the evaluation
 * step, a test set's worth (SNN_TEST_COUNT) at a time. */
int snn_predict_images(snn_model *m, int digit_width, const char *const *models, int members,
                       const char *const *paths, int count, FILE *out);

#endif
