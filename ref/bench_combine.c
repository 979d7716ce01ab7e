/* bench_combine: token combine (weighted sum of the k expert outputs), every backend moving the
 * same pre-reduced rows in the same run: the comm-only rows (nvl, nccl, peer_copy, store_ceiling)
 * move exactly the rows that cross the link, from buffers filled before the timing; the end-to-end
 * rows (nvl_fused, nvl_then_reduce, nccl_full) start from the expert outputs. */
#include <string.h>

#include "bench.h"
#include "ref_check.h"
#include "ref_disp.h"

typedef struct {
    ref_disp *nvl, *a2a;
    ep_bf16 *expout, *out, *src;
    size_t peer_bytes[EP_MAX_RANKS];
    int me, ep;
    int32_t sc[EP_MAX_RANKS], so[EP_MAX_RANKS], rc[EP_MAX_RANKS], ro[EP_MAX_RANKS];
    int32_t sc0[EP_MAX_RANKS], rc0[EP_MAX_RANKS]; /* the same without the rank's own rows */
} cctx;

static void op_nvl(void *a, cudaStream_t st) {
    cctx *c = a;
    CUDA_CHECK(ep_nvl_combine_send(&c->nvl->nvl, st));
}
static void op_nvl_prereduce(void *a, cudaStream_t st) {
    cctx *c = a;
    CUDA_CHECK(ep_nvl_combine_prereduce(&c->nvl->nvl, c->expout, 1, st));
}
static void op_nvl_fused(void *a, cudaStream_t st) {
    cctx *c = a;
    CUDA_CHECK(ep_nvl_combine(&c->nvl->nvl, c->expout, c->out, 1, 1, st));
}
static void op_nvl_unfused(void *a, cudaStream_t st) {
    cctx *c = a;
    CUDA_CHECK(ep_nvl_combine(&c->nvl->nvl, c->expout, c->out, 0, 1, st));
}
static void op_nccl(void *a, cudaStream_t st) {
    cctx *c = a;
    ref_alltoallv_rows(c->a2a->ctx, c->a2a->csend, c->sc0, c->so, c->a2a->crecv, c->rc0, c->ro,
                       (size_t)c->a2a->H, st);
}
static void op_nccl_self(void *a, cudaStream_t st) {
    cctx *c = a;
    ref_alltoallv_rows(c->a2a->ctx, c->a2a->csend, c->sc, c->so, c->a2a->crecv, c->rc, c->ro,
                       (size_t)c->a2a->H, st);
}
static void op_nccl_full(void *a, cudaStream_t st) {
    cctx *c = a;
    ref_disp_combine(c->a2a, c->expout, c->out, 1, st);
}

