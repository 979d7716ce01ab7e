/* sim_topo: what the platform connects, as transfers need it - nodes and rails, the relay of a
 * cross-rail transfer, route latencies, zones, and the NVSwitch (star) nodes whose flows can be
 * regrouped. Built once per run from a loaded platform (docs/epsim.md,
 * "Platform files" and "Collectives").
 */
#ifndef SIM_TOPO_H
#define SIM_TOPO_H

#include <simgrid/forward.h>
#include <stdint.h>

#include "sim_platform.h"

typedef struct {
    const sim_platform *p;
    int world;       /* GPUs the run uses */
    int nnodes, gpn; /* nodes of the platform, GPUs per node (the largest local index + 1) */
    int nends;       /* transfer endpoints: ngpus, twice that with NIC hosts */
    int *node_local; /* [nnodes*gpn] rank at (node, local index) or -1 */
    /* star nodes (sim_topo_find_stars): every route between two of the node's GPUs is the
     * sender's own link out and the receiver's own link in, all of one latency */
    uint8_t *star; /* [nnodes] */
    int nstars;    /* nodes with star set */
    double nic_bw; /* bytes/s of a rail's route between two nodes' NIC hosts (its narrowest
                    * link; sim_topo_find_nic_rate), 0 without NIC hosts or with one node */
} sim_topo;

int sim_topo_init(sim_topo *t, const sim_platform *p, int world);
/* Finds the star nodes; needs routes (the platform sealed). Returns 0, or -1 out of memory. */
int sim_topo_find_stars(sim_topo *t);
/* Sets nic_bw; needs routes too. */
void sim_topo_find_nic_rate(sim_topo *t);
void sim_topo_free(sim_topo *t);

/* The GPU of a's node on b's rail: where a transfer from a to b crosses to the NICs (-1 on a flat
 * platform whose node lacks that local index). */
static inline int sim_topo_relay(const sim_topo *t, int a, int b) {
    return t->node_local[t->p->node[a] * t->gpn + t->p->local[b]];
}

/* The zone a flow between GPUs a and b runs in: its node when both are in one, else its rail
 * (flows between nodes are on one rail once relayed). Zones are numbered nodes first. */
static inline int sim_topo_zone(const sim_topo *t, int a, int b) {
    const sim_platform *p = t->p;
    return p->node[a] == p->node[b] ? p->node[a] : t->nnodes + p->local[a];
}

/* Task endpoint of GPU r in a flow between GPUs a and b (sim_platform_endpoint): its NIC host
 * between nodes where the platform has NIC hosts, else the GPU host. */
static inline int sim_topo_endpoint(const sim_topo *t, int r, int a, int b) {
    const sim_platform *p = t->p;
    return p->nic && p->node[a] != p->node[b] ? p->ngpus + r : r;
}

/* Latency of the route a transfer from GPU a to GPU b takes: inside a node or without NIC hosts
 * the GPUs' route; between nodes the NICs' route, after the NVLink hop to the GPU on b's rail when
 * a is on another (as long as a flat platform's shortest route). */
double sim_topo_latency(const sim_topo *t, int a, int b);

#endif
