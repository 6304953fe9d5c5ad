/* The GPU tests' tolerances, relative L2 (||gpu - host|| / ||host||), for the
 * configured GEMM precision (CONFIG_PRECISION_*); the host reference is FP32.
 *
 * SNN_TOL_GEMM, one GEMM role on data in [-1, 1], K up to 1000. Rounding an
 * operand to p mantissa bits (to nearest) errs by at most u = 2^-(p+1)
 * relative, about u/sqrt(3) on average, so a product by about u
 * sqrt(2/3); independent errors keep that ratio for the sum whatever K:
 *   FP32  1e-5  (FP32 fmaf in the host's k order; usually bitwise equal)
 *   TF32  5e-3  (p = 10: u = 4.9e-4, expected ~4e-4)
 *   FP16  5e-3  (p = 10, as TF32)
 *   BF16  2e-2  (p = 7:  u = 3.9e-3, expected ~3e-3)
 *   FP16_ACC16 3e-2: the running sum is rounded to FP16 at each mma.sync, K/8
 *         times; a random walk of such errors grows as sqrt(K) against a sum
 *         that grows as sqrt(K) too, relative ~u sqrt(K/8)/sqrt(3): ~3e-3 at
 *         K = 1000, ~6e-3 even if rounded at every product.
 * SNN_TOL_STEP_OP, each GEMM op of a training step (tests/gpu/test_step.c)
 * on the GPU's own inputs against the host op with the GPU's operand
 * rounding: the same rounded products summed in FP32 in another order.
 * Measured on an H100, every board and variant: at most 6.6e-6 (K = 8192),
 * so 1e-4 (FP32 SIMT: 1e-5, its GEMM tolerance); except where the GPU
 * rounds otherwise than the reference:
 *   FP16_ACC16 also rounds its running sums (see above): its GEMM tolerance
 *         (measured 9.1e-4);
 *   TF32 on wgmma (CONFIG_GEMM_WGMMA) truncates the operands it reads
 *         where the reference rounds them (kernels/cuda/gemm.cu), and which GEMMs
 *         wgmma takes is the kernel's choice: its GEMM tolerance (9.2e-4).
 * SNN_TOL_STEP_OP_REORDERED, a weight update's in FP32 where the sums are
 * not in k order (the grid-resident fused kernel: tests/gpu/test_fused.c):
 * the tensor cores' 1e-4. AdamW's first step turns a gradient near 0 into an
 * update near lr whichever its sign: FP32's 1e-5 failed on one layer (a
 * sum over 256 rows: 1.07e-5).
 * SNN_TOL_STEP, the logits and loss of a step run free against the FP32
 * host engine: one forward GEMM per layer, errors adding up as independent
 * ones do; twice the GEMM tolerance (measured at most 5.8e-3 in BF16, five
 * layers). The gradients run free pass back through ReLU masks that
 * rounding flips, an error of the precision, not of the kernels, that
 * grows with depth (BF16: 2.5e-2 one layer from the output, 1e-1 four
 * layers from it): test_step.c reports them without a bound.
 * SNN_TOL_STEP2, the second step's loss: its weights carry the first
 * update's rounding, so four times the GEMM tolerance. */
#ifndef SNN_TESTS_TOLERANCE_H
#define SNN_TESTS_TOLERANCE_H

#include "snn_config.h"

#if defined(CONFIG_PRECISION_TF32)
#define SNN_TOL_GEMM 5e-3
#elif defined(CONFIG_PRECISION_FP16)
#define SNN_TOL_GEMM 5e-3
#elif defined(CONFIG_PRECISION_FP16_ACC16)
#define SNN_TOL_GEMM 3e-2
#elif defined(CONFIG_PRECISION_BF16)
#define SNN_TOL_GEMM 2e-2
#else
#define SNN_TOL_GEMM 1e-5
#endif

#if defined(CONFIG_PRECISION_FP16_ACC16) || (defined(CONFIG_PRECISION_TF32) && defined(CONFIG_GEMM_WGMMA))
#define SNN_TOL_STEP_OP SNN_TOL_GEMM
#elif defined(CONFIG_GEMM_TENSOR_CORES)
#define SNN_TOL_STEP_OP 1e-4
#else
#define SNN_TOL_STEP_OP 1e-5
#endif
#define SNN_TOL_STEP_OP_REORDERED 1e-4
#ifdef CONFIG_GEMM_TENSOR_CORES
#define SNN_TOL_STEP (2 * SNN_TOL_GEMM)
#define SNN_TOL_STEP2 (4 * SNN_TOL_GEMM)
#else
#define SNN_TOL_STEP 1e-5
#define SNN_TOL_STEP2 1e-5
#endif

#endif
