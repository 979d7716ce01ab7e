/* sched_internal: what the schedule generators (core/sched_*.c) share; not for executors.
 *
 * One rank is built at a time by an ep_rank_builder: it appends ops in host launch order, gives
 * collectives their per-group sequence numbers, and keeps the CUDA-event chains of Megatron's
 * layer nodes (docs/schedule.md, "Ordering rules").
 */
#ifndef EP_SCHED_INTERNAL_H
#define EP_SCHED_INTERNAL_H

#include "ep_cost.h"
#include "ep_route.h"
#include "ep_sched.h"
#include "ep_xfer.h"

#define EP_ROW_BYTES(cfg)  ((double)(cfg)->hidden_size * 2.0) /* one bf16 token row */
#define EP_MAX_NODE_OPS    48 /* ops of one layer node (a bracket group of 8 blocks fits) */
#define EP_MAX_RANK_GROUPS 24

/* --- storage (sched.c) ------------------------------------------------------------------------ */

typedef struct ep_traffic_pool ep_traffic_pool; /* routing drawn ahead (sched_traffic.c) */

/* What ep_sched.internal points to. */
typedef struct {
    int *group_slots; /* open addressing: group index + 1, 0 = empty */
    int group_slot_cap;
    int *traffic_slots; /* open addressing over (microbatch, layer, EP group): traffic index + 1 */
    int traffic_slot_cap;
    int *share_slots; /* with s.route_groups: (microbatch, layer, drawn ordinal) -> the first
                         traffic index + 1 drawn for it, which later groups copy */
    int share_slot_cap, nshared;
    char **labels;
    int nlabels, label_cap;
    int *group_index_of; /* [ngroups] ordinal of the group among groups of its kind */
    int kind_count[EP_GROUP_NUM_KINDS];
    ep_traffic_pool *pool; /* only while ep_sched_build runs */
} ep_sched_state;

/* Appends a copy of op (deps cleared) to rank r; returns its index or -1 when out of memory. */
int ep_sched_push(ep_rank_sched *r, const ep_op *op);
/* Appends a dependency of op `idx` (the last op pushed) on op `dep`. */
int ep_sched_push_dep(ep_rank_sched *r, int idx, int dep);
/* Registers a communicator by kind and member list (once); returns its index or -1. */
int ep_sched_group(ep_sched *s, ep_group_kind kind, const int *ranks, int n);
/* A label built at run time (a block suffix, ...), interned so that op labels stay pointers. */
const char *ep_sched_intern(ep_sched *s, const char *label);
void ep_sched_internal_free(ep_sched *s);
/* An op with every optional field unset (-1 / 0 / NONE). */
ep_op ep_op_blank(void);

/* --- traffic (sched_traffic.c) ---------------------------------------------------------------- */

/* Tokens rank `rank` holds in microbatch mb: seq*mbs/CP (/TP with sequence parallel), or the THD
 * packed count divided the same way. Pass ep_sched_route_mb(s, mb) as mb. */
int ep_sched_tokens(const ep_config *cfg, int mb, int rank);
/* The traffic instance of (microbatch, layer, EP group), drawn on first use; -1 on failure. */
int ep_sched_traffic_get(ep_sched *s, int mb, int layer, int ep_group);
/* Microbatch whose routing draw microbatch mb reuses (docs/schedule.md, "Routing budget"). */
int ep_sched_route_mb(const ep_sched *s, int mb);
void ep_sched_traffic_setup(ep_sched *s);
/* Threads that draw routing: EP_SCHED_THREADS when it is a positive integer, else the online CPUs
 * (at most 256). The schedule is the same for any count (docs/schedule.md, "Threads"). */
int ep_sched_thread_count(void);
/* Starts threads - 1 workers drawing the instances the ranks will ask for (none when threads < 2);
 * ep_sched_traffic_get then takes their results. ep_sched_traffic_stop joins them and frees what
 * was not taken; call it before ep_sched_build returns. Start returns 0, or -1 out of memory. */
