// layout: the routing metadata of one dispatch, computed on the device from the gathered routing
// map, with no host synchronisation (this is what lets a layer be captured in a CUDA graph). The
// stages (count, scan, offsets, finalize) are one kernel: layout_stages.cuh.
#include "layout_stages.cuh"

using namespace epk;

extern "C" cudaError_t ep_layout_create(ep_layout *L, int ep, int me, int topk, int num_experts,
                                        int max_tokens, int pad_multiple, int64_t perm_cap,
                                        int32_t *ext_topk, float *ext_prob, int32_t *ext_ntok) {
    *L = ep_layout{};
    if (ep < 1 || ep > EP_MAX_RANKS || me < 0 || me >= ep || topk < 1 || topk > EP_MAX_TOPK ||
        num_experts % ep || num_experts / ep > EP_MAX_EXPERTS || pad_multiple < 1 || max_tokens < 1)
        return cudaErrorInvalidValue;
    L->ep = ep;
    L->me = me;
    L->topk = topk;
    L->num_experts = num_experts;
    L->experts_per_rank = num_experts / ep;
    L->max_tokens = max_tokens;
    L->nchunks = (max_tokens + EP_CHUNK - 1) / EP_CHUNK;
    L->pad_multiple = pad_multiple;
    L->perm_cap = perm_cap > 0 ? perm_cap : ep_layout_max_perm_rows(L);
    const size_t T = (size_t)ep * max_tokens, Ep = L->experts_per_rank;
    if (ext_topk) {
        L->topk_idx = ext_topk;
        L->topk_prob = ext_prob;
        L->ntok = ext_ntok;
    } else {
        L->owns_map = 1;
        KCHECK(cudaMalloc(&L->topk_idx, T * topk * sizeof(int32_t)));
        KCHECK(cudaMalloc(&L->topk_prob, T * topk * sizeof(float)));
        KCHECK(cudaMalloc(&L->ntok, ep * sizeof(int32_t)));
    }
    KCHECK(cudaMalloc(&L->hist_d, (size_t)ep * L->nchunks * ep * sizeof(int32_t)));
    KCHECK(cudaMalloc(&L->hist_e, (size_t)ep * L->nchunks * Ep * sizeof(int32_t)));
    KCHECK(cudaMalloc(&L->didx, T * ep * sizeof(int32_t)));
    KCHECK(cudaMalloc(&L->epos, T * topk * sizeof(int32_t)));
    KCHECK(cudaMalloc(&L->cnt, 3 * ep * ep * sizeof(int32_t)));
    L->roff = L->cnt + ep * ep;
    L->coff = L->roff + ep * ep;
    KCHECK(cudaMalloc(&L->exp_count, (3 * Ep + 1 + 3) * sizeof(int32_t)));
    L->exp_padded = L->exp_count + Ep;
    L->exp_off = L->exp_padded + Ep;
    L->totals = L->exp_off + Ep + 1;
    const size_t sync_bytes = (size_t)LY_SETS * LY_NSYNC * LY_STRIDE * sizeof(ly_count);
    KCHECK(cudaMalloc(&L->sync, sync_bytes));
    KCHECK(cudaMemset(L->sync, 0, sync_bytes));
    return cudaSuccess;
}

extern "C" void ep_layout_destroy(ep_layout *L) {
    if (L->owns_map) {
        cudaFree(L->topk_idx);
        cudaFree(L->topk_prob);
        cudaFree(L->ntok);
    }
    cudaFree(L->hist_d);
    cudaFree(L->hist_e);
    cudaFree(L->didx);
    cudaFree(L->epos);
    cudaFree(L->cnt);
    cudaFree(L->exp_count);
    cudaFree(L->sync);
    *L = ep_layout{};
}

extern "C" int64_t ep_layout_max_perm_rows(const ep_layout *L) {
    int per_token = L->topk < L->experts_per_rank ? L->topk : L->experts_per_rank;
    return (int64_t)L->ep * L->max_tokens * per_token +
           (int64_t)L->experts_per_rank * (L->pad_multiple - 1);
}

extern "C" cudaError_t ep_layout_compute(ep_layout *L, cudaStream_t st) {
    return layout_launch(*L, NoPre{}, st);
}
