/* disp_alltoall: Megatron-LM's MoEAlltoAllTokenDispatcher - a local permute to rank order, the
 * count exchange and a host sync for the split sizes, one row per (token, expert) pair in the
 * all-to-all, sort_chunks / unsort_chunks to and from expert order (docs/schedule.md, "Layers"). */
#include "sched_gen.h"

/* Where the host reads the split sizes: Megatron syncs at the earliest point that needs them -
 * "before_permutation_1" (the end of pre_dispatch) when the output size is dynamic (token drops,
 * router padding for quantization), else "before_ep_alltoall" (the start of the dispatch);
 * --legacy-dispatch-order: always the end of pre_dispatch */
static int sync_in_preprocess(const ep_config *c) {
    return c->legacy_dispatch_order || c->moe_expert_capacity_factor > 0 ||
           c->moe_router_padding_for_quantization;
}

static void preprocess(gen *g, const moe_rows *r) {
    const ep_config *c = g->cfg;
    gen_mem(g, "permute", EP_OP_PERMUTE, (g->t + r->send) * g->R);
    if (!c->moe_pad_expert_input_to_capacity) { /* padded: every split size is known */
        double per_rank = (double)c->num_experts / g->rb->ep_size;
        gen_coll(g, "count_a2a", EP_OP_ALLTOALL, g->rb->g_ep, per_rank * 8.0)->fwd_only = 1;
        if (sync_in_preprocess(c)) gen_host_sync(g, "count_sync");
    }
}

/* otherwise at the start of token_dispatch, in the dispatch node: with EP overlap the backward
 * MLP of the other microbatch is already queued */
static void dispatch(gen *g, const moe_rows *r) {
    if (!g->cfg->moe_pad_expert_input_to_capacity && !sync_in_preprocess(g->cfg))
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
