// nvl: NVLink dispatch/combine between the processes of one node, in the spirit of Hybrid-EP
// intranode. Every rank owns one symmetric region, mapped into its peers with CUDA IPC:
//
//   region = [ stage  : ep*max_tokens rows x H bf16 ]  dispatch receive (staging order)
//            [ cstage : ep*max_tokens rows x H bf16 ]  combine receive (coff order)
//            [ flags  : ready[op][rank] | map[src][blk] | dchunk[src][chunk] | cchunk[src][chunk] ]
//            [ map    : topk ids, probs [ep][max_tokens][k], ntok[ep] ]  gathered routing map
//
// Senders store token rows straight into the peer's region (SM-issued stores over NVLink), then
// release a per-(source, 64-token chunk) flag at the receiver. Helper blocks of the same kernel
// wait on those flags (fused permute: rows to expert-grouped padded order; fused combine: the sum
// over ranks), so the receiver never waits for the whole transfer. Rows a rank keeps for itself
// never pass through the region's send path: dispatch permutes them from x, and combine's
// pre-reduce writes them straight into the own combine buffer; their chunk flags are released
// with no data. Combine sends pre-reduced rows: a whole-GPU kernel first sums each token's local
// expert rows (HBM-bound), so the senders stream one contiguous row range per chunk, like dispatch.
// The fused combine has no senders: its pre-reducers store each summed row straight into the
// owner's combine buffer, and the slice that completes a chunk releases the chunk's flag there, so
// the HBM-bound sum and the NVLink stores overlap with no round trip through psend.
// NOTES: flags carry the op sequence number, so they never need resetting. Before writing into a
// peer, a block waits for the peer's ready[op] >= seq: the peer has started this op, so whatever
// read the buffers in the previous op (stream-ordered before it) has finished.
#include <algorithm>
#include <cstring>
#include "layout_stages.cuh"
#include "rows.cuh"

using namespace epk;

namespace {

constexpr int THREADS = 512;
constexpr int WARPS = THREADS / 32;
constexpr int MAPB = 32; // blocks per peer writing the routing map (LAYOUT_THREADS threads each)
constexpr size_t RESERVE_SMEM = 116 * 1024; // > half an SM's shared memory: one block per SM
enum { OP_MAP, OP_DISPATCH, OP_COMBINE, OP_BARRIER, OP_PUSH, OP_PUSH_DONE, NOPS };
constexpr int FL_READY = 0;
constexpr int FL_MAP = NOPS * EP_MAX_RANKS;
constexpr int FL_DCHUNK = FL_MAP + EP_MAX_RANKS * MAPB;

struct Args {
    ep_layout L;
    int n16, me, ep, senders, helpers, flag;
    int handshake; // 0: a dispatch right after the layout's map exchange (see dispatch_kernel)
    uint32_t seq;
    int *err;
    uint64_t timeout_ns;
    char *region[EP_MAX_RANKS];
    const int4 *psend;
    // combine with the pre-reduce in the same kernel: `pre` blocks (the lowest indices) sum the
    // tokens' local expert rows, count finished tokens per (owner, chunk) in pcnt, then join the
    // owner-side sum; 0: the rows are already in psend (separate pre-reduce kernel)
    int pre, weighted;
    // fused combine: the pre-reducers store each peer's rows straight into its combine buffer and
    // release its chunk flags (no senders, no psend round trip through HBM)
    int direct;
    int *pcnt;
    int *scnt; // finished slices per (dispatch | combine, destination, chunk) of a sender item
    int *push_done; // push_kernel's blocks that finished storing
    const ep_bf16 *expout;
    size_t off_stage, off_cstage, off_flags, off_topk, off_prob, off_ntok;
    int fl_cchunk;
};

__device__ __forceinline__ uint32_t *flags_of(const Args &a, int r) {
    return reinterpret_cast<uint32_t *>(a.region[r] + a.off_flags);
}
__device__ __forceinline__ int4 *rows_of(const Args &a, int r, size_t off) {
    return reinterpret_cast<int4 *>(a.region[r] + off);
}

// Announce (the lead block: block 0, or the layout kernel's ticket 0) that this rank entered
// `op`, then wait (thread 0 of every block) until every peer did; the rest of the block waits at
// the barrier.
__device__ bool enter_wait(const Args &a, int op);
__device__ void announce(const Args &a, int op, bool lead = blockIdx.x == 0) {
    if (lead && threadIdx.x < a.ep)
        st_release_sys(flags_of(a, threadIdx.x) + FL_READY + op * EP_MAX_RANKS + a.me, a.seq);
}
__device__ bool enter(const Args &a, int op, bool lead = blockIdx.x == 0) {
    announce(a, op, lead);
    return enter_wait(a, op);
}
__device__ bool enter_wait(const Args &a, int op) {
    __shared__ int ok;
    if (threadIdx.x == 0) {
        ok = 1;
        for (int d = 0; d < a.ep && ok; d++)
            ok = wait_flag(flags_of(a, a.me) + FL_READY + op * EP_MAX_RANKS + d, a.seq,
                           a.timeout_ns, a.me, d, "ready", op, a.err);
    }
    __syncthreads();
    return ok;
}

// Thread 0 makes the block's stores visible system-wide, then releases the flag.
__device__ void publish(const Args &a, uint32_t *flag) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        st_release_sys(flag, a.seq);
    }
}

// Column slices per item when there are few items for many workers: a token's row (or a chunk's
// rows) is split into up to `units` column ranges so that every worker gets some, at least one
// slice per item (at large token counts, one: whole rows as before).
__device__ __forceinline__ int slices(size_t workers, size_t items, int units) {
    if (items == 0) return 1;
    size_t s = workers / items;
    return s < 1 ? 1 : s > (size_t)units ? units : (int)s;
}
// The chunks of the source with the most tokens: the items (chunk, source or destination) a
// sender or helper loop covers.
__device__ __forceinline__ int max_chunks(const ep_layout &L) {
    int nch = 0;
    for (int k = 0; k < L.ep; k++)
        nch = max(nch, (L.ntok[k] + EP_CHUNK - 1) / EP_CHUNK);
    return nch;
}
// With few chunks for many sender blocks, an item (chunk, destination) is split into S slices of
// its rows, one block each (at most 16: 4 tokens a slice); with many chunks, S = 1.
constexpr int MAX_ROW_SLICES = 16;

// One thread for its block or warp, once their stores are ordered before the call: makes them
// visible system-wide and counts them in *cnt; true for the caller that completes n, which resets
// the count for the next op (fenced, so whatever it releases next comes after the reset).
__device__ __forceinline__ bool last_of(int *cnt, int n) {
    __threadfence_system();
    if (atomicAdd(cnt, 1) != n - 1) return false;
    *cnt = 0;
    __threadfence_system();
    return true;
}

