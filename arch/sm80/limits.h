/* Ampere (sm_80, A100): what the kernels may assume. Every arch's limits.h
 * defines the same names; include arch/cuda/target.h, not this. */
#ifndef SNN_SM80_LIMITS_H
#define SNN_SM80_LIMITS_H

/* Dynamic shared memory one block may opt in to: the A100 allows 166912
 * bytes (163 KB); consumer Ampere (sm_86) only 99 KB, but this target is
 * built as sm_80. */
#define SNN_ARCH_MAX_SMEM_PER_BLOCK (163 * 1024)
#define SNN_ARCH_REGS_PER_SM 65536
/* cp.async (global -> shared without registers), arch/sm80/cp_async.cuh. */
#define SNN_ARCH_HAS_CP_ASYNC 1

#endif
