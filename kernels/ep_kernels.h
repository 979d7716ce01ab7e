/* ep_kernels: the MoE layer's CUDA kernels behind a C interface (docs/epref.md draws the layouts).
 *
 * defines: ep_bf16, router, layout (device-side routing metadata and padded expert offsets),
 * permute / unpermute-with-weighted-sum, the NVLink dispatch/combine context, SwiGLU.
 * The cuBLAS expert GEMMs are in ep_expert.h.
 *
 * Tokens move in rows of H bf16 values. Row orders (one layout per dispatch, shared by combine):
 *   staging (receiver):  [src 0 rows | src 1 rows | ...], inside a source its tokens in token
 * order; row of (s,t) at dst d = roff[s][d] + didx[s][t][d] send / combine-recv: [dst 0 rows | dst
 * 1 rows | ...], row = coff[s][d] + didx[s][t][d] permuted (expert):   [expert 0 rows, padded |
 * expert 1 rows, padded | ...], in (src, token) order inside an expert; gap rows are zero; row =
 * epos[s][t][j] NOTES: every function returns cudaSuccess or the first CUDA error; launches are
 * checked.
 */
#ifndef EP_KERNELS_H
#define EP_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t ep_bf16; /* raw bfloat16 bits */

#define EP_MAX_RANKS   8 /* ranks of one NVLink EP group */
#define EP_MAX_TOPK    16
#define EP_MAX_EXPERTS 1024 /* router: experts per token row */
#define EP_CHUNK       64   /* tokens per chunk: the unit of flags and layout histograms */

/* ---- router ------------------------------------------------------------------------------- */
typedef struct {
    int num_tokens;
    int num_experts;
    int topk;
    int sigmoid;    /* 0: Megatron softmax (top-k of logits, softmax over the k); 1: sigmoid scores,
                       probabilities normalised over the k (DeepSeek-V3) */
    int num_groups; /* group-limited top-k (DeepSeek): 0 or 1 = off */
    int group_topk; /* groups kept per token */
} ep_router_params;

/* logits [T][E] float; bias [E] (selection-only expert bias, or NULL) -> topk_idx [T][k],
 * topk_prob [T][k]. Ties go to the lower expert id. */
cudaError_t ep_router(const float *logits, const float *bias, ep_router_params p, int32_t *topk_idx,
                      float *topk_prob, cudaStream_t st);

/* ---- layout ------------------------------------------------------------------------------- */
/* Routing metadata of one EP group as seen from rank `me`, computed on the device from the
 * gathered routing map (every rank's topk ids and token count). No host synchronisation. */
typedef struct {
    int ep, me, topk, num_experts, experts_per_rank, max_tokens, nchunks, pad_multiple;
    int64_t perm_cap; /* rows of the permuted buffer (the budget); overflow past it */
    /* gathered routing map (inputs): external (e.g. in the NVLink region) or owned */
    int32_t *topk_idx; /* [ep][max_tokens][topk]; expert id or -1 (routes nowhere) */
    float *topk_prob;  /* [ep][max_tokens][topk] */
    int32_t *ntok;     /* [ep] */
    int owns_map;
    /* derived (device) */
    /* hist_d, hist_e: set for the chunks that hold tokens of their source (c*64 < ntok[s]) */
    int32_t *hist_d;     /* [ep][nchunks][ep] -> exclusive base of a chunk in a (src,dst) list */
    int32_t *hist_e;     /* [ep][nchunks][experts_per_rank] -> base inside the expert */
    int32_t *didx;       /* [ep][max_tokens][ep] slot of token in the (src,dst) list, or -1 */
    int32_t *epos;       /* [ep][max_tokens][topk] permuted row at me, or -1 (not mine/dropped) */
    int32_t *cnt;        /* [ep][ep] tokens src->dst */
    int32_t *roff;       /* [ep][ep] staging offset of src at dst */
    int32_t *coff;       /* [ep][ep] send/combine offset of dst at src */
    int32_t *exp_count;  /* [experts_per_rank] selections received */
    int32_t *exp_padded; /* [experts_per_rank] padded rows */
    int32_t *exp_off;    /* [experts_per_rank+1] padded offsets */
    int32_t *totals;     /* [0] staging rows, [1] permuted rows (padded), [2] overflow flag */
    unsigned long long *sync; /* the layout kernel's stage counters (layout_stages.cuh) */
} ep_layout;

