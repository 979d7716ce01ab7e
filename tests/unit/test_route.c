/* Routing: seeded determinism, conservation of token copies, the uniform expectation, Zipf skew,
 * group limits, agreement with a direct Gumbel-top-k reference, padded and received rows. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_route.h"

static void route_cfg(ep_config *c, int experts, int topk, int ep, ep_route_dist dist, double s) {
    ep_config_defaults(c);
    c->num_experts = experts;
    c->moe_router_topk = topk;
    c->expert_model_parallel_size = ep;
    c->route_dist = dist;
    c->route_zipf_s = s;
    c->gpus_per_node = 8;
    c->seed = 2024;
}

static void fill(int *ranks, int *tokens, int ep, int t) {
    for (int i = 0; i < ep; i++) {
        ranks[i] = i;
        tokens[i] = t;
    }
}

static int same_routing(const ep_routing *a, const ep_routing *b) {
    int ep = a->ep, E = a->num_experts;
    if (ep != b->ep || E != b->num_experts || a->nnodes != b->nnodes) return 0;
    if (memcmp(a->tokens_per_expert, b->tokens_per_expert, (size_t)E * 8) ||
        memcmp(a->sel, b->sel, (size_t)ep * E * 8) ||
        memcmp(a->rank_tokens, b->rank_tokens, (size_t)ep * ep * 8) ||
        memcmp(a->node_tokens, b->node_tokens, (size_t)ep * a->nnodes * 8))
        return 0;
    if (a->choices && b->choices)
        for (int i = 0; i < ep; i++)
            if (memcmp(a->choices[i], b->choices[i], (size_t)a->tokens[i] * a->topk * 4)) return 0;
    return 1;
}

/* --- determinism ------------------------------------------------------------------------------ */

static void test_same_inputs_same_routing(void) {
    static const ep_route_dist dists[] = {EP_ROUTE_UNIFORM, EP_ROUTE_ZIPF, EP_ROUTE_GROUP_LIMITED};
    for (int d = 0; d < 3; d++) {
        ep_config c;
        route_cfg(&c, 32, 4, 4, dists[d], 1.1);
        c.moe_router_num_groups = 4;
        c.moe_router_group_topk = 2;
        int ranks[4], tok[4];
        fill(ranks, tok, 4, 300);
        ep_routing a, x, b;
        CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 1, 2, 0, ranks, tok, 1, &a), 0);
        /* other draws in between must not matter */
        CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 5, 1, ranks, tok, 0, &x), 0);
        ep_routing_free(&x);
        CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 1, 2, 0, ranks, tok, 1, &b), 0);
        CU_ASSERT_TRUE(same_routing(&a, &b));
        ep_routing_free(&b);
        /* without choices kept, the counts are the same */
        CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 1, 2, 0, ranks, tok, 0, &b), 0);
        CU_ASSERT_PTR_NULL(b.choices);
        CU_ASSERT_TRUE(same_routing(&a, &b));
        ep_routing_free(&b);
        ep_routing_free(&a);
    }
}

static void test_inputs_change_routing(void) {
    ep_config c;
    route_cfg(&c, 32, 4, 4, EP_ROUTE_UNIFORM, 0);
    int ranks[4], tok[4];
    fill(ranks, tok, 4, 200);
    ep_routing a, b;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 1, &a), 0);
    /* each of seed, microbatch, layer and group changes the draw */
    for (int v = 0; v < 4; v++) {
        ep_config c2 = c;
        if (v == 0) c2.seed++;
        CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c2, v == 1, v == 2, v == 3, ranks, tok, 1, &b), 0);
        CU_ASSERT_FALSE(same_routing(&a, &b));
        ep_routing_free(&b);
    }
    ep_routing_free(&a);
}

/* A member's tokens depend on its own seed only: other members' counts change nothing for it. */
static void test_members_independent(void) {
    ep_config c;
    route_cfg(&c, 64, 6, 4, EP_ROUTE_GROUP_LIMITED, 0.8);
    c.moe_router_num_groups = 8;
    c.moe_router_group_topk = 3;
    int ranks[4], tok[4] = {100, 50, 75, 20}, tok2[4] = {100, 0, 9, 300};
    fill(ranks, tok2, 0, 0);
    for (int i = 0; i < 4; i++)
        ranks[i] = i;
    ep_routing a, b;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 3, 1, 2, ranks, tok, 1, &a), 0);
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 3, 1, 2, ranks, tok2, 1, &b), 0);
    CU_ASSERT_EQUAL(memcmp(a.choices[0], b.choices[0], 100 * 6 * 4), 0);
    CU_ASSERT_EQUAL(memcmp(a.choices[2], b.choices[2], 9 * 6 * 4), 0);
    CU_ASSERT_EQUAL(b.tokens[1], 0);
    for (int e = 0; e < 64; e++)
        CU_ASSERT_EQUAL(b.sel[1 * 64 + e], 0);
    ep_routing_free(&a);
    ep_routing_free(&b);
}

