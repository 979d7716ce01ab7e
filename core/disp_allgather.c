/* disp_allgather: Megatron-LM's MoEAllGatherTokenDispatcher - every rank gathers the group's
 * tokens (NCCL needs one size: the group's largest count), permutes the ones its experts take, and
 * the combine is a reduce-scatter (docs/schedule.md, "Layers"). The group is TP x EP (Megatron's
 * tp_ep_group): with ETP > 1 the expert-TP ranks gather each other's tokens in the same collective.
 */
#include "sched_gen.h"

/* The gathering group: the EP group, or TP x EP with ETP > 1 */
static int group(const gen *g) {
    return g->rb->g_etp >= 0 ? g->rb->g_tpep : g->rb->g_ep;
}

/* ... and its members (etp_size is 1 without expert TP) */
static int members(const gen *g) {
    return g->rb->ep_size * g->rb->etp_size;
}

static void dispatch(gen *g, const moe_rows *r) {
    gen_coll(g, "dispatch", EP_OP_ALL_GATHER, group(g), r->tmax * g->R);
}

static void permute(gen *g, const moe_rows *r) {
    gen_mem(g, "permute", EP_OP_PERMUTE,
            (members(g) * r->tmax + gen_permuted_rows(g->cfg, r)) * g->R);
}

static void unpermute(gen *g, const moe_rows *r) {
    gen_mem(g, "unpermute", EP_OP_UNPERMUTE,
            (gen_permuted_rows(g->cfg, r) + members(g) * r->tmax) * g->R);
}

static void combine(gen *g, const moe_rows *r) {
    gen_coll(g, "combine", EP_OP_REDUCE_SCATTER, group(g), members(g) * r->tmax * g->R);
}

const ep_dispatcher ep_disp_allgather = {.tpep_gather = 1,
                                         .dispatch = dispatch,
                                         .permute = permute,
                                         .unpermute = unpermute,
                                         .combine = combine};