// A slice of item (c, d) is done: the item's flag at d is released by the last of its S slices
// to finish (last_of on a local count per item; `also`, when given, is reset for the next op
// too). S = 1: this block publishes.
__device__ void publish_item(const Args &a, uint32_t *flag, int *cnt, int S, int *also) {
    if (S == 1) {
        publish(a, flag);
        return;
    }
    __syncthreads();
    if (threadIdx.x == 0 && last_of(cnt, S)) {
        if (also) *also = 0;
        st_release_sys(flag, a.seq);
    }
}

// Sender work item i -> (chunk c, destination d). The destination rotates with the round of
// items, so every sender block takes its share of the peers' chunks (a fixed i % ep would leave
// some blocks only the publish-only own-rank chunks). For a fixed c, d runs over all ranks.
__device__ __forceinline__ void sender_item(const Args &a, int i, int &c, int &d) {
    const int per = a.senders / a.ep > 0 ? a.senders / a.ep : 1;
    c = i / a.ep;
    d = (a.me + 1 + i % a.ep + c / per) % a.ep;
}

// Lane 0 waits for a peer's flag; __syncwarp orders the lanes' later loads after its acquire.
__device__ bool warp_wait(const Args &a, const uint32_t *flag, int peer, const char *what, int idx,
                          int lane) {
    int ok = 0;
    if (lane == 0) ok = wait_flag(flag, a.seq, a.timeout_ns, a.me, peer, what, idx, a.err);
    ok = __shfl_sync(0xffffffffu, ok, 0);
    __syncwarp();
    return ok;
}

// The layout kernel's pre stage: the routing map (topk ids, probs, token count) written into every
// rank's region, MAPB blocks per destination, each releasing its flag there; a count block of
// source s waits for s's MAPB flags. Ticket 0 announces the op; every map block waits until each
// peer entered it (the peer's previous readers of its map have finished).
struct MapStage {
    Args a;
    const int32_t *topk;
    const float *prob;
    int ntok;
    __host__ __device__ int blocks() const {
        return a.ep * MAPB;
    }
    __device__ void run(int b) const {
        if (!enter(a, OP_MAP, b == 0)) return;
        const int d = b / MAPB, k = b % MAPB;
        const ep_layout &L = a.L;
        const size_t n = (size_t)ntok * L.topk, base = (size_t)a.me * L.max_tokens * L.topk;
        int32_t *dt = reinterpret_cast<int32_t *>(a.region[d] + a.off_topk) + base;
        float *dp = reinterpret_cast<float *>(a.region[d] + a.off_prob) + base;
        // interleaved over the MAPB blocks: a small map is spread over all of them
        for (size_t i = (size_t)k * blockDim.x + threadIdx.x; i < n;
             i += (size_t)MAPB * blockDim.x) {
            dt[i] = topk[i];
            dp[i] = prob[i];
        }
        if (k == 0 && threadIdx.x == 0)
            reinterpret_cast<int32_t *>(a.region[d] + a.off_ntok)[a.me] = ntok;
        // A release after the block barrier covers the block's stores (as the layout's stage
        // counters hand over); publish's system fence before it cost 1.5-2 us per layout.
        __syncthreads();
        if (threadIdx.x == 0) st_release_sys(flags_of(a, d) + FL_MAP + a.me * MAPB + k, a.seq);
    }
    // Source s's map is there: each of its MAPB flags (every thread calls it).
    __device__ void wait_source(int s) const {
        static_assert(MAPB <= LAYOUT_THREADS, "one waiting thread per map block");
        if ((int)threadIdx.x < MAPB)
            wait_flag(flags_of(a, a.me) + FL_MAP + s * MAPB + threadIdx.x, a.seq, a.timeout_ns,
                      a.me, s, "map", threadIdx.x, a.err);
        __syncthreads();
    }
};

__global__ void __launch_bounds__(THREADS, 1)
    dispatch_kernel(Args a, const ep_bf16 *x, ep_bf16 *perm, int scale) {
    extern __shared__ char reserve[]; // one block per SM (see RESERVE_SMEM)
    (void)reserve;
    // Right after the layout, whose map exchange waited for every peer to enter it, no second
    // handshake: a peer's layout ran after its previous readers of its staging (stream order),
    // and this one ended only once every peer's map had arrived.
    if (a.handshake && !enter(a, OP_DISPATCH)) return;
    const ep_layout &L = a.L;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if ((int)blockIdx.x < a.senders) {
        const int nt = L.ntok[a.me], nch = (nt + EP_CHUNK - 1) / EP_CHUNK;
        const int S = slices((size_t)a.senders, (size_t)nch * a.ep, MAX_ROW_SLICES);
        for (int i = blockIdx.x; i < nch * a.ep * S; i += a.senders) {
            int c, d;
            sender_item(a, i / S, c, d);
            const int sl = i % S, t0 = c * EP_CHUNK + sl * EP_CHUNK / S,
                      t1 = min(c * EP_CHUNK + (sl + 1) * EP_CHUNK / S, nt);
            int4 *dst = rows_of(a, d, a.off_stage);
            const int base = L.roff[a.me * L.ep + d];
            // Own tokens: no copy (the permute reads x), only the flag.
            for (int t = t0 + warp; d != a.me && t < t1; t += WARPS) {
                int di = L.didx[((size_t)a.me * L.max_tokens + t) * L.ep + d];
                if (di >= 0)
                    warp_copy_row(dst + (size_t)(base + di) * a.n16,
                                  reinterpret_cast<const int4 *>(x) + (size_t)t * a.n16, a.n16,
                                  lane);
            }
            publish_item(a, flags_of(a, d) + FL_DCHUNK + a.me * L.nchunks + c,
                         a.scnt + (size_t)d * L.nchunks + c, S, nullptr);
        }
        return;
    }
    // Helper blocks: receiver-side permute as chunks arrive, and the pad gaps.
    const int h = blockIdx.x - a.senders;
    zero_gaps(L, perm, a.n16, h * WARPS + warp, a.helpers * WARPS, lane);
    const ep_bf16 *stage = reinterpret_cast<const ep_bf16 *>(a.region[a.me] + a.off_stage);
    const uint32_t *fl = flags_of(a, a.me) + FL_DCHUNK;
    // Items (chunk, source) token by token, one warp each, with no block barrier: this rank's own
    // chunks first (their rows are read from x, there from the start: no wait), so the helpers
    // permute them while the peers' rows are still on the link; then the peers' chunk by chunk,
    // as they arrive. A chunk's tokens go to warps of different blocks (SMs), so the chunks that
    // arrive last, the kernel's tail, are permuted by the whole GPU: with a block per chunk (a
    // warp's row is latency-bound) that tail was tens of us, 1.4x the transfer at 4096 tokens.
    const int nch = max_chunks(L);
    const int hw = warp * a.helpers + h, nhw = a.helpers * WARPS;
    for (int i = hw; i < nch * a.ep * EP_CHUNK; i += nhw) {
        const int item = i / EP_CHUNK, peer = item - nch;
        const int c = peer < 0 ? item : peer / (a.ep - 1);
        const int s = peer < 0 ? a.me : (a.me + 1 + peer % (a.ep - 1)) % a.ep;
        const int t = c * EP_CHUNK + i % EP_CHUNK;
        if (t >= L.ntok[s]) continue;
        if (s != a.me && !warp_wait(a, fl + s * L.nchunks + c, s, "dispatch chunk", c, lane))
            return;
        permute_token(L, s, t, stage, perm, a.n16, lane, scale != 0, x);
    }
}

