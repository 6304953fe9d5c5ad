/* Everything derived from the generated config: dimensions, sizes, and the
 * compile-time checks Kconfig cannot express. Included everywhere instead of
 * generated/config.h itself. */
#ifndef SNN_CONFIG_H
#define SNN_CONFIG_H

#include <generated/config.h> /* <>: found in $(O)/include first, never beside this file */

#define SNN_INPUT_DIM 784 /* 28 x 28, fixed by the dataset */
#define SNN_IMAGE_ROWS 28
#define SNN_IMAGE_COLS 28
#define SNN_CLASSES 10
#define SNN_TRAIN_COUNT 60000 /* images in the training files */
#define SNN_TEST_COUNT 10000
/* The last SNN_VALID_COUNT training images are held out as the validation set; the first SNN_FIT_COUNT
 * are trained on. */
#define SNN_VALID_COUNT CONFIG_TRAIN_VALIDATION_SIZE
#define SNN_FIT_COUNT (SNN_TRAIN_COUNT - SNN_VALID_COUNT)

#define SNN_LAYERS (CONFIG_NN_HIDDEN_LAYERS + 1) /* Linear layers */
#define SNN_BATCH CONFIG_TRAIN_BATCH_SIZE
#define SNN_EVAL_BATCH CONFIG_EVAL_BATCH_SIZE
/* Data parallelism (arch/cuda/Kconfig DP): the processes a run trains on, and the rows of each step each
 * one trains on (its share of the batch: rows rank x SNN_LOCAL_BATCH onwards). */
#ifdef CONFIG_DP
#define SNN_DP_WORLD CONFIG_DP_WORLD_SIZE
#else
#define SNN_DP_WORLD 1
#endif
#define SNN_LOCAL_BATCH (SNN_BATCH / SNN_DP_WORLD)
#ifdef CONFIG_DP
#define SNN_DP_BUCKET_FLOATS ((long)CONFIG_DP_BUCKET_MB << 18) /* MiB of FP32 */
#endif
#ifdef CONFIG_DP_COMM_SMS
#define SNN_DP_COMM_SMS CONFIG_DP_COMM_SMS /* left to NCCL by the persistent GEMMs */
#else
#define SNN_DP_COMM_SMS 0
#endif
/* The layered step's activation gradients, taken in turn: three where a weight step runs beside the input
 * gradient below it (arch/cuda/Kconfig STEP_BESIDE), as it still reads its layer's while that one writes the
 * next. */
#ifdef CONFIG_STEP_BESIDE
#define SNN_GRAD_BUFFERS 3
#else
#define SNN_GRAD_BUFFERS 2
#endif
#ifdef CONFIG_DP_REDUCE_BF16
#define SNN_DP_REDUCE_NAME "BF16"
#else
#define SNN_DP_REDUCE_NAME "FP32"
#endif
#define SNN_STEPS_PER_EPOCH (SNN_FIT_COUNT / SNN_BATCH)
#define SNN_DROPPED_PER_EPOCH (SNN_FIT_COUNT % SNN_BATCH)
#define SNN_EVAL_STEPS (SNN_TEST_COUNT / SNN_EVAL_BATCH) /* the test set's */
#define SNN_VALID_STEPS (SNN_VALID_COUNT / SNN_EVAL_BATCH)
#define SNN_EVAL_STEPS_MAX SNN_MAX2(SNN_EVAL_STEPS, SNN_VALID_STEPS)
/* The training recipe (nn/Kconfig, kernels/optim.h). A decimal whose symbol is off (its dependency
 * unmet) has no _VALUE: it stands for the value that leaves the update as it is without it. */
