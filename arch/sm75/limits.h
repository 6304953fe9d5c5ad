/* Turing (sm_75, RTX 20xx, T4): what the kernels may assume. Every arch's
 * limits.h defines the same names; include arch/cuda/target.h, not this. */
#ifndef SNN_SM75_LIMITS_H
#define SNN_SM75_LIMITS_H

/* Dynamic shared memory one block may opt in to (cudaFuncSetAttribute). */
#define SNN_ARCH_MAX_SMEM_PER_BLOCK (64 * 1024)
#define SNN_ARCH_REGS_PER_SM 65536
/* No cp.async: global -> shared staging goes through registers. */
#define SNN_ARCH_HAS_CP_ASYNC 0

#endif
