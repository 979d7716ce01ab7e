/* disp_deepep: the flex dispatcher with DeepEP - the dispatch layout, the notify exchange of
 * counts and its host sync, one row per (token, destination rank), permute and unpermute around
 * the experts (docs/schedule.md, "Layers"). */
#include "sched_gen.h"

static void metadata(gen *g, const moe_rows *r) {
    (void)r;
    const ep_config *c = g->cfg;
    double E = c->num_experts;
    gen_mem(g, "layout", EP_OP_ELEMENTWISE, g->t * (E + c->moe_router_topk * 8.0));
    g->out[g->n - 1].fwd_only = 1;
    gen_coll(g, "notify", EP_OP_ALLTOALL, g->rb->g_ep, (E / g->rb->ep_size + 1) * 4.0)->fwd_only = 1;
    gen_host_sync(g, "notify_sync");
}

static void dispatch(gen *g, const moe_rows *r) {
    gen_a2a(g, "dispatch", r, 0);
}

static void permute(gen *g, const moe_rows *r) {
    gen_mem(g, "permute", EP_OP_PERMUTE, (r->recv + gen_permuted_rows(g->cfg, r)) * g->R);
}

static void unpermute(gen *g, const moe_rows *r) {
    gen_mem(g, "unpermute", EP_OP_UNPERMUTE, (gen_permuted_rows(g->cfg, r) + r->recv) * g->R);
}

static void combine(gen *g, const moe_rows *r) {
    gen_a2a(g, "combine", r, 1);
}

static int kernel_sms(const ep_config *c) {
    return c->moe_deepep_num_sms;
}

const ep_dispatcher ep_disp_deepep = {.node_bytes = 1,
                                    .kernel_sms = kernel_sms,
                                    .metadata = metadata,
                                    .dispatch = dispatch,
                                    .permute = permute,
                                    .unpermute = unpermute,
                                    .combine = combine};
