/* ep_sched: the schedule IR - a list of ops per rank - and its generators (docs/schedule.md is the
 * full contract).
 *
 * NOTES: ordering rules that every executor (epsim, epref) follows:
 *  - ranks[r].ops is the *host launch order* of rank r: the host launches op i+1 after op i;
 *  - each op runs on one stream; a stream runs its ops in launch order (FIFO);
 *  - an op starts only after its deps (indices of earlier ops of the same rank, any stream)
 *    finished: these are the CUDA events between streams;
 *  - a HOST_SYNC op blocks the host: ops after it are launched only once it has completed on
 *    its stream (cudaStreamSynchronize / event sync), i.e. once everything before it ran;
 *  - collectives and send/recv match across ranks by (group, seq): every member of group g has
 *    exactly one op with sequence number s, and they are one collective. Send/recv groups are
 *    directed pairs {src, dst} (EP_GROUP_P2P): ranks[0] sends, ranks[1] receives.
 * Op names (ep_op_name) are the join key between epsim and epref traces: identical in both.
 */
#ifndef EP_SCHED_H
#define EP_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include "ep_config.h"
#include "ep_groups.h"
#include "ep_layers.h"

typedef enum {
    EP_STREAM_COMP,
    EP_STREAM_COMM,
    EP_STREAM_DP,
    EP_STREAM_PP,
    EP_STREAM_TP, /* --tp-comm-overlap: TP collectives beside their GEMMs (docs/schedule.md) */
    EP_NUM_STREAMS
} ep_stream;

typedef enum {
    EP_OP_GEMM,         /* dense GEMM: m x n x k, flops 2mnk */
    EP_OP_GROUPED_GEMM, /* expert GEMMs: batch = local experts, m = total rows, n x k per expert */
    EP_OP_ATTENTION,    /* core attention (QK^T, softmax, PV) */
    EP_OP_SCAN,         /* Mamba / GDN selective scan */
    EP_OP_ELEMENTWISE,  /* activation, residual add, ... (memory bound) */
    EP_OP_NORM,         /* RMSNorm / LayerNorm */
    EP_OP_ROUTER,       /* router scores + top-k (+ dispatch preprocess) */
    EP_OP_PERMUTE,      /* gather rows into expert-grouped order (memory bound) */
    EP_OP_UNPERMUTE,    /* scatter back, weighted sum of k outputs (memory bound) */
    EP_OP_LOSS,         /* output layer cross-entropy */
    EP_OP_OPTIMIZER,    /* optimizer step (memory bound over local params); batch: the parameter
                           tensors its host loops walk */
    EP_OP_A2A_DISPATCH, /* token all-to-all, dispatch direction (traffic matrix as drawn) */
    EP_OP_A2A_COMBINE,  /* token all-to-all, combine direction (traffic matrix transposed) */
    EP_OP_ALLTOALL,     /* small uniform all-to-all (count exchange): bytes per peer */
    EP_OP_ALL_GATHER,   /* bytes = this rank's contribution */
    EP_OP_REDUCE_SCATTER, /* bytes = this rank's full input */
    EP_OP_ALL_REDUCE,     /* bytes = buffer size */
    EP_OP_SEND,
    EP_OP_RECV,
    EP_OP_HOST_SYNC, /* host waits for the stream to reach this point */
    EP_OP_NUM_KINDS
} ep_op_kind;

/* RECOMPUTE: a forward op run again in the backward (activation recomputation) */
typedef enum {
    EP_PHASE_NONE,
    EP_PHASE_FWD,
    EP_PHASE_BWD,
    EP_PHASE_BWD_DW,
    EP_PHASE_RECOMPUTE
} ep_phase;

/* Megatron's layer nodes (docs/schedule.md, section 5); EP_NODE_NONE for DP/PP/optimizer ops. */
typedef enum {
    EP_NODE_NONE,
    EP_NODE_PRE_DISPATCH,
    EP_NODE_DISPATCH,
    EP_NODE_MLP,
    EP_NODE_COMBINE,
    EP_NODE_MTP,
    EP_NODE_NUM
} ep_node;