int bench_combine(bench *b) {
    int maxt = 0;
    for (int i = 0; i < b->ntokens; i++)
        maxt = b->tokens[i] > maxt ? b->tokens[i] : maxt;
    const ep_config *cf = &b->cfg;
    int H = cf->hidden_size, k = cf->moe_router_topk, E = cf->num_experts;
    static ref_disp nvl, a2a;
    ref_disp_create(&nvl, b->ctx, REF_DISP_NVL, H, k, E, maxt, 1, 0);
    ref_disp_create(&a2a, b->ctx, REF_DISP_ALLTOALL, H, k, E, maxt, 1, 0);
    nvl.nvl.num_sms = b->num_sms;
    nvl.nvl.reduce_blocks = b->reduce_blocks;
    b->barrier = &nvl.nvl;
    cctx c;
    memset(&c, 0, sizeof c);
    c.nvl = &nvl;
    c.a2a = &a2a;
    c.me = b->ctx->w.rank;
    c.ep = b->ctx->w.size;
    int64_t perm_rows = ep_layout_max_perm_rows(&nvl.nvl.layout);
    int32_t *d_topk;
    float *d_prob;
    cudaStream_t st = b->ctx->stream;
    CUDA_CHECK(cudaMalloc((void **)&c.expout, (size_t)perm_rows * H * 2));
    CUDA_CHECK(cudaMalloc((void **)&c.out, (size_t)maxt * H * 2));
    CUDA_CHECK(cudaMalloc((void **)&c.src, (size_t)c.ep * maxt * H * 2));
    CUDA_CHECK(cudaMalloc((void **)&d_topk, (size_t)maxt * k * sizeof(int32_t)));
    CUDA_CHECK(cudaMalloc((void **)&d_prob, (size_t)maxt * k * sizeof(float)));
    CUDA_CHECK(ep_fill_random_bf16(c.expout, (size_t)perm_rows * H, 77 + c.me, 1.f, st));
    CUDA_CHECK(ep_fill_random_bf16(c.src, (size_t)c.ep * maxt * H, 99 + c.me, 1.f, st));
    bench_print_header(b, "combine");
    for (int i = 0; i < b->ntokens; i++) {
        int T = b->tokens[i];
        int32_t cnt[EP_MAX_RANKS * EP_MAX_RANKS * 3];
        double link, logical;
        bench_setup(b, T, &nvl, &a2a, d_topk, d_prob, cnt, &link, &logical);
        /* Combine sends back what dispatch received: rows from src p arrive at me. */
        const int32_t *ro = cnt + c.ep * c.ep, *co = ro + c.ep * c.ep;
        for (int p = 0; p < c.ep; p++) {
            c.peer_bytes[p] = (size_t)cnt[p * c.ep + c.me] * H * 2;
            c.sc[p] = cnt[p * c.ep + c.me];
            c.so[p] = ro[p * c.ep + c.me];
            c.rc[p] = cnt[c.me * c.ep + p];
            c.ro[p] = co[c.me * c.ep + p];
            c.sc0[p] = p == c.me ? 0 : c.sc[p];
            c.rc0[p] = p == c.me ? 0 : c.rc[p];
        }
        double out = 0;
        for (int p = 0; p < c.ep; p++)
            if (p != c.me) out += (double)c.peer_bytes[p];
        link = bench_mean(b, out);
        /* the comm-only rows start from pre-reduced rows, as after the expert GEMM's epilogue */
        CUDA_CHECK(ep_combine_partial(&a2a.own, c.expout, a2a.csend, H, 1, st));
        CUDA_CHECK(ep_nvl_combine_prereduce(&nvl.nvl, c.expout, 1, st));
        int S = b->num_sms;
        bench_add(b, "nvl", T, S, bench_time(b, op_nvl, &c), link, logical, 0);
        bench_add(b, "nvl_prereduce", T, nvl.nvl.gpu_sms, bench_time(b, op_nvl_prereduce, &c), link,
                  logical, 0);
        /* end to end: the pre-reduce shares the kernel with the senders on every SM left */
        bench_add(b, "nvl_fused", T, nvl.nvl.gpu_sms, bench_time(b, op_nvl_fused, &c), link,
                  logical, 0);
        bench_add(b, "nvl_then_reduce", T, nvl.nvl.gpu_sms, bench_time(b, op_nvl_unfused, &c), link,
                  logical, 0);
        bench_add(b, "nccl", T, -1, bench_time(b, op_nccl, &c), link, logical, 0);
        bench_add(b, "nccl_self", T, -1, bench_time(b, op_nccl_self, &c), link, logical, 0);
        bench_add(b, "nccl_full", T, -1, bench_time(b, op_nccl_full, &c), link, logical, 0);
        bench_add_push_baselines(b, &nvl.nvl, c.src, c.peer_bytes, c.me, c.ep, T, link, logical);
        ref_disp_check(&nvl, st);
    }
    cudaFree(c.expout);
    cudaFree(c.out);
    cudaFree(c.src);
    cudaFree(d_topk);
    cudaFree(d_prob);
    ref_disp_destroy(&nvl);
    ref_disp_destroy(&a2a);
    return 0;
}
