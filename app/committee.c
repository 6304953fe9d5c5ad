#include "app/committee.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/evaluate.h"
#include "app/model_file.h"
#include "arch/runtime.h"
#include "data/digit.h"
#include "snn_check.h"
#include "snn_config.h"

/* Adds each row's softmax of logits (rows x SNN_CLASSES) to sum. */
static void add_probabilities(double *sum, const float *logits, int rows)
{
    for (int i = 0; i < rows; i++) {
        double p[SNN_CLASSES];
        snn_class_probabilities(logits + (size_t)i * SNN_CLASSES, p);
        for (int c = 0; c < SNN_CLASSES; c++)
            sum[(size_t)i * SNN_CLASSES + c] += p[c];
    }
}

void snn_upload_set(snn_model *m, snn_set set, const uint8_t *images, int digit_width)
{
    const size_t bytes = (size_t)snn_set_count(set) * SNN_INPUT_DIM;
    uint8_t *digits = snn_xmalloc(bytes + 1, "the set's digits");
    memcpy(digits, images, bytes);
    if (digit_width)
        snn_digits_set_width(digits, (size_t)snn_set_count(set), digit_width);
    snn_rt_upload((void *)(set == SNN_SET_VALID ? m->valid.images : m->test.images), digits, bytes);
    snn_rt_sync();
    free(digits);
}

snn_score snn_committee_logits(snn_model *m, snn_set set, const uint8_t *images, const char *const *paths,
                               int count, float *logits, const uint8_t *labels, snn_score *scores,
                               int *widths)
{
    const int rows = snn_set_count(set);
    const size_t n = (size_t)rows * SNN_CLASSES;
    double *sum = calloc(n, sizeof(double));
    SNN_CHECK_SYS(sum, "allocating the committee's probabilities");
    for (int i = 0; i < count; i++) {
        const int width = snn_model_file_load(paths[i], m, NULL, SNN_FILE_WEIGHTS);
        if (widths)
            widths[i] = width;
        snn_upload_set(m, set, images, width);
        const snn_score s = snn_evaluate_logits(m, set, logits);
        if (scores)
            scores[i] = s;
        add_probabilities(sum, logits, rows);
    }
    const int members = count;
    snn_score committee = {0.0, 0.0};
    int right = 0;
    for (int i = 0; i < rows; i++) {
        for (int c = 0; c < SNN_CLASSES; c++) /* the mean; a class no member gives any chance is -inf */
            logits[(size_t)i * SNN_CLASSES + c] = (float)log(sum[(size_t)i * SNN_CLASSES + c] / members);
        if (labels) {
            committee.loss -= log(sum[(size_t)i * SNN_CLASSES + labels[i]] / members);
            right += snn_predicted_class(logits + (size_t)i * SNN_CLASSES) == labels[i];
        }
    }
    free(sum);
    committee.loss /= rows;
    committee.accuracy = (double)right / rows;
    return committee;
}
