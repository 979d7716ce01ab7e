/* route: seeded token->expert routing of one EP group and the traffic it causes (docs/routing.md).
 *
 * Every distribution is top-k of Gumbel-perturbed log popularity, sampled without drawing E scores
 * per token: score_e = log w_e + Gumbel is the same as an arrival time T_e = exp(-score_e) that is
 * exponential with rate w_e, so the k best experts are the first k arrivals of an exponential race,
 * i.e. k successive draws without replacement proportional to w (alias table + rejection of experts
 * already taken). Group-limited routing runs one race per group: the first two arrival times of a
 * group give its score (sum of its top-2 scores = -log(T1*T2)), and the kept groups' races are then
 * merged until k experts have arrived. Cost per token: O(k) uniform/Zipf, O(groups + k) grouped.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_route.h"

/* Domain tags keep the hash inputs of different draws apart. */
#define TAG_HOT      0x686f74ULL /* "hot" */
#define TAG_MEMBER   0x6d656dULL /* "mem" */
#define REJECT_TRIES 8           /* rejections before an exact draw over the remaining experts */

void ep_route_hot(const ep_config *cfg, int layer, int *hot) {
    int n = cfg->num_experts;
    ep_rng r;
    ep_rng_seed(&r, ep_hash4(cfg->seed, (uint64_t)(int64_t)layer, TAG_HOT, 0));
    for (int i = 0; i < n; i++)
        hot[i] = i;
    for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(((ep_rng_next(&r) >> 32) * (uint64_t)(i + 1)) >> 32);
        int t = hot[i];
        hot[i] = hot[j];
        hot[j] = t;
    }
}

uint64_t ep_route_member_seed(const ep_config *cfg, int microbatch, int layer, int group_index,
                              int member) {
    uint64_t h = ep_hash4(cfg->seed, (uint64_t)(int64_t)microbatch, (uint64_t)(int64_t)layer,
                          (uint64_t)(int64_t)group_index);
    return ep_hash4(h, (uint64_t)(int64_t)member, TAG_MEMBER, 0);
}

void ep_route_table_free(ep_route_table *t) {
    free(t->hot);
    free(t->weight);
    free(t->group_weight);
    free(t->alias_prob);
    free(t->alias);
    memset(t, 0, sizeof *t);
}

/* Vose's alias method over the n experts base..base+n-1. */
static int build_alias(ep_route_table *t, int base, int n) {
    double *scaled = malloc((size_t)n * sizeof *scaled);
    int *small = malloc((size_t)n * sizeof *small);
    int *large = malloc((size_t)n * sizeof *large);
    if (!scaled || !small || !large) {
        free(scaled);
        free(small);
        free(large);
        return -1;
    }
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += t->weight[base + i];
    int ns = 0, nl = 0;
    for (int i = 0; i < n; i++) {
        scaled[i] = t->weight[base + i] * n / sum;
        if (scaled[i] < 1.0)
            small[ns++] = i;
        else
            large[nl++] = i;
    }
    while (ns && nl) {
        int s = small[--ns], l = large[--nl];
        t->alias_prob[base + s] = scaled[s];
        t->alias[base + s] = base + l;
        scaled[l] -= 1.0 - scaled[s];
        if (scaled[l] < 1.0)
            small[ns++] = l;
        else
            large[nl++] = l;
    }
    while (nl) { /* what is left is 1 up to rounding */
        int l = large[--nl];
        t->alias_prob[base + l] = 1.0;
        t->alias[base + l] = base + l;
    }
    while (ns) {
        int s = small[--ns];
        t->alias_prob[base + s] = 1.0;
        t->alias[base + s] = base + s;
    }
    free(scaled);
    free(small);
    free(large);
    return 0;
}

