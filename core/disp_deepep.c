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

static int kernel_sms(const ep_config *c) {
    return c->moe_deepep_num_sms;
}

const ep_dispatcher ep_disp_deepep = {.node_bytes = 1,
                                    .kernel_sms = kernel_sms,
                                    .metadata = metadata,
                                    .dispatch = gen_dispatch_a2a,
                                    .permute = gen_permute_recv,
                                    .unpermute = gen_unpermute_recv,
                                    .combine = gen_combine_a2a};
