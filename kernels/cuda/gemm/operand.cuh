/* The staging of one GEMM operand tile from global into shared memory, for the SIMT and the mma.sync
 * kernels: cp.async where the target has it, else through registers. Zeros past K; rows past the matrix are
 * zeros or (16-byte copies) its last row again, which only C's unstored rows see: any M, N, K. */
#ifndef SNN_GEMM_OPERAND_CUH
#define SNN_GEMM_OPERAND_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/gemm/tile.cuh"
#if SNN_ARCH_HAS_CP_ASYNC
#include "arch/sm80/cp_async.cuh"
#endif

static __host__ __device__ constexpr int gemm_gcd(int a, int b) { return b ? gemm_gcd(b, a % b) : a; }

/* V consecutive floats into shared memory, as floats or rounded to FP16. */
template <int V>
static __device__ __forceinline__ void gemm_sts(float *dst, const float *d)
{
    if constexpr (V == 4)
        *reinterpret_cast<float4 *>(dst) = make_float4(d[0], d[1], d[2], d[3]);
    else
        dst[0] = d[0];
}
template <int V>
static __device__ __forceinline__ void gemm_sts(__half *dst, const float *d)
{
    if constexpr (V == 4) {
        const __half2 lo = __floats2half2_rn(d[0], d[1]), hi = __floats2half2_rn(d[2], d[3]);
        *reinterpret_cast<uint2 *>(dst) =
            make_uint2(*reinterpret_cast<const unsigned *>(&lo), *reinterpret_cast<const unsigned *>(&hi));
    } else {
        dst[0] = __float2half_rn(d[0]);
    }
}

/* One operand's tile, ROWS rows (Tile::BM for A, BN for B) by BK, of global layout LAYOUT, loaded VEC
 * elements at a time from elements G (float, or a 16-bit twin: kernels/cuda/twin.h) into a shared tile of T
 * (float, or __half: rounded on the way; a twin's own type: copied) of layout SMEM_LAYOUT, STRIDE elements
 * between its lines. An MN-major operand stays MN-major; a K-major one stays K-major or is transposed.
 *
 * Along its contiguous direction in global memory ("fast": k if K-major, rows if MN-major) the tile is kF
 * items of VEC elements, along the other ("slow") kS. The threads form a kTF x kTS grid over it, each loading
 * the kP x kQ items (tf + p*kTF, ts + q*kTS): one pointer plus constant steps, a few compares as predicates.
 * Kept as is, kTF = gcd(kF, threads): coalesced reads, contiguous shared stores. Transposed, kTF is at most 8
 * items (VEC = 1) or 2 (VEC = 4): a warp reads whole 32-byte sectors of 4 (16) rows, and with the stride an
 * odd multiple of 4 floats its 32 shared stores hit 32 banks. WHOLE_K: the caller guarantees K a multiple of
 * BK, so a K-major operand's 16-byte copies need no zero fill. */
template <class Tile, int LAYOUT, int ROWS, int VEC, int SMEM_LAYOUT, int STRIDE, class T = float, class G = float,
          bool WHOLE_K = false>
struct GemmOperand {
    static constexpr int BK = Tile::BK, THREADS = Tile::THREADS;
    static constexpr bool kKMajor = LAYOUT == GEMM_K_MAJOR; /* in global memory */
    static constexpr int kSmemLayout = SMEM_LAYOUT;
    static constexpr bool kTranspose = kKMajor && SMEM_LAYOUT == GEMM_MN_MAJOR;
    static constexpr int kStride = STRIDE;
    static constexpr int kSmemElems = (SMEM_LAYOUT == GEMM_MN_MAJOR ? BK : ROWS) * STRIDE;
    static constexpr int kF = kKMajor ? BK / VEC : ROWS / VEC;
    static constexpr int kS = kKMajor ? ROWS : BK;
    static constexpr int kTF = kTranspose ? gemm_gcd(kF, VEC == 1 ? 8 : 2) : gemm_gcd(kF, THREADS);
    static constexpr int kTS = THREADS / kTF;
    static constexpr int kP = kF / kTF;
    static constexpr int kQ = (kS + kTS - 1) / kTS;
    static constexpr int kRegs = kP * kQ * VEC;
    /* shared-tile steps of one fast item and of one slow index */
    static constexpr int kSmemF = kTranspose ? VEC * STRIDE : VEC;
    static constexpr int kSmemS = kTranspose ? 1 : STRIDE;
    static_assert(VEC == 1 || VEC * sizeof(G) == 16, "GemmOperand: VEC is 1 element or 16 bytes");
    static_assert(kKMajor ? BK % VEC == 0 : ROWS % VEC == 0, "GemmOperand: VEC must divide the tile");
    static_assert(THREADS % kTF == 0, "GemmOperand: thread grid");
    static_assert(SMEM_LAYOUT == GEMM_MN_MAJOR || kKMajor, "GemmOperand: an MN-major operand is staged MN-major");
    /* Whether slow index q of this thread lies in the tile (it may not when kTS does not divide kS). */
    static __device__ __forceinline__ bool in_tile(int ts, int q) { return kS % kTS == 0 || ts + q * kTS < kS; }

