/* sim_algo: the collective algorithms of epsim, one file each under sim/algo/, behind a table
 * indexed by the op's algorithm (ep_op.algo, decided by the generators: core/ep_xfer.h).
 *
 * An algorithm turns one collective or send/recv instance into flows (sim_flows.h): which GPU sends
 * what to which, with the efficiencies and fixed cost of whoever moves the bytes (NCCL, the
 * deepep/hybridep kernels), from the calibration (sim_calib.h: a measured curve for the operation
 * where there is one, else the scalar defaults). Adding an algorithm: a row in the table of
 * sim_algo.c and one file here (docs/architecture.md, "Where to change what").
 */
#ifndef SIM_ALGO_H
#define SIM_ALGO_H

#include "ep_sched.h"
#include "ep_xfer.h"
#include "sim_calib.h"
#include "sim_flows.h"

/* One instance: its members' ops and GPUs in group order. */
typedef struct {
    const ep_sched *s;
    const sim_calib *c;
    const ep_op *const *ops;
    const int *ranks;
    int n;
    double hop_latency_s; /* rings: the largest route latency between neighbours */
} sim_algo_args;

/* Adds the instance's flows to f (begun by sim_algo_build with sim_algo_efficiency's efficiencies),
 * sets *fixed_s to the time it adds beyond the parallel task (base cost, extra ring steps) and
 * returns the payload bytes (before efficiency). */
typedef double (*sim_algo_fn)(sim_flows *f, const sim_algo_args *a, double *fixed_s);

double sim_algo_ring(sim_flows *f, const sim_algo_args *a, double *fixed_s);   /* algo/ring.c */
double sim_algo_direct(sim_flows *f, const sim_algo_args *a, double *fixed_s); /* algo/direct.c */
double sim_algo_kernel(sim_flows *f, const sim_algo_args *a, double *fixed_s); /* algo/kernel.c */
double sim_algo_p2p(sim_flows *f, const sim_algo_args *a, double *fixed_s);    /* algo/p2p.c */


/* The fixed cost of an instance of the op's algorithm (its first member's op), before any extra
 * ring steps: the measured curve's base where the calibration has one, else the scalar default
 * of whoever moves the bytes (NCCL, a send/recv pair, the deepep/hybridep kernels). */
double sim_algo_base_s(const sim_calib *c, const ep_op *op, int members);

/* The efficiencies an instance's flows move at (sim_flows_begin's arguments): over NVLink (by a
 * flow's bytes where a measured curve gives it: nvl_by_flow) and over the NIC, of whoever moves
 * the bytes. One home, read by the algorithms and by epsim search's estimate. nic_bw: the
 * topology's NIC bandwidth (bytes/s), which bounds Hybrid-EP's RDMA leg by its SMs; 0: no bound. */
typedef struct {
    double nvl, net;
    const sim_table *nvl_by_flow; /* NVLink efficiency by a flow's bytes, or NULL: nvl */
} sim_algo_eff;
sim_algo_eff sim_algo_efficiency(const sim_calib *c, const ep_sched *s, const ep_op *op,
                                 int members, double nic_bw);

/* The function of an algorithm; NULL for EP_ALGO_NONE (and out of range). */
sim_algo_fn sim_algo_of(int algo);

/* Builds the instance with the algorithm of its ops (a group of one moves nothing: op_event_s),
 * then the task(s) (sim_flows_finish). Returns the payload bytes; f->nhosts 0: nothing to move. */
double sim_algo_build(sim_flows *f, const sim_algo_args *a, double *fixed_s);

#endif
