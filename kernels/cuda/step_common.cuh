/* The training step's device code that every schedule shares. The layered ops (kernels/cuda/ops.cu) and the
 * three fused kernels (kernels/cuda/fused/) differ in how they split a step across threads and blocks, not
 * in what a step computes; what it computes is here, once:
 *
 *   shapes          integer helpers for compile-time extents
 *   reductions      sums and the first arg-max over G adjacent lanes; a block's loss and count
 *   the batch       a row's sample, its pixels translated and normalised (also 4 at a time to 16 bits)
 *   softmax         a row's softmax, cross-entropy and logit gradients, one tie rule
 *   dropout         a training step's draws
 *   parameters      the optimizer's update of one parameter beside its moments, a bias from its output
 *                   gradient, a block of a tensor and its moments between the model and shared memory
 *
 * Every function gives the host engine's value (kernels/host/) up to the order of a sum, which each one
 * fixes, so that every kernel is deterministic. */
#ifndef SNN_CUDA_STEP_COMMON_CUH
#define SNN_CUDA_STEP_COMMON_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include <cuda_runtime.h>

#include "kernels/cuda/twin.cuh"
#include "kernels/noise.h"
#include "kernels/optim.h"
#include "snn_config.h"

/* ---------------------------------------------------------------------------
 * shapes
 * ------------------------------------------------------------------------- */

__host__ __device__ constexpr int snn_round_up(int a, int b) { return (a + b - 1) / b * b; }
__host__ __device__ constexpr int snn_imax(int a, int b) { return a > b ? a : b; }
__host__ __device__ constexpr int snn_imin(int a, int b) { return a < b ? a : b; }
/* Whether p allows accesses of `bytes` (a power of two) at once: a launcher's choice of vector width. */
static inline bool snn_aligned(const void *p, uintptr_t bytes) { return ((uintptr_t)p & (bytes - 1)) == 0; }

/* ---------------------------------------------------------------------------
 * reductions over G adjacent lanes (G a power of two, at most 32; every lane of the warp calls)
 * ------------------------------------------------------------------------- */

/* The sum of v over the G lanes: a butterfly, so that every lane adds the same pairs in the same order and
 * holds the same sum; at halving distances (G / 2, ..., 1), or doubling ones (1, ..., G / 2) where a kernel
 * has always added in that order (another order changes FP32 results in their last bit). */
template <int G, bool HALVING = true, class T> static __device__ __forceinline__ T snn_lanes_sum(T v)
{
#pragma unroll
    for (int i = 1; i < G; i *= 2)
        v += __shfl_xor_sync(0xffffffffu, v, HALVING ? G / 2 / i : i);
    return v;
}

/* The maximum of v over the G lanes and, of the lanes' args that hold it, the least: a row's first arg-max
 * wherever its classes lie. */
template <int G> static __device__ __forceinline__ void snn_lanes_argmax(float &v, int &arg)
{
#pragma unroll
    for (int o = G / 2; o > 0; o /= 2) {
        const float vo = __shfl_xor_sync(0xffffffffu, v, o);
        const int ao = __shfl_xor_sync(0xffffffffu, arg, o);
        const bool take = (vo > v) | ((vo == v) & (ao < arg)); /* no branch: both sides are cheap */
        v = take ? vo : v;
        arg = take ? ao : arg;
    }
}

/* A loss and a count summed over the block's THREADS threads (a power of two) in a tree of fixed order:
 * thread 0 gets the sums. Every thread of the block calls it. */
template <int THREADS> static __device__ __forceinline__ void snn_block_sums(double &loss, int &count)
{
    static_assert((THREADS & (THREADS - 1)) == 0, "snn_block_sums: a power of two threads");
    __shared__ double s_loss[THREADS];
    __shared__ int s_count[THREADS];
    const int t = threadIdx.x;
    s_loss[t] = loss;
    s_count[t] = count;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            s_loss[t] += s_loss[t + half];
            s_count[t] += s_count[t + half];
        }
        __syncthreads();
    }
    loss = s_loss[0];
    count = s_count[0];
}

/* ---------------------------------------------------------------------------
 * the batch (kernels/ops_proto.h, gather_batch)
 * ------------------------------------------------------------------------- */

/* The sample in row i of the batch whose first row is `base` in the order (or in sample order, order NULL).
 */
static __device__ __forceinline__ long snn_gather_sample(const int32_t *order, long base, int i)
{
    return order ? (long)order[base + i] : base + i;
}

