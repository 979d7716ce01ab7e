/* sched_check: ep_sched_check - the invariants every executor relies on (ep_sched.h NOTES).
 *
 *  1. deps name earlier ops of the same rank (so the graph with stream FIFO order is acyclic);
 *  2. each rank's sequence numbers on a group are 0, 1, 2, ... in launch order, and each
 *     (group, seq) has one op per member with the same kind and consistent sizes; a send pairs
 *     with a receive of the same microbatch and phase;
 *  3. names are unique per rank;
 *  4. the whole schedule runs to the end: a symbolic execution (host launch order with host syncs,
 *     stream FIFO, deps, collectives that start when all members reached them) finishes every op,
 *     so no order of sends, receives and collectives across ranks can deadlock.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, EP_ERRLEN, __VA_ARGS__);                                                     \
        goto done;                                                                                 \
    } while (0)

typedef struct {
    int count;     /* members that issued it (check) / arrived (run) */
    int first;     /* rank of the first op seen */
    int first_idx; /* its index */
} instance;

static int is_member(const ep_group *g, int rank) {
    for (int i = 0; i < g->size; i++)
        if (g->ranks[i] == rank) return 1;
    return 0;
}

static void op_label(const ep_sched *s, int rank, int idx, char *buf, size_t n) {
    char name[160];
    ep_op_name(&s->ranks[rank].ops[idx], name, sizeof name);
    snprintf(buf, n, "rank %d op %d (%s)", rank, idx, name);
}

/* Sizes the members of one collective must agree on. */
static int consistent(const ep_sched *s, const ep_op *a, const ep_op *b, int a_rank, int b_rank) {
    const ep_group *g = &s->groups[a->group];
    if (a->kind == EP_OP_SEND || a->kind == EP_OP_RECV) {
        ep_op_kind want_a = a_rank == g->ranks[0] ? EP_OP_SEND : EP_OP_RECV;
        ep_op_kind want_b = b_rank == g->ranks[0] ? EP_OP_SEND : EP_OP_RECV;
        return a->kind == want_a && b->kind == want_b && a->bytes == b->bytes && a->mb == b->mb &&
               a->phase == b->phase;
    }
    if (a->kind != b->kind) return 0;
    if (a->kind == EP_OP_A2A_DISPATCH || a->kind == EP_OP_A2A_COMBINE)
        return a->traffic == b->traffic && a->transpose == b->transpose && a->traffic >= 0;
    return a->bytes == b->bytes;
}

static uint64_t hash_str(const char *p) {
    uint64_t h = 1469598103934665603ULL;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h ? h : 1;
}

static int check_names(const ep_sched *s, int rank, char err[EP_ERRLEN]) {
    const ep_rank_sched *r = &s->ranks[rank];
    size_t cap = 16;
    while (cap < 2 * (size_t)r->nops)
        cap *= 2;
    uint64_t *keys = calloc(cap, sizeof *keys);
    int *idx = malloc(cap * sizeof *idx);
    int rc = -1;
    char name[160], other[160];
    if (!keys || !idx) FAIL("out of memory checking names");
    for (int i = 0; i < r->nops; i++) {
        ep_op_name(&r->ops[i], name, sizeof name);
        uint64_t h = hash_str(name);
        size_t slot = (size_t)h & (cap - 1);
        for (; keys[slot]; slot = (slot + 1) & (cap - 1)) {
            if (keys[slot] != h) continue;
            ep_op_name(&r->ops[idx[slot]], other, sizeof other);
            if (strcmp(name, other) == 0)
                FAIL("rank %d: ops %d and %d are both named %s", rank, idx[slot], i, name);
        }
        keys[slot] = h;
        idx[slot] = i;
    }
    rc = 0;
done:
    free(keys);
    free(idx);
    return rc;
}

/* --- symbolic execution ------------------------------------------------------------------------
 */

typedef struct {
    const ep_sched *s;
    instance **inst;       /* [group][seq] arrivals */
    unsigned char **state; /* [rank][op] 0 pending, 1 arrived at its collective, 2 done */
    int *host;             /* next op to launch */
    int (*head)[EP_NUM_STREAMS];
    int *queue, qhead, qcount, *queued; /* ranks to advance (each at most once in the ring) */
    long long remaining;
} runner;

static void enqueue(runner *x, int rank) {
    if (x->queued[rank]) return;
    x->queued[rank] = 1;
    x->queue[(x->qhead + x->qcount++) % x->s->world] = rank;
}

