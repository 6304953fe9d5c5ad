/* The K loop of a tiled GEMM block, shared by the SIMT and the tensor-core
 * kernels: it stages the k tiles kt_begin .. kt_end - 1 (of Tile::BK each) of
 * A and B (GemmOperand types OpA, OpB) into shared memory and calls
 * compute(As, Bs) on each, in k order. A split-K slice is such a range.
 *
 * On targets with cp.async (sm80, sm90) a ring of STAGES shared tiles
 * (CONFIG_GEMM_STAGES unless the kernel says otherwise), of which a range of
 * fewer k tiles touches only the first ones (gemm_launch sizes shared memory
 * so); on sm75 one shared tile while the next is loaded into registers. */
#ifndef SNN_GEMM_PIPELINE_CUH
#define SNN_GEMM_PIPELINE_CUH

#include "kernels/cuda/gemm_operand.cuh"

template <class Tile, class OpA, class OpB, int STAGES = GEMM_SMEM_STAGES, class T, class G, class Compute>
static __device__ __forceinline__ void gemm_mainloop(T *smem, const G *__restrict__ A, int lda,
                                                     const G *__restrict__ B, int ldb, int M, int N, int K,
                                                     int kt_begin, int kt_end, Compute &&compute)
{
    constexpr int kStage = OpA::kSmemElems + OpB::kSmemElems, BK = Tile::BK;
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * Tile::BM, n0 = blockIdx.x * Tile::BN;
    const int ktiles = kt_end - kt_begin;

#if SNN_ARCH_HAS_CP_ASYNC
    /* Ring of S tiles: tiles kt+1 .. kt+S-1 in flight while kt is used. */
    constexpr int S = STAGES;
    static_assert(S >= 2, "gemm_mainloop: a ring has at least two stages");
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < ktiles) {
            OpA::issue(smem + s * kStage, A, lda, M, K, m0, (kt_begin + s) * BK, tid);
            OpB::issue(smem + s * kStage + OpA::kSmemElems, B, ldb, N, K, n0, (kt_begin + s) * BK, tid);
        }
        sm80_cp_async_commit(); /* empty groups keep the count uniform */
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        sm80_cp_async_wait<S - 2>(); /* this thread's copies of tile kt have landed */
        __syncthreads();             /* everyone's have; and stage (kt-1)%S is free */
        const int next = kt + S - 1;
        if (next < ktiles) {
            T *st = smem + (next % S) * kStage;
            OpA::issue(st, A, lda, M, K, m0, (kt_begin + next) * BK, tid);
            OpB::issue(st + OpA::kSmemElems, B, ldb, N, K, n0, (kt_begin + next) * BK, tid);
        }
        sm80_cp_async_commit();
        const T *st = smem + (kt % S) * kStage;
        compute(st, st + OpA::kSmemElems);
    }
    sm80_cp_async_wait<0>();
#else
    /* One shared tile; the next tile waits in registers while it is used. */
    float ra[OpA::kRegs], rb[OpB::kRegs];
    T *As = smem, *Bs = smem + OpA::kSmemElems;
    if (ktiles > 0) {
        OpA::fetch(ra, A, lda, M, K, m0, kt_begin * BK, tid);
        OpB::fetch(rb, B, ldb, N, K, n0, kt_begin * BK, tid);
        OpA::store(As, ra, tid);
        OpB::store(Bs, rb, tid);
    }
    __syncthreads();
    for (int kt = 0; kt < ktiles; ++kt) {
        const bool more = kt + 1 < ktiles;
        if (more) {
            OpA::fetch(ra, A, lda, M, K, m0, (kt_begin + kt + 1) * BK, tid);
            OpB::fetch(rb, B, ldb, N, K, n0, (kt_begin + kt + 1) * BK, tid);
        }
        compute(As, Bs);
        if (more) {
            __syncthreads();
            OpA::store(As, ra, tid);
            OpB::store(Bs, rb, tid);
            __syncthreads();
        }
    }
#endif
}

#endif