#define SNN_LR ((float)CONFIG_TRAIN_LR_VALUE)
#ifdef CONFIG_TRAIN_MOMENTUM_VALUE
#define SNN_MOMENTUM ((float)CONFIG_TRAIN_MOMENTUM_VALUE)
#else
#define SNN_MOMENTUM 0.0f
#define CONFIG_TRAIN_MOMENTUM_NONZERO 0
#endif
#ifdef CONFIG_TRAIN_NESTEROV
#define SNN_NESTEROV 1
#else
#define SNN_NESTEROV 0
#endif
#ifdef CONFIG_TRAIN_OPTIMIZER_ADAMW /* the complements 1 - beta rounded once, from the decimal, as PyTorch's */
#define SNN_ADAM_BETA1 ((float)CONFIG_TRAIN_ADAM_BETA1_VALUE)
#define SNN_ADAM_BETA1C ((float)(1.0 - CONFIG_TRAIN_ADAM_BETA1_VALUE))
#define SNN_ADAM_BETA2 ((float)CONFIG_TRAIN_ADAM_BETA2_VALUE)
#define SNN_ADAM_BETA2C ((float)(1.0 - CONFIG_TRAIN_ADAM_BETA2_VALUE))
#define SNN_ADAM_EPS ((float)CONFIG_TRAIN_ADAM_EPS_VALUE)
#endif
#define SNN_WEIGHT_DECAY ((float)CONFIG_TRAIN_WEIGHT_DECAY_VALUE)
#define SNN_LABEL_SMOOTHING ((float)CONFIG_TRAIN_LABEL_SMOOTHING_VALUE)
/* Augmentation's largest translation in pixels; dropout's probability as the 24-bit threshold its draws
 * are compared with (kernels/noise.h) and the survivors' scale 1 / (1 - p). */
#define SNN_AUGMENT_SHIFT CONFIG_TRAIN_AUGMENT_SHIFT
/* Distortions (kernels/distort.h): the affine map's largest rotation (radians), scale change, shear factor
 * and translation (pixels); the elastic field's scale alpha and width sigma (pixels). Off: 0. */
#ifdef CONFIG_TRAIN_AUGMENT_AFFINE
#define SNN_AFFINE 1
#define SNN_AFFINE_ROTATE ((float)(CONFIG_TRAIN_AFFINE_ROTATE_VALUE * 0.017453292519943295))
#define SNN_AFFINE_SCALE ((float)CONFIG_TRAIN_AFFINE_SCALE_VALUE)
#define SNN_AFFINE_SHEAR ((float)CONFIG_TRAIN_AFFINE_SHEAR_VALUE)
#define SNN_AFFINE_TRANSLATE ((float)CONFIG_TRAIN_AFFINE_TRANSLATE_VALUE)
#else
#define SNN_AFFINE 0
#define SNN_AFFINE_ROTATE 0.0f
#define SNN_AFFINE_SCALE 0.0f
#define SNN_AFFINE_SHEAR 0.0f
#define SNN_AFFINE_TRANSLATE 0.0f
#endif
#ifdef CONFIG_TRAIN_AUGMENT_ELASTIC
#define SNN_ELASTIC 1
#define SNN_ELASTIC_ALPHA ((float)CONFIG_TRAIN_ELASTIC_ALPHA_VALUE)
#define SNN_ELASTIC_SIGMA ((float)CONFIG_TRAIN_ELASTIC_SIGMA_VALUE)
#define SNN_ELASTIC_RADIUS ((int)(4.0 * CONFIG_TRAIN_ELASTIC_SIGMA_VALUE + 0.5)) /* scipy's truncate=4 */
#else
#define SNN_ELASTIC 0
#define SNN_ELASTIC_ALPHA 0.0f
#define SNN_ELASTIC_SIGMA 1.0f
#define SNN_ELASTIC_RADIUS 0
#endif
#define SNN_DISTORTS (SNN_AFFINE || SNN_ELASTIC)
#ifdef CONFIG_TRAIN_DROPOUT_VALUE
#define SNN_DROPOUT (CONFIG_TRAIN_DROPOUT_NONZERO)
#define SNN_DROPOUT_THRESHOLD ((uint32_t)(CONFIG_TRAIN_DROPOUT_VALUE * 16777216.0 + 0.5))
#define SNN_DROPOUT_SCALE ((float)(1.0 / (1.0 - CONFIG_TRAIN_DROPOUT_VALUE)))
#else
#define SNN_DROPOUT 0
#define SNN_DROPOUT_THRESHOLD 0u
#define SNN_DROPOUT_SCALE 1.0f
#endif
#ifdef CONFIG_TRAIN_LR_WARMUP_STEPS
#define SNN_LR_WARMUP CONFIG_TRAIN_LR_WARMUP_STEPS
#else
#define SNN_LR_WARMUP 0
#endif

