/* disp_allgather: Megatron-LM's MoEAllGatherTokenDispatcher - every rank gathers the group's
 * tokens (NCCL needs one size: the group's largest count), permutes the ones its experts take, and
 * the combine is a reduce-scatter (docs/schedule.md, "Layers"). */
#include "sched_gen.h"

static void dispatch(gen *g, const moe_rows *r) {
    gen_coll(g, "dispatch", EP_OP_ALL_GATHER, g->rb->g_ep, r->tmax * g->R);
}

static void permute(gen *g, const moe_rows *r) {
    gen_mem(g, "permute", EP_OP_PERMUTE,
            (g->rb->ep_size * r->tmax + gen_permuted_rows(g->cfg, r)) * g->R);
}

static void unpermute(gen *g, const moe_rows *r) {
    gen_mem(g, "unpermute", EP_OP_UNPERMUTE,
            (gen_permuted_rows(g->cfg, r) + g->rb->ep_size * r->tmax) * g->R);
}

static void combine(gen *g, const moe_rows *r) {
    gen_coll(g, "combine", EP_OP_REDUCE_SCATTER, g->rb->g_ep, g->rb->ep_size * r->tmax * g->R);
}

const ep_dispatcher ep_disp_allgather = {.dispatch = dispatch,
                                       .permute = permute,
                                       .unpermute = unpermute,
                                       .combine = combine};
