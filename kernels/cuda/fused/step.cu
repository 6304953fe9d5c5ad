/* The fused training step's entry points (kernels/fused.h): each hands its launch to the first of the fused
 * kernels (fused/kernel.h) that fits this build's model on this GPU, in the order of FUSED_KERNELS: the
 * model in one cluster, the model across the grid, GEMM tiles across the grid. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/fused/kernel.h"
#include "kernels/fused.h"

static const FusedKernel *const FUSED_KERNELS[] = {
#ifdef CONFIG_FUSED_CLUSTER
    &fused_cluster,
#endif
#ifdef CONFIG_FUSED_GRID_RESIDENT
    &fused_grid_resident,
#endif
    &fused_grid_wide,
};

/* The kernels this build leaves out, as the describe line names them. */
static const char FUSED_LEFT_OUT[] = ""
#ifndef CONFIG_FUSED_CLUSTER
                                     "; not cluster: CONFIG_FUSED_CLUSTER is off"
#endif
#ifndef CONFIG_FUSED_GRID_RESIDENT
                                     "; not grid-resident: CONFIG_FUSED_GRID_RESIDENT is off"
#endif
    ;

/* The kernel that trains; where `skipped` is given, the ones before it and why each does not fit, as
 * "; not <name>: <why>" each, appended to skipped[len]. */
static const FusedKernel &fused_kernel(char *skipped, int len)
{
    int at = skipped ? (int)strlen(skipped) : 0;
    for (const FusedKernel *k : FUSED_KERNELS) {
        char why[160];
        if (k->fits(why, sizeof why))
            return *k;
        if (skipped && at < len)
            at += snprintf(skipped + at, len - at, "; not %s: %s", k->name, why);
    }
    return fused_grid_wide; /* never reached: the grid-wide kernel fits every model */
}

void fused_describe_resident(char *buf, int len, const char *grid, int blocks, int threads, int smem,
                             int units, int syncs, const char *sync)
{
    snprintf(buf, len,
             "%s%d blocks of %d threads, the model resident in %d KB of shared memory each (%d units of each "
             "hidden layer a block), %d %s%s per step",
             grid, blocks, threads, (smem + 1023) / 1024, units, syncs, sync, syncs == 1 ? "" : "s");
}

extern "C" void cuda_fused_train(const snn_fused_net *net, int first, int last)
{
    if (first < last)
        fused_kernel(nullptr, 0).train(*net, first, last);
}

extern "C" void cuda_fused_evaluate(const snn_fused_net *net, const uint8_t *images, const uint8_t *labels,
                                    int steps)
{
    fused_grid_wide_evaluate(*net, images, labels, steps);
}

extern "C" const char *cuda_fused_kernel_name(void) { return fused_kernel(nullptr, 0).name; }

extern "C" void cuda_fused_describe(char *buf, int len)
{
    char skipped[480];
    snprintf(skipped, sizeof skipped, "%s", FUSED_LEFT_OUT);
    const FusedKernel &k = fused_kernel(skipped, sizeof skipped);
    const int at = snprintf(buf, len, "the %s kernel, ", k.name);
    if (at < len)
        k.describe(buf + at, len - at);
    const size_t used = strlen(buf);
    if ((int)used < len) /* the kernels left out of the build matter where the last resort trains */
        snprintf(buf + used, len - used, "%s",
                 &k == &fused_grid_wide ? skipped : skipped + strlen(FUSED_LEFT_OUT));
}