/* ep_route_token with the member seed and the layer's hot permutation reproduces the draw. */
static void test_single_token_reproduces_draw(void) {
    static const ep_route_dist dists[] = {EP_ROUTE_UNIFORM, EP_ROUTE_ZIPF, EP_ROUTE_GROUP_LIMITED};
    for (int d = 0; d < 3; d++) {
        ep_config c;
        route_cfg(&c, 48, 5, 3, dists[d], 1.3);
        c.moe_router_num_groups = 6;
        c.moe_router_group_topk = 3;
        int ranks[3], tok[3];
        fill(ranks, tok, 3, 40);
        ep_routing r;
        CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 2, 7, 1, ranks, tok, 1, &r), 0);
        int hot[48];
        ep_route_hot(&c, 7, hot);
        ep_rng g;
        ep_rng_seed(&g, ep_route_member_seed(&c, 2, 7, 1, 2));
        int ok = 1;
        for (int t = 0; t < 40; t++) {
            int32_t out[5];
            ep_route_token(&c, &g, hot, out);
            ok &= memcmp(out, r.choices[2] + t * 5, sizeof out) == 0;
        }
        CU_ASSERT_TRUE(ok);
        ep_routing_free(&r);
    }
}

static void test_hot_permutation(void) {
    ep_config c;
    route_cfg(&c, 100, 2, 1, EP_ROUTE_ZIPF, 1);
    int a[100], b[100], seen[100] = {0};
    ep_route_hot(&c, 3, a);
    ep_route_hot(&c, 3, b);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    for (int i = 0; i < 100; i++)
        if (a[i] >= 0 && a[i] < 100) seen[a[i]]++;
    int perm = 1;
    for (int i = 0; i < 100; i++)
        perm &= seen[i] == 1;
    CU_ASSERT_TRUE(perm);
    ep_route_hot(&c, 4, b);
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0); /* another layer, other hot experts */
}

/* --- conservation ----------------------------------------------------------------------------- */

static void check_conservation(const ep_config *c, const int *ranks, const int *tok) {
    ep_routing r;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(c, 0, 1, 0, ranks, tok, 1, &r), 0);
    int ep = r.ep, E = r.num_experts, k = r.topk, epr = r.experts_per_rank;
    int64_t *rank_ref = calloc((size_t)ep * ep, 8), *node_ref = calloc((size_t)ep * r.nnodes, 8);
    int64_t *col = calloc((size_t)ep, 8);
    int distinct_ok = 1, range_ok = 1;
    int64_t sel_total = 0, rank_total = 0, node_total = 0;
    for (int s = 0; s < ep; s++) {
        for (int t = 0; t < r.tokens[s]; t++) {
            const int32_t *ch = r.choices[s] + (size_t)t * k;
            int seen_rank[64] = {0}, seen_node[64] = {0};
            for (int j = 0; j < k; j++) {
                range_ok &= ch[j] >= 0 && ch[j] < E;
                for (int i = 0; i < j; i++)
                    distinct_ok &= ch[i] != ch[j];
                int dst = ch[j] / epr, node = r.node_of[dst];
                if (!seen_rank[dst]++) rank_ref[s * ep + dst]++;
                if (!seen_node[node]++) node_ref[s * r.nnodes + node]++;
            }
        }
        int64_t row = 0;
        for (int e = 0; e < E; e++)
            row += r.sel[(size_t)s * E + e];
        CU_ASSERT_EQUAL(row, (int64_t)r.tokens[s] * k);
        sel_total += row;
    }
    CU_ASSERT_TRUE(distinct_ok);
    CU_ASSERT_TRUE(range_ok);
    CU_ASSERT_EQUAL(memcmp(rank_ref, r.rank_tokens, (size_t)ep * ep * 8), 0);
    CU_ASSERT_EQUAL(memcmp(node_ref, r.node_tokens, (size_t)ep * r.nnodes * 8), 0);
    for (int e = 0; e < E; e++) {
        int64_t s = 0;
        for (int m = 0; m < ep; m++)
            s += r.sel[(size_t)m * E + e];
        CU_ASSERT_EQUAL(s, r.tokens_per_expert[e]);
    }
    /* sent (row sums) = received (column sums), and recv_rows is the column sum */
    int64_t sent = 0, recv = 0, recv_api = 0;
    for (int s = 0; s < ep; s++)
        for (int d = 0; d < ep; d++) {
            sent += r.rank_tokens[s * ep + d];
            col[d] += r.rank_tokens[s * ep + d];
        }
    for (int d = 0; d < ep; d++) {
        recv += col[d];
        recv_api += ep_route_recv_rows(&r, d);
        CU_ASSERT_EQUAL(ep_route_recv_rows(&r, d), col[d]);
        /* every received token copy becomes at least one expert row */
        CU_ASSERT_TRUE(ep_route_recv_padded_rows(&r, d, 1) >= col[d]);
    }
    CU_ASSERT_EQUAL(sent, recv);
    rank_total = sent;
    for (int i = 0; i < ep * r.nnodes; i++)
        node_total += r.node_tokens[i];
    CU_ASSERT_EQUAL(r.selections, sel_total);
    CU_ASSERT_TRUE(node_total <= rank_total);
    CU_ASSERT_TRUE(rank_total <= sel_total);
    CU_ASSERT_TRUE(node_total < sel_total); /* with k > 1 and few nodes, dedup must bite */
    free(rank_ref);
    free(node_ref);
    free(col);
    ep_routing_free(&r);
}

