/* FP32 SIMT GEMM for the three roles of a linear layer (kernels/ops_proto.h):
 *
 *   forward          Y[M,N]  = X[M,K] . W[N,K]^T   (+ bias, ReLU)
 *   backward_input   dX[M,K] = dY[M,N] . W[N,K]    (* ReLU mask)
 *   backward_weight  gW[N,K] = dY[M,N]^T . X[M,K]  (-> SGD with momentum on W)
 *
 * One tiled kernel, gemm_f32_kernel, computes C[m][n] = sum_k A(m,k) B(n,k)
 * and hands every C element to an epilogue functor. The template arguments
 * are the operand layouts (GEMM_K_CONTIG / GEMM_R_CONTIG, gemm_config.h),
 * their global load widths (1 or 4 floats, picked at launch from alignment)
 * and the epilogue. The shape (block, warp and lane tiles, stages) comes from
 * the config through kernels/cuda/gemm_config.h.
 *
 * Pipeline: on targets with cp.async (sm80, sm90) a ring of
 * CONFIG_GEMM_STAGES shared tiles; on sm75 one shared tile while the next is
 * loaded into registers. Loads outside [M,N,K] are zero-filled, stores are
 * predicated: any M, N, K. Every C element is summed by one thread as the
 * chain acc = fmaf(a_k, b_k, acc), k = 0..K-1 from 0, as the host GEMM does
 * (so forward and input gradient match it bitwise), and the bias gradient in
 * a fixed order: deterministic, no atomics. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "kernels/cuda/gemm_config.h"
#include "kernels/ops.h"
#include "snn_check.h"
#if SNN_ARCH_HAS_CP_ASYNC
#include "arch/sm80/cp_async.h"
#endif

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

static __host__ __device__ constexpr int gemm_gcd(int a, int b) { return b ? gemm_gcd(b, a % b) : a; }

/* One operand's tile, ROWS rows (BM for A, BN for B) by BK deep, loaded VEC
 * floats at a time into a k-major shared tile s[k][r] (row stride kStride).
 *
 * The tile is seen along its two directions in global memory: "fast", the
 * contiguous one (k for GEMM_K_CONTIG, rows for GEMM_R_CONTIG), in kF items
 * of VEC floats, and "slow", the other, kS long. The threads form a kTF x kTS
 * grid over it (fast index tid % kTF): each thread loads the kP x kQ items
 * (tf + p*kTF, ts + q*kTS), a lattice, so its addresses are one pointer plus
 * constant steps and its predicates a few compares.
 * - GEMM_R_CONTIG: kTF = gcd(rows / VEC, threads): consecutive threads take
 *   consecutive rows at one k; coalesced reads, contiguous shared stores.
 * - GEMM_K_CONTIG: stored transposed; kTF is at most 8 items (VEC = 1) or 2
 *   (VEC = 4), so a warp reads 8 consecutive floats of each of 4 rows (two
 *   float4 of each of 16 rows): whole 32-byte sectors. With the stride an
 *   odd multiple of 4 floats, the 32 lanes' shared stores hit 32 banks. */
template <int LAYOUT, int ROWS, int VEC>
struct GemmOperand {
    static constexpr bool kKContig = LAYOUT == GEMM_K_CONTIG;
    static constexpr int kStride = gemm_smem_stride(ROWS, kKContig);
    static constexpr int kSmemFloats = GEMM_BK * kStride;
    static constexpr int kF = kKContig ? GEMM_BK / VEC : ROWS / VEC;
    static constexpr int kS = kKContig ? ROWS : GEMM_BK;
    static constexpr int kTF = kKContig ? gemm_gcd(kF, VEC == 1 ? 8 : 2) : gemm_gcd(kF, GEMM_THREADS);
    static constexpr int kTS = GEMM_THREADS / kTF;
    static constexpr int kP = kF / kTF;
    static constexpr int kQ = (kS + kTS - 1) / kTS;
    static constexpr int kRegs = kP * kQ * VEC;
    /* shared-tile steps of one fast item and of one slow index */
    static constexpr int kSmemF = kKContig ? VEC * kStride : VEC;
    static constexpr int kSmemS = kKContig ? 1 : kStride;
    static_assert(VEC == 1 || VEC == 4, "GemmOperand: VEC is 1 or 4");
    static_assert(kKContig ? GEMM_BK % VEC == 0 : ROWS % VEC == 0, "GemmOperand: VEC must divide the tile");
    static_assert(GEMM_THREADS % kTF == 0, "GemmOperand: thread grid");