int ep_route_table_build(const ep_config *cfg, int layer, const int *hot, ep_route_table *t) {
    memset(t, 0, sizeof *t);
    int E = cfg->num_experts, k = cfg->moe_router_topk;
    if (E < 1 || E > EP_ROUTE_MAX_EXPERTS || k < 1 || k > E) return -1;
    double s = cfg->route_zipf_s;
    /* uniform draws, or forced balance (random router scores): no expert more popular */
    if (cfg->route_dist == EP_ROUTE_UNIFORM || cfg->moe_router_force_load_balancing || !(s > 0.0))
        s = 0.0;
    if (s > 0.0 && !isfinite(s)) return -1;
    t->dist = cfg->route_dist;
    t->num_experts = E;
    t->topk = k;
    t->num_groups = 1;
    t->group_topk = 1;
    if (cfg->route_dist == EP_ROUTE_GROUP_LIMITED) {
        int g = cfg->moe_router_num_groups, gk = cfg->moe_router_group_topk;
        if (g < 1 || g > EP_ROUTE_MAX_GROUPS || E % g != 0 || gk < 1 || gk > g ||
            (int64_t)gk * (E / g) < k)
            return -1;
        t->num_groups = g;
        t->group_topk = gk;
    }
    t->group_size = E / t->num_groups;
    t->uniform = s == 0.0;
    t->hot = malloc((size_t)E * sizeof *t->hot);
    t->weight = malloc((size_t)E * sizeof *t->weight);
    t->group_weight = malloc((size_t)t->num_groups * sizeof *t->group_weight);
    t->alias_prob = malloc((size_t)E * sizeof *t->alias_prob);
    t->alias = malloc((size_t)E * sizeof *t->alias);
    if (!t->hot || !t->weight || !t->group_weight || !t->alias_prob || !t->alias) {
        ep_route_table_free(t);
        return -1;
    }
    if (hot)
        memcpy(t->hot, hot, (size_t)E * sizeof *hot);
    else
        ep_route_hot(cfg, layer, t->hot);
    for (int i = 0; i < E; i++)
        t->weight[t->hot[i]] = s == 0.0 ? 1.0 : pow((double)(i + 1), -s);
    for (int g = 0; g < t->num_groups; g++) {
        double w = 0;
        for (int i = 0; i < t->group_size; i++)
            w += t->weight[g * t->group_size + i];
        t->group_weight[g] = w;
        if (build_alias(t, g * t->group_size, t->group_size) != 0) {
            ep_route_table_free(t);
            return -1;
        }
    }
    return 0;
}

/* --- one token ------------------------------------------------------------------------------- */

typedef struct {
    uint64_t taken[EP_ROUTE_MAX_EXPERTS / 64];
} token_scratch;

static int is_taken(const token_scratch *sc, int e) {
    return (int)((sc->taken[e >> 6] >> (e & 63)) & 1u);
}

static void take(token_scratch *sc, int e) {
    sc->taken[e >> 6] |= 1ULL << (e & 63);
}

/* Exp(1) from one generator output; never infinite. */
static double exp1(ep_rng *rng) {
    return -log((double)((ep_rng_next(rng) >> 11) + 1) * 0x1.0p-53);
}

/* Remaining weight of group g, summed afresh (used when subtraction has lost precision). */
static double group_rest(const ep_route_table *t, const token_scratch *sc, int g) {
    double w = 0;
    for (int i = 0; i < t->group_size; i++) {
        int e = g * t->group_size + i;
        if (!is_taken(sc, e)) w += t->weight[e];
    }
    return w;
}

/* One expert of group g, not yet taken, with probability proportional to its weight. */
static int draw_in_group(const ep_route_table *t, ep_rng *rng, const token_scratch *sc, int g) {
    int n = t->group_size, base = g * n;
    for (int a = 0; a < REJECT_TRIES; a++) {
        uint64_t x = ep_rng_next(rng);
        int m = (int)(((x >> 32) * (uint64_t)n) >> 32); /* high bits pick the slot */
        int slot = base + m, alias = t->alias[slot];
        /* low bits toss the alias coin (equal weights: probability 1); a select, not a branch */
        int e = (double)(uint32_t)x * 0x1.0p-32 < t->alias_prob[slot] ? slot : alias;
        if (!is_taken(sc, e)) return e;
    }
    /* Most of the group's weight is taken: draw exactly over what is left. */
    double u = ep_rng_uniform(rng) * group_rest(t, sc, g);
    int last = -1;
    for (int i = 0; i < n; i++) {
        int e = base + i;
        if (is_taken(sc, e)) continue;
        last = e;
        u -= t->weight[e];
        if (u < 0) return e;
    }
    return last;
}