// Slice sl of S over n16 columns, in units of 64 (the width of combine_token's step): [c0, c1).
__device__ __forceinline__ void slice_cols(int n16, int sl, int S, int &c0, int &c1) {
    const int n64 = (n16 + 63) / 64;
    c0 = sl * n64 / S * 64;
    c1 = min((sl + 1) * n64 / S * 64, n16);
}
__device__ __forceinline__ size_t total_tokens(const ep_layout &L) {
    size_t total = 0;
    for (int k = 0; k < L.ep; k++)
        total += (size_t)L.ntok[k];
    return total;
}
// The pre-reduce's slices per token: the same in the pre-reducers and the senders that count them.
__device__ __forceinline__ int pre_slices(const ep_layout &L, size_t warps, int n16) {
    return slices(warps, total_tokens(L), (n16 + 63) / 64);
}

// Pre-reduce work item w, dense over the tokens of every source, chunk by chunk: the 64 tokens
// of chunk c of every source (the peers' first, this rank's own last) before chunk c + 1. So the
// owner-side sum of chunk c (own rows and the peers' sent ones) can start while later chunks are
// still being pre-reduced, instead of after all of the own tokens, which a source-major order
// leaves to the end; the peers' rows still leave chunk by chunk for the senders. False past the
// last token.
__device__ __forceinline__ bool pre_item(const ep_layout &L, size_t w, int &s, int &t) {
    // the chunks every source fills: index arithmetic; past them, a walk over the few left
    int nmin = L.ntok[0], nmax = L.ntok[0];
    for (int k = 0; k < L.ep; k++) {
        nmin = min(nmin, L.ntok[k]);
        nmax = max(nmax, L.ntok[k]);
    }
    if (w >= total_tokens(L)) return false;
    const int full = nmin / EP_CHUNK;
    const size_t per = (size_t)L.ep * EP_CHUNK;
    if (w < (size_t)full * per) {
        const int c = (int)(w / per), r = (int)(w % per);
        s = (L.me + 1 + r / EP_CHUNK) % L.ep;
        t = c * EP_CHUNK + r % EP_CHUNK;
        return true;
    }
    w -= (size_t)full * per;
    for (int c = full; c * EP_CHUNK < nmax; c++)
        for (int k = 0; k < L.ep; k++) {
            const int src = (L.me + 1 + k) % L.ep, n = L.ntok[src] - c * EP_CHUNK;
            const size_t m = n <= 0 ? 0 : n < EP_CHUNK ? (size_t)n : (size_t)EP_CHUNK;
            if (w < m) {
                s = src;
                t = c * EP_CHUNK + (int)w;
                return true;
            }
            w -= m;
        }
    return false;
}

// The rows this rank returns to owner s for the owner's chunk c: slots [r0, r1) of its
// pre-reduced rows, one contiguous range at both ends (roff here, coff at the owner).
__device__ __forceinline__ void chunk_rows(const ep_layout &L, int s, int c, int &r0, int &r1) {
    const int32_t *hd = L.hist_d + (size_t)s * L.nchunks * L.ep + L.me;
    r0 = hd[(size_t)c * L.ep];
    r1 = c + 1 < active_chunks(L, s) ? hd[(size_t)(c + 1) * L.ep] : L.cnt[s * L.ep + L.me];
}
__device__ __forceinline__ uint32_t *cchunk_flag(const Args &a, int owner, int c) {
    return flags_of(a, owner) + a.fl_cchunk + a.me * a.L.nchunks + c;
}

// Combine step 1 for the items wid, wid + nw, ... of one warp: the (weighted) sum over the
// token's local experts -> psend (peers' tokens, staging order) or the own combine buffer (own
// tokens), each token in pre_slices column slices. pcnt non-NULL: lane 0 counts each finished
// slice in its token's (owner, chunk) counter. d non-NULL (the direct fused combine): a peer's
// rows go straight into its combine buffer, and the slice that completes an (owner, chunk)
// resets the counter and releases the owner's chunk flag.
__device__ __forceinline__ void prereduce_warp(const ep_layout &L, const ep_bf16 *expout,
                                               int4 *psend, int4 *cself, int n16, bool weighted,
                                               size_t wid, size_t nw, int lane, int *pcnt,
                                               const Args *d = nullptr) {
    const int S = pre_slices(L, nw, n16);
    int s, t;
    for (size_t w = wid; pre_item(L, S == 1 ? w : w / S, s, t); w += nw) {
        const int di = L.didx[((size_t)s * L.max_tokens + t) * L.ep + L.me];
        if (di < 0) continue;
        int4 *dst =
            s == L.me ? cself + (size_t)(L.coff[L.me * L.ep + L.me] + di) * n16
            : d       ? rows_of(*d, s, d->off_cstage) + (size_t)(L.coff[s * L.ep + L.me] + di) * n16
                      : psend + (size_t)(L.roff[s * L.ep + L.me] + di) * n16;
        int c0, c1;
        slice_cols(n16, S == 1 ? 0 : (int)(w % S), S, c0, c1);
        combine_token(L, s, t, expout, dst, n16, lane, weighted, c0, c1);
        if (pcnt) {
            __syncwarp(); // the row's stores of every lane before lane 0's fence
            if (lane == 0) {
                const int c = t / EP_CHUNK;
                int *pc = pcnt + s * L.nchunks + c;
                if (!d) {
                    __threadfence();
                    atomicAdd(pc, 1);
                } else {
                    int r0, r1;
                    chunk_rows(L, s, c, r0, r1);
                    if (last_of(pc, (r1 - r0) * S)) // the chunk's last slice
                        st_release_sys(cchunk_flag(*d, s, c), d->seq);
                }
            }
        }
    }
}

