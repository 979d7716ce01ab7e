/* bench_dispatch: token dispatch, every backend moving the same rows in the same run. */
#include <string.h>

#include "bench.h"
#include "ref_check.h"
#include "ref_disp.h"

typedef struct {
    ref_disp *nvl, *a2a;
    ep_bf16 *x, *perm;
    size_t peer_bytes[EP_MAX_RANKS];
    int me, ep;
    int32_t sc[EP_MAX_RANKS], so[EP_MAX_RANKS], rc[EP_MAX_RANKS], ro[EP_MAX_RANKS];
    int32_t sc0[EP_MAX_RANKS], rc0[EP_MAX_RANKS]; /* the same without the rank's own rows */
    int32_t *d_topk;
    float *d_prob;
    int tokens;
} dctx;

static void op_nvl(void *a, cudaStream_t st) {
    dctx *c = a;
    CUDA_CHECK(ep_nvl_dispatch_stage(&c->nvl->nvl, c->x, st));
}
static void op_nvl_fused(void *a, cudaStream_t st) {
    dctx *c = a;
    CUDA_CHECK(ep_nvl_dispatch(&c->nvl->nvl, c->x, c->perm, 1, 0, st));
}
static void op_nvl_unfused(void *a, cudaStream_t st) {
    dctx *c = a;
    CUDA_CHECK(ep_nvl_dispatch(&c->nvl->nvl, c->x, c->perm, 0, 0, st));
}
static void op_nccl(void *a, cudaStream_t st) {
    dctx *c = a;
    ref_alltoallv_rows(c->a2a->ctx, c->a2a->send, c->sc0, c->so, c->a2a->stage, c->rc0, c->ro,
                       (size_t)c->a2a->H, st);
}
static void op_nccl_self(void *a, cudaStream_t st) {
    dctx *c = a;
    ref_alltoallv_rows(c->a2a->ctx, c->a2a->send, c->sc, c->so, c->a2a->stage, c->rc, c->ro,
                       (size_t)c->a2a->H, st);
}
static void op_nccl_permute(void *a, cudaStream_t st) {
    dctx *c = a;
    ref_disp_dispatch(c->a2a, c->x, c->perm, 0, st);
}
static void op_nvl_layout(void *a, cudaStream_t st) {
    dctx *c = a;
    ref_disp_route(c->nvl, c->d_topk, c->d_prob, c->tokens, st);
}
/* The layout's four compute kernels alone, on the routing map the previous op exchanged. */
static void op_nvl_layout_compute(void *a, cudaStream_t st) {
    dctx *c = a;
    CUDA_CHECK(ep_layout_compute(&c->nvl->nvl.layout, st));
}
/* What a small batch pays before its rows land: the layout (map exchange and kernels), then the
 * plain dispatch. */
static void op_nvl_with_layout(void *a, cudaStream_t st) {
    op_nvl_layout(a, st);
    op_nvl(a, st);
}
static void op_nccl_layout(void *a, cudaStream_t st) {
    dctx *c = a;
    ref_disp_route(c->a2a, c->d_topk, c->d_prob, c->tokens, st);
}

/* Shared by dispatch and combine: both dispatchers routed for `tokens`, counts on the host. */
void bench_setup(bench *b, int tokens, ref_disp *nvl, ref_disp *a2a, int32_t *d_topk, float *d_prob,
                 int32_t *cnt, double *link, double *logical) {
    bench_routing(b, tokens, d_topk, d_prob);
    cudaStream_t st = b->ctx->stream;
    ref_disp_route(nvl, d_topk, d_prob, tokens, st);
    ref_disp_route(a2a, d_topk, d_prob, tokens, st);
    ref_disp_check(nvl, st);
    int32_t c2[EP_MAX_RANKS * EP_MAX_RANKS * 3];
    ref_disp_counts(nvl, cnt, NULL, NULL, st);
    ref_disp_counts(a2a, c2, NULL, NULL, st);
    int ep = b->ctx->w.size, me = b->ctx->w.rank;
    if (memcmp(cnt, c2, 3 * sizeof(int32_t) * ep * ep))
        REF_DIE("the two backends computed different layouts");
    double row = 2.0 * b->cfg.hidden_size, out = 0, in = 0;
    for (int p = 0; p < ep; p++) {
        if (p != me) out += cnt[me * ep + p] * row;
        in += cnt[p * ep + me] * row;
    }
    *link = bench_mean(b, out);
    *logical = bench_mean(b, in);
}