static void token_plain(const ep_route_table *t, ep_rng *rng, token_scratch *sc, int32_t *out) {
    for (int j = 0; j < t->topk; j++) {
        int e = draw_in_group(t, rng, sc, 0);
        take(sc, e);
        out[j] = e;
    }
}

/* Group-limited: per group, the first two arrivals of its race score it; the group_topk groups
 * with the smallest T1*T2 are kept; their races are merged until topk experts have arrived.
 * With equal weights an arrival's time does not depend on which expert arrived, so identities are
 * drawn only for the kept groups. Comparisons are written branch-free: the keys are random, and
 * mispredicted branches would dominate the cost. */
static void token_grouped(const ep_route_table *t, ep_rng *rng, token_scratch *sc, int32_t *out) {
    int G = t->num_groups, n = t->group_size, gk = t->group_topk;
    double key[EP_ROUTE_MAX_GROUPS], t1[EP_ROUTE_MAX_GROUPS], t2[EP_ROUTE_MAX_GROUPS];
    double rest[EP_ROUTE_MAX_GROUPS];
    int e1[EP_ROUTE_MAX_GROUPS];
    for (int g = 0; g < G; g++) {
        rest[g] = t->group_weight[g];
        t1[g] = exp1(rng) / rest[g];
        if (t->uniform) {
            e1[g] = -1;
            rest[g] -= 1.0;
        } else {
            e1[g] = draw_in_group(t, rng, sc, g);
            take(sc, e1[g]);
            rest[g] -= t->weight[e1[g]];
            if (!(rest[g] > 1e-12 * t->group_weight[g])) rest[g] = group_rest(t, sc, g);
        }
        t2[g] = n >= 2 ? t1[g] + exp1(rng) / rest[g] : INFINITY;
        key[g] = n >= 2 ? t1[g] * t2[g] : t1[g];
    }
    /* Kept groups, in group order: those with fewer than gk smaller keys. Positive doubles order
     * like their bit patterns, so the group index goes into the low mantissa bits: ties break by
     * index and the rank count is plain integer compares (perturbs keys by 2^-44 relative). */
    uint64_t pk[EP_ROUTE_MAX_GROUPS];
    for (int g = 0; g < G; g++) {
        uint64_t bits;
        memcpy(&bits, &key[g], sizeof bits);
        pk[g] = (bits & ~(uint64_t)0xff) | (uint64_t)g;
    }
    int sel[EP_ROUTE_MAX_GROUPS], ns = 0;
    for (int g = 0; g < G; g++) {
        int better = 0;
        for (int h = 0; h < G; h++)
            better += pk[h] < pk[g];
        sel[ns] = g;
        ns += better < gk;
    }
    /* merge: head[s] is the next arrival of kept group s; hid[s] its expert once drawn */
    double head[EP_ROUTE_MAX_GROUPS];
    int hid[EP_ROUTE_MAX_GROUPS], popped[EP_ROUTE_MAX_GROUPS];
    for (int s = 0; s < gk; s++) {
        head[s] = t1[sel[s]];
        hid[s] = e1[sel[s]];
        popped[s] = 0;
    }
    for (int j = 0; j < t->topk; j++) {
        int b = 0;
        double m = head[0];
        for (int s = 1; s < gk; s++) {
            int less = head[s] < m;
            b = less ? s : b;
            m = less ? head[s] : m;
        }
        int g = sel[b], e = hid[b];
        if (e < 0) {
            e = draw_in_group(t, rng, sc, g);
            take(sc, e);
            if (popped[b] > 0 || !t->uniform) /* the uniform first arrival is already in rest */
                rest[g] -= t->weight[e];
        }
        out[j] = e;
        popped[b]++;
        hid[b] = -1;
        if (popped[b] == 1) {
            head[b] = t2[g];
        } else if (popped[b] >= n) {
            head[b] = INFINITY;
        } else {
            if (!(rest[g] > 1e-12 * t->group_weight[g])) rest[g] = group_rest(t, sc, g);
            head[b] += exp1(rng) / rest[g];
        }
    }
}

void ep_route_table_token(const ep_route_table *t, ep_rng *rng, int32_t *out) {
    token_scratch sc;
    memset(sc.taken, 0, (size_t)((t->num_experts + 63) / 64) * sizeof sc.taken[0]);
    if (t->dist == EP_ROUTE_GROUP_LIMITED)
        token_grouped(t, rng, &sc, out);
    else
        token_plain(t, rng, &sc, out);
}