/* Hidden layer k's width (nn/Kconfig): NN_HIDDEN_WIDTH_k, or where that is 0 NN_HIDDEN_WIDTH; 0 where the
 * model has no layer k. */
#if CONFIG_NN_HIDDEN_LAYERS >= 1
#define SNN_WIDTH_1 (CONFIG_NN_HIDDEN_WIDTH_1 ? CONFIG_NN_HIDDEN_WIDTH_1 : CONFIG_NN_HIDDEN_WIDTH)
#else
#define SNN_WIDTH_1 0
#endif
#if CONFIG_NN_HIDDEN_LAYERS >= 2
#define SNN_WIDTH_2 (CONFIG_NN_HIDDEN_WIDTH_2 ? CONFIG_NN_HIDDEN_WIDTH_2 : CONFIG_NN_HIDDEN_WIDTH)
#else
#define SNN_WIDTH_2 0
#endif
#if CONFIG_NN_HIDDEN_LAYERS >= 3
#define SNN_WIDTH_3 (CONFIG_NN_HIDDEN_WIDTH_3 ? CONFIG_NN_HIDDEN_WIDTH_3 : CONFIG_NN_HIDDEN_WIDTH)
#else
#define SNN_WIDTH_3 0
#endif
#if CONFIG_NN_HIDDEN_LAYERS >= 4
#define SNN_WIDTH_4 (CONFIG_NN_HIDDEN_WIDTH_4 ? CONFIG_NN_HIDDEN_WIDTH_4 : CONFIG_NN_HIDDEN_WIDTH)
#else
#define SNN_WIDTH_4 0
#endif
#if CONFIG_NN_HIDDEN_LAYERS >= 5
#define SNN_WIDTH_5 (CONFIG_NN_HIDDEN_WIDTH_5 ? CONFIG_NN_HIDDEN_WIDTH_5 : CONFIG_NN_HIDDEN_WIDTH)
#else
#define SNN_WIDTH_5 0
#endif
#if CONFIG_NN_HIDDEN_LAYERS >= 6
#define SNN_WIDTH_6 (CONFIG_NN_HIDDEN_WIDTH_6 ? CONFIG_NN_HIDDEN_WIDTH_6 : CONFIG_NN_HIDDEN_WIDTH)
#else
#define SNN_WIDTH_6 0
#endif
#if CONFIG_NN_HIDDEN_LAYERS >= 7
#define SNN_WIDTH_7 (CONFIG_NN_HIDDEN_WIDTH_7 ? CONFIG_NN_HIDDEN_WIDTH_7 : CONFIG_NN_HIDDEN_WIDTH)
#else
#define SNN_WIDTH_7 0
#endif
#if CONFIG_NN_HIDDEN_LAYERS >= 8
#define SNN_WIDTH_8 (CONFIG_NN_HIDDEN_WIDTH_8 ? CONFIG_NN_HIDDEN_WIDTH_8 : CONFIG_NN_HIDDEN_WIDTH)
#else
#define SNN_WIDTH_8 0
#endif
#define SNN_MAX2(a, b) ((a) > (b) ? (a) : (b))
/* The widest hidden layer (0: none); whether every hidden layer has the same width, SNN_HIDDEN, the one
 * width the resident fused kernels split across blocks (0 where the widths differ or there are none). */