/* Byte j of the image px in row i of training step `step`'s batch: translated by the row's draw where the
 * step augments (noise.epoch given, CONFIG_TRAIN_AUGMENT_SHIFT), else as stored. */
static __device__ __forceinline__ uint8_t snn_gather_byte(const uint8_t *px, int j, int i, int32_t step,
                                                          const snn_noise &noise)
{
    if (!snn_noise_translates(noise))
        return px[j];
    return snn_shifted_pixel(px, j, snn_shift_of(noise.key, *noise.epoch, step, i));
}

/* A pixel byte normalised: (c / 255 - mean) / std. */
static __host__ __device__ __forceinline__ float snn_gather_pixel(uint8_t c, float mean, float std)
{
    return ((float)c / 255.0f - mean) / std;
}

/* The same in one multiply-add, c * SNN_PIXEL_FMA_SCALE + SNN_PIXEL_FMA_OFFSET: rounded to 16 bits, the
 * same bits as snn_gather_pixel's two divisions for every byte where snn_pixels_op_exact() (the kernels
 * that use it, fused/mma16.cuh, check before they run), and work for the arithmetic pipes where a table would
 * load from shared memory, the pipe a resident kernel's first layer is bound by. */
constexpr float SNN_PIXEL_FMA_SCALE = 1.0f / (255.0f * SNN_PIXEL_STD),
                SNN_PIXEL_FMA_OFFSET = -SNN_PIXEL_MEAN / SNN_PIXEL_STD;

/* Byte k of four as a float: its bits under 2^23's exponent, less 2^23. */
static __device__ __forceinline__ float snn_byte_value(uint32_t four, int k)
{
    return __int_as_float((int)__byte_perm(four, 0x4b000000u, 0x7440u + (unsigned)k)) - 8388608.0f;
}
static __device__ __forceinline__ float snn_pixel_fma(uint32_t four, int k)
{
    return fmaf(snn_byte_value(four, k), SNN_PIXEL_FMA_SCALE, SNN_PIXEL_FMA_OFFSET);
}
/* a / b without a division, rb = RN(1 / b): the product corrected once by its remainder. Not correctly
 * rounded for every a and b, but the same bits as snn_gather_pixel's two IEEE divisions for every byte of
 * both datasets (snn_pixel_divided, checked by snn_pixels_op_exact), with no slow path, which a division of
 * zero takes. */
static __host__ __device__ __forceinline__ float snn_div_by(float a, float b, float rb)
{
    const float q = a * rb;
    return fmaf(fmaf(-q, b, a), rb, q);
}
constexpr float SNN_PIXEL_RCP_255 = 1.0f / 255.0f, SNN_PIXEL_RCP_STD = 1.0f / SNN_PIXEL_STD;
/* Byte value c normalised in FP32: snn_gather_pixel's value, by snn_div_by. */
static __host__ __device__ __forceinline__ float snn_pixel_divided(float c)
{
    return snn_div_by(snn_div_by(c, 255.0f, SNN_PIXEL_RCP_255) - SNN_PIXEL_MEAN, SNN_PIXEL_STD,
                      SNN_PIXEL_RCP_STD);
}
/* Four pixel bytes normalised and rounded: two mma.sync operand registers, the first pair low. */
static __device__ __forceinline__ uint2 snn_pixels_twin4(uint32_t four)
{
    return make_uint2(snn_twin_bits2(snn_pixel_fma(four, 0), snn_pixel_fma(four, 1)),
                      snn_twin_bits2(snn_pixel_fma(four, 2), snn_pixel_fma(four, 3)));
}

/* ---------------------------------------------------------------------------
 * softmax and cross-entropy (kernels/ops_proto.h, softmax_xent)
 * ------------------------------------------------------------------------- */

/* One row's softmax over the classes, held by G adjacent lanes: lane q holds classes q, q + G, ... in z[0],
 * z[1], ... (-INFINITY where there is no such class or no row). Every lane of the warp constructs one; after
 * it, every lane of the G holds the row's maximum zmax, its first arg-max arg (the host's tie rule; a row
 * with a NaN logit has a NaN loss, which the engine refuses, and an arg-max that depends on G) and
 * sum = the sum of exp(z - zmax), added in the lane's class order and then by snn_lanes_sum<G, HALVING>; e[i]
 * is its class's exp(z - zmax) (0 for no class). */