    /* The tile's origin (fast0, slow0) is (k0, r0) if K-major, (r0, k0) if MN-major; F and S bound the
     * matrix along fast and slow (Kd and R, or R and Kd). */
    static __device__ __forceinline__ void origin(int r0, int k0, int R, int Kd, int &fast0, int &slow0, int &F,
                                                  int &S)
    {
        fast0 = kKMajor ? k0 : r0;
        slow0 = kKMajor ? r0 : k0;
        F = kKMajor ? Kd : R;
        S = kKMajor ? R : Kd;
    }

#if SNN_ARCH_HAS_CP_ASYNC
    /* cp.async the tile at (r0, k0) of g (R rows, Kd deep) into s; zeros outside. */
    static __device__ __forceinline__ void issue(T *s, const G *g, int ld, int R, int Kd, int r0, int k0, int tid)
    {
        static_assert(VEC == 1 || !kTranspose, "cp.async cannot transpose: transposed operands load 1 float");
        static_assert(sizeof(T) == sizeof(G), "cp.async copies as is");
        static_assert(VEC > 1 || sizeof(G) == 4, "cp.async copies 16-bit elements 16 bytes at a time");
        int fast0, slow0, F, S;
        origin(r0, k0, R, Kd, fast0, slow0, F, S);
        const int tf = tid % kTF, ts = tid / kTF;
        const int f = fast0 + tf * VEC, sl = slow0 + ts;
        /* How the copies are addressed decides the K loop's registers and stalls (docs/PERF.md):
         * - 16-byte copies, a few per thread: the tile's origin (block-uniform) plus a 32-bit byte offset per
         *   copy kept across the K loop, so an address is one 64-bit add. Rows past the matrix (K-major) repeat
         *   its last row instead of a predicate: they feed only C's unstored rows, and predicates cost registers.
         * - 4-byte copies, dozens per thread: one address walking the lines, hidden from the compiler by the
         *   empty asm so that it does not keep every line's address (which spilled).
         * Zero fills read an address in the matrix (the tile's origin, or its row). */
        const G *tile = g + (size_t)slow0 * ld + fast0, *gp = tile + (size_t)ts * ld + tf * VEC;
        const char *tile_bytes = reinterpret_cast<const char *>(tile);
        T *sp = s + tf * kSmemF + ts * kSmemS;
#pragma unroll
        for (int q = 0; q < kQ; ++q, gp += (size_t)kTS * ld) {
            if constexpr (VEC == 1)
                asm("" : "+l"(gp));
            if (!in_tile(ts, q))
                continue;
            const bool s_ok = sl + q * kTS < S;
            const int slow = kKMajor ? min(ts + q * kTS, S - 1 - slow0) : ts + q * kTS;
            const unsigned line = (unsigned)(slow * ld) * (unsigned)sizeof(G); /* bytes */
#pragma unroll
            for (int p = 0; p < kP; ++p) {
                const int fp = f + p * kTF * VEC;
                T *dst = sp + p * kTF * kSmemF + q * kTS * kSmemS;
                const unsigned col = (unsigned)((tf + p * kTF) * VEC * sizeof(G)); /* bytes */
                if constexpr (VEC == 1) {
                    const bool ok = s_ok && fp < F;
                    sm80_cp_async_ca_4(dst, ok ? gp + p * kTF : tile, ok ? 4 : 0);
                } else if constexpr (WHOLE_K && kKMajor) {
                    sm80_cp_async_16(dst, tile_bytes + (line + col)); /* no fill size, no address select */
                } else {
                    const int n = kKMajor || s_ok ? min(max(F - fp, 0), VEC) : 0;
                    const unsigned at = kKMajor ? line + (n ? col : 0) : (n ? line + col : 0);
                    sm80_cp_async_16(dst, tile_bytes + at, n * (int)sizeof(G));
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

    /* Store what fetch loaded into the shared tile s (rounded to T). */
    static __device__ __forceinline__ void store(T *s, const float (&reg)[kRegs], int tid)
    {
        const int tf = tid % kTF, ts = tid / kTF;
        T *sp = s + tf * kSmemF + ts * kSmemS;
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
            if (!in_tile(ts, q))
                continue;
#pragma unroll
            for (int p = 0; p < kP; ++p) {
                const float *d = reg + (q * kP + p) * VEC;
                T *dst = sp + p * kTF * kSmemF + q * kTS * kSmemS;
                if constexpr (kTranspose) {
#pragma unroll
                    for (int j = 0; j < VEC; ++j)
                        gemm_sts<1>(dst + j * kStride, d + j);
                } else {
                    gemm_sts<VEC>(dst, d);
                }
            }
        }
    }
#endif
};

#endif
