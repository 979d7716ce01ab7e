/* The event-driven executor of a schedule (sim_engine.h; docs/epsim.md, "Execution model"). */
#include "sim_engine.h"

#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xbt/config.h>
#include <xbt/log.h>

#include "sim_bigmem.h"
#include "sim_child.h"
#include "sim_cost.h"
#include "sim_power.h"
#include "sim_share.h"
#include "sim_heap.h"
#include "sim_algo.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(epsim_engine, root, "epsim: schedule executor");

enum { EV_LAUNCH, EV_END, EV_GO, EV_DONE, EV_FINISH, EV_SH_MOVE, EV_SH_END };
/* ST_LAUNCHED: the host issued the op (launch_t known); ST_WAKE: also at the head of its stream
 * with deps done, an EV_LAUNCH pending at launch_t, and t.end holds from when it waited for nothing
 * but the host (the result's compute xfer, sim_engine.h) */
enum { ST_PENDING, ST_LAUNCHED, ST_WAKE, ST_RUNNING, ST_DONE };
#define NS          EP_NUM_STREAMS
#define MAX_RUNNING 16
/* How many ops ahead of the one it issues a rank's host prefetches records: a rank's next events
 * come a whole round of the other ranks' events later, when the lines have long arrived. */
#define ISSUE_PREFETCH 8
#define OWN_MAX        4 /* a GPU's own links: NVLink out and in, NIC out and in */

typedef struct {
    int n, arrived;
    long off; /* members in eng.members[off .. off+n), group order */
    int group;
    int npieces;         /* SimGrid tasks of the transfer (sim_flows_finish splits large ones) */
    int left;            /* of them still running */
    sg_exec_t exec;      /* the one task, from coll_begin to coll_go */
    sg_exec_t *more;     /* with several pieces: all of them, from coll_begin to coll_go */
    int shv;             /* timed by the engine (sim_share.h): its first piece, the others by .next */
} coll_t;

/* What an event reads and writes of an op, in 32 bytes (not the op itself): one cache miss per op
 * instead of one per array, which is what grows with the GPU count. The times become the result
 * (sim_op_time) when the run ends; until the op starts, t.xfer holds when the host issued it
 * (launch_slot). */
typedef struct {
    sim_op_time t;
    int16_t deps_left; /* deps not yet done (ep_op.ndeps is 16 bits too) */
    uint8_t state : 3;
    uint8_t stream : 3;
    uint8_t sync : 1; /* a host sync: its completion releases the host */
    int32_t coll;     /* collective instance, -1 if none */
} op_rec;
_Static_assert(sizeof(op_rec) == 32, "an op record is one half cache line");
_Static_assert(NS <= 8, "op_rec.stream has 3 bits");

/* One stream of one GPU; a rank's four fill one cache line. Its running op is its head op in
 * ST_RUNNING: no busy flag of its own. */
typedef struct {
    double free; /* its next op may start then (op_gap_s after the last) */
    int head;    /* next op in eng.st_list, up to end */
    int end;
} stream_t;

/* A rank's host thread: it has issued ops up to next, the last at t (or left a host sync at t). */
typedef struct {
    double t;
    int next;    /* index of the next op it issues, in the rank's order */
    int blocked; /* it issued a host sync that has not completed */
} host_t;

/* A compute op running on a GPU, in one cache line: an update touches the slots in use only. */
typedef struct {
    int op;       /* global index */
    uint32_t ver; /* version of the slot's pending EV_END (0: none yet) */
    double progress, rate, last;
    double min_end; /* the op's last call is issued then: it cannot end before */
    sim_work work;
} comp_slot;

/* One GPU. Running compute ops sit in slots; their progress state lives here, not per op, so that
 * memory per op stays small. An EV_END is valid while its op's slot carries the version it was
 * scheduled with: a re-rating that changes a slot's rate gives it a new version and a new end. */
typedef struct {
    int ncomp;
    uint32_t ver;   /* last version handed out */
    int comm_sms;   /* SMs held by running communication kernels */
    int nxfer;      /* transfers in flight touching this GPU */
    int nxfer_nccl; /* ... of them NCCL ones (no SMs of their own in the schedule) */
    int nxfer_ce;   /* ... of them on copy engines (no SMs) */
    int nwait_nccl; /* NCCL operations launched on this GPU whose peers have not all arrived:
                       their kernel already holds its blocks, spinning */
    double slow;    /* transfer slowdown this GPU imposes on its links now (1: none) */
    int dirty;      /* compute or transfers changed since its links were last set */
    sim_power power; /* its recent tensor-core duty (the power cap, sim_power.h) */
    _Alignas(64) comp_slot comp[MAX_RUNNING]; /* running compute ops */
} gpu_t;

/* Links whose bandwidth follows the compute on the GPUs they belong to (docs/epsim.md,
 * "Interference"): a GPU's own links are the first link of its routes out and the last of its
 * routes in; a transfer crossing them runs slower while that GPU computes. */
typedef struct {
    int nlinks;
    sg_link_t *link;        /* [nlinks] */
    double *nominal;        /* [nlinks] bandwidth in the platform file */
    double *applied;        /* [nlinks] bandwidth set now */
    int *own_n, *own;       /* GPU r's links: own[r * OWN_MAX .. + own_n[r]) */
    int *owner_off, *owner; /* CSR: link l's GPUs */
    int *dirty_list, ndirty;
} throttle_t;

typedef struct {
    const ep_sched *s;
    const sim_platform *p;
    const sim_calib *c;
    sim_cost cost;
    throttle_t thr;
    int throttling; /* a transfer slowdown is calibrated (> 1): links follow compute */
    int world;
    long nops;
    int *off;     /* rank r's ops are off[r] .. off[r+1] (global index) */
    op_rec *rec;  /* [nops] */
    int *dep_off; /* CSR of dependents: dep_list[dep_off[o] .. dep_off[o+1]) wait on op o */
    int *dep_list;
    stream_t *st; /* [W*NS] */
    int *st_list; /* ops by stream: stream k's are st_list[st[k].head .. st[k].end) */
    host_t *host; /* [W] */
    gpu_t *gpu;
    coll_t *coll;
    long ncoll;
    int *members;
    double *grp_lat;
    sim_heap heap;
    double now;
    sg_exec_t *act;
    long *act_coll;
    int nact, actcap;
    sim_topo topo;
    sim_flows flows;
    int direct_ok;    /* transfers are timed by the engine (sim_engine_opts.direct) */
    int own;          /* ... and the run can: SimGrid's solver is the one sim_share follows */
    sim_share share;
    const ep_op **scratch_ops;
    int *scratch_ranks;
    sim_result *res; /* its launch waits grow as they come (res->nwait, wait_cap) */
    long wait_cap;
    double *anchor_r; /* [actcap] remaining ratios of act[] at anchor_t */
    double anchor_t;  /* observation time of anchor_r */
    int anchor_ok;    /* anchor_r valid: no change since, every transfer past its latency */
    double t_safe;    /* own events before this time precede every transfer completion */
    long ndone;       /* ops completed (progress) */
    int progress;     /* sim_engine_opts.progress */
    double t0, t_sim0, t_shown; /* progress: when the run and the simulation began, when the line
                                   was last written */
    int shown;          /* a progress line is on the terminal */
    int failed;
    char *err;
} engine;

/* sim_platform_load.cpp */
long sim_exec_wait_any_for(sg_exec_t *execs, size_t n, double timeout);
void sim_exec_release(sg_exec_t exec);

