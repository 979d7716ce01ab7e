/* ep_route: seeded token->expert routing and the traffic it causes, per microbatch and layer.
 *
 * The same (seed, microbatch, layer, EP group) gives the same routing in epsim and epref, in any
 * order of calls: each draw seeds its own generator from a hash of those four numbers.
 * Distributions: uniform (k distinct experts), Zipf (expert popularity ~ 1/rank^s, a per-layer
 * permutation decides which experts are hot), group-limited (DeepSeek: pick group_topk of
 * num_groups groups by the sum of each group's top-2 scores, then top-k experts inside them).
 * Counting rules (FIELD_NOTES section 1): alltoall sends one copy of a token per destination *rank*;
 * deepep/hybridep send one copy per destination *node* over RDMA, then fan out over NVLink.
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
    int ep;             /* group size */
    int num_experts;
    int experts_per_rank;
    int topk;
    int nnodes;         /* distinct nodes among the group's ranks */
    int *node_of;       /* [ep] node index (0..nnodes-1) of each member */
    int *tokens;        /* [ep] tokens held by each member (uneven under THD) */
    /* choices[r] is tokens[r] x topk expert ids; kept only when keep_choices was set */
    int32_t **choices;
    int64_t *tokens_per_expert;  /* [E] selections received by each expert */
    int64_t *sel;                /* [ep*E] selections from src member to expert */
    int64_t *rank_tokens;        /* [ep*ep] token copies src->dst, one per destination rank */
    int64_t *node_tokens;        /* [ep*nnodes] token copies src->node, one per destination node */
    int64_t selections;          /* sum of tokens*topk */
} ep_routing;

/* Draws routing for the EP group whose global ranks are group_ranks[0..ep) holding tokens[i]
 * tokens each. gpus_per_node maps ranks to nodes. keep_choices keeps per-token expert ids
 * (epref uses them for real kernels; epsim does not need them). Returns 0 or -1 (out of memory). */
int ep_route_draw(const ep_config *cfg, int microbatch, int layer, int group_index,
                  const int *group_ranks, const int *tokens, int keep_choices, ep_routing *out);
void ep_routing_free(ep_routing *r);

/* Draws one token's top-k experts (distinct, unordered) with the configured distribution from
 * rng into out[topk]; `hot` is the layer's popularity permutation (NULL for uniform). Exposed so
 * epref's CPU reference can reproduce a draw. */
void ep_route_token(const ep_config *cfg, ep_rng *rng, const int *hot, int32_t *out);

/* Rows each local expert holds after padding to `multiple` (1 = none): sum of ceil(n/p)*p. */
int64_t ep_route_padded_rows(const int64_t *tokens_per_expert, int n_experts, int multiple);

/* Rows received by member `dst` (sum over src of rank_tokens[src][dst]) and the padded row count
 * of its local experts. */
int64_t ep_route_recv_rows(const ep_routing *r, int dst);
int64_t ep_route_recv_padded_rows(const ep_routing *r, int dst, int multiple);

/* THD: tokens a rank holds in one microbatch, packing sequences drawn from the configured length
 * distribution into seq_length * micro_batch_size (deterministic in seed, microbatch, rank). */
int ep_thd_tokens(const ep_config *cfg, int microbatch, int rank);

/* Hybridep's THD rule: group maximum rounded up to a multiple of 64. */
int ep_thd_padded_max(const int *tokens, int n);

#endif
