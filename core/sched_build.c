/* sched_build: ep_sched_build - one training iteration per rank, in host launch order.
 *
 * For each rank: the steps of its pipeline stage (sched_order.c), each step expanded layer by
 * layer into Megatron's nodes in the combined-1F1B order of docs/schedule.md, section 5 (a forward-only
 * or backward-only step uses the same order with the other half absent), pipeline send/recv
 * exchanges between steps, and the data-parallel collectives and optimizer (sched_dp.c).
 * docs/schedule.md is the contract this file implements.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

/* --- pipeline exchanges ------------------------------------------------------------------------
 */

static int first_vstage(const ep_rank_builder *rb, int chunk) {
    return rb->stage == 0 && chunk == 0;
}
static int last_vstage(const ep_rank_builder *rb, int chunk) {
    return rb->stage == rb->pp - 1 && chunk == rb->vpp - 1;
}

static int p2p(ep_rank_builder *rb, ep_op_kind kind, ep_phase phase, int mb, int chunk, int peer,
               int group) {
    ep_op op = ep_op_blank();
    op.kind = kind;
    op.stream = EP_STREAM_PP;
    op.phase = phase;
    op.label = kind == EP_OP_SEND ? "pp.send" : "pp.recv";
    op.mb = (int16_t)mb;
    op.chunk = (int16_t)chunk;
    op.peer = peer;
    op.group = group;
    op.bytes = ep_layer_activation_bytes(rb->cfg, ep_sched_route_mb(rb->s, mb), rb->rank);
    int idx = ep_rb_emit(rb, &op);
    if (idx < 0) return -1;
    ep_chain *c = ep_rb_chain(rb, mb, chunk);
    if (kind == EP_OP_SEND) { /* the tensor it sends is the chain's last output */
        if (ep_rb_wait_chain(rb, idx, c, EP_STREAM_PP) != 0) return -1;
    } else if (rb->pending_recv) { /* only the pass that consumes it will wait (emit_pass) */
        rb->pending_recv[(mb * rb->vpp + chunk) * 2 + (phase != EP_PHASE_FWD)] = idx;
    } else {
        ep_chain_add(c, idx, EP_STREAM_PP); /* the pass that consumes it waits for it */
    }
    return 0;
}

/* The receive a pass of (mb, chunk) consumes, if one is pending, joins its chain right before it. */
static void consume_recv(ep_rank_builder *rb, int mb, int chunk, int bwd) {
    if (!rb->pending_recv || mb < 0) return;
    int *r = &rb->pending_recv[(mb * rb->vpp + chunk) * 2 + bwd];
    if (*r >= 0) ep_chain_add(ep_rb_chain(rb, mb, chunk), *r, EP_STREAM_PP);
    *r = -1;
}

enum { XCH_F = 1, XCH_B = 2 }; /* which directions an exchange carries */

/* Between two steps: send what `prev` produced, receive what `next` consumes, in the directions
 * of `dirs` (forward activations, backward gradients). Megatron's _p2p_ops order: even stages
 * send first, odd stages receive first, so that blocking transfers pair up between neighbours. */
static int exchange_dirs(ep_rank_builder *rb, const ep_step *prev, const ep_step *next, int dirs) {
    int f = dirs & XCH_F, b = dirs & XCH_B;
    int send_f = f && prev && prev->f_mb >= 0 && !last_vstage(rb, prev->f_chunk);
    int send_b = b && prev && prev->b_mb >= 0 && !first_vstage(rb, prev->b_chunk);
    int recv_f = f && next && next->f_mb >= 0 && !first_vstage(rb, next->f_chunk);
    int recv_b = b && next && next->b_mb >= 0 && !last_vstage(rb, next->b_chunk);
    if (rb->pp == 1) return 0;
#define SEND_F                                                                                     \
    if (send_f && p2p(rb, EP_OP_SEND, EP_PHASE_FWD, prev->f_mb, prev->f_chunk, rb->next_rank,      \
                      rb->g_send_next) != 0)                                                       \
    return -1
#define RECV_F                                                                                     \
    if (recv_f && p2p(rb, EP_OP_RECV, EP_PHASE_FWD, next->f_mb, next->f_chunk, rb->prev_rank,      \
                      rb->g_recv_prev) != 0)                                                       \
    return -1
#define SEND_B                                                                                     \
    if (send_b && p2p(rb, EP_OP_SEND, EP_PHASE_BWD, prev->b_mb, prev->b_chunk, rb->prev_rank,      \
                      rb->g_send_prev) != 0)                                                       \
    return -1
#define RECV_B                                                                                     \
    if (recv_b && p2p(rb, EP_OP_RECV, EP_PHASE_BWD, next->b_mb, next->b_chunk, rb->next_rank,      \
                      rb->g_recv_next) != 0)                                                       \
    return -1
    if (rb->stage % 2 == 0) {
        SEND_F;
        RECV_F;
        SEND_B;
        RECV_B;
    } else {
        RECV_F;
        SEND_F;
        RECV_B;
        SEND_B;
    }
#undef SEND_F
#undef RECV_F
#undef SEND_B
#undef RECV_B
    return 0;
}