static void net_changed(engine *e);

static engine *E; /* the one simulation of this process (SimGrid allows one) */

/* The schedule entry of op g of rank r (callers know the rank: no per-op rank array to read). */
static inline const ep_op *op_of(const engine *e, long g, int r) {
    return &e->s->ranks[r].ops[g - e->off[r]];
}

/* Launch time of an op the host issued and that has not started yet: the result's xfer field is
 * free until then, and the engine's per-op memory is what limits dgx1024 runs. */
static inline double *launch_slot(const engine *e, long o) {
    return &e->rec[o].t.xfer;
}

static void fail(engine *e, const char *msg) {
    if (!e->failed) snprintf(e->err, EP_ERRLEN, "%s", msg);
    e->failed = 1;
}

static void push(engine *e, double t, int type, long a, uint32_t ver, int rank) {
    if (sim_heap_push(&e->heap, t, type, (int)a, ver, rank) != 0)
        fail(e, "out of memory in the event heap");
}

/* ---------------------------------------------------------------- GPU sharing */

/* What moves a transfer's data, for its effect on the GPU's compute (sim_cost.h) */
static sim_xfer_class xfer_class_of(const engine *e, const ep_op *op) {
    return sim_xfer_class_of(&e->s->cfg, op);
}

static void mark_dirty(engine *e, int r) {
    gpu_t *g = &e->gpu[r];
    if (!e->throttling || g->dirty) return;
    g->dirty = 1;
    e->thr.dirty_list[e->thr.ndirty++] = r;
}

static void gpu_update(engine *e, int r) {
    gpu_t *g = &e->gpu[r];
    mark_dirty(e, r);
    const sim_calib *cal = e->c;
    double power = 1.0; /* the power cap's flop-time factor */
    if (sim_power_on(cal)) {
        double w = 0;
        for (int i = 0; i < g->ncomp; i++)
            w += sim_power_weight(cal, op_of(e, g->comp[i].op, r), &g->comp[i].work);
        sim_power_set(&g->power, cal, e->now, w);
        power = sim_power_factor(cal, &g->power);
    }
    if (g->ncomp == 0) return;
    double sm = e->p->sm_count[r];
    double avail = sm - g->comm_sms;
    if (avail < 0.05 * sm) /* oversubscribed SMs still time-slice */
        avail = 0.05 * sm;
    double fsm_sms = avail / sm;
    /* the transfers beside the compute (sim_share_slowdown) */
    const int running[SIM_XF_NUM] = {[SIM_XF_NCCL] = g->nxfer_nccl,
                                     [SIM_XF_CE] = g->nxfer_ce,
                                     [SIM_XF_KERNEL] = g->nxfer - g->nxfer_nccl - g->nxfer_ce};
    double fh = 1.0 - e->c->comm_hbm_fraction * g->nxfer;
    if (fh < 0.1) fh = 0.1;
    /* ops on other streams: each adds its calibrated slowdown for this op's class beside its own
     * (docs/epsim.md, "Compute"); 2 each is an even split of SMs and HBM */
    int nmem = 0;
    for (int i = 0; i < g->ncomp && g->ncomp > 1; i++)
        nmem += sim_work_memory_bound(&g->comp[i].work);
    for (int i = 0; i < g->ncomp; i++) {
        comp_slot *c = &g->comp[i];
        double fsm = fsm_sms;
        double slow = sim_share_slowdown(cal, &c->work, running, g->nwait_nccl, g->comm_sms);
        if (slow > 1 && 1.0 / slow < fsm) fsm = 1.0 / slow;
        double a = c->work.t_flop * power / fsm, b = c->work.t_mem / fh;
        double share = 1.0;
        if (g->ncomp > 1) {
            int mem = sim_work_memory_bound(&c->work);
            int om = nmem - mem, oc = g->ncomp - 1 - om; /* the others, by class */
            double sc = mem ? cal->corun_memory_compute : cal->corun_compute_compute;
            double sm = mem ? cal->corun_memory_memory : cal->corun_compute_memory;
            share = 1.0 + oc * (sc - 1.0) + om * (sm - 1.0);
        }
        double dur = c->work.t0 + (a > b ? a : b) * share;
        if (c->ver && c->rate == 1.0 / dur) continue; /* its pending end still holds */
        if (c->rate > 0) c->progress += (e->now - c->last) * c->rate;
        if (c->progress > 1) c->progress = 1;
        c->last = e->now;
        c->rate = 1.0 / dur;
        c->ver = ++g->ver;
        push(e, e->now + (1.0 - c->progress) * dur, EV_END, c->op, c->ver, r);
    }
}

/* ---------------------------------------------------------------- link throttling */

static double gpu_slow(const engine *e, int r) {
    const gpu_t *g = &e->gpu[r];
    if (g->ncomp == 0 || g->nxfer == g->nxfer_ce) return 1.0; /* copy engines: not slowed */
    return sim_xfer_slowdown(e->c, g->nxfer_nccl > 0 ? SIM_XF_NCCL : SIM_XF_KERNEL);
}

/* Sets the bandwidth of the links of GPUs whose compute or transfers changed, before time moves
 * on: SimGrid (or sim_share) integrates every transfer at the new rate from now. */

static void throttle_flush(engine *e) {
    throttle_t *t = &e->thr;
    int moved = 0;
    for (int i = 0; i < t->ndirty; i++) {
        int r = t->dirty_list[i];
        e->gpu[r].dirty = 0;
        double slow = gpu_slow(e, r);
        if (slow == e->gpu[r].slow) continue;
        e->gpu[r].slow = slow;
        for (int j = r * OWN_MAX; j < r * OWN_MAX + t->own_n[r]; j++) {
            int l = t->own[j];
            double f = 1.0;
            for (int k = t->owner_off[l]; k < t->owner_off[l + 1]; k++)
                if (e->gpu[t->owner[k]].slow > f) f = e->gpu[t->owner[k]].slow;
            double bw = t->nominal[l] / f;
            if (bw == t->applied[l]) continue;
            t->applied[l] = bw;
            if (e->own) { /* no SimGrid task runs: setting SimGrid's link (a simcall) is moot */
                sim_share_set_bandwidth(&e->share, t->link[l], bw);
                continue;
            }
            if (!moved && e->nact > 0 && simgrid_get_clock() < e->now) sg_actor_sleep_until(e->now);
            moved = 1;
            sg_link_set_bandwidth(t->link[l], bw);
        }
    }
    t->ndirty = 0;
    if (moved && e->nact > 0) net_changed(e);
}

/* Adds link l to GPU r's own links (once), numbering links by their SimGrid data slot. */
static void own_link(engine *e, int r, sg_link_t l) {
    throttle_t *t = &e->thr;
    intptr_t id = (intptr_t)sg_link_get_data(l);
    if (id == 0) {
        id = ++t->nlinks;
        sg_link_set_data(l, (void *)id);
        t->link[id - 1] = l;
        t->nominal[id - 1] = t->applied[id - 1] = sg_link_get_bandwidth(l);
    }
    for (int j = r * OWN_MAX; j < r * OWN_MAX + t->own_n[r]; j++)
        if (t->own[j] == id - 1) return;
    if (t->own_n[r] < OWN_MAX) t->own[r * OWN_MAX + t->own_n[r]++] = (int)(id - 1);
}

