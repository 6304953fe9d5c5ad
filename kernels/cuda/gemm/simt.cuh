/* The FP32 SIMT GEMM (builds without a tensor-core precision): C[m][n] = sum_k A(m,k) B(n,k), each element
 * summed by one thread as the chain acc = fmaf(a_k, b_k, acc), k = 0..K-1 from 0, as the host GEMM does, so
 * that the forward and input-gradient roles match it bitwise. Block, warp and lane tiles: gemm/tile.cuh.
 * Shared tiles are MN-major (a K-major operand is transposed on the way in), staged by gemm/pipeline.cuh;
 * loads past K are zero-filled and stores predicated: any M, N, K. */
#ifndef SNN_GEMM_SIMT_CUH
#define SNN_GEMM_SIMT_CUH

#include <cuda_runtime.h>

#include "arch/cuda/launch.cuh"
#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/launch.cuh"
#include "kernels/cuda/gemm/pipeline.cuh"
#include "kernels/cuda/gemm/tile.cuh"

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

/* The kernel's operands: MN-major float tiles. */
template <class Tile, int L, int ROWS, int VEC>
using GemmF32Operand = GemmOperand<Tile, L, ROWS, VEC, GEMM_MN_MAJOR, gemm_smem_stride(ROWS, L)>;

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

/* One block tile: C[m][n] = sum_k A(m,k) B(n,k) for m0 <= m < min(m0 + BM, M), n0 <= n < min(n0 + BN, N),
 * each through the epilogue epi, over the k tiles kt_begin .. kt_end - 1; A, B in layouts LA, LB, loaded
 * VA, VB floats at a time, staged in gemm_smem. The kernel below runs one per block; the fused step (kernels/cuda/fused/) several per block. */
template <class T, int LA, int LB, int VA, int VB, class Epi>
static __device__ __forceinline__ void gemm_f32_tile(float *gemm_smem, const float *__restrict__ A, int lda,
                                                     const float *__restrict__ B, int ldb, int M, int N, int K,
                                                     int m0, int n0, int kt_begin, int kt_end, const Epi &epi)
{
    using OpA = GemmF32Operand<T, LA, T::BM, VA>;
    using OpB = GemmF32Operand<T, LB, T::BN, VB>;

    const int tid = threadIdx.x;
    const int warp = tid / SNN_CUDA_WARP, lane = tid % SNN_CUDA_WARP;
    const int wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
    const int lm = lane / T::LANES_N, ln = lane % T::LANES_N;
    const int a_off = wm * T::WM + lm * T::VM;
    const int b_off = wn * T::WN + ln * T::VN;

    float acc[T::TM][T::TN];
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
        for (int j = 0; j < T::TN; ++j)
            acc[i][j] = 0.0f;

    gemm_mainloop<T, OpA, OpB>(gemm_smem, A, lda, B, ldb, M, N, K, m0, n0, kt_begin, kt_end,
                               [&](const float *As, const float *Bs) {
                                   gemm_stage_fma<T, OpA::kStride, OpB::kStride>(acc, As + a_off, Bs + b_off);
                               });

    /* the epilogue's two phases (gemm/epilogue.cuh) one row at a time: the row's loads, then its stores */
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

/* The block tile (blockIdx.y, blockIdx.x). */
template <class T, int LA, int LB, int VA, int VB, class Epi>
__global__ void __launch_bounds__(T::THREADS)
    gemm_f32_kernel(const float *__restrict__ A, int lda, const float *__restrict__ B, int ldb, int M, int N, int K,
                    Epi epi)
{
    snn_grid_wait();
    extern __shared__ __align__(16) float gemm_smem[];
    gemm_f32_tile<T, LA, LB, VA, VB>(gemm_smem, A, lda, B, ldb, M, N, K, blockIdx.y * T::BM, blockIdx.x * T::BN, 0,
                                     (K + T::BK - 1) / T::BK, epi);
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

/* The instance of gemm_f32_kernel with 4-float loads of each operand where its layout and alignment allow,
 * opted in to its shared memory. */
template <class T, int LA, int LB, class Epi>
static auto gemm_f32_instance(const float *A, int lda, const float *B, int ldb)
{
    constexpr int SMEM = T::stage_bytes(LA, LB) * GEMM_SMEM_STAGES;
    constexpr bool CAN_A = gemm_vec_allowed<T, LA, T::BM, true>(), CAN_B = gemm_vec_allowed<T, LB, T::BN, true>();
    const bool va = CAN_A && gemm_vec_aligned(A, lda), vb = CAN_B && gemm_vec_aligned(B, ldb);
    if constexpr (CAN_A && CAN_B)
        if (va && vb)
            return gemm_opted_in<gemm_f32_kernel<T, LA, LB, 4, 4, Epi>, SMEM>();
    if constexpr (CAN_A)
        if (va)
            return gemm_opted_in<gemm_f32_kernel<T, LA, LB, 4, 1, Epi>, SMEM>();
    if constexpr (CAN_B)
        if (vb)
            return gemm_opted_in<gemm_f32_kernel<T, LA, LB, 1, 4, Epi>, SMEM>();
    return gemm_opted_in<gemm_f32_kernel<T, LA, LB, 1, 1, Epi>, SMEM>();
}

/* C[M,N] = A . B^T through epi at tile T (M, N > 0), on the engine's stream. */
template <class T, int LA, int LB, class Epi>
static void gemm_f32_launch(const float *A, int lda, const float *B, int ldb, int M, int N, int K, const Epi &epi)
{
    const auto kernel = gemm_f32_instance<T, LA, LB, Epi>(A, lda, B, ldb);
    const GemmGrid g = gemm_grid<T, T::stage_bytes(LA, LB), GEMM_SMEM_STAGES>(M, N, 1, (K + T::BK - 1) / T::BK);
    SNN_LAUNCH(kernel, g.blocks, T::THREADS, g.smem, A, lda, B, ldb, M, N, K, epi);
}

#endif
