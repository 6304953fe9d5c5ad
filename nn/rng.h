/* The one random generator: xoshiro256** seeded through splitmix64. Every
 * draw of a run (initialisation, then each epoch's order) comes from it. */
#ifndef SNN_RNG_H
#define SNN_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} snn_rng;

void snn_rng_seed(snn_rng *r, uint64_t seed);
uint64_t snn_rng_next(snn_rng *r);
double snn_rng_uniform(snn_rng *r);            /* [0, 1), 53 bits */
double snn_rng_normal(snn_rng *r);             /* N(0, 1), Box-Muller */
uint32_t snn_rng_below(snn_rng *r, uint32_t n); /* uniform in [0, n), unbiased */
void snn_rng_permutation(snn_rng *r, int32_t *out, int32_t n);

#endif
