/* Operands for kernels/optim.h's snn_sqrtf_scaled and snn_divf_scaled, which must equal sqrtf and IEEE
 * division (to the bit but for a subnormal quotient): zeros, subnormals, the numerators around 2^-100 where
 * the division changes path, quotients about 2^-126, and random normals. For C and CUDA C++ alike. */
#ifndef SNN_TEST_SCALED_MATH_CASES_H
#define SNN_TEST_SCALED_MATH_CASES_H

#include <math.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "tests/test_util.h"

#define SCALED_MATH_CASES 40000

/* scaled_quotient_ok and what it calls, also for the GPU's sweep (tests/gpu/test_kernels.cu) */
#ifdef __CUDACC__
#define SCALED_HD __host__ __device__
#else
#define SCALED_HD
#endif

static inline float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline SCALED_HD uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* snn_divf_scaled's result q against IEEE's e: the same bits, or for a subnormal quotient one unit apart
 * with the same sign. Compared as bits: the host's flushed arithmetic would read subnormals as 0. */
static inline SCALED_HD int scaled_quotient_ok(float q, float e)
{
    const uint32_t a = float_bits(q), b = float_bits(e);
    if ((b & 0x7f800000u) == 0) /* e subnormal or 0 */
        return (a >> 31) == (b >> 31) && (a & 0x7fffffffu) - (b & 0x7fffffffu) + 1u <= 2u;
    return a == b;
}

/* r and q, the cases' snn_sqrtf_scaled and snn_divf_scaled however computed, against sqrtf and '/' in the
 * caller's arithmetic; the first mismatch into why, after `where`. */
static inline void scaled_math_compare(const char *where, const float *x, const float *m, const float *d,
                                       const float *r, const float *q, char *why)
{
    for (long i = 0; i < SCALED_MATH_CASES; i++) {
        const float er = sqrtf(x[i]), eq = m[i] / d[i];
        if (float_bits(r[i]) != float_bits(er))
            set_why(why, "%s: sqrt of bits %08x = %08x, sqrtf gives %08x", where, float_bits(x[i]),
                    float_bits(r[i]), float_bits(er));
        if (!scaled_quotient_ok(q[i], eq))
            set_why(why, "%s: bits %08x / %08x = %08x, '/' gives %08x", where, float_bits(m[i]), float_bits(d[i]),
                    float_bits(q[i]), float_bits(eq));
    }
}

/* IEEE's arithmetic, the GPU's, on the host until subnormals_restore: x86's FTZ and DAZ off (the host engine
 * sets them, kernels/host/subnormals.c). Elsewhere the host's arithmetic stays as it is. */
#if defined(__x86_64__) || defined(__i386__)
#define SUBNORMALS_SWITCH 1
static inline unsigned subnormals_kept(void)
{
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr & ~0x8040u);
    return csr;
}
static inline void subnormals_restore(unsigned csr) { _mm_setcsr(csr); }
#else
#define SUBNORMALS_SWITCH 0
static inline unsigned subnormals_kept(void) { return 0; }
static inline void subnormals_restore(unsigned csr) { (void)csr; }
#endif

/* x[i] >= 0; m[i] of either sign, d[i] > 0; SCALED_MATH_CASES of each. */
static inline void scaled_math_cases(float *x, float *m, float *d)
{
    for (long i = 0; i < SCALED_MATH_CASES; i++) {
        const uint32_t r = (uint32_t)rng_next(), sign = (uint32_t)(i & 1) << 31;
        const float unit = 1.0f + fabsf(rng_uniform()); /* [1, 2) */
        switch (i % 8) {
        case 0: /* subnormal, or zero */
            x[i] = bits_float(r & 0x007fffffu);
            m[i] = bits_float(sign | (r & 0x007fffffu));
            d[i] = ldexpf(unit, (int)(r >> 24) % 60 - 30);
            break;
        case 1: /* a few ulps either side of 2^-100 and of FLT_MIN */
            x[i] = bits_float(0x00800000u + (r % 64) - 32);
            m[i] = bits_float(sign | (0x0d800000u + (r % 64) - 32));
            d[i] = ldexpf(unit, (int)(r >> 24) % 60 - 30);
            break;
        case 2: /* quotients about 2^-126: m = 2^-126 d, d then nudged a few ulps */
            x[i] = ldexpf(unit, -120 - (int)(r % 8));
            m[i] = bits_float(sign | (0x00800000u + (r & 0x0fffffffu)));
            d[i] = bits_float(0x3f800000u + (r & 0x0fffffffu) + (r >> 28) - 8);
            break;
        case 3: /* quotients about 2^-126 from the subnormal side: d just above |m| / 2^-126 */
            x[i] = bits_float(r & 0x00ffffffu);
            m[i] = bits_float(sign | (0x0c000000u + (r & 0x00ffffffu)));
            d[i] = ldexpf(fabsf(m[i]), 126) * (1.0f + ldexpf((float)(r >> 24), -30));
            break;
        default: /* normal, across exponents */
            x[i] = ldexpf(unit, (int)(r % 240) - 126);
            m[i] = (i & 1 ? -1.0f : 1.0f) * ldexpf(unit, (int)(r % 240) - 126);
            d[i] = ldexpf(1.0f + fabsf(rng_uniform()), (int)(r >> 24) % 100 - 50);
        }
    }
    x[0] = 0.0f, x[1] = -0.0f, x[2] = INFINITY;
    m[0] = 0.0f, m[1] = -0.0f, d[2] = INFINITY, d[3] = INFINITY;
}

#endif
