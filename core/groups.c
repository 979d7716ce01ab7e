/* groups: process groups of a parallel layout, in Megatron-LM's rank order.
 *
 * Dense rank = tp + TP*(cp + CP*(dp + DP*pp)); expert rank = etp + ETP*(ep + EP*(edp + EDP*pp)).
 * Both orders cover the same TP*CP*DP ranks per pipeline stage, so a rank has coordinates in both.
 * A group is the set of ranks that agree on its fixed coordinates; members are listed in ascending
 * rank order, which is also the order of the varying coordinates (mixed radix).
 * HSDP (docs/schedule.md, section 7): N instances split DP (and expert DP) into N blocks of consecutive
 * indices; inner = one block, outer = the same position in every block.
 */
#include "ep_groups.h"

typedef struct {
    int tp, cp, dp, pp, etp, ep, edp, n;
} layout;

static layout get_layout(const ep_config *cfg) {
    layout l;
    l.tp = cfg->tensor_model_parallel_size;
    l.cp = cfg->context_parallel_size;
    l.pp = cfg->pipeline_model_parallel_size;
    l.dp = cfg->data_parallel_size;
    l.etp = cfg->expert_tensor_parallel_size;
    l.ep = cfg->expert_model_parallel_size;
    l.edp = ep_config_expert_data_parallel(cfg);
    l.n = cfg->num_distributed_optimizer_instances;
    return l;
}

static void coords(const layout *l, int rank, ep_coords *c) {
    int stage = l->tp * l->cp * l->dp;
    int in = rank % stage;
    c->pp = rank / stage;
    c->tp = in % l->tp;
    c->cp = (in / l->tp) % l->cp;
    c->dp = in / (l->tp * l->cp);
    c->etp = in % l->etp;
    c->ep = (in / l->etp) % l->ep;
    c->edp = in / (l->etp * l->ep);
}

void ep_rank_coords(const ep_config *cfg, int rank, ep_coords *dense, ep_coords *expert) {
    layout l = get_layout(cfg);
    ep_coords c;
    coords(&l, rank, &c);
    if (dense) *dense = c;
    if (expert) *expert = c;
}

/* Whether rank b is in a's group of `kind`. */
static int same_group(const layout *l, ep_group_kind kind, const ep_coords *a, const ep_coords *b) {
    int dpb = l->dp % l->n == 0 ? l->dp / l->n : l->dp;     /* DP indices per HSDP block */
    int edpb = l->edp % l->n == 0 ? l->edp / l->n : l->edp; /* expert-DP indices per block */
    switch (kind) {
    case EP_GROUP_WORLD:
        return 1;
    case EP_GROUP_TP:
        return a->cp == b->cp && a->dp == b->dp && a->pp == b->pp;
    case EP_GROUP_CP:
        return a->tp == b->tp && a->dp == b->dp && a->pp == b->pp;
    case EP_GROUP_PP:
        return a->tp == b->tp && a->cp == b->cp && a->dp == b->dp;
    case EP_GROUP_EP:
        return a->etp == b->etp && a->edp == b->edp && a->pp == b->pp;
    case EP_GROUP_TPEP:
        return a->edp == b->edp && a->pp == b->pp;
    case EP_GROUP_ETP:
        return a->ep == b->ep && a->edp == b->edp && a->pp == b->pp;
    case EP_GROUP_DP:
        return a->tp == b->tp && a->pp == b->pp;
    case EP_GROUP_DP_INNER:
        return a->tp == b->tp && a->pp == b->pp && a->dp / dpb == b->dp / dpb;
    case EP_GROUP_DP_OUTER:
        return a->tp == b->tp && a->cp == b->cp && a->pp == b->pp && a->dp % dpb == b->dp % dpb;
    case EP_GROUP_EDP:
        return a->etp == b->etp && a->ep == b->ep && a->pp == b->pp;
    case EP_GROUP_EDP_INNER:
        return a->etp == b->etp && a->ep == b->ep && a->pp == b->pp &&
               a->edp / edpb == b->edp / edpb;
    case EP_GROUP_EDP_OUTER:
        return a->etp == b->etp && a->ep == b->ep && a->pp == b->pp &&
               a->edp % edpb == b->edp % edpb;
    case EP_GROUP_P2P: /* pairs are formed by the schedule, not by the layout */
    case EP_GROUP_NUM_KINDS:
        break;
    }
    return 0;
}

int ep_group_members(const ep_config *cfg, ep_group_kind kind, int rank, int *out) {
    layout l = get_layout(cfg);
    long world = (long)l.tp * l.cp * l.dp * l.pp;
    if (kind == EP_GROUP_P2P || kind < 0 || kind >= EP_GROUP_NUM_KINDS || rank < 0 || rank >= world)
        return 0;
    ep_coords a, b;
    coords(&l, rank, &a);
    /* Only WORLD and PP groups cross pipeline stages; the others stay inside rank's stage. */
    int stage = l.tp * l.cp * l.dp, lo = 0, hi = (int)world;
    if (kind != EP_GROUP_WORLD && kind != EP_GROUP_PP) {
        lo = a.pp * stage;
        hi = lo + stage;
    }
    int n = 0;
    for (int r = lo; r < hi; r++) {
        coords(&l, r, &b);
        if (same_group(&l, kind, &a, &b)) out[n++] = r;
    }
    return n;
}

const char *ep_group_kind_name(ep_group_kind k) {
    static const char *const names[EP_GROUP_NUM_KINDS] = {
        "world", "tp",       "cp",       "pp",  "ep",        "tpep",      "etp",
        "dp",    "dp_inner", "dp_outer", "edp", "edp_inner", "edp_outer", "p2p"};
    return k >= 0 && k < EP_GROUP_NUM_KINDS ? names[k] : "?";
}
