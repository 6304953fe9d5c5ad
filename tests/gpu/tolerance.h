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
 * SNN_TOL_STEP, a whole training step (tests/gpu/test_step.c): a gradient
 * passes through up to four GEMMs (forward, the next layer's forward and
 * input gradient, its weight gradient), so twice the GEMM tolerance.
 * SNN_TOL_STEP2, the second step: its gradients come from weights that carry
 * the first update's rounding, through ReLU masks that it can flip; measured
 * 1.22e-2 for the layer-0 momentum with TF32 and FP16 (10-bit mantissas, so
 * the same rounding) on an H200, hence four times the GEMM tolerance. */
#ifndef SNN_TESTS_TOLERANCE_H
#define SNN_TESTS_TOLERANCE_H

#include "snn_config.h"

#if defined(CONFIG_PRECISION_TF32)
#define SNN_GEMM_PRECISION "tf32"
#define SNN_TOL_GEMM 5e-3
#elif defined(CONFIG_PRECISION_FP16)
#define SNN_GEMM_PRECISION "f16"
#define SNN_TOL_GEMM 5e-3
#elif defined(CONFIG_PRECISION_FP16_ACC16)
#define SNN_GEMM_PRECISION "f16acc16"
#define SNN_TOL_GEMM 3e-2
#elif defined(CONFIG_PRECISION_BF16)
#define SNN_GEMM_PRECISION "bf16"
#define SNN_TOL_GEMM 2e-2
#else
#define SNN_GEMM_PRECISION "f32"
#define SNN_TOL_GEMM 1e-5
#endif

#ifdef CONFIG_GEMM_TENSOR_CORES
#define SNN_TOL_STEP (2 * SNN_TOL_GEMM)
#define SNN_TOL_STEP2 (4 * SNN_TOL_GEMM)
#else
#define SNN_TOL_STEP 1e-5
#define SNN_TOL_STEP2 1e-5
#endif

#endif
