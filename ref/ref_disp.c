/* ref_disp: the dispatcher backends of one MoE layer (see ref_disp.h). */
#include <string.h>

#include "ref_check.h"
#include "ref_disp.h"

const char *ref_disp_kind_name(ref_disp_kind k) {
    switch (k) {
    case REF_DISP_ALLTOALL:
        return "alltoall";
    case REF_DISP_NVL:
        return "nvl";
    case REF_DISP_NVL_FUSED:
        return "nvl_fused";
    }
    return "?";
}

void ref_disp_create(ref_disp *d, ref_ctx *ctx, ref_disp_kind kind, int H, int topk, int E,
                     int max_tokens, int pad, int64_t perm_cap) {
    memset(d, 0, sizeof *d);
    d->ctx = ctx;
    d->kind = kind;
    d->H = H;
    d->topk = topk;
    d->E = E;
    d->max_tokens = max_tokens;
    d->pad = pad;
    int ep = ctx->w.size;
    if (ep > EP_MAX_RANKS)
        REF_DIE("EP %d: the NVLink backend handles at most %d ranks", ep, EP_MAX_RANKS);
    CUDA_CHECK(ep_nvl_create(&d->nvl, ep, ctx->w.rank, H, topk, E, max_tokens, pad, perm_cap,
                             ref_allgather_cb, &ctx->w));
    if (kind == REF_DISP_ALLTOALL) {
        CUDA_CHECK(ep_layout_create(&d->own, ep, ctx->w.rank, topk, E, max_tokens, pad, perm_cap,
                                    NULL, NULL, NULL));
        size_t rows = (size_t)ep * max_tokens, bytes = rows * (size_t)H * 2;
        CUDA_CHECK(cudaMalloc((void **)&d->send, bytes));
        CUDA_CHECK(cudaMalloc((void **)&d->stage, bytes));
        CUDA_CHECK(cudaMalloc((void **)&d->csend, bytes));
        CUDA_CHECK(cudaMalloc((void **)&d->crecv, bytes));
    }
}

void ref_disp_destroy(ref_disp *d) {
    if (d->kind == REF_DISP_ALLTOALL) {
        ep_layout_destroy(&d->own);
        cudaFree(d->send);
        cudaFree(d->stage);
        cudaFree(d->csend);
        cudaFree(d->crecv);
    }
    ep_nvl_destroy(&d->nvl);
}

const ep_layout *ref_disp_layout(ref_disp *d) {
    return d->kind == REF_DISP_ALLTOALL ? &d->own : &d->nvl.layout;
}

