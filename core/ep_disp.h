/* ep_disp: the token dispatcher backends, one row each (core/disp.c) and one file each
 * (core/disp_<name>.c): what a backend adds to the MoE layer's nodes, how its tokens cross (the
 * traffic rule) and the SMs its kernels hold. Read by the schedule generators (sched_layer.c,
 * sched_traffic.c) and the transfer plan (xfer.c). */
#ifndef EP_DISP_H
#define EP_DISP_H

#include "ep_config.h"

typedef struct gen gen;           /* the layer generator's state (sched_gen.h) */
typedef struct moe_rows moe_rows; /* one MoE layer's rows on this rank (sched_gen.h) */

typedef struct {
    /* traffic: a row per (token, expert) pair, as Megatron's alltoall dispatcher sends (1), or
     * per (token, destination rank), whose experts share it (0) */
    int pair_rows;
    int node_bytes;  /* keeps per-node bytes: deduplicates across nodes (the RDMA path) */
    int thd_padded;  /* needs the largest packed length over TP x EP under THD */
    int tpep_gather; /* with ETP > 1 gathers over TP x EP itself: no ETP all-gather after it */
    int (*kernel_sms)(const ep_config *c); /* SMs its kernels hold; NULL: NCCL moves its tokens */
    /* what it adds to the MoE layer's nodes (docs/schedule.md, "Layers"); a hook may be NULL */
    void (*preprocess)(gen *g, const moe_rows *r); /* pre_dispatch, after router, shared experts */
    void (*metadata)(gen *g, const moe_rows *r);   /* dispatch node, before the transfer */
    void (*dispatch)(gen *g, const moe_rows *r);   /* the transfer */
    void (*permute)(gen *g, const moe_rows *r);    /* mlp node, before the experts */
    void (*unpermute)(gen *g, const moe_rows *r);  /* mlp node, after the experts */
    void (*combine)(gen *g, const moe_rows *r);    /* combine node */
} ep_dispatcher;

/* The backend the configuration selects (ep_config_backend). */
const ep_dispatcher *ep_disp_of(const ep_config *c);

extern const ep_dispatcher ep_disp_alltoall, ep_disp_allgather, ep_disp_deepep, ep_disp_hybridep;

#endif
