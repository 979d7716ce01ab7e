/* bench_gemm: the experts' first GEMM (rows x H -> 2F per local expert, row counts from the
 * seeded routing) in each grouping mode, against one GEMM of the same flops, same run. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ep_expert.h"
#include "ep_route.h"
#include "ref_check.h"

typedef struct {
    ep_gemm *g;
    int n, H, F;
    int64_t *M, *N, *K, total;
    const ep_bf16 **A, **B;
    ep_bf16 **C;
    ep_bf16 *x, *w, *h;
} gctx;

static void op_group(void *a, cudaStream_t st) {
    gctx *c = a;
    OK_CHECK(ep_gemm_group(c->g, c->n, 0, 0, c->M, c->N, c->K, c->A, c->B, c->C, 0.f, st));
}
static void op_single(void *a, cudaStream_t st) {
    gctx *c = a;
    OK_CHECK(ep_gemm_rm(c->g, 0, 0, c->total, 2 * c->F, c->H, c->x, c->w, c->h, 0.f, st));
}

int bench_gemm(bench *b) {
    const ep_config *cf = &b->cfg;
    int ep = b->ctx->w.size, me = b->ctx->w.rank, E = cf->num_experts, Ep = E / ep;
    int H = cf->hidden_size, F = cf->moe_ffn_hidden_size;
    int maxt = 0;
    for (int i = 0; i < b->ntokens; i++)
        maxt = b->tokens[i] > maxt ? b->tokens[i] : maxt;
    size_t max_rows = (size_t)ep * maxt * (cf->moe_router_topk < Ep ? cf->moe_router_topk : Ep);
    static ep_nvl bar; /* only its barrier */
    CUDA_CHECK(ep_nvl_create(&bar, ep, me, 8, 1, ep, 1, 1, 0, ref_allgather_cb, &b->ctx->w));
    b->barrier = &bar;
    gctx c;
    memset(&c, 0, sizeof c);
    c.n = Ep;
    c.H = H;
    c.F = F;
    c.g = ep_gemm_create(EP_GEMM_DEFAULT, Ep);
    if (!c.g) REF_DIE("cannot create the GEMM context");
    cudaStream_t st = b->ctx->stream;
    CUDA_CHECK(cudaMalloc((void **)&c.x, max_rows * H * 2));
    CUDA_CHECK(cudaMalloc((void **)&c.h, max_rows * 2 * F * 2));
    CUDA_CHECK(cudaMalloc((void **)&c.w, (size_t)Ep * H * 2 * F * 2));
    CUDA_CHECK(ep_fill_random_bf16(c.x, max_rows * H, 5 + me, 1.f, st));
    CUDA_CHECK(ep_fill_random_bf16(c.w, (size_t)Ep * H * 2 * F, 6 + me, 0.05f, st));
    c.M = calloc((size_t)Ep * 3, sizeof(int64_t));
    c.A = calloc((size_t)Ep, sizeof *c.A);
    c.B = calloc((size_t)Ep, sizeof *c.B);
    c.C = calloc((size_t)Ep, sizeof *c.C);
    if (!c.M || !c.A || !c.B || !c.C) REF_DIE("out of memory");
    c.N = c.M + Ep;
    c.K = c.N + Ep;
    bench_print_header(b, "gemm");
    if (me == 0)
        printf("# experts' first GEMM per local expert: rows x %d -> %d, %d local experts\n", H,
               2 * F, Ep);
    for (int i = 0; i < b->ntokens; i++) {
        int T = b->tokens[i], ranks[EP_MAX_RANKS], toks[EP_MAX_RANKS];
        for (int r = 0; r < ep; r++) {
            ranks[r] = r;
            toks[r] = T;
        }
        ep_routing rt;
        if (ep_route_draw(cf, 0, 0, 0, ranks, toks, 0, &rt)) REF_DIE("routing: out of memory");
        int64_t off = 0;
        for (int e = 0; e < Ep; e++) {
            c.M[e] = rt.tokens_per_expert[me * Ep + e];
            c.N[e] = 2 * F;
            c.K[e] = H;
            c.A[e] = c.x + off * H;
            c.B[e] = c.w + (size_t)e * H * 2 * F;
            c.C[e] = c.h + off * 2 * F;
            off += c.M[e];
        }
        ep_routing_free(&rt);
        c.total = off;
        double flops = bench_mean(b, 2.0 * off * 2 * F * H);
        ep_gemm_mode modes[] = {EP_GEMM_GROUPED, EP_GEMM_STREAMS, EP_GEMM_LOOP};
        for (int m = 0; m < 3; m++) {
            ep_gemm_set_mode(c.g, modes[m]);
            char name[32];
            snprintf(name, sizeof name, "%s", ep_gemm_mode_name(modes[m]));
            bench_add(b, name, T, -1, bench_time(b, op_group, &c), 0, 0, flops);
        }
        bench_add(b, "single_gemm", T, -1, bench_time(b, op_single, &c), 0, 0, flops);
    }
    ep_gemm_destroy(c.g);
    free(c.M);
    free(c.A);
    free(c.B);
    free(c.C);
    cudaFree(c.x);
    cudaFree(c.h);
    cudaFree(c.w);
    ep_nvl_destroy(&bar);
    return 0;
}
