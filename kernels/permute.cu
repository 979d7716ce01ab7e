// permute: the single-GPU halves of dispatch and combine, one warp per token, grid-stride over
// all (src, token) pairs. Used by the NCCL alltoall backend and by the unfused NVLink path.
#include "rows.cuh"

using namespace epk;

namespace {

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;

int grid_for(size_t warps_needed) {
    size_t b = (warps_needed + WARPS - 1) / WARPS;
    return (int)(b < 4096 ? (b ? b : 1) : 4096);
}

__global__ void pack_send_kernel(ep_layout L, const ep_bf16 *x, ep_bf16 *send, int n16) {
    const int lane = threadIdx.x % 32;
    const int nt = L.ntok[L.me];
    const size_t nw = (size_t)gridDim.x * WARPS;
    for (size_t w = blockIdx.x * WARPS + threadIdx.x / 32; w < (size_t)nt * L.ep; w += nw) {
        int t = (int)(w / L.ep), d = (int)(w % L.ep);
        int di = L.didx[((size_t)L.me * L.max_tokens + t) * L.ep + d];
        if (di < 0) continue;
        size_t row = (size_t)L.coff[L.me * L.ep + d] + di;
        warp_copy_row(reinterpret_cast<int4 *>(send) + row * n16,
                      reinterpret_cast<const int4 *>(x) + (size_t)t * n16, n16, lane);
    }
}

// Waits (lane 0) for the chunk flag of (src, chunk) once per change of chunk.
__device__ bool warp_wait_chunk(const uint32_t *flags, const ep_layout &L, int src, int c,
                                uint32_t seq, int *err, int &last, int lane) {
    if (!flags) return true;
    int key = src * L.nchunks + c;
    if (key == last) return true;
    bool ok = true;
    if (lane == 0)
        ok = wait_flag(flags + key, seq, 20ull * 1000000000ull, L.me, src, "chunk flag", c, err);
    ok = __shfl_sync(0xffffffffu, ok, 0);
    __syncwarp();
    last = key;
    return ok;
}

__global__ void permute_kernel(ep_layout L, const ep_bf16 *stage, ep_bf16 *perm, int n16, int scale,
                               const uint32_t *flags, uint32_t seq, int *err,
                               const ep_bf16 *self_x) {
    const int lane = threadIdx.x % 32;
    const size_t wid = blockIdx.x * WARPS + threadIdx.x / 32, nw = (size_t)gridDim.x * WARPS;
    zero_gaps(L, perm, n16, (int)wid, (int)nw, lane);
    int last = -1;
    for (size_t w = wid; w < (size_t)L.ep * L.max_tokens; w += nw) {
        int s = (int)(w / L.max_tokens), t = (int)(w % L.max_tokens);
        if (t >= L.ntok[s]) continue;
        if (!warp_wait_chunk(flags, L, s, t / EP_CHUNK, seq, err, last, lane)) return;
        permute_token(L, s, t, stage, perm, n16, lane, scale != 0, self_x);
    }
}

__global__ void combine_partial_kernel(ep_layout L, const ep_bf16 *expout, ep_bf16 *partial,
                                       int n16, int weighted) {
    const int lane = threadIdx.x % 32;
    const size_t nw = (size_t)gridDim.x * WARPS;
    for (size_t w = blockIdx.x * WARPS + threadIdx.x / 32; w < (size_t)L.ep * L.max_tokens;
         w += nw) {
        int s = (int)(w / L.max_tokens), t = (int)(w % L.max_tokens);
        if (t >= L.ntok[s]) continue;
        int di = L.didx[w * L.ep + L.me];
        if (di < 0) continue;
        int4 *dst =
            reinterpret_cast<int4 *>(partial) + (size_t)(L.roff[s * L.ep + L.me] + di) * n16;
        combine_token(L, s, t, expout, dst, n16, lane, weighted != 0);
    }
}

__global__ void combine_reduce_kernel(ep_layout L, const ep_bf16 *recv, ep_bf16 *out, int n16,
                                      const uint32_t *flags, uint32_t seq, int *err) {
    const int lane = threadIdx.x % 32;
    const size_t nw = (size_t)gridDim.x * WARPS;
    const int nt = L.ntok[L.me];
    int last = -1;
    for (size_t w = blockIdx.x * WARPS + threadIdx.x / 32; w < (size_t)nt; w += nw) {
        int t = (int)w;
        if (flags) // every expert rank's partials of this chunk
            for (int d = 0; d < L.ep; d++) {
                last = -1;
                if (!warp_wait_chunk(flags, L, d, t / EP_CHUNK, seq, err, last, lane)) return;
            }
        reduce_token(L, t, recv, out, n16, lane);
    }
}

// Capacity slots (CUDA graphs): expert e's rows of the permuted buffer that lie below the
// budget, [exp_off[e], exp_off[e] + n_e) with n_e = min(exp_padded[e], perm_cap - exp_off[e]).
__device__ __forceinline__ int64_t expert_rows(const ep_layout &L, int e) {
    int64_t n = L.exp_padded[e], room = L.perm_cap - (int64_t)L.exp_off[e];
    if (n > room) n = room;
    return n > 0 ? n : 0;
}

// slots[e][i] = perm[exp_off[e] + i] for i < min(n_e, cap), zeros after; one warp per slot row.
__global__ void to_slots_kernel(ep_layout L, const ep_bf16 *perm, ep_bf16 *slots, int n16,
                                int64_t cap) {
    const int lane = threadIdx.x % 32;
    const size_t nw = (size_t)gridDim.x * WARPS;
    const int4 z = make_int4(0, 0, 0, 0);
    for (size_t w = blockIdx.x * WARPS + threadIdx.x / 32; w < (size_t)L.experts_per_rank * cap;
         w += nw) {
        const int e = (int)(w / cap);
        const int64_t i = (int64_t)(w % cap);
        int4 *dst = reinterpret_cast<int4 *>(slots) + w * n16;
        if (i == 0 && lane == 0 && L.exp_padded[e] > cap) L.totals[2] = 1; // rows dropped
        if (i < expert_rows(L, e)) {
            warp_copy_row(dst,
                          reinterpret_cast<const int4 *>(perm) + (size_t)(L.exp_off[e] + i) * n16,
                          n16, lane);
        } else {
            for (int q = lane; q < n16; q += 32)
                dst[q] = z;
        }
    }
}

// perm[r] = slots[e][r - exp_off[e]] for the rows of every expert below the budget; rows past the
// capacity (dropped) become zeros. One warp per permuted row.
__global__ void from_slots_kernel(ep_layout L, const ep_bf16 *slots, ep_bf16 *perm, int n16,
                                  int64_t cap) {
    const int lane = threadIdx.x % 32, Ep = L.experts_per_rank;
    const size_t nw = (size_t)gridDim.x * WARPS;
    int64_t end = L.exp_off[Ep];
    if (end > L.perm_cap) end = L.perm_cap;
    const int4 z = make_int4(0, 0, 0, 0);
    for (size_t r = blockIdx.x * WARPS + threadIdx.x / 32; r < (size_t)end; r += nw) {
        int lo = 0, hi = Ep - 1; // the expert whose range holds r: last e with exp_off[e] <= r
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if ((size_t)L.exp_off[mid] <= r)
                lo = mid;
            else
                hi = mid - 1;
        }
        const int64_t i = (int64_t)r - L.exp_off[lo];
        int4 *dst = reinterpret_cast<int4 *>(perm) + r * n16;
        if (i < cap) {
            warp_copy_row(dst, reinterpret_cast<const int4 *>(slots) + ((size_t)lo * cap + i) * n16,
                          n16, lane);
        } else {
            for (int q = lane; q < n16; q += 32)
                dst[q] = z;
        }
    }
}

} // namespace

