/* THD token counts: determinism, bounds, variation, the greedy packing rule, length distributions
 * and hybridep's padded maximum. */
#include <CUnit/CUnit.h>
#include <math.h>

#include "ep_route.h"

static void thd_cfg(ep_config *c, ep_seqlen_dist d, int seq, int mbs, int mean, int min) {
    ep_config_defaults(c);
    c->sequence_packing = 1;
    c->seqlen_dist = d;
    c->seq_length = seq;
    c->micro_batch_size = mbs;
    c->seqlen_mean = mean;
    c->seqlen_min = min;
    c->seed = 77;
    ep_config_resolve(c); /* built by hand: mean 0 becomes seq_length / 2 */
}

static void test_deterministic(void) {
    ep_config c;
    thd_cfg(&c, EP_SEQLEN_LOGNORMAL, 4096, 2, 900, 32);
    int a = ep_thd_tokens(&c, 3, 5);
    ep_thd_tokens(&c, 0, 0); /* unrelated call in between */
    CU_ASSERT_EQUAL(ep_thd_tokens(&c, 3, 5), a);
    /* rank, microbatch and seed each change the counts somewhere */
    int diff_rank = 0, diff_mb = 0, diff_seed = 0;
    ep_config c2 = c;
    c2.seed++;
    for (int i = 0; i < 20; i++) {
        diff_rank |= ep_thd_tokens(&c, i, 0) != ep_thd_tokens(&c, i, 1);
        diff_mb |= ep_thd_tokens(&c, 0, i) != ep_thd_tokens(&c, 1, i);
        diff_seed |= ep_thd_tokens(&c, i, i) != ep_thd_tokens(&c2, i, i);
    }
    CU_ASSERT_TRUE(diff_rank);
    CU_ASSERT_TRUE(diff_mb);
    CU_ASSERT_TRUE(diff_seed);
}

static void test_bounds_and_variation(void) {
    static const ep_seqlen_dist dists[] = {EP_SEQLEN_UNIFORM, EP_SEQLEN_LOGNORMAL};
    for (int d = 0; d < 2; d++) {
        ep_config c;
        thd_cfg(&c, dists[d], 4096, 1, 1000, 64);
        int lo = 1 << 30, hi = 0, ok = 1;
        double sum = 0;
        for (int mb = 0; mb < 8; mb++)
            for (int r = 0; r < 32; r++) {
                int t = ep_thd_tokens(&c, mb, r);
                ok &= t > 0 && t <= 4096;
                sum += t;
                lo = t < lo ? t : lo;
                hi = t > hi ? t : hi;
            }
        CU_ASSERT_TRUE(ok);
        CU_ASSERT_TRUE(hi > lo); /* ranks hold different counts */
        /* greedy stops at the first misfit: on average about one sequence's room stays unused */
        CU_ASSERT_TRUE(sum / (8 * 32) > 4096 - 2 * 1000);
        CU_ASSERT_TRUE(sum / (8 * 32) < 4096 - 200);
    }
}

/* Greedy: stop at the first sequence that does not fit. */
static void test_fixed_packing(void) {
    ep_config c;
    thd_cfg(&c, EP_SEQLEN_FIXED, 4096, 1, 1024, 16);
    CU_ASSERT_EQUAL(ep_thd_tokens(&c, 0, 0), 4096);
    thd_cfg(&c, EP_SEQLEN_FIXED, 4096, 1, 3000, 16);
    CU_ASSERT_EQUAL(ep_thd_tokens(&c, 0, 0), 3000);
    thd_cfg(&c, EP_SEQLEN_FIXED, 4096, 4, 3000, 16); /* capacity 16384: five fit */
    CU_ASSERT_EQUAL(ep_thd_tokens(&c, 2, 9), 15000);
    thd_cfg(&c, EP_SEQLEN_FIXED, 4096, 1, 0, 16); /* mean 0 means seq_length / 2 */
    CU_ASSERT_EQUAL(ep_thd_tokens(&c, 0, 0), 4096);
    thd_cfg(&c, EP_SEQLEN_FIXED, 4096, 1, 9000, 16); /* longer than a sequence: clamped */
    CU_ASSERT_EQUAL(ep_thd_tokens(&c, 0, 0), 4096);
}

static void test_length_distributions(void) {
    enum { N = 100000 };
    ep_config c;
    ep_rng g;
    /* uniform: integers in [min, 2*mean - min] with the requested mean */
    thd_cfg(&c, EP_SEQLEN_UNIFORM, 8192, 1, 1000, 200);
    ep_rng_seed(&g, 5);
    double sum = 0;
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < N; i++) {
        int l = ep_thd_seqlen(&c, &g);
        sum += l;
        lo = l < lo ? l : lo;
        hi = l > hi ? l : hi;
    }
    CU_ASSERT_EQUAL(lo, 200);
    CU_ASSERT_EQUAL(hi, 1800);
    CU_ASSERT_DOUBLE_EQUAL(sum / N, 1000, 10);
    /* lognormal: the requested mean when clamps are far away, sigma as documented */
    thd_cfg(&c, EP_SEQLEN_LOGNORMAL, 1 << 20, 1, 1000, 1);
    ep_rng_seed(&g, 6);
    double s = 0, sl = 0, sl2 = 0;
    for (int i = 0; i < N; i++) {
        int l = ep_thd_seqlen(&c, &g);
        s += l;
        sl += log(l);
        sl2 += log(l) * log(l);
    }
    CU_ASSERT_DOUBLE_EQUAL(s / N, 1000, 20);
    double var = sl2 / N - (sl / N) * (sl / N);
    CU_ASSERT_DOUBLE_EQUAL(sqrt(var), EP_THD_LOGNORMAL_SIGMA, 0.02);
    /* clamps */
    thd_cfg(&c, EP_SEQLEN_LOGNORMAL, 2048, 1, 1500, 512);
    ep_rng_seed(&g, 7);
    int ok = 1, at_top = 0, at_bottom = 0;
    for (int i = 0; i < N; i++) {
        int l = ep_thd_seqlen(&c, &g);
        ok &= l >= 512 && l <= 2048;
        at_top += l == 2048;
        at_bottom += l == 512;
    }
    CU_ASSERT_TRUE(ok);
    CU_ASSERT_TRUE(at_top > 0 && at_bottom > 0);
}

static void test_padded_max(void) {
    int a[3] = {100, 64, 0}, b[1] = {64}, z[2] = {0, 0}, one[1] = {1}, big[2] = {4097, 4000};
    CU_ASSERT_EQUAL(ep_thd_padded_max(a, 3), 128);
    CU_ASSERT_EQUAL(ep_thd_padded_max(b, 1), 64);
    CU_ASSERT_EQUAL(ep_thd_padded_max(z, 2), 0);
    CU_ASSERT_EQUAL(ep_thd_padded_max(one, 1), 64);
    CU_ASSERT_EQUAL(ep_thd_padded_max(big, 2), 4160);
}

void ep_suite_thd(void) {
    CU_pSuite s = CU_add_suite("thd", NULL, NULL);
    CU_add_test(s, "deterministic in seed, microbatch, rank", test_deterministic);
    CU_add_test(s, "bounds, and counts vary across ranks", test_bounds_and_variation);
    CU_add_test(s, "greedy packing of fixed lengths", test_fixed_packing);
    CU_add_test(s, "uniform and lognormal lengths", test_length_distributions);
    CU_add_test(s, "group maximum rounded to 64", test_padded_max);
}