void ep_route_token(const ep_config *cfg, ep_rng *rng, const int *hot, int32_t *out) {
    ep_route_table t;
    int *ident = NULL;
    if (!hot && cfg->num_experts > 0) {
        ident = malloc((size_t)cfg->num_experts * sizeof *ident);
        if (ident)
            for (int i = 0; i < cfg->num_experts; i++)
                ident[i] = i;
    }
    const int *h = hot ? hot : ident;
    if (!h || ep_route_table_build(cfg, 0, h, &t) != 0) {
        for (int j = 0; j < cfg->moe_router_topk; j++)
            out[j] = -1;
        free(ident);
        return;
    }
    ep_route_table_token(&t, rng, out);
    ep_route_table_free(&t);
    free(ident);
}

/* --- one EP group ---------------------------------------------------------------------------- */

void ep_routing_free(ep_routing *r) {
    if (r->choices) {
        for (int i = 0; i < r->ep; i++)
            free(r->choices[i]);
        free(r->choices);
    }
    free(r->node_of);
    free(r->tokens);
    free(r->tokens_per_expert);
    free(r->sel);
    free(r->rank_tokens);
    free(r->node_tokens);
    memset(r, 0, sizeof *r);
}

int ep_route_nodes(const int *group_ranks, int ep, int gpus_per_node, int *node_of) {
    int nnodes = 0;
    for (int i = 0; i < ep; i++) {
        int node = gpus_per_node > 0 ? group_ranks[i] / gpus_per_node : 0;
        int id = -1;
        for (int j = 0; j < i && id < 0; j++)
            if ((gpus_per_node > 0 ? group_ranks[j] / gpus_per_node : 0) == node) id = node_of[j];
        node_of[i] = id >= 0 ? id : nnodes++;
    }
    return nnodes;
}

int64_t ep_route_capacity(const ep_config *cfg, int tokens) {
    if (!(cfg->moe_expert_capacity_factor > 0) || cfg->num_experts < 1) return 0;
    double c = ceil((double)tokens * cfg->moe_router_topk / cfg->num_experts *
                    cfg->moe_expert_capacity_factor);
    return c < 1 ? 1 : (int64_t)c;
}

/* --moe-pad-expert-input-to-capacity: member src sends every expert exactly `cap` rows, one per
 * (token, expert) pair with dummy rows filling up (Megatron's static shapes: no deduplication). */
static void pad_to_capacity(ep_routing *r, int src, int64_t cap) {
    int E = r->num_experts, epr = r->experts_per_rank, nn = r->nnodes;
    int64_t *sel = r->sel + (size_t)src * E;
    for (int e = 0; e < E; e++) {
        r->tokens_per_expert[e] += cap - sel[e];
        sel[e] = cap;
    }
    for (int n = 0; n < nn; n++)
        r->node_tokens[(size_t)src * nn + n] = 0;
    for (int dst = 0; dst < r->ep; dst++) {
        r->rank_tokens[(size_t)src * r->ep + dst] = cap * epr;
        r->node_tokens[(size_t)src * nn + r->node_of[dst]] += cap * epr;
    }
}