    /* Whether slow index q of this thread lies in the tile (it may not when kTS does not divide kS). */
    static __device__ __forceinline__ bool in_tile(int ts, int q) { return kS % kTS == 0 || ts + q * kTS < kS; }

    /* The tile's origin (fast0, slow0) is (k0, r0) for K_CONTIG, (r0, k0) for
     * R_CONTIG; F and S bound the matrix along fast and slow (Kd and R, or R
     * and Kd). */
    static __device__ __forceinline__ void origin(int r0, int k0, int R, int Kd, int &fast0, int &slow0, int &F,
                                                  int &S)
    {
        fast0 = kKContig ? k0 : r0;
        slow0 = kKContig ? r0 : k0;
        F = kKContig ? Kd : R;
        S = kKContig ? R : Kd;
    }

#if SNN_ARCH_HAS_CP_ASYNC
    /* cp.async the tile at (r0, k0) of g (R rows, Kd deep) into s; zeros outside. */
    static __device__ __forceinline__ void issue(float *s, const float *g, int ld, int R, int Kd, int r0, int k0,
                                                 int tid)
    {
        static_assert(VEC == 1 || !kKContig, "cp.async cannot transpose: K_CONTIG operands load 1 float");
        int fast0, slow0, F, S;
        origin(r0, k0, R, Kd, fast0, slow0, F, S);
        const int tf = tid % kTF, ts = tid / kTF;
        const int f = fast0 + tf * VEC, sl = slow0 + ts;
        const float *gp = g + (size_t)sl * ld + f;
        float *sp = s + tf * kSmemF + ts * kSmemS;
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
            if (!in_tile(ts, q))
                continue;
            const bool s_ok = sl + q * kTS < S;
#pragma unroll
            for (int p = 0; p < kP; ++p) {
                const int fp = f + p * kTF * VEC;
                const float *src = gp + (size_t)q * kTS * ld + p * kTF * VEC;
                float *dst = sp + p * kTF * kSmemF + q * kTS * kSmemS;
                if constexpr (VEC == 1) {
                    const bool ok = s_ok && fp < F;
                    sm80_cp_async_ca_4(dst, ok ? src : g, ok ? 4 : 0);
                } else {
                    const int n = s_ok ? min(max(F - fp, 0), 4) : 0;
                    sm80_cp_async_cg_16(dst, n ? src : g, n * 4);
                }
            }
        }
    }
#else
    /* Load the tile at (r0, k0) of g into registers (zeros outside the matrix). */
    static __device__ __forceinline__ void fetch(float (&reg)[kRegs], const float *__restrict__ g, int ld, int R,
                                                 int Kd, int r0, int k0, int tid)
    {
        int fast0, slow0, F, S;
        origin(r0, k0, R, Kd, fast0, slow0, F, S);
        const int tf = tid % kTF, ts = tid / kTF;
        const int f = fast0 + tf * VEC, sl = slow0 + ts;
        const float *gp = g + (size_t)sl * ld + f;
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
            const bool s_ok = in_tile(ts, q) && sl + q * kTS < S;
#pragma unroll
            for (int p = 0; p < kP; ++p) {
                float *d = reg + (q * kP + p) * VEC;
                const int fp = f + p * kTF * VEC;
                const float *src = gp + (size_t)q * kTS * ld + p * kTF * VEC;
#pragma unroll
                for (int j = 0; j < VEC; ++j)
                    d[j] = 0.0f;
                if constexpr (VEC == 1) {
                    if (s_ok && fp < F)
                        d[0] = __ldg(src);
                } else if (s_ok) {
                    if (fp + 4 <= F) {
                        const float4 x = __ldg(reinterpret_cast<const float4 *>(src));
                        d[0] = x.x;
                        d[1] = x.y;
                        d[2] = x.z;
                        d[3] = x.w;
                    } else {
#pragma unroll
                        for (int j = 0; j < 3; ++j)
                            if (fp + j < F)
                                d[j] = __ldg(src + j);
                    }
                }
            }
        }
    }

    /* Store what fetch loaded into the shared tile s. */
    static __device__ __forceinline__ void store(float *s, const float (&reg)[kRegs], int tid)
    {
        const int tf = tid % kTF, ts = tid / kTF;
        float *sp = s + tf * kSmemF + ts * kSmemS;
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
            if (!in_tile(ts, q))
                continue;
#pragma unroll
            for (int p = 0; p < kP; ++p) {
                const float *d = reg + (q * kP + p) * VEC;
                float *dst = sp + p * kTF * kSmemF + q * kTS * kSmemS;
                if constexpr (kKContig) {
#pragma unroll
                    for (int j = 0; j < VEC; ++j)
                        dst[j * kStride] = d[j];
                } else if constexpr (VEC == 4) {
                    *reinterpret_cast<float4 *>(dst) = make_float4(d[0], d[1], d[2], d[3]);
                } else {
                    dst[0] = d[0];
                }
            }
        }
    }
