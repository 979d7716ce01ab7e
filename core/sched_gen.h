/* sched_gen: the state of the layer generator (sched_layer.c) that the dispatcher backends
 * (disp_<name>.c) add their ops through, and the table row a backend fills. Internal to the
 * schedule generators. */
#ifndef SCHED_GEN_H
#define SCHED_GEN_H

#include "ep_disp.h"
#include "sched_internal.h"

/* One forward op of a node, before it becomes forward, backward and weight-gradient ops. */
typedef struct {
    const char *label;
    ep_op_kind kind;
    double flops, bytes;
    int m, n, k, batch;
    int group, traffic, transpose;
    int fp8;    /* an FP8 GEMM (its backward quantizes the incoming gradient first), or a
                   forward-only FP8 cast (ep_op.fp8) */
    int side;   /* a TP collective beside its GEMM (--tp-comm-overlap): on the tp stream */
    int bwd_side;   /* its backward on the tp stream: the dgrad's reduce-scatter of a sequence-
                       parallel all-gather, issued async beside the wgrad GEMM */
    int fp8_gather; /* its all-gather moves FP8, one byte per element: the forward of an all-gather
                       spec, the backward of a reduce-scatter spec (the gathered dY) */
    const char *regather; /* a sequence-parallel all-gather whose input the backward gathers again
                             for the next GEMM's wgrad: that op's label (NULL: none) */
    int weight; /* has a weight gradient */
    int fwd_only;
    int mods; /* EP_RC_* recompute modules the op belongs to */
    int cg;   /* EP_CG_* CUDA-graph scopes that capture it */
} spec;

typedef struct gen {
    ep_rank_builder *rb;
    const ep_config *cfg;
    const ep_layer *L;
    int layer, mb;
    double t, tg, R; /* tokens (sequence-parallel shard), GEMM rows, bytes per token row */
    int tp, etp;
    const char *prefix; /* "" or "b2_" for a repeated block family inside a bracket group */
    int mods;           /* EP_RC_* modules of the ops being added */
    int cg;             /* EP_CG_* scopes that capture the ops being added (0: none) */
    spec *out;
    int n;
    int failed;
} gen;

/* The rows of one MoE layer's token exchange on this rank (its traffic instance). */
typedef struct moe_rows {
    const ep_traffic *tr;
    int ti, me;
    double send, recv, erows, prows, gemm_rows, sent_bytes, recv_bytes;
    double tmax; /* largest token count in the group */
    /* ETP > 1: recv, erows and prows are the ETP group's rows for this EP index; this is the
     * largest count one member received */
    double etp_recv_max;
} moe_rows;

/* Add a forward op spec to the node (NULL and g->failed set past EP_MAX_NODE_OPS). */
spec *gen_add(gen *g, const char *label, ep_op_kind kind);
/* A memory-bound op moving `bytes`. */
void gen_mem(gen *g, const char *label, ep_op_kind kind, double bytes);
/* A collective over group `group` of `bytes` (the meaning per kind: docs/schedule.md). */
spec *gen_coll(gen *g, const char *label, ep_op_kind kind, int group, double bytes);
/* The host waits for the GPU (forward only). */
void gen_host_sync(gen *g, const char *label);
/* The token all-to-all of r: dispatch (combine 0) or combine (1, the transpose). */
void gen_a2a(gen *g, const char *label, const moe_rows *r, int combine);
/* Rows the experts see after the receive-side permute (device padding pads inside it). */
double gen_permuted_rows(const ep_config *c, const moe_rows *r);
/* Hooks several dispatchers share: the token all-to-all each way ("dispatch", "combine"), and the
 * permute / unpermute of rows received one per (token, destination rank). */
void gen_dispatch_a2a(gen *g, const moe_rows *r);
void gen_combine_a2a(gen *g, const moe_rows *r);
void gen_permute_recv(gen *g, const moe_rows *r);
void gen_unpermute_recv(gen *g, const moe_rows *r);

#endif
