// layout_stages: the device layout as one kernel of stages, so that a dispatch's layout costs one
// launch (at 128 tokens per rank the host's issue of six launches, ~4.5 us each, was the
// critical path of dispatch with its layout). A block takes a ticket when it starts and works on
// the stage the ticket falls in:
//   pre      (optional) the caller's blocks, e.g. the NVLink routing-map writes to the peers;
//   count    (chunk x src)  per 64-token chunk: tokens per destination rank and selections per
//                           local expert, and each entry's rank inside its chunk (token order,
//                           so the layout is deterministic); waits for the source's map (pre);
//   scan     (column)       exclusive prefix over chunks for every (src,dst) pair and every local
//                           expert, once every count block is done; the last column's block then
//                           computes the padded expert offsets, roff/coff, totals and overflow;
//   finalize (chunk x src)  didx and epos = bases + in-chunk ranks, once the offsets are there;
//                           drops rows past the permute budget and raises the overflow flag.
// A stage waits only for stages of lower tickets, which were taken by blocks that had already
// started: no block waits for one that cannot be scheduled, whatever the grid and whatever else
// runs on the GPU (the forward-progress argument of decoupled look-back scans). The counters only
// grow (64 bits): launch n of a grid of B blocks takes tickets [(n-1)B, nB) and waits for n times
// its stage's count, so nothing is reset (a reset needs a last block, one more round trip) and a
// CUDA graph replays it as it is. Each kind of pre stage has its own counters (their grids differ).
#pragma once
#include "kcommon.cuh"

namespace epk {

constexpr int LAYOUT_THREADS = EP_CHUNK; // a count block is one chunk, a thread one token
// LY_MAPPED + s: source s's map is there (its chunk 0 count block waited for it).
enum {
    LY_TICKET,
    LY_COUNTED,
    LY_SCANNED,
    LY_READY,
    LY_MAPPED,
    LY_NSYNC = LY_MAPPED + EP_MAX_RANKS
};
// Counter i of set k (0: no pre stage, 1: with one) at sync[(k * LY_NSYNC + i) * LY_STRIDE]: each
// on its own 128-byte line, so the stages' polls of one do not contend with the atomics on another.
constexpr int LY_STRIDE = 16, LY_SETS = 2;
typedef unsigned long long ly_count;

struct LayoutStages {
    int pre, count, scan, fin;
};
__host__ __device__ inline LayoutStages layout_stages(const ep_layout &L, int pre) {
    LayoutStages g;
    g.pre = pre;
    g.count = L.nchunks * L.ep;
    g.scan = L.ep * L.ep + L.experts_per_rank;
    g.fin = L.nchunks * L.ep;
    return g;
}
__host__ __device__ inline int layout_blocks(const LayoutStages &g) {
    return g.pre + g.count + g.scan + g.fin;
}
// The count stage's dynamic shared memory: [experts_per_rank] token bitmasks, [EP_CHUNK*topk]
// ids, [2*ep] warp sums.
inline size_t layout_smem(const ep_layout &L) {
    return L.experts_per_rank * sizeof(unsigned long long) +
           (EP_CHUNK * L.topk + 2 * L.ep) * sizeof(int);
}

// The stages hand over through counters the way CUTLASS's generic barrier does: the block's
// threads meet at a barrier, then thread 0 adds with release semantics (the barrier orders the
// other threads' writes before it); a waiter's thread 0 loads with acquire, then its block meets.
// No __threadfence around them: the pattern does not need one (with one before and after each
// update the layout took the same time).
__device__ __forceinline__ ly_count ld_acquire_gpu(const ly_count *p) {
    ly_count v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
// The block's writes are done: one increment of *ctr; every thread gets the value before it
// (acquire as well: the block that sees the last value reads what the others wrote).
__device__ __forceinline__ ly_count layout_signal(ly_count *ctr) {
    __shared__ ly_count old;
    __syncthreads();
    if (threadIdx.x == 0)
        asm volatile("atom.add.acq_rel.gpu.global.u64 %0, [%1], 1;"
                     : "=l"(old)
                     : "l"(ctr)
                     : "memory");
    __syncthreads();
    return old;
}
// The same when no one needs the value: a release reduction, nothing to wait for.
__device__ __forceinline__ void layout_arrive(ly_count *ctr) {
    __syncthreads();
    if (threadIdx.x == 0)
        asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(ctr) : "memory");
}
// Waits until *ctr >= target: the writes of the blocks that signalled it are visible after.
__device__ __forceinline__ void layout_wait(const ly_count *ctr, ly_count target) {
    if (threadIdx.x == 0)
        while (ld_acquire_gpu(ctr) < target)
            __nanosleep(32);
    __syncthreads();
}

// The chunks of source s that hold tokens: the only ones the scans and finalize visit (the
// buffers are sized for max_tokens; a small batch uses a few of their chunks).
__device__ __forceinline__ int active_chunks(const ep_layout &L, int s) {
    return (L.ntok[s] + EP_CHUNK - 1) / EP_CHUNK;
}

__device__ inline void layout_count(const ep_layout &L, int c, int s, unsigned long long *sm) {
    unsigned long long *emask = sm;
    int *ids = reinterpret_cast<int *>(emask + L.experts_per_rank);
    int *wsum = ids + EP_CHUNK * L.topk;
    const int i = threadIdx.x, lane = i % 32, warp = i / 32;
    const int t = c * EP_CHUNK + i;
    const bool valid = t < L.ntok[s];
    const int Ep = L.experts_per_rank;
    const size_t tk = ((size_t)s * L.max_tokens + t) * L.topk;
    if (c >= active_chunks(L, s)) { // no tokens: entries -1, no counts (the scans skip the chunk)
        if (t < L.max_tokens) {
            for (int d = 0; d < L.ep; d++)
                L.didx[((size_t)s * L.max_tokens + t) * L.ep + d] = -1;
            for (int j = 0; j < L.topk; j++)
                L.epos[tk + j] = -1;
        }
        return;
    }
    for (int e = i; e < Ep; e += blockDim.x)
        emask[e] = 0;
    int id[EP_MAX_TOPK]; // loads first (see layout_offsets)
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++)
        if (j < L.topk) id[j] = valid ? L.topk_idx[tk + j] : -1;
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++)
        if (j < L.topk) ids[i * L.topk + j] = id[j];
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