void ref_disp_route(ref_disp *d, const int32_t *topk_idx, const float *topk_prob, int ntok,
                    cudaStream_t st) {
    if (ntok > d->max_tokens)
        REF_DIE("%d tokens, the dispatcher holds at most %d", ntok, d->max_tokens);
    if (d->kind != REF_DISP_ALLTOALL) {
        CUDA_CHECK(ep_nvl_layout(&d->nvl, topk_idx, topk_prob, ntok, st));
        return;
    }
    ep_layout *L = &d->own;
    const size_t n = (size_t)d->max_tokens * d->topk;
    ncclComm_t cm = d->ctx->nccl;
    int ep = d->ctx->w.size, me = d->ctx->w.rank;
    /* Count exchange: the routing map (choices + token count) of every rank. */
    CUDA_CHECK(cudaMemcpyAsync(L->ntok + me, &ntok, sizeof ntok, cudaMemcpyHostToDevice, st));
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllGather(topk_idx, L->topk_idx, n, ncclInt32, cm, st));
    NCCL_CHECK(ncclAllGather(topk_prob, L->topk_prob, n, ncclFloat32, cm, st));
    NCCL_CHECK(ncclAllGather(L->ntok + me, L->ntok, 1, ncclInt32, cm, st));
    NCCL_CHECK(ncclGroupEnd());
    CUDA_CHECK(ep_layout_compute(L, st));
    /* The host sync of the alltoall dispatcher: NCCL needs the row counts on the host. */
    CUDA_CHECK(cudaMemcpyAsync(d->h_cnt, L->cnt, 3 * (size_t)ep * ep * sizeof(int32_t),
                               cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

/* Rows to and from every peer, from the host copy of cnt/roff/coff. */
static void a2a_counts(ref_disp *d, int32_t *scnt, int32_t *soff, int32_t *rcnt, int32_t *roff,
                       int reverse) {
    int ep = d->ctx->w.size, me = d->ctx->w.rank;
    const int32_t *cnt = d->h_cnt, *ro = cnt + ep * ep, *co = ro + ep * ep;
    for (int p = 0; p < ep; p++) {
        if (!reverse) { /* dispatch: send in coff order, receive in staging (roff) order */
            scnt[p] = cnt[me * ep + p];
            soff[p] = co[me * ep + p];
            rcnt[p] = cnt[p * ep + me];
            roff[p] = ro[p * ep + me];
        } else { /* combine: the reverse */
            scnt[p] = cnt[p * ep + me];
            soff[p] = ro[p * ep + me];
            rcnt[p] = cnt[me * ep + p];
            roff[p] = co[me * ep + p];
        }
    }
}

void ref_disp_dispatch(ref_disp *d, const ep_bf16 *x, ep_bf16 *perm, int scale_by_prob,
                       cudaStream_t st) {
    if (d->kind == REF_DISP_NVL || d->kind == REF_DISP_NVL_FUSED) {
        CUDA_CHECK(
            ep_nvl_dispatch(&d->nvl, x, perm, d->kind == REF_DISP_NVL_FUSED, scale_by_prob, st));
        return;
    }
    int32_t sc[EP_MAX_RANKS], so[EP_MAX_RANKS], rc[EP_MAX_RANKS], ro[EP_MAX_RANKS];
    a2a_counts(d, sc, so, rc, ro, 0);
    CUDA_CHECK(ep_pack_send(&d->own, x, d->send, d->H, st));
    ref_alltoallv_rows(d->ctx, d->send, sc, so, d->stage, rc, ro, (size_t)d->H, st);
    CUDA_CHECK(ep_permute(&d->own, d->stage, perm, d->H, scale_by_prob, NULL, 0, NULL, NULL, st));
}

void ref_disp_combine(ref_disp *d, const ep_bf16 *expout, ep_bf16 *out, int weighted,
                      cudaStream_t st) {
    if (d->kind == REF_DISP_NVL || d->kind == REF_DISP_NVL_FUSED) {
        CUDA_CHECK(
            ep_nvl_combine(&d->nvl, expout, out, d->kind == REF_DISP_NVL_FUSED, weighted, st));
        return;
    }
    int32_t sc[EP_MAX_RANKS], so[EP_MAX_RANKS], rc[EP_MAX_RANKS], ro[EP_MAX_RANKS];
    a2a_counts(d, sc, so, rc, ro, 1);
    CUDA_CHECK(ep_combine_partial(&d->own, expout, d->csend, d->H, weighted, st));
    ref_alltoallv_rows(d->ctx, d->csend, sc, so, d->crecv, rc, ro, (size_t)d->H, st);
    CUDA_CHECK(ep_combine_reduce(&d->own, d->crecv, out, d->H, NULL, 0, NULL, st));
}

void ref_disp_counts(ref_disp *d, int32_t *cnt, int32_t *exp_padded, int32_t *totals,
                     cudaStream_t st) {
    const ep_layout *L = ref_disp_layout(d);
    int ep = L->ep;
    if (cnt)
        CUDA_CHECK(cudaMemcpyAsync(cnt, L->cnt, 3 * (size_t)ep * ep * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, st));
    if (exp_padded)
        CUDA_CHECK(cudaMemcpyAsync(exp_padded, L->exp_padded,
                                   (size_t)L->experts_per_rank * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, st));
    if (totals)
        CUDA_CHECK(
            cudaMemcpyAsync(totals, L->totals, 3 * sizeof(int32_t), cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

void ref_disp_check(ref_disp *d, cudaStream_t st) {
    cudaError_t e = cudaStreamSynchronize(st);
    if (ep_nvl_failed(&d->nvl))
        REF_DIE("an NVLink spin-wait timed out (see the device message above)");
    CUDA_CHECK(e);
}
