/* test_kernels: every single-GPU kernel against the CPU reference, on fresh random inputs each run
 * (seeded from the clock, printed), outputs poisoned with NaN first. Exit 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_ref.h"
#include "ep_expert.h"
#include "ep_route.h"
#include "ref_check.h"

int ref_rank = 0;
static int failures;
static ep_rng rng;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static float urand(void) {
    return (float)(2 * ep_rng_uniform(&rng) - 1);
}
static void *dalloc(size_t bytes) {
    void *p;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
static void up(void *d, const void *h, size_t n) {
    CUDA_CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize()); /* a pageable copy may return before its DMA lands */
}
static void down(void *h, const void *d, size_t n) {
    CUDA_CHECK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
}
/* Random bf16 matrix on host (floats hold the exact bf16 values) and device. */
static ep_bf16 *rand_bf16(size_t n, float scale, float *host) {
    ep_bf16 *h = malloc(n * sizeof *h), *d = dalloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        h[i] = f2bf(urand() * scale);
        host[i] = bf2f(h[i]);
    }
    up(d, h, n * 2);
    free(h);
    return d;
}
static void down_f(float *out, const ep_bf16 *d, size_t n) {
    ep_bf16 *h = malloc(n * 2);
    down(h, d, n * 2);
    for (size_t i = 0; i < n; i++)
        out[i] = bf2f(h[i]);
    free(h);
}