static void test_conservation(void) {
    static const ep_route_dist dists[] = {EP_ROUTE_UNIFORM, EP_ROUTE_ZIPF, EP_ROUTE_GROUP_LIMITED};
    int ranks[16], tok[16];
    for (int i = 0; i < 16; i++) {
        ranks[i] = 3 + 2 * i; /* spans 5 nodes of 8 GPUs, not aligned to node starts */
        tok[i] = 50 + 37 * i;
    }
    tok[5] = 0;
    for (int d = 0; d < 3; d++) {
        ep_config c;
        route_cfg(&c, 64, 8, 16, dists[d], 1.2);
        c.moe_router_num_groups = 8;
        c.moe_router_group_topk = 4;
        check_conservation(&c, ranks, tok);
    }
}

static void test_node_numbering(void) {
    ep_config c;
    route_cfg(&c, 8, 2, 4, EP_ROUTE_UNIFORM, 0);
    int ranks[4] = {9, 0, 8, 1}, tok[4] = {10, 10, 10, 10};
    ep_routing r;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), 0);
    CU_ASSERT_EQUAL(r.nnodes, 2);
    CU_ASSERT_EQUAL(r.node_of[0], 0);
    CU_ASSERT_EQUAL(r.node_of[1], 1);
    CU_ASSERT_EQUAL(r.node_of[2], 0);
    CU_ASSERT_EQUAL(r.node_of[3], 1);
    ep_routing_free(&r);
    c.gpus_per_node = 0; /* unknown: one node */
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), 0);
    CU_ASSERT_EQUAL(r.nnodes, 1);
    for (int s = 0; s < 4; s++)
        CU_ASSERT_EQUAL(r.node_tokens[s], 10); /* each token once to the single node */
    ep_routing_free(&r);
}

static void test_unusable_settings(void) {
    ep_config c;
    int ranks[4], tok[4];
    fill(ranks, tok, 4, 10);
    ep_routing r;
    route_cfg(&c, 30, 2, 4, EP_ROUTE_UNIFORM, 0); /* EP does not divide experts */
    CU_ASSERT_EQUAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), -1);
    route_cfg(&c, 8, 9, 4, EP_ROUTE_UNIFORM, 0); /* top-k above experts */
    CU_ASSERT_EQUAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), -1);
    route_cfg(&c, 0, 2, 1, EP_ROUTE_UNIFORM, 0); /* dense model */
    CU_ASSERT_EQUAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), -1);
    route_cfg(&c, 32, 8, 4, EP_ROUTE_GROUP_LIMITED, 0);
    c.moe_router_num_groups = 8; /* 1 group of 4 experts cannot hold 8 choices */
    c.moe_router_group_topk = 1;
    CU_ASSERT_EQUAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), -1);
    c.moe_router_num_groups = 5; /* does not divide 32 experts */
    c.moe_router_group_topk = 4;
    CU_ASSERT_EQUAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), -1);
    int32_t out[8];
    ep_route_token(&c, NULL, NULL, out); /* unusable: filled with -1, generator untouched */
    CU_ASSERT_EQUAL(out[0], -1);
    CU_ASSERT_EQUAL(out[7], -1);
}