static int exchange(ep_rank_builder *rb, const ep_step *prev, const ep_step *next) {
    return exchange_dirs(rb, prev, next, XCH_F | XCH_B);
}

/* --- one step ----------------------------------------------------------------------------------
 */

typedef struct {
    int layer, mb, chunk; /* the backward layer whose pre_dispatch wgrad waits for the exchange */
} deferred_dw;

/* One paired layer step of docs/schedule.md, section 5; f or b may be absent (-1). */
static int layer_step(ep_rank_builder *rb, const ep_step *st, int f, int b, int last_in_bwd,
                      deferred_dw *defer) {
    ep_chain *cf = f >= 0 ? ep_rb_chain(rb, st->f_mb, st->f_chunk) : NULL;
    ep_chain *cb = b >= 0 ? ep_rb_chain(rb, st->b_mb, st->b_chunk) : NULL;
    int delay = rb->cfg->delay_wgrad_compute;
    int fm = st->f_mb, fc = st->f_chunk, bm = st->b_mb, bc = st->b_chunk;
#define NODE(ch, layer, mb, chunk, node, phase, dd)                                                \
    if (ep_layer_emit_node(rb, ch, layer, mb, chunk, node, phase, dd) != 0) return -1
    if (b >= 0) {
        if (ep_dp_before_bwd(rb, cb, b, bm, bc) != 0) return -1;
        if (ep_layer_emit_recompute(rb, cb, b, bm, bc) != 0) return -1;
        NODE(cb, b, bm, bc, EP_NODE_MTP, EP_PHASE_BWD, 0);
        NODE(cb, b, bm, bc, EP_NODE_COMBINE, EP_PHASE_BWD, 0);
    }
    /* --legacy-dispatch-order: the forward dispatch before the backward MLP, the forward MTP
     * before the backward pre_dispatch (epref before 2026-11-29) */
    int legacy = rb->cfg->legacy_dispatch_order;
    if (f >= 0) {
        if (ep_dp_before_fwd(rb, cf, f, fm, fc) != 0) return -1;
        NODE(cf, f, fm, fc, EP_NODE_PRE_DISPATCH, EP_PHASE_FWD, 0);
        if (legacy) NODE(cf, f, fm, fc, EP_NODE_DISPATCH, EP_PHASE_FWD, 0);
    }
    if (b >= 0) NODE(cb, b, bm, bc, EP_NODE_MLP, EP_PHASE_BWD, delay);
    if (f >= 0 && !legacy) NODE(cf, f, fm, fc, EP_NODE_DISPATCH, EP_PHASE_FWD, 0);
    if (b >= 0) {
        if (delay && ep_layer_emit_dw(rb, b, bm, bc, EP_NODE_MLP) != 0) return -1;
        NODE(cb, b, bm, bc, EP_NODE_DISPATCH, EP_PHASE_BWD, 0);
    }
    if (f >= 0) {
        NODE(cf, f, fm, fc, EP_NODE_MLP, EP_PHASE_FWD, 0);
        NODE(cf, f, fm, fc, EP_NODE_COMBINE, EP_PHASE_FWD, 0);
        if (legacy) NODE(cf, f, fm, fc, EP_NODE_MTP, EP_PHASE_FWD, 0);
    }
    if (b >= 0) NODE(cb, b, bm, bc, EP_NODE_PRE_DISPATCH, EP_PHASE_BWD, delay);
    if (f >= 0 && !legacy) NODE(cf, f, fm, fc, EP_NODE_MTP, EP_PHASE_FWD, 0);
    if (b >= 0) {
        if (delay && last_in_bwd) { /* overlaps the pipeline send instead (after the exchange) */
            *defer = (deferred_dw){b, bm, bc};
            return 0;
        }
        if (delay && ep_layer_emit_dw(rb, b, bm, bc, EP_NODE_PRE_DISPATCH) != 0) return -1;
        if (ep_dp_after_bwd(rb, b, bm, bc, rb->layer_last_bwd[b]) != 0) return -1;
    }
#undef NODE
    return 0;
}

