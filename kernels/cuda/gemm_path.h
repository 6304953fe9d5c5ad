/* Which kernel the engine's GEMMs took, for the tests and benchmarks to say
 * so: a snapshot of the counters before a call, and after it the path. */
#ifndef SNN_GEMM_PATH_H
#define SNN_GEMM_PATH_H

#ifdef __cplusplus
extern "C" {
#endif

/* GEMMs run so far on each path (0 for a path the build lacks), and forward
 * GEMMs whose dropout mask was drawn beside the work before them, the GEMM
 * before or the gather (kernels/cuda/gemm_dropout.h). */
typedef struct {
    long wgmma, mma_twins, split_k, masks_ahead;
} cuda_gemm_counts;

/* What the GEMMs since a snapshot ran on: wgmma; mma.sync on the 16-bit
 * twins (neither: mma.sync from the FP32 tensors, or in an FP32 build the
 * SIMT kernel); the slices of the last that split its k range (0: none);
 * whether one read a dropout mask drawn beside the work before it. */
typedef struct {
    int wgmma, mma_twins, split_slices, mask_ahead;
} cuda_gemm_path;

cuda_gemm_counts cuda_gemm_counts_now(void);
cuda_gemm_path cuda_gemm_path_since(cuda_gemm_counts before);

#ifdef __cplusplus
}
#endif
#endif
