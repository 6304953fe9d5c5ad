#include "nn/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void snn_rng_seed(snn_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

uint64_t snn_rng_next(snn_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double snn_rng_uniform(snn_rng *r) { return (snn_rng_next(r) >> 11) * 0x1.0p-53; }

double snn_rng_normal(snn_rng *r)
{
    double u1 = 1.0 - snn_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = snn_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint32_t snn_rng_below(snn_rng *r, uint32_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, x; /* reject the biased tail */
    do
        x = snn_rng_next(r);
    while (x >= limit);
    return (uint32_t)(x % n);
}

void snn_rng_permutation(snn_rng *r, int32_t *out, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        out[i] = i;
    for (int32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int32_t j = (int32_t)snn_rng_below(r, (uint32_t)i + 1), t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}