// Inclusive prefix sum of x over the warp's lanes.
__device__ __forceinline__ int warp_inclusive_sum(int x, int lane) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

// Exclusive scan in place of the n values at(0..n-1) (int32_t pointers), starting from carry0;
// returns the total (carry0 + the sum) to every thread.
template <class At> __device__ inline int block_scan(At at, int n, int carry0) {
    __shared__ int ws[32];
    __shared__ int carry;
    if (threadIdx.x == 0) carry = carry0;
    __syncthreads();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int base = 0; base < n; base += blockDim.x) {
        int k = base + threadIdx.x;
        int v = k < n ? *at(k) : 0;
        const int x = warp_inclusive_sum(v, lane);
        if (lane == 31) ws[warp] = x;
        __syncthreads();
        if (warp == 0) {
            const int w = warp_inclusive_sum(lane < nw ? ws[lane] : 0, lane);
            if (lane < nw) ws[lane] = w; // inclusive warp prefix
        }
        __syncthreads();
        int excl = carry + (warp ? ws[warp - 1] : 0) + x - v;
        if (k < n) *at(k) = excl;
        __syncthreads();
        if (threadIdx.x == 0) carry += ws[nw - 1];
        __syncthreads();
    }
    const int total = carry;
    __syncthreads(); // every thread read carry before a next call resets it
    return total;
}
__device__ inline int block_scan_strided(int32_t *p, int n, size_t stride, int carry0) {
    return block_scan([=](int k) { return p + (size_t)k * stride; }, n, carry0);
}

// Columns [0, ep*ep): (src,dst) pairs over the source's chunks; then one per local expert over
// (src, chunk), source after source, in one scan. Only chunks with tokens: the others' counts are
// never read.
// act[s]: active_chunks(L, s), read before the counts were waited for.
__device__ inline void layout_scan(const ep_layout &L, int col, const int act[EP_MAX_RANKS]) {
    if (col < L.ep * L.ep) {
        const int s = col / L.ep, d = col % L.ep;
        int as = 0;
#pragma unroll
        for (int q = 0; q < EP_MAX_RANKS; q++)
            if (q == s) as = act[q];
        const int total =
            block_scan_strided(L.hist_d + (size_t)s * L.nchunks * L.ep + d, as, L.ep, 0);
        if (threadIdx.x == 0) L.cnt[s * L.ep + d] = total;
        return;
    }
    const int e = col - L.ep * L.ep, Ep = L.experts_per_rank, nchunks = L.nchunks;
    int n = 0;
#pragma unroll
    for (int s = 0; s < EP_MAX_RANKS; s++)
        n += act[s];
    int32_t *h = L.hist_e + e;
    const int total = block_scan(
        [&](int k) {
            int s = 0;
#pragma unroll
            for (int q = 0; q < EP_MAX_RANKS - 1; q++)
                if (s == q && k >= act[q]) {
                    k -= act[q];
                    s = q + 1;
                }
            return h + ((size_t)s * nchunks + k) * Ep;
        },
        n, 0);
    if (threadIdx.x == 0) L.exp_count[e] = total;
}

