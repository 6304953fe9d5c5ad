/* Split-K for the tensor-core GEMM (CONFIG_GEMM_SPLIT_K_MAX): a GEMM whose
 * M x N block tiles fill at most half of what the GPU holds at once splits
 * its k range into slices, one block per tile and slice, in one wave; each
 * slice writes its partial sums to a workspace, and a second kernel adds
 * the slices in order and applies the role's epilogue (gemm/split_k.cuh).
 * The workspace is a region of the static arena, bound once at start-up. */
#ifndef SNN_GEMM_SPLIT_K_H
#define SNN_GEMM_SPLIT_K_H

#include "snn_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Partial sums the engine's workspace holds: every slice of the widest
 * batch-sized GEMM, at most 4 Mi floats (16 MiB). Only a GEMM whose blocks
 * fill at most half the GPU splits, so its slices x M x N stay below the
 * blocks the GPU holds times a block tile: about 2 Mi floats on an H100.
 * The cap keeps a large-batch board (2048 x 16384 x 16 slices: 2 GiB) from
 * reserving what no GEMM of it uses; a GEMM the workspace cannot hold takes
 * fewer slices. */
#define SNN_SPLIT_K_CAP_FLOATS ((size_t)1 << 22)
#if defined(CONFIG_GEMM_TENSOR_CORES) && CONFIG_GEMM_SPLIT_K_MAX > 1
#define SNN_SPLIT_K_WANT_FLOATS ((size_t)CONFIG_GEMM_SPLIT_K_MAX * SNN_BATCH * SNN_MAX_DIM)
#define SNN_SPLIT_K_FLOATS \
    (SNN_SPLIT_K_WANT_FLOATS < SNN_SPLIT_K_CAP_FLOATS ? SNN_SPLIT_K_WANT_FLOATS : SNN_SPLIT_K_CAP_FLOATS)
#else
#define SNN_SPLIT_K_FLOATS ((size_t)0)
#endif
/* A workspace for each stream whose GEMMs run at once: the weight steps'
 * own beside the engine's under STEP_BESIDE (arch/cuda/beside.h). */
#ifdef CONFIG_STEP_BESIDE
#define SNN_SPLIT_K_STREAMS 2
#else
#define SNN_SPLIT_K_STREAMS 1
#endif

/* Binds floats (device memory, SNN_SPLIT_K_STREAMS x elems of them, one
 * stream's after the other's) as the workspaces; NULL unbinds (no GEMM
 * splits then). */
void cuda_gemm_split_k_bind(float *ws, long elems);
/* GEMMs that ran split so far, and the slices of the last of them (gemm_path.h). */
long cuda_gemm_split_k_count(void);
int cuda_gemm_split_k_last_slices(void);

#ifdef __cplusplus
}
#endif
#endif