static int emit_step(ep_rank_builder *rb, const ep_step *st, deferred_dw *defer) {
    const ep_layer_plan *plan = &rb->s->plan;
    int ff = 0, nf = 0, fb = 0, nb = 0;
    consume_recv(rb, st->f_mb, st->f_chunk, 0);
    consume_recv(rb, st->b_mb, st->b_chunk, 1);
    if (st->f_mb >= 0) ep_layer_range(plan, rb->pp, rb->vpp, rb->stage, st->f_chunk, &ff, &nf);
    if (st->b_mb >= 0) ep_layer_range(plan, rb->pp, rb->vpp, rb->stage, st->b_chunk, &fb, &nb);
    defer->layer = -1;
    if (st->f_mb >= 0 && first_vstage(rb, st->f_chunk) &&
        ep_layer_emit_embedding(rb, ep_rb_chain(rb, st->f_mb, st->f_chunk), st->f_mb, st->f_chunk,
                                EP_PHASE_FWD) != 0)
        return -1;
    if (st->b_mb >= 0 && last_vstage(rb, st->b_chunk) &&
        ep_layer_emit_output(rb, ep_rb_chain(rb, st->b_mb, st->b_chunk), st->b_mb, st->b_chunk,
                             EP_PHASE_BWD) != 0)
        return -1;
    int overlapped = nf < nb ? nf : nb;
    for (int i = 0; i < overlapped; i++) /* forward layer i pairs with backward layer L-1-i */
        if (layer_step(rb, st, ff + i, fb + nb - 1 - i, i == nb - 1, defer) != 0) return -1;
    for (int i = overlapped; i < nb; i++)
        if (layer_step(rb, st, -1, fb + nb - 1 - i, i == nb - 1, defer) != 0) return -1;
    for (int i = overlapped; i < nf; i++)
        if (layer_step(rb, st, ff + i, -1, 0, defer) != 0) return -1;
    if (st->f_mb >= 0 && last_vstage(rb, st->f_chunk) &&
        ep_layer_emit_output(rb, ep_rb_chain(rb, st->f_mb, st->f_chunk), st->f_mb, st->f_chunk,
                             EP_PHASE_FWD) != 0)
        return -1;
    if (st->b_mb >= 0 && first_vstage(rb, st->b_chunk)) {
        if (ep_layer_emit_embedding(rb, ep_rb_chain(rb, st->b_mb, st->b_chunk), st->b_mb,
                                    st->b_chunk, EP_PHASE_BWD) != 0)
            return -1;
        if (ep_dp_after_embedding_bwd(rb, st->b_mb, rb->out->nops - 1) != 0) return -1;
    }
    return 0;
}

/* --- rank setup ------------------------------------------------------------------------------ */

static int group_of(ep_rank_builder *rb, ep_group_kind kind, int *buf, int min_size) {
    int n = ep_group_members(rb->cfg, kind, rb->rank, buf);
    if (n < min_size) return -1;
    int g = ep_sched_group(rb->s, kind, buf, n);
    if (g < 0) snprintf(rb->err, EP_ERRLEN, "out of memory registering a communicator");
    return g < 0 ? -2 : g;
}

static int p2p_group(ep_rank_builder *rb, int src, int dst) {
    int m[2] = {src, dst};
    return ep_sched_group(rb->s, EP_GROUP_P2P, m, 2);
}

/* Expert TP: Megatron's alltoall dispatcher all-gathers the tokens of the ETP group after the EP
 * all-to-all, so this rank's experts take the rows that every ETP member's EP group routed to
 * this EP index (each member's own traffic instance). */
