/* test_idx_load DIR: loads the dataset from DIR; prints "loaded", or the
 * loader's message as the program would, and exits 1. Driven by test_idx.sh. */
#include "data/dataset.h"
#include "snn_check.h"
#include "snn_config.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    char err[1024];
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    uint8_t *train_images = snn_xmalloc((size_t)SNN_TRAIN_COUNT * SNN_INPUT_DIM, "training images");
    uint8_t *train_labels = snn_xmalloc(SNN_TRAIN_COUNT, "training labels");
    uint8_t *test_images = snn_xmalloc((size_t)SNN_TEST_COUNT * SNN_INPUT_DIM, "test images");
    uint8_t *test_labels = snn_xmalloc(SNN_TEST_COUNT, "test labels");
    if (snn_dataset_load(argv[1], train_images, train_labels, test_images, test_labels, err, sizeof err))
        snn_die("%s", err);
    puts("loaded");
    free(train_images);
    free(train_labels);
    free(test_images);
    free(test_labels);
    return 0;
}
