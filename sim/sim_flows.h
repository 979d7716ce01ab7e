/* sim_flows: the flows of one transfer and the SimGrid parallel task(s) they become.
 *
 * An algorithm (sim_algo.h) adds logical transfers between GPUs; sim_flows_send turns each into
 * flows on the topology (sim_topo.h): NVLink inside a node, the NIC on the same rail, and across
 * rails NVLink to the GPU of the sender's node on the receiver's rail first (PXN), each flow's
 * bytes divided by the achieved-bandwidth efficiency of its link kind, so that nominal link
 * bandwidths stay in the platform file. sim_flows_finish then regroups the flows inside star nodes
 * (at most 2g-1 per node instead of up to g(g-1), the same load on every GPU link), relays the
 * cross-rail flows a schedule placed between nodes, and builds the task's hosts and byte matrix,
 * split into one task per zone (node, rail) over split_hosts hosts (docs/epsim.md, "Collectives").
 */
#ifndef SIM_FLOWS_H
#define SIM_FLOWS_H

#include "sim_calib.h"
#include "sim_topo.h"

/* Tasks over more hosts than this are split by zone. */
#define SIM_FLOWS_SPLIT_HOSTS 512

typedef struct {
    const sim_topo *t;
    /* flows as triplets, then the dense matrix over the hosts they touch */
    long nflows, flowcap;
    int *fsrc, *fdst;
    double *fbytes;
    /* how the algorithm being built moves (sim_flows_begin) */
    double eff_nvl, eff_net;      /* efficiencies of NVLink and network flows */
    const sim_table *nvl_by_flow; /* NVLink efficiency by each flow's bytes (a curve) or NULL */
    int reverse;                  /* combine direction: every flow reversed */
    /* the task(s): endpoints (sim_platform_endpoint ids: GPU r, or ngpus + r for its NIC host) */
    int nhosts;
    int *ends;      /* [2*nends] endpoint of each task host, first nhosts used */
    int *idx_of;    /* [nends] index in ends[] or -1 */
    double *matrix; /* pieces' matrices one after the other, each [h*h] row = source */
    long matcap;
    int npieces;     /* a task over split_hosts hosts is one piece per zone, else 1 */
    int *piece_host; /* [npieces+1] piece k's hosts are ends[piece_host[k] .. piece_host[k+1]) */
    long *piece_mat; /* [npieces+1] its matrix starts at matrix + piece_mat[k] */
    int split_hosts;
    /* scratch */
    int *flow_next;          /* [flowcap] flows of one zone, as a list */
    int *zone_head;          /* [nnodes+gpn] */
    uint8_t *touched;        /* [nnodes] 1 regrouped in this task, 2 left as is */
    int *tlist;              /* [nnodes] touched nodes */
    double *sent, *received; /* [nnodes*gpn] bytes per GPU inside its node */
    long nre;                /* regrouped flows in rsrc/rdst/rbytes [2*nnodes*gpn] */
    int *rsrc, *rdst;
    double *rbytes;
} sim_flows;

int sim_flows_init(sim_flows *f, const sim_topo *t);
void sim_flows_free(sim_flows *f);

/* Starts a new transfer: no flows, NVLink and network efficiencies (an NVLink curve by flow size
 * replaces eff_nvl where given), not reversed. */
void sim_flows_begin(sim_flows *f, double eff_nvl, double eff_net, const sim_table *nvl_by_flow);

/* Efficiency of an NVLink flow of `bytes`: by the curve where there is one. */
double sim_flows_nvl_eff(const sim_flows *f, double bytes);

/* A flow of wire bytes (efficiency already applied) from GPU a to GPU b as it is (reversed in the
 * combine direction); nothing for a == b or bytes <= 0. */
void sim_flows_put(sim_flows *f, int a, int b, double wire_bytes);

/* One logical transfer of payload bytes a -> b: NVLink inside a node, the NIC on the same rail,
 * across rails NVLink to the relay then its NIC (PXN). */
void sim_flows_send(sim_flows *f, int a, int b, double bytes);

/* The task's hosts and byte matrix (see above). After it, f->nhosts, f->ends and f->matrix
 * describe the task (nhosts 0: nothing to move). */
void sim_flows_finish(sim_flows *f);

#endif
