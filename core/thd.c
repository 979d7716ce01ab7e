/* thd: per-rank token counts under sequence packing (THD), and hybridep's padded group maximum.
 *
 * A rank's microbatch is a buffer of seq_length * micro_batch_size tokens filled greedily with
 * sequences whose lengths are drawn from --seqlen-dist; the first sequence that does not fit ends
 * the packing, which is what leaves ranks with different counts (docs/schedule.md, section 4 (THD)).
 */
#include <math.h>

#include "ep_route.h"

#define TAG_THD 0x746864ULL /* "thd" */

static int clamp_len(double x, int lo, int hi) {
    if (!(x >= lo)) /* also catches NaN */
        return lo;
    if (x > hi) return hi;
    return (int)x;
}

int ep_thd_seqlen(const ep_config *cfg, ep_rng *rng) {
    int hi = cfg->seq_length, lo = cfg->seqlen_min;
    if (lo > hi) lo = hi;
    double mean = cfg->seqlen_mean;
    switch (cfg->seqlen_dist) {
    case EP_SEQLEN_UNIFORM: {
        /* integers in [lo, 2*mean - lo], whose mean is `mean` before clamping */
        double top = 2.0 * mean - lo;
        if (top <= lo) return clamp_len(mean, lo, hi);
        double span = top - lo + 1.0;
        return clamp_len(lo + floor(ep_rng_uniform(rng) * span), lo, hi);
    }
    case EP_SEQLEN_LOGNORMAL: {
        /* exp(N(mu, sigma^2)) has mean exp(mu + sigma^2/2) */
        double sigma = EP_THD_LOGNORMAL_SIGMA;
        double mu = log(mean) - 0.5 * sigma * sigma;
        return clamp_len(floor(exp(mu + sigma * ep_rng_normal(rng)) + 0.5), lo, hi);
    }
    case EP_SEQLEN_FIXED:
    default:
        return clamp_len(mean, lo, hi);
    }
}

int ep_thd_tokens(const ep_config *cfg, int microbatch, int rank) {
    int64_t cap = (int64_t)cfg->seq_length * cfg->micro_batch_size;
    ep_rng rng;
    ep_rng_seed(
        &rng, ep_hash4(cfg->seed, (uint64_t)(int64_t)microbatch, (uint64_t)(int64_t)rank, TAG_THD));
    int64_t held = 0;
    for (;;) {
        int len = ep_thd_seqlen(cfg, &rng); /* <= seq_length <= cap: the first always fits */
        if (held + len > cap) break;
        held += len;
    }
    return (int)held;
}

int ep_thd_padded_max(const int *tokens, int n) {
    int m = 0;
    for (int i = 0; i < n; i++)
        if (tokens[i] > m) m = tokens[i];
    return (m + 63) / 64 * 64;
}
