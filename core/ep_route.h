/* ep_route: seeded token->expert routing and the traffic it causes, per microbatch and layer.
 *
 * The same (seed, microbatch, layer, EP group) gives the same routing in epsim and epref, in any
 * order of calls: each draw seeds its own generator from a hash of those four numbers.
 * Distributions: uniform (k distinct experts), Zipf (expert popularity ~ 1/rank^s, a per-layer
 * permutation decides which experts are hot), group-limited (DeepSeek: pick group_topk of
 * num_groups groups by the sum of each group's top-2 scores, then top-k experts inside them).
 * Counting rules (docs/routing.md): alltoall sends one copy of a token per destination
 * *rank*; deepep/hybridep send one copy per destination *node* over RDMA, then fan out over NVLink.
 */
#ifndef EP_ROUTE_H
#define EP_ROUTE_H

#include <stdint.h>
#include "ep_config.h"

/* Deterministic 64-bit generator (splitmix64 seeding, xoshiro256** stream). */
typedef struct {
    uint64_t s[4];
} ep_rng;
void ep_rng_seed(ep_rng *r, uint64_t seed);
uint64_t ep_rng_next(ep_rng *r);
double ep_rng_uniform(ep_rng *r); /* [0,1) */
double ep_rng_normal(ep_rng *r);
uint64_t ep_hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d);

/* Routing of one EP group for one (microbatch, layer). Arrays are owned by the struct. */
typedef struct {
    int ep; /* group size */
    int num_experts;
    int experts_per_rank;
    int topk;
    int nnodes;   /* distinct nodes among the group's ranks */
    int *node_of; /* [ep] node index (0..nnodes-1) of each member */
    int *tokens;  /* [ep] tokens held by each member (uneven under THD) */
    /* choices[r] is tokens[r] x topk expert ids; kept only when keep_choices was set */
    int32_t **choices;
    int64_t *tokens_per_expert; /* [E] selections received by each expert */
    int64_t *sel;               /* [ep*E] selections from src member to expert */
    int64_t *rank_tokens;       /* [ep*ep] token copies src->dst, one per destination rank */
    int64_t *node_tokens;       /* [ep*nnodes] token copies src->node, one per destination node */
    int64_t selections;         /* sum of sel: tokens*topk less capacity drops plus padding */
} ep_routing;

/* Draws routing for the EP group whose global ranks are group_ranks[0..ep) holding tokens[i]
 * tokens each (ep = cfg->expert_model_parallel_size). cfg->gpus_per_node maps ranks to nodes
 * (<= 0: one node). keep_choices keeps per-token expert ids (epref uses them for real kernels;
 * epsim does not need them). Returns 0, or -1 when the routing settings are unusable (no experts,
 * EP not dividing them, top-k or group settings out of range) or memory runs out. */
int ep_route_draw(const ep_config *cfg, int microbatch, int layer, int group_index,
                  const int *group_ranks, const int *tokens, int keep_choices, ep_routing *out);
void ep_routing_free(ep_routing *r);
/* --moe-expert-capacity-factor F: the (token, expert) selections one member may send each expert,
 * ceil(tokens x top-k / experts x F) (Megatron-LM's get_capacity, at least 1); 0 without F.
 * ep_route_draw drops a member's selections beyond it in token order (both drop policies keep the
 * same count per expert; which tokens differs, so only the per-rank deduplication of copies can),
 * and with --moe-pad-expert-input-to-capacity fills every expert up to it. */
int64_t ep_route_capacity(const ep_config *cfg, int tokens);
/* The nodes of a group's ranks (rank / gpus_per_node; <= 0: one node), numbered 0.. in order of
 * first appearance into node_of[0..ep); returns their count. ep_route_draw numbers them so. */
int ep_route_nodes(const int *group_ranks, int ep, int gpus_per_node, int *node_of);

