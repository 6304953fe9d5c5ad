/* The path counters (gemm/counters.h), and what kernels/cuda/gemm_path.h and gemm_split_k.h say of them. */
#include "kernels/cuda/gemm/counters.h"
#include "kernels/cuda/gemm_split_k.h"

cuda_gemm_counts gemm_runs;
int gemm_split_last;

extern "C" cuda_gemm_counts cuda_gemm_counts_now(void) { return gemm_runs; }

extern "C" cuda_gemm_path cuda_gemm_path_since(cuda_gemm_counts before)
{
    const cuda_gemm_counts now = cuda_gemm_counts_now();
    cuda_gemm_path p = {now.wgmma > before.wgmma, now.mma_twins > before.mma_twins, 0,
                        now.masks_ahead > before.masks_ahead};
    if (now.split_k > before.split_k)
        p.split_slices = gemm_split_last;
    return p;
}

extern "C" long cuda_gemm_split_k_count(void) { return gemm_runs.split_k; }
extern "C" int cuda_gemm_split_k_last_slices(void) { return gemm_split_last; }
