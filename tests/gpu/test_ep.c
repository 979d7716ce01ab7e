/* test_ep: dispatch/combine and the MoE layer across 2 ranks (forked here, as `epref --nproc 2`),
 * for every backend, against the CPU. Rows carry a (source rank, token) signature so a misroute
 * names itself. Fresh random inputs each run (seed printed); outputs poisoned with NaN first.
 * Exit 77 with fewer than 2 GPUs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_ref.h"
#include "ep_expert.h"
#include "ep_route.h"
#include "ref_check.h"
#include "ref_disp.h"

static int failures;
static uint64_t seed;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL rank %d %s:%d: ", ref_rank, __FILE__, __LINE__);                          \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

/* Deterministic values every rank can recompute for every rank. */
static float val(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    return (float)((ep_hash4(seed ^ a, b, c, d) >> 11) * (1.0 / 9007199254740992.0) * 2 - 1);
}
static float xval(int s, int t, int h) {
    if (h == 0) return (float)s; /* signature: exact in bf16 */
    if (h == 1) return (float)(t >> 8);
    if (h == 2) return (float)(t & 255);
    return bf2f(f2bf(val(1, (uint64_t)s, (uint64_t)t, (uint64_t)h)));
}
static float pval(int s, int t, int j) {
    return 0.1f + 0.5f * (1 + val(2, (uint64_t)s, (uint64_t)t, (uint64_t)j));
}
static void *dalloc(size_t b) {
    void *p;
    CUDA_CHECK(cudaMalloc(&p, b ? b : 1));
    return p;
}
static void up_bf(ep_bf16 *d, const float *h, size_t n) {
    ep_bf16 *t = malloc(n * 2);
    for (size_t i = 0; i < n; i++)
        t[i] = f2bf(h[i]);
    CUDA_CHECK(cudaMemcpy(d, t, n * 2, cudaMemcpyHostToDevice));
    /* A pageable copy may return before its DMA lands, and the work that reads it runs on a
     * non-blocking stream: wait for it. */
    CUDA_CHECK(cudaDeviceSynchronize());
    free(t);
}
static void down_bf(float *h, const ep_bf16 *d, size_t n) {
    ep_bf16 *t = malloc(n * 2);
    CUDA_CHECK(cudaMemcpy(t, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        h[i] = bf2f(t[i]);
    free(t);
}

typedef struct {
    int ep, me, E, k, H, maxt, ntok[EP_MAX_RANKS];
    int32_t *idx; /* [ep][maxt][k] every rank's choices */
    float *prob;  /* [ep][maxt][k] */
    int32_t *dtopk;
    float *dprob;
} routing;

/* home: rank 0's tokens [64, 128) choose rank 0's own experts only, so its second chunk sends
 * nothing to the other ranks and their combine has no rows of it: the chunk flags released with
 * no data, in both directions. */
static void make_routing(ref_ctx *c, routing *r, int E, int k, int H, ep_route_dist dist,
                         const int *ntok, int mb, int home) {
    memset(r, 0, sizeof *r);
    r->ep = c->w.size;
    r->me = c->w.rank;
    r->E = E;
    r->k = k;
    r->H = H;
    ep_config cfg;
    ep_config_defaults(&cfg);
    cfg.num_experts = E;
    cfg.moe_router_topk = k;
    cfg.route_dist = dist;
    cfg.route_zipf_s = 1.2;
    cfg.seed = seed;
    cfg.expert_model_parallel_size = r->ep;
    int ranks[EP_MAX_RANKS];
    for (int i = 0; i < r->ep; i++) {
        ranks[i] = i;
        r->ntok[i] = ntok[i];
        r->maxt = ntok[i] > r->maxt ? ntok[i] : r->maxt;
    }
    ep_routing rt;
    if (ep_route_draw(&cfg, mb, 0, 0, ranks, r->ntok, 1, &rt)) REF_DIE("routing");
    size_t n = (size_t)r->ep * r->maxt * k;
    r->idx = malloc(n * sizeof *r->idx);
    r->prob = malloc(n * sizeof *r->prob);
    for (size_t i = 0; i < n; i++)
        r->idx[i] = -1, r->prob[i] = 0;
    const int Ep = E / r->ep;
    for (int s = 0; s < r->ep; s++)
        for (int t = 0; t < ntok[s]; t++) {
            const int stay = home && s == 0 && t >= 64 && t < 128 && k <= Ep;
            for (int j = 0; j < k; j++) {
                size_t g = ((size_t)s * r->maxt + t) * k + j;
                r->idx[g] = stay ? (t + j) % Ep : rt.choices[s][(size_t)t * k + j];
                r->prob[g] = pval(s, t, j);
            }
        }
    ep_routing_free(&rt);
    r->dtopk = dalloc((size_t)r->maxt * k * 4);
    r->dprob = dalloc((size_t)r->maxt * k * 4);
    size_t mine = (size_t)r->me * r->maxt * k;
    CUDA_CHECK(
        cudaMemcpy(r->dtopk, r->idx + mine, (size_t)r->maxt * k * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(
        cudaMemcpy(r->dprob, r->prob + mine, (size_t)r->maxt * k * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
}
static void free_routing(routing *r) {
    free(r->idx), free(r->prob);
    cudaFree(r->dtopk), cudaFree(r->dprob);
}

static float expert_scale(int e) {
    return 0.5f + 0.125f * (float)(e % 7);
}

static void test_dispatch_combine(ref_ctx *c, ref_disp_kind kind, ep_route_dist dist, int pad,
                                  const int *ntok, int mb, int k, int H, int home) {
    const int E = 16;
    routing r;
    make_routing(c, &r, E, k, H, dist, ntok, mb, home);
    int me = r.me, ep = r.ep, T = ntok[me], Ep = E / ep;
    const char *name = ref_disp_kind_name(kind);
    ref_disp d;
    ref_disp_create(&d, c, kind, H, k, E, r.maxt, pad, 0);
    d.nvl.num_sms = 3; /* few blocks: chunks wait on flags */
    d.nvl.permute_blocks = 2;
    d.nvl.reduce_blocks = 2;
    /* every other NVLink case: as on a GPU with no SM to spare, the pre-reduce runs as its own
     * kernel before the send (otherwise it shares the combine kernel with the senders) */
    if (kind != REF_DISP_ALLTOALL && mb % 2) d.nvl.gpu_sms = d.nvl.num_sms;
    cudaStream_t st = c->stream;
    float *x = malloc(sizeof(float) * T * H);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            x[(size_t)t * H + h] = xval(me, t, h);
    ep_bf16 *dx = dalloc((size_t)r.maxt * H * 2);
    up_bf(dx, x, (size_t)T * H);
    int32_t *pos = malloc(sizeof(int32_t) * ep * r.maxt * k), rows_e[64];
    int64_t rows = ref_layout(ep, me, E, k, r.maxt, r.ntok, r.idx, pad, pos, rows_e);
    int64_t cap = ep_layout_max_perm_rows(ref_disp_layout(&d));
    ep_bf16 *perm = dalloc((size_t)cap * H * 2), *out = dalloc((size_t)r.maxt * H * 2);
    CUDA_CHECK(ep_fill_u16(perm, (size_t)cap * H, 0xffff, st));
    ref_disp_route(&d, r.dtopk, r.dprob, T, st);
    ref_disp_dispatch(&d, dx, perm, 0, st);
    ref_disp_check(&d, st);
    int32_t tot[3], gpad[64];
    ref_disp_counts(&d, NULL, gpad, tot, st);
    EXPECT(tot[1] == rows && !memcmp(gpad, rows_e, sizeof(int32_t) * Ep),
           "%s pad %d: padded rows %d, CPU %lld", name, pad, tot[1], (long long)rows);
    float *p = malloc(sizeof(float) * rows * H);
    down_bf(p, perm, (size_t)rows * H);
    int wrong = 0, gaps = 0;
    char *filled = calloc((size_t)rows, 1);
    for (int s = 0; s < ep; s++)
        for (int t = 0; t < r.ntok[s]; t++)
            for (int j = 0; j < k; j++) {
                int32_t q = pos[((size_t)s * r.maxt + t) * k + j];
                if (q < 0) continue;
                filled[q] = 1;
                const float *row = p + (size_t)q * H;
                int gs = (int)row[0], gt = (int)row[1] * 256 + (int)row[2];
                int bad = gs != s || gt != t;
                for (int h = 3; h < H && !bad; h++)
                    bad = row[h] != xval(s, t, h);
                if (bad && wrong++ < 3)
                    printf("rank %d %s: permuted row %d (expert %d) holds (rank %d, token %d), "
                           "expected (rank %d, token %d)%s\n",
                           me, name, q, r.idx[((size_t)s * r.maxt + t) * k + j], gs, gt, s, t,
                           gs == s && gt == t ? " with a wrong payload" : "");
            }
    for (int64_t q = 0; q < rows; q++)
        if (!filled[q])
            for (int h = 0; h < H; h++)
                gaps += p[q * H + h] != 0.f;
    EXPECT(!wrong && !gaps, "%s pad %d dist %d: %d misrouted rows, %d non-zero gap values", name,
           pad, (int)dist, wrong, gaps);
    /* Combine: expert e multiplies by expert_scale(e); the owner gets the weighted sum. */
    float *eo = malloc(sizeof(float) * rows * H);
    for (int64_t q = 0; q < rows; q++)
        for (int h = 0; h < H; h++)
            eo[q * H + h] = 0;
    for (int s = 0; s < ep; s++)
        for (int t = 0; t < r.ntok[s]; t++)
            for (int j = 0; j < k; j++) {
                int32_t q = pos[((size_t)s * r.maxt + t) * k + j];
                if (q >= 0)
                    for (int h = 0; h < H; h++)
                        eo[(size_t)q * H + h] =
                            p[(size_t)q * H + h] *
                            expert_scale(r.idx[((size_t)s * r.maxt + t) * k + j]);
            }
    up_bf(perm, eo, (size_t)rows * H);
    CUDA_CHECK(ep_fill_u16(out, (size_t)r.maxt * H, 0xffff, st));
    ref_disp_combine(&d, perm, out, 1, st);
    ref_disp_check(&d, st);
    float *o = malloc(sizeof(float) * T * H), *want = calloc((size_t)T * H, sizeof(float));
    down_bf(o, out, (size_t)T * H);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) {
            size_t g = ((size_t)me * r.maxt + t) * k + j;
            for (int h = 0; h < H; h++)
                want[(size_t)t * H + h] +=
                    r.prob[g] * bf2f(f2bf(x[(size_t)t * H + h] * expert_scale(r.idx[g])));
        }
    double err = rel_err(o, want, (size_t)T * H);
    EXPECT(err < 1e-2, "%s pad %d dist %d: combine rel err %.3e", name, pad, (int)dist, err);
    ref_disp_destroy(&d);
    cudaFree(dx), cudaFree(perm), cudaFree(out);
    free(x), free(pos), free(p), free(filled), free(eo), free(o), free(want);
    free_routing(&r);
}

/* The MoE layer forward and backward on small sizes against the CPU. */
static void test_layer(ref_ctx *c, ref_disp_kind kind, const int *ntok) {
    const int E = 8, k = 2, H = 64, F = 32, pad = 16;
    routing r;
    make_routing(c, &r, E, k, H, EP_ROUTE_UNIFORM, ntok, 99, 0);
    int me = r.me, ep = r.ep, T = ntok[me], Ep = E / ep;
    const char *name = ref_disp_kind_name(kind);
    size_t w1 = (size_t)H * 2 * F, w2 = (size_t)F * H;
    float *W1 = malloc(sizeof(float) * E * w1), *W2 = malloc(sizeof(float) * E * w2);
    for (size_t i = 0; i < E * w1; i++)
        W1[i] = bf2f(f2bf(0.2f * val(3, i, 0, 0)));
    for (size_t i = 0; i < E * w2; i++)
        W2[i] = bf2f(f2bf(0.2f * val(4, i, 0, 0)));
    float *x = malloc(sizeof(float) * T * H), *dy = malloc(sizeof(float) * T * H);
    for (size_t i = 0; i < (size_t)T * H; i++) {
        x[i] = bf2f(f2bf(val(5, (uint64_t)me, i, 0)));
        dy[i] = bf2f(f2bf(val(6, (uint64_t)me, i, 0)));
    }
    ref_disp d;
    ref_disp_create(&d, c, kind, H, k, E, r.maxt, pad, 0);
    d.nvl.num_sms = 2;
    cudaStream_t st = c->stream;
    int64_t cap = ep_layout_max_perm_rows(ref_disp_layout(&d));
    ep_bf16 *dx = dalloc((size_t)r.maxt * H * 2), *ddy = dalloc((size_t)r.maxt * H * 2),
            *dW1 = dalloc(Ep * w1 * 2), *dW2 = dalloc(Ep * w2 * 2), *px = dalloc(cap * H * 2),
            *ph = dalloc(cap * 2 * F * 2), *pa = dalloc(cap * F * 2), *py = dalloc(cap * H * 2),
            *y = dalloc((size_t)r.maxt * H * 2), *pdy = dalloc(cap * H * 2),
            *pda = dalloc(cap * F * 2), *pdh = dalloc(cap * 2 * F * 2), *pdx = dalloc(cap * H * 2),
            *gx = dalloc((size_t)r.maxt * H * 2), *g1 = dalloc(Ep * w1 * 2),
            *g2 = dalloc(Ep * w2 * 2);
    up_bf(dx, x, (size_t)T * H);
    up_bf(ddy, dy, (size_t)T * H);
    up_bf(dW1, W1 + me * Ep * w1, Ep * w1);
    up_bf(dW2, W2 + me * Ep * w2, Ep * w2);
    CUDA_CHECK(ep_fill_u16(y, (size_t)r.maxt * H, 0xffff, st));
    CUDA_CHECK(ep_fill_u16(gx, (size_t)r.maxt * H, 0xffff, st));
    CUDA_CHECK(ep_fill_u16(g1, Ep * w1, 0xffff, st));
    CUDA_CHECK(ep_fill_u16(g2, Ep * w2, 0xffff, st));
    ep_gemm *g = ep_gemm_create(EP_GEMM_DEFAULT, Ep);
    if (!g) REF_DIE("ep_gemm_create");
    ref_disp_route(&d, r.dtopk, r.dprob, T, st);
    int32_t padded[64];
    ref_disp_counts(&d, NULL, padded, NULL, st); /* GEMM shapes need host row counts */
    int64_t rows[64];
    for (int e = 0; e < Ep; e++)
        rows[e] = padded[e];
    ep_mlp_shape s = {Ep, H, F, rows};
    ref_disp_dispatch(&d, dx, px, 0, st);
    OK_CHECK(ep_mlp_forward(g, s, px, dW1, dW2, ph, pa, py, st));
    ref_disp_combine(&d, py, y, 1, st);
    ref_disp_dispatch(&d, ddy, pdy, 1, st); /* combine's backward: dy * prob to the experts */
    OK_CHECK(ep_mlp_dgrad(g, s, pdy, ph, dW1, dW2, pda, pdh, pdx, st));
    ref_disp_combine(&d, pdx, gx, 0, st); /* dispatch's backward: plain sum */
    OK_CHECK(ep_mlp_wgrad(g, s, px, pa, pdy, pdh, g1, g2, st));
    ref_disp_check(&d, st);
    float *gy = malloc(sizeof(float) * T * H), *ggx = malloc(sizeof(float) * T * H),
          *gg1 = malloc(sizeof(float) * Ep * w1), *gg2 = malloc(sizeof(float) * Ep * w2);
    down_bf(gy, y, (size_t)T * H);
    down_bf(ggx, gx, (size_t)T * H);
    down_bf(gg1, g1, Ep * w1);
    down_bf(gg2, g2, Ep * w2);
    /* CPU: every token of every rank through its experts (weights of all experts known). */
    float *ry = calloc((size_t)T * H, 4), *rx = calloc((size_t)T * H, 4), *r1 = calloc(Ep * w1, 4),
          *r2 = calloc(Ep * w2, 4);
    float h[128], a[64], yy[64], dxx[64], t1[64 * 64], t2[32 * 64], xs[64], dys[64];
    for (int sr = 0; sr < ep; sr++)
        for (int t = 0; t < r.ntok[sr]; t++)
            for (int j = 0; j < k; j++) {
                size_t gi = ((size_t)sr * r.maxt + t) * k + j;
                int e = r.idx[gi];
                float pr = r.prob[gi];
                for (int i = 0; i < H; i++) {
                    xs[i] = bf2f(f2bf(val(5, (uint64_t)sr, (size_t)t * H + i, 0)));
                    dys[i] =
                        bf2f(f2bf(pr * bf2f(f2bf(val(6, (uint64_t)sr, (size_t)t * H + i, 0)))));
                }
                ref_mlp_fwd(1, H, F, xs, W1 + e * w1, W2 + e * w2, h, a, yy);
                ref_mlp_bwd(1, H, F, xs, W1 + e * w1, W2 + e * w2, h, a, dys, dxx, t1, t2);
                if (sr == me)
                    for (int i = 0; i < H; i++) {
                        ry[(size_t)t * H + i] += pr * yy[i];
                        rx[(size_t)t * H + i] += dxx[i];
                    }
                if (e / Ep == me) {
                    for (size_t i = 0; i < w1; i++)
                        r1[(e - me * Ep) * w1 + i] += t1[i];
                    for (size_t i = 0; i < w2; i++)
                        r2[(e - me * Ep) * w2 + i] += t2[i];
                }
            }
    double ey = rel_err(gy, ry, (size_t)T * H), ex = rel_err(ggx, rx, (size_t)T * H),
           e1 = rel_err(gg1, r1, Ep * w1), e2 = rel_err(gg2, r2, Ep * w2);
    EXPECT(ey < 3e-2 && ex < 3e-2 && e1 < 3e-2 && e2 < 3e-2,
           "layer %s: rel err y %.2e dx %.2e dW1 %.2e dW2 %.2e", name, ey, ex, e1, e2);
    ep_gemm_destroy(g);
    ref_disp_destroy(&d);
    ep_bf16 *bufs[] = {dx, ddy, dW1, dW2, px, ph, pa, py, y, pdy, pda, pdh, pdx, gx, g1, g2};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaFree(bufs[i]);
    free(W1), free(W2), free(x), free(dy), free(gy), free(ggx), free(gg1), free(gg2);
    free(ry), free(rx), free(r1), free(r2);
    free_routing(&r);
}

/* Bytes rank s pushes to rank d in round r of test_push: none, one 16-byte word, a few KB, over a
 * MB, each different by source and destination. */
static size_t push_bytes(int s, int d, int r) {
    static const size_t base[] = {0, 16, 4096, (size_t)1 << 20};
    return base[r % 4] ? base[r % 4] + 16 * (size_t)(3 * s + d + r) : 0;
}
static uint32_t push_word(int s, int r, size_t i) {
    return (uint32_t)ep_hash4(seed ^ 7, (uint64_t)s, (uint64_t)r, i);
}

/* ep_nvl_push, the transfer of `epref run`'s deepep / hybridep all-to-alls: every peer's bytes
 * land whole in this rank's staging slot of that peer, round after round (sequence numbers),
 * with fewer blocks than peers' work and more; sizes off a multiple of 16 or past the slot are
 * refused. */
static void test_push(ref_ctx *c) {
    const int ep = c->w.size, me = c->w.rank, H = 64, rows = 8200 + 16;
    ep_nvl nvl;
    CUDA_CHECK(ep_nvl_create(&nvl, ep, me, H, 1, ep, rows, 1, 0, ref_allgather_cb, &c->w));
    const size_t slot = ep_nvl_slot_bytes(&nvl), most = push_bytes(ep, ep, 3);
    EXPECT(slot >= most, "slot %zu bytes < %zu", slot, most);
    uint32_t *h = malloc(slot), *d_src = dalloc(slot);
    static const int sms[] = {1, 3, 16};
    for (int r = 0; r < 12; r++) {
        size_t out[EP_MAX_RANKS] = {0};
        for (int p = 0; p < ep; p++)
            out[p] = p == me ? 0 : push_bytes(me, p, r);
        /* one source buffer for every peer, as the executor's send buffer */
        for (size_t i = 0; i < slot / 4; i++)
            h[i] = push_word(me, r, i);
        CUDA_CHECK(cudaMemcpy(d_src, h, slot, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
        nvl.num_sms = sms[r % 3];
        CUDA_CHECK(ep_nvl_push(&nvl, d_src, out, c->stream));
        CUDA_CHECK(cudaStreamSynchronize(c->stream));
        EXPECT(!ep_nvl_failed(&nvl), "round %d: a spin-wait timed out", r);
        const char *stage = (const char *)ep_nvl_stage(&nvl);
        for (int s = 0; s < ep; s++) {
            if (s == me) continue;
            size_t n = push_bytes(s, me, r) / 4, bad = 0;
            CUDA_CHECK(cudaMemcpy(h, stage + (size_t)s * slot, n * 4, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n; i++)
                bad += h[i] != push_word(s, r, i);
            EXPECT(bad == 0, "round %d: %zu of %zu words from rank %d wrong", r, bad, n, s);
        }
        /* no host barrier: the next push's entry handshake must keep the peers from writing
         * before this rank has read its slots */
    }
    size_t odd[EP_MAX_RANKS] = {0}, big[EP_MAX_RANKS] = {0};
    odd[(me + 1) % ep] = 24;
    big[(me + 1) % ep] = slot + 16;
    EXPECT(ep_nvl_push(&nvl, d_src, odd, c->stream) == cudaErrorInvalidValue, "24 bytes taken");
    EXPECT(ep_nvl_push(&nvl, d_src, big, c->stream) == cudaErrorInvalidValue,
           "past the slot taken");
    free(h);
    CUDA_CHECK(cudaFree(d_src));
    ep_nvl_destroy(&nvl);
}

int main(int argc, char **argv) {
    char *args[] = {argv[0], "--nproc", "2", NULL};
    int nargs = 3, status;
    (void)argc;
    if (ref_boot_launch(&nargs, args, &status)) return status;
    gpu_count_or_skip(2);
    ref_ctx c;
    ref_ctx_init(&c);
    seed = (uint64_t)time(NULL);
    if (ref_boot_bcast(&c.w, &seed, sizeof seed)) REF_DIE("bcast");
    if (c.w.rank == 0) printf("test_ep: seed %llu\n", (unsigned long long)seed);
    const int even[2] = {400, 400}, thd[2] = {300, 517}, small[2] = {70, 96};
    ref_disp_kind kinds[] = {REF_DISP_ALLTOALL, REF_DISP_NVL, REF_DISP_NVL_FUSED};
    test_push(&c);
    int mb = 0;
    for (int ki = 0; ki < 3; ki++) {
        test_dispatch_combine(&c, kinds[ki], EP_ROUTE_UNIFORM, 1, even, mb++, 4, 256, 0);
        test_dispatch_combine(&c, kinds[ki], EP_ROUTE_ZIPF, 16, even, mb++, 4, 256, 0);
        test_dispatch_combine(&c, kinds[ki], EP_ROUTE_UNIFORM, 128, thd, mb++, 4, 256, 0);
        test_dispatch_combine(&c, kinds[ki], EP_ROUTE_ZIPF, 1, thd, mb++, 4, 256, 0);
        /* up to 8 local experts per token (two groups of 4 in the pre-reduce), 81 columns */
        test_dispatch_combine(&c, kinds[ki], EP_ROUTE_UNIFORM, 1, small, mb++, 8, 648, 0);
        /* a chunk with no rows for the other rank, with and without a separate pre-reduce */
        test_dispatch_combine(&c, kinds[ki], EP_ROUTE_UNIFORM, 1, even, mb++, 4, 256, 1);
        test_dispatch_combine(&c, kinds[ki], EP_ROUTE_ZIPF, 16, thd, mb++, 4, 256, 1);
        test_layer(&c, kinds[ki], small);
    }
    int all[EP_MAX_RANKS];
    ref_boot_allgather(&c.w, &failures, all, sizeof failures);
    int total = 0;
    for (int i = 0; i < c.w.size; i++)
        total += all[i];
    if (c.w.rank == 0) printf("test_ep: %s (%d failures)\n", total ? "FAILED" : "passed", total);
    CUDA_CHECK(cudaDeviceSynchronize());
    ref_ctx_fini(&c);
    return total ? 1 : 0;
}
