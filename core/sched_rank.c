/* sched_rank: the rank builder's primitives - emitting an op (the one place that sets how a
 * transfer moves, ep_xfer.h, and its communicator sequence), dependencies, and the per-microbatch
 * chains the layer, pipeline and data-parallel generators wait on (sched_internal.h). Its own file
 * so that sched_build.c, sched_layer.c and sched_dp.c use it without using each other in a circle.
 */
#include <stdio.h>

#include "sched_internal.h"

static int seq_next(ep_rank_builder *rb, int group) {
    for (int i = 0; i < rb->ngroups; i++)
        if (rb->group_id[i] == group) return rb->group_seq[i]++;
    if (rb->ngroups == EP_MAX_RANK_GROUPS) return -1;
    rb->group_id[rb->ngroups] = group;
    rb->group_seq[rb->ngroups++] = 1;
    return 0;
}

int ep_rb_emit(ep_rank_builder *rb, ep_op *op) {
    /* how a transfer moves: decided here, once (ep_xfer.h) */
    ep_xfer_set(op, rb->cfg, op->group >= 0 ? &rb->s->groups[op->group] : NULL);
    if (rb->cfg->cuda_graph_mask & EP_CG_FULL_ITERATION) /* one graph: the rank's first op */
        op->graph = (int8_t)(rb->out->nops == 0 ? 2 : 1);
    if (op->group >= 0 && ep_op_is_comm(op)) {
        op->seq = seq_next(rb, op->group);
        if (op->seq < 0) {
            snprintf(rb->err, EP_ERRLEN, "rank %d talks to more than %d communicators", rb->rank,
                     EP_MAX_RANK_GROUPS);
            return -1;
        }
    }
    int idx = ep_sched_push(rb->out, op);
    if (idx < 0) {
        snprintf(rb->err, EP_ERRLEN, "out of memory at rank %d op %d", rb->rank, rb->out->nops);
        return -1;
    }
    rb->last_on_stream[op->stream] = idx;
    return idx;
}

int ep_rb_dep(ep_rank_builder *rb, int idx, int dep) {
    if (dep < 0 || dep == idx) return 0;
    if (ep_sched_push_dep(rb->out, idx, dep) != 0) {
        snprintf(rb->err, EP_ERRLEN, "out of memory at rank %d", rb->rank);
        return -1;
    }
    return 0;
}

void ep_chain_reset(ep_chain *c) {
    for (int i = 0; i < EP_NUM_STREAMS; i++)
        c->tail[i] = -1;
}

void ep_chain_add(ep_chain *c, int op, ep_stream stream) {
    if (op > c->tail[stream]) c->tail[stream] = op;
}

ep_chain *ep_rb_chain(ep_rank_builder *rb, int mb, int chunk) {
    return rb->per_mb_chains ? &rb->chains[mb * rb->vpp + chunk] : &rb->chains[0];
}

int ep_rb_wait_chain(ep_rank_builder *rb, int idx, const ep_chain *c, ep_stream stream) {
    for (int s = 0; s < EP_NUM_STREAMS; s++) /* the own stream is ordered already (FIFO) */
        if (s != (int)stream && c->tail[s] >= 0 && ep_rb_dep(rb, idx, c->tail[s]) != 0) return -1;
    return 0;
}
