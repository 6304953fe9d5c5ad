/* The GEMM entry: the three roles of a linear layer (kernels/ops_proto.h) and the weight gradient alone
 * (cuda_linear_backward_weight), each C[m][n] = sum_k A(m,k) B(n,k) through the role's epilogue, one
 * translation unit each (they compile side by side), all through one dispatch (gemm/run.cuh):
 *
 *   cuda_linear_forward                          gemm/forward.cu
 *   cuda_linear_backward_input                   gemm/backward_input.cu
 *   cuda_linear_backward_weight_update,
 *   cuda_linear_backward_weight,
 *   cuda_linear_backward_weight_bf16             gemm/weight.cu
 *
 * and here what the roles share at run time: the workspace (split-K sums, dropout's masks) and the numerics'
 * name. */
#include "kernels/cuda/gemm_dropout.h"
#include "kernels/cuda/gemm_split_k.h"
#include "kernels/ops.h"

/* The workspace (nn/model.c): the split-K partial sums, then dropout's two masks. */
extern "C" void cuda_bind_workspace(float *workspace, long floats)
{
    const long split_k = workspace ? (long)SNN_SPLIT_K_FLOATS * SNN_SPLIT_K_STREAMS : 0;
#ifdef CONFIG_GEMM_TENSOR_CORES
    cuda_gemm_split_k_bind(split_k ? workspace : NULL, split_k / SNN_SPLIT_K_STREAMS);
#endif
    cuda_gemm_dropout_bind(workspace && floats > split_k ? (uint8_t *)(workspace + split_k) : NULL,
                           (floats - split_k) * (long)sizeof(float));
}

/* A TF32 build on wgmma truncates the operands of the forward GEMMs that gemm_run gives wgmma and rounds the
 * others': one name only where it gives it every forward GEMM (thresholds off, and every layer's input in
 * 16-byte rows, what gemm_wgmma_operand asks). */
extern "C" const char *cuda_gemm_numerics(void)
{
#if defined(CONFIG_PRECISION_TF32) && defined(CONFIG_GEMM_WGMMA)
    return CONFIG_GEMM_WGMMA_MIN_K <= 1 && CONFIG_GEMM_WGMMA_MIN_MFLOP == 0 && SNN_WIDTHS_MULTIPLE_OF(4) ? "tf32_wgmma"
                                                                                                   : NULL;
#else
    return SNN_PRECISION_NAME;
#endif
}
