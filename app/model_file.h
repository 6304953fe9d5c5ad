/* Models in safetensors files (data/safetensors.h). The weights alone
 * (--save, --load) are named and shaped as the PyTorch module the metadata
 * names: layer l is the Linear at index 2l of nn.Sequential(Linear, ReLU,
 * ..., Linear), "0.weight" [out, in], "0.bias" [out], "2.weight", ... A
 * checkpoint (--checkpoint, --resume) adds what training needs to go on as
 * if it had never stopped: the momentum, the generator, the epoch's order,
 * its position and the figures of its steps so far. */
#ifndef SNN_MODEL_FILE_H
#define SNN_MODEL_FILE_H

#include <stdint.h>

#include "app/outfile.h"
#include "nn/model.h"

/* Where a run is: epoch (from 1) has had step of steps_per_epoch steps. */
typedef struct {
    int epoch, step, steps_per_epoch;
    int seed;         /* the run's: CONFIG_TRAIN_SEED or mnist --seed */
    int digit_width;  /* mnist --digit-width: the digits' width it trains at; 0: as the dataset's */
    snn_rng rng;      /* after the epoch's order was drawn */
    int32_t *order;   /* SNN_FIT_COUNT: the epoch's sample order */
    float *losses;    /* the epoch's first `step` step losses ... */
    int32_t *correct; /* ... and correct counts */
} snn_progress;

typedef enum { SNN_FILE_WEIGHTS, SNN_FILE_CHECKPOINT } snn_file_kind;

/* Writes the model (and for a checkpoint the progress p) to out and commits
 * it; or dies saying why. */
void snn_model_file_save(snn_out *out, const snn_model *m, const snn_progress *p, snn_file_kind kind);

/* Loads path into m: its weights (SNN_FILE_WEIGHTS: a weights file or a
 * checkpoint; the momentum is left as it is), or a checkpoint's whole state
 * and its progress into p (whose arrays the caller owns). A file of another
 * shape, dataset or (for a checkpoint) optimizer or batch is refused with
 * one message naming what differs. Prints a note where a checkpoint came
 * from another target or precision (it goes on, but not bitwise). Returns
 * the digit width the model was trained at (metadata digit_width; 0 where
 * the digits were the dataset's own), which its inputs must be given. */
int snn_model_file_load(const char *path, snn_model *m, snn_progress *p, snn_file_kind kind);

/* The validation split path's weights were trained with (its metadata's
 * validation_size: the last N training images held out), into held_out;
 * 0 when the file names none. A file that cannot be read is refused as
 * snn_model_file_load refuses it. */
int snn_model_file_held_out(const char *path, char *held_out, int len);

#endif