int ep_sched_traffic_start(ep_sched *s, int threads);
void ep_sched_traffic_stop(ep_sched *s);

/* --- one rank ----------------------------------------------------------------------------------
 */

/* Tails of one CUDA-event chain: the last op of each stream that the next node must wait for. */
typedef struct {
    int tail[EP_NUM_STREAMS];
} ep_chain;

typedef struct {
    ep_sched *s;
    const ep_config *cfg;
    ep_rank_sched *out;
    int rank, stage, pp, vpp, nmb;
    ep_coords dense, expert;
    /* communicators of this rank (-1 when absent or of size 1) */
    int g_tp, g_ep, g_tpep, g_dp, g_edp, g_dp_in, g_dp_out, g_edp_in, g_edp_out;
    int ep_index; /* position in the EP group */
    int ep_size, tp_size, tpep_size;
    /* expert TP (ETP > 1): its group, and the EP group of each of its members in ETP order
     * (their token exchanges all feed this rank's experts: sched_layer.c) */
    int g_etp, etp_size;
    int *etp_ep_groups;
    int next_rank, prev_rank; /* pipeline neighbours (wrapping, as Megatron's p2p does) */
    int g_send_next, g_recv_prev, g_send_prev, g_recv_next; /* directed P2P groups */
    /* per-group sequence counters */
    int ngroups;
    int group_id[EP_MAX_RANK_GROUPS];
    int group_seq[EP_MAX_RANK_GROUPS];
    int last_on_stream[EP_NUM_STREAMS];
    /* event chains: one per (microbatch, chunk) with EP overlap, one for the rank without */
    int per_mb_chains;
    /* interleaved 1F1B with --overlap-p2p-communication and one chain: the receive that each
     * (microbatch, chunk, direction) pass consumes, -1 once it is waited for ([nmb * vpp * 2]) */
    int *pending_recv;
    ep_chain *chains;
    /* per layer: index of the last op of its backward in the current step (DP hooks) */
    int *layer_last_bwd;
    /* DP state (sched_dp.c) */
    int *param_ag; /* per layer: op that gathered its params for the first forward (-1) */
    int *fsdp_ag_fwd, *fsdp_ag_bwd; /* per layer: FSDP all-gather for the current microbatch */
    int *fsdp_ag_fwd_mb, *fsdp_ag_bwd_mb;
    int *bucket_of; /* per layer: DDP bucket index */
    int nbuckets;
    int *bucket_first, *bucket_count; /* layers of each bucket (consecutive) */
    int *bucket_done;                 /* layers of the bucket whose last-microbatch bwd is done */
    int *bucket_dep;                  /* latest op among them */
    int dp_last;                      /* last op on the dp stream */
    int emb_bucket, out_bucket_layer;
    char *err;
} ep_rank_builder;

/* Appends an op to the rank: assigns group/seq for collectives, records stream tails.
 * Returns the op index or -1. */
int ep_rb_emit(ep_rank_builder *rb, ep_op *op);
int ep_rb_dep(ep_rank_builder *rb, int idx, int dep);
ep_chain *ep_rb_chain(ep_rank_builder *rb, int mb, int chunk);
/* Makes op idx (the first op of a node on `stream`) wait for the chain's tails on other streams. */
int ep_rb_wait_chain(ep_rank_builder *rb, int idx, const ep_chain *c, ep_stream stream);
void ep_chain_add(ep_chain *c, int op, ep_stream stream);
void ep_chain_reset(ep_chain *c);

/* --- layer expansion (sched_layer.c) -----------------------------------------------------------
 */

/* Emits the ops of one node of one layer for one microbatch in the given phase (FWD or BWD).
 * With phase BWD the weight-gradient GEMMs follow their dgrad GEMMs unless defer_dw, in which case
 * they are left for ep_layer_emit_dw. Waits on and advances the chain. Returns 0 or -1. */