/* --- distributions ---------------------------------------------------------------------------- */

static double choose(int n, int k) {
    double r = 1;
    for (int i = 0; i < k; i++)
        r = r * (n - i) / (i + 1);
    return r;
}

/* Mean per-peer copies = T * P(rank chosen), P = 1 - C(E - E/ep, k) / C(E, k); per node the same
 * with the node's experts. */
static void test_uniform_expectation(void) {
    enum { EP = 16, E = 128, K = 8, T = 4096 };
    ep_config c;
    route_cfg(&c, E, K, EP, EP_ROUTE_UNIFORM, 0);
    int ranks[EP], tok[EP];
    fill(ranks, tok, EP, T);
    ep_routing r;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), 0);
    double p_rank = 1.0 - choose(E - E / EP, K) / choose(E, K);
    double p_node = 1.0 - choose(E - 8 * E / EP, K) / choose(E, K);
    double worst = 0, total = 0;
    for (int i = 0; i < EP * EP; i++) {
        double rel = fabs(r.rank_tokens[i] / (T * p_rank) - 1.0);
        worst = rel > worst ? rel : worst;
        total += r.rank_tokens[i];
    }
    CU_ASSERT_TRUE(worst < 0.06); /* binomial sd ~1.7% per entry */
    CU_ASSERT_DOUBLE_EQUAL(total / (EP * EP), T * p_rank, 0.01 * T * p_rank);
    CU_ASSERT_EQUAL(r.nnodes, 2);
    double node_total = 0;
    for (int i = 0; i < EP * r.nnodes; i++)
        node_total += r.node_tokens[i];
    CU_ASSERT_DOUBLE_EQUAL(node_total / (EP * 2), T * p_node, 0.01 * T * p_node);
    /* experts evenly loaded */
    for (int e = 0; e < E; e++)
        CU_ASSERT_DOUBLE_EQUAL(r.tokens_per_expert[e], (double)EP * T * K / E,
                               0.06 * EP * T * K / E);
    ep_routing_free(&r);
}

static double max_over_mean(const ep_routing *r) {
    int64_t mx = 0, sum = 0;
    for (int e = 0; e < r->num_experts; e++) {
        sum += r->tokens_per_expert[e];
        mx = r->tokens_per_expert[e] > mx ? r->tokens_per_expert[e] : mx;
    }
    return (double)mx * r->num_experts / (double)sum;
}

/* --moe-expert-capacity-factor: no member sends an expert more than its capacity, the first
 * selections are kept in token order, a large factor changes nothing; padding fills every expert
 * to the capacity with one row per (token, expert) pair. */
static void test_capacity(void) {
    enum { EP = 4, E = 16, K = 4, T = 500 };
    int ranks[EP], tok[EP];
    fill(ranks, tok, EP, T);
    ep_config c;
    ep_routing free_r, cap_r, big_r, pad_r;
    route_cfg(&c, E, K, EP, EP_ROUTE_ZIPF, 1.2);
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 2, 0, ranks, tok, 0, &free_r), 0);
    c.moe_expert_capacity_factor = 1.0;
    int64_t cap = ep_route_capacity(&c, T);
    CU_ASSERT_EQUAL(cap, (T * K + E - 1) / E); /* ceil(500 x 4 / 16 x 1.0) = 125 */
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 2, 0, ranks, tok, 0, &cap_r), 0);
    int dropped = 0;
    for (int i = 0; i < EP * E; i++) {
        CU_ASSERT_EQUAL(cap_r.sel[i], free_r.sel[i] < cap ? free_r.sel[i] : cap);
        dropped |= free_r.sel[i] > cap;
    }
    CU_ASSERT_TRUE(dropped); /* Zipf routing overfills the hot experts */
    CU_ASSERT_TRUE(cap_r.selections < free_r.selections);
    c.moe_expert_capacity_factor = 100.0;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 2, 0, ranks, tok, 0, &big_r), 0);
    CU_ASSERT_EQUAL(memcmp(big_r.rank_tokens, free_r.rank_tokens, EP * EP * sizeof(int64_t)), 0);
    c.moe_expert_capacity_factor = 1.0;
    c.moe_pad_expert_input_to_capacity = 1;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 2, 0, ranks, tok, 0, &pad_r), 0);
    for (int i = 0; i < EP * E; i++)
        CU_ASSERT_EQUAL(pad_r.sel[i], cap);
    for (int i = 0; i < EP * EP; i++)
        CU_ASSERT_EQUAL(pad_r.rank_tokens[i], cap * (E / EP));
    for (int e = 0; e < E; e++)
        CU_ASSERT_EQUAL(pad_r.tokens_per_expert[e], EP * cap);
    ep_routing_free(&free_r);
    ep_routing_free(&cap_r);
    ep_routing_free(&big_r);
    ep_routing_free(&pad_r);
}