// The direct fused combine's chunks with no rows for their owner: the flag alone (items wid,
// wid + nw, ... over (owner, chunk)).
__device__ void publish_empty_chunks(const Args &a, size_t wid, size_t nw) {
    const ep_layout &L = a.L;
    const int nch = max_chunks(L);
    for (size_t i = wid; i < (size_t)L.ep * nch; i += nw) {
        const int s = (int)(i / nch), c = (int)(i % nch);
        int r0, r1;
        if (c * EP_CHUNK >= L.ntok[s]) continue;
        chunk_rows(L, s, c, r0, r1);
        if (r1 == r0) st_release_sys(cchunk_flag(a, s, c), a.seq);
    }
}

// The owner's sum over ranks, chunk by chunk as the partials arrive: sum block h of nh, warp by
// warp, items (token, column slice) with a token's items on warps of different blocks (SMs), so
// the chunks that arrive last are summed by the whole GPU; with fewer tokens than warps a token's
// row is split in column slices.
__device__ void owner_sum(const Args &a, ep_bf16 *out, int h, int nh) {
    const ep_layout &L = a.L;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nt = L.ntok[a.me];
    const ep_bf16 *recv = reinterpret_cast<const ep_bf16 *>(rows_of(a, a.me, a.off_cstage));
    const uint32_t *fl = flags_of(a, a.me) + a.fl_cchunk;
    const size_t nw = (size_t)nh * WARPS;
    const int S = slices(nw, (size_t)nt, (a.n16 + 63) / 64);
    for (size_t i = (size_t)warp * nh + h; i < (size_t)nt * S; i += nw) {
        const int t = (int)(i / S), c = t / EP_CHUNK;
        int c0, c1;
        slice_cols(a.n16, (int)(i % S), S, c0, c1);
        for (int d = 0; d < a.ep; d++)
            if (!warp_wait(a, fl + d * L.nchunks + c, d, "combine chunk", c, lane)) return;
        reduce_token(L, t, recv, out, a.n16, lane, c0, c1);
    }
}

// Combine. Blocks [0, pre): pre-reducers; [pre, pre + senders): senders; the rest: owner-side
// sum. Pre-reducers never wait during the pre-reduce; senders wait only on pre-reducers (lower
// block indices, scheduled first) and on the peers. With the sum in this kernel the pre-reducers
// then join it and wait on chunks like the helpers, holding their SMs: the senders still get
// theirs as other kernels on the GPU finish (the grid is one block per SM, so a free GPU holds it
// all at once).
__global__ void __launch_bounds__(THREADS, 1) combine_kernel(Args a, ep_bf16 *out) {
    extern __shared__ char reserve[];
    (void)reserve;
    const ep_layout &L = a.L;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, b = blockIdx.x;
    announce(a, OP_COMBINE);
    int4 *cself = rows_of(a, a.me, a.off_cstage);
    // With the owner-side sum in this kernel (helpers > 0), a pre-reducer joins it once its
    // share of the pre-reduce is done: sum block helpers + b of helpers + pre. The dedicated
    // helpers take the first chunks, which arrive first; the pre-reducers the rest, which
    // arrive once the pre-reduce (HBM-bound, the longest part) is nearly over.
    const int nsum = a.helpers > 0 ? a.helpers + a.pre : a.helpers;
    if (b < a.pre) {
        // Writes only local memory (psend, the own rows of the own combine buffer), so no wait
        // for the peers; the direct fused combine writes into them, once they entered the op.
        const size_t wid = (size_t)b * WARPS + warp, nw = (size_t)a.pre * WARPS;
        if (a.direct) {
            if (!enter_wait(a, OP_COMBINE)) return;
            if (lane == 0) publish_empty_chunks(a, wid, nw);
        }
        prereduce_warp(L, a.expout, const_cast<int4 *>(a.psend), cself, a.n16, a.weighted != 0, wid,
                       nw, lane, a.pcnt, a.direct ? &a : nullptr);
        if (a.helpers > 0) owner_sum(a, out, a.helpers + b, nsum);
        return;
    }
    if (!enter_wait(a, OP_COMBINE)) return;
    const int sb = b - a.pre;
    if (sb >= 0 && sb < a.senders) {
        const int pslices = a.pcnt ? pre_slices(L, (size_t)a.pre * WARPS, a.n16) : 1;
        // Chunk c of owner s's tokens: its pre-reduced rows are one contiguous range of slots
        // [hist_d[s][c][me], hist_d[s][c+1][me]) in psend (at roff) and at the owner (at coff).
        __shared__ int ready;
        // the chunks any owner has (the items past an owner's tokens are skipped)
        const int nch = max_chunks(L);
        const int S = slices((size_t)a.senders, (size_t)nch * a.ep, MAX_ROW_SLICES);
        for (int i = sb; i < nch * a.ep * S; i += a.senders) {
            int c, s;
            sender_item(a, i / S, c, s);
            if (c * EP_CHUNK >= L.ntok[s]) continue;
            int r0, r1;
            chunk_rows(L, s, c, r0, r1);
            int *pc = a.pcnt ? a.pcnt + s * L.nchunks + c : nullptr;
            if (pc && r1 > r0) { // the chunk's rows are all pre-reduced
                if (threadIdx.x == 0) {
                    ready = wait_flag(reinterpret_cast<const uint32_t *>(pc),
                                      (uint32_t)(r1 - r0) * (uint32_t)pslices, a.timeout_ns, a.me,
                                      a.me, "pre-reduce", c, a.err);
                    // every increment of this op has arrived: reset for the next op (with
                    // slices, by the last one, once every slice has waited)
                    if (S == 1) *pc = 0;
                }
                __syncthreads();
                if (!ready) return;
            }
            if (s != a.me) { // own rows: written in place by the pre-reduce, only the flag
                const int sl = i % S, q0 = r0 + (r1 - r0) * sl / S,
                          q1 = r0 + (r1 - r0) * (sl + 1) / S;
                int4 *dst =
                    rows_of(a, s, a.off_cstage) + (size_t)(L.coff[s * L.ep + a.me] + q0) * a.n16;
                const int4 *src = a.psend + (size_t)(L.roff[s * L.ep + a.me] + q0) * a.n16;
                for (int r = warp; r < q1 - q0; r += WARPS)
                    warp_copy_row_coherent(dst + (size_t)r * a.n16, src + (size_t)r * a.n16, a.n16,
                                           lane);
            }
            publish_item(a, cchunk_flag(a, s, c), a.scnt + (size_t)(L.ep + s) * L.nchunks + c, S,
                         pc);
        }
        return;
    }
    owner_sum(a, out, sb - a.senders, nsum);
}

