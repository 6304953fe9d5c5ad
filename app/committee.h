/* A committee of saved models of this build's shape (mnist --load A --load B ... --eval | --predict): each
 * member's logits on the same images, its probabilities (a softmax, in double) summed over the members; the
 * committee's class is the first arg-max of their mean. */
#ifndef SNN_COMMITTEE_H
#define SNN_COMMITTEE_H

#include <stdint.h>

#include "nn/train.h"

/* The set's images as read (snn_set_count(set) digits, on the host), each scaled to digit_width
 * (data/digit.h; 0: as they are), uploaded to where the set's evaluation reads them: the inputs a model
 * trained at that width is given. */
void snn_upload_set(snn_model *m, snn_set set, const uint8_t *images, int digit_width);

/* The members given in paths (count of them) loaded one after another into m, each scoring the images of set
 * (images: the set's as read; each member is given them at the digit width it was trained at); into logits
 * (snn_set_count(set) x SNN_CLASSES) the committee's: the log of the members' mean probability, whose arg-max
 * is the committee's class and whose softmax gives the mean back. With labels, member i's score into
 * scores[i] (the device's, as --eval of it alone) and the committee's returned: the mean over the images of
 * -log(mean probability of the label), and its accuracy; with widths, member i's digit width into widths[i].
 * Every member is scored: a stop signal is the caller's to check after (--predict classifies what it has read
 * with the whole committee). */
snn_score snn_committee_logits(snn_model *m, snn_set set, const uint8_t *images, const char *const *paths,
                               int count, float *logits, const uint8_t *labels, snn_score *scores,
                               int *widths);

#endif