/* Allocates the layout; map pointers may be NULL (then owned) or point at caller memory.
 * pad_multiple >= 1; perm_cap <= 0 means the worst case (never overflows). */
cudaError_t ep_layout_create(ep_layout *L, int ep, int me, int topk, int num_experts,
                             int max_tokens, int pad_multiple, int64_t perm_cap, int32_t *ext_topk,
                             float *ext_prob, int32_t *ext_ntok);
void ep_layout_destroy(ep_layout *L);
/* Worst-case permuted rows: every received selection plus one pad gap per expert. */
int64_t ep_layout_max_perm_rows(const ep_layout *L);
/* Computes hist/didx/epos/cnt/offsets/expert offsets from the map, all on `st`. */
cudaError_t ep_layout_compute(ep_layout *L, cudaStream_t st);

/* ---- permute / combine pieces (single GPU; `flags` non-NULL waits on NVLink chunk flags) --- */
/* Sender-side permute for alltoall: x [ntok[me]][H] -> send rows (coff order). */
cudaError_t ep_pack_send(const ep_layout *L, const ep_bf16 *x, ep_bf16 *send, int H,
                         cudaStream_t st);
/* Receiver-side permute: staging rows -> permuted rows (expert order), gap rows zeroed.
 * flags: [ep][nchunks] chunk flags to wait for (value >= seq) or NULL. self_x: NULL, or this
 * rank's own token rows [ntok[me]][H], read in place of the staging rows of source me. */
cudaError_t ep_permute(const ep_layout *L, const ep_bf16 *stage, ep_bf16 *perm, int H,
                       int scale_by_prob, const uint32_t *flags, uint32_t seq, int *err,
                       const ep_bf16 *self_x, cudaStream_t st);
/* Expert side of combine: for every token received, the sum over its local experts of the
 * expert outputs (weighted by the router probabilities if `weighted`) -> one partial row in
 * staging order. Unweighted is the backward of dispatch. */
cudaError_t ep_combine_partial(const ep_layout *L, const ep_bf16 *expout, ep_bf16 *partial, int H,
                               int weighted, cudaStream_t st);
/* Owner side of combine: out[t] = sum over destination ranks of the partial rows (coff order);
 * tokens routed nowhere get zeros. flags as ep_permute. */
cudaError_t ep_combine_reduce(const ep_layout *L, const ep_bf16 *recv, ep_bf16 *out, int H,
                              const uint32_t *flags, uint32_t seq, int *err, cudaStream_t st);

/* ---- fixed-capacity expert slots (CUDA graphs) -------------------------------------------- */
/* cuBLAS takes GEMM shapes from the host, so a captured layer cannot size its expert GEMMs by the
 * routed counts. ep_perm_to_slots copies expert e's padded rows of the permuted buffer (those below
 * the budget) to slots[e][0, cap) and zeroes the rest; ep_slots_to_perm copies the GEMM outputs
 * back into permuted order. The GEMMs then run on `cap` rows per expert (slots [ne][cap][H]),
 * shapes the host knows. Rows past cap are dropped (they read back as zero rows) and raise
 * totals[2], the same overflow flag as the budget. Both read the layout on the device: no host
 * sync. */
cudaError_t ep_perm_to_slots(const ep_layout *L, const ep_bf16 *perm, ep_bf16 *slots, int H,
                             int64_t cap, cudaStream_t st);
cudaError_t ep_slots_to_perm(const ep_layout *L, const ep_bf16 *slots, ep_bf16 *perm, int H,
                             int64_t cap, cudaStream_t st);

/* ---- NVLink backend ----------------------------------------------------------------------- */
/* Exchanges `bytes` of host data among all ranks (all[r*bytes..]) - supplied by the caller. */
typedef int (*ep_allgather_fn)(void *ctx, const void *mine, void *all, size_t bytes);

