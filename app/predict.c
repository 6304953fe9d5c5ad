#include "app/predict.h"

#include <stdlib.h>
#include <string.h>

#include "app/committee.h"
#include "app/evaluate.h"
#include "app/signals.h"
#include "arch/runtime.h"
#include "data/digit.h"
#include "data/image.h"
#include "nn/train.h"
#include "snn_check.h"

SNN_STATIC_ASSERT(SNN_DIGIT_PIXELS == SNN_INPUT_DIM, "a digit is the model's input");

/* Makes path the model's input; 0, or -1 after one error line. */
static int read_digit(const char *path, uint8_t *pixels)
{
    char err[512], why[480];
    snn_gray_image img;
    int rc = snn_image_load(path, &img, err, sizeof(err));
    if (rc == 0) {
        if ((rc = snn_digit_from_image(&img, pixels, why, sizeof(why))))
            snprintf(err, sizeof(err), "%s: %s", path, why); /* the recipe knows no file name */
        snn_image_free(&img);
    }
    if (rc) {
        fflush(stdout);
        fprintf(stderr, "mnist: error: %s\n", err);
    }
    return rc;
}

static void print_prediction(FILE *out, const char *path, const float *logits)
{
    const int first = snn_predicted_class(logits);
    double p[SNN_CLASSES];
    snn_class_probabilities(logits, p);
    int second = first ? 0 : 1;
    for (int c = 0; c < SNN_CLASSES; c++)
        if (c != first && p[c] > p[second])
            second = c;
    fprintf(out, "%s: %d (%.2f%%), then %d (%.2f%%)\n", path, first, 100 * p[first], second, 100 * p[second]);
}

int snn_predict_images(snn_model *m, int digit_width, const char *const *models, int members,
                       const char *const *paths, int count, FILE *out)
{
    const size_t image_bytes = (size_t)SNN_TEST_COUNT * SNN_INPUT_DIM;
    uint8_t *images = calloc(image_bytes + SNN_TEST_COUNT, 1); /* the labels after: zeros, any class will do */
    int *ok = snn_xmalloc(SNN_TEST_COUNT * sizeof(int), "image verdicts");
    float *logits = snn_xmalloc((size_t)SNN_TEST_COUNT * SNN_CLASSES * sizeof(float), "image logits");
    SNN_CHECK_SYS(images, "allocating the images to classify");
    snn_rt_upload(m->test_labels, images + image_bytes, SNN_TEST_COUNT);
    int failed = 0, stopped = 0;
    for (int from = 0; from < count && !stopped; from += SNN_TEST_COUNT) {
        int n = count - from < SNN_TEST_COUNT ? count - from : SNN_TEST_COUNT, read = 0;
        memset(images, 0, image_bytes);
        /* A stop classifies what was read before it: no result already made is lost. */
        for (; read < n && !(stopped = snn_stop_signal() != 0); read++) {
            ok[read] = read_digit(paths[from + read], images + (size_t)read * SNN_INPUT_DIM) == 0;
            failed += !ok[read];
        }
        stopped = stopped || snn_stop_signal(); /* one that came during the last file's read */
        if (members > 1) {
            snn_committee_logits(m, SNN_SET_TEST, images, models, members, logits, NULL, NULL, NULL);
        } else {
            snn_upload_set(m, SNN_SET_TEST, images, digit_width);
            snn_evaluate_logits(m, SNN_SET_TEST, logits);
        }
        for (int i = 0; i < read; i++)
            if (ok[i])
                print_prediction(out, paths[from + i], logits + (size_t)i * SNN_CLASSES);
        fflush(out);
    }
    free(images);
    free(ok);
    free(logits);
    return stopped ? -1 : failed;
}
