/* The K loop of a tiled GEMM block, for the SIMT and the mma.sync kernels: it stages the k tiles
 * kt_begin .. kt_end - 1 (of Tile::BK each; a split-K slice is such a range) of A's rows m0.. and B's rows
 * n0.. (GemmOperand types OpA, OpB; the block tile's origin, which a kernel takes from its block index and
 * the fused step from its work list) into shared memory and calls compute(As, Bs) on each, in k order. With cp.async (sm80, sm90) a
 * ring of STAGES tiles, of which fewer k tiles touch only the first (gemm_grid sizes shared memory so);
 * on sm75 one shared tile while the next is loaded into registers. */
#ifndef SNN_GEMM_PIPELINE_CUH
#define SNN_GEMM_PIPELINE_CUH

#include "kernels/cuda/gemm/operand.cuh"

#if SNN_ARCH_HAS_CP_ASYNC
/* cp.async k tile kt (of Tile::BK) of A and B into the ring stage st: A's tile, then B's. */
template <class Tile, class OpA, class OpB, class T, class G>
static __device__ __forceinline__ void gemm_ring_issue(T *st, const G *__restrict__ A, int lda, const G *__restrict__ B,
                                                       int ldb, int M, int N, int K, int m0, int n0, int kt)
{
    const int tid = threadIdx.x;
    OpA::issue(st, A, lda, M, K, m0, kt * Tile::BK, tid);
    OpB::issue(st + OpA::kSmemElems, B, ldb, N, K, n0, kt * Tile::BK, tid);
}

/* The ring's first S - 1 tiles of k tiles kt_begin .. kt_begin + ktiles - 1, a commit group each. */
template <class Tile, class OpA, class OpB, int S, class T, class G>
static __device__ __forceinline__ void gemm_ring_fill(T *smem, const G *__restrict__ A, int lda, const G *__restrict__ B,
                                                      int ldb, int M, int N, int K, int m0, int n0, int kt_begin,
                                                      int ktiles)
{
    static_assert(S >= 2, "gemm_mainloop: a ring has at least two stages");
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < ktiles)
            gemm_ring_issue<Tile, OpA, OpB>(smem + s * (OpA::kSmemElems + OpB::kSmemElems), A, lda, B, ldb, M, N, K,
                                            m0, n0, kt_begin + s);
        sm80_cp_async_commit(); /* empty groups keep the count uniform */
    }
}
#endif

template <class Tile, class OpA, class OpB, int STAGES = GEMM_SMEM_STAGES, class T, class G, class Compute>
static __device__ __forceinline__ void gemm_mainloop(T *smem, const G *__restrict__ A, int lda,
                                                     const G *__restrict__ B, int ldb, int M, int N, int K, int m0,
                                                     int n0, int kt_begin, int kt_end, Compute &&compute)
{
    constexpr int kStage = OpA::kSmemElems + OpB::kSmemElems;
    const int ktiles = kt_end - kt_begin;

#if SNN_ARCH_HAS_CP_ASYNC
    /* Ring of S tiles: tiles kt+1 .. kt+S-1 in flight while kt is used. */
    constexpr int S = STAGES;
    gemm_ring_fill<Tile, OpA, OpB, S>(smem, A, lda, B, ldb, M, N, K, m0, n0, kt_begin, ktiles);
    for (int kt = 0; kt < ktiles; ++kt) {
        sm80_cp_async_wait<S - 2>(); /* this thread's copies of tile kt have landed */
        __syncthreads();             /* everyone's have; and stage (kt-1)%S is free */
        const int next = kt + S - 1;
        if (next < ktiles)
            gemm_ring_issue<Tile, OpA, OpB>(smem + (next % S) * kStage, A, lda, B, ldb, M, N, K, m0, n0,
                                            kt_begin + next);
        sm80_cp_async_commit();
        const T *st = smem + (kt % S) * kStage;
        compute(st, st + OpA::kSmemElems);
    }
    sm80_cp_async_wait<0>();
#else
    /* One shared tile; the next tile waits in registers while it is used. */
    constexpr int BK = Tile::BK;
    const int tid = threadIdx.x;
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

#if SNN_ARCH_HAS_CP_ASYNC
/* The K loop of the mma.sync kernel (gemm/mma.cuh) on the cp.async ring, its shared-memory reads
 * overlapped with its MMAs. A k tile is STEPS steps; load(f, As, Bs, s) reads step s's fragments from the
 * stage As, Bs into the register set f (of type Frags), and mma(f) issues the step's MMAs. Step s + 1's
 * fragments are read while step s's MMAs run (two register sets), and the ring's wait and barrier come
 * before a tile's last step, so the next tile's first fragments are read under that step's MMAs; the copies
 * of a new tile are issued after the first step's reads. Every warp then has MMAs to issue across the
 * barrier (CUTLASS's order). */
template <class Tile, class OpA, class OpB, int STAGES, int STEPS, class Frags, class T, class G, class Load,
          class Mma>
static __device__ __forceinline__ void gemm_mainloop_overlapped(T *smem, const G *__restrict__ A, int lda,
                                                                const G *__restrict__ B, int ldb, int M, int N, int K,
                                                                int m0, int n0, int kt_begin, int kt_end, Load &&load,
                                                                Mma &&mma)
{
    constexpr int kStage = OpA::kSmemElems + OpB::kSmemElems, S = STAGES;
    static_assert(STEPS >= 2 && STEPS % 2 == 0, "gemm_mainloop_overlapped: an even number of steps per k tile");
    const int ktiles = kt_end - kt_begin;
    if (ktiles <= 0)
        return;
    gemm_ring_fill<Tile, OpA, OpB, S>(smem, A, lda, B, ldb, M, N, K, m0, n0, kt_begin, ktiles);
    sm80_cp_async_wait<S - 2>();
    __syncthreads();
    Frags f[2];
    load(f[0], smem, smem + OpA::kSmemElems, 0);
    for (int kt = 0; kt < ktiles; ++kt) {
        const T *st = smem + (kt % S) * kStage;
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            if (s == STEPS - 1) {
                sm80_cp_async_wait<S - 2>(); /* this thread's copies of tile kt + 1 have landed */
                __syncthreads();             /* everyone's have; and tile kt's stage is read no more */
                st = smem + ((kt + 1) % S) * kStage;
            }
            if (s + 1 < STEPS || kt + 1 < ktiles)
                load(f[(s + 1) % 2], st, st + OpA::kSmemElems, (s + 1) % STEPS);
            if (s == 0) {
                /* into the stage of tile kt - 1, free since the barrier of its last step */
                const int next = kt + S - 1;
                if (next < ktiles)
                    gemm_ring_issue<Tile, OpA, OpB>(smem + (next % S) * kStage, A, lda, B, ldb, M, N, K, m0, n0,
                                                    kt_begin + next);
                sm80_cp_async_commit();
            }
            mma(f[s % 2]);
        }
    }
    sm80_cp_async_wait<0>();
}
#endif

#endif