static void test_zipf_skew(void) {
    enum { EP = 8, E = 64 };
    int ranks[EP], tok[EP];
    fill(ranks, tok, EP, 2000);
    ep_config c;
    ep_routing u, z, z2;
    route_cfg(&c, E, 4, EP, EP_ROUTE_UNIFORM, 1.2);
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 3, 0, ranks, tok, 0, &u), 0);
    route_cfg(&c, E, 4, EP, EP_ROUTE_ZIPF, 1.2);
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 3, 0, ranks, tok, 0, &z), 0);
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 1, 3, 0, ranks, tok, 0, &z2), 0);
    CU_ASSERT_TRUE(max_over_mean(&u) < 1.2);
    CU_ASSERT_TRUE(max_over_mean(&z) > 3.0 * max_over_mean(&u));
    /* the hottest expert is hot[0] in every microbatch of the layer */
    int hot[E];
    ep_route_hot(&c, 3, hot);
    int arg = 0, arg2 = 0;
    for (int e = 1; e < E; e++) {
        if (z.tokens_per_expert[e] > z.tokens_per_expert[arg]) arg = e;
        if (z2.tokens_per_expert[e] > z2.tokens_per_expert[arg2]) arg2 = e;
    }
    CU_ASSERT_EQUAL(arg, hot[0]);
    CU_ASSERT_EQUAL(arg2, hot[0]);
    /* s = 0 is uniform popularity */
    ep_routing z0;
    route_cfg(&c, E, 4, EP, EP_ROUTE_ZIPF, 0);
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 3, 0, ranks, tok, 0, &z0), 0);
    CU_ASSERT_TRUE(max_over_mean(&z0) < 1.2);
    ep_routing_free(&u);
    ep_routing_free(&z);
    ep_routing_free(&z2);
    ep_routing_free(&z0);
}

static void test_group_limit(void) {
    int ranks[8], tok[8];
    fill(ranks, tok, 8, 500);
    for (int gk = 1; gk <= 3; gk++) {
        ep_config c;
        route_cfg(&c, 64, 8, 8, EP_ROUTE_GROUP_LIMITED, gk == 2 ? 1.0 : 0.0);
        c.moe_router_num_groups = 8;
        c.moe_router_group_topk = gk;
        ep_routing r;
        CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 1, &r), 0);
        int ok = 1, reached = 0;
        for (int s = 0; s < 8; s++)
            for (int t = 0; t < 500; t++) {
                int groups[8] = {0}, n = 0;
                for (int j = 0; j < 8; j++)
                    n += !groups[r.choices[s][t * 8 + j] / 8]++;
                ok &= n <= gk;
                reached |= n == gk;
            }
        CU_ASSERT_TRUE(ok);
        CU_ASSERT_TRUE(reached);
        ep_routing_free(&r);
    }
}

/* Reference: score every expert (log popularity + Gumbel), keep the group_topk groups with the
 * largest top-2 sums, take the k best experts in them. G = 1 is plain Gumbel-top-k (Zipf). */
