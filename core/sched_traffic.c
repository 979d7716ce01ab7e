/* sched_traffic: token counts per rank and the shared traffic instances of token all-to-alls.
 *
 * One ep_traffic per (microbatch, MoE layer, EP group), drawn on first use by any member and
 * shared by all of them (never one per rank). Routing is drawn by ep_route_draw; the draw of a
 * large iteration is bounded by a budget of token selections: beyond it, microbatch m reuses the
 * data (THD token counts and routing) of microbatch m mod P (docs/schedule.md, "Routing budget").
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ep_disp.h"
#include "sched_internal.h"

static int divisor(const ep_config *cfg) {
    /* CP splits the sequence; TP>1 implies sequence parallel */
    return cfg->context_parallel_size * cfg->tensor_model_parallel_size;
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
    if (cfg->routing_layer_draws > 0 && cfg->routing_layer_draws < moe)
        moe = cfg->routing_layer_draws; /* the layers that draw */
    int pp = cfg->pipeline_model_parallel_size;
    long long per_mb = (long long)(s->world / pp) * cfg->seq_length * cfg->micro_batch_size /
                       divisor(cfg) * cfg->moe_router_topk * moe;
    /* --routing-budget: draws cost 20-80 ns per selection (docs/routing.md); 0 = no limit */
    long long budget = (long long)cfg->routing_budget;
    long long period = per_mb > 0 && budget > 0 ? budget / per_mb : s->num_microbatches;
    if (period < 1) period = 1;
    if (period > s->num_microbatches) period = s->num_microbatches;
    s->route_period = (int)period;
    /* beyond it even at one microbatch: EP groups of a stage share draws (identical token counts
     * only, so not with THD, whose ranks hold different counts) */
    int ep = cfg->expert_model_parallel_size;
    long long groups = (long long)(s->world / pp) / ep;
    s->route_groups = 0;
    if (budget > 0 && per_mb > budget && groups > 1 && !cfg->sequence_packing) {
        long long q = budget / (per_mb / groups);
        if (q < 1) q = 1;
        if (q < groups) s->route_groups = (int)q;
    }
}

/* The layer whose draw `layer` uses (--routing-layer-draws N: the k-th MoE layer of the plan takes
 * the draw of the (k mod N)-th; every layer its own otherwise). */
static int drawn_layer(const ep_sched *s, int layer) {
    int N = s->cfg.routing_layer_draws, nl = s->plan.num_layers + s->plan.num_mtp, k = 0;
    if (N <= 0) return layer;
    for (int l = 0; l < layer && l < nl; l++)
        k += s->plan.layers[l].is_moe;
    for (int l = 0, j = 0; l < nl; l++)
        if (s->plan.layers[l].is_moe && j++ == k % N) return l;
    return layer;
}

/* The group ordinal whose draw an EP group of ordinal o uses. */
static int drawn_ordinal(const ep_sched *s, int o) {
    return s->route_groups > 0 ? o % s->route_groups : o;
}

#define EP_MAX_SHARE_RANKS 4096 /* EP groups larger than this draw each their own routing */

static uint64_t traffic_hash(int mb, int layer, int group) {
    uint64_t h = ep_hash4((uint64_t)mb, (uint64_t)layer, (uint64_t)group, 0x747266ULL);
    return h;
}

static int rehash_traffic(ep_sched *s, ep_sched_state *st, int cap) {
    int *slots = calloc((size_t)cap, sizeof *slots);
    if (!slots) return -1;
    for (int i = 0; i < s->ntraffic; i++) {
        const ep_traffic *t = &s->traffic[i];
        ep_slot_put(slots, cap, traffic_hash(t->microbatch, t->layer, t->group), i + 1);
    }
    free(st->traffic_slots);
    st->traffic_slots = slots;
    st->traffic_slot_cap = cap;
    return 0;
}

static int pad_multiple(const ep_config *cfg) {
    if (cfg->pad_mode == EP_PAD_NONE) return 1;
    return cfg->pad_multiple;
}

/* An instance's arrays live in one block, bytes first: its size for n members on nn nodes. */
static size_t traffic_block_size(int n, int nn) {
    size_t n64 = (size_t)n * n + (size_t)n * nn + 4 * (size_t)n;
    return n64 * sizeof(int64_t) + 2 * (size_t)n * sizeof(int);
}