static int throttle_setup(engine *e) {
    throttle_t *t = &e->thr;
    const sim_platform *p = e->p;
    int W = e->world;
    e->throttling = e->c->nccl_compute_slowdown > 1 || e->c->ep_compute_slowdown > 1;
    if (!e->throttling) return 0;
    t->link = calloc((size_t)W * OWN_MAX + 1, sizeof *t->link);
    t->nominal = calloc((size_t)W * OWN_MAX + 1, sizeof *t->nominal);
    t->applied = calloc((size_t)W * OWN_MAX + 1, sizeof *t->applied);
    t->own_n = calloc((size_t)W + 1, sizeof *t->own_n);
    t->own = calloc((size_t)W * OWN_MAX + 1, sizeof *t->own);
    t->dirty_list = calloc((size_t)W + 1, sizeof *t->dirty_list);
    if (!t->link || !t->nominal || !t->applied || !t->own_n || !t->own || !t->dirty_list) return -1;
    xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
    for (int r = 0; r < W; r++) {
        /* one peer in the node and one on the same rail elsewhere: their routes start and end
         * with every link that is this GPU's own */
        int peers[2] = {-1, -1};
        for (int q = 0; q < p->ngpus && (peers[0] < 0 || peers[1] < 0); q++) {
            if (q == r) continue;
            if (peers[0] < 0 && p->node[q] == p->node[r]) peers[0] = q;
            if (peers[1] < 0 && p->node[q] != p->node[r] && p->local[q] == p->local[r])
                peers[1] = q;
        }
        for (int k = 0; k < 2; k++) {
            if (peers[k] < 0) continue;
            /* the peer on the rail: through the NIC hosts where the platform has them */
            const sg_host_t *h = k == 1 && p->nic ? p->nic : p->host;
            for (int dir = 0; dir < 2; dir++) {
                xbt_dynar_reset(d);
                sg_host_get_route(h[dir ? peers[k] : r], h[dir ? r : peers[k]], d);
                unsigned n = xbt_dynar_length(d);
                if (n > 0) own_link(e, r, xbt_dynar_get_as(d, dir ? n - 1 : 0, sg_link_t));
            }
        }
    }
    xbt_dynar_free(&d);
    t->owner_off = calloc((size_t)t->nlinks + 1, sizeof *t->owner_off);
    t->owner = calloc((size_t)W * OWN_MAX + 1, sizeof *t->owner);
    if (!t->owner_off || !t->owner) return -1;
    for (int r = 0; r < W; r++)
        for (int j = r * OWN_MAX; j < r * OWN_MAX + t->own_n[r]; j++)
            t->owner_off[t->own[j] + 1]++;
    for (int l = 0; l < t->nlinks; l++)
        t->owner_off[l + 1] += t->owner_off[l];
    int *fill = malloc(sizeof *fill * ((size_t)t->nlinks + 1));
    if (!fill) return -1;
    memcpy(fill, t->owner_off, sizeof *fill * ((size_t)t->nlinks + 1));
    for (int r = 0; r < W; r++)
        for (int j = r * OWN_MAX; j < r * OWN_MAX + t->own_n[r]; j++)
            t->owner[fill[t->own[j]]++] = r;
    free(fill);
    for (int r = 0; r < W; r++)
        e->gpu[r].slow = 1.0;
    return 0;
}

static void throttle_free(throttle_t *t, int own) {
    for (int l = 0; l < t->nlinks; l++) { /* leave the platform as loaded */
        if (!own) sg_link_set_bandwidth(t->link[l], t->nominal[l]);
        sg_link_set_data(t->link[l], NULL);
    }
    free(t->link);
    free(t->nominal);
    free(t->applied);
    free(t->own_n);
    free(t->own);
    free(t->owner_off);
    free(t->owner);
    free(t->dirty_list);
}

/* ---------------------------------------------------------------- host and streams */

static void try_start(engine *e, int r, int st);

/* When the GPU takes op up: a compute op as soon as the host began issuing it (its start event
 * is recorded before the launch calls, so a GPU that waits for the calls waits inside the op);
 * communication, host syncs and ops of a CUDA graph (launched with it) once issued. */
static double ready_t(const engine *e, const ep_op *op, double launch_t) {
    if (ep_op_is_comm(op) || op->kind == EP_OP_HOST_SYNC || op->graph) return launch_t;
    return launch_t - (sim_op_host_s(&e->cost, op, 0) - e->c->op_overhead_s);
}

/* The host issues ops in order, sim_op_host_s each, and stops after a host sync until it
 * completes. Issuing is done lazily, when a stream wants op o (its head, deps done) and o is not
 * issued yet: the launch times are the same as if the host had run ahead, but an op's schedule
 * entry and record are then read and written just before the GPU takes it up, not many ops
 * earlier (with 1024 ranks the ops issued ahead no longer stay in cache until they start).
 * Until an op starts, its record keeps launch_t (launch_slot) and when the GPU may take it up
 * (t.start). */
static void host_issue(engine *e, int r, long o) {
    const ep_rank_sched *rs = &e->s->ranks[r];
    host_t *h = &e->host[r];
    while (!h->blocked && e->off[r] + h->next <= o) {
        int i = h->next++;
        if (i + ISSUE_PREFETCH < rs->nops) { /* an op spans two lines */
            long ahead = e->off[r] + i + ISSUE_PREFETCH;
            __builtin_prefetch(&rs->ops[i + ISSUE_PREFETCH]);
            __builtin_prefetch((const char *)&rs->ops[i + ISSUE_PREFETCH] + 64);
            __builtin_prefetch(&e->rec[ahead], 1);
            __builtin_prefetch(&e->dep_off[ahead]);
        }
        const ep_op *op = &rs->ops[i];
        op_rec *rc = &e->rec[e->off[r] + i];
        h->t += sim_op_host_s(&e->cost, op, op->group >= 0 ? e->s->groups[op->group].size : 0);
        *launch_slot(e, e->off[r] + i) = h->t;
        rc->t.start = ready_t(e, op, h->t);
        rc->state = ST_LAUNCHED;
        if (rc->sync) h->blocked = 1;
    }
}

/* Op o of rank r is done. A communication op's caller has given its SMs back. */
static void complete(engine *e, long o, int r) {
    op_rec *rc = &e->rec[o];
    e->ndone++;
    rc->state = ST_DONE;
    rc->t.end = e->now;
    stream_t *st = &e->st[(long)r * NS + rc->stream];
    st->free = e->now + e->c->op_gap_s;
    st->head++;
    for (int d = e->dep_off[o]; d < e->dep_off[o + 1]; d++) {
        long x = e->dep_list[d];
        if (--e->rec[x].deps_left == 0) try_start(e, r, e->rec[x].stream);
    }
    try_start(e, r, rc->stream);
    if (rc->sync && e->host[r].blocked) { /* the host goes on: streams may wait for its ops */
        e->host[r].blocked = 0;
        e->host[r].t = e->now + e->c->host_sync_s;
        for (int st = 0; st < NS; st++)
            try_start(e, r, st);
    }
}

static void coll_begin(engine *e, long id, long last);

/* A communication op of rank r that waited for nothing but its launch since `from` (its times
 * are the transfer's, so the wait is kept beside them: sim_result.wait_t). */