template <int G, int PER, bool HALVING = true> struct SnnRowSoftmax {
    static_assert(PER * G >= SNN_CLASSES, "softmax: every class on a lane");
    float e[PER], zmax, sum;
    int arg;
    static __device__ __forceinline__ int class_of(int i) { return (int)(threadIdx.x % G) + i * G; }
    __device__ __forceinline__ explicit SnnRowSoftmax(const float (&z)[PER])
    {
        float m = z[0]; /* the lane's first class starts the max (-INFINITY where it has none) */
        int a = class_of(0) < SNN_CLASSES ? class_of(0) : SNN_CLASSES;
#pragma unroll
        for (int i = 1; i < PER; i++)
            if (class_of(i) < SNN_CLASSES && z[i] > m) {
                m = z[i];
                a = class_of(i);
            }
        snn_lanes_argmax<G>(m, a);
        float total = 0.0f;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            e[i] = class_of(i) < SNN_CLASSES ? expf(z[i] - m) : 0.0f;
            total = i ? total + e[i] : e[i]; /* e >= 0: the same as 0 + e */
        }
        zmax = m;
        arg = a;
        sum = snn_lanes_sum<G, HALVING>(total);
    }
    /* The row's loss, from its logits `row` in memory (label smoothing reads them all), as the host's. */
    __device__ __forceinline__ float loss(const float *row, int label, bool training) const
    {
        return snn_xent_loss(logf(sum), zmax, row, label, training);
    }
    /* The gradient of the batch's mean loss (of `rows` rows) by the lane's i-th class's logit. */
    __device__ __forceinline__ float grad(int i, int label, int rows) const
    {
        return (e[i] / sum - snn_xent_target(class_of(i), label)) * (1.0f / (float)rows);
    }
};

/* ---------------------------------------------------------------------------
 * dropout (kernels/noise.h)
 * ------------------------------------------------------------------------- */

/* Which of n consecutive elements from index survive (snn_dropout_keeps_run), for SnnStepDraws: one copy of
 * the Philox rounds in a kernel, called from each of a GEMM epilogue's unrolled runs (inlined there, they
 * grew a GEMM's code to three times its size); by value, so that no draws object needs an address. */
static __device__ __noinline__ uint32_t snn_step_keeps_run(uint32_t key0, uint32_t key1, int32_t epoch,
                                                           int32_t step, int layer, uint32_t index, int n)
{
    const uint32_t key[2] = {key0, key1};
    return snn_dropout_keeps_run(key, epoch, step, layer, index, n);
}

/* A training step's draws: the run's key, the step's epoch and step. drop() is the identity in a build
 * without dropout; its condition depends on I so that such a build compiles no draw. */
struct SnnStepDraws {
    uint32_t key[2];
    int32_t epoch, step;
    template <int I = 0> __device__ __forceinline__ float drop(int layer, uint32_t index, float v) const
    {
        if constexpr (I == 0 && SNN_DROPOUT > 0.0f)
            return snn_dropout(key, epoch, step, layer, index, v);
        return v;
    }
    static constexpr bool READS = false; /* drawn, not read (GemmEpiDropout) */
    /* which of n consecutive elements from index survive */
    __device__ __forceinline__ uint32_t keeps_run(int layer, uint32_t index, int n) const
    {
        return snn_step_keeps_run(key[0], key[1], epoch, step, layer, index, n);
    }
};

/* ---------------------------------------------------------------------------
 * parameters (kernels/optim.h)
 * ------------------------------------------------------------------------- */

/* V floats (1 or 4; 4: 16-byte aligned) at f loaded into v, or stored from it, in one access. */
template <int V> static __device__ __forceinline__ void snn_floats_load(const float *f, float (&v)[V])
{
    static_assert(V == 1 || V == 4, "one float or four");
    if constexpr (V == 4)
        *reinterpret_cast<float4 *>(v) = *reinterpret_cast<const float4 *>(f);
    else
        v[0] = *f;
}
template <int V> static __device__ __forceinline__ void snn_floats_store(float *f, const float (&v)[V])
{
    static_assert(V == 1 || V == 4, "one float or four");
    if constexpr (V == 4)
        *reinterpret_cast<float4 *>(f) = *reinterpret_cast<const float4 *>(v);
    else
        *f = v[0];
}

/* V floats at f (V = 4: 16-byte aligned, one access), loaded or stored with an L2 eviction priority: LAST
 * for what every step reads and writes again (the parameters and their optimizer state), kept in L2 ahead of
 * what streams through it once; FIRST for what is read once (a stored gradient). A hint (sm80 and later;
 * elsewhere plain accesses): the same values either way. */
