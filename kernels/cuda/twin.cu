/* The registry of 16-bit twins (kernels/cuda/twin.h). */
#include "kernels/cuda/twin.h"

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "snn_check.h"

#define TWIN_RANGES 8

static struct {
    const float *f32;
    SnnTwin *twin;
    long elems;
} ranges[TWIN_RANGES];
static int n_ranges;

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

__global__ void twin_refresh_kernel(SnnTwin *twin, const float *__restrict__ f32, long n)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        twin[i] = snn_twin_round(f32[i]);
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

extern "C" void cuda_twin_bind(const float *f32, void *twin, long elems)
{
    if (n_ranges == TWIN_RANGES)
        snn_die("more than %d 16-bit twin ranges bound", TWIN_RANGES);
    ranges[n_ranges++] = {f32, (SnnTwin *)twin, elems};
}

extern "C" void cuda_twin_unbind(const float *f32)
{
    for (int r = 0; r < n_ranges; r++)
        if (ranges[r].f32 == f32) {
            ranges[r] = ranges[--n_ranges];
            return;
        }
}

extern "C" void cuda_twin_unbind_all(void) { n_ranges = 0; }

SnnTwin *cuda_twin_of(const float *p)
{
    for (int r = 0; r < n_ranges; r++)
        if (p >= ranges[r].f32 && p < ranges[r].f32 + ranges[r].elems)
            return ranges[r].twin + (p - ranges[r].f32);
    return NULL;
}

extern "C" void cuda_twin_refresh(const float *f32, long elems)
{
    SnnTwin *twin = cuda_twin_of(f32);
    if (!twin || elems <= 0)
        return;
    if (!cuda_twin_of(f32 + elems - 1))
        snn_die("cuda_twin_refresh: %ld floats at %p run past their twin", elems, (const void *)f32);
    const long blocks = (elems + 255) / 256 < 4096 ? (elems + 255) / 256 : 4096;
    twin_refresh_kernel<<<blocks, 256, 0, snn_stream()>>>(twin, f32, elems);
    CUDA_CHECK_LAUNCH();
}