static int etp_setup(ep_rank_builder *rb, int *buf) {
    rb->g_etp = -1;
    rb->etp_size = 1;
    int n = ep_group_members(rb->cfg, EP_GROUP_ETP, rb->rank, buf);
    if (n < 2) return 0;
    int *members = malloc((size_t)n * sizeof *members);
    rb->etp_ep_groups = malloc((size_t)n * sizeof *rb->etp_ep_groups);
    if (!members || !rb->etp_ep_groups) {
        free(members);
        snprintf(rb->err, EP_ERRLEN, "out of memory registering a communicator");
        return -1;
    }
    memcpy(members, buf, (size_t)n * sizeof *members);
    int rc = 0;
    rb->g_etp = ep_sched_group(rb->s, EP_GROUP_ETP, members, n);
    rb->etp_size = n;
    for (int i = 0; i < n && rc == 0 && rb->g_etp >= 0; i++) {
        int m = ep_group_members(rb->cfg, EP_GROUP_EP, members[i], buf);
        if ((rb->etp_ep_groups[i] = ep_sched_group(rb->s, EP_GROUP_EP, buf, m)) < 0) rc = -1;
    }
    free(members);
    if (rc != 0 || rb->g_etp < 0) {
        snprintf(rb->err, EP_ERRLEN, "out of memory registering a communicator");
        return -1;
    }
    return 0;
}

static int setup_rank(ep_rank_builder *rb, int *buf) {
    const ep_config *cfg = rb->cfg;
    ep_rank_coords(cfg, rb->rank, &rb->dense, &rb->expert);
    rb->stage = rb->dense.pp;
    rb->tp_size = cfg->tensor_model_parallel_size;
    int hsdp = cfg->num_distributed_optimizer_instances > 1;
    /* Collectives of one member are skipped (size 2 minimum) except EP, whose ops keep their
     * shape for any EP size; TP only matters when it is > 1. */
    if ((rb->g_tp = group_of(rb, EP_GROUP_TP, buf, 2)) == -2) return -1;
    rb->g_ep = rb->g_tpep = rb->g_etp = -1;
    rb->ep_size = rb->etp_size = 1;
    if (cfg->num_experts > 0) {
        if ((rb->g_ep = group_of(rb, EP_GROUP_EP, buf, 1)) < 0) return -1;
        rb->ep_size = rb->s->groups[rb->g_ep].size;
        for (int i = 0; i < rb->ep_size; i++)
            if (rb->s->groups[rb->g_ep].ranks[i] == rb->rank) rb->ep_index = i;
        if ((rb->g_tpep = group_of(rb, EP_GROUP_TPEP, buf, 1)) < 0) return -1;
        if (etp_setup(rb, buf) != 0) return -1;
    }
    if ((rb->g_dp = group_of(rb, EP_GROUP_DP, buf, 2)) == -2) return -1;
    rb->g_edp = rb->g_dp_in = rb->g_dp_out = rb->g_edp_in = rb->g_edp_out = -1;
    if (cfg->num_experts > 0 && (rb->g_edp = group_of(rb, EP_GROUP_EDP, buf, 2)) == -2) return -1;
    if (hsdp) {
        if ((rb->g_dp_in = group_of(rb, EP_GROUP_DP_INNER, buf, 2)) == -2) return -1;
        if ((rb->g_dp_out = group_of(rb, EP_GROUP_DP_OUTER, buf, 2)) == -2) return -1;
        if (cfg->num_experts > 0) {
            if ((rb->g_edp_in = group_of(rb, EP_GROUP_EDP_INNER, buf, 2)) == -2) return -1;
            if ((rb->g_edp_out = group_of(rb, EP_GROUP_EDP_OUTER, buf, 2)) == -2) return -1;
        }
    }
    rb->next_rank = rb->prev_rank = rb->rank;
    rb->g_send_next = rb->g_recv_prev = rb->g_send_prev = rb->g_recv_next = -1;
    if (rb->pp > 1) {
        int n = ep_group_members(cfg, EP_GROUP_PP, rb->rank, buf);
        if (n != rb->pp) {
            snprintf(rb->err, EP_ERRLEN, "pipeline group of rank %d has %d members, expected %d",
                     rb->rank, n, rb->pp);
            return -1;
        }
        rb->next_rank = buf[(rb->stage + 1) % rb->pp];
        rb->prev_rank = buf[(rb->stage + rb->pp - 1) % rb->pp];
        rb->g_send_next = p2p_group(rb, rb->rank, rb->next_rank);
        rb->g_recv_prev = p2p_group(rb, rb->prev_rank, rb->rank);
        rb->g_send_prev = p2p_group(rb, rb->rank, rb->prev_rank);
        rb->g_recv_next = p2p_group(rb, rb->next_rank, rb->rank);
        if (rb->g_send_next < 0 || rb->g_recv_prev < 0 || rb->g_send_prev < 0 ||
            rb->g_recv_next < 0) {
            snprintf(rb->err, EP_ERRLEN, "out of memory registering pipeline pairs");
            return -1;
        }
    }
    return 0;
}