// Combine step 1 as its own kernel (whole GPU, one warp per token).
__global__ void __launch_bounds__(256, 2)
    prereduce_kernel(ep_layout L, const ep_bf16 *expout, int4 *psend, int4 *cself, int n16,
                     int weighted) {
    const int wpb = blockDim.x / 32;
    prereduce_warp(L, expout, psend, cself, n16, weighted != 0,
                   (size_t)blockIdx.x * wpb + threadIdx.x / 32, (size_t)gridDim.x * wpb,
                   threadIdx.x % 32, nullptr);
}

__global__ void __launch_bounds__(THREADS, 1) store_kernel(int4 *dst, const int4 *src, size_t n16) {
    extern __shared__ char reserve[];
    (void)reserve;
    const size_t per = (n16 + gridDim.x - 1) / gridDim.x;
    const size_t a = blockIdx.x * per, b = a + per < n16 ? a + per : n16;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    // Same access pattern as dispatch: one warp per 896 x 16-byte row-sized piece.
    const size_t piece = 896;
    for (size_t p = a + warp * piece; p < b; p += WARPS * piece) {
        size_t m = b - p < piece ? b - p : piece;
        warp_copy_row(dst + p, src + p, (int)m, lane);
    }
}

// Every peer at once: block b stores to peer peer[b % n], its (b / n)-th slice of that peer's
// bytes; the blocks of all peers run together, as a dispatch's writes to its peers do.
struct AllPeers {
    int4 *dst[EP_MAX_RANKS];
    size_t n16[EP_MAX_RANKS];
    int n;
};

__device__ void store_all_peers(const AllPeers &ap, const int4 *src) {
    if (ap.n == 0) return;
    const int k = blockIdx.x % ap.n, nb = gridDim.x / ap.n + (k < (int)(gridDim.x % ap.n));
    const size_t n16 = ap.n16[k], per = (n16 + nb - 1) / nb;
    const size_t a = (blockIdx.x / ap.n) * per, b = a + per < n16 ? a + per : n16;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t piece = 896;
    for (size_t p = a + warp * piece; p < b; p += WARPS * piece) {
        size_t m = b - p < piece ? b - p : piece;
        warp_copy_row(ap.dst[k] + p, src + p, (int)m, lane);
    }
}

__global__ void __launch_bounds__(THREADS, 1) store_all_kernel(AllPeers ap, const int4 *src) {
    extern __shared__ char reserve[];
    (void)reserve;
    store_all_peers(ap, src);
}

// The deepep / hybridep transfer of `epref run` (ep_nvl_push) as one kernel, as their kernels
// are: its blocks hold their SMs from the launch through the handshake, the stores and the
// closing wait. (As three kernels, barrier, stores, barrier, the stores were launched only once
// the handshake ended; beside a compute kernel that had filled the GPU meanwhile they then waited
// for its SMs, hundreds of us beside an attention kernel.) The last block to finish its stores
// tells every peer that this rank's bytes have landed, then waits until every peer's have.
__global__ void __launch_bounds__(THREADS, 1) push_kernel(Args a, AllPeers ap, const int4 *src) {
    extern __shared__ char reserve[];
    (void)reserve;
    if (!enter(a, OP_PUSH)) return;
    store_all_peers(ap, src);
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) last = last_of(a.push_done, (int)gridDim.x);
    __syncthreads();
    if (last) enter(a, OP_PUSH_DONE, true);
}

// The same all-peer stores moved by the SMs' Tensor Memory Accelerator (TMA) instead of thread
// stores, as Hybrid-EP moves its NVLink rows: bulk copies global -> shared -> peer, so an SM keeps
// many bytes in flight with one issuing thread. TMA_PIPES warps per block each run a pipeline of
// TMA_STAGES shared-memory buffers of TMA_CHUNK bytes over their share of the block's range:
// loads run TMA_AHEAD chunks ahead of the stores, and up to TMA_STAGES - TMA_AHEAD stores drain
// at once (sm_90: cp.async.bulk). Of the shapes tried on 4 x H200 (4 pipes x 6 x 4 KB, 2 x 6 x
// 8 KB, 1 x 6 x 16 KB; docs/performance.md, "The EP 4 ceiling") one pipe of 16 KB chunks is the
// fastest: at EP 2 as fast as the thread stores, at EP 4 0.7x NCCL.
constexpr int TMA_PIPES = 1, TMA_STAGES = 6, TMA_AHEAD = 3;
constexpr uint32_t TMA_CHUNK = 16384;

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void tma_load(uint32_t dst, const void *src, uint32_t bytes,
                                         uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
#endif
}

__device__ __forceinline__ void tma_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                     "selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
#endif
}

