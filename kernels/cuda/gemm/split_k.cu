/* The split-K workspace (gemm/split_k.cuh), bound once at start-up through kernels/cuda/gemm_split_k.h. */
#include "kernels/cuda/gemm/split_k.cuh"

GemmSplitK gemm_split_k;

extern "C" void cuda_gemm_split_k_bind(float *ws, long elems)
{
    gemm_split_k.ws = ws;
    gemm_split_k.elems = ws ? elems : 0;
}
