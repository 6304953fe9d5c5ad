/* The limits and feature flags of the configured target's code path
 * (CONFIG_TARGET_SM75/SM80/SM90), as SNN_ARCH_* macros. With
 * CONFIG_CUDA_ARCH_OVERRIDE the path is compiled for a newer card, but it
 * keeps its own target's limits and instructions: the smaller limits are
 * also valid on the newer card. */
#ifndef SNN_CUDA_TARGET_H
#define SNN_CUDA_TARGET_H

#include "snn_config.h"

#if defined(CONFIG_TARGET_SM75)
#include "arch/sm75/limits.h"
#elif defined(CONFIG_TARGET_SM80)
#include "arch/sm80/limits.h"
#elif defined(CONFIG_TARGET_SM90)
#include "arch/sm90/limits.h"
#else
#error "arch/cuda/target.h: the configured target is not a CUDA target (CONFIG_TARGET_SM75/SM80/SM90)"
#endif

/* Shared memory a block gets without cudaFuncSetAttribute, on every arch. */
#define SNN_CUDA_SMEM_DEFAULT (48 * 1024)
#define SNN_CUDA_MAX_THREADS_PER_BLOCK 1024
#define SNN_CUDA_WARP 32

#endif