#define SNN_HIDDEN_MAX                                                                                     \
    SNN_MAX2(SNN_MAX2(SNN_MAX2(SNN_WIDTH_1, SNN_WIDTH_2), SNN_MAX2(SNN_WIDTH_3, SNN_WIDTH_4)),            \
             SNN_MAX2(SNN_MAX2(SNN_WIDTH_5, SNN_WIDTH_6), SNN_MAX2(SNN_WIDTH_7, SNN_WIDTH_8)))
#define SNN_WIDTH_IS(k, w) (SNN_WIDTH_##k == 0 || SNN_WIDTH_##k == (w))
#define SNN_WIDTHS_UNIFORM                                                                                 \
    (SNN_WIDTH_IS(2, SNN_WIDTH_1) && SNN_WIDTH_IS(3, SNN_WIDTH_1) && SNN_WIDTH_IS(4, SNN_WIDTH_1) &&         \
     SNN_WIDTH_IS(5, SNN_WIDTH_1) && SNN_WIDTH_IS(6, SNN_WIDTH_1) && SNN_WIDTH_IS(7, SNN_WIDTH_1) &&         \
     SNN_WIDTH_IS(8, SNN_WIDTH_1))
#define SNN_HIDDEN (SNN_WIDTHS_UNIFORM ? SNN_WIDTH_1 : 0)
/* Width of activation l: 0 is the input, 1 .. SNN_LAYERS - 1 the hidden layers', SNN_LAYERS the logits. With
 * one hidden width, two comparisons, as a kernel indexing layers at run time wants. */
#define SNN_DIM(l)                                                                                         \
    ((l) == 0            ? SNN_INPUT_DIM                                                                   \
     : (l) == SNN_LAYERS ? SNN_CLASSES                                                                     \
     : SNN_WIDTHS_UNIFORM ? SNN_WIDTH_1                                                                    \
     : (l) == 1          ? SNN_WIDTH_1                                                                     \
     : (l) == 2          ? SNN_WIDTH_2                                                                     \
     : (l) == 3          ? SNN_WIDTH_3                                                                     \
     : (l) == 4          ? SNN_WIDTH_4                                                                     \
     : (l) == 5          ? SNN_WIDTH_5                                                                     \
     : (l) == 6          ? SNN_WIDTH_6                                                                     \
     : (l) == 7          ? SNN_WIDTH_7                                                                     \
                         : SNN_WIDTH_8)
/* Whether every hidden width is a multiple of m (none: true). */
#define SNN_WIDTHS_MULTIPLE_OF(m)                                                                          \
    (SNN_WIDTH_1 % (m) == 0 && SNN_WIDTH_2 % (m) == 0 && SNN_WIDTH_3 % (m) == 0 && SNN_WIDTH_4 % (m) == 0 && \
     SNN_WIDTH_5 % (m) == 0 && SNN_WIDTH_6 % (m) == 0 && SNN_WIDTH_7 % (m) == 0 && SNN_WIDTH_8 % (m) == 0)
#define SNN_MAX_DIM SNN_MAX2(SNN_MAX2(SNN_INPUT_DIM, SNN_CLASSES), SNN_HIDDEN_MAX)
#define SNN_MAX_ROWS SNN_MAX2(SNN_BATCH, SNN_EVAL_BATCH)

/* Layer l's parameters: weights [out][in] as nn.Linear, then bias [out] (0 past the last layer). */
#define SNN_LAYER_PARAMS(l) ((l) < SNN_LAYERS ? (long)SNN_DIM((l) + 1) * SNN_DIM(l) + SNN_DIM((l) + 1) : 0L)
#define SNN_PARAMS                                                                                         \
    (SNN_LAYER_PARAMS(0) + SNN_LAYER_PARAMS(1) + SNN_LAYER_PARAMS(2) + SNN_LAYER_PARAMS(3) +                \
     SNN_LAYER_PARAMS(4) + SNN_LAYER_PARAMS(5) + SNN_LAYER_PARAMS(6) + SNN_LAYER_PARAMS(7) +                \
     SNN_LAYER_PARAMS(8))
