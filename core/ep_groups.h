/* ep_groups: the process groups of a parallel layout, with Megatron's rank order.
 *
 * Dense ranks are ordered tp-cp-dp-pp (TP fastest); expert ranks etp-ep-edp-pp, so an EP group is a
 * run of consecutive ranks (with TP=1) and expert-DP is strided by EP. HSDP (N instances) splits DP
 * (and expert-DP) into N inner groups of consecutive DP indices; the outer groups take one rank per
 * inner group at the same position. Example in docs/schedule.md, section 7.
 */
#ifndef EP_GROUPS_H
#define EP_GROUPS_H

#include "ep_config.h"

typedef enum {
    EP_GROUP_WORLD,
    EP_GROUP_TP,
    EP_GROUP_CP,
    EP_GROUP_PP,
    EP_GROUP_EP,
    EP_GROUP_TPEP,     /* TP x EP: where hybridep's THD all-reduce MAX runs */
    EP_GROUP_ETP,      /* expert TP: the ranks that split one EP rank's experts' FFN */
    EP_GROUP_DP,       /* dense data parallel (dp x cp) */
    EP_GROUP_DP_INNER, /* HSDP inner dense group */
    EP_GROUP_DP_OUTER, /* HSDP outer dense group */
    EP_GROUP_EDP,      /* expert data parallel */
    EP_GROUP_EDP_INNER,
    EP_GROUP_EDP_OUTER,
    EP_GROUP_P2P, /* a pipeline send/recv pair */
    EP_GROUP_NUM_KINDS
} ep_group_kind;

typedef struct {
    ep_group_kind kind;
    int size;
    int *ranks; /* global ranks, in group order */
} ep_group;

typedef struct {
    int tp, cp, dp, pp, ep, etp, edp;
} ep_coords;

/* Coordinates of a global rank in the dense and the expert layout. Both structs receive every
 * coordinate (tp, cp, dp, pp of the dense order and etp, ep, edp of the expert order); either
 * pointer may be NULL. Needs a validated config (data_parallel_size resolved). */
void ep_rank_coords(const ep_config *cfg, int rank, ep_coords *dense, ep_coords *expert);

/* The members of `kind`'s group that contains `rank` (ascending group order). Writes at most
 * world_size ranks to out and returns the group size. EP_GROUP_P2P is not a layout group (the
 * schedule pairs pipeline neighbours itself): it returns 0, as does a rank outside the world.
 * With one optimizer instance, DP_INNER equals DP and DP_OUTER is the rank alone (same for EDP). */
int ep_group_members(const ep_config *cfg, ep_group_kind kind, int rank, int *out);

const char *ep_group_kind_name(ep_group_kind k);

#endif