typedef struct {
    int ep, me, hidden, topk, num_experts, max_tokens, nchunks;
    int num_sms;        /* sender blocks, one per SM */
    int permute_blocks; /* extra blocks of the fused dispatch (receiver-side permute) */
    int reduce_blocks;  /* extra blocks of the fused combine (owner-side sum) */
    double timeout_s;
    uint32_t seq; /* op sequence number, the same on every rank */
    /* the last op was ep_nvl_layout on stream after_map_st (in the stream capture
       after_map_capture, 0: none): its map exchange is the handshake of a dispatch that follows
       it there */
    int after_map;
    cudaStream_t after_map_st;
    unsigned long long after_map_capture;
    void *region; /* local symmetric allocation */
    size_t region_bytes;
    void *peer_region[EP_MAX_RANKS]; /* IPC-mapped regions (own one at index me) */
    int gpu_sms, prereduce_per_sm;   /* SMs of the device, resident pre-reduce blocks per SM */
    int *pcnt;   /* combine: pre-reduced tokens per (owner, chunk), zero between ops */
    int *scnt;   /* senders: finished slices per (dispatch|combine, destination, chunk), zero
                    between ops */
    int *push_done; /* ep_nvl_push: its blocks that finished storing, zero between ops */
    void *psend; /* combine: pre-reduced rows for the peers, staging order (local memory) */
    size_t off_stage, off_cstage, off_flags, off_topk, off_prob, off_ntok;
    int *d_err;       /* device error word set by timeouts */
    ep_layout layout; /* map lives in the region */
} ep_nvl;

cudaError_t ep_nvl_create(ep_nvl *c, int ep, int me, int hidden, int topk, int num_experts,
                          int max_tokens, int pad_multiple, int64_t perm_cap, ep_allgather_fn ag,
                          void *ag_ctx);
void ep_nvl_destroy(ep_nvl *c);
/* Writes this rank's routing map (topk ids, probs, ntok tokens) into every rank's region, waits
 * for all peers' maps, then computes the layout. */
cudaError_t ep_nvl_layout(ep_nvl *c, const int32_t *topk_idx, const float *topk_prob, int ntok,
                          cudaStream_t st);
/* Dispatch: x [ntok][H] -> perm (expert order). fused: permute blocks in the same kernel;
 * otherwise a staging-only kernel followed by ep_permute on all SMs. scale_by_prob multiplies
 * each permuted row by its router probability (the backward of the weighted combine). Only rows
 * for the peers cross NVLink; this rank's own tokens are permuted straight from x. */
cudaError_t ep_nvl_dispatch(ep_nvl *c, const ep_bf16 *x, ep_bf16 *perm, int fused,
                            int scale_by_prob, cudaStream_t st);
/* Dispatch without permute: the peers' rows land in their staging (ep_nvl_stage); the rows of
 * this rank's own tokens are not copied (the permute reads them from x). num_sms blocks. */
cudaError_t ep_nvl_dispatch_stage(ep_nvl *c, const ep_bf16 *x, cudaStream_t st);
ep_bf16 *ep_nvl_stage(ep_nvl *c);
/* Bytes of the staging one peer may write (ep_nvl_store_ceiling, ep_nvl_peer_copy). */
size_t ep_nvl_stage_bytes(const ep_nvl *c);
/* Combine: expert outputs (perm order) -> out [ntok][H], weighted sum of the k outputs
 * (unweighted: the backward of dispatch). Three steps: the pre-reduce (ep_nvl_combine_prereduce,
 * whole GPU), the NVLink send of one pre-reduced row per (token, expert rank), and the owner-side
 * sum over ranks. Fused: one kernel on every SM; the pre-reducers store each summed row straight
 * into its owner's combine buffer (no send blocks), reduce_blocks more blocks and then the
 * pre-reducers sum the chunks as they arrive. Otherwise: the pre-reduce and num_sms send blocks
 * in one kernel, then ep_combine_reduce on all SMs. */
cudaError_t ep_nvl_combine(ep_nvl *c, const ep_bf16 *expout, ep_bf16 *out, int fused, int weighted,
                           cudaStream_t st);