/* Activation floats: the input batch and every layer's output. */
#define SNN_ACT_WIDTHS                                                                                     \
    ((long)SNN_INPUT_DIM + SNN_WIDTH_1 + SNN_WIDTH_2 + SNN_WIDTH_3 + SNN_WIDTH_4 + SNN_WIDTH_5 + SNN_WIDTH_6 + \
     SNN_WIDTH_7 + SNN_WIDTH_8 + SNN_CLASSES)

#if defined(CONFIG_DATASET_MNIST)
#define SNN_DATASET_NAME "MNIST"
#define SNN_DATASET_SLUG "mnist" /* its directory under CONFIG_DATA_ROOT */
#define SNN_PIXEL_MEAN 0.1307f /* of the training images, as torchvision's examples use */
#define SNN_PIXEL_STD 0.3081f
#else
#define SNN_DATASET_NAME "Fashion-MNIST"
#define SNN_DATASET_SLUG "fashion-mnist"
#define SNN_PIXEL_MEAN 0.2860f
#define SNN_PIXEL_STD 0.3530f
#endif
/* The configured dataset's directory; a relative CONFIG_DATA_ROOT is taken from the source tree, where
 * 'make data' fetches (tools/make/kconfig.py). Configured text: print it as data, never as a format. */
#define SNN_DATA_DIR CONFIG_DATA_ROOT_ABSOLUTE "/" SNN_DATASET_SLUG

#if defined(CONFIG_TARGET_HOST)
#define SNN_TARGET_NAME "host"
#elif defined(CONFIG_TARGET_SM75)
#define SNN_TARGET_NAME "sm75"
#define SNN_TARGET_CC 75
#elif defined(CONFIG_TARGET_SM80)
#define SNN_TARGET_NAME "sm80"
#define SNN_TARGET_CC 80
#elif defined(CONFIG_TARGET_SM90)
#define SNN_TARGET_NAME "sm90"
#define SNN_TARGET_CC 90
#endif

/* The GEMMs' precision (CONFIG_PRECISION_*), as tools/torch_parity.py names it. */
#if defined(CONFIG_PRECISION_TF32)
#define SNN_PRECISION_NAME "tf32"
#elif defined(CONFIG_PRECISION_FP16)
#define SNN_PRECISION_NAME "fp16"
#elif defined(CONFIG_PRECISION_FP16_ACC16)
#define SNN_PRECISION_NAME "fp16_acc16"
#elif defined(CONFIG_PRECISION_BF16)
#define SNN_PRECISION_NAME "bf16"
#else
#define SNN_PRECISION_NAME "fp32"
#endif

#define SNN_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#ifdef __cplusplus
#undef SNN_STATIC_ASSERT
#define SNN_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#endif

SNN_STATIC_ASSERT(SNN_TEST_COUNT % SNN_EVAL_BATCH == 0,
                  "CONFIG_EVAL_BATCH_SIZE must divide the 10000 test images");
SNN_STATIC_ASSERT(SNN_VALID_COUNT % SNN_EVAL_BATCH == 0,
                  "CONFIG_EVAL_BATCH_SIZE must divide CONFIG_TRAIN_VALIDATION_SIZE");
SNN_STATIC_ASSERT(
    SNN_BATCH <= SNN_FIT_COUNT, /* tools/make/kconfig.py refuses it first */
    "CONFIG_TRAIN_BATCH_SIZE exceeds the training images left after CONFIG_TRAIN_VALIDATION_SIZE");
SNN_STATIC_ASSERT(
    1LL * SNN_MAX_ROWS * SNN_MAX_DIM <= 1LL << 28, /* the ranges see to it */
    "a batch of the widest layer exceeds 2^28 elements, which the kernels index with 32-bit ints");
SNN_STATIC_ASSERT(SNN_BATCH % SNN_DP_WORLD == 0,
                  "CONFIG_TRAIN_BATCH_SIZE must be a multiple of CONFIG_DP_WORLD_SIZE: each GPU trains an equal share");

#endif
