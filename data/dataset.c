#include "data/dataset.h"

#include "data/idx.h"
#include "snn_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define HINT "run 'make data' or pass --data DIR"
#define PATH_LEN 4096

struct split {
    const char *images, *labels; /* standard file names */
    uint32_t count;
};

static int check_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "no data directory %s (%s): " HINT, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "data directory %s is not a directory: " HINT, dir);
        return -1;
    }
    return 0;
}

/* dir/name if it exists, else dir/name.gz. */
static int find_file(const char *dir, const char *name, char *path, char *err, size_t errlen)
{
    struct stat st;
    int n = snprintf(path, PATH_LEN, "%s/%s", dir, name);
    if (n < 0 || n + 3 >= PATH_LEN) {
        snprintf(err, errlen, "data directory path too long: %.64s...", dir);
        return -1;
    }
    if (stat(path, &st) == 0)
        return 0;
    strcat(path, ".gz");
    if (stat(path, &st) == 0)
        return 0;
    snprintf(err, errlen, "no %s or %s.gz in %s: " HINT, name, name, dir);
    return -1;
}

int snn_dataset_find(const char *dir, char *err, size_t errlen)
{
    static const char *const names[] = {SNN_TRAIN_IMAGES_FILE, SNN_TRAIN_LABELS_FILE, SNN_TEST_IMAGES_FILE,
                                        SNN_TEST_LABELS_FILE};
    char path[PATH_LEN];
    if (check_dir(dir, err, errlen))
        return -1;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (find_file(dir, names[i], path, err, errlen))
            return -1;
    return 0;
}

static int load_split(const char *dir, const struct split *s, uint8_t *images, uint8_t *labels, char *err,
                      size_t errlen)
{
    char ipath[PATH_LEN], lpath[PATH_LEN];
    uint32_t icount, lcount;
    if (find_file(dir, s->images, ipath, err, errlen) || find_file(dir, s->labels, lpath, err, errlen))
        return -1;
    /* Both headers first, so that a disagreement is reported as one rather
     * than as a count that this build does not expect. */
    if (snn_idx_read_count(ipath, SNN_IDX_MAGIC_IMAGES, &icount, err, errlen) ||
        snn_idx_read_count(lpath, SNN_IDX_MAGIC_LABELS, &lcount, err, errlen))
        return -1;
    if (icount != lcount) {
        snprintf(err, errlen, "%s and %s disagree: images have %u, labels have %u", ipath, lpath,
                 (unsigned)icount, (unsigned)lcount);
        return -1;
    }
    if (snn_idx_read_images(ipath, images, s->count, SNN_IMAGE_ROWS, SNN_IMAGE_COLS, err, errlen))
        return -1;
    return snn_idx_read_labels(lpath, labels, s->count, SNN_CLASSES, err, errlen);
}

/* FNV-1a of each dataset's 10000 test labels: they tell MNIST from
 * Fashion-MNIST, whose files have the same names and shapes. */
static const struct {
    const char *name, *slug;
    uint64_t test_labels;
} known[] = {
    {"MNIST", "mnist", 0xfca1a11d31bd96bbull},
    {"Fashion-MNIST", "fashion-mnist", 0x25bdf8123f06fac3ull},
};

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Refuses the files of a known dataset other than the configured one;
 * unknown files (a user's own, the tests' synthetic ones) pass. */
static int check_dataset(const char *dir, const uint8_t *test_labels, char *err, size_t errlen)
{
    uint64_t h = fnv1a(test_labels, SNN_TEST_COUNT);
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (h == known[i].test_labels && strcmp(known[i].slug, SNN_DATASET_SLUG) != 0) {
            snprintf(err, errlen, "%s holds the %s files, but this build trains %s: run 'make data' to fetch "
                     "%s into %s, pass --data DIR, or choose the dataset with make menuconfig",
                     dir, known[i].name, SNN_DATASET_NAME, SNN_DATASET_NAME, SNN_DATA_DIR);
            return -1;
        }
    return 0;
}

int snn_dataset_load(const char *dir, uint8_t *train_images, uint8_t *train_labels, uint8_t *test_images,
                     uint8_t *test_labels, char *err, size_t errlen)
{
    static const struct split train = {SNN_TRAIN_IMAGES_FILE, SNN_TRAIN_LABELS_FILE, SNN_TRAIN_COUNT};
    static const struct split test = {SNN_TEST_IMAGES_FILE, SNN_TEST_LABELS_FILE, SNN_TEST_COUNT};
    if (check_dir(dir, err, errlen) || load_split(dir, &train, train_images, train_labels, err, errlen))
        return -1;
    if (load_split(dir, &test, test_images, test_labels, err, errlen))
        return -1;
    return check_dataset(dir, test_labels, err, errlen);
}