/* Points t's arrays (t->n, t->nnodes set) into block. */
static void traffic_layout(ep_traffic *t, int64_t *block) {
    size_t n = (size_t)t->n;
    t->bytes = block;
    t->node_bytes = block + n * n;
    t->recv_rows = t->node_bytes + n * (size_t)t->nnodes;
    t->pad_rows = t->recv_rows + n;
    t->expert_rows = t->pad_rows + n;
    t->send_rows = t->expert_rows + n;
    t->node_of = (int *)(t->send_rows + n);
    t->tokens = t->node_of + n;
}

/* Fills t from one routing draw of the EP group ranks[0..n) (ordinal `ordinal` among EP groups)
 * for routing microbatch route_mb. Everything lives in one block whose first array is bytes.
 * Reads only the configuration: safe to run on several threads at once (t->group is left -1). */
static int fill_traffic(const ep_config *cfg, ep_traffic *t, int route_mb, int layer,
                        const int *ranks, int n, int ordinal) {
    int *tokens = malloc((size_t)n * sizeof *tokens);
    if (!tokens) return -1;
    for (int i = 0; i < n; i++)
        tokens[i] = tokens_of(cfg, route_mb, ranks[i]);
    ep_routing r;
    if (ep_route_draw(cfg, route_mb, layer, ordinal, ranks, tokens, 0, &r) != 0) {
        free(tokens);
        return -1;
    }
    int nn = r.nnodes;
    int64_t *block = malloc(traffic_block_size(n, nn));
    if (!block) {
        ep_routing_free(&r);
        free(tokens);
        return -1;
    }
    memset(t, 0, sizeof *t);
    t->group = -1;
    t->n = n;
    t->nnodes = nn;
    traffic_layout(t, block);
    t->microbatch = route_mb;
    t->layer = layer;
    t->route_mb = route_mb;
    double row = EP_ROW_BYTES(cfg);
    int multiple = pad_multiple(cfg);
    const ep_dispatcher *disp = ep_disp_of(cfg);
    /* Megatron's alltoall dispatcher permutes one row per (token, expert) pair and sends each
     * (input_splits sum the experts' counts per rank); deepep and hybridep send a token once per
     * destination rank, whose experts share it (ep_dispatcher.pair_rows) */
    int pairs = disp->pair_rows && !cfg->moe_alltoall_per_rank;
    for (int i = 0; i < n; i++)
        t->recv_rows[i] = pairs ? 0 : ep_route_recv_rows(&r, i);
    for (int i = 0; i < n; i++) {
        t->node_of[i] = r.node_of[i];
        t->tokens[i] = tokens[i];
        t->send_rows[i] = 0;
        for (int j = 0; j < n; j++) {
            int64_t rows = r.rank_tokens[(size_t)i * n + j];
            if (pairs) {
                const int64_t *sel =
                    r.sel + (size_t)i * r.num_experts + (size_t)j * r.experts_per_rank;
                rows = 0;
                for (int e = 0; e < r.experts_per_rank; e++)
                    rows += sel[e];
                t->recv_rows[j] += rows;
            }
            t->bytes[(size_t)i * n + j] = (int64_t)(rows * row);
            t->send_rows[i] += rows;
        }
        for (int k = 0; k < nn; k++)
            t->node_bytes[(size_t)i * nn + k] = (int64_t)(r.node_tokens[(size_t)i * nn + k] * row);
        t->expert_rows[i] = ep_route_padded_rows(
            r.tokens_per_expert + (size_t)i * r.experts_per_rank, r.experts_per_rank, 1);
        t->pad_rows[i] = ep_route_recv_padded_rows(&r, i, multiple);
    }
    if (!disp->node_bytes) t->node_bytes = NULL; /* only the per-node deduplicating ones use it */
    if (cfg->sequence_packing && disp->thd_padded) {
        /* the MAX runs over TP x EP: with TP>1 it spans more ranks than the EP group */
        int *m = malloc((size_t)cfg->world_size * sizeof *m);
        int nm = m ? ep_group_members(cfg, EP_GROUP_TPEP, ranks[0], m) : 0;
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

/* --- drawing ahead on worker threads --------------------------------------------------------
 *
 * Before the ranks are built, the instances they will ask for are listed in the order the rank
 * loop first needs them: (EP group, routing microbatch, MoE layer) for every EP group, ordinals as
 * the rank loop registers them. Worker threads draw them in that order while the calling thread
 * builds ranks; ep_sched_traffic_get takes a finished draw, draws one nobody has started itself,
 * or helps with the next ones while it waits. Which thread draws an instance never changes it
 * (ep_route_draw seeds from the instance's numbers), and s->traffic is filled by the calling
 * thread in the order of its own requests, so the schedule does not depend on the thread count.
 * An instance the list missed is drawn on the spot, as without threads. */

enum { DRAW_FREE, DRAW_BUSY, DRAW_DONE, DRAW_FAILED, DRAW_TAKEN };

typedef struct {
    int mb, layer, ordinal; /* routing microbatch, plan layer, EP group ordinal */
    int n;
    const int *ranks; /* into pool->ranks */
    int state;        /* DRAW_*, under pool->lock */
    ep_traffic t;
} draw_item;

struct ep_traffic_pool {
    const ep_config *cfg;
    draw_item *items;
    int nitems;
    int *ranks; /* member lists of the EP groups, ep_size each, by ordinal */
    int *slots; /* open addressing over (mb, layer, ordinal): item index + 1 */
    int slot_cap;
    int next; /* first item no thread has looked at */
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t done;
    pthread_t *threads;
    int nthreads;
};

int ep_sched_thread_count(void) {
    const char *env = getenv("EP_SCHED_THREADS");
    long n = 0;
    if (env && *env) {
        char *end;
        n = strtol(env, &end, 10);
        if (*end != '\0') n = 0;
    }
    if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > 256 ? 256 : (int)n;
}

static size_t item_hash(int mb, int layer, int ordinal) {
    return (size_t)ep_hash4((uint64_t)mb, (uint64_t)layer, (uint64_t)ordinal, 0x706f6fULL);
}

static int find_item(const ep_traffic_pool *p, int mb, int layer, int ordinal) {
    if (!p || !p->slot_cap) return -1;
    size_t mask = (size_t)p->slot_cap - 1, h = item_hash(mb, layer, ordinal) & mask;
    while (p->slots[h]) {
        const draw_item *it = &p->items[p->slots[h] - 1];
        if (it->mb == mb && it->layer == layer && it->ordinal == ordinal) return p->slots[h] - 1;
        h = (h + 1) & mask;
    }
    return -1;
}

/* Draws item i (claimed by the caller: state DRAW_BUSY) and publishes the result. */
static void draw_item_run(ep_traffic_pool *p, int i) {
    draw_item *it = &p->items[i];
    int rc = fill_traffic(p->cfg, &it->t, it->mb, it->layer, it->ranks, it->n, it->ordinal);
    pthread_mutex_lock(&p->lock);
    it->state = rc == 0 ? DRAW_DONE : DRAW_FAILED;
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->lock);
}

/* Claims the next item nobody has started, under the lock; -1 when none is left. */
static int claim_next(ep_traffic_pool *p) {
    while (!p->stop && p->next < p->nitems) {
        int i = p->next++;
        if (p->items[i].state == DRAW_FREE) {
            p->items[i].state = DRAW_BUSY;
            return i;
        }
    }
    return -1;
}

static void *worker(void *arg) {
    ep_traffic_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = claim_next(p);
        pthread_mutex_unlock(&p->lock);
        if (i < 0) return NULL;
        draw_item_run(p, i);
    }
}