#endif
};

template <int V>
static __device__ __forceinline__ void gemm_lds(float *d, const float *p)
{
    if constexpr (V == 4) {
        const float4 x = *reinterpret_cast<const float4 *>(p);
        d[0] = x.x;
        d[1] = x.y;
        d[2] = x.z;
        d[3] = x.w;
    } else if constexpr (V == 2) {
        const float2 x = *reinterpret_cast<const float2 *>(p);
        d[0] = x.x;
        d[1] = x.y;
    } else {
        d[0] = *p;
    }
}

/* acc += the lane's share of one shared stage: BK deep, WK k per unrolled step. */
template <int SA, int SB>
static __device__ __forceinline__ void gemm_stage_fma(float (&acc)[GEMM_TM][GEMM_TN], const float *As,
                                                      const float *Bs)
{
#pragma unroll 1
    for (int kk = 0; kk < GEMM_BK; kk += GEMM_WK) {
#pragma unroll
        for (int k = 0; k < GEMM_WK; ++k) {
            float a[GEMM_TM], b[GEMM_TN];
#pragma unroll
            for (int i = 0; i < GEMM_TM / GEMM_VM; ++i)
                gemm_lds<GEMM_VM>(a + i * GEMM_VM, As + (kk + k) * SA + i * GEMM_LANES_M * GEMM_VM);
#pragma unroll
            for (int j = 0; j < GEMM_TN / GEMM_VN; ++j)
                gemm_lds<GEMM_VN>(b + j * GEMM_VN, Bs + (kk + k) * SB + j * GEMM_LANES_N * GEMM_VN);
#pragma unroll
            for (int i = 0; i < GEMM_TM; ++i)
#pragma unroll
                for (int j = 0; j < GEMM_TN; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
}

/* C[m][n] = sum_k A(m,k) B(n,k) for m < M, n < N; epi(m, n, C[m][n]) for each. */
template <int LA, int LB, int VA, int VB, class Epi>
__global__ void __launch_bounds__(GEMM_THREADS)
    gemm_f32_kernel(const float *__restrict__ A, int lda, const float *__restrict__ B, int ldb, int M, int N, int K,
                    Epi epi)
{
    using OpA = GemmOperand<LA, GEMM_BM, VA>;
    using OpB = GemmOperand<LB, GEMM_BN, VB>;
    constexpr int kStage = OpA::kSmemFloats + OpB::kSmemFloats;
    extern __shared__ __align__(16) float gemm_smem[];

    const int tid = threadIdx.x;
    const int warp = tid / SNN_CUDA_WARP, lane = tid % SNN_CUDA_WARP;
    const int wm = warp / GEMM_WARPS_N, wn = warp % GEMM_WARPS_N;
    const int lm = lane / GEMM_LANES_N, ln = lane % GEMM_LANES_N;
    const int m0 = blockIdx.y * GEMM_BM, n0 = blockIdx.x * GEMM_BN;
    const int a_off = wm * GEMM_WM + lm * GEMM_VM;
    const int b_off = wn * GEMM_WN + ln * GEMM_VN;
    const int ktiles = (K + GEMM_BK - 1) / GEMM_BK;

    float acc[GEMM_TM][GEMM_TN];
#pragma unroll
    for (int i = 0; i < GEMM_TM; ++i)
#pragma unroll
        for (int j = 0; j < GEMM_TN; ++j)
            acc[i][j] = 0.0f;

#if SNN_ARCH_HAS_CP_ASYNC
    /* Ring of STAGES tiles: tiles kt+1 .. kt+STAGES-1 in flight while kt is used. */
    constexpr int S = CONFIG_GEMM_STAGES;
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < ktiles) {
            OpA::issue(gemm_smem + s * kStage, A, lda, M, K, m0, s * GEMM_BK, tid);
            OpB::issue(gemm_smem + s * kStage + OpA::kSmemFloats, B, ldb, N, K, n0, s * GEMM_BK, tid);
        }
        sm80_cp_async_commit(); /* empty groups keep the count uniform */
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        sm80_cp_async_wait<S - 2>(); /* this thread's copies of tile kt have landed */
        __syncthreads();             /* everyone's have; and stage (kt-1)%S is free */
        const int next = kt + S - 1;
        if (next < ktiles) {
            float *st = gemm_smem + (next % S) * kStage;
            OpA::issue(st, A, lda, M, K, m0, next * GEMM_BK, tid);
            OpB::issue(st + OpA::kSmemFloats, B, ldb, N, K, n0, next * GEMM_BK, tid);
        }
        sm80_cp_async_commit();
        const float *st = gemm_smem + (kt % S) * kStage;
        gemm_stage_fma<OpA::kStride, OpB::kStride>(acc, st + a_off, st + OpA::kSmemFloats + b_off);
    }
    sm80_cp_async_wait<0>();
#else
    /* One shared tile; the next tile waits in registers while it is used. */
    float ra[OpA::kRegs], rb[OpB::kRegs];
    float *As = gemm_smem, *Bs = gemm_smem + OpA::kSmemFloats;
    if (ktiles > 0) {
        OpA::fetch(ra, A, lda, M, K, m0, 0, tid);
        OpB::fetch(rb, B, ldb, N, K, n0, 0, tid);
        OpA::store(As, ra, tid);
        OpB::store(Bs, rb, tid);
    }
    __syncthreads();
    for (int kt = 0; kt < ktiles; ++kt) {
        const bool more = kt + 1 < ktiles;
        if (more) {
            OpA::fetch(ra, A, lda, M, K, m0, (kt + 1) * GEMM_BK, tid);
            OpB::fetch(rb, B, ldb, N, K, n0, (kt + 1) * GEMM_BK, tid);
        }
        gemm_stage_fma<OpA::kStride, OpB::kStride>(acc, As + a_off, Bs + b_off);
        if (more) {
            __syncthreads();
            OpA::store(As, ra, tid);
            OpB::store(Bs, rb, tid);
            __syncthreads();
        }
    }
#endif

#pragma unroll
    for (int i = 0; i < GEMM_TM; ++i) {
        const int m = m0 + wm * GEMM_WM + (i / GEMM_VM) * (GEMM_LANES_M * GEMM_VM) + lm * GEMM_VM + i % GEMM_VM;
        if (m >= M)
            continue;
#pragma unroll
        for (int j = 0; j < GEMM_TN; ++j) {
            const int n =
                n0 + wn * GEMM_WN + (j / GEMM_VN) * (GEMM_LANES_N * GEMM_VN) + ln * GEMM_VN + j % GEMM_VN;
            if (n < N)
                epi(m, n, acc[i][j]);
        }
    }
}

/* Forward: y = v (+ b[n]), then ReLU if relu. */
struct GemmEpiBiasRelu {
    float *y;
    const float *b;
    int ld;
    int relu;
    __device__ __forceinline__ void operator()(int m, int n, float v) const
    {
        if (b)
            v += b[n];
        if (relu)
            v = v > 0.0f ? v : 0.0f;
        y[(size_t)m * ld + n] = v;
    }
};

/* Input gradient: dx = v where the layer's input was positive (all if no act). */
struct GemmEpiReluMask {
    float *dx;
    const float *act;
    int ld;
    __device__ __forceinline__ void operator()(int m, int n, float v) const
    {
        const size_t i = (size_t)m * ld + n;
        if (act && !(act[i] > 0.0f))
            v = 0.0f;
        dx[i] = v;
    }
};

/* Weight gradient v = gW[m][n] -> SGD with momentum: vw = mu*vw + g; w -= lr*vw. */
struct GemmEpiSgd {
    float *w;
    float *vw;
    int ld;
    float lr, mu;
    __device__ __forceinline__ void operator()(int m, int n, float g) const
    {
        const size_t i = (size_t)m * ld + n;
        const float v = mu * vw[i] + g;
        vw[i] = v;
        w[i] -= lr * v;
    }
};

/* Bias gradient gb[n] = sum_m dy[m][n], fused with its SGD update. A block
 * holds 32 columns; its 8 row slices sum rows ty, ty+8, ... in order, then
 * one thread adds the 8 partial sums in order: a fixed order for given M. */
#define BIAS_COLS 32
#define BIAS_SLICES 8
__global__ void __launch_bounds__(BIAS_COLS *BIAS_SLICES)
    bias_sgd_kernel(float *b, float *vb, const float *__restrict__ dy, int M, int N, float lr, float mu)
{
    __shared__ float part[BIAS_SLICES][BIAS_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int n = blockIdx.x * BIAS_COLS + tx;
    float s = 0.0f;
    if (n < N)
        for (int m = ty; m < M; m += BIAS_SLICES)
            s += dy[(size_t)m * N + n];
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && n < N) {
        float g = part[0][tx];
#pragma unroll
        for (int i = 1; i < BIAS_SLICES; ++i)
            g += part[i][tx];
        const float v = mu * vb[n] + g;
        vb[n] = v;
        b[n] -= lr * v;
    }
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

/* Whether an operand layout can be loaded 4 floats at a time on this target
 * (cp.async cannot transpose, so K_CONTIG loads single floats there)... */
template <int L, int ROWS>
static constexpr bool gemm_vec_allowed()
{
    return L == GEMM_R_CONTIG ? ROWS % 4 == 0 : !SNN_ARCH_HAS_CP_ASYNC && GEMM_BK % 4 == 0;
}
/* ...and whether this operand is aligned for it. */
static bool gemm_vec_aligned(const float *p, int ld)
{
    return ld % 4 == 0 && ((uintptr_t)p & 15) == 0;
}

template <int LA, int LB, int VA, int VB, class Epi>
static void gemm_launch(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
{
    constexpr int smem = gemm_smem_bytes(LA == GEMM_K_CONTIG, LB == GEMM_K_CONTIG);
    void (*kernel)(const float *, int, const float *, int, int, int, int, Epi) = gemm_f32_kernel<LA, LB, VA, VB, Epi>;
    if constexpr (smem > SNN_CUDA_SMEM_DEFAULT) {
        static bool opted_in; /* once per kernel instance */
        if (!opted_in) {
            CUDA_CHECK(cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            opted_in = true;
        }
    }
    const dim3 grid((N + GEMM_BN - 1) / GEMM_BN, (M + GEMM_BM - 1) / GEMM_BM);
    kernel<<<grid, GEMM_THREADS, smem, snn_stream()>>>(A, lda, B, ldb, M, N, K, epi);
    CUDA_CHECK_LAUNCH();
}

/* C[M,N] = A . B^T with A: M x K and B: N x K in the given layouts. */
template <int LA, int LB, class Epi>
static void gemm_run(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
{
    if (M <= 0 || N <= 0)
        return;
    if ((M + GEMM_BM - 1) / GEMM_BM > 65535)
        snn_die("GEMM with %d rows exceeds the grid's 65535 x CONFIG_GEMM_BLOCK_M (%d) rows", M, GEMM_BM);
    constexpr bool can_a = gemm_vec_allowed<LA, GEMM_BM>(), can_b = gemm_vec_allowed<LB, GEMM_BN>();
    const bool va = can_a && gemm_vec_aligned(A, lda), vb = can_b && gemm_vec_aligned(B, ldb);
    if constexpr (can_a && can_b)
        if (va && vb)
            return gemm_launch<LA, LB, 4, 4>(A, lda, B, ldb, M, N, K, epi);
    if constexpr (can_a)
        if (va)
            return gemm_launch<LA, LB, 4, 1>(A, lda, B, ldb, M, N, K, epi);
    if constexpr (can_b)
        if (vb)
            return gemm_launch<LA, LB, 1, 4>(A, lda, B, ldb, M, N, K, epi);
    gemm_launch<LA, LB, 1, 1>(A, lda, B, ldb, M, N, K, epi);
}

extern "C" void cuda_linear_forward(float *y, const float *x, const float *w, const float *b, int M, int N, int K,
                                    int relu)
{
    /* A = X [M][K], B = W [N][K]: both contiguous along k. */
    const GemmEpiBiasRelu epi = {y, b, N, relu};
    gemm_run<GEMM_K_CONTIG, GEMM_K_CONTIG>(x, K, w, K, M, N, K, epi);
}

extern "C" void cuda_linear_backward_input(float *dx, const float *dy, const float *w, const float *act, int M,
                                           int N, int K)
{
    /* GEMM (m, n, k) = (M, K, N): A = dY [M][N] along k; B = W [N][K] is k x n. */
    const GemmEpiReluMask epi = {dx, act, K};
    gemm_run<GEMM_K_CONTIG, GEMM_R_CONTIG>(dy, N, w, K, M, K, N, epi);
}

extern "C" void cuda_linear_backward_weight_sgd(float *w, float *vw, float *b, float *vb, const float *dy,
                                                const float *x, int M, int N, int K, float lr, float mu)
{
    /* GEMM (m, n, k) = (N, K, M), the batch reduced: A = dY [M][N] is k x m;
     * B = X [M][K] is k x n. */
    const GemmEpiSgd epi = {w, vw, K, lr, mu};
    gemm_run<GEMM_R_CONTIG, GEMM_R_CONTIG>(dy, N, x, K, N, K, M, epi);
    if (b && N > 0) {
        bias_sgd_kernel<<<(N + BIAS_COLS - 1) / BIAS_COLS, dim3(BIAS_COLS, BIAS_SLICES), 0, snn_stream()>>>(
            b, vb, dy, M, N, lr, mu);
        CUDA_CHECK_LAUNCH();
    }
}