/* What a communication op counts as in "exposed communication by kind". */
typedef enum {
    EP_COMM_NOT,
    EP_COMM_DISPATCH,
    EP_COMM_COMBINE,
    EP_COMM_DP,
    EP_COMM_PP,
    EP_COMM_OTHER,
    EP_COMM_NUM
} ep_comm_class;

/* Field order and widths keep an op at 80 bytes: a DeepSeek-V3 schedule on 1024 GPUs holds 27 M of
 * them (docs/performance.md). */
typedef struct {
    const char *label;  /* static string: "qkv", "dispatch", "fsdp.ag", "pp.send", ... */
    double flops;       /* floating point operations of this op on this rank */
    double bytes;       /* compute: HBM bytes read+written; comm: payload bytes (see kind) */
    int m, n, k, batch; /* GEMM shape (grouped: batch experts, m rows in total) */
    int group;          /* index into ep_sched.groups, -1 if not communication */
    int seq;            /* sequence number within the group */
    int peer;           /* send/recv: global peer rank */
    int traffic;        /* a2a: index into ep_sched.traffic, -1 otherwise */
    int deps_off;       /* deps are ranks[r].deps[deps_off .. deps_off+ndeps) */
    int16_t mb;         /* microbatch, -1 if none */
    int16_t chunk;      /* model chunk (VPP), -1 if none */
    int16_t layer;      /* global layer index, -1 if none */
    int16_t index;      /* bucket / unit index for DP ops, -1 if none */
    int16_t sms;        /* SMs its communication kernel holds (0: NCCL's channels / not comm) */
    int16_t ndeps;
    ep_op_kind kind : 8;
    ep_stream stream : 8;
    ep_phase phase : 8;
    ep_node node : 8;
    uint8_t transpose : 1; /* a2a: 1 = traffic matrix transposed (combine direction) */
    uint8_t
        graph : 2; /* CUDA graph: 1 captured (no launch of its own), 2 also its graph's launch */
    uint8_t inner : 1; /* issued inside another op's module call, no module bookkeeping of its own:
                          an FP8 quantization inside its GEMM's (Transformer Engine), the TP
                          backward's regather inside its linear layer's backward */
    int8_t algo;       /* ep_algo (ep_xfer.h): how a communication op moves, set by ep_rb_emit */
    int8_t fp8;        /* GEMM: runs in FP8 (Transformer Engine, --fp8-format): FP8 peak and table;
                          elementwise: a quantization TE runs inside its GEMM's module call */
} ep_op;

typedef struct {
    int nops, cap;
    ep_op *ops;
    int ndeps, depcap;
    int *deps;
    double model_state_bytes; /* weights, gradients, optimizer state held (sched_dp.c) */
} ep_rank_sched;

/* Per-peer payload of one token all-to-all instance (dispatch direction). */
typedef struct {
    int group; /* the EP group */
    int n;     /* group size */
    int nnodes;
    int *node_of;        /* [n] node index of each member */
    int64_t *bytes;      /* [n*n] src->dst payload, one copy per destination rank (diag = local) */
    int64_t *node_bytes; /* [n*nnodes] src->node payload, one copy per destination node; NULL for
                            alltoall */
    int64_t *recv_rows;  /* [n] token rows each member receives (one per source token and rank) */
    int64_t *pad_rows;   /* [n] expert rows after padding each local expert (== expert_rows
                            without padding): the m of the expert GEMMs */
    int64_t thd_pad_tokens; /* hybridep THD: padding tokens added in the group (wasted rows) */
    /* added after the first draft: */
    int64_t *expert_rows;  /* [n] (token, local expert) rows each member's experts receive */
    int64_t *send_rows;    /* [n] token rows each member sends (sum of its row of bytes / row) */
    int *tokens;           /* [n] tokens each member holds (THD: uneven) */
    int thd_padded_tokens; /* hybridep THD: the count every member pads to (0 otherwise) */
    int microbatch, layer; /* the instance; routing drawn with microbatch route_mb */
    int route_mb;
} ep_traffic;

