/* sim_direct: a transfer alone on the links of one NVSwitch node, timed without SimGrid.
 *
 * Every route inside a star node (sim_topo_find_stars) is the sender's own link out and the
 * receiver's own link in, all of one latency. A parallel task whose flows all stay in such a node,
 * while no other task uses that node's links, gets from SimGrid's L07 model what follows from
 * those links alone: it waits the route latency, then moves at the rate of its most loaded link
 * (bandwidth / bytes of the task crossing it), capped by L07's TCP-window bound. The engine runs
 * such transfers itself and hands one to SimGrid, with the bytes it has left, as soon as another
 * transfer loads one of its links (docs/epsim.md, "Transfers alone in a node"). SimGrid's ptask
 * solver walks every transfer in flight at every step, so a run whose EP groups each move their own
 * all-to-alls cost O(GPUs^2) there; the DeepSeek-V3 proxy with EP 8 now times 81920 of its 82066
 * transfers on dgx1024 directly. */
#ifndef SIM_DIRECT_H
#define SIM_DIRECT_H

#include "sim_flows.h"

/* A transfer timed directly: its loads, then its progress once running. */
typedef struct {
    int node;        /* the star node its flows stay in */
    double lat;      /* route latency */
    double max_flow; /* bytes of its largest flow (L07's bound) */
    double t_moving; /* when the latency is over and bytes move */
    double progress; /* fraction done at `last` */
    double last;     /* when progress was taken */
    double rate;     /* fraction per second from t_moving or last, whichever is later */
    double load[];   /* [2*gpn] bytes out of each local GPU, then into each */
} sim_direct;

/* The star node every flow of the task just built lies in (GPU hosts only), or -1. */
int sim_direct_node(const sim_flows *f);

/* A sim_direct with the loads of the task just built in f, whose flows are in star node `node`;
 * NULL out of memory. Free with free(). */
sim_direct *sim_direct_new(const sim_flows *f, int node);

/* Its rate (fraction of the task per second) on the links' bandwidths now (sg_link_get_bandwidth:
 * link throttling included), as L07 solves a task alone: the smallest bandwidth / load over the
 * links it loads, capped by tcp_gamma / (2 x latency x largest flow). */
double sim_direct_rate(const sim_flows *f, const sim_direct *d, double tcp_gamma);

/* Its progress until `now` at the rate it had (nothing during the latency). */
void sim_direct_advance(sim_direct *d, double now);

/* When it ends at its present rate. */
double sim_direct_end(const sim_direct *d);

/* A GPU's own NVLink in a star node, as the engine counts who loads it: 2 r out of GPU r,
 * 2 r + 1 into it. */
static inline int sim_direct_link(int gpu, int into) {
    return 2 * gpu + into;
}

/* The GPU links (sim_direct_link) the task just built in f may load: each flow inside a node its
 * sender's link out and its receiver's link in; a flow between nodes none (NIC hosts), or on a flat
 * platform where such routes may cross GPU links (across rails, or rail_uses_nvlink), all four of
 * its ends. Writes them to links[] (room for 4 x f->nflows) and returns how many (repeats
 * possible). */
long sim_direct_touched(const sim_flows *f, int *links);

/* The GPU links a direct transfer loads: writes them to links[] (room for 2 x gpn), returns how
 * many. */
int sim_direct_links(const sim_flows *f, const sim_direct *d, int *links);

#endif