static void launch_wait(engine *e, int r, double from) {
    sim_result *res = e->res;
    if (res->nwait == e->wait_cap) {
        long cap = e->wait_cap ? 2 * e->wait_cap : 1024;
        int *rank = realloc(res->wait_rank, sizeof *rank * (size_t)cap);
        if (rank) res->wait_rank = rank;
        double *t = realloc(res->wait_t, sizeof *t * 2 * (size_t)cap);
        if (t) res->wait_t = t;
        if (!rank || !t) {
            fail(e, "out of memory for the launch waits");
            return;
        }
        e->wait_cap = cap;
    }
    res->wait_rank[res->nwait] = r;
    res->wait_t[2 * res->nwait] = from;
    res->wait_t[2 * res->nwait + 1] = e->now;
    res->nwait++;
}

static void start_op(engine *e, long o, int r) {
    const ep_op *op = op_of(e, o, r);
    /* woken at its ready time: it may have waited for the host's launch since t.end */
    double host_wait_from = e->rec[o].state == ST_WAKE ? e->rec[o].t.end : e->now;
    e->rec[o].state = ST_RUNNING;
    double launch_t = *launch_slot(e, o);
    e->rec[o].t.start = e->rec[o].t.xfer = e->now;
    if (op->kind == EP_OP_HOST_SYNC) { /* nothing on the GPU but its events */
        if (e->c->op_event_s > 0)
            push(e, e->now + e->c->op_event_s, EV_FINISH, o, 0, r);
        else
            complete(e, o, r);
        return;
    }
    if (ep_op_is_comm(op)) {
        if (host_wait_from < e->now) launch_wait(e, r, host_wait_from);
        if (op->sms > 0) {
            e->gpu[r].comm_sms += op->sms;
            gpu_update(e, r);
        }
        long id = e->rec[o].coll;
        if (id < 0) { /* not matched to any group: nothing to move */
            if (op->sms > 0) e->gpu[r].comm_sms -= op->sms;
            complete(e, o, r);
            return;
        }
        if (++e->coll[id].arrived == e->coll[id].n) {
            coll_begin(e, id, o);
        } else if (xfer_class_of(e, op) ==
                   SIM_XF_NCCL) { /* its kernel waits on the GPU for the peers */
            e->gpu[r].nwait_nccl++;
            gpu_update(e, r);
        }
        return;
    }
    if (host_wait_from < e->now) e->rec[o].t.xfer = host_wait_from;
    sim_work w;
    sim_op_work(&e->cost, op, e->p->peak_flops[r], e->p->hbm_bw[r], &w);
    double alone = sim_work_alone(&w);
    e->res->ncompute++;
    e->res->compute_s += alone;
    if (w.outside) {
        e->res->noutside++;
        e->res->outside_s += alone;
    }
    if (alone <= 0) {
        complete(e, o, r);
        return;
    }
    gpu_t *g = &e->gpu[r];
    if (g->ncomp == MAX_RUNNING) {
        fail(e, "more than 16 compute ops running on one GPU");
        return;
    }
    comp_slot *c = &g->comp[g->ncomp++];
    c->op = (int)o;
    c->work = w;
    c->progress = 0;
    c->rate = 0;
    c->ver = 0;
    c->last = e->now;
    /* the last call (a grouped GEMM's last expert) still has its own share of work to do once
     * the host issued it */
    int calls = op->kind == EP_OP_GROUPED_GEMM && op->batch > 1 ? op->batch : 1;
    c->min_end = launch_t + alone / calls;
    gpu_update(e, r);
}

/* Starts the head op of stream st of rank r if it is issued, its deps are done and the stream is
 * free (its running op is its head, not ST_LAUNCHED). */
static void try_start(engine *e, int r, int st) {
    const stream_t *s = &e->st[(long)r * NS + st];
    if (s->head == s->end) return;
    long o = e->st_list[s->head];
    op_rec *rc = &e->rec[o];
    if (rc->deps_left > 0) return;
    if (rc->state == ST_PENDING) host_issue(e, r, o);
    if (rc->state != ST_LAUNCHED) return;
    double t = rc->t.start; /* ready time, until it starts */
    double other = s->free > e->now ? s->free : e->now; /* ready but for the host from then */
    if (s->free > t) t = s->free;
    if (t > e->now) {
        rc->t.end = other < t ? other : t;
        rc->state = ST_WAKE;
        push(e, t, EV_LAUNCH, o, 0, r);
        return;
    }
    start_op(e, o, r);
}

/* ---------------------------------------------------------------- collectives */

static double ring_latency(engine *e, int group) {
    if (e->grp_lat[group] >= 0) return e->grp_lat[group];
    const ep_group *g = &e->s->groups[group];
    double m = 0;
    for (int i = 0; i < g->size && g->size > 1; i++) {
        double l = sim_topo_latency(&e->topo, g->ranks[i], g->ranks[(i + 1) % g->size]);
        if (l > m) m = l;
    }
    return e->grp_lat[group] = m;
}

/* Builds the flows of instance id into e->flows (sim_algo_build over its members); returns the
 * time the algorithm adds beyond the task. */
static double task_flows(engine *e, long id) {
    const coll_t *c = &e->coll[id];
    const int *granks = e->s->groups[c->group].ranks; /* members are in group order */
    for (int i = 0; i < c->n; i++) {
        e->scratch_ranks[i] = granks[i];
        e->scratch_ops[i] = op_of(e, e->members[c->off + i], granks[i]);
    }
    double fixed = 0;
    int ring = e->scratch_ops[0]->algo == EP_ALGO_RING;
    sim_algo_args a = {e->s, e->c, e->scratch_ops, e->scratch_ranks, c->n,
                       ring ? ring_latency(e, c->group) : 0};
    sim_algo_build(&e->flows, &a, &fixed);
    return fixed;
}

/* The SimGrid tasks of the flows in e->flows for instance id (one per piece). Returns 0, or -1
 * out of memory. */
static int task_execs(engine *e, long id) {
    coll_t *c = &e->coll[id];
    sim_flows *f = &e->flows;
    c->npieces = f->npieces;
    if (f->npieces > 1 && !(c->more = malloc(sizeof *c->more * (size_t)f->npieces))) return -1;
    sg_host_t hosts[f->nhosts];
    for (int k = 0; k < f->npieces; k++) {
        int h0 = f->piece_host[k], nh = f->piece_host[k + 1] - h0;
        for (int h = 0; h < nh; h++)
            hosts[h] = sim_platform_endpoint(e->p, f->ends[h0 + h]);
        sg_exec_t x = sg_actor_parallel_exec_init(nh, hosts, NULL, f->matrix + f->piece_mat[k]);
        if (c->more)
            c->more[k] = x;
        else
            c->exec = x;
    }
    return 0;
}

/* The transfer of instance id starts: every member arrived, `last` the one that came last (the
 * others' NCCL kernels were waiting, counted in nwait_nccl). */
static void coll_begin(engine *e, long id, long last) {
    coll_t *c = &e->coll[id];
    const int *granks = e->s->groups[c->group].ranks;
    for (int i = 0; i < c->n; i++) {
        long o = e->members[c->off + i];
        int r = granks[i];
        sim_xfer_class k = xfer_class_of(e, op_of(e, o, r));
        if (k == SIM_XF_NCCL && o != last) e->gpu[r].nwait_nccl--;
        e->rec[o].t.xfer = e->now;
        e->gpu[r].nxfer++;
        e->gpu[r].nxfer_nccl += k == SIM_XF_NCCL;
        e->gpu[r].nxfer_ce += k == SIM_XF_CE;
        gpu_update(e, r);
    }
    double fixed = task_flows(e, id);
    if (e->flows.nhosts == 0) {
        push(e, e->now + fixed, EV_DONE, id, 0, -1);
        return;
    }
    if (e->own) {
        c->npieces = e->flows.npieces;
        c->shv = sim_share_add(&e->share, &e->flows, id);
        if (c->shv < -1) {
            fail(e, "out of memory for a transfer");
            return;
        }
    } else if (task_execs(e, id) != 0) {
        fail(e, "out of memory for the tasks of a transfer");
        return;
    }
    push(e, e->now + fixed, EV_GO, id, 0, -1);
}

