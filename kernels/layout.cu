// layout: the routing metadata of one dispatch, computed on the device from the gathered routing
// map, with no host synchronisation (this is what lets a layer be captured in a CUDA graph).
//   1. count   (grid: chunk x src)  per 64-token chunk: tokens per destination rank and
//                                   selections per local expert, and each entry's rank inside
//                                   its chunk (token order, so the layout is deterministic);
//   2. scan    (grid: column)       exclusive prefix over chunks for every (src,dst) pair and
//                                   every local expert;
//   3. offsets (one block)          padded expert offsets, roff/coff, totals, overflow;
//   4. finalize (grid: tokens)      didx and epos = bases + in-chunk ranks; drops rows past the
//                                   permute budget and raises the overflow flag.
#include "kcommon.cuh"

namespace {

__global__ void count_kernel(ep_layout L) {
    // [experts_per_rank] token bitmasks, [EP_CHUNK*topk] ids, [2*ep] warp sums
    extern __shared__ unsigned long long sm[];
    unsigned long long *emask = sm;
    int *ids = reinterpret_cast<int *>(emask + L.experts_per_rank);
    int *wsum = ids + EP_CHUNK * L.topk;
    const int s = blockIdx.y, c = blockIdx.x, i = threadIdx.x, lane = i % 32, warp = i / 32;
    const int t = c * EP_CHUNK + i;
    const int nt = L.ntok[s];
    const bool valid = t < nt;
    const int Ep = L.experts_per_rank;
    const size_t tk = ((size_t)s * L.max_tokens + t) * L.topk;
    for (int e = i; e < Ep; e += blockDim.x)
        emask[e] = 0;
    for (int j = 0; j < L.topk; j++)
        ids[i * L.topk + j] = valid ? L.topk_idx[tk + j] : -1;
    __syncthreads();
    // Destination ranks: ballot within the chunk gives the token's slot in its (src,dst) list.
    for (int d = 0; d < L.ep; d++) {
        bool go = false;
        for (int j = 0; j < L.topk; j++) {
            int e = ids[i * L.topk + j];
            go |= e >= 0 && e / Ep == d;
        }
        unsigned b = __ballot_sync(0xffffffffu, go);
        if (lane == 0) wsum[d * 2 + warp] = __popc(b);
        __syncthreads();
        int slot = __popc(b & ((1u << lane) - 1)) + (warp ? wsum[d * 2] : 0);
        if (t < L.max_tokens) L.didx[((size_t)s * L.max_tokens + t) * L.ep + d] = go ? slot : -1;
        if (i == 0)
            L.hist_d[((size_t)s * L.nchunks + c) * L.ep + d] = wsum[d * 2] + wsum[d * 2 + 1];
        __syncthreads();
    }
    // Local experts: rank of this selection among the chunk's earlier tokens choosing the expert
    // (an expert appears at most once per token): popcount of the expert's token bitmask.
    const int lo = L.me * Ep;
    for (int j = 0; j < L.topk; j++) {
        int e = ids[i * L.topk + j];
        if (e >= lo && e < lo + Ep) atomicOr(&emask[e - lo], 1ull << i);
    }
    __syncthreads();
    for (int j = 0; j < L.topk; j++) {
        int e = ids[i * L.topk + j];
        int r = e >= lo && e < lo + Ep ? __popcll(emask[e - lo] & ((1ull << i) - 1)) : -1;
        if (t < L.max_tokens) L.epos[tk + j] = r;
    }
    __syncthreads();
    for (int e = i; e < Ep; e += blockDim.x)
        L.hist_e[((size_t)s * L.nchunks + c) * Ep + e] = __popcll(emask[e]);
}

// Exclusive scan in place of n values at p[k*stride]; total to *total. One block per column.
__device__ void block_scan_strided(int32_t *p, int n, size_t stride, int32_t *total) {
    __shared__ int ws[32];
    __shared__ int carry;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int base = 0; base < n; base += blockDim.x) {
        int k = base + threadIdx.x;
        int v = k < n ? p[(size_t)k * stride] : 0;
        int x = v;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, x, o);
            if (lane >= o) x += y;
        }
        if (lane == 31) ws[warp] = x;
        __syncthreads();
        if (warp == 0) {
            int w = lane < nw ? ws[lane] : 0;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                int y = __shfl_up_sync(0xffffffffu, w, o);
                if (lane >= o) w += y;
            }
            if (lane < nw) ws[lane] = w; // inclusive warp prefix
        }
        __syncthreads();
        int excl = carry + (warp ? ws[warp - 1] : 0) + x - v;
        if (k < n) p[(size_t)k * stride] = excl;
        __syncthreads();
        if (threadIdx.x == 0) carry += ws[nw - 1];
        __syncthreads();
    }
    if (threadIdx.x == 0) *total = carry;
}