__device__ __forceinline__ void tma_store(void *dst, uint32_t src, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(src),
                 "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

static_assert((size_t)TMA_PIPES * TMA_STAGES * TMA_CHUNK <= RESERVE_SMEM, "TMA buffers");

__global__ void __launch_bounds__(THREADS, 1) tma_all_kernel(AllPeers ap, const int4 *src) {
    extern __shared__ __align__(128) char reserve[];
    __shared__ __align__(8) uint64_t bars[TMA_PIPES * TMA_STAGES];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (warp >= TMA_PIPES || lane != 0) return;
    const int k = blockIdx.x % ap.n, nb = gridDim.x / ap.n + (k < (int)(gridDim.x % ap.n));
    const size_t n16 = ap.n16[k], per = (n16 + nb - 1) / nb;
    const size_t a = (blockIdx.x / ap.n) * per, b = a + per < n16 ? a + per : n16;
    if (a >= b) return;
    // this pipe's share of [a, b), in 16-byte units
    const size_t pper = (b - a + TMA_PIPES - 1) / TMA_PIPES;
    const size_t p0 = a + warp * pper, p1 = p0 + pper < b ? p0 + pper : b;
    if (p0 >= p1) return;
    const uint32_t c16 = TMA_CHUNK / 16;
    const long n = (long)((p1 - p0 + c16 - 1) / c16);
    const uint32_t buf = smem_u32(reserve + (size_t)warp * TMA_STAGES * TMA_CHUNK);
    const uint32_t bar = smem_u32(&bars[warp * TMA_STAGES]);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    for (int st = 0; st < TMA_STAGES; st++)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar + 8 * st) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    auto bytes_of = [&](long i) {
        size_t rest = p1 - p0 - (size_t)i * c16;
        return (uint32_t)((rest < c16 ? rest : c16) * 16);
    };
    for (long j = 0; j < TMA_AHEAD && j < n; j++)
        tma_load(buf + j * TMA_CHUNK, src + p0 + j * c16, bytes_of(j), bar + 8 * j);
    for (long i = 0; i < n; i++) {
        const int st = (int)(i % TMA_STAGES);
        tma_wait(bar + 8 * st, (uint32_t)((i / TMA_STAGES) & 1));
        tma_store(ap.dst[k] + p0 + i * c16, buf + st * TMA_CHUNK, bytes_of(i));
        const long j = i + TMA_AHEAD;
        if (j < n) {
            // chunk j's buffer last held store j - STAGES: with stores up to i issued, at most
            // STAGES - AHEAD of them may still be reading
            const int sj = (int)(j % TMA_STAGES);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            if (j >= TMA_STAGES)
                asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(TMA_STAGES - TMA_AHEAD)
                             : "memory");
#endif
            tma_load(buf + sj * TMA_CHUNK, src + p0 + j * c16, bytes_of(j), bar + 8 * sj);
        }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

__global__ void barrier_kernel(Args a) {
    enter(a, OP_BARRIER);
}

size_t align256(size_t x) {
    return (x + 255) & ~size_t(255);
}

Args make_args(ep_nvl *c, int helpers) {
    Args a;
    memset(&a, 0, sizeof a);
    a.L = c->layout;
    a.n16 = c->hidden / 8;
    a.me = c->me;
    a.ep = c->ep;
    a.senders = c->num_sms;
    a.helpers = helpers;
    a.seq = ++c->seq;
    a.err = c->d_err;
    a.timeout_ns = (uint64_t)(c->timeout_s * 1e9);
    for (int r = 0; r < c->ep; r++)
        a.region[r] = static_cast<char *>(c->peer_region[r]);
    a.psend = static_cast<const int4 *>(c->psend);
    a.scnt = c->scnt;
    a.push_done = c->push_done;
    a.off_stage = c->off_stage;
    a.off_cstage = c->off_cstage;
    a.off_flags = c->off_flags;
    a.off_topk = c->off_topk;
    a.off_prob = c->off_prob;
    a.off_ntok = c->off_ntok;
    a.fl_cchunk = FL_DCHUNK + c->ep * c->nchunks;
    a.handshake = 1;
    // every kernel op builds its Args here: after any of them, the next dispatch shakes hands
    c->after_map = 0;
    return a;
}

// The stream capture st is in (its id + 1), 0 when none.
cudaError_t capture_of(cudaStream_t st, unsigned long long *id) {
    cudaStreamCaptureStatus cs;
    unsigned long long cid = 0;
    *id = 0;
    KCHECK(cudaStreamGetCaptureInfo(st, &cs, &cid));
    if (cs == cudaStreamCaptureStatusActive) *id = cid + 1;
    return cudaSuccess;
}

template <typename K> cudaError_t reserve_smem(K kernel) {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)RESERVE_SMEM);
}

} // namespace

extern "C" cudaError_t ep_nvl_create(ep_nvl *c, int ep, int me, int hidden, int topk,
                                     int num_experts, int max_tokens, int pad_multiple,
                                     int64_t perm_cap, ep_allgather_fn ag, void *ag_ctx) {
    memset(c, 0, sizeof *c);
    if (ep < 1 || ep > EP_MAX_RANKS || hidden % 8 || max_tokens < 1) return cudaErrorInvalidValue;
    c->ep = ep;
    c->me = me;
    c->hidden = hidden;
    c->topk = topk;
    c->num_experts = num_experts;
    c->max_tokens = max_tokens;
    c->nchunks = (max_tokens + EP_CHUNK - 1) / EP_CHUNK;
    c->num_sms = 16;
    c->permute_blocks = 8;
    c->reduce_blocks = 8;
    c->timeout_s = 20.0;
    const size_t rows = (size_t)ep * max_tokens, row_bytes = (size_t)hidden * 2;
    size_t off = 0;
    c->off_stage = off;
    off = align256(off + rows * row_bytes);
    c->off_cstage = off;
    off = align256(off + rows * row_bytes);
    c->off_flags = off;
    off = align256(off + (FL_DCHUNK + 2 * (size_t)ep * c->nchunks) * sizeof(uint32_t));
    c->off_topk = off;
    off = align256(off + rows * topk * sizeof(int32_t));
    c->off_prob = off;
    off = align256(off + rows * topk * sizeof(float));
    c->off_ntok = off;
    off = align256(off + ep * sizeof(int32_t));
    c->region_bytes = off;
    KCHECK(cudaMalloc(&c->region, off));
    KCHECK(
        cudaMemset(static_cast<char *>(c->region) + c->off_flags, 0, c->off_topk - c->off_flags));
    KCHECK(cudaMemset(static_cast<char *>(c->region) + c->off_ntok, 0, ep * sizeof(int32_t)));
    KCHECK(cudaMalloc(&c->d_err, sizeof(int)));
    KCHECK(cudaMalloc(&c->psend, rows * row_bytes));
    KCHECK(cudaMalloc(&c->pcnt, (size_t)ep * c->nchunks * sizeof(int)));
    KCHECK(cudaMemset(c->pcnt, 0, (size_t)ep * c->nchunks * sizeof(int)));
    // [dispatch | combine][destination][chunk]: the two never share a count
    KCHECK(cudaMalloc(&c->scnt, 2 * (size_t)ep * c->nchunks * sizeof(int)));
    KCHECK(cudaMemset(c->scnt, 0, 2 * (size_t)ep * c->nchunks * sizeof(int)));
    KCHECK(cudaMalloc(&c->push_done, sizeof(int)));
    KCHECK(cudaMemset(c->push_done, 0, sizeof(int)));
    int dev = 0;
    KCHECK(cudaGetDevice(&dev));
    KCHECK(cudaDeviceGetAttribute(&c->gpu_sms, cudaDevAttrMultiProcessorCount, dev));
    KCHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&c->prereduce_per_sm, prereduce_kernel,
                                                         256, 0));
    KCHECK(cudaMemset(c->d_err, 0, sizeof(int)));
    KCHECK(cudaDeviceSynchronize()); // flags are zero before any peer can see the region
    cudaIpcMemHandle_t mine, all[EP_MAX_RANKS];
    KCHECK(cudaIpcGetMemHandle(&mine, c->region));
    if (ag(ag_ctx, &mine, all, sizeof mine)) return cudaErrorUnknown;
    for (int r = 0; r < ep; r++) {
        if (r == me) {
            c->peer_region[r] = c->region;
            continue;
        }
        KCHECK(cudaIpcOpenMemHandle(&c->peer_region[r], all[r], cudaIpcMemLazyEnablePeerAccess));
    }
    char *base = static_cast<char *>(c->region);
    KCHECK(ep_layout_create(&c->layout, ep, me, topk, num_experts, max_tokens, pad_multiple,
                            perm_cap, reinterpret_cast<int32_t *>(base + c->off_topk),
                            reinterpret_cast<float *>(base + c->off_prob),
                            reinterpret_cast<int32_t *>(base + c->off_ntok)));
    KCHECK(reserve_smem(dispatch_kernel));
    KCHECK(reserve_smem(combine_kernel));
    KCHECK(reserve_smem(store_kernel));
    KCHECK(reserve_smem(store_all_kernel));
    KCHECK(reserve_smem(tma_all_kernel));
    KCHECK(reserve_smem(push_kernel));
    // Every rank mapped its peers; and every region has the same layout, since a peer writes its
    // flags and rows at the offsets it computed for its own region.
    size_t mine_bytes = c->region_bytes, all_bytes[EP_MAX_RANKS];
    if (ag(ag_ctx, &mine_bytes, all_bytes, sizeof mine_bytes)) return cudaErrorUnknown;
    for (int r = 0; r < ep; r++)
        if (all_bytes[r] != c->region_bytes) {
            fprintf(stderr,
                    "ep_nvl: member %d sized its region %zu bytes, member %d %zu bytes: the "
                    "members must be created with the same sizes\n",
                    me, c->region_bytes, r, all_bytes[r]);
            return cudaErrorInvalidValue;
        }
    return cudaSuccess;
}