/* Draws one token's top-k experts (distinct, unordered) with the configured distribution from
 * rng into out[topk]; `hot` is the layer's popularity permutation (ep_route_hot; NULL = identity,
 * which is all uniform routing needs). Exposed so epref's CPU reference can reproduce a draw: with
 * the generator seeded by ep_route_member_seed it yields exactly ep_route_draw's choices. Builds
 * the layer table on each call (O(E)); loops should use ep_route_table_*. Out of memory or unusable
 * settings: out[] is filled with -1. */
void ep_route_token(const ep_config *cfg, ep_rng *rng, const int *hot, int32_t *out);

#define EP_ROUTE_MAX_EXPERTS 8192
#define EP_ROUTE_MAX_GROUPS  256

/* A layer's popularity permutation: hot[i] is the expert with the i-th largest popularity
 * (Zipf weight 1/(i+1)^s). Depends on (seed, layer) only, so the same experts are hot in every
 * microbatch and EP group of a layer. hot has num_experts entries. */
void ep_route_hot(const ep_config *cfg, int layer, int *hot);

/* Seed of the generator of EP-group member `member` for one (microbatch, layer, group). */
uint64_t ep_route_member_seed(const ep_config *cfg, int microbatch, int layer, int group_index,
                              int member);

/* Sampling tables of one layer: expert weights and per-group alias tables (docs/routing.md). */
typedef struct {
    ep_route_dist dist;
    int num_experts;
    int topk;
    int num_groups;       /* 1 unless group-limited */
    int group_topk;       /* groups kept per token (group-limited) */
    int group_size;       /* experts per group */
    int uniform;          /* all weights equal: alias lookups skipped */
    int *hot;             /* [E] popularity permutation */
    double *weight;       /* [E] popularity of each expert (unnormalised) */
    double *group_weight; /* [num_groups] */
    double *alias_prob;   /* [E] Vose alias table of each group, by position in the group */
    int *alias;           /* [E] alias expert id */
} ep_route_table;

/* Builds the table for (cfg, layer) from ep_route_hot, or from `hot` when it is non-NULL.
 * Returns 0, or -1 with nothing allocated when the settings are unusable or memory runs out. */
int ep_route_table_build(const ep_config *cfg, int layer, const int *hot, ep_route_table *t);
void ep_route_table_free(ep_route_table *t);
/* One token's top-k experts (distinct) into out[topk]. */
void ep_route_table_token(const ep_route_table *t, ep_rng *rng, int32_t *out);

/* Rows each local expert holds after padding to `multiple` (1 = none): sum of ceil(n/p)*p. */
int64_t ep_route_padded_rows(const int64_t *tokens_per_expert, int n_experts, int multiple);

/* Rows received by member `dst`: token copies (sum over src of rank_tokens[src][dst], the
 * dispatch traffic), and the rows its local experts compute on after permute (one per
 * (token, local expert) pair) with each local expert padded to `multiple` (1 = none). */
int64_t ep_route_recv_rows(const ep_routing *r, int dst);
int64_t ep_route_recv_padded_rows(const ep_routing *r, int dst, int multiple);

/* THD: tokens a rank holds in one microbatch, packing sequences drawn from the configured length
 * distribution into seq_length * micro_batch_size (deterministic in seed, microbatch, rank).
 * Greedy: sequences are added until the next one does not fit; the result is in (0, capacity].
 * Lognormal lengths use sigma EP_THD_LOGNORMAL_SIGMA (docs/routing.md). */
#define EP_THD_LOGNORMAL_SIGMA 0.8
int ep_thd_tokens(const ep_config *cfg, int microbatch, int rank);

/* One sequence length of the configured distribution, clamped to [max(seqlen_min,1), seq_length].
 */
int ep_thd_seqlen(const ep_config *cfg, ep_rng *rng);

/* Hybridep's THD rule: group maximum rounded up to a multiple of 64. */
int ep_thd_padded_max(const int *tokens, int n);

#endif