static int build_rank(ep_sched *s, int rank, const ep_step *steps, int nsteps, int *buf,
                      char err[EP_ERRLEN]) {
    const ep_config *cfg = &s->cfg;
    ep_rank_builder rb;
    memset(&rb, 0, sizeof rb);
    rb.s = s;
    rb.cfg = cfg;
    rb.out = &s->ranks[rank];
    rb.rank = rank;
    rb.pp = cfg->pipeline_model_parallel_size;
    rb.vpp = cfg->virtual_pipeline_model_parallel_size;
    rb.nmb = s->num_microbatches;
    rb.err = err;
    for (int i = 0; i < EP_NUM_STREAMS; i++)
        rb.last_on_stream[i] = -1;
    int rc = -1, nlayers = s->plan.num_layers + s->plan.num_mtp;
    rb.per_mb_chains = cfg->overlap_moe_expert_parallel_comm;
    int nchains = rb.per_mb_chains ? rb.nmb * rb.vpp : 1;
    rb.chains = malloc((size_t)nchains * sizeof *rb.chains);
    rb.layer_last_bwd = malloc((size_t)nlayers * sizeof(int));
    int split_p2p = rb.vpp > 1 && cfg->overlap_p2p_comm && !rb.per_mb_chains;
    if (split_p2p) rb.pending_recv = malloc((size_t)rb.nmb * rb.vpp * 2 * sizeof(int));
    if (!rb.chains || !rb.layer_last_bwd || (split_p2p && !rb.pending_recv)) {
        snprintf(err, EP_ERRLEN, "out of memory");
        goto done;
    }
    for (int i = 0; split_p2p && i < rb.nmb * rb.vpp * 2; i++)
        rb.pending_recv[i] = -1;
    for (int i = 0; i < nchains; i++)
        ep_chain_reset(&rb.chains[i]);
    for (int i = 0; i < nlayers; i++)
        rb.layer_last_bwd[i] = -1;
    if (setup_rank(&rb, buf) != 0 || ep_dp_setup(&rb) != 0 || ep_dp_begin(&rb) != 0) goto done;
    if (nsteps > 0 && exchange(&rb, NULL, &steps[0]) != 0) goto done;
    for (int i = 0; i < nsteps; i++) {
        deferred_dw d;
        const ep_step *st = &steps[i], *next = i + 1 < nsteps ? &steps[i + 1] : NULL;
        if (st->f_mb >= 0 && st->b_mb >= 0 && !cfg->overlap_moe_expert_parallel_comm) {
            ep_step f = {st->f_mb, st->f_chunk, -1, -1}, b = {-1, -1, st->b_mb, st->b_chunk};
            /* interleaved with --overlap-p2p-communication: the forward's exchange right after
             * the forward (its transfers run beside the backward), the backward's after it */
            int split = rb.pending_recv != NULL;
            if (emit_step(&rb, &f, &d) != 0) goto done;
            if (split && exchange_dirs(&rb, st, next, XCH_F) != 0) goto done;
            if (emit_step(&rb, &b, &d) != 0) goto done;
            if (exchange_dirs(&rb, st, next, split ? XCH_B : XCH_F | XCH_B) != 0) goto done;
        } else {
            if (emit_step(&rb, st, &d) != 0 || exchange(&rb, st, next) != 0) goto done;
        }
        if (d.layer >= 0) {
            if (ep_layer_emit_dw(&rb, d.layer, d.mb, d.chunk, EP_NODE_PRE_DISPATCH) != 0 ||
                ep_dp_after_bwd(&rb, d.layer, d.mb, d.chunk, rb.layer_last_bwd[d.layer]) != 0)
                goto done;
        }
    }
    if (ep_dp_end(&rb) != 0) goto done;
    /* trim the doubling slack: a large schedule keeps only what it uses */
    ep_rank_sched *r = rb.out;
    if (r->nops > 0 && r->nops < r->cap) {
        ep_op *p = realloc(r->ops, (size_t)r->nops * sizeof *p);
        if (p) r->ops = p, r->cap = r->nops;
    }
    if (r->ndeps > 0 && r->ndeps < r->depcap) {
        int *p = realloc(r->deps, (size_t)r->ndeps * sizeof *p);
        if (p) r->deps = p, r->depcap = r->ndeps;
    }
    rc = 0;
done:
    ep_dp_free(&rb);
    free(rb.etp_ep_groups);
    free(rb.pending_recv);
    free(rb.chains);
    free(rb.layer_last_bwd);
    return rc;
}

