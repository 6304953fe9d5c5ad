/* Hopper (sm_90) TMA: 2-D tile loads from global to shared memory
 * (cp.async.bulk.tensor) described by a tensor map, completing on an
 * mbarrier. The tensor map is made on the host (arch/sm90/tensor_map.cu) and
 * passed to the kernel as a __grid_constant__ parameter. */
#ifndef SNN_SM90_TMA_CUH
#define SNN_SM90_TMA_CUH

#include <stdint.h>

#include <cuda.h>

#include "arch/sm90/mbarrier.cuh"

/* Box (c0, c1) of `map` (c0 the contiguous coordinate, in elements) into dst;
 * its bytes count towards bar's expected transaction. Out-of-bounds elements
 * are zero-filled. */
static __device__ __forceinline__ void sm90_tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1,
                                                        uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(sm90_smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(sm90_smem_addr(bar))
                 : "memory");
}

/* Host: a tensor map over a row-major matrix of `elem_bytes`-byte elements
 * (2: FP16/BF16, 4: FP32; rows x cols, row stride ld elements), loaded in
 * boxes of box_rows x box_cols with the 128-byte swizzle (box_cols x
 * elem_bytes must be 128). Dies with a message naming `what` when the
 * matrix cannot be described (alignment, strides). */
void sm90_tensor_map(CUtensorMap *map, const void *base, int elem_bytes, long rows, long cols, long ld, int box_rows,
                     int box_cols, const char *what);

#endif
