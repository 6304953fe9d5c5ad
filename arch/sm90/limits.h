/* Hopper (sm_90a, H100): what the kernels may assume. Every arch's
 * limits.h defines the same names; include arch/cuda/target.h, not this. */
#ifndef SNN_SM90_LIMITS_H
#define SNN_SM90_LIMITS_H

/* Dynamic shared memory one block may opt in to: 227 KB (232448 bytes). */
#define SNN_ARCH_MAX_SMEM_PER_BLOCK (227 * 1024)
#define SNN_ARCH_REGS_PER_SM 65536
/* cp.async as on Ampere: the sm90 target runs the Ampere kernels for the
 * GEMMs its wgmma path (kernels/cuda/gemm/wgmma.cuh) does not take. */
#define SNN_ARCH_HAS_CP_ASYNC 1

#endif