static void test_router(int sigmoid, int groups, int group_topk, int use_bias) {
    ep_router_params p = {300, 64, 6, sigmoid, groups, group_topk};
    size_t n = (size_t)p.num_tokens * p.num_experts;
    float *lg = malloc(n * sizeof *lg), bias[64], *prob = malloc(sizeof(float) * 300 * 6),
          *gprob = malloc(sizeof(float) * 300 * 6);
    int32_t *idx = malloc(sizeof(int32_t) * 300 * 6), *gidx = malloc(sizeof(int32_t) * 300 * 6);
    for (size_t i = 0; i < n; i++)
        lg[i] = 3 * urand();
    for (int e = 0; e < 64; e++)
        bias[e] = 0.1f * urand();
    float *dl = dalloc(n * 4), *db = dalloc(64 * 4), *dp = dalloc(300 * 6 * 4);
    int32_t *di = dalloc(300 * 6 * 4);
    up(dl, lg, n * 4);
    up(db, bias, 64 * 4);
    CUDA_CHECK(cudaMemset(di, 0xff, 300 * 6 * 4));
    CUDA_CHECK(ep_router(dl, use_bias ? db : NULL, p, di, dp, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    down(gidx, di, 300 * 6 * 4);
    down(gprob, dp, 300 * 6 * 4);
    ref_router(lg, use_bias ? bias : NULL, p, idx, prob);
    int bad = 0;
    double perr = 0;
    for (int i = 0; i < 300 * 6; i++) {
        bad += gidx[i] != idx[i];
        perr = fmax(perr, fabs(gprob[i] - prob[i]));
    }
    EXPECT(!bad && perr < 1e-5, "router sigmoid=%d groups=%d: %d wrong ids, prob err %.2e", sigmoid,
           groups, bad, perr);
    cudaFree(dl), cudaFree(db), cudaFree(dp), cudaFree(di);
    free(lg), free(prob), free(gprob), free(idx), free(gidx);
}

/* One rank (ep=1): pack_send -> permute with device padding -> combine partial -> reduce.
 * k up to 16 (several groups of 4 rows in the combine sum); H = 8 x 81 gives lanes with two
 * columns, one column and none in the last pass. */
static void test_permute_combine(int pad, int budget_half, int k, int H) {
    const int T = 333, E = 16;
    int32_t *idx = malloc(sizeof(int32_t) * T * k), ntok = T;
    float *prob = malloc(sizeof(float) * T * k);
    for (int t = 0; t < T; t++) {
        int32_t used[16] = {0};
        for (int j = 0; j < k; j++) {
            int e;
            do
                e = (int)(ep_rng_uniform(&rng) * E);
            while (used[e]);
            used[e] = 1;
            /* some choices, and all of token 7's, route nowhere (THD padding rows) */
            idx[t * k + j] = (t == 7 || ep_rng_uniform(&rng) < 0.05) ? -1 : e;
            prob[t * k + j] = (float)(0.1 + ep_rng_uniform(&rng));
        }
    }
    int32_t *pos = malloc(sizeof(int32_t) * T * k), rows_e[16];
    int64_t rows = ref_layout(1, 0, E, k, T, &ntok, idx, pad, pos, rows_e);
    int64_t cap = budget_half ? rows / 2 : 0;
    ep_layout L;
    CUDA_CHECK(ep_layout_create(&L, 1, 0, k, E, T, pad, cap, NULL, NULL, NULL));
    up(L.topk_idx, idx, sizeof(int32_t) * T * k);
    up(L.topk_prob, prob, sizeof(float) * T * k);
    up(L.ntok, &ntok, 4);
    CUDA_CHECK(ep_layout_compute(&L, 0));
    float *x = malloc(sizeof(float) * T * H);
    ep_bf16 *dx = rand_bf16((size_t)T * H, 1.f, x);
    int64_t cap_rows = ep_layout_max_perm_rows(&L) + 8; /* + canary rows past the budget */
    ep_bf16 *send = dalloc((size_t)T * H * 2), *perm = dalloc((size_t)cap_rows * H * 2);
    CUDA_CHECK(ep_fill_u16(perm, (size_t)cap_rows * H, 0xffff, 0)); /* NaN poison */
    CUDA_CHECK(ep_pack_send(&L, dx, send, H, 0));
    CUDA_CHECK(ep_permute(&L, send, perm, H, 0, NULL, 0, NULL, NULL, 0));
    int32_t tot[3], gpad[16];
    CUDA_CHECK(cudaDeviceSynchronize());
    down(tot, L.totals, sizeof tot);
    down(gpad, L.exp_padded, sizeof gpad);
    EXPECT(tot[1] == rows, "pad %d: device padded rows %d, CPU %lld", pad, tot[1], (long long)rows);
    EXPECT(!memcmp(gpad, rows_e, sizeof gpad), "pad %d: padded tokens_per_expert differ", pad);
    EXPECT(tot[2] == (budget_half && rows > cap), "pad %d: overflow flag %d (budget %lld)", pad,
           tot[2], (long long)cap);
    float *p = malloc(sizeof(float) * cap_rows * H), *want = calloc((size_t)cap_rows * H, 4);
    down_f(p, perm, (size_t)cap_rows * H);
    int64_t limit = budget_half ? cap : rows;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++)
            if (pos[t * k + j] >= 0 && pos[t * k + j] < limit)
                memcpy(want + (size_t)pos[t * k + j] * H, x + (size_t)t * H, sizeof(float) * H);
    int wrong = 0, past = 0;
    for (int64_t r = 0; r < limit; r++)
        wrong += memcmp(p + r * H, want + r * H, sizeof(float) * H) != 0;
    for (int64_t r = limit; r < cap_rows; r++) /* never written: still NaN */
        past += !isnan(p[r * H]);
    EXPECT(!wrong, "pad %d budget %lld: %d of %lld permuted rows wrong (gaps must be zero)", pad,
           (long long)cap, wrong, (long long)limit);
    EXPECT(!past, "pad %d budget %lld: %d rows written past the budget", pad, (long long)cap, past);
    if (!budget_half) { /* combine: weighted sum over the k outputs of random expert rows */
        float *eo = malloc(sizeof(float) * rows * H), *out = malloc(sizeof(float) * T * H),
              *ref = calloc((size_t)T * H, 4);
        ep_bf16 *deo = rand_bf16((size_t)rows * H, 1.f, eo), *part = dalloc((size_t)T * H * 2),
                *dout = dalloc((size_t)T * H * 2);
        CUDA_CHECK(ep_fill_u16(dout, (size_t)T * H, 0xffff, 0));
        CUDA_CHECK(ep_combine_partial(&L, deo, part, H, 1, 0));
        CUDA_CHECK(ep_combine_reduce(&L, part, dout, H, NULL, 0, NULL, 0));
        CUDA_CHECK(cudaDeviceSynchronize());
        down_f(out, dout, (size_t)T * H);
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (pos[t * k + j] >= 0)
                    for (int h = 0; h < H; h++)
                        ref[(size_t)t * H + h] +=
                            prob[t * k + j] * eo[(size_t)pos[t * k + j] * H + h];
        double err = rel_err(out, ref, (size_t)T * H);
        EXPECT(err < 1e-2, "pad %d: combine rel err %.3e", pad, err);
        cudaFree(deo), cudaFree(part), cudaFree(dout);
        free(eo), free(out), free(ref);
    }
    ep_layout_destroy(&L);
    cudaFree(dx), cudaFree(send), cudaFree(perm);
    free(idx), free(prob), free(pos), free(x), free(p), free(want);
}

/* The layout of several sources on one GPU (the map supplied, as the NCCL backend gathers it)
 * against the CPU: every source's token count different (none, one, a partial chunk, full
 * chunks), a buffer of 2^18 tokens (tens of thousands of blocks: far more than run at once, so
 * the stages' waits must only ever be on blocks already running), two launches in a row with
 * other counts (the stage counters of the second launch), whole arrays compared (entries past a
 * source's tokens must be -1). */
static void test_layout_sources(void) {
    const int ep = 4, me = 1, E = 32, Ep = E / ep, k = 6, pad = 16, cap = 1 << 18;
    const int32_t counts[2][4] = {{0, 1, 333, 64}, {200, 129, 0, 7}};
    const size_t tk = (size_t)ep * cap * k, td = (size_t)ep * cap * ep;
    int32_t *idx = malloc(tk * 4), *pos = malloc(tk * 4), *epos = malloc(tk * 4);
    int32_t *didx = malloc(td * 4), *want_d = malloc(td * 4);
    float *prob = calloc(tk, 4);
    ep_layout L;
    CUDA_CHECK(ep_layout_create(&L, ep, me, k, E, cap, pad, 0, NULL, NULL, NULL));
    for (int run = 0; run < 2; run++) {
        const int32_t *ntok = counts[run];
        for (size_t i = 0; i < tk; i++)
            idx[i] = -1;
        int32_t cnt[4][4] = {{0}};
        for (size_t i = 0; i < td; i++)
            want_d[i] = -1;
        for (int s = 0; s < ep; s++)
            for (int t = 0; t < ntok[s]; t++) {
                int used[32] = {0}, to[4] = {0};
                for (int j = 0; j < k; j++) {
                    int e;
                    do
                        e = (int)(ep_rng_uniform(&rng) * E);
                    while (used[e]);
                    used[e] = 1;
                    if (ep_rng_uniform(&rng) < 0.05) continue; /* routes nowhere */
                    idx[((size_t)s * cap + t) * k + j] = e;
                    to[e / Ep] = 1;
                }
                for (int d = 0; d < ep; d++)
                    if (to[d]) want_d[((size_t)s * cap + t) * ep + d] = cnt[s][d]++;
            }
        int32_t rows_e[8];
        int64_t rows = ref_layout(ep, me, E, k, cap, ntok, idx, pad, pos, rows_e);
        up(L.topk_idx, idx, tk * 4);
        up(L.topk_prob, prob, tk * 4);
        up(L.ntok, ntok, ep * 4);
        CUDA_CHECK(ep_layout_compute(&L, 0));
        CUDA_CHECK(cudaDeviceSynchronize());
        int32_t tot[3], gpad[8], gcnt[48];
        down(epos, L.epos, tk * 4);
        down(didx, L.didx, td * 4);
        down(tot, L.totals, sizeof tot);
        down(gpad, L.exp_padded, sizeof gpad);
        down(gcnt, L.cnt, sizeof gcnt); /* cnt, roff, coff */
        size_t bad_e = 0, bad_d = 0;
        for (size_t i = 0; i < tk; i++)
            bad_e += epos[i] != pos[i];
        for (size_t i = 0; i < td; i++)
            bad_d += didx[i] != want_d[i];
        int bad_c = 0, own = 0;
        for (int s = 0; s < ep; s++)
            for (int d = 0; d < ep; d++) {
                int roff = 0, coff = 0;
                for (int q = 0; q < s; q++)
                    roff += cnt[q][d];
                for (int q = 0; q < d; q++)
                    coff += cnt[s][q];
                bad_c += gcnt[s * ep + d] != cnt[s][d] || gcnt[16 + s * ep + d] != roff ||
                         gcnt[32 + s * ep + d] != coff;
            }
        for (int s = 0; s < ep; s++)
            own += cnt[s][me];
        EXPECT(!bad_e, "layout run %d: %zu of %zu expert positions differ", run, bad_e, tk);
        EXPECT(!bad_d, "layout run %d: %zu of %zu destination slots differ", run, bad_d, td);
        EXPECT(!bad_c, "layout run %d: %d of 48 counts / offsets differ", run, bad_c);
        EXPECT(tot[0] == own && tot[1] == rows && tot[2] == 0,
               "layout run %d: totals %d %d %d, CPU %d %lld 0", run, tot[0], tot[1], tot[2], own,
               (long long)rows);
        EXPECT(!memcmp(gpad, rows_e, sizeof gpad), "layout run %d: padded rows per expert differ",
               run);
    }
    ep_layout_destroy(&L);
    free(idx), free(pos), free(epos), free(didx), free(want_d), free(prob);
}

static void test_mlp(ep_gemm_mode mode) {
    const int ne = 4, H = 64, F = 48;
    int64_t rows[4] = {5, 0, 17, 32}, m = 54;
    float *x = malloc(4 * m * H), *W1 = malloc(4 * (size_t)ne * H * 2 * F),
          *W2 = malloc(4 * (size_t)ne * F * H), *dy = malloc(4 * m * H);
    ep_bf16 *dx_ = rand_bf16((size_t)m * H, 1.f, x),
            *dW1 = rand_bf16((size_t)ne * H * 2 * F, .2f, W1),
            *dW2 = rand_bf16((size_t)ne * F * H, .2f, W2), *ddy = rand_bf16((size_t)m * H, 1.f, dy);
    ep_bf16 *h = dalloc(m * 2 * F * 2), *a = dalloc(m * F * 2), *y = dalloc(m * H * 2),
            *da = dalloc(m * F * 2), *dh = dalloc(m * 2 * F * 2), *gx = dalloc(m * H * 2),
            *g1 = dalloc((size_t)ne * H * 2 * F * 2), *g2 = dalloc((size_t)ne * F * H * 2);
    CUDA_CHECK(ep_fill_u16(y, (size_t)m * H, 0xffff, 0));
    CUDA_CHECK(ep_fill_u16(gx, (size_t)m * H, 0xffff, 0));
    CUDA_CHECK(ep_fill_u16(g1, (size_t)ne * H * 2 * F, 0xffff, 0));
    ep_gemm *g = ep_gemm_create(mode, ne);
    if (!g) REF_DIE("ep_gemm_create");
    ep_mlp_shape s = {ne, H, F, rows};
    OK_CHECK(ep_mlp_forward(g, s, dx_, dW1, dW2, h, a, y, 0));
    OK_CHECK(ep_mlp_dgrad(g, s, ddy, h, dW1, dW2, da, dh, gx, 0));
    OK_CHECK(ep_mlp_wgrad(g, s, dx_, a, ddy, dh, g1, g2, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    float *gy = malloc(4 * m * H), *ggx = malloc(4 * m * H),
          *gg1 = malloc(4 * (size_t)ne * H * 2 * F), *gg2 = malloc(4 * (size_t)ne * F * H);
    down_f(gy, y, (size_t)m * H);
    down_f(ggx, gx, (size_t)m * H);
    down_f(gg1, g1, (size_t)ne * H * 2 * F);
    down_f(gg2, g2, (size_t)ne * F * H);
    float *rh = malloc(4 * m * 2 * F), *ra = malloc(4 * m * F), *ry = malloc(4 * m * H),
          *rx = malloc(4 * m * H), *r1 = malloc(4 * (size_t)ne * H * 2 * F),
          *r2 = malloc(4 * (size_t)ne * F * H);
    int64_t off = 0;
    for (int e = 0; e < ne; e++) {
        size_t o = (size_t)off;
        ref_mlp_fwd((int)rows[e], H, F, x + o * H, W1 + (size_t)e * H * 2 * F,
                    W2 + (size_t)e * F * H, rh + o * 2 * F, ra + o * F, ry + o * H);
        ref_mlp_bwd((int)rows[e], H, F, x + o * H, W1 + (size_t)e * H * 2 * F,
                    W2 + (size_t)e * F * H, rh + o * 2 * F, ra + o * F, dy + o * H, rx + o * H,
                    r1 + (size_t)e * H * 2 * F, r2 + (size_t)e * F * H);
        off += rows[e];
    }
    double ey = rel_err(gy, ry, (size_t)m * H), ex = rel_err(ggx, rx, (size_t)m * H),
           e1 = rel_err(gg1, r1, (size_t)ne * H * 2 * F), e2 = rel_err(gg2, r2, (size_t)ne * F * H);
    EXPECT(ey < 2e-2 && ex < 2e-2 && e1 < 2e-2 && e2 < 2e-2,
           "MLP (%s): rel err y %.2e dx %.2e dW1 %.2e dW2 %.2e", ep_gemm_mode_name(mode), ey, ex,
           e1, e2);
    ep_gemm_destroy(g);
    cudaFree(dx_), cudaFree(dW1), cudaFree(dW2), cudaFree(ddy), cudaFree(h), cudaFree(a);
    cudaFree(y), cudaFree(da), cudaFree(dh), cudaFree(gx), cudaFree(g1), cudaFree(g2);
    free(x), free(W1), free(W2), free(dy), free(gy), free(ggx), free(gg1), free(gg2);
    free(rh), free(ra), free(ry), free(rx), free(r1), free(r2);
}

int main(void) {
    gpu_count_or_skip(1);
    uint64_t seed = (uint64_t)time(NULL);
    ep_rng_seed(&rng, seed);
    printf("test_kernels: seed %llu\n", (unsigned long long)seed);
    test_router(0, 0, 0, 0);
    test_router(1, 0, 0, 1);
    test_router(1, 8, 3, 1);
    test_router(0, 4, 2, 0);
    int pads[] = {1, 16, 32, 128};
    for (int i = 0; i < 4; i++) {
        test_permute_combine(pads[i], 0, 4, 136);
        test_permute_combine(pads[i], 1, 4, 136);
    }
    test_permute_combine(1, 0, 12, 648);
    test_permute_combine(16, 0, 7, 648);
    test_layout_sources();
    test_mlp(EP_GEMM_GROUPED);
    test_mlp(EP_GEMM_STREAMS);
    test_mlp(EP_GEMM_LOOP);
    printf("test_kernels: %s (%d failures)\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