/* --- the iteration ------------------------------------------------------------------------------
 */

static double tokens_per_iteration(const ep_sched *s) {
    const ep_config *cfg = &s->cfg;
    if (!cfg->sequence_packing) return (double)cfg->global_batch_size * cfg->seq_length;
    double sum = 0; /* THD: what the packed microbatches of every replica really hold */
    for (int d = 0; d < cfg->data_parallel_size; d++)
        for (int m = 0; m < s->num_microbatches; m++)
            sum += ep_thd_tokens(cfg, ep_sched_route_mb(s, m), d);
    return sum;
}

/* only: NULL builds every rank (routes drawn ahead on worker threads); else the ranks with
 * only[r] != 0, routes drawn on demand. */
static int build(const ep_config *cfg_in, const unsigned char *only, ep_sched *s,
                 char err[EP_ERRLEN]) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg_in;
    const ep_config *cfg = &s->cfg;
    if (ep_layer_plan_build(cfg, &s->plan, err) != 0) return -1;
    s->world = cfg->world_size;
    s->num_microbatches = ep_config_num_microbatches(cfg);
    if (s->world < 1 || s->num_microbatches < 1) {
        snprintf(err, EP_ERRLEN,
                 "--global-batch-size %d gives no microbatch for --micro-batch-size %d x data "
                 "parallel %d (world %d)",
                 cfg->global_batch_size, cfg->micro_batch_size, cfg->data_parallel_size, s->world);
        return -1;
    }
    int pp = cfg->pipeline_model_parallel_size;
    s->ranks = calloc((size_t)s->world, sizeof *s->ranks);
    s->internal = calloc(1, sizeof(ep_sched_state));
    ep_step **steps = calloc((size_t)pp, sizeof *steps);
    int *nsteps = calloc((size_t)pp, sizeof *nsteps);
    int *buf = malloc((size_t)s->world * sizeof *buf);
    int rc = -1;
    if (!s->ranks || !s->internal || !steps || !nsteps || !buf) {
        snprintf(err, EP_ERRLEN, "out of memory for a schedule of %d ranks", s->world);
        goto done;
    }
    ep_sched_traffic_setup(s);
    s->model_flops_per_token = ep_cost_model_flops_per_token(cfg, &s->plan);
    s->tokens_per_iteration = tokens_per_iteration(s);
    for (int st = 0; st < pp; st++) {
        nsteps[st] = ep_sched_steps(cfg, s->num_microbatches, st, &steps[st]);
        if (nsteps[st] < 0) {
            snprintf(err, EP_ERRLEN, "out of memory for the pipeline order");
            goto done;
        }
    }
    if (ep_sched_traffic_start(s, only ? 1 : ep_sched_thread_count()) != 0) {
        snprintf(err, EP_ERRLEN, "out of memory for the routing draws");
        goto done;
    }
    for (int r = 0; r < s->world; r++) {
        if (only && !only[r]) continue;
        ep_coords dense, expert;
        ep_rank_coords(cfg, r, &dense, &expert);
        if (build_rank(s, r, steps[dense.pp], nsteps[dense.pp], buf, err) != 0) goto done;
    }
    rc = 0;
done:
    if (s->internal) ep_sched_traffic_stop(s);
    for (int st = 0; steps && st < pp; st++)
        free(steps[st]);
    free(steps);
    free(nsteps);
    free(buf);
    if (rc != 0) ep_sched_free(s);
    return rc;
}

int ep_sched_build(const ep_config *cfg, ep_sched *s, char err[EP_ERRLEN]) {
    return build(cfg, NULL, s, err);
}

int ep_sched_build_ranks(const ep_config *cfg, const unsigned char *only, ep_sched *s,
                         char err[EP_ERRLEN]) {
    return build(cfg, only, s, err);
}