extern "C" void ep_nvl_destroy(ep_nvl *c) {
    ep_layout_destroy(&c->layout);
    for (int r = 0; r < c->ep; r++)
        if (r != c->me && c->peer_region[r]) cudaIpcCloseMemHandle(c->peer_region[r]);
    cudaFree(c->region);
    cudaFree(c->d_err);
    cudaFree(c->psend);
    cudaFree(c->pcnt);
    cudaFree(c->scnt);
    cudaFree(c->push_done);
    memset(c, 0, sizeof *c);
}

extern "C" cudaError_t ep_nvl_layout(ep_nvl *c, const int32_t *topk_idx, const float *topk_prob,
                                     int ntok, cudaStream_t st) {
    if (ntok < 0 || ntok > c->max_tokens) return cudaErrorInvalidValue;
    MapStage map = {make_args(c, 0), topk_idx, topk_prob, ntok};
    KCHECK(layout_launch(c->layout, map, st));
    KCHECK(capture_of(st, &c->after_map_capture));
    c->after_map = 1;
    c->after_map_st = st;
    return cudaSuccess;
}

static cudaError_t launch_dispatch(ep_nvl *c, const ep_bf16 *x, ep_bf16 *perm, int helpers,
                                   int scale, cudaStream_t st) {
    // no handshake only right behind the layout in the same stream and the same graph: a graph
    // of the dispatch alone replays with no layout before it
    int after_map = c->after_map && c->after_map_st == st;
    if (after_map) {
        unsigned long long cap = 0;
        KCHECK(capture_of(st, &cap));
        after_map = c->after_map_capture == cap;
    }
    Args a = make_args(c, helpers);
    a.handshake = !after_map;
    dispatch_kernel<<<c->num_sms + helpers, THREADS, RESERVE_SMEM, st>>>(a, x, perm, scale);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_nvl_dispatch_stage(ep_nvl *c, const ep_bf16 *x, cudaStream_t st) {
    return launch_dispatch(c, x, nullptr, 0, 0, st);
}

extern "C" ep_bf16 *ep_nvl_stage(ep_nvl *c) {
    return reinterpret_cast<ep_bf16 *>(static_cast<char *>(c->region) + c->off_stage);
}

extern "C" cudaError_t ep_nvl_dispatch(ep_nvl *c, const ep_bf16 *x, ep_bf16 *perm, int fused,
                                       int scale_by_prob, cudaStream_t st) {
    if (fused)
        return launch_dispatch(c, x, perm, c->permute_blocks > 0 ? c->permute_blocks : 1,
                               scale_by_prob, st);
    KCHECK(launch_dispatch(c, x, nullptr, 0, 0, st));
    const uint32_t *fl =
        reinterpret_cast<const uint32_t *>(static_cast<char *>(c->region) + c->off_flags) +
        FL_DCHUNK;
    return ep_permute(&c->layout, ep_nvl_stage(c), perm, c->hidden, scale_by_prob, fl, c->seq,
                      c->d_err, x, st);
}

extern "C" cudaError_t ep_nvl_combine_prereduce(ep_nvl *c, const ep_bf16 *expout, int weighted,
                                                cudaStream_t st) {
    // Persistent grid (as many resident blocks of 8 warps as fit on every SM), grid-stride over
    // every (source, token).
    const int per_sm = c->prereduce_per_sm;
    const size_t warps = (size_t)c->ep * c->max_tokens, need = (warps + 7) / 8; // an upper bound
    const size_t full = (size_t)(c->gpu_sms > 0 ? c->gpu_sms : 1) * (per_sm > 0 ? per_sm : 1);
    const int grid = (int)(need < full ? need : full);
    int4 *cself = reinterpret_cast<int4 *>(static_cast<char *>(c->region) + c->off_cstage);
    prereduce_kernel<<<grid, 256, 0, st>>>(c->layout, expout, static_cast<int4 *>(c->psend), cself,
                                           c->hidden / 8, weighted);
    KLAUNCHED();
    return cudaSuccess;
}

// pre > 0: the pre-reduce runs in the first `pre` blocks of the same kernel.
// direct: no senders, the pre-reducers store the peers' rows themselves (the fused combine).
static cudaError_t launch_combine(ep_nvl *c, const ep_bf16 *expout, int weighted, ep_bf16 *out,
                                  int pre, int helpers, int direct, uint32_t *fl_cchunk,
                                  cudaStream_t st) {
    Args a = make_args(c, helpers);
    a.pre = pre;
    a.weighted = weighted;
    a.expout = expout;
    a.pcnt = pre > 0 ? c->pcnt : nullptr;
    a.direct = direct;
    if (direct) a.senders = 0;
    combine_kernel<<<pre + a.senders + helpers, THREADS, RESERVE_SMEM, st>>>(a, out);
    KLAUNCHED();
    *fl_cchunk = (uint32_t)a.fl_cchunk;
    return cudaSuccess;
}

extern "C" cudaError_t ep_nvl_combine_send(ep_nvl *c, cudaStream_t st) {
    uint32_t fl;
    return launch_combine(c, nullptr, 0, nullptr, 0, 0, 0, &fl, st);
}

extern "C" cudaError_t ep_nvl_combine(ep_nvl *c, const ep_bf16 *expout, ep_bf16 *out, int fused,
                                      int weighted, cudaStream_t st) {
    uint32_t flo;
    const int helpers = fused ? (c->reduce_blocks > 0 ? c->reduce_blocks : 1) : 0;
    // Fused: the pre-reduce on every SM but the sum helpers', each peer's rows stored straight
    // into its combine buffer. Unfused: the pre-reduce in the same kernel as the senders on every
    // SM left (one block per SM), overlapped with the send. On a GPU too small for either, a
    // separate pre-reduce kernel first.
    const int direct = fused && c->gpu_sms - helpers >= 1;
    const int pre = direct ? c->gpu_sms - helpers : c->gpu_sms - c->num_sms - helpers;
    if (pre >= 1) {
        KCHECK(launch_combine(c, expout, weighted, out, pre, helpers, direct, &flo, st));
    } else {
        KCHECK(ep_nvl_combine_prereduce(c, expout, weighted, st));
        KCHECK(launch_combine(c, nullptr, 0, out, 0, helpers, 0, &flo, st));
    }
    if (fused) return cudaSuccess;
    const uint32_t *fl =
        reinterpret_cast<const uint32_t *>(static_cast<char *>(c->region) + c->off_flags) + flo;
    const ep_bf16 *recv =
        reinterpret_cast<const ep_bf16 *>(static_cast<char *>(c->region) + c->off_cstage);
    return ep_combine_reduce(&c->layout, recv, out, c->hidden, fl, c->seq, c->d_err, st);
}

extern "C" size_t ep_nvl_slot_bytes(const ep_nvl *c) {
    return (size_t)c->max_tokens * c->hidden * 2;
}

extern "C" size_t ep_nvl_stage_bytes(const ep_nvl *c) {
    return (size_t)c->ep * ep_nvl_slot_bytes(c);
}

extern "C" cudaError_t ep_nvl_store_ceiling(ep_nvl *c, const void *src, size_t bytes, int peer,
                                            cudaStream_t st) {
    if (bytes % 16 || bytes > ep_nvl_stage_bytes(c) || peer < 0 ||
        peer >= c->ep)
        return cudaErrorInvalidValue;
    int4 *dst = reinterpret_cast<int4 *>(static_cast<char *>(c->peer_region[peer]) + c->off_stage);
    store_kernel<<<c->num_sms, THREADS, RESERVE_SMEM, st>>>(dst, static_cast<const int4 *>(src),
                                                            bytes / 16);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_nvl_peer_copy(ep_nvl *c, const void *src, size_t bytes, int peer,
                                        cudaStream_t st) {
    if (bytes > ep_nvl_stage_bytes(c) || peer < 0 || peer >= c->ep)
        return cudaErrorInvalidValue;
    void *dst = static_cast<char *>(c->peer_region[peer]) + c->off_stage;
    KCHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    return cudaSuccess;
}

// This rank's slot in a peer's staging: the rows it sends there in a dispatch
static void *stage_slot(ep_nvl *c, int peer) {
    return static_cast<char *>(c->peer_region[peer]) + c->off_stage +
           (size_t)c->me * ep_nvl_slot_bytes(c);
}

// This rank's peer_bytes[p] for every peer p, into its slot of p's staging (peers with no bytes
// left out); false when a size is not a multiple of 16 or overflows the slot.
static bool all_peers_of(ep_nvl *c, const size_t *peer_bytes, AllPeers *ap) {
    memset(ap, 0, sizeof *ap);
    for (int p = 0; p < c->ep; p++) {
        if (p == c->me) continue;
        if (peer_bytes[p] % 16 || peer_bytes[p] > ep_nvl_slot_bytes(c)) return false;
        if (!peer_bytes[p]) continue;
        ap->dst[ap->n] = static_cast<int4 *>(stage_slot(c, p));
        ap->n16[ap->n++] = peer_bytes[p] / 16;
    }
    return true;
}

// Blocks of a kernel that writes every peer at once: num_sms, at least one per peer (and one).
static int all_peer_blocks(const ep_nvl *c, const AllPeers &ap) {
    return std::max(c->num_sms, std::max(ap.n, 1));
}

// Every peer written at once by `kernel` (store_all_kernel or tma_all_kernel): this rank's
// peer_bytes[p] into its slot of peer p's staging, the blocks spread round-robin over the peers.
static cudaError_t launch_all_peers(ep_nvl *c, const void *src, const size_t *peer_bytes,
                                    void (*kernel)(AllPeers, const int4 *), cudaStream_t st) {
    AllPeers ap;
    if (!all_peers_of(c, peer_bytes, &ap)) return cudaErrorInvalidValue;
    if (ap.n == 0) return cudaSuccess;
    kernel<<<all_peer_blocks(c, ap), THREADS, RESERVE_SMEM, st>>>(ap,
                                                                  static_cast<const int4 *>(src));
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_nvl_push(ep_nvl *c, const void *src, const size_t *peer_bytes,
                                   cudaStream_t st) {
    AllPeers ap;
    if (!all_peers_of(c, peer_bytes, &ap)) return cudaErrorInvalidValue;
    Args a = make_args(c, 0);
    push_kernel<<<all_peer_blocks(c, ap), THREADS, RESERVE_SMEM, st>>>(
        a, ap, static_cast<const int4 *>(src));
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_nvl_store_all(ep_nvl *c, const void *src, const size_t *peer_bytes,
                                        cudaStream_t st) {
    return launch_all_peers(c, src, peer_bytes, store_all_kernel, st);
}

extern "C" cudaError_t ep_nvl_tma_all(ep_nvl *c, const void *src, const size_t *peer_bytes,
                                      cudaStream_t st) {
    return launch_all_peers(c, src, peer_bytes, tma_all_kernel, st);
}

extern "C" cudaError_t ep_nvl_copy_all(ep_nvl *c, const void *src, const size_t *peer_bytes,
                                       const cudaStream_t *side, const cudaEvent_t *ev,
                                       cudaStream_t st) {
    AllPeers ap;
    if (!all_peers_of(c, peer_bytes, &ap)) return cudaErrorInvalidValue;
    KCHECK(cudaEventRecord(ev[c->me], st));
    for (int p = 0; p < c->ep; p++)
        if (p != c->me && peer_bytes[p]) {
            KCHECK(cudaStreamWaitEvent(side[p], ev[c->me], 0));
            KCHECK(cudaMemcpyAsync(stage_slot(c, p), src, peer_bytes[p], cudaMemcpyDeviceToDevice,
                                   side[p]));
            KCHECK(cudaEventRecord(ev[p], side[p]));
        }
    for (int p = 0; p < c->ep; p++)
        if (p != c->me && peer_bytes[p]) KCHECK(cudaStreamWaitEvent(st, ev[p], 0));
    return cudaSuccess;
}

extern "C" cudaError_t ep_nvl_barrier(ep_nvl *c, cudaStream_t st) {
    Args a = make_args(c, 0);
    barrier_kernel<<<1, 32, 0, st>>>(a);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" int ep_nvl_failed(ep_nvl *c) {
    int v = 0;
    if (cudaMemcpy(&v, c->d_err, sizeof v, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
    return v;
}
