/* The four standard MNIST-format files of one directory, loaded as bytes. */
#ifndef SNN_DATASET_H
#define SNN_DATASET_H

#include <stddef.h>
#include <stdint.h>

#define SNN_TRAIN_IMAGES_FILE "train-images-idx3-ubyte"
#define SNN_TRAIN_LABELS_FILE "train-labels-idx1-ubyte"
#define SNN_TEST_IMAGES_FILE "t10k-images-idx3-ubyte"
#define SNN_TEST_LABELS_FILE "t10k-labels-idx1-ubyte"

/* Whether dir holds the four files (raw or .gz): 0, or -1 with a message in err saying which is missing
 * and what to run. Cheap: for a check before any other work. */
int snn_dataset_find(const char *dir, char *err, size_t errlen);

/* Loads SNN_TRAIN_COUNT training and SNN_TEST_COUNT test images
 * (SNN_IMAGE_ROWS x SNN_IMAGE_COLS bytes each) and their labels from dir,
 * each file raw or with .gz appended. Returns 0, or -1 with a one-line
 * message in err naming the file and what is wrong with it. */
int snn_dataset_load(const char *dir, uint8_t *train_images, uint8_t *train_labels, uint8_t *test_images,
                     uint8_t *test_labels, char *err, size_t errlen);

#endif