// Padded expert offsets (a block scan), roff/coff, totals and overflow. Every global load is
// issued before a store could come between it and the next (the compiler cannot tell the arrays
// apart, and a load behind a store waits for it: a serial chain of memory round trips was most of
// the layout's time).
__device__ inline void layout_offsets(const ep_layout &L) {
    __shared__ int32_t cnt[EP_MAX_RANKS * EP_MAX_RANKS], pad[EP_MAX_EXPERTS];
    const int Ep = L.experts_per_rank, p = L.pad_multiple, ep = L.ep;
    for (int e = threadIdx.x; e < Ep; e += blockDim.x) {
        const int n = L.exp_count[e];
        const int q = (n + p - 1) / p * p; // device-side padding: no host sync
        L.exp_padded[e] = q;
        pad[e] = q;
    }
    for (int i = threadIdx.x; i < ep * ep; i += blockDim.x)
        cnt[i] = L.cnt[i];
    // in shared memory (the scan synchronises the block first)
    const int off = block_scan([&](int k) { return pad + k; }, Ep, 0);
    for (int e = threadIdx.x; e < Ep; e += blockDim.x)
        L.exp_off[e] = pad[e];
    const int i = threadIdx.x;
    if (i == 0) {
        L.exp_off[Ep] = off;
        L.totals[1] = off;
        L.totals[2] = off > L.perm_cap;
    } else if (i >= 1 && i <= ep) { // coff row s: destinations in order
        const int s = i - 1;
        int acc = 0;
        for (int d = 0; d < ep; d++) {
            L.coff[s * ep + d] = acc;
            acc += cnt[s * ep + d];
        }
    } else if (i >= 32 && i < 32 + ep) { // roff column d: sources in order
        const int d = i - 32;
        int acc = 0;
        for (int s = 0; s < ep; s++) {
            L.roff[s * ep + d] = acc;
            acc += cnt[s * ep + d];
        }
        if (d == L.me) L.totals[0] = acc;
    }
}

// One token's entries on their way to the final values: loaded once the counts are there
// (finalize_load, while the scans run), completed once the offsets are (finalize_store). The
// loads are issued in independent groups before any store (see layout_offsets); compile-time
// indices only, so the arrays stay in registers.
struct FinalizeToken {
    size_t g, sc;
    bool valid;
    int di[EP_MAX_RANKS], pos[EP_MAX_TOPK], e[EP_MAX_TOPK];
};
__device__ inline void finalize_load(const ep_layout &L, int s, int t, FinalizeToken &f) {
    f.valid = t < L.ntok[s]; // past it: no entries, count wrote -1
    if (!f.valid) return;
    f.g = (size_t)s * L.max_tokens + t;
    f.sc = (size_t)s * L.nchunks + t / EP_CHUNK;
    const int lo = L.me * L.experts_per_rank;
#pragma unroll
    for (int d = 0; d < EP_MAX_RANKS; d++)
        if (d < L.ep) f.di[d] = L.didx[f.g * L.ep + d];
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++)
        if (j < L.topk) {
            f.pos[j] = L.epos[f.g * L.topk + j];
            f.e[j] = L.topk_idx[f.g * L.topk + j] - lo;
        }
}
__device__ inline void finalize_store(const ep_layout &L, const FinalizeToken &f) {
    if (!f.valid) return;
    const int Ep = L.experts_per_rank;
    int hd[EP_MAX_RANKS];
    int64_t row[EP_MAX_TOPK];
#pragma unroll
    for (int d = 0; d < EP_MAX_RANKS; d++)
        if (d < L.ep) hd[d] = L.hist_d[f.sc * L.ep + d];
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++)
        if (j < L.topk && f.pos[j] >= 0)
            row[j] = (int64_t)L.exp_off[f.e[j]] + L.hist_e[f.sc * Ep + f.e[j]] + f.pos[j];