int ep_route_draw(const ep_config *cfg, int microbatch, int layer, int group_index,
                  const int *group_ranks, const int *tokens, int keep_choices, ep_routing *out) {
    memset(out, 0, sizeof *out);
    int ep = cfg->expert_model_parallel_size, E = cfg->num_experts, k = cfg->moe_router_topk;
    if (ep < 1 || E < 1 || E % ep != 0) return -1;
    for (int i = 0; i < ep; i++)
        if (tokens[i] < 0) return -1;
    ep_route_table tab;
    if (ep_route_table_build(cfg, layer, NULL, &tab) != 0) return -1;
    out->ep = ep;
    out->num_experts = E;
    out->experts_per_rank = E / ep;
    out->topk = k;
    out->node_of = malloc((size_t)ep * sizeof *out->node_of);
    out->tokens = malloc((size_t)ep * sizeof *out->tokens);
    out->tokens_per_expert = calloc((size_t)E, sizeof *out->tokens_per_expert);
    out->sel = calloc((size_t)ep * E, sizeof *out->sel);
    out->rank_tokens = calloc((size_t)ep * ep, sizeof *out->rank_tokens);
    int32_t *buf = malloc((size_t)k * sizeof *buf);
    int64_t *stamp_rank = malloc((size_t)ep * sizeof *stamp_rank);
    int64_t *stamp_node = malloc((size_t)ep * sizeof *stamp_node);
    int ok = out->node_of && out->tokens && out->tokens_per_expert && out->sel &&
             out->rank_tokens && buf && stamp_rank && stamp_node;
    if (ok) {
        out->nnodes = ep_route_nodes(group_ranks, ep, cfg->gpus_per_node, out->node_of);
        out->node_tokens = calloc((size_t)ep * out->nnodes, sizeof *out->node_tokens);
        ok = out->node_tokens != NULL;
    }
    if (ok && keep_choices) {
        out->choices = calloc((size_t)ep, sizeof *out->choices);
        ok = out->choices != NULL;
        for (int i = 0; ok && i < ep; i++) {
            out->choices[i] = malloc(((size_t)tokens[i] * k + 1) * sizeof **out->choices);
            ok = out->choices[i] != NULL;
        }
    }
    if (!ok) {
        free(buf);
        free(stamp_rank);
        free(stamp_node);
        ep_route_table_free(&tab);
        ep_routing_free(out);
        return -1;
    }
    for (int i = 0; i < ep; i++) {
        out->tokens[i] = tokens[i];
        stamp_rank[i] = stamp_node[i] = -1;
    }
    int epr = E / ep, nn = out->nnodes;
    int64_t serial = 0; /* token number across the group: a stamp equal to it means "counted" */
    for (int src = 0; src < ep; src++) {
        ep_rng rng;
        ep_rng_seed(&rng, ep_route_member_seed(cfg, microbatch, layer, group_index, src));
        int64_t *sel = out->sel + (size_t)src * E;
        int64_t *rt = out->rank_tokens + (size_t)src * ep;
        int64_t *nt = out->node_tokens + (size_t)src * nn;
        int64_t cap = ep_route_capacity(cfg, tokens[src]);
        for (int tok = 0; tok < tokens[src]; tok++, serial++) {
            int32_t *c = keep_choices ? out->choices[src] + (size_t)tok * k : buf;
            ep_route_table_token(&tab, &rng, c);
            for (int j = 0; j < k; j++) {
                int e = c[j], dst = e / epr, node = out->node_of[dst];
                if (cap > 0 && sel[e] >= cap) continue; /* over capacity: dropped */
                sel[e]++;
                out->tokens_per_expert[e]++;
                if (stamp_rank[dst] != serial) {
                    stamp_rank[dst] = serial;
                    rt[dst]++;
                }
                if (stamp_node[node] != serial) {
                    stamp_node[node] = serial;
                    nt[node]++;
                }
            }
        }
        if (cap > 0 && cfg->moe_pad_expert_input_to_capacity) pad_to_capacity(out, src, cap);
        for (int e = 0; e < E; e++)
            out->selections += sel[e];
    }
    free(buf);
    free(stamp_rank);
    free(stamp_node);
    ep_route_table_free(&tab);
    return 0;
}

/* --- padded and received rows ---------------------------------------------------------------- */

int64_t ep_route_padded_rows(const int64_t *tokens_per_expert, int n_experts, int multiple) {
    int64_t rows = 0;
    for (int e = 0; e < n_experts; e++) {
        int64_t n = tokens_per_expert[e];
        rows += multiple > 1 ? (n + multiple - 1) / multiple * multiple : n;
    }
    return rows;
}

int64_t ep_route_recv_rows(const ep_routing *r, int dst) {
    int64_t rows = 0;
    for (int src = 0; src < r->ep; src++)
        rows += r->rank_tokens[(size_t)src * r->ep + dst];
    return rows;
}

int64_t ep_route_recv_padded_rows(const ep_routing *r, int dst, int multiple) {
    return ep_route_padded_rows(r->tokens_per_expert + (size_t)dst * r->experts_per_rank,
                                r->experts_per_rank, multiple);
}
