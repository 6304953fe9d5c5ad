/* Turing (sm_75, RTX 20xx, T4): what the kernels may assume. Every arch's
 * limits.h defines the same names; include arch/cuda/target.h, not this. */
#ifndef SNN_SM75_LIMITS_H
#define SNN_SM75_LIMITS_H

#define SNN_ARCH_NAME "sm75"
#define SNN_ARCH_CC 75
/* Dynamic shared memory one block may opt in to (cudaFuncSetAttribute). */
#define SNN_ARCH_MAX_SMEM_PER_BLOCK (64 * 1024)
#define SNN_ARCH_SMEM_PER_SM (64 * 1024)
#define SNN_ARCH_REGS_PER_SM 65536
#define SNN_ARCH_MAX_THREADS_PER_SM 1024
/* No cp.async: global -> shared staging goes through registers. */
#define SNN_ARCH_HAS_CP_ASYNC 0
#define SNN_ARCH_HAS_TMA 0
#define SNN_ARCH_HAS_BF16_MMA 0

#endif
