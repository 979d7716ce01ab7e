/* sim_share: the engine's own bandwidth sharing of transfers, the computation SimGrid's ptask_L07
 * model makes, without SimGrid's per-step cost (docs/epsim.md, "Transfers timed by the engine").
 *
 * A piece of a transfer (one SimGrid parallel task: its hosts and byte matrix, sim_flows.h) is a
 * variable over the links of its flows' routes, each weighted by the bytes crossing it, as L07
 * builds its LMM variable: it waits the largest route latency of its flows, then moves at the rate
 * the solver gives it, bounded by L07's window bound network/TCP-gamma / (2 x max(route latency x
 * bytes)). The solver is SimGrid 3.32's FairBottleneck, step for step (its rounds, its count of
 * variables per link, its precision), run on the connected component of the links a change touches
 * instead of on every transfer in flight: a round of FairBottleneck reads and writes only the
 * variables and links of one component, so every other component's result is the same with or
 * without it. SimGrid solved the whole system at every step, and every step walked every transfer
 * in flight (with EP overlap across nodes, 84% of a 256-GPU run).
 *
 * Changes (a piece starts moving, ends, a link's bandwidth changes) mark links; sim_share_flush
 * re-solves their components once per instant, before time moves on, and lists the pieces whose
 * rate changed: the engine moves their end events. */
#ifndef SIM_SHARE_H
#define SIM_SHARE_H

#include <simgrid/forward.h>
#include <stdint.h>

#include "sim_flows.h"

enum { SH_FREE, SH_PENDING, SH_LATENCY, SH_MOVING };

/* A piece: what the solver reads first, then its timing. */
typedef struct {
    int nel;
    uint8_t state;     /* SH_* */
    uint8_t in_list;   /* solver: still growing in this solve */
    uint8_t one_round; /* its component's last solve took one round: its value is that round's */
    unsigned stamp;    /* component walk */
    int *el_link;      /* [nel] links it loads */
    double *el_w;      /* [nel] bytes of its flows on each (L07's weights) */
    double value, mu;  /* solver */
    double bound;      /* L07's window bound (fraction per second), or -1 */
    double remains, rate, last; /* fraction of the piece left at `last`, moving at `rate` */
    double lat;                 /* largest route latency of its flows */
    long owner;                 /* the engine's transfer (collective instance) */
    int next;                   /* next piece of the same owner, or -1 */
    uint32_t ver;               /* version of its pending event */
} sh_var;

typedef struct {
    int var;
    double w;
} sh_ent;

/* A link, in one cache line. */
typedef struct {
    double usage, remaining; /* solver */
    double bw;               /* bandwidth now (link throttling included) */
    double bw_solved;        /* its bandwidth in its component's last solve */
    sh_ent *ent;             /* moving pieces on it, in the order they began moving */
    int n, cap;
    unsigned stamp;
    uint8_t fatpipe;    /* not shared: a flow's load, not the sum, counts (SimGrid's FATPIPE) */
    uint8_t dirty;      /* in the dirty list */
    uint8_t structural; /* since the last flush a piece began moving on it or left it */
    uint8_t sat1;       /* it saturated in the first round of its component's last solve */
    sg_link_t link;
} sh_link;
_Static_assert(sizeof(sh_link) == 64, "a link is one cache line");

typedef struct {
    const sim_topo *t;
    double tcp_gamma;       /* network/TCP-gamma */
    double maxmin_prec;     /* maxmin/precision: a link's remaining capacity below it is 0 */
    double remains_prec;    /* maxmin x surf precision: a piece's remaining work below it is 0 */
    double surf_prec;       /* surf/precision */
    sh_var *var;            /* [nvar] */
    int nvar, varcap, free_head;
    sh_link *link; /* [nlink] */
    int nlink, linkcap;
    /* links by SimGrid pointer: open addressing, [lcap] link id + 1 (0 empty) */
    int *lhash;
    long lcap;
    /* routes between endpoints (sim_platform_endpoint ids): key src * nends + dst */
    uint64_t *rkey;
    int *rval; /* [rcap] route id + 1 (0 empty) */
    long rcap, nroute;
    int *route_off; /* [nroute + 1] its links in route_links */
    int *route_links;
    double *route_lat;
    long route_cap, rlinks_n, rlinks_cap;
    void *dynar; /* xbt_dynar_t scratch */
    /* scratch of a solve */
    int *dirty_links, ndirty, dirtycap;
    int *comp_v, ncomp_v, comp_vcap;
    int *comp_l, ncomp_l, comp_lcap;
    int *sol_v, *sol_l; /* the solver's lists, erased from as it goes */
    int solcap_v, solcap_l;
    int *slot;       /* [linkcap] element of the piece being built on each link, or -1 */
    unsigned cur;    /* stamp */
    int *changed;    /* pieces whose rate changed in the last flush */
    int nchanged, changedcap;
    long nsolves;  /* components solved */
    long nskipped; /* bandwidth changes that left their component's solution as it was */
} sim_share;

/* tcp_gamma, maxmin_prec and surf_prec: SimGrid's configuration of the run. Returns 0 or -1. */
int sim_share_init(sim_share *s, const sim_topo *t, double tcp_gamma, double maxmin_prec,
                   double surf_prec);
void sim_share_free(sim_share *s);

/* Whether the configured SimGrid solver is the one sim_share follows (host/solver
 * fairbottleneck; sim_share_cfg.cpp). */
int sim_share_solver_ok(void);

/* The pieces of the task just built in f (sim_flows_finish), not started: returns the first
 * (the others follow through .next), or -2 out of memory, -1 for none. */
int sim_share_add(sim_share *s, const sim_flows *f, long owner);

/* Piece v starts at `now`: it waits its latency (the engine calls sim_share_move at now + lat;
 * returns 1 when there is none and it moves already). */
int sim_share_start(sim_share *s, int v, double now);

/* Piece v's latency is over: it moves from now on, at the rate the next flush gives it. */
void sim_share_move(sim_share *s, int v, double now);

/* Piece v ended (its end event came): its links are free for the others. */
void sim_share_end(sim_share *s, int v);

/* Link l of SimGrid has bandwidth bw from now on (link throttling; SimGrid's own link is left
 * as it is: no SimGrid task runs while the engine times transfers). */
void sim_share_set_bandwidth(sim_share *s, sg_link_t l, double bw);

/* Re-solves the components of the links changed since the last flush, at time now: s->changed
 * lists the pieces whose rate changed (their remains are brought to now first). */
void sim_share_flush(sim_share *s, double now);

/* When piece v ends at its present rate. */
static inline double sim_share_end_time(const sim_share *s, int v) {
    const sh_var *x = &s->var[v];
    return x->remains <= 0 ? x->last : x->last + x->remains / x->rate;
}

#endif
