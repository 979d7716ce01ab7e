/* sched_traffic: token counts per rank and the shared traffic instances of token all-to-alls.
 *
 * One ep_traffic per (microbatch, MoE layer, EP group), drawn on first use by any member and
 * shared by all of them (never one per rank). Routing is drawn by ep_route_draw; the draw of a
 * large iteration is bounded by a budget of token selections: beyond it, microbatch m reuses the
 * data (THD token counts and routing) of microbatch m mod P (docs/schedule.md, "Routing budget").
 */
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

/* ~2.5 s of ep_route_draw on one core (about 18 ns per selection at EP64 x 4096 x top-8). */
#define ROUTE_BUDGET_SELECTIONS (1LL << 27)

static int divisor(const ep_config *cfg) {
    int cp = cfg->context_parallel_size > 0 ? cfg->context_parallel_size : 1;
    int tp = cfg->tensor_model_parallel_size > 1 ? cfg->tensor_model_parallel_size : 1;
    return cp * tp; /* CP splits the sequence; TP>1 implies sequence parallel */
}

int ep_sched_route_mb(const ep_sched *s, int mb) {
    return s->route_period > 0 ? mb % s->route_period : mb;
}

/* THD counts are drawn per data-parallel replica: the TP, CP and PP ranks of one replica hold
 * pieces of the same packed microbatch. */
static int tokens_of(const ep_config *cfg, int route_mb, int rank) {
    int d = divisor(cfg);
    if (!cfg->sequence_packing) {
        int64_t t = (int64_t)cfg->seq_length * cfg->micro_batch_size / d;
        return t > 0 ? (int)t : 1;
    }
    ep_coords dense, expert;
    ep_rank_coords(cfg, rank, &dense, &expert);
    int held = ep_thd_tokens(cfg, route_mb, dense.dp);
    return held / d > 0 ? held / d : 1;
}

int ep_sched_tokens(const ep_config *cfg, int mb, int rank) {
    return tokens_of(cfg, mb, rank);
}

void ep_sched_traffic_setup(ep_sched *s) {
    const ep_config *cfg = &s->cfg;
    int moe = 0;
    for (int i = 0; i < s->plan.num_layers + s->plan.num_mtp; i++)
        moe += s->plan.layers[i].is_moe;
    int pp = cfg->pipeline_model_parallel_size > 0 ? cfg->pipeline_model_parallel_size : 1;
    long long per_mb = (long long)(s->world / pp) * cfg->seq_length * cfg->micro_batch_size /
                       divisor(cfg) * cfg->moe_router_topk * moe;
    long long period = per_mb > 0 ? ROUTE_BUDGET_SELECTIONS / per_mb : s->num_microbatches;
    if (period < 1) period = 1;
    if (period > s->num_microbatches) period = s->num_microbatches;
    s->route_period = (int)period;
}

static uint64_t traffic_hash(int mb, int layer, int group) {
    uint64_t h = ep_hash4((uint64_t)mb, (uint64_t)layer, (uint64_t)group, 0x747266ULL);
    return h;
}

static int rehash_traffic(ep_sched *s, ep_sched_state *st, int cap) {
    int *slots = calloc((size_t)cap, sizeof *slots);
    if (!slots) return -1;
    for (int i = 0; i < s->ntraffic; i++) {
        const ep_traffic *t = &s->traffic[i];
        size_t h = (size_t)(traffic_hash(t->microbatch, t->layer, t->group) & (uint64_t)(cap - 1));
        while (slots[h])
            h = (h + 1) & (size_t)(cap - 1);
        slots[h] = i + 1;
    }
    free(st->traffic_slots);
    st->traffic_slots = slots;
    st->traffic_slot_cap = cap;
    return 0;
}

static int pad_multiple(const ep_config *cfg) {
    if (cfg->pad_mode == EP_PAD_NONE) return 1;
    return cfg->pad_multiple > 1 ? cfg->pad_multiple : 1;
}