template <bool LAST> struct SnnL2Hint {
    uint64_t policy;
    __device__ __forceinline__ SnnL2Hint()
    {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        if constexpr (LAST)
            asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
        else
            asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#else
        policy = 0;
#endif
    }
    template <int V> __device__ __forceinline__ void load(const float *f, float (&v)[V]) const
    {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        if constexpr (V == 4)
            asm volatile("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                         : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
                         : "l"(f), "l"(policy)
                         : "memory");
        else
            asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;"
                         : "=f"(v[0])
                         : "l"(f), "l"(policy)
                         : "memory");
#else
        snn_floats_load<V>(f, v);
#endif
    }
    template <int V> __device__ __forceinline__ void store(float *f, const float (&v)[V]) const
    {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        if constexpr (V == 4)
            asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(f), "f"(v[0]),
                         "f"(v[1]), "f"(v[2]), "f"(v[3]), "l"(policy)
                         : "memory");
        else
            asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(f), "f"(v[0]), "l"(policy)
                         : "memory");
#else
        snn_floats_store<V>(f, v);
#endif
    }
};

/* The resident fused kernels' operand (fused/mma16.cuh): a 16-bit twin's bits (BF16, FP16); in TF32 an FP32
 * word rounded to TF32 as the layered mma.sync kernels round their operands (cvt.rna); in FP32 the word
 * itself. */
#if defined(CONFIG_PRECISION_TF32) || defined(CONFIG_PRECISION_FP32)
typedef uint32_t snn_op;
#else
typedef snn_twin snn_op;
#endif
/* An FP32 word's bits rounded to TF32 (10 mantissa bits, to nearest, ties away), as cvt.rna.tf32.f32 rounds
 * finite values: a value in FP32's layout, which PTX leaves cvt's result to the implementation (only mma
 * reads that). */
static __host__ __device__ __forceinline__ uint32_t snn_tf32_rounded_bits(uint32_t u)
{
    return (u + 0x1000u) & 0xffffe000u;
}
/* v rounded to the operands' precision, as bits */
static __host__ __device__ __forceinline__ snn_op snn_op_bits(float v)
{
#if defined(CONFIG_PRECISION_TF32) && defined(__CUDA_ARCH__)
    return sm80_cvt_tf32(v);
#elif defined(CONFIG_PRECISION_TF32) || defined(CONFIG_PRECISION_FP32)
    uint32_t u;
    memcpy(&u, &v, 4);
#ifdef CONFIG_PRECISION_TF32
    u = snn_tf32_rounded_bits(u);
#endif
    return u;
#else
    return snn_twin_bits(v);
#endif
}
/* v rounded as an operand holds it, as a float */
static __device__ __forceinline__ float snn_op_rounded(float v)
{
#if defined(CONFIG_PRECISION_TF32)
    return __uint_as_float(snn_tf32_rounded_bits(__float_as_uint(v)));
#elif defined(CONFIG_PRECISION_FP32)
    return v;
#else
    return snn_twin_rounded(v);
#endif
}

/* N distinct parameters with gradients g[i], each where at(i, w, m, twin) names it (false: padding, left
 * alone): *w and its moments at m[0], m[stride] updated, its twin (if any) rewritten: a 16-bit twin, or a
 * resident fused kernel's operand (Twin snn_op, where it is not the twin: TF32, FP32). Every
 * parameter's loads issue before any store, which separate updates do not allow the compiler (it cannot
 * prove their addresses distinct), so that the N chains of arithmetic overlap (docs/PERF.md v48). PAIRED:
 * parameter 2j + 1's twin follows 2j's, which is aligned for both, so that one store writes the two. */