static void reference_token(const double *logw, int E, int G, int gk, int k, ep_rng *g, int *out) {
    double sc[64], gs[64];
    int n = E / G, keep[64] = {0};
    for (int e = 0; e < E; e++)
        sc[e] = logw[e] - log(-log((double)((ep_rng_next(g) >> 11) + 1) * 0x1.0p-53));
    for (int q = 0; q < G; q++) {
        double a = -INFINITY, b = -INFINITY;
        for (int i = 0; i < n; i++) {
            double v = sc[q * n + i];
            if (v > a) {
                b = a;
                a = v;
            } else if (v > b) {
                b = v;
            }
        }
        gs[q] = n >= 2 ? a + b : a;
    }
    for (int s = 0; s < gk; s++) {
        int best = -1;
        for (int q = 0; q < G; q++)
            if (!keep[q] && (best < 0 || gs[q] > gs[best])) best = q;
        keep[best] = 1;
    }
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (keep[e / n] && (best < 0 || sc[e] > sc[best])) best = e;
        out[j] = best;
        sc[best] = -INFINITY;
    }
}

static void compare_with_reference(ep_route_dist dist, int G, int gk, int k, double s) {
    enum { E = 16, TOK = 60000 };
    ep_config c;
    route_cfg(&c, E, k, 1, dist, s);
    c.moe_router_num_groups = G;
    c.moe_router_group_topk = gk;
    int hot[E];
    ep_route_hot(&c, 0, hot);
    double logw[E];
    for (int i = 0; i < E; i++)
        logw[hot[i]] = -s * log(i + 1.0);
    int ranks[1] = {0}, tok[1] = {TOK};
    ep_routing r;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 1, &r), 0);
    double fa[E] = {0}, fb[E] = {0}, spread_a[5] = {0}, spread_b[5] = {0};
    ep_rng g;
    ep_rng_seed(&g, 99);
    int n = E / (dist == EP_ROUTE_GROUP_LIMITED ? G : 1);
    for (int t = 0; t < TOK; t++) {
        int out[8], ga[16] = {0}, gb[16] = {0}, na = 0, nb = 0;
        reference_token(logw, E, dist == EP_ROUTE_GROUP_LIMITED ? G : 1, gk, k, &g, out);
        for (int j = 0; j < k; j++) {
            fb[out[j]] += 1.0 / TOK;
            fa[r.choices[0][t * k + j]] += 1.0 / TOK;
            nb += !gb[out[j] / n]++;
            na += !ga[r.choices[0][t * k + j] / n]++;
        }
        spread_a[na < 4 ? na : 4] += 1.0 / TOK;
        spread_b[nb < 4 ? nb : 4] += 1.0 / TOK;
    }
    double worst = 0;
    for (int e = 0; e < E; e++)
        worst = fmax(worst, fabs(fa[e] - fb[e]));
    for (int i = 0; i < 5; i++)
        worst = fmax(worst, fabs(spread_a[i] - spread_b[i]));
    CU_ASSERT_TRUE(worst < 0.01); /* sampling sd of a difference <= 0.003 */
    ep_routing_free(&r);
}

static void test_matches_gumbel_reference(void) {
    compare_with_reference(EP_ROUTE_ZIPF, 1, 1, 3, 1.0);
    compare_with_reference(EP_ROUTE_ZIPF, 1, 1, 4, 2.5); /* heavy skew: exact fallback draws */
    compare_with_reference(EP_ROUTE_GROUP_LIMITED, 4, 2, 3, 0.0);
    compare_with_reference(EP_ROUTE_GROUP_LIMITED, 4, 2, 3, 1.2);
    compare_with_reference(EP_ROUTE_GROUP_LIMITED, 8, 3, 5, 2.0);
}

/* --- padded and received rows ----------------------------------------------------------------- */

static void test_padded_rows(void) {
    int64_t tpe[6] = {0, 1, 15, 16, 17, 100};
    CU_ASSERT_EQUAL(ep_route_padded_rows(tpe, 6, 1), 149);
    CU_ASSERT_EQUAL(ep_route_padded_rows(tpe, 6, 0), 149);
    CU_ASSERT_EQUAL(ep_route_padded_rows(tpe, 6, 16), 0 + 16 + 16 + 16 + 32 + 112);
    CU_ASSERT_EQUAL(ep_route_padded_rows(tpe, 6, 128), 5 * 128);
    CU_ASSERT_EQUAL(ep_route_padded_rows(tpe, 0, 16), 0);
}

