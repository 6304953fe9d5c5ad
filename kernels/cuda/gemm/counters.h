/* The path counters: how many GEMMs each path has run, bumped by the dispatch (kernels/cuda/gemm.cu) and
 * read by the tests and benchmarks through kernels/cuda/gemm_path.h (gemm/counters.cu). */
#ifndef SNN_GEMM_COUNTERS_H
#define SNN_GEMM_COUNTERS_H

#include "kernels/cuda/gemm_path.h"

#ifdef __cplusplus
extern "C" {
#endif

extern cuda_gemm_counts gemm_runs; /* per path: wgmma, mma.sync on twins, split-K; masks drawn ahead */
extern int gemm_split_last;        /* the slices of the last GEMM that split */

#ifdef __cplusplus
}
#endif
#endif
