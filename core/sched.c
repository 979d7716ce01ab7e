/* sched: storage of the schedule IR (ops, deps, communicators, labels), op names, and freeing.
 *
 * Ops and deps live in one growing array per rank (amortised doubling, trimmed when a rank is
 * done), never one allocation per op. Communicators are registered once by kind + member list
 * through a hash table, so 1024 ranks asking for their EP group share one entry.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

/* docs/performance.md counts on it (27 M ops on dgx1024) */
_Static_assert(sizeof(ep_op) <= 80, "ep_op grew past 80 bytes");

static const char *const k_stream_names[EP_NUM_STREAMS] = {"comp", "comm", "dp", "pp", "tp"};
static const char *const k_kind_names[EP_OP_NUM_KINDS] = {
    "gemm",           "grouped_gemm", "attention",   "scan",      "elementwise",
    "norm",           "router",       "permute",     "unpermute", "loss",
    "optimizer",      "a2a_dispatch", "a2a_combine", "alltoall",  "all_gather",
    "reduce_scatter", "all_reduce",   "send",        "recv",      "host_sync"};
static const char *const k_phase_names[] = {"", "fwd", "bwd", "bwd_dw", "recompute"};
static const char *const k_node_names[EP_NODE_NUM] = {"",    "pre_dispatch", "dispatch",
                                                      "mlp", "combine",      "mtp"};
static const char *const k_comm_class_names[EP_COMM_NUM] = {"",   "dispatch", "combine",
                                                            "dp", "pp",       "other"};

const char *ep_stream_name(ep_stream s) {
    return (unsigned)s < EP_NUM_STREAMS ? k_stream_names[s] : "?";
}
const char *ep_op_kind_name(ep_op_kind k) {
    return (unsigned)k < EP_OP_NUM_KINDS ? k_kind_names[k] : "?";
}
const char *ep_phase_name(ep_phase p) {
    return (unsigned)p <= EP_PHASE_RECOMPUTE ? k_phase_names[p] : "?";
}
const char *ep_node_name(ep_node n) {
    return (unsigned)n < EP_NODE_NUM ? k_node_names[n] : "?";
}
const char *ep_comm_class_name(ep_comm_class c) {
    return (unsigned)c < EP_COMM_NUM ? k_comm_class_names[c] : "?";
}

int ep_op_is_comm(const ep_op *op) {
    switch (op->kind) {
    case EP_OP_A2A_DISPATCH:
    case EP_OP_A2A_COMBINE:
    case EP_OP_ALLTOALL:
    case EP_OP_ALL_GATHER:
    case EP_OP_REDUCE_SCATTER:
    case EP_OP_ALL_REDUCE:
    case EP_OP_SEND:
    case EP_OP_RECV:
        return 1;
    default:
        return 0;
    }
}

/* Dispatch and combine are named by the node the op belongs to, so the backward of dispatch (a
 * combine-direction all-to-all) still counts as dispatch time, as Megatron's timers do. */
ep_comm_class ep_op_comm_class(const ep_op *op) {
    if (!ep_op_is_comm(op)) return EP_COMM_NOT;
    if (op->stream == EP_STREAM_PP || op->kind == EP_OP_SEND || op->kind == EP_OP_RECV)
        return EP_COMM_PP;
    if (op->stream == EP_STREAM_DP) return EP_COMM_DP;
    if (op->node == EP_NODE_DISPATCH) return EP_COMM_DISPATCH;
    if (op->node == EP_NODE_COMBINE) return EP_COMM_COMBINE;
    return EP_COMM_OTHER;
}

ep_op ep_op_blank(void) {
    ep_op op;
    memset(&op, 0, sizeof op);
    op.kind = EP_OP_ELEMENTWISE;
    op.stream = EP_STREAM_COMP;
    op.phase = EP_PHASE_NONE;
    op.node = EP_NODE_NONE;
    op.label = "";
    op.mb = op.chunk = op.layer = op.index = -1;
    op.group = op.seq = op.peer = op.traffic = -1;
    return op;
}

void ep_op_name(const ep_op *op, char *buf, size_t len) {
    size_t n = 0;
    int w;
    buf[0] = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        w = snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__);                                 \
        if (w > 0) n += (size_t)w;                                                                 \
    } while (0)
    if (op->mb >= 0) APPEND("mb%d.", op->mb);
    if (op->chunk >= 0) APPEND("c%d.", op->chunk);
    if (op->layer >= 0) APPEND("L%d.", op->layer);
    if (op->index >= 0) APPEND("B%d.", op->index);
    APPEND("%s", op->label ? op->label : "");
    if (op->phase != EP_PHASE_NONE) APPEND(".%s", ep_phase_name(op->phase));
#undef APPEND
}

/* --- storage -------------------------------------------------------------------------------- */

int ep_sched_push(ep_rank_sched *r, const ep_op *op) {
    if (r->nops == r->cap) {
        int cap = r->cap ? r->cap * 2 : 256;
        ep_op *p = realloc(r->ops, (size_t)cap * sizeof *p);
        if (!p) return -1;
        r->ops = p;
        r->cap = cap;
    }
    r->ops[r->nops] = *op;
    r->ops[r->nops].deps_off = r->ndeps;
    r->ops[r->nops].ndeps = 0;
    return r->nops++;
}