/* Combine step 1, an HBM-bound kernel on all SMs: for every token with rows here, the (weighted)
 * sum over its local experts -> one row; rows of the peers' tokens go to c->psend (staging order,
 * contiguous per peer), rows of this rank's own tokens straight into its combine buffer. */
cudaError_t ep_nvl_combine_prereduce(ep_nvl *c, const ep_bf16 *expout, int weighted,
                                     cudaStream_t st);
/* Combine step 2 alone (after step 1 on the same layout): num_sms blocks stream the pre-reduced
 * rows into the owners' combine buffers (contiguous 64-token chunks) and release the chunk
 * flags; no owner-side sum. For benchmarks. */
cudaError_t ep_nvl_combine_send(ep_nvl *c, cudaStream_t st);
/* SM-write ceiling: num_sms blocks store `bytes` from src to the peer's staging, no routing. */
cudaError_t ep_nvl_store_ceiling(ep_nvl *c, const void *src, size_t bytes, int peer,
                                 cudaStream_t st);
/* Peer copy baseline: copy engine moves `bytes` to the peer's staging. */
cudaError_t ep_nvl_peer_copy(ep_nvl *c, const void *src, size_t bytes, int peer, cudaStream_t st);
/* Concurrent ceilings, every peer written at once (no routing), peer_bytes[p] into this rank's
 * slot of peer p's staging: num_sms blocks of stores spread over the peers (ep_nvl_store_all),
 * or one copy-engine copy per peer on its own stream side[p], forked from and joined back to st
 * with the events ev[] (one per rank; ep_nvl_copy_all). */
cudaError_t ep_nvl_store_all(ep_nvl *c, const void *src, const size_t *peer_bytes, cudaStream_t st);
/* The same as ep_nvl_store_all, moved by the SMs' TMA bulk copies (global -> shared -> peer). */
cudaError_t ep_nvl_tma_all(ep_nvl *c, const void *src, const size_t *peer_bytes, cudaStream_t st);
cudaError_t ep_nvl_copy_all(ep_nvl *c, const void *src, const size_t *peer_bytes,
                            const cudaStream_t *side, const cudaEvent_t *ev, cudaStream_t st);
/* The transfer of `epref run`'s deepep / hybridep all-to-alls (exec_nvl_push): one kernel of
 * num_sms blocks, as their kernels are one: the entry handshake with every peer, peer_bytes[p]
 * (a multiple of 16, at most ep_nvl_slot_bytes) from src into this rank's slot of peer p's
 * staging, every peer at once, then a closing wait until every peer's bytes have landed here. */
cudaError_t ep_nvl_push(ep_nvl *c, const void *src, const size_t *peer_bytes, cudaStream_t st);
/* Bytes of one source's slot in a rank's staging (ep_nvl_push, ep_nvl_store_all). */
size_t ep_nvl_slot_bytes(const ep_nvl *c);
/* Device-side barrier of the group over NVLink flags (one tiny kernel). */
cudaError_t ep_nvl_barrier(ep_nvl *c, cudaStream_t st);
/* After a synchronize: non-zero if a spin-wait timed out (the kernel printed who and what). */
int ep_nvl_failed(ep_nvl *c);

/* ---- SwiGLU ------------------------------------------------------------------------------- */
/* h [rows][2F] = [gate | up] -> a [rows][F] = silu(gate) * up */
cudaError_t ep_swiglu_fwd(const ep_bf16 *h, ep_bf16 *a, int64_t rows, int F, cudaStream_t st);
/* da [rows][F], h -> dh [rows][2F] */
cudaError_t ep_swiglu_bwd(const ep_bf16 *h, const ep_bf16 *da, ep_bf16 *dh, int64_t rows, int F,
                          cudaStream_t st);

/* ---- small utilities ---------------------------------------------------------------------- */
/* Fills n bf16 values with uniform values in [-scale, scale) from (seed, index). */
cudaError_t ep_fill_random_bf16(ep_bf16 *p, size_t n, uint64_t seed, float scale, cudaStream_t st);
cudaError_t ep_fill_u16(ep_bf16 *p, size_t n, uint16_t v, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
