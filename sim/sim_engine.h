/* sim_engine: executes a schedule (ep_sched.h) on a loaded platform and records when every op ran.
 *
 * One SimGrid actor drives an event-driven model of every rank (docs/epsim.md, "Execution model"):
 *  - host: launches ranks[r].ops in order, launch_s each; after a HOST_SYNC op it waits until the
 * op completed on its stream, plus host_sync_s;
 *  - streams: FIFO; an op starts when launched, at the head of its stream and its deps are done;
 *  - compute ops share the GPU: SMs left by running communication kernels (op.sms) are split among
 *    the running compute ops, HBM likewise minus comm_hbm_fraction per running transfer; progress
 * is re-rated whenever that set changes;
 *  - collectives and send/recv start their transfer when every member reached them (group, seq);
 *    the transfer is one L07 parallel task over the platform's links (sim_algo.h), or one per
 *    zone when large; the engine shares the links among them as SimGrid's ptask_L07 model does
 *    (sim_share.h), or (the reference path, sim_engine_opts.direct 0) hands them to SimGrid.
 * Compute, host and transfer events live in the engine's own heap; on the reference path the actor
 * waits on "next own event or any transfer finishing", whichever is first.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_platform.h"

typedef struct {
    double start; /* the op reached the head of its stream with deps done (trace start) */
    double xfer;  /* communication: all members arrived, transfer began; compute: from when it
                     waited for nothing but the host's launch (== start when it did not) */
    double end;
} sim_op_time;

typedef struct {
    int world;
    int *off; /* [world+1] first global op index of each rank */
    long nops;
    sim_op_time *t; /* [nops] */
    double makespan;
    long nevents;    /* engine events processed */
    long ntransfers; /* transfers started (one SimGrid parallel task each, or one per zone) */
    long ndirect;    /* of them, timed by the engine without SimGrid (sim_share.h) */
    long nwaits;     /* SimGrid waits (the rest of the events needed no SimGrid step) */
    long nsolves;    /* link-sharing components the engine solved (sim_share.h) */
    long nkept;      /* bandwidth changes that kept their component's solution: no solve */
    long nlate;      /* transfers seen finishing before engine time (a wrong prediction): 0 */
    /* compute ops started, and those whose shape lies outside the calibration's measured shapes
     * (sim_shape.h: extrapolated), with their times alone */
    long ncompute, noutside;
    double compute_s, outside_s;
    /* communication ops that were ready but for the host issuing them: wait k of rank
     * wait_rank[k] is [wait_t[2k], wait_t[2k+1]) (a compute op's is in its times, sim_op_time) */
    long nwait;
    int *wait_rank;
    double *wait_t;
} sim_result;

/* How the engine hands transfers to SimGrid (sim_engine_defaults). */
typedef struct {
    int split_hosts; /* a transfer over more hosts runs as one SimGrid task per zone (sim_flows.h) */
    int direct;      /* transfers are timed by the engine's own L07 sharing (sim_share.h); 0: every
                        transfer goes through SimGrid (the reference path) */
    int progress;    /* a progress line on stderr once the run has taken 2 s (0: none) */
    double t0;       /* when the run began (CLOCK_MONOTONIC s), for progress; 0: when the
                        simulation begins */
} sim_engine_opts;

/* split_hosts SIM_FLOWS_SPLIT_HOSTS, direct 1 (0 when the environment has
 * EPSIM_TRANSFERS=simgrid), no progress line. */
sim_engine_opts sim_engine_defaults(void);

/* Runs the schedule to completion inside SimGrid (simgrid_init and sim_platform_load done, no actor
 * started yet); opts NULL for the defaults. Returns 0, or -1 with one line in err (deadlock, world
 * larger than the platform). */
int sim_engine_run(const ep_sched *s, const sim_platform *p, const sim_calib *c,
                   const sim_engine_opts *opts, sim_result *out, char err[EP_ERRLEN]);
void sim_result_free(sim_result *r);

#endif