static void coll_done(engine *e, long id) {
    coll_t *c = &e->coll[id];
    const int *granks = e->s->groups[c->group].ranks;
    for (int i = 0; i < c->n; i++) {
        long o = e->members[c->off + i];
        int r = granks[i];
        const ep_op *op = op_of(e, o, r);
        sim_xfer_class k = xfer_class_of(e, op);
        e->gpu[r].nxfer--;
        e->gpu[r].nxfer_nccl -= k == SIM_XF_NCCL;
        e->gpu[r].nxfer_ce -= k == SIM_XF_CE;
        if (op->sms > 0) e->gpu[r].comm_sms -= op->sms;
        complete(e, o, r);
        gpu_update(e, r);
    }
}

/* Piece v of a transfer timed by the engine: its end at its present rate (a newer version replaces
 * the event). */
static void share_schedule(engine *e, int v) {
    sh_var *x = &e->share.var[v];
    if (!(x->rate > 0) && x->remains > 0) return; /* not moving: no end to foresee */
    push(e, sim_share_end_time(&e->share, v), EV_SH_END, v, ++x->ver, -1);
}

/* The rates of the pieces whose links changed this instant, once its events are done. */
static void share_flush(engine *e) {
    sim_share_flush(&e->share, e->now);
    for (int i = 0; i < e->share.nchanged; i++)
        share_schedule(e, e->share.changed[i]);
}

/* Starts instance id's SimGrid tasks. */
static void sg_go(engine *e, long id) {
    coll_t *c = &e->coll[id];
    if (simgrid_get_clock() < e->now) sg_actor_sleep_until(e->now);
    while (e->nact + c->npieces >= e->actcap) {
        int cap = e->actcap ? 2 * e->actcap : 256;
        sg_exec_t *a = realloc(e->act, sizeof *a * (size_t)cap);
        long *b = realloc(e->act_coll, sizeof *b * (size_t)cap);
        if (a) e->act = a;
        if (b) e->act_coll = b;
        double *r = realloc(e->anchor_r, sizeof *r * (size_t)cap);
        if (r) e->anchor_r = r;
        if (!a || !b || !r) {
            fail(e, "out of memory tracking transfers");
            return;
        }
        e->actcap = cap;
    }
    net_changed(e);
    for (int k = 0; k < c->npieces; k++) {
        sg_exec_t x = c->more ? c->more[k] : c->exec;
        sg_exec_start(x);
        e->act[e->nact] = x;
        e->act_coll[e->nact] = id;
        e->nact++;
    }
    c->left = c->npieces;
    c->exec = NULL;
    free(c->more);
    c->more = NULL;
}

/* The last SimGrid task of instance id finished. */
static void sg_done(engine *e, long id) {
    coll_done(e, id);
}

/* A transfer starts: its pieces wait their latency, then share the links (sim_share, or SimGrid
 * on the reference path). */
static void coll_go(engine *e, long id) {
    coll_t *c = &e->coll[id];
    e->res->ntransfers++;
    if (!e->own) {
        sg_go(e, id);
        return;
    }
    c->left = c->npieces;
    for (int v = c->shv; v >= 0; v = e->share.var[v].next) {
        if (!sim_share_start(&e->share, v, e->now))
            push(e, e->now + e->share.var[v].lat, EV_SH_MOVE, v, ++e->share.var[v].ver, -1);
        else if (e->share.var[v].nel == 0) /* nothing to move: it ends now */
            push(e, e->now, EV_SH_END, v, ++e->share.var[v].ver, -1);
    }
}

/* ---------------------------------------------------------------- main loop */

static void handle(engine *e, const sim_event *ev) {
    e->res->nevents++;
    long o = ev->a;
    switch (ev->type) {
    case EV_LAUNCH:
        /* the op is its stream's head with deps done, and nothing moved its start since the
         * event was pushed (the stream runs nothing before its head): start it without looking
         * the head up again, which try_start would */
        if (e->rec[o].state != ST_WAKE) break;
        start_op(e, o, ev->rank);
        break;
    case EV_END: {
        int r = ev->rank;
        gpu_t *g = &e->gpu[r];
        int i = 0;
        while (i < g->ncomp && g->comp[i].op != o)
            i++;
        if (i == g->ncomp || g->comp[i].ver != ev->ver)
            break; /* re-rated since: a newer event stands for this op */
        double min_end = g->comp[i].min_end;
        g->comp[i] = g->comp[--g->ncomp];
        if (min_end > e->now) { /* its work is done, the host has not issued all of it yet */
            push(e, min_end, EV_FINISH, o, 0, r);
            gpu_update(e, r);
            break;
        }
        complete(e, o, r);
        gpu_update(e, r);
        break;
    }
    case EV_FINISH:
        complete(e, o, ev->rank);
        gpu_update(e, ev->rank);
        break;
    case EV_GO:
        coll_go(e, o);
        break;
    case EV_DONE:
        coll_done(e, o);
        break;
    case EV_SH_MOVE: {
        sh_var *x = &e->share.var[o];
        if (x->state != SH_LATENCY || ev->ver != x->ver) break;
        sim_share_move(&e->share, (int)o, e->now);
        if (x->nel == 0) push(e, e->now, EV_SH_END, o, ++x->ver, -1);
        break;
    }
    case EV_SH_END: {
        sh_var *x = &e->share.var[o];
        if (ev->ver != x->ver || x->state != SH_MOVING) break; /* re-rated since */
        long id = x->owner;
        sim_share_end(&e->share, (int)o);
        if (--e->coll[id].left == 0) {
            e->coll[id].shv = -1;
            e->res->ndirect++;
            coll_done(e, id);
        }
        break;
    }
    }
}

/* Next transfer completion, predicted from SimGrid's progress (docs/epsim.md, "Execution model").
 * Between two changes of the set of running transfers (a start, a finish, or the end of a new
 * transfer's latency phase) L07 gives every transfer a constant rate, so two observations of the
 * remaining ratios give each rate, hence when the first transfer will finish. Own events before
 * that instant (with a margin) touch no SimGrid state and are handled without a SimGrid step; the
 * others go through an exact wait as before. A transfer still in its latency phase keeps a
 * remaining ratio of exactly 1 (its LMM variable is disabled), so an anchor is taken only when
 * every running transfer has moved. */
static void net_changed(engine *e) {
    e->anchor_ok = 0;
    e->t_safe = -1.0;
}

static void net_observe(engine *e, double t) {
    int n = e->nact;
    if (e->anchor_ok && t > e->anchor_t) {
        double safe = 1e300;
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            double r = sg_exec_get_remaining_ratio(e->act[i]), r0 = e->anchor_r[i];
            double moved = r0 - r;
            /* too little progress since the anchor to know the rate to 1e-8: keep the anchor */
            if (!(moved > 1e-8 * r0)) ok = 0;
            double rate = moved / (t - e->anchor_t);
            double left = r * (1 - 1e-6) - 1e-8; /* relative margin and SimGrid's precision */
            double when = t + (left > 0 ? left : 0) / rate;
            if (when < safe) safe = when;
        }
        if (ok) e->t_safe = safe;
        return;
    }
    for (int i = 0; i < n; i++) {
        double r = sg_exec_get_remaining_ratio(e->act[i]);
        if (!(r < 1.0)) return; /* still in its latency phase: its rate will change */
        e->anchor_r[i] = r;
    }
    e->anchor_t = t;
    e->anchor_ok = 1;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void human(double x, char *b, size_t n) {
    if (x >= 1e6)
        snprintf(b, n, "%.2f M", x / 1e6);
    else if (x >= 1e3)
        snprintf(b, n, "%.0f k", x / 1e3);
    else
        snprintf(b, n, "%.0f", x);
}