/* Fills t from one routing draw. Everything lives in one block whose first array is bytes. */
static int fill_traffic(ep_sched *s, ep_traffic *t, int mb, int layer, int gi) {
    const ep_config *cfg = &s->cfg;
    const ep_group *g = &s->groups[gi];
    ep_sched_state *st = s->internal;
    int n = g->size, route_mb = ep_sched_route_mb(s, mb);
    int *tokens = malloc((size_t)n * sizeof *tokens);
    if (!tokens) return -1;
    for (int i = 0; i < n; i++)
        tokens[i] = tokens_of(cfg, route_mb, g->ranks[i]);
    ep_routing r;
    if (ep_route_draw(cfg, route_mb, layer, st->group_index_of[gi], g->ranks, tokens, 0, &r) != 0) {
        free(tokens);
        return -1;
    }
    int nn = r.nnodes;
    size_t n64 = (size_t)n * n + (size_t)n * nn + 4 * (size_t)n;
    int64_t *block = malloc(n64 * sizeof(int64_t) + 2 * (size_t)n * sizeof(int));
    if (!block) {
        ep_routing_free(&r);
        free(tokens);
        return -1;
    }
    memset(t, 0, sizeof *t);
    t->group = gi;
    t->n = n;
    t->nnodes = nn;
    t->bytes = block;
    t->node_bytes = block + (size_t)n * n;
    t->recv_rows = t->node_bytes + (size_t)n * nn;
    t->pad_rows = t->recv_rows + n;
    t->expert_rows = t->pad_rows + n;
    t->send_rows = t->expert_rows + n;
    t->node_of = (int *)(t->send_rows + n);
    t->tokens = t->node_of + n;
    t->microbatch = mb;
    t->layer = layer;
    t->route_mb = route_mb;
    double row = EP_ROW_BYTES(cfg);
    int multiple = pad_multiple(cfg);
    for (int i = 0; i < n; i++) {
        t->node_of[i] = r.node_of[i];
        t->tokens[i] = tokens[i];
        t->send_rows[i] = 0;
        for (int j = 0; j < n; j++) {
            int64_t rows = r.rank_tokens[(size_t)i * n + j];
            t->bytes[(size_t)i * n + j] = (int64_t)(rows * row);
            t->send_rows[i] += rows;
        }
        for (int k = 0; k < nn; k++)
            t->node_bytes[(size_t)i * nn + k] = (int64_t)(r.node_tokens[(size_t)i * nn + k] * row);
        t->recv_rows[i] = ep_route_recv_rows(&r, i);
        t->expert_rows[i] = ep_route_padded_rows(
            r.tokens_per_expert + (size_t)i * r.experts_per_rank, r.experts_per_rank, 1);
        t->pad_rows[i] = ep_route_recv_padded_rows(&r, i, multiple);
    }
    ep_backend be = ep_config_backend(cfg);
    if (be == EP_BACKEND_ALLTOALL || be == EP_BACKEND_ALLGATHER)
        t->node_bytes = NULL; /* only the per-node deduplicating dispatchers use it */
    if (cfg->sequence_packing && be == EP_BACKEND_HYBRIDEP) {
        /* the MAX runs over TP x EP: with TP>1 it spans more ranks than the EP group */
        int *m = malloc((size_t)cfg->world_size * sizeof *m);
        int nm = m ? ep_group_members(cfg, EP_GROUP_TPEP, g->ranks[0], m) : 0;
        for (int i = 0; i < nm; i++)
            m[i] = tokens_of(cfg, route_mb, m[i]);
        t->thd_padded_tokens = nm ? ep_thd_padded_max(m, nm) : ep_thd_padded_max(tokens, n);
        free(m);
        for (int i = 0; i < n; i++)
            t->thd_pad_tokens += t->thd_padded_tokens - tokens[i];
    }
    ep_routing_free(&r);
    free(tokens);
    return 0;
}

int ep_sched_traffic_get(ep_sched *s, int mb, int layer, int ep_group) {
    ep_sched_state *st = s->internal;
    int key_mb = ep_sched_route_mb(s, mb); /* reused draws share their instance */
    if (st->traffic_slot_cap < 2 * (s->ntraffic + 1) &&
        rehash_traffic(s, st, st->traffic_slot_cap ? st->traffic_slot_cap * 2 : 1024) != 0)
        return -1;
    size_t mask = (size_t)st->traffic_slot_cap - 1;
    size_t h = (size_t)(traffic_hash(key_mb, layer, ep_group) & mask);
    while (st->traffic_slots[h]) {
        int ti = st->traffic_slots[h] - 1;
        const ep_traffic *t = &s->traffic[ti];
        if (t->microbatch == key_mb && t->layer == layer && t->group == ep_group) return ti;
        h = (h + 1) & mask;
    }
    if (s->ntraffic == s->trafficcap) {
        int cap = s->trafficcap ? s->trafficcap * 2 : 256;
        ep_traffic *p = realloc(s->traffic, (size_t)cap * sizeof *p);
        if (!p) return -1;
        s->traffic = p;
        s->trafficcap = cap;
    }
    if (fill_traffic(s, &s->traffic[s->ntraffic], key_mb, layer, ep_group) != 0) return -1;
    st->traffic_slots[h] = s->ntraffic + 1;
    return s->ntraffic++;
}
