/* ref_disp: the token dispatcher of one MoE layer, with either backend (docs/epref.md).
 *   REF_DISP_ALLTOALL  NCCL: routing-map allgather (the count exchange; it also carries the
 *                      choices the receiver's permute needs), device layout, a device-to-host
 *                      copy of the counts (the host sync), ep_pack_send, alltoallv of rows
 *                      (grouped ncclSend/ncclRecv), then the separate ep_permute.
 *   REF_DISP_NVL       NVLink: map written into the peers over NVLink, device layout (no host
 *                      sync), SM-issued stores into the peers' staging, then ep_permute.
 *   REF_DISP_NVL_FUSED the same with the permute fused into dispatch and the owner-side sum
 *                      fused into combine.
 * Combine always applies the router probabilities on the expert side (weighted sum of the k
 * outputs), so it is the exact reverse of dispatch. */
#ifndef REF_DISP_H
#define REF_DISP_H

#include "ep_kernels.h"
#include "ref_comm.h"

typedef enum { REF_DISP_ALLTOALL, REF_DISP_NVL, REF_DISP_NVL_FUSED } ref_disp_kind;

typedef struct {
    ref_ctx *ctx;
    ref_disp_kind kind;
    int H, topk, E, max_tokens, pad;
    ep_nvl nvl;    /* NVLink context (always built: its barrier aligns benchmarks) */
    ep_layout own; /* alltoall layout (map owned) */
    ep_bf16 *send, *stage, *csend, *crecv;          /* alltoall row buffers */
    int32_t h_cnt[EP_MAX_RANKS * EP_MAX_RANKS * 3]; /* alltoall: cnt, roff, coff on the host */
} ref_disp;

/* perm_cap: permuted-row budget (<= 0: worst case). num_sms etc. are set on d->nvl after. */
void ref_disp_create(ref_disp *d, ref_ctx *ctx, ref_disp_kind kind, int H, int topk, int E,
                     int max_tokens, int pad, int64_t perm_cap);
void ref_disp_destroy(ref_disp *d);
const ep_layout *ref_disp_layout(ref_disp *d);
/* topk_idx/topk_prob: device [max_tokens][topk] (rows past ntok ignored). */
void ref_disp_route(ref_disp *d, const int32_t *topk_idx, const float *topk_prob, int ntok,
                    cudaStream_t st);
void ref_disp_dispatch(ref_disp *d, const ep_bf16 *x, ep_bf16 *perm, int scale_by_prob,
                       cudaStream_t st);
void ref_disp_combine(ref_disp *d, const ep_bf16 *expout, ep_bf16 *out, int weighted,
                      cudaStream_t st);
/* Host copies of the layout's counts (synchronises st): cnt/roff/coff [ep*ep], padded rows per
 * local expert [experts_per_rank], totals[3]. Any pointer may be NULL. */
void ref_disp_counts(ref_disp *d, int32_t *cnt, int32_t *exp_padded, int32_t *totals,
                     cudaStream_t st);
/* Stops with rank, peer and counters if an NVLink spin-wait timed out. Synchronises st. */
void ref_disp_check(ref_disp *d, cudaStream_t st);
const char *ref_disp_kind_name(ref_disp_kind k);

#endif