template <int N, class Twin = snn_twin, bool PAIRED = false, class At>
static __device__ __forceinline__ void snn_param_updates(const float (&g)[N], int stride, const snn_rate &r,
                                                         At at)
{
    static_assert(!PAIRED || N % 2 == 0, "snn_param_updates: paired twins come in pairs");
    float *w[N], *m[N], v[N], s[N][2] = {};
    Twin *twin[N];
    bool on[N];
#pragma unroll
    for (int i = 0; i < N; i++) {
        on[i] = at(i, w[i], m[i], twin[i]);
        v[i] = on[i] ? *w[i] : 0.0f;
#pragma unroll
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            s[i][k] = on[i] ? m[i][k * stride] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < N; i++)
        v[i] = snn_update(v[i], g[i], s[i], r);
    auto bits = [](float x) -> Twin {
        if constexpr (std::is_same<Twin, snn_twin>::value)
            return snn_twin_bits(x);
        else
            return snn_op_bits(x);
    };
#pragma unroll
    for (int i = 0; i < N; i++)
        if (on[i]) {
            *w[i] = v[i];
#pragma unroll
            for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
                m[i][k * stride] = s[i][k];
            if (!PAIRED && twin[i])
                *twin[i] = bits(v[i]);
        }
    if constexpr (PAIRED) {
#pragma unroll
        for (int i = 0; i < N; i += 2)
            if (on[i] && on[i + 1] && twin[i]) {
                if constexpr (sizeof(Twin) == 2) {
                    const uint32_t two = (uint32_t)bits(v[i]) | (uint32_t)bits(v[i + 1]) << 16;
                    *reinterpret_cast<uint32_t *>(twin[i]) = two;
                } else
                    *reinterpret_cast<uint2 *>(twin[i]) = make_uint2(bits(v[i]), bits(v[i + 1]));
            } else {
#pragma unroll
                for (int j = i; j < i + 2; j++)
                    if (on[j] && twin[j])
                        *twin[j] = bits(v[j]);
            }
    }
}

/* Parameter *w with gradient g and its moments at m[0], m[stride]: updated, its twin (if any) rewritten. */
static __device__ __forceinline__ void snn_param_update(float *w, float *m, int stride, snn_twin *twin,
                                                        float g, const snn_rate &r)
{
    const float gs[1] = {g};
    snn_param_updates(gs, stride, r, [&](int, float *&pw, float *&pm, snn_twin *&pt) {
        pw = w, pm = m, pt = twin;
        return true;
    });
}

/* The sum of column `col` of a[rows][ld] by one warp: each lane's strided rows in order, then
 * snn_lanes_sum; every lane gets it. */
static __device__ __forceinline__ float snn_column_sum(const float *a, int ld, int rows, int col)
{
    float v = 0.0f;
    for (int r = threadIdx.x % 32; r < rows; r += 32)
        v += a[r * ld + col];
    return snn_lanes_sum<32>(v);
}

/* The bias gradients of `cols` columns of dy[rows][ld], a warp a column, and the update of b[col] (moments
 * at bm[col], bm[col + stride]). The block's warps from first_warp on all call it. */
template <int THREADS>
static __device__ __forceinline__ void snn_bias_update(float *b, float *bm, int stride, const float *dy,
                                                       int ld, int rows, int cols, const snn_rate &r,
                                                       int first_warp = 0)
{
    for (int col = threadIdx.x / 32 - first_warp; col < cols; col += THREADS / 32 - first_warp) {
        const float g = snn_column_sum(dy, ld, rows, col);
        if (threadIdx.x % 32 == 0)
            snn_param_update(&b[col], &bm[col], stride, nullptr, g, r);
    }
}

/* A block of a parameter tensor, rows x cols: in shared memory at s (row stride sld), its moments at
 * sm + k * mstride, its twin at t (row stride tld; none where NULL); in the model at w[at(i, j)] and its
 * state st, at(i, j) < 0 where (i, j) is padding. in: model to shared memory (with the twin), else back.
 * The block's threads all call it. */
template <int THREADS, class At>
static __device__ void snn_param_copy(bool in, int rows, int cols, float *s, int sld, float *sm, int mstride,
                                      snn_twin *t, int tld, float *w, const snn_state &st, At at)
{
    for (int e = threadIdx.x; e < rows * cols; e += THREADS) {
        const int i = e / cols, j = e % cols;
        const long gi = at(i, j);
        if (gi < 0)
            continue;
        float *v = s + i * sld + j;
        if (in) {
            *v = w[gi];
            for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
                sm[k * mstride + i * sld + j] = st.m[k][gi];
            if (t)
                t[i * tld + j] = snn_twin_bits(*v);
        } else {
            w[gi] = *v;
            for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
                st.m[k][gi] = sm[k * mstride + i * sld + j];
        }
    }
}

/* A block's shared memory, bytes (a multiple of 16) from smem, zeroed: padding then reads as 0. */
template <int THREADS> static __device__ __forceinline__ void snn_smem_clear(unsigned char *smem, int bytes)
{
    for (int i = threadIdx.x; i < bytes / 16; i += THREADS)
        reinterpret_cast<uint4 *>(smem)[i] = make_uint4(0, 0, 0, 0);
}

#endif