typedef struct {
    ep_config cfg;
    ep_layer_plan plan;
    int world;
    int num_microbatches;
    ep_rank_sched *ranks; /* [world] */
    int ngroups, groupcap;
    ep_group *groups;
    int ntraffic, trafficcap;
    ep_traffic *traffic;
    double model_flops_per_token; /* 6 x active params + attention, for MFU (ep_cost.h) */
    double tokens_per_iteration;  /* global batch x seq length (THD: tokens actually held) */
    /* added after the first draft: */
    int route_period; /* distinct routing draws per layer (docs/schedule.md, "Routing budget") */
    int route_groups; /* EP groups drawn per (microbatch, layer) when even one microbatch exceeds
                         the budget: group ordinal o copies the draw of o mod route_groups; 0 =
                         every group draws its own */
    void *internal;   /* generator state (group and traffic indexes, interned labels) */
} ep_sched;

/* Builds the schedule of one training iteration for a validated config. Returns 0, or -1 with one
 * line in err. The sched owns everything it points to. */
int ep_sched_build(const ep_config *cfg, ep_sched *out, char err[EP_ERRLEN]);
void ep_sched_free(ep_sched *s);
/* The same for the ranks with only[r] != 0 ([world] flags); the others hold no ops. Routes are
 * drawn on demand, so only the EP groups of those ranks are drawn: one rank per pipeline stage
 * gives the memory and compute of a layout at a fraction of the cost (epsim search). */
int ep_sched_build_ranks(const ep_config *cfg, const unsigned char *only, ep_sched *out,
                         char err[EP_ERRLEN]);

/* Writes the op's name: mb{m}.c{c}.L{l}.B{bucket}.{label}.{phase}, absent parts left out, e.g.
 * "mb3.c0.L5.dispatch.fwd", "mb1.L5.fsdp.ag_dense.bwd", "mb2.c1.pp.send.fwd", "optimizer.step". */
void ep_op_name(const ep_op *op, char *buf, size_t len);

/* Checks the invariants of the NOTES above: dependencies point to earlier ops, no cycles, every
 * collective has exactly one op per group member with the same kind and consistent sizes, send and
 * recv pair up, names are unique per rank. Returns 0, or -1 with the first violation in err. */
int ep_sched_check(const ep_sched *s, char err[EP_ERRLEN]);

const char *ep_stream_name(ep_stream s);
const char *ep_op_kind_name(ep_op_kind k);
const char *ep_phase_name(ep_phase p); /* "fwd", "bwd", "bwd_dw", "" */
const char *ep_node_name(ep_node n);
const char *ep_comm_class_name(ep_comm_class c);
ep_comm_class ep_op_comm_class(const ep_op *op);
int ep_op_is_comm(const ep_op *op);

/* The run's optimizer step is DDP's (Megatron's Float16OptimizerWithFloat16Params): no
 * distributed optimizer, FSDP or HSDP, whose host loops over the parameter tensors cost less
 * (sim_cost.c). Decided in sched_dp.c with the rest of the data-parallel layout. */
int ep_dp_ddp_optimizer(const ep_config *cfg);

/* The start and end (seconds) of op i of rank r, from an executor's timing. */
typedef void (*ep_op_span)(void *ctx, int r, int i, double *start, double *end);
/* Writes the schedule's ops with their spans as a Chrome trace (core/sched_trace.c, ep_trace.h):
 * one track per rank and stream used, every op an event named by ep_op_name. Returns 0, or -1
 * with err (nothing is left at path). */
int ep_sched_write_trace(const char *path, const char *meta_json, const ep_sched *s,
                         ep_op_span span, void *ctx, char err[EP_ERRLEN]);

/* Prints the schedule as text (per rank, per stream, ops in launch order) or CSV (one row per op).
 */
void ep_sched_print(const ep_sched *s, FILE *f, int rank_filter);
void ep_sched_print_csv(const ep_sched *s, FILE *f, int rank_filter);

#endif