// Columns [0, ep*ep): (src,dst) pairs over chunks; then one per local expert over (src,chunk).
__global__ void scan_kernel(ep_layout L) {
    int col = blockIdx.x;
    if (col < L.ep * L.ep) {
        int s = col / L.ep, d = col % L.ep;
        block_scan_strided(L.hist_d + (size_t)s * L.nchunks * L.ep + d, L.nchunks, L.ep,
                           L.cnt + s * L.ep + d);
    } else {
        int e = col - L.ep * L.ep;
        block_scan_strided(L.hist_e + e, L.ep * L.nchunks, L.experts_per_rank, L.exp_count + e);
    }
}

__global__ void offsets_kernel(ep_layout L) {
    __shared__ int32_t pad[EP_MAX_EXPERTS + 1];
    const int Ep = L.experts_per_rank, p = L.pad_multiple;
    for (int e = threadIdx.x; e < Ep; e += blockDim.x) {
        int n = L.exp_count[e];
        int q = (n + p - 1) / p * p; // device-side padding: no host sync
        L.exp_padded[e] = q;
        pad[e] = q;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int off = 0;
        for (int e = 0; e < Ep; e++) {
            L.exp_off[e] = off;
            off += pad[e];
        }
        L.exp_off[Ep] = off;
        int rows = 0;
        for (int s = 0; s < L.ep; s++) {
            int acc = 0;
            for (int d = 0; d < L.ep; d++) {
                L.coff[s * L.ep + d] = acc;
                acc += L.cnt[s * L.ep + d];
            }
        }
        for (int d = 0; d < L.ep; d++) {
            int acc = 0;
            for (int s = 0; s < L.ep; s++) {
                L.roff[s * L.ep + d] = acc;
                acc += L.cnt[s * L.ep + d];
            }
            if (d == L.me) rows = acc;
        }
        L.totals[0] = rows;
        L.totals[1] = off;
        L.totals[2] = off > L.perm_cap;
    }
}

__global__ void finalize_kernel(ep_layout L) {
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= (size_t)L.ep * L.max_tokens) return;
    int s = (int)(g / L.max_tokens), t = (int)(g % L.max_tokens), c = t / EP_CHUNK;
    for (int d = 0; d < L.ep; d++) {
        int32_t *p = L.didx + g * L.ep + d;
        if (*p >= 0) *p += L.hist_d[((size_t)s * L.nchunks + c) * L.ep + d];
    }
    const int Ep = L.experts_per_rank, lo = L.me * Ep;
    for (int j = 0; j < L.topk; j++) {
        int32_t *p = L.epos + g * L.topk + j;
        if (*p < 0) continue;
        int e = L.topk_idx[g * L.topk + j] - lo;
        int64_t row = (int64_t)L.exp_off[e] + L.hist_e[((size_t)s * L.nchunks + c) * Ep + e] + *p;
        if (row >= L.perm_cap) { // budget exceeded: drop the row, never write past the buffer
            *p = -1;
            L.totals[2] = 1;
        } else {
            *p = (int32_t)row;
        }
    }
}

} // namespace

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
    *L = ep_layout{};
}

extern "C" int64_t ep_layout_max_perm_rows(const ep_layout *L) {
    int per_token = L->topk < L->experts_per_rank ? L->topk : L->experts_per_rank;
    return (int64_t)L->ep * L->max_tokens * per_token +
           (int64_t)L->experts_per_rank * (L->pad_multiple - 1);
}

extern "C" cudaError_t ep_layout_compute(ep_layout *L, cudaStream_t st) {
    const int Ep = L->experts_per_rank;
    size_t smem = Ep * sizeof(unsigned long long) + (EP_CHUNK * L->topk + 2 * L->ep) * sizeof(int);
    count_kernel<<<dim3(L->nchunks, L->ep), EP_CHUNK, smem, st>>>(*L);
    KLAUNCHED();
    scan_kernel<<<L->ep * L->ep + Ep, 512, 0, st>>>(*L);
    KLAUNCHED();
    offsets_kernel<<<1, 256, 0, st>>>(*L);
    KLAUNCHED();
    size_t n = (size_t)L->ep * L->max_tokens;
    finalize_kernel<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(*L);
    KLAUNCHED();
    return cudaSuccess;
}