static void test_recv_padded_rows(void) {
    ep_config c;
    route_cfg(&c, 16, 3, 4, EP_ROUTE_ZIPF, 1.0);
    int ranks[4], tok[4];
    fill(ranks, tok, 4, 77);
    ep_routing r;
    CU_ASSERT_EQUAL_FATAL(ep_route_draw(&c, 0, 0, 0, ranks, tok, 0, &r), 0);
    int64_t all = 0;
    for (int d = 0; d < 4; d++) {
        int64_t rows = 0, pad = 0;
        for (int e = 4 * d; e < 4 * d + 4; e++) {
            rows += r.tokens_per_expert[e];
            pad += (r.tokens_per_expert[e] + 15) / 16 * 16;
        }
        CU_ASSERT_EQUAL(ep_route_recv_padded_rows(&r, d, 1), rows);
        CU_ASSERT_EQUAL(ep_route_recv_padded_rows(&r, d, 16), pad);
        all += rows;
    }
    CU_ASSERT_EQUAL(all, r.selections);
    ep_routing_free(&r);
}

/* --- generator -------------------------------------------------------------------------------- */

static void test_rng(void) {
    ep_rng a, b;
    ep_rng_seed(&a, 42);
    ep_rng_seed(&b, 42);
    int same = 1;
    for (int i = 0; i < 100; i++)
        same &= ep_rng_next(&a) == ep_rng_next(&b);
    CU_ASSERT_TRUE(same);
    ep_rng_seed(&b, 43);
    CU_ASSERT_NOT_EQUAL(ep_rng_next(&a), ep_rng_next(&b));
    double sum = 0, sq = 0, lo = 1, hi = 0, nsum = 0, nsq = 0;
    enum { N = 200000 };
    for (int i = 0; i < N; i++) {
        double u = ep_rng_uniform(&a), z = ep_rng_normal(&a);
        sum += u;
        sq += u * u;
        lo = fmin(lo, u);
        hi = fmax(hi, u);
        nsum += z;
        nsq += z * z;
    }
    CU_ASSERT_TRUE(lo >= 0.0 && hi < 1.0);
    CU_ASSERT_DOUBLE_EQUAL(sum / N, 0.5, 0.005);
    CU_ASSERT_DOUBLE_EQUAL(sq / N - 0.25, 1.0 / 12, 0.002);
    CU_ASSERT_DOUBLE_EQUAL(nsum / N, 0.0, 0.01);
    CU_ASSERT_DOUBLE_EQUAL(nsq / N, 1.0, 0.02);
    /* hash: every position matters, order matters */
    uint64_t h = ep_hash4(1, 2, 3, 4);
    CU_ASSERT_EQUAL(h, ep_hash4(1, 2, 3, 4));
    CU_ASSERT_NOT_EQUAL(h, ep_hash4(2, 1, 3, 4));
    CU_ASSERT_NOT_EQUAL(h, ep_hash4(1, 2, 4, 3));
    CU_ASSERT_NOT_EQUAL(h, ep_hash4(1, 2, 3, 5));
    CU_ASSERT_NOT_EQUAL(ep_hash4(0, 0, 0, 0), ep_hash4(0, 0, 0, 1));
}

void ep_suite_route(void) {
    CU_pSuite s = CU_add_suite("route", NULL, NULL);
    CU_add_test(s, "rng and hash", test_rng);
    CU_add_test(s, "same inputs, same routing, any call order", test_same_inputs_same_routing);
    CU_add_test(s, "seed, microbatch, layer, group each change it", test_inputs_change_routing);
    CU_add_test(s, "members draw independently", test_members_independent);
    CU_add_test(s, "ep_route_token reproduces ep_route_draw", test_single_token_reproduces_draw);
    CU_add_test(s, "hot permutation per layer", test_hot_permutation);
    CU_add_test(s, "conservation of copies and bytes", test_conservation);
    CU_add_test(s, "nodes numbered by first appearance", test_node_numbering);
    CU_add_test(s, "unusable settings refused", test_unusable_settings);
    CU_add_test(s, "uniform: per-peer copies match expectation", test_uniform_expectation);
    CU_add_test(s, "Zipf: skewed, same hot expert per layer", test_zipf_skew);
    CU_add_test(s, "capacity factor drops, padding fills to capacity", test_capacity);
    CU_add_test(s, "group-limited: at most group_topk groups", test_group_limit);
    CU_add_test(s, "matches direct Gumbel top-k", test_matches_gumbel_reference);
    CU_add_test(s, "padded rows", test_padded_rows);
    CU_add_test(s, "received and padded rows per member", test_recv_padded_rows);
}