int ep_sched_push_dep(ep_rank_sched *r, int idx, int dep) {
    ep_op *op = &r->ops[idx];
    for (int i = 0; i < op->ndeps; i++) /* a node can name the same op twice: keep one */
        if (r->deps[op->deps_off + i] == dep) return 0;
    if (op->ndeps == INT16_MAX) return -1; /* ep_op.ndeps is 16 bits; no schedule comes near */
    if (r->ndeps == r->depcap) {
        int cap = r->depcap ? r->depcap * 2 : 256;
        int *p = realloc(r->deps, (size_t)cap * sizeof *p);
        if (!p) return -1;
        r->deps = p;
        r->depcap = cap;
    }
    r->deps[r->ndeps++] = dep;
    op->ndeps++;
    return 0;
}

static ep_sched_state *state(ep_sched *s) {
    if (!s->internal) s->internal = calloc(1, sizeof(ep_sched_state));
    return s->internal;
}

static uint64_t hash_group(ep_group_kind kind, const int *ranks, int n) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)kind;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)(unsigned)ranks[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static int group_equal(const ep_group *g, ep_group_kind kind, const int *ranks, int n) {
    return g->kind == kind && g->size == n &&
           memcmp(g->ranks, ranks, (size_t)n * sizeof *ranks) == 0;
}

static int rehash_groups(ep_sched *s, ep_sched_state *st, int cap) {
    int *slots = calloc((size_t)cap, sizeof *slots);
    if (!slots) return -1;
    for (int i = 0; i < s->ngroups; i++) {
        const ep_group *g = &s->groups[i];
        ep_slot_put(slots, cap, hash_group(g->kind, g->ranks, g->size), i + 1);
    }
    free(st->group_slots);
    st->group_slots = slots;
    st->group_slot_cap = cap;
    return 0;
}

int ep_sched_group(ep_sched *s, ep_group_kind kind, const int *ranks, int n) {
    ep_sched_state *st = state(s);
    if (!st) return -1;
    if (st->group_slot_cap < 2 * (s->ngroups + 1) &&
        rehash_groups(s, st, st->group_slot_cap ? st->group_slot_cap * 2 : 256) != 0)
        return -1;
    size_t mask = (size_t)st->group_slot_cap - 1;
    size_t h = (size_t)(hash_group(kind, ranks, n) & mask);
    while (st->group_slots[h]) {
        int gi = st->group_slots[h] - 1;
        if (group_equal(&s->groups[gi], kind, ranks, n)) return gi;
        h = (h + 1) & mask;
    }
    if (s->ngroups == s->groupcap) {
        int cap = s->groupcap ? s->groupcap * 2 : 64;
        ep_group *p = realloc(s->groups, (size_t)cap * sizeof *p);
        int *q = realloc(st->group_index_of, (size_t)cap * sizeof *q);
        if (q) st->group_index_of = q;
        if (!p || !q) {
            if (p) s->groups = p;
            return -1;
        }
        s->groups = p;
        s->groupcap = cap;
    }
    int *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) return -1;
    memcpy(copy, ranks, (size_t)n * sizeof *copy);
    int gi = s->ngroups++;
    s->groups[gi].kind = kind;
    s->groups[gi].size = n;
    s->groups[gi].ranks = copy;
    st->group_index_of[gi] = st->kind_count[kind]++;
    st->group_slots[h] = gi + 1;
    return gi;
}

const char *ep_sched_intern(ep_sched *s, const char *label) {
    ep_sched_state *st = state(s);
    if (!st) return NULL;
    for (int i = 0; i < st->nlabels; i++) /* few distinct labels: a linear scan is enough */
        if (strcmp(st->labels[i], label) == 0) return st->labels[i];
    if (st->nlabels == st->label_cap) {
        int cap = st->label_cap ? st->label_cap * 2 : 32;
        char **p = realloc(st->labels, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        st->labels = p;
        st->label_cap = cap;
    }
    size_t n = strlen(label) + 1;
    char *copy = malloc(n);
    if (!copy) return NULL;
    memcpy(copy, label, n);
    st->labels[st->nlabels++] = copy;
    return copy;
}

void ep_sched_internal_free(ep_sched *s) {
    ep_sched_state *st = s->internal;
    if (!st) return;
    free(st->group_slots);
    free(st->traffic_slots);
    free(st->share_slots);
    for (int i = 0; i < st->nlabels; i++)
        free(st->labels[i]);
    free(st->labels);
    free(st->group_index_of);
    free(st);
    s->internal = NULL;
}

void ep_sched_free(ep_sched *s) {
    if (!s) return;
    if (s->ranks)
        for (int r = 0; r < s->world; r++) {
            free(s->ranks[r].ops);
            free(s->ranks[r].deps);
        }
    free(s->ranks);
    for (int i = 0; i < s->ngroups; i++)
        free(s->groups[i].ranks);
    free(s->groups);
    for (int i = 0; i < s->ntraffic; i++)
        free(s->traffic[i].bytes); /* one block per instance, bytes first (sched_traffic.c) */
    free(s->traffic);
    ep_sched_internal_free(s);
    memset(s, 0, sizeof *s);
}
