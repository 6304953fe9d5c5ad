/* What the kernel tests share: the first reason a case failed, and seeded
 * random data that is never zero. For C and CUDA C++ alike. */
#ifndef SNN_TEST_UTIL_H
#define SNN_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

__attribute__((format(printf, 2, 3))) static inline void set_why(char *why, const char *fmt, ...)
{
    if (why[0]) /* keep the first reason */
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, 256, fmt, ap);
    va_end(ap);
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static inline uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1], never zero: (k + 1/2) / 2^23 - 1 for a 24-bit k. */
static inline float rng_uniform(void) { return (float)(((double)(rng_next() >> 40) + 0.5) * 0x1p-23 - 1.0); }

#endif
