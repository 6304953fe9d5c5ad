/* FP32 SIMT GEMM for the three roles of a linear layer (kernels/ops_proto.h):
 *
 *   forward          Y[M,N]  = X[M,K] . W[N,K]^T   (+ bias, ReLU)
 *   backward_input   dX[M,K] = dY[M,N] . W[N,K]    (* ReLU mask)
 *   backward_weight  gW[N,K] = dY[M,N]^T . X[M,K]  (-> SGD with momentum on W)
 *
 * One tiled kernel, gemm_f32_kernel, computes C[m][n] = sum_k A(m,k) B(n,k)
 * and hands every C element to an epilogue functor. The template arguments
 * are the role's tile (block, warp and lane tiles: CONFIG_GEMM_<ROLE>_*,
 * kernels/cuda/gemm_config.h), the operand layouts (GEMM_K_CONTIG /
 * GEMM_R_CONTIG), their global load widths (1 or 4 floats, picked at launch
 * from alignment) and the epilogue. With a tensor-core
 * precision (CONFIG_GEMM_TENSOR_CORES) the roles run gemm_mma.cu's kernel
 * instead, with the same layouts and epilogues.
 *
 * Pipeline: on targets with cp.async (sm80, sm90) a ring of
 * CONFIG_GEMM_STAGES shared tiles; on sm75 one shared tile while the next is
 * loaded into registers. Loads past K are zero-filled (16-byte copies
 * repeat the last row for rows past M or N: gemm_operand.cuh), stores are
 * predicated: any M, N, K. Every C element is summed by one thread as the
 * chain acc = fmaf(a_k, b_k, acc), k = 0..K-1 from 0, as the host GEMM does
 * (so forward and input gradient match it bitwise), and the bias gradient in
 * a fixed order: deterministic, no atomics. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "kernels/cuda/gemm_config.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_launch.cuh"
#include "kernels/cuda/gemm_path.h"
#include "kernels/cuda/gemm_pipeline.cuh"
#include "kernels/cuda/gemm_split_k.h"
#include "kernels/cuda/twin.h"
#include "kernels/cuda/weight_grad.h"
#ifdef CONFIG_GEMM_WGMMA
#include "kernels/cuda/gemm_wgmma.h"
#endif
#include "kernels/ops.h"
#ifdef CONFIG_GEMM_TENSOR_CORES
#include "kernels/cuda/gemm_mma.h"
#endif

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

/* The FP32 kernel's operands: k-major float tiles. */
template <class Tile, int L, int ROWS, int VEC>
using GemmF32Operand = GemmOperand<Tile, L, ROWS, VEC, true, gemm_smem_stride(ROWS, L == GEMM_K_CONTIG)>;

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
template <class T, int SA, int SB>
static __device__ __forceinline__ void gemm_stage_fma(float (&acc)[T::TM][T::TN], const float *As, const float *Bs)
{
#pragma unroll 1
    for (int kk = 0; kk < T::BK; kk += T::WK) {
#pragma unroll
        for (int k = 0; k < T::WK; ++k) {
            float a[T::TM], b[T::TN];
#pragma unroll
            for (int i = 0; i < T::TM / T::VM; ++i)
                gemm_lds<T::VM>(a + i * T::VM, As + (kk + k) * SA + i * T::LANES_M * T::VM);
#pragma unroll
            for (int j = 0; j < T::TN / T::VN; ++j)
                gemm_lds<T::VN>(b + j * T::VN, Bs + (kk + k) * SB + j * T::LANES_N * T::VN);
#pragma unroll
            for (int i = 0; i < T::TM; ++i)
#pragma unroll
                for (int j = 0; j < T::TN; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
}

/* C[m][n] = sum_k A(m,k) B(n,k) for m < M, n < N, each through the epilogue epi. */
template <class T, int LA, int LB, int VA, int VB, class Epi>
__global__ void __launch_bounds__(T::THREADS)
    gemm_f32_kernel(const float *__restrict__ A, int lda, const float *__restrict__ B, int ldb, int M, int N, int K,
                    Epi epi)
{
    using OpA = GemmF32Operand<T, LA, T::BM, VA>;
    using OpB = GemmF32Operand<T, LB, T::BN, VB>;
    extern __shared__ __align__(16) float gemm_smem[];

    const int tid = threadIdx.x;
    const int warp = tid / SNN_CUDA_WARP, lane = tid % SNN_CUDA_WARP;
    const int wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
    const int lm = lane / T::LANES_N, ln = lane % T::LANES_N;
    const int m0 = blockIdx.y * T::BM, n0 = blockIdx.x * T::BN;
    const int a_off = wm * T::WM + lm * T::VM;
    const int b_off = wn * T::WN + ln * T::VN;

    float acc[T::TM][T::TN];
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
        for (int j = 0; j < T::TN; ++j)
            acc[i][j] = 0.0f;

    gemm_mainloop<T, OpA, OpB>(gemm_smem, A, lda, B, ldb, M, N, K, 0, (K + T::BK - 1) / T::BK,
                               [&](const float *As, const float *Bs) {
                                   gemm_stage_fma<T, OpA::kStride, OpB::kStride>(acc, As + a_off, Bs + b_off);
                               });

    /* the epilogue's two phases (gemm_epilogue.cuh) one row at a time: the row's loads, then its stores */
#pragma unroll
    for (int i = 0; i < T::TM; ++i) {
        const int m = m0 + wm * T::WM + (i / T::VM) * (T::LANES_M * T::VM) + lm * T::VM + i % T::VM;
        typename Epi::In in[T::TN];
#pragma unroll
        for (int phase = 0; phase < 2; ++phase)
#pragma unroll
            for (int j = 0; j < T::TN; ++j) {
                const int n = n0 + wn * T::WN + (j / T::VN) * (T::LANES_N * T::VN) + ln * T::VN + j % T::VN;
                if (m < M && n < N) {
                    if (phase == 0)
                        in[j] = epi.load(m, n);
                    else
                        gemm_epi_one(epi, m, n, acc[i][j], in[j]);
                }
            }
    }
}

/* Bias gradient gb[n] = sum_m dy[m][n], fused with its SGD update. A block
 * holds 32 columns; its 8 row slices sum rows ty, ty+8, ... in order, then
 * one thread adds the 8 partial sums in order: a fixed order for given M. */
#define BIAS_COLS CONFIG_CUDA_BIAS_COLS
#define BIAS_SLICES CONFIG_CUDA_BIAS_SLICES
static_assert(BIAS_COLS * BIAS_SLICES <= 1024,
              "CONFIG_CUDA_BIAS_COLS x CONFIG_CUDA_BIAS_SLICES must be at most 1024 threads");
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

/* The FP32 kernel for gemm_dispatch. */
template <class T, int LA, int LB>
struct GemmF32 {
    template <int VA, int VB, class Epi>
    static void launch(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
    {
        constexpr int stage_bytes = T::stage_bytes(LA == GEMM_K_CONTIG, LB == GEMM_K_CONTIG);
        gemm_launch<T, gemm_f32_kernel<T, LA, LB, VA, VB, Epi>, stage_bytes, GEMM_SMEM_STAGES>(
            M, N, 1, (K + T::BK - 1) / T::BK, A, lda, B, ldb, M, N, K, epi);
    }
};

/* C[M,N] = A . B^T with A: M x K and B: N x K in the given layouts, on the
 * configured precision's kernel at the role's tile T. */
template <class T, int LA, int LB, class Epi>
static void gemm_run(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
{
#ifdef CONFIG_GEMM_WGMMA
    if (gemm_wgmma_try<LA, LB>(A, lda, B, ldb, M, N, K, epi))
        return;
#endif
    if (M <= 0 || N <= 0)
        return;
    gemm_check_ld<T>(lda, ldb);
#ifdef CONFIG_GEMM_TENSOR_CORES
    gemm_mma_run<T, LA, LB>(A, lda, B, ldb, M, N, K, epi);
#else
    gemm_dispatch<GemmF32<T, LA, LB>, gemm_vec_allowed<T, LA, T::BM, true>(), gemm_vec_allowed<T, LB, T::BN, true>()>(
        A, lda, B, ldb, M, N, K, epi);
#endif
}

extern "C" void cuda_linear_forward(float *y, const float *x, const float *w, const float *b, int M, int N, int K,
                                    int relu)
{
    /* A = X [M][K], B = W [N][K]: both contiguous along k. */
    const GemmEpiBiasRelu epi = {y, cuda_twin_of(y), b, N, relu};
    gemm_run<GemmTileFwd, GEMM_K_CONTIG, GEMM_K_CONTIG>(x, K, w, K, M, N, K, epi);
}

extern "C" void cuda_linear_backward_input(float *dx, const float *dy, const float *w, const float *act, int M,
                                           int N, int K)
{
    /* GEMM (m, n, k) = (M, K, N): A = dY [M][N] along k; B = W [N][K] is k x n. */
    const GemmEpiReluMask epi = {dx, cuda_twin_of(dx), act, K};
    gemm_run<GemmTileDgrad, GEMM_K_CONTIG, GEMM_R_CONTIG>(dy, N, w, K, M, K, N, epi);
}

extern "C" void cuda_linear_backward_weight_sgd(float *w, float *vw, float *b, float *vb, const float *dy,
                                                const float *x, int M, int N, int K, float lr, float mu)
{
    /* GEMM (m, n, k) = (N, K, M), the batch reduced: A = dY [M][N] is k x m;
     * B = X [M][K] is k x n. */
    const GemmEpiSgd epi = {w, cuda_twin_of(w), vw, K, lr, mu};
    gemm_run<GemmTileWgrad, GEMM_R_CONTIG, GEMM_R_CONTIG>(dy, N, x, K, N, K, M, epi);
    if (b && N > 0) {
        bias_sgd_kernel<<<(N + BIAS_COLS - 1) / BIAS_COLS, dim3(BIAS_COLS, BIAS_SLICES), 0, snn_stream()>>>(
            b, vb, dy, M, N, lr, mu);
        CUDA_CHECK_LAUNCH();
    }
}

extern "C" void cuda_linear_weight_grad(float *gw, const float *dy, const float *x, int M, int N, int K)
{
    /* the GEMM of cuda_linear_backward_weight_sgd, stored */
    gemm_run<GemmTileWgrad, GEMM_R_CONTIG, GEMM_R_CONTIG>(dy, N, x, K, N, K, M, GemmEpiStore{gw, K});
}

extern "C" cuda_gemm_counts cuda_gemm_counts_now(void)
{
    cuda_gemm_counts c = {0, 0, 0};
#ifdef CONFIG_GEMM_WGMMA
    c.wgmma = gemm_wgmma_count();
#endif
#ifdef CONFIG_GEMM_TENSOR_CORES
    c.mma_twins = gemm_mma_twin_count();
    c.split_k = cuda_gemm_split_k_count();
#endif
    return c;
}

extern "C" cuda_gemm_path cuda_gemm_path_since(cuda_gemm_counts before)
{
    const cuda_gemm_counts now = cuda_gemm_counts_now();
    cuda_gemm_path p = {now.wgmma > before.wgmma, now.mma_twins > before.mma_twins, 0};
#ifdef CONFIG_GEMM_TENSOR_CORES
    if (now.split_k > before.split_k)
        p.split_slices = cuda_gemm_split_k_last_slices();
#endif
    return p;
}