int bench_dispatch(bench *b) {
    int maxt = 0;
    for (int i = 0; i < b->ntokens; i++)
        maxt = b->tokens[i] > maxt ? b->tokens[i] : maxt;
    const ep_config *cf = &b->cfg;
    int H = cf->hidden_size, k = cf->moe_router_topk, E = cf->num_experts;
    static ref_disp nvl, a2a;
    ref_disp_create(&nvl, b->ctx, REF_DISP_NVL, H, k, E, maxt, 1, 0);
    ref_disp_create(&a2a, b->ctx, REF_DISP_ALLTOALL, H, k, E, maxt, 1, 0);
    nvl.nvl.num_sms = b->num_sms;
    nvl.nvl.permute_blocks = b->permute_blocks;
    b->barrier = &nvl.nvl;
    dctx c;
    memset(&c, 0, sizeof c);
    c.nvl = &nvl;
    c.a2a = &a2a;
    c.me = b->ctx->w.rank;
    c.ep = b->ctx->w.size;
    int64_t perm_rows = ep_layout_max_perm_rows(&nvl.nvl.layout);
    CUDA_CHECK(cudaMalloc((void **)&c.x, (size_t)maxt * H * 2));
    CUDA_CHECK(cudaMalloc((void **)&c.perm, (size_t)perm_rows * H * 2));
    CUDA_CHECK(cudaMalloc((void **)&c.d_topk, (size_t)maxt * k * sizeof(int32_t)));
    CUDA_CHECK(cudaMalloc((void **)&c.d_prob, (size_t)maxt * k * sizeof(float)));
    CUDA_CHECK(ep_fill_random_bf16(c.x, (size_t)maxt * H, 1234 + c.me, 1.f, b->ctx->stream));
    bench_print_header(b, "dispatch");
    for (int i = 0; i < b->ntokens; i++) {
        int T = b->tokens[i];
        int32_t cnt[EP_MAX_RANKS * EP_MAX_RANKS * 3];
        double link, logical;
        c.tokens = T;
        bench_setup(b, T, &nvl, &a2a, c.d_topk, c.d_prob, cnt, &link, &logical);
        for (int p = 0; p < c.ep; p++)
            c.peer_bytes[p] = (size_t)cnt[c.me * c.ep + p] * H * 2;
        /* counts of the prepacked alltoallv */
        const int32_t *ro = cnt + c.ep * c.ep, *co = ro + c.ep * c.ep;
        for (int p = 0; p < c.ep; p++) {
            c.sc[p] = cnt[c.me * c.ep + p];
            c.so[p] = co[c.me * c.ep + p];
            c.rc[p] = cnt[p * c.ep + c.me];
            c.ro[p] = ro[p * c.ep + c.me];
            c.sc0[p] = p == c.me ? 0 : c.sc[p];
            c.rc0[p] = p == c.me ? 0 : c.rc[p];
        }
        CUDA_CHECK(ep_pack_send(&a2a.own, c.x, a2a.send, H, b->ctx->stream));
        int S = b->num_sms;
        bench_add(b, "nvl", T, S, bench_time(b, op_nvl, &c), link, logical, 0);
        bench_add(b, "nvl_fused", T, S + b->permute_blocks, bench_time(b, op_nvl_fused, &c), link,
                  logical, 0);
        bench_add(b, "nvl_then_permute", T, S, bench_time(b, op_nvl_unfused, &c), link, logical, 0);
        bench_add(b, "nccl", T, -1, bench_time(b, op_nccl, &c), link, logical, 0);
        bench_add(b, "nccl_self", T, -1, bench_time(b, op_nccl_self, &c), link, logical, 0);
        bench_add(b, "nccl_permute", T, -1, bench_time(b, op_nccl_permute, &c), link, logical, 0);
        bench_add_push_baselines(b, &nvl.nvl, c.x, c.peer_bytes, c.me, c.ep, T, link, logical);
        bench_add(b, "nvl_layout", T, -1, bench_time(b, op_nvl_layout, &c), 0, 0, 0);
        bench_add(b, "nvl_layout_compute", T, -1, bench_time(b, op_nvl_layout_compute, &c), 0, 0,
                  0);
        bench_add(b, "nccl_layout", T, -1, bench_time(b, op_nccl_layout, &c), 0, 0, 0);
        bench_add(b, "nvl_with_layout", T, S, bench_time(b, op_nvl_with_layout, &c), link, logical,
                  0);
        /* the host's issue of its launches (the GPU time of that run is not kept: the map's
         * handshake waits for the peer, whose held stream starts at another time) */
        double issue_us = 0;
        (void)bench_time_ahead(b, op_nvl_with_layout, &c, &issue_us, NULL);
        bench_add(b, "nvl_with_layout_issue", T, -1, issue_us, 0, 0, 0);
        ref_disp_check(&nvl, b->ctx->stream);
    }
    cudaFree(c.x);
    cudaFree(c.perm);
    cudaFree(c.d_topk);
    cudaFree(c.d_prob);
    ref_disp_destroy(&nvl);
    ref_disp_destroy(&a2a);
    return 0;
}
