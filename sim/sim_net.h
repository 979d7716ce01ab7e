/* sim_net: turns one collective / send-recv instance into the byte matrix of a SimGrid parallel
 * task.
 *
 * Algorithms (docs/epsim.md, "Collectives"): ring all-gather / reduce-scatter / all-reduce over the
 * group order; direct all-to-all (NCCL) with cross-rail flows relayed over NVLink to the GPU on the
 * destination's rail (PXN); deepep/hybridep hierarchical: one RDMA copy per destination node to the
 * GPU with the sender's local index, then NVLink fan-out (combine: the reverse); send/recv direct.
 * Bytes are divided by the achieved-bandwidth efficiency of the link kind (sim_calib.h), so that
 * nominal link bandwidths stay in the platform file. Where the calibration has a measured NCCL
 * curve for the operation, its base time and its efficiency at the operation's size (all-to-all:
 * each flow's size) replace the scalar defaults on NVLink.
 */
#ifndef SIM_NET_H
#define SIM_NET_H

#include <simgrid/forward.h>
#include <stdint.h>

#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_platform.h"

/* Tasks over more hosts than this are split by zone (sim_flows.split_hosts, sim_net_build). */
#define SIM_NET_SPLIT_HOSTS 512

typedef struct {
    /* flows as triplets, then the dense matrix over the hosts they touch */
    long nflows, flowcap;
    int *fsrc, *fdst;
    double *fbytes;
    int nhosts;
    int *ends;   /* [nends] endpoint of each task host, first nhosts used (sim_platform_endpoint):
                  * a GPU rank r, or ngpus + r for GPU r's NIC host */
    int *idx_of; /* [nends] index in ends[] or -1 */
    int nends;   /* ngpus, twice that with NIC hosts */
    double *matrix; /* pieces' matrices one after the other, each [h*h] row = source */
    long matcap;
    /* a task of more than split_hosts hosts is split into pieces by zone (sim_net_build) */
    int npieces;
    int *piece_host; /* [npieces+1] piece k's hosts are ends[piece_host[k] .. piece_host[k+1]) */
    long *piece_mat; /* [npieces+1] its matrix starts at matrix + piece_mat[k] */
    int split_hosts;
    int *flow_next;  /* [flowcap] scratch: flows of one zone, as a list */
    int *zone_head;  /* [nnodes+gpn] scratch */
    int *node_local; /* [nnodes*gpn] rank at (node, local index) or -1 */
    int nnodes, gpn, world;
    const sim_platform *p;
    double eff_nvl, eff_net;      /* efficiencies of the algorithm being built */
    const sim_table *nvl_by_flow; /* NVLink efficiency by each flow's bytes (a2a curve) or NULL */
    int reverse;                  /* combine direction: every flow reversed */
    /* regrouping of flows inside a node: star and nstars set by sim_flows_find_stars (none
     * before), the rest scratch */
    uint8_t *star;           /* [nnodes] the node's GPU-to-GPU routes are [own out, own in] */
    int nstars;              /* nodes with star set */
    sg_link_t *star_out;     /* [nnodes*gpn] a star node's GPUs' own links out, by local index */
    sg_link_t *star_in;      /* [nnodes*gpn] ... and in */
    double *star_lat;        /* [nnodes] the latency of its GPU-to-GPU routes */
    int rail_uses_nvlink;    /* without NIC hosts: a route between nodes on one rail crosses a
                                star node's GPU links (found on some pair; 0 on the bundled files) */
    uint8_t *touched;        /* [nnodes] scratch: 1 regrouped in this task, 2 left as is */
    int *tlist;              /* [nnodes] scratch: touched nodes */
    double *sent, *received; /* [nnodes*gpn] bytes per GPU inside its node */
    long nre;                /* regrouped flows in rsrc/rdst/rbytes [2*nnodes*gpn] */
    int *rsrc, *rdst;
    double *rbytes;
} sim_flows;

int sim_flows_init(sim_flows *f, const sim_platform *p, int world);
/* Finds the nodes whose flows sim_net_build may regroup: every route between two of its GPUs is
 * two links, the sender's own link out and the receiver's own link in (one switch), all of one
 * latency. The link loads of a task's flows inside such a node then depend only on what each GPU
 * sends and receives in total, and the task is built with at most 2g-1 flows there instead of up
 * to g(g-1) (an all-to-all of 8 GPUs: 15 instead of 56), each flow one route that SimGrid looks up
 * when the task starts. Needs routes (the platform sealed). Returns 0, or -1 out of memory. */
int sim_flows_find_stars(sim_flows *f);
void sim_flows_free(sim_flows *f);

/* Latency of the route a transfer from GPU a to GPU b takes (flow decomposition above): inside a
 * node or without NIC hosts the GPUs' route; between nodes the NICs' route, after the NVLink hop to
 * the GPU on b's rail when a is on another (as long as a flat platform's shortest route). */
double sim_flows_latency(const sim_flows *f, int a, int b);

/* Fills f for the instance whose member ops are ops[0..n) on ranks[0..n) (group order).
 * Sets *fixed_s to the time the algorithm adds beyond the parallel task (base cost, extra ring
 * steps, each costing nccl_step_s + hop_latency_s). Returns the payload bytes (before efficiency).
 * After it, f->nhosts, f->ends and f->matrix describe the task (nhosts may be 0: nothing to move);
 * with NIC hosts (sim_platform.h), flows between nodes run between the NIC hosts of their GPUs.
 * Over f->split_hosts hosts the task is f->npieces tasks, one per zone (a node's flows, a rail's):
 * piece k's hosts are ends[piece_host[k] .. piece_host[k+1]) and its matrix starts at
 * matrix + piece_mat[k]; otherwise npieces is 1 and the matrix is nhosts x nhosts. */
double sim_net_build(sim_flows *f, const ep_sched *s, const sim_calib *c, const ep_op *const *ops,
                     const int *ranks, int n, double hop_latency_s, double *fixed_s);

/* Bytes one member pushes through its own link for one NCCL operation of kind k over n members
 * of size `bytes` (as the op's bytes field counts it): ring all-gather (n-1) B, reduce-scatter
 * (n-1)/n B, all-reduce 2(n-1)/n B, direct all-to-all (n-1) B (B per peer), send B. */
double sim_net_link_bytes(ep_op_kind k, int n, double bytes);

/* Number of ring steps of a collective of kind k over n members (0 for non-ring kinds). */
int sim_net_ring_steps(ep_op_kind k, int n);

#endif
