/* rng: the project's deterministic random numbers (docs/routing.md, "Determinism").
 *
 * splitmix64 expands a 64-bit seed into xoshiro256** state; ep_hash4 derives independent seeds from
 * tuples such as (seed, microbatch, layer, group), so every draw can seed its own generator and no
 * result depends on the order in which draws are made. Bit-exact on every platform: integer
 * arithmetic only, except the final conversions to double.
 */
#include <math.h>

#include "ep_route.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

void ep_rng_seed(ep_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    /* splitmix64 never yields four zero words, so the all-zero xoshiro state cannot occur */
}

uint64_t ep_rng_next(ep_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ep_rng_uniform(ep_rng *r) {
    return (double)(ep_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Marsaglia's polar method; the second variate is dropped so the generator carries no hidden state
 * and a draw consumes whole numbers of outputs only. */
double ep_rng_normal(ep_rng *r) {
    for (;;) {
        double u = 2.0 * ep_rng_uniform(r) - 1.0;
        double v = 2.0 * ep_rng_uniform(r) - 1.0;
        double q = u * u + v * v;
        if (q > 0.0 && q < 1.0) return u * sqrt(-2.0 * log(q) / q);
    }
}

/* Each word passes through the splitmix finaliser before it is folded in, so tuples that differ
 * in any position (or by a permutation) give unrelated seeds. */
uint64_t ep_hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    uint64_t in[4] = {a, b, c, d};
    uint64_t h = 0x6a09e667f3bcc909ULL;
    for (int i = 0; i < 4; i++) {
        uint64_t x = in[i] + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL;
        h ^= splitmix64(&x);
        h = rotl(h, 27) * 0x94d049bb133111ebULL + 0x2545f4914f6cdd1dULL;
    }
    uint64_t x = h;
    return splitmix64(&x);
}