/* Advances one rank as far as it can; returns whether anything changed. */
static int advance(runner *x, int rank) {
    const ep_rank_sched *r = &x->s->ranks[rank];
    unsigned char *st = x->state[rank];
    int moved = 0, again = 1;
    while (again) {
        again = 0;
        while (x->host[rank] < r->nops) { /* the host launches until a host sync is pending */
            int h = x->host[rank];
            if (h > 0 && r->ops[h - 1].kind == EP_OP_HOST_SYNC && st[h - 1] != 2) break;
            x->host[rank]++;
            again = 1;
        }
        for (int s = 0; s < EP_NUM_STREAMS; s++) {
            int *hd = &x->head[rank][s];
            for (;;) {
                while (*hd < r->nops && (r->ops[*hd].stream != (ep_stream)s || st[*hd] == 2))
                    (*hd)++;
                int i = *hd;
                if (i >= x->host[rank]) break; /* not launched yet */
                const ep_op *op = &r->ops[i];
                int ready = 1;
                for (int d = 0; d < op->ndeps && ready; d++)
                    ready = st[r->deps[op->deps_off + d]] == 2;
                if (!ready) break;
                if (op->group >= 0 && ep_op_is_comm(op)) {
                    instance *in = &x->inst[op->group][op->seq];
                    const ep_group *g = &x->s->groups[op->group];
                    if (st[i] == 0) {
                        st[i] = 1;
                        if (++in->count == g->size)
                            for (int m = 0; m < g->size; m++)
                                enqueue(x, g->ranks[m]);
                    }
                    if (in->count < g->size) break;
                }
                st[i] = 2;
                x->remaining--;
                again = moved = 1;
            }
        }
    }
    return moved;
}

static int run_all(const ep_sched *s, int *max_seq, char err[EP_ERRLEN]) {
    runner x;
    memset(&x, 0, sizeof x);
    x.s = s;
    int rc = -1, w = s->world;
    x.inst = calloc((size_t)s->ngroups, sizeof *x.inst);
    x.state = calloc((size_t)w, sizeof *x.state);
    x.host = calloc((size_t)w, sizeof *x.host);
    x.head = calloc((size_t)w, sizeof *x.head);
    x.queue = malloc((size_t)w * sizeof *x.queue);
    x.queued = calloc((size_t)w, sizeof *x.queued);
    if (!x.inst || !x.state || !x.host || !x.head || !x.queue || !x.queued)
        FAIL("out of memory checking the schedule");
    for (int g = 0; g < s->ngroups; g++)
        if (!(x.inst[g] = calloc((size_t)max_seq[g] + 1, sizeof **x.inst)))
            FAIL("out of memory checking the schedule");
    for (int r = 0; r < w; r++) {
        if (!(x.state[r] = calloc((size_t)s->ranks[r].nops + 1, 1)))
            FAIL("out of memory checking the schedule");
        x.remaining += s->ranks[r].nops;
        enqueue(&x, r);
    }
    while (x.qcount > 0) {
        int r = x.queue[x.qhead];
        x.qhead = (x.qhead + 1) % w;
        x.qcount--;
        x.queued[r] = 0;
        advance(&x, r);
    }
    if (x.remaining > 0) {
        for (int r = 0; r < w; r++) {
            const ep_rank_sched *rs = &s->ranks[r];
            for (int i = 0; i < rs->nops; i++) {
                if (x.state[r][i] == 2) continue;
                char what[200];
                op_label(s, r, i, what, sizeof what);
                FAIL("the schedule cannot finish: %s never runs (%lld ops left; deadlock)", what,
                     x.remaining);
            }
        }
    }
    rc = 0;
done:
    for (int g = 0; x.inst && g < s->ngroups; g++)
        free(x.inst[g]);
    for (int r = 0; x.state && r < w; r++)
        free(x.state[r]);
    free(x.inst);
    free(x.state);
    free(x.host);
    free(x.head);
    free(x.queue);
    free(x.queued);
    return rc;
}

/* --- the checks --------------------------------------------------------------------------------
 */