extern "C" cudaError_t ep_pack_send(const ep_layout *L, const ep_bf16 *x, ep_bf16 *send, int H,
                                    cudaStream_t st) {
    if (H % 8) return cudaErrorInvalidValue;
    pack_send_kernel<<<grid_for((size_t)L->max_tokens * L->ep), THREADS, 0, st>>>(*L, x, send,
                                                                                  H / 8);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_permute(const ep_layout *L, const ep_bf16 *stage, ep_bf16 *perm, int H,
                                  int scale_by_prob, const uint32_t *flags, uint32_t seq, int *err,
                                  const ep_bf16 *self_x, cudaStream_t st) {
    if (H % 8 || (flags && !err)) return cudaErrorInvalidValue;
    permute_kernel<<<grid_for((size_t)L->max_tokens * L->ep), THREADS, 0, st>>>(
        *L, stage, perm, H / 8, scale_by_prob, flags, seq, err, self_x);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_combine_partial(const ep_layout *L, const ep_bf16 *expout,
                                          ep_bf16 *partial, int H, int weighted, cudaStream_t st) {
    if (H % 8) return cudaErrorInvalidValue;
    combine_partial_kernel<<<grid_for((size_t)L->max_tokens * L->ep), THREADS, 0, st>>>(
        *L, expout, partial, H / 8, weighted);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_combine_reduce(const ep_layout *L, const ep_bf16 *recv, ep_bf16 *out,
                                         int H, const uint32_t *flags, uint32_t seq, int *err,
                                         cudaStream_t st) {
    if (H % 8 || (flags && !err)) return cudaErrorInvalidValue;
    combine_reduce_kernel<<<grid_for((size_t)L->max_tokens), THREADS, 0, st>>>(*L, recv, out, H / 8,
                                                                               flags, seq, err);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_perm_to_slots(const ep_layout *L, const ep_bf16 *perm, ep_bf16 *slots,
                                        int H, int64_t cap, cudaStream_t st) {
    if (H % 8 || cap < 1) return cudaErrorInvalidValue;
    to_slots_kernel<<<grid_for((size_t)L->experts_per_rank * cap), THREADS, 0, st>>>(
        *L, perm, slots, H / 8, cap);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_slots_to_perm(const ep_layout *L, const ep_bf16 *slots, ep_bf16 *perm,
                                        int H, int64_t cap, cudaStream_t st) {
    if (H % 8 || cap < 1) return cudaErrorInvalidValue;
    from_slots_kernel<<<grid_for((size_t)L->perm_cap), THREADS, 0, st>>>(*L, slots, perm, H / 8,
                                                                         cap);
    KLAUNCHED();
    return cudaSuccess;
}