/* The progress line (docs/epsim.md, "Usage"): ops done of all, simulated time, wall time, rate
 * and the time left at that rate; rewritten in place twice a second once the run took 2 s. */
static void progress(engine *e, int last) {
    double now = mono();
    if (!last && (now - e->t0 < 2.0 || now - e->t_shown < 0.5)) return;
    if (last) {
        if (e->shown) fputs("\r\033[K", stderr);
        return;
    }
    e->t_shown = now;
    e->shown = 1;
    double el = now - e->t0, sim_el = now - e->t_sim0;
    double rate = sim_el > 0 ? (double)e->ndone / sim_el : 0;
    char done[32], all[32], r[32];
    human((double)e->ndone, done, sizeof done);
    human((double)e->nops, all, sizeof all);
    human(rate, r, sizeof r);
    double left = rate > 0 ? (double)(e->nops - e->ndone) / rate : 0;
    fprintf(stderr,
            "\repsim: %s of %s ops (%.0f%%), simulated %.3f s, %.0f s elapsed, %s ops/s, "
            "about %.0f s left\033[K",
            done, all, 100.0 * (double)e->ndone / (double)(e->nops ? e->nops : 1), e->now, el, r,
            left);
    fflush(stderr);
}

static void run_loop(engine *e) {
    sim_event ev;
    unsigned tick = 0;
    while (!e->failed) {
        if (e->progress && (++tick & 0x3fff) == 0) progress(e, 0);
        double next = e->heap.n ? sim_heap_top_time(&e->heap) : -1.0;
        /* link rates change only when the instant's own events are done, never twice at once */
        if (e->thr.ndirty && (!e->heap.n || next > e->now)) throttle_flush(e);
        if (e->share.ndirty && (!e->heap.n || next > e->now)) {
            share_flush(e); /* may add events at this instant */
            continue;
        }
        if (e->nact == 0 || (e->heap.n && (next <= simgrid_get_clock() || next < e->t_safe))) {
            /* no transfer can finish first: an own event, without SimGrid */
            if (sim_heap_pop(&e->heap, &ev) != 0) break;
            if (ev.t > e->now) e->now = ev.t;
            handle(e, &ev);
            continue;
        }
        /* wait for any transfer to finish, at most until the next own event */
        int n = e->nact;
        e->res->nwaits++;
        double sgnow = simgrid_get_clock();
        long idx = sim_exec_wait_any_for(e->act, (size_t)n, e->heap.n ? next - sgnow : -1.0);
        if (idx < 0 && e->heap.n) {
            net_observe(e, simgrid_get_clock());
            sim_heap_pop(&e->heap, &ev);
            if (ev.t > e->now) e->now = ev.t;
            handle(e, &ev);
            continue;
        }
        if (idx < 0 || idx >= n) {
            fail(e, "SimGrid returned no finished transfer");
            break;
        }
        double t = simgrid_get_clock();
        if (t < e->now) e->res->nlate++;
        if (t > e->now) e->now = t;
        long id = e->act_coll[idx];
        sim_exec_release(e->act[idx]);
        e->act[idx] = e->act[n - 1];
        e->act_coll[idx] = e->act_coll[n - 1];
        e->nact--;
        net_changed(e);
        if (--e->coll[id].left == 0) sg_done(e, id);
    }
}

static void actor_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    engine *e = E;
    if (throttle_setup(e) != 0 || sim_topo_find_stars(&e->topo) != 0) {
        /* routes: the platform is sealed once the actor runs */
        fail(e, "out of memory for the links of the GPUs");
        return;
    }
    sim_topo_find_nic_rate(&e->topo);
    e->own = e->direct_ok && sim_share_solver_ok();
    if (sim_share_init(&e->share, &e->topo, sg_cfg_get_double("network/TCP-gamma"),
                       sg_cfg_get_double("maxmin/precision"),
                       sg_cfg_get_double("surf/precision")) != 0) {
        fail(e, "out of memory for the links of the GPUs");
        return;
    }
    for (int r = 0; r < e->world; r++)
        for (int st = 0; st < NS; st++)
            try_start(e, r, st);
    e->t_sim0 = mono();
    if (e->t0 <= 0) e->t0 = e->t_sim0;
    run_loop(e);
    if (e->progress) progress(e, 1);
    e->res->nsolves = e->share.nsolves;
    e->res->nkept = e->share.nskipped;
    if (e->res->nlate)
        XBT_WARN("%ld transfers finished before an own event already handled", e->res->nlate);
}

/* ---------------------------------------------------------------- setup */

static uint64_t key_of(int group, int seq) {
    return ((uint64_t)(uint32_t)group << 32) | (uint32_t)seq;
}

static int is_coll_op(const ep_sched *s, const ep_op *op) {
    return ep_op_is_comm(op) && op->group >= 0 && op->group < s->ngroups;
}

/* Position of rank r in group g: a CSR of each rank's memberships (a rank is in a few groups), so
 * that matching ops to members costs no scan of a 1024-rank group per op. */
typedef struct {
    int *off, *group, *pos;
} membership;

static int membership_build(const ep_sched *s, membership *m) {
    long n = 0;
    for (int g = 0; g < s->ngroups; g++)
        n += s->groups[g].size;
    m->off = calloc((size_t)s->world + 2, sizeof *m->off);
    m->group = malloc(sizeof *m->group * (size_t)(n + 1));
    m->pos = malloc(sizeof *m->pos * (size_t)(n + 1));
    if (!m->off || !m->group || !m->pos || n >= INT_MAX) return -1;
    for (int g = 0; g < s->ngroups; g++)
        for (int j = 0; j < s->groups[g].size; j++) {
            int r = s->groups[g].ranks[j];
            if (r >= 0 && r < s->world) m->off[r + 2]++;
        }
    for (int r = 0; r < s->world; r++)
        m->off[r + 2] += m->off[r + 1];
    for (int g = 0; g < s->ngroups; g++) /* off[r + 1] runs ahead as the fill pointer */
        for (int j = 0; j < s->groups[g].size; j++) {
            int r = s->groups[g].ranks[j];
            if (r < 0 || r >= s->world) continue;
            m->group[m->off[r + 1]] = g;
            m->pos[m->off[r + 1]++] = j;
        }
    return 0;
}

static int membership_pos(const membership *m, int r, int g) {
    int pos = -1;
    for (int k = m->off[r]; k < m->off[r + 1]; k++)
        if (m->group[k] == g) pos = m->pos[k]; /* a rank listed twice: its last place */
    return pos;
}

static void membership_free(membership *m) {
    free(m->off);
    free(m->group);
    free(m->pos);
}

/* Collective instances: ops of one (group, seq) form one, each member in its group position; a
 * member missing (or an op whose rank is not in its group) leaves the instance unable to start,
 * which the run reports as a deadlock. coll_op/coll_rank list the ncomm collective ops. */
