/* disp_alltoall: Megatron-LM's MoEAlltoAllTokenDispatcher - a local permute to rank order, the
 * count exchange and a host sync for the split sizes, one row per (token, expert) pair in the
 * all-to-all, sort_chunks / unsort_chunks to and from expert order (docs/schedule.md, "Layers"). */
#include "sched_gen.h"

static void preprocess(gen *g, const moe_rows *r) {
    const ep_config *c = g->cfg;
    gen_mem(g, "permute", EP_OP_PERMUTE, (g->t + r->send) * g->R);
    if (!c->moe_pad_expert_input_to_capacity) { /* padded: every split size is known */
        double per_rank = (double)c->num_experts / g->rb->ep_size;
        gen_coll(g, "count_a2a", EP_OP_ALLTOALL, g->rb->g_ep, per_rank * 8.0)->fwd_only = 1;
        if (c->legacy_dispatch_order) gen_host_sync(g, "count_sync");
    }
}

/* Megatron reads the split sizes on the host at the start of token_dispatch ("before_ep_alltoall"),
 * in the dispatch node: with EP overlap the backward MLP of the other microbatch is already queued
 */
static void dispatch(gen *g, const moe_rows *r) {
    if (!g->cfg->moe_pad_expert_input_to_capacity && !g->cfg->legacy_dispatch_order)
        gen_host_sync(g, "count_sync");
    gen_dispatch_a2a(g, r);
}

static void permute(gen *g, const moe_rows *r) {
    gen_mem(g, "sort_chunks", EP_OP_PERMUTE, (r->recv + gen_permuted_rows(g->cfg, r)) * g->R);
}

static void unpermute(gen *g, const moe_rows *r) {
    gen_mem(g, "unsort_chunks", EP_OP_PERMUTE, (gen_permuted_rows(g->cfg, r) + r->recv) * g->R);
}

static void combine(gen *g, const moe_rows *r) {
    gen_a2a(g, "combine", r, 1);
    gen_mem(g, "unpermute", EP_OP_UNPERMUTE, (r->send + g->t) * g->R);
}

const ep_dispatcher ep_disp_alltoall = {.pair_rows = 1,
                                        .preprocess = preprocess,
                                        .dispatch = dispatch,
                                        .permute = permute,
                                        .unpermute = unpermute,
                                        .combine = combine};