/* Lists the instances in the order the rank loop first asks for them. */
static int list_items(ep_sched *s, ep_traffic_pool *p) {
    const ep_config *cfg = &s->cfg;
    int W = s->world, ep = cfg->expert_model_parallel_size;
    int pp = cfg->pipeline_model_parallel_size, vpp = cfg->virtual_pipeline_model_parallel_size;
    int nl = s->plan.num_layers + s->plan.num_mtp, P = s->route_period;
    int *ordinal_of = malloc((size_t)W * sizeof *ordinal_of); /* by first member */
    int *buf = malloc((size_t)W * sizeof *buf);
    int *stage_layers = malloc((size_t)nl * sizeof *stage_layers);
    int ngroups = 0, rc = -1;
    if (!ordinal_of || !buf || !stage_layers) goto out;
    for (int r = 0; r < W; r++)
        ordinal_of[r] = -1;
    for (int r = 0; r < W; r++) {
        int n = ep_group_members(cfg, EP_GROUP_EP, r, buf);
        if (n != ep || buf[0] < 0 || buf[0] >= W) goto out; /* not the expected shape: no list */
        if (ordinal_of[buf[0]] >= 0) continue;
        ordinal_of[buf[0]] = ngroups;
        ep_coords dense, expert;
        ep_rank_coords(cfg, r, &dense, &expert);
        int nmoe = 0;
        for (int c = 0; c < vpp; c++) {
            int first, count;
            ep_layer_range(&s->plan, pp, vpp, dense.pp, c, &first, &count);
            for (int l = first; l < first + count && l < nl; l++)
                if (s->plan.layers[l].is_moe && drawn_layer(s, l) == l) stage_layers[nmoe++] = l;
        }
        int *pr = realloc(p->ranks, (size_t)(ngroups + 1) * ep * sizeof *pr);
        if (!pr) goto out;
        p->ranks = pr;
        memcpy(p->ranks + (size_t)ngroups * ep, buf, (size_t)ep * sizeof *buf);
        if (nmoe > 0 && drawn_ordinal(s, ngroups) == ngroups) { /* copies are not drawn */
            draw_item *pi = realloc(p->items, ((size_t)p->nitems + (size_t)P * nmoe) * sizeof *pi);
            if (!pi) goto out;
            p->items = pi;
            for (int m = 0; m < P; m++)
                for (int j = 0; j < nmoe; j++) {
                    draw_item *it = &p->items[p->nitems++];
                    memset(it, 0, sizeof *it);
                    it->mb = m;
                    it->layer = stage_layers[j];
                    it->ordinal = ngroups;
                    it->n = ep;
                    it->state = DRAW_FREE;
                }
        }
        ngroups++;
    }
    for (int i = 0; i < p->nitems; i++) /* ranks moved while the list grew */
        p->items[i].ranks = p->ranks + (size_t)p->items[i].ordinal * ep;
    int cap = 16;
    while (cap < 2 * p->nitems)
        cap *= 2;
    p->slots = calloc((size_t)cap, sizeof *p->slots);
    if (!p->slots) goto out;
    p->slot_cap = cap;
    for (int i = 0; i < p->nitems; i++) {
        const draw_item *it = &p->items[i];
        ep_slot_put(p->slots, cap, item_hash(it->mb, it->layer, it->ordinal), i + 1);
    }
    rc = 0;
out:
    free(ordinal_of);
    free(buf);
    free(stage_layers);
    return rc;
}