static int build_collectives(engine *e, const int *coll_op, const int *coll_rank, long ncomm) {
    const ep_sched *s = e->s;
    long tsize = 16;
    while (tsize < 2 * ncomm + 16)
        tsize *= 2;
    uint64_t *keys = malloc(sizeof *keys * (size_t)tsize);
    long *ids = malloc(sizeof *ids * (size_t)tsize);
    membership m = {0};
    e->coll = calloc((size_t)(ncomm + 1), sizeof *e->coll);
    int rc = -1;
    if (!keys || !ids || !e->coll || membership_build(s, &m) != 0) goto done;
    for (long i = 0; i < tsize; i++)
        ids[i] = -1;
    e->ncoll = 0;
    for (long k = 0; k < ncomm; k++) {
        long o = coll_op[k];
        const ep_op *op = op_of(e, o, coll_rank[k]);
        uint64_t key = key_of(op->group, op->seq);
        long h = (long)((key * 0x9E3779B97F4A7C15ull) >> 20) & (tsize - 1);
        while (ids[h] >= 0 && keys[h] != key)
            h = (h + 1) & (tsize - 1);
        if (ids[h] < 0) {
            keys[h] = key;
            ids[h] = e->ncoll;
            e->coll[e->ncoll].group = op->group;
            e->coll[e->ncoll].n = s->groups[op->group].size;
            e->ncoll++;
        }
        e->rec[o].coll = (int32_t)ids[h];
    }
    long tot = 0;
    for (long i = 0; i < e->ncoll; i++) {
        e->coll[i].off = tot;
        tot += e->coll[i].n;
    }
    e->members = malloc(sizeof(int) * (size_t)(tot + 1));
    if (!e->members) goto done;
    for (long i = 0; i < tot; i++)
        e->members[i] = -1;
    for (long k = 0; k < ncomm; k++) {
        long o = coll_op[k], id = e->rec[o].coll;
        int pos = membership_pos(&m, coll_rank[k], e->coll[id].group);
        if (pos < 0 || e->members[e->coll[id].off + pos] >= 0) {
            e->rec[o].coll = -1; /* not a member, or a duplicate: leave it unmatched */
            continue;
        }
        e->members[e->coll[id].off + pos] = (int)o;
    }
    /* an instance with a missing member never completes: arrival counts only real members */
    for (long i = 0; i < e->ncoll; i++)
        for (int j = 0; j < e->coll[i].n; j++)
            if (e->members[e->coll[i].off + j] < 0) e->coll[i].arrived = -1000000000;
    rc = 0;
done:
    free(keys);
    free(ids);
    membership_free(&m);
    return rc;
}

/* The per-op index in two passes over the schedule (each pass streams every rank's ops, which is
 * what setting up 1024 ranks costs): the records, stream lists, dependents (CSR) and collective
 * instances. Returns 0, -1 out of memory, -2 for a dependency outside its rank's ops. */
static int build_index(engine *e) {
    const ep_sched *s = e->s;
    int W = e->world;
    if (e->nops >= INT_MAX) return -1;
    /* a rank's streams in one cache line */
    e->st = aligned_alloc(64, (sizeof *e->st * (size_t)W * NS + 63) / 64 * 64);
    e->st_list = sim_big_malloc(sizeof(int) * (size_t)(e->nops + 1));
    /* dependents of op o: dep_list[dep_off[o] .. dep_off[o + 1]); counted at o + 2, filled
     * through o + 1, which ends as o + 1's start */
    e->dep_off = sim_big_calloc((size_t)e->nops + 2, sizeof *e->dep_off);
    if (!e->st || !e->st_list || !e->dep_off) return -1;
    memset(e->st, 0, sizeof *e->st * (size_t)W * NS);
    long ndeps = 0, ncomm = 0;
    for (int r = 0; r < W; r++) {
        const ep_rank_sched *rs = &s->ranks[r];
        long base = e->off[r];
        for (int i = 0; i < rs->nops; i++) {
            const ep_op *op = &rs->ops[i];
            op_rec *rc = &e->rec[base + i];
            rc->stream = (uint8_t)op->stream & 7;
            rc->sync = op->kind == EP_OP_HOST_SYNC;
            rc->deps_left = op->ndeps;
            rc->coll = -1;
            e->st[(long)r * NS + rc->stream].end++;
            ncomm += is_coll_op(s, op);
            for (int d = 0; d < op->ndeps; d++) {
                int j = rs->deps[op->deps_off + d];
                if (j < 0 || j >= rs->nops) return -2;
                e->dep_off[base + j + 2]++;
            }
        }
        ndeps += rs->ndeps;
    }
    if (ndeps >= INT_MAX || ncomm >= INT_MAX) return -1;
    int at = 0;
    for (long k = 0; k < (long)W * NS; k++) {
        e->st[k].head = at;
        at += e->st[k].end;
        e->st[k].end = e->st[k].head; /* runs ahead as the fill pointer */
    }
    for (long o = 0; o < e->nops; o++)
        e->dep_off[o + 2] += e->dep_off[o + 1];
    e->dep_list = sim_big_malloc(sizeof(int) * (size_t)(ndeps + 1));
    int *coll_op = malloc(sizeof(int) * (size_t)(ncomm + 1));
    int *coll_rank = malloc(sizeof(int) * (size_t)(ncomm + 1));
    int rc = -1;
    if (!e->dep_list || !coll_op || !coll_rank) goto done;
    long nc = 0;
    for (int r = 0; r < W; r++) {
        const ep_rank_sched *rs = &s->ranks[r];
        long base = e->off[r];
        for (int i = 0; i < rs->nops; i++) {
            const ep_op *op = &rs->ops[i];
            long o = base + i;
            e->st_list[e->st[(long)r * NS + e->rec[o].stream].end++] = (int)o;
            for (int d = 0; d < op->ndeps; d++)
                e->dep_list[e->dep_off[base + rs->deps[op->deps_off + d] + 1]++] = (int)o;
            if (is_coll_op(s, op)) {
                coll_op[nc] = (int)o;
                coll_rank[nc++] = r;
            }
        }
    }
    rc = build_collectives(e, coll_op, coll_rank, ncomm);
done:
    free(coll_op);
    free(coll_rank);
    return rc;
}

/* Turns the op records into the result's times in place (each record's times move to a lower or
 * equal address, in increasing order) and gives the rest of the memory back: no second array of
 * 24-byte times at the peak. The records are gone afterwards. */
static sim_op_time *result_times(op_rec **rec, long nops) {
    sim_op_time *t = (sim_op_time *)(void *)*rec;
    for (long o = 0; o < nops; o++)
        memmove(&t[o], &(*rec)[o].t, sizeof *t);
    sim_op_time *shrunk = realloc(t, sizeof *t * (size_t)(nops + 1));
    *rec = NULL;
    return shrunk ? shrunk : t;
}

static void engine_free(engine *e) {
    throttle_free(&e->thr, e->own);
    sim_cost_free(&e->cost);
    free(e->rec);
    free(e->dep_off);
    free(e->dep_list);
    free(e->st);
    free(e->st_list);
    free(e->host);
    free(e->gpu);
    for (long i = 0; e->coll && i < e->ncoll; i++) { /* a run that failed midway */
        free(e->coll[i].more);
    }
    sim_share_free(&e->share);
    free(e->coll);
    free(e->members);
    free(e->grp_lat);
    free(e->act);
    free(e->act_coll);
    free(e->anchor_r);
    free(e->scratch_ops);
    free(e->scratch_ranks);
    sim_heap_free(&e->heap);
    sim_flows_free(&e->flows);
    sim_topo_free(&e->topo);
}

