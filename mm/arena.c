#include "mm/arena.h"

#include <stdint.h>

#include "kernels/cuda/gemm_split_k.h"
#include "mm/mm.h"

#define F sizeof(float)

#if SNN_MM_PER_STEP
#define ARENA_ACT_WIDTHS SNN_INPUT_DIM /* the input batch only */
#define ARENA_GRAD_BYTES 0
#else
#define ARENA_ACT_WIDTHS SNN_ACT_WIDTHS
#define ARENA_GRAD_BYTES (2 * (size_t)SNN_BATCH * SNN_GRAD_DIM * F)
#endif
#ifdef CONFIG_GEMM_TWINS
#define ARENA_TWIN_BYTES                                                                                   \
    (2 * (SNN_TWIN_PAD(SNN_PARAMS) + SNN_TWIN_PAD((size_t)SNN_MAX_ROWS * ARENA_ACT_WIDTHS) +               \
          SNN_TWIN_PAD(ARENA_GRAD_BYTES / F)))
#else
#define ARENA_TWIN_BYTES 0
#endif
/* Floats per row of the layer outputs act[1..L]; their gradients take as many. */
#define OUTPUT_WIDTHS (SNN_ACT_WIDTHS - SNN_INPUT_DIM)

/* The size table: constant expressions of the config. */
static const snn_plan_entry size_table[SNN_R_COUNT] = {
    [SNN_R_PARAMS] = {"parameters", SNN_PARAMS * F, 0},
    [SNN_R_MOMENTUM] = {"momentum", SNN_PARAMS * F, 0},
    [SNN_R_ACTIVATIONS] = {SNN_MM_PER_STEP ? "input batch" : "activations",
                           (size_t)SNN_MAX_ROWS * ARENA_ACT_WIDTHS * F, 0},
    [SNN_R_ACT_GRADS] = {"activation gradients", ARENA_GRAD_BYTES, 0},
    [SNN_R_BATCH_LABELS] = {"batch labels", SNN_MAX_ROWS, 0},
    [SNN_R_TRAIN_IMAGES] = {"train images (bytes)", (size_t)SNN_TRAIN_COUNT * SNN_INPUT_DIM, 0},
    [SNN_R_TRAIN_LABELS] = {"train labels", SNN_TRAIN_COUNT, 0},
    [SNN_R_TEST_IMAGES] = {"test images (bytes)", (size_t)SNN_TEST_COUNT * SNN_INPUT_DIM, 0},
    [SNN_R_TEST_LABELS] = {"test labels", SNN_TEST_COUNT, 0},
    [SNN_R_ORDER] = {"sample order", SNN_TRAIN_COUNT * sizeof(int32_t), 0},
    [SNN_R_STEP_STATS] = {"step statistics", SNN_STEP_STATS_BYTES, 0},
    [SNN_R_TWINS] = {"16-bit twins", ARENA_TWIN_BYTES, 0},
    [SNN_R_SPLIT_K] = {"split-K partial sums", SNN_SPLIT_K_FLOATS * F, 0},
};

void snn_plan_make(snn_plan *plan)
{
    size_t offset = 0;
    for (int r = 0; r < SNN_R_COUNT; r++) {
        plan->region[r] = size_table[r];
        plan->region[r].offset = offset;
        offset += (size_table[r].bytes + SNN_ARENA_ALIGN - 1) / SNN_ARENA_ALIGN * SNN_ARENA_ALIGN;
    }
    plan->total = offset;
}

void snn_plan_print(const snn_plan *plan, FILE *out)
{
    size_t sum = 0;
    int regions = 0;
    for (int r = 0; r < SNN_R_COUNT; r++)
        regions += plan->region[r].bytes > 0;
    fprintf(out, "memory plan: one allocation, %d regions\n", regions);
    for (int r = 0; r < SNN_R_COUNT; r++) {
        if (!plan->region[r].bytes)
            continue;
        fprintf(out, "  %-22s %14zu B\n", plan->region[r].name, plan->region[r].bytes);
        sum += plan->region[r].bytes;
    }
    fprintf(out, "  %-22s %14zu B\n", "alignment padding", plan->total - sum);
    fprintf(out, "  %-22s %14zu B (%.1f MiB)\n", "total", plan->total, plan->total / 1048576.0);
    if (SNN_MM_PER_STEP) {
        fprintf(out, "per-step tensors, allocated and freed each step by the %s strategy:\n", SNN_MM_NAME);
        fprintf(out, "  %-22s %14zu B (layer outputs 1..%d and their gradients)\n", "a training step",
                2 * (size_t)SNN_BATCH * OUTPUT_WIDTHS * F, SNN_LAYERS);
        fprintf(out, "  %-22s %14zu B (layer outputs 1..%d)\n", "an evaluation step",
                (size_t)SNN_EVAL_BATCH * OUTPUT_WIDTHS * F, SNN_LAYERS);
    }
}