static void pool_free(ep_traffic_pool *p) {
    for (int i = 0; i < p->nitems; i++)
        if (p->items[i].state == DRAW_DONE) free(p->items[i].t.bytes);
    free(p->items);
    free(p->ranks);
    free(p->slots);
    free(p->threads);
    free(p);
}

int ep_sched_traffic_start(ep_sched *s, int threads) {
    ep_sched_state *st = s->internal;
    const ep_config *cfg = &s->cfg;
    if (cfg->num_experts <= 0 || cfg->expert_model_parallel_size < 1 || threads < 2) return 0;
    ep_traffic_pool *p = calloc(1, sizeof *p);
    if (!p) return -1;
    p->cfg = cfg;
    if (list_items(s, p) != 0 || p->nitems == 0) { /* drawn on demand instead */
        pool_free(p);
        return 0;
    }
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        pool_free(p);
        return 0;
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        pool_free(p);
        return 0;
    }
    int nw = threads - 1 < p->nitems ? threads - 1 : p->nitems; /* the caller draws too */
    p->threads = malloc((size_t)nw * sizeof *p->threads);
    for (int i = 0; p->threads && i < nw; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) break;
        p->nthreads++;
    }
    st->pool = p;
    return 0;
}

void ep_sched_traffic_stop(ep_sched *s) {
    ep_sched_state *st = s->internal;
    ep_traffic_pool *p = st ? st->pool : NULL;
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    pool_free(p);
    st->pool = NULL;
}