int ep_sched_check(const ep_sched *s, char err[EP_ERRLEN]) {
    int rc = -1;
    int *max_seq = calloc((size_t)s->ngroups + 1, sizeof *max_seq);
    instance **inst = calloc((size_t)s->ngroups + 1, sizeof *inst);
    char what[200], other[200];
    if (!max_seq || !inst) FAIL("out of memory checking the schedule");
    for (int g = 0; g < s->ngroups; g++)
        max_seq[g] = -1;
    /* 1. deps, fields, per-rank sequence numbers */
    for (int r = 0; r < s->world; r++) {
        const ep_rank_sched *rs = &s->ranks[r];
        int seen_group[EP_MAX_RANK_GROUPS * 4], seen_next[EP_MAX_RANK_GROUPS * 4], nseen = 0;
        for (int i = 0; i < rs->nops; i++) {
            const ep_op *op = &rs->ops[i];
            if ((unsigned)op->stream >= EP_NUM_STREAMS || (unsigned)op->kind >= EP_OP_NUM_KINDS) {
                op_label(s, r, i, what, sizeof what);
                FAIL("%s has an unknown stream or kind", what);
            }
            for (int d = 0; d < op->ndeps; d++) {
                int dep = rs->deps[op->deps_off + d];
                if (dep < 0 || dep >= i) {
                    op_label(s, r, i, what, sizeof what);
                    FAIL("%s depends on op %d, which is not an earlier op of rank %d", what, dep,
                         r);
                }
            }
            if (!ep_op_is_comm(op)) continue;
            if (op->group < 0 || op->group >= s->ngroups) {
                op_label(s, r, i, what, sizeof what);
                FAIL("%s is communication without a communicator", what);
            }
            int k = 0;
            while (k < nseen && seen_group[k] != op->group)
                k++;
            if (k == nseen) {
                if (nseen == (int)(sizeof seen_group / sizeof *seen_group))
                    FAIL("rank %d uses too many communicators", r);
                if (!is_member(&s->groups[op->group], r)) {
                    op_label(s, r, i, what, sizeof what);
                    FAIL("%s runs on communicator %d, which rank %d is not a member of", what,
                         op->group, r);
                }
                seen_group[nseen] = op->group;
                seen_next[nseen++] = 0;
            }
            if (op->seq != seen_next[k]++) {
                op_label(s, r, i, what, sizeof what);
                FAIL("%s has sequence number %d on communicator %d; expected %d", what, op->seq,
                     op->group, seen_next[k] - 1);
            }
            if (op->seq > max_seq[op->group]) max_seq[op->group] = op->seq;
        }
    }
    /* 2. one op per member per (group, seq), consistent */
    for (int g = 0; g < s->ngroups; g++)
        if (!(inst[g] = calloc((size_t)max_seq[g] + 1, sizeof **inst)))
            FAIL("out of memory checking the schedule");
    for (int r = 0; r < s->world; r++) {
        const ep_rank_sched *rs = &s->ranks[r];
        for (int i = 0; i < rs->nops; i++) {
            const ep_op *op = &rs->ops[i];
            if (!ep_op_is_comm(op)) continue;
            instance *in = &inst[op->group][op->seq];
            if (in->count++ == 0) {
                in->first = r;
                in->first_idx = i;
            } else if (!consistent(s, &s->ranks[in->first].ops[in->first_idx], op, in->first, r)) {
                op_label(s, r, i, what, sizeof what);
                op_label(s, in->first, in->first_idx, other, sizeof other);
                FAIL("%s and %s are one collective (communicator %d, seq %d) but differ in kind "
                     "or size",
                     what, other, op->group, op->seq);
            }
        }
    }
    for (int g = 0; g < s->ngroups; g++)
        for (int q = 0; q <= max_seq[g]; q++)
            if (inst[g][q].count != s->groups[g].size) {
                const instance *in = &inst[g][q];
                if (in->count)
                    op_label(s, in->first, in->first_idx, what, sizeof what);
                else
                    snprintf(what, sizeof what, "nothing");
                FAIL("communicator %d (%s, %d members) seq %d has %d ops (first: %s)", g,
                     ep_group_kind_name(s->groups[g].kind), s->groups[g].size, q, in->count, what);
            }
    /* 3. names */
    for (int r = 0; r < s->world; r++)
        if (check_names(s, r, err) != 0) goto done;
    /* 4. runs to the end */
    if (run_all(s, max_seq, err) != 0) goto done;
    rc = 0;
done:
    for (int g = 0; inst && g < s->ngroups; g++)
        free(inst[g]);
    free(inst);
    free(max_seq);
    return rc;
}