#pragma unroll
    for (int d = 0; d < EP_MAX_RANKS; d++)
        if (d < L.ep && f.di[d] >= 0) L.didx[f.g * L.ep + d] = f.di[d] + hd[d];
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++) {
        if (j >= L.topk || f.pos[j] < 0) continue;
        if (row[j] >= L.perm_cap) { // budget exceeded: drop the row, never write past the buffer
            L.epos[f.g * L.topk + j] = -1;
            L.totals[2] = 1;
        } else {
            L.epos[f.g * L.topk + j] = (int32_t)row[j];
        }
    }
}

// The layout with no pre stage: the routing map is already in place (gathered by NCCL, or
// exchanged before).
struct NoPre {
    __host__ __device__ int blocks() const {
        return 0;
    }
    __device__ void run(int) const {}
    __device__ void wait_source(int) const {}
};

// One launch (layout_launch): layout_blocks(layout_stages(L, pre.blocks())) blocks of
// LAYOUT_THREADS threads, layout_smem(L) bytes of dynamic shared memory. Pre: blocks() (host and
// device), run(b) for b < blocks(), and wait_source(s) (every thread calls it; returns once source
// s's map is there, or gives up after raising an error: the stages never wait forever).
template <class Pre>
__global__ void __launch_bounds__(LAYOUT_THREADS) layout_kernel(ep_layout L, Pre pre) {
    extern __shared__ unsigned long long layout_sm[];
    __shared__ ly_count ticket;
    const LayoutStages g = layout_stages(L, pre.blocks());
    const ly_count blocks = layout_blocks(g);
    ly_count *const sync = L.sync + (g.pre > 0) * LY_NSYNC * LY_STRIDE;
    if (threadIdx.x == 0) ticket = atomicAdd(sync + LY_TICKET * LY_STRIDE, 1ull);
    __syncthreads();
    const ly_count n = ticket / blocks + 1; // this launch's number
    ly_count *const counted = sync + LY_COUNTED * LY_STRIDE;
    ly_count *const ready = sync + LY_READY * LY_STRIDE;
    int b = (int)(ticket % blocks);
    if (b < g.pre) {
        pre.run(b);
    } else if ((b -= g.pre) < g.count) {
        // this rank's own chunks first: their map needs no peer. The source's map: chunk 0's
        // block waits for it and tells the others, which wait on that (a poll of one local
        // counter instead of every block polling the peer's flags).
        const int s = (L.me + b / L.nchunks) % L.ep, c = b % L.nchunks;
        ly_count *mapped = sync + (LY_MAPPED + s) * LY_STRIDE;
        if (g.pre > 0 && c == 0) {
            pre.wait_source(s);
            layout_arrive(mapped);
        } else if (g.pre > 0) {
            layout_wait(mapped, n);
        }
        layout_count(L, c, s, layout_sm);
        layout_arrive(counted);
    } else if ((b -= g.count) < g.scan) {
        // the token counts first (the maps arrive before the counts are done), then the counts
        if (g.pre > 0)
            for (int s = 0; s < L.ep; s++)
                layout_wait(sync + (LY_MAPPED + s) * LY_STRIDE, n);
        int act[EP_MAX_RANKS];
#pragma unroll
        for (int s = 0; s < EP_MAX_RANKS; s++)
            act[s] = s < L.ep ? active_chunks(L, s) : 0;
        layout_wait(counted, n * g.count);
        layout_scan(L, b, act);
        if (layout_signal(sync + LY_SCANNED * LY_STRIDE) == n * g.scan - 1) { // the last: offsets
            layout_offsets(L);
            layout_arrive(ready);
        }
    } else {
        // every chunk counted: every map is there, with its token count; the raw entries are
        // loaded while the scans run. Chunks past the token count have nothing to finalize.
        b -= g.scan;
        const int s = b / L.nchunks, c = b % L.nchunks;
        layout_wait(counted, n * g.count);
        FinalizeToken f;
        f.valid = false;
        if (c < active_chunks(L, s)) finalize_load(L, s, c * EP_CHUNK + threadIdx.x, f);
        layout_wait(ready, n);
        finalize_store(L, f);
    }
}

template <class Pre>
cudaError_t layout_launch(const ep_layout &L, const Pre &pre, cudaStream_t st) {
    const int blocks = layout_blocks(layout_stages(L, pre.blocks()));
    layout_kernel<<<blocks, LAYOUT_THREADS, layout_smem(L), st>>>(L, pre);
    KLAUNCHED();
    return cudaSuccess;
}

} // namespace epk