int ep_layer_emit_node(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk, ep_node node,
                       ep_phase phase, int defer_dw);
/* Emits the delayed weight-gradient GEMMs of one node (no event wait). */
int ep_layer_emit_dw(ep_rank_builder *rb, int layer, int mb, int chunk, ep_node node);
/* Activation recomputation before layer's backward: with --recompute-granularity full the forward
 * of its checkpoint group when layer tops it, with the selective moe module its MoE ops. Waits on
 * and advances the chain. Returns 0 or -1. */
int ep_layer_emit_recompute(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk);
/* Embedding (first virtual stage) and output layer + loss (last virtual stage). */
int ep_layer_emit_embedding(ep_rank_builder *rb, ep_chain *c, int mb, int chunk, ep_phase phase);
int ep_layer_emit_output(ep_rank_builder *rb, ep_chain *c, int mb, int chunk, ep_phase phase);
/* Activation bytes sent between pipeline stages for one microbatch. */
double ep_layer_activation_bytes(const ep_config *cfg, int mb, int rank);

/* --- pipeline orders (sched_order.c) -----------------------------------------------------------
 */

typedef struct {
    int f_mb, f_chunk; /* forward part, -1 if none */
    int b_mb, b_chunk; /* backward part, -1 if none */
} ep_step;

/* The steps of pipeline stage `stage` in host order: 1F1B, interleaved 1F1B, or combined 1F1B
 * (forward and backward of two microbatches in one step) with EP overlap. *steps is malloc'ed. */
int ep_sched_steps(const ep_config *cfg, int nmb, int stage, ep_step **steps);

/* --- data parallel (sched_dp.c) -----------------------------------------------------------------
 */

int ep_dp_setup(ep_rank_builder *rb);
void ep_dp_free(ep_rank_builder *rb);
/* At the start of the iteration (overlapped param all-gathers). */
int ep_dp_begin(ep_rank_builder *rb);
/* Before the first node of a layer's forward / backward for a microbatch: FSDP gathers, param
 * all-gather waits; adds the ops the chain must wait for. */
int ep_dp_before_fwd(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk);
int ep_dp_before_bwd(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk);
/* After a layer's backward (dgrad and wgrad) for a microbatch: FSDP reduce-scatter, DDP buckets. */
int ep_dp_after_bwd(ep_rank_builder *rb, int layer, int mb, int chunk, int last_op);
/* After the embedding's backward of a microbatch (its gradient bucket). */
int ep_dp_after_embedding_bwd(ep_rank_builder *rb, int mb, int last_op);
/* At the end: the reductions not overlapped, the optimizer step, the param all-gathers. */
int ep_dp_end(ep_rank_builder *rb);

/* Parameters of one layer held by one rank: dense (sharded by TP) and expert (by EP and ETP). */
void ep_dp_layer_params(const ep_config *cfg, const ep_layer *l, double *dense, double *expert);
/* The bytes of that layer's all-gather (bf16; FP8 linear weights with --fp8-param-gather). */
void ep_dp_layer_gather_bytes(const ep_config *cfg, const ep_layer *l, double *dense,
                              double *expert);
/* The embedding's (and the untied output layer's) parameters per rank: vocab x hidden / TP. */
double ep_dp_embedding_params(const ep_config *cfg);
/* Bytes of a main gradient element: 4 (fp32), 2 with bf16 gradients or FSDP2. */
double ep_dp_grad_bytes(const ep_config *cfg);

/* Open-addressing tables (cap a power of two, 0 = empty, entries index + 1): puts `entry` in the
 * first empty slot from hash on, for the rebuilds when a table grows. */
static inline void ep_slot_put(int *slots, int cap, uint64_t hash, int entry) {
    size_t h = (size_t)(hash & (uint64_t)(cap - 1));
    while (slots[h])
        h = (h + 1) & (size_t)(cap - 1);
    slots[h] = entry;
}

#endif