/* The drawn instance of item i, waiting for it (and drawing others meanwhile); 0 or -1. */
static int take_item(ep_traffic_pool *p, int i, ep_traffic *out) {
    draw_item *it = &p->items[i];
    pthread_mutex_lock(&p->lock);
    if (it->state == DRAW_FREE) { /* nobody started it: draw it here */
        it->state = DRAW_BUSY;
        pthread_mutex_unlock(&p->lock);
        draw_item_run(p, i);
        pthread_mutex_lock(&p->lock);
    }
    while (it->state == DRAW_BUSY) {
        int j = claim_next(p);
        if (j >= 0) { /* help with the next one instead of idling */
            pthread_mutex_unlock(&p->lock);
            draw_item_run(p, j);
            pthread_mutex_lock(&p->lock);
        } else {
            pthread_cond_wait(&p->done, &p->lock);
        }
    }
    int rc = it->state == DRAW_DONE ? 0 : -1;
    if (rc == 0) *out = it->t;
    it->state = DRAW_TAKEN;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* --- groups sharing draws (s.route_groups) ---------------------------------------------------- */

/* The share slot of (mb, layer, drawn ordinal): *slot gets its index (empty: 0 inside). */
static int share_find(ep_sched *s, ep_sched_state *st, int mb, int layer, int ordinal, int *slot) {
    if (2 * (st->nshared + 1) > st->share_slot_cap) { /* grow: rehash the drawn instances */
        int cap = st->share_slot_cap ? 2 * st->share_slot_cap : 1024;
        int *slots = calloc((size_t)cap, sizeof *slots);
        if (!slots) return -1;
        for (int i = 0; i < st->share_slot_cap; i++) {
            int ti = st->share_slots[i] - 1;
            if (ti < 0) continue;
            const ep_traffic *t = &s->traffic[ti];
            int o = drawn_ordinal(s, st->group_index_of[t->group]);
            ep_slot_put(slots, cap, item_hash(t->microbatch, t->layer, o), ti + 1);
        }
        free(st->share_slots);
        st->share_slots = slots;
        st->share_slot_cap = cap;
    }
    size_t mask = (size_t)st->share_slot_cap - 1, h = item_hash(mb, layer, ordinal) & mask;
    while (st->share_slots[h]) {
        const ep_traffic *t = &s->traffic[st->share_slots[h] - 1];
        if (t->microbatch == mb && t->layer == layer &&
            drawn_ordinal(s, st->group_index_of[t->group]) == ordinal)
            break;
        h = (h + 1) & mask;
    }
    if (!st->share_slots[h]) st->nshared++; /* the caller fills it with the new instance */
    *slot = (int)h;
    return 0;
}

/* Whether a group of these ranks spans its nodes as the drawn instance's group does (then the
 * traffic is the same matrix). */
static int same_nodes(const ep_config *cfg, const ep_traffic *t, const int *ranks, int n) {
    if (t->n != n || n > EP_MAX_SHARE_RANKS) return 0;
    int node_of[EP_MAX_SHARE_RANKS];
    if (ep_route_nodes(ranks, n, cfg->gpus_per_node, node_of) != t->nnodes) return 0;
    return memcmp(node_of, t->node_of, (size_t)n * sizeof *node_of) == 0;
}

/* A copy of a drawn instance in its own block (the layout fill_traffic makes). */
static int copy_traffic(ep_traffic *t, const ep_traffic *src) {
    size_t size = traffic_block_size(src->n, src->nnodes);
    int64_t *block = malloc(size);
    if (!block) return -1;
    memcpy(block, src->bytes, size);
    *t = *src;
    traffic_layout(t, block);
    if (!src->node_bytes) t->node_bytes = NULL;
    return 0;
}

int ep_sched_traffic_get(ep_sched *s, int mb, int layer, int ep_group) {
    ep_sched_state *st = s->internal;
    int key_mb = ep_sched_route_mb(s, mb); /* reused draws share their instance */
    layer = drawn_layer(s, layer);
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
    const int *ranks = s->groups[ep_group].ranks, n = s->groups[ep_group].size;
    int ordinal = drawn_ordinal(s, st->group_index_of[ep_group]);
    ep_traffic *t = &s->traffic[s->ntraffic];
    int share = -1;
    if (s->route_groups > 0 && share_find(s, st, key_mb, layer, ordinal, &share) != 0) return -1;
    int src = share >= 0 ? st->share_slots[share] - 1 : -1;
    if (src >= 0 && same_nodes(&s->cfg, &s->traffic[src], ranks, n)) {
        if (copy_traffic(t, &s->traffic[src]) != 0) return -1;
    } else {
        int it = find_item(st->pool, key_mb, layer, ordinal);
        if (it >= 0 && (st->pool->items[it].n != n ||
                        memcmp(st->pool->items[it].ranks, ranks, (size_t)n * sizeof *ranks)))
            it = -1; /* listed with other members: draw it here */
        if (it >= 0 ? take_item(st->pool, it, t) != 0
                    : fill_traffic(&s->cfg, t, key_mb, layer, ranks, n, ordinal) != 0)
            return -1;
        if (share >= 0 && src < 0) st->share_slots[share] = s->ntraffic + 1;
    }
    t->group = ep_group;
    st->traffic_slots[h] = s->ntraffic + 1;
    return s->ntraffic++;
}
