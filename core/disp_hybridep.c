/* disp_hybridep: the flex dispatcher with Hybrid-EP - the routing map all-gathered and turned
 * into metadata on the device (with THD, the largest packed length first: an all-reduce and a
 * host sync), the permuted row count read on the host unless a row budget sizes the buffers, one
 * row per (token, destination rank), and the permute either separate or fused into the dispatch
 * and combine kernels (--moe-hybridep-fuse-permute; docs/schedule.md). */
#include "sched_gen.h"

static int fused(const gen *g) {
    return g->cfg->moe_hybridep_permute_fusion;
}

static void metadata(gen *g, const moe_rows *r) {
    const ep_config *c = g->cfg;
    double E = c->num_experts, tp_tokens = g->t;
    int ep = g->rb->ep_size;
    if (c->sequence_packing) {
        gen_coll(g, "thd_max", EP_OP_ALL_REDUCE, g->rb->g_tpep, 8.0)->fwd_only = 1;
        gen_host_sync(g, "thd_sync");
        tp_tokens = r->tr->thd_padded_tokens;
    }
    /* the routing map travels and is scanned as bools, one byte per (token, expert): Hybrid-EP's
     * Executor::allgather_routing_map (all_gather_into_tensor of a torch.bool tensor across
     * nodes, its own NVLink all-gather of the same bytes inside one) and its preprocessing
     * kernel over the gathered map */
    gen_coll(g, "routing_ag", EP_OP_ALL_GATHER, g->rb->g_ep, tp_tokens * E)->fwd_only = 1;
    gen_mem(g, "metadata", EP_OP_ELEMENTWISE, ep * tp_tokens * E + E * ep * 8.0);
    g->out[g->n - 1].fwd_only = 1;
    /* Megatron without a row budget (moe_expert_rank_capacity_factor unset): HybridEP sizes its
     * output from the permuted row count, which the host reads (token_dispatcher.py,
     * _HybridEPManager: "CPU sync in dispatch"), and the grouped GEMM takes the counts as a list */
    if (c->moe_expert_capacity_permute_budget == 0) gen_host_sync(g, "count_sync");
}

static void permute(gen *g, const moe_rows *r) {
    if (!fused(g)) gen_permute_recv(g, r);
}

static void unpermute(gen *g, const moe_rows *r) {
    if (!fused(g)) gen_unpermute_recv(g, r);
}

/* its dispatch kernel's SMs, and the permute blocks when the permute is fused into it */
static int kernel_sms(const ep_config *c) {
    return c->moe_hybridep_num_sms +
           (c->moe_hybridep_permute_fusion ? c->moe_hybridep_num_blocks_permute : 0);
}

const ep_dispatcher ep_disp_hybridep = {.node_bytes = 1,
                                      .thd_padded = 1,
                                      .kernel_sms = kernel_sms,
                                      .metadata = metadata,
                                      .dispatch = gen_dispatch_a2a,
                                      .permute = permute,
                                      .unpermute = unpermute,
                                      .combine = gen_combine_a2a};