sim_engine_opts sim_engine_defaults(void) {
    /* EPSIM_TRANSFERS=simgrid: every transfer through SimGrid, the reference (docs/epsim.md) */
    const char *t = getenv("EPSIM_TRANSFERS");
    return (sim_engine_opts){.split_hosts = SIM_FLOWS_SPLIT_HOSTS,
                             .direct = !(t && strcmp(t, "simgrid") == 0)};
}

/* Runs the engine's schedule to completion under SimGrid (once per process). */
static void simulate(engine *e) {
    E = e;
    sg_actor_create("epsim", e->p->host[0], actor_main, 0, NULL);
    simgrid_run();
    E = NULL;
}

/* Steps at least this many power time constants long start at duty 0: the cold start then
 * slows at most the first 1/STEADY_TAUS of the step less than it should (under 0.4% of it). */
#define STEADY_TAUS 50.0

/* Whether some rank's compute ops alone take longer than STEADY_TAUS time constants: the step
 * cannot be shorter. */
static int step_is_long(engine *e) {
    double bound = STEADY_TAUS * e->c->power_tau_s;
    for (int r = 0; r < e->world; r++) {
        double sum = 0;
        for (int i = 0; i < e->s->ranks[r].nops; i++) {
            const ep_op *op = &e->s->ranks[r].ops[i];
            if (ep_op_is_comm(op)) continue;
            sim_work w;
            sim_op_work(&e->cost, op, e->p->peak_flops[r], e->p->hbm_bw[r], &w);
            sum += sim_work_alone(&w);
            if (sum > bound) return 1;
        }
    }
    return 0;
}

/* In the child of steady_power_start: the step from a cold start, then each GPU's steady duty
 * (and, with a windowed cap, the duty and held level it ends at: two per GPU). */
static int cold_pass(void *ctx, void *out) {
    engine *e = ctx;
    double *d = out;
    e->progress = 0;
    simulate(e);
    if (e->failed) return -1;
    double makespan = 0;
    for (long o = 0; o < e->nops; o++)
        if (e->rec[o].t.end > makespan) makespan = e->rec[o].t.end;
    for (int r = 0; r < e->world; r++) {
        sim_power *p = &e->gpu[r].power;
        sim_power_set(p, e->c, makespan, 0);
        if (e->c->power_window_s > 0) { /* the window forgets the start within the step */
            d[2 * r] = p->duty, d[2 * r + 1] = p->level;
        } else {
            d[2 * r] = sim_power_steady_start(e->c, p->duty, makespan), d[2 * r + 1] = 0;
        }
    }
    return 0;
}

/* The duty each GPU enters the step at (sim_power_steady_start): the step simulated once from a
 * cold start in a child process (sim_child.h), which hands back each GPU's duty at its end and
 * the step's length. On any failure the GPUs start cold, as before. */
static void steady_power_start(engine *e) {
    if (!sim_power_on(e->c) || step_is_long(e)) return;
    size_t n = sizeof(double) * 2 * (size_t)e->world;
    double *d = malloc(n);
    if (d && sim_child_call(cold_pass, e, d, n) == 0)
        for (int r = 0; r < e->world; r++) {
            e->gpu[r].power.duty = d[2 * r];
            e->gpu[r].power.level = d[2 * r + 1];
        }
    free(d);
}

int sim_engine_run(const ep_sched *s, const sim_platform *p, const sim_calib *c,
                   const sim_engine_opts *opts, sim_result *out, char err[EP_ERRLEN]) {
    sim_engine_opts o = opts ? *opts : sim_engine_defaults();
    memset(out, 0, sizeof *out);
    if (s->world > p->ngpus) {
        snprintf(err, EP_ERRLEN, "world size %d does not fit platform %.400s with %d GPUs",
                 s->world, p->path, p->ngpus);
        return -1;
    }
    engine e;
    memset(&e, 0, sizeof e);
    e.s = s;
    e.p = p;
    e.c = c;
    e.world = s->world;
    e.err = err;
    e.res = out;
    e.t_safe = -1.0;
    out->world = s->world;
    out->off = malloc(sizeof(int) * (size_t)(s->world + 1));
    if (!out->off) {
        snprintf(err, EP_ERRLEN, "out of memory");
        return -1;
    }
    out->off[0] = 0;
    for (int r = 0; r < s->world; r++)
        out->off[r + 1] = out->off[r] + s->ranks[r].nops;
    e.off = out->off;
    e.nops = out->nops = out->off[s->world];
    size_t n = (size_t)e.nops + 1;
    e.rec = sim_big_calloc(n, sizeof *e.rec);
    e.host = calloc((size_t)s->world, sizeof *e.host);
    e.gpu = aligned_alloc(_Alignof(gpu_t), sizeof(gpu_t) * (size_t)s->world);
    e.grp_lat = malloc(sizeof(double) * (size_t)(s->ngroups + 1));
    e.scratch_ops = malloc(sizeof(ep_op *) * (size_t)(p->ngpus + 1));
    e.scratch_ranks = malloc(sizeof(int) * (size_t)(p->ngpus + 1));
    int rc = -1;
    if (!e.rec || !e.host || !e.gpu || !e.grp_lat || !e.scratch_ops || !e.scratch_ranks ||
        sim_topo_init(&e.topo, p, s->world) || sim_flows_init(&e.flows, &e.topo)) {
        snprintf(err, EP_ERRLEN, "out of memory for %ld ops", e.nops);
        goto done;
    }
    e.flows.split_hosts = o.split_hosts;
    e.direct_ok = o.direct;
    e.progress = o.progress;
    e.t0 = o.t0;
    memset(e.gpu, 0, sizeof(gpu_t) * (size_t)s->world);
    for (int g = 0; g < s->ngroups; g++)
        e.grp_lat[g] = -1;
    sim_cost_init(&e.cost, c, &s->cfg);
    int b = build_index(&e);
    if (b == -2) {
        snprintf(err, EP_ERRLEN, "schedule has a dependency outside its rank's ops");
        goto done;
    }
    if (b != 0) {
        snprintf(err, EP_ERRLEN, "out of memory for %ld ops", e.nops);
        goto done;
    }
    steady_power_start(&e);
    simulate(&e);
    if (e.failed) goto done;
    for (long o = 0, r = 0; o < e.nops; o++) {
        while (o >= e.off[r + 1])
            r++;
        if (e.rec[o].state != ST_DONE) {
            char name[256];
            const ep_op *op = op_of(&e, o, (int)r);
            ep_op_name(op, name, sizeof name);
            snprintf(err, EP_ERRLEN,
                     "schedule deadlocked at t=%.6f s: rank %ld op %s (%s) never %s", e.now, r,
                     name, ep_op_kind_name(op->kind),
                     e.rec[o].state == ST_RUNNING ? "finished (a collective member is missing?)"
                                                  : "started");
            goto done;
        }
        if (e.rec[o].t.end > out->makespan) out->makespan = e.rec[o].t.end;
    }
    out->t = result_times(&e.rec, e.nops);
    rc = 0;
done:
    engine_free(&e);
    if (rc != 0) sim_result_free(out); /* nothing of a failed run is handed out */
    return rc;
}

void sim_result_free(sim_result *r) {
    free(r->off);
    free(r->t);
    free(r->wait_rank);
    free(r->wait_t);
    memset(r, 0, sizeof *r);
}
