/* Host side of TMA: tensor maps encoded through the driver's
 * cuTensorMapEncodeTiled, fetched from the runtime (no -lcuda). The
 * elements are moved as 16- or 32-bit words, whatever their type: TMA
 * converts nothing. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "arch/cuda/check.h"
#include "arch/sm90/tma.cuh"
#include "snn_check.h"

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled(void)
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn;
    if (!fn) {
        cudaDriverEntryPointQueryResult found;
        CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&fn, 12000, cudaEnableDefault,
                                                    &found));
        if (found != cudaDriverEntryPointSuccess || !fn)
            snn_die("the CUDA driver has no cuTensorMapEncodeTiled (TMA): update the driver (CUDA 12 or later)");
    }
    return fn;
}

void sm90_tensor_map(CUtensorMap *map, const void *base, int elem_bytes, long rows, long cols, long ld, int box_rows,
                     int box_cols, const char *what)
{
    if ((elem_bytes != 2 && elem_bytes != 4) || box_cols * elem_bytes != 128)
        snn_die("%s: a TMA box row must be 128 bytes of 2- or 4-byte elements (%d of %d bytes)", what, box_cols,
                elem_bytes);
    if (((uintptr_t)base & 15) || (ld * elem_bytes) % 16)
        snn_die("%s: TMA needs a 16-byte aligned base and a row stride of a multiple of 16 bytes "
                "(base %p, stride %ld elements of %d bytes)", what, base, ld, elem_bytes);
    if (rows < 1 || cols < 1 || cols > ld)
        snn_die("%s: a %ld x %ld matrix with row stride %ld cannot be described to TMA", what, rows, cols, ld);
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)ld * elem_bytes};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    const cuuint32_t unit[2] = {1, 1};
    const CUtensorMapDataType type = elem_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32 : CU_TENSOR_MAP_DATA_TYPE_UINT16;
    const CUresult r = encode_tiled()(map, type, 2, (void *)base, dims, strides, box, unit,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        snn_die("%s: cuTensorMapEncodeTiled failed (CUresult %d) for %ld x %ld, stride %ld, box %d x %d", what,
                (int)r, rows, cols, ld, box_rows, box_cols);
}
