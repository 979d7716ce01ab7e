/* ep_metrics: the summary figures of one iteration, from the op intervals of every rank.
 *
 * One definition for epsim (simulated intervals) and epref (measured intervals), so both
 * summaries mean the same thing (docs/epsim.md, "Metrics"):
 *   iteration_time_s  the makespan of the iteration;
 *   exposed_s[c]      per rank, time during which an op of comm class c moves data and no compute
 *                     op runs, mean over ranks; an op moves data from `xfer` (all members arrived)
 *                     to its end, so waiting for peers counts as idle, not as communication;
 *   exposed_total_s   the union of those, mean over ranks; compute_busy_s: some compute op runs;
 *   idle_s            neither compute nor a transfer; bubble_fraction = idle_s / iteration time;
 *   host_wait_s       the part of idle_s during which an op waited for nothing but its launch
 *                     (the host issuing it): a compute op reports that wait as [xfer, start), a
 *                     communication op in ep_launch_waits (epsim; epref measures no launch times:
 *                     its compute ops have xfer == start, and it passes no waits);
 *   peer_wait_s       the rest of idle_s during which a collective's member had arrived and
 *                     waited for the others ([start, xfer) of a non-pipeline communication op:
 *                     skew between ranks, load imbalance);
 *   pipeline_wait_s   the rest during which a pipeline send or receive waited for the other
 *                     stage (the pipeline bubble and stage imbalance);
 *   memory_peak       the largest ep_mem_rank_peak over ranks (schedule only, no timing).
 */
#ifndef EP_METRICS_H
#define EP_METRICS_H

#include <stdio.h>
#include "ep_memory.h"
#include "ep_sched.h"

typedef struct {
    double iteration_time_s, tokens_per_s, tokens_per_s_per_gpu, tflops_per_gpu, mfu;
    double exposed_s[EP_COMM_NUM]; /* mean over ranks, by ep_comm_class */
    double exposed_total_s, compute_busy_s, idle_s, bubble_fraction;
    double host_wait_s, peer_wait_s, pipeline_wait_s; /* parts of idle_s, by what it waits for */
    double a2a_bytes;         /* token all-to-all payload, all ranks */
    long host_syncs;          /* host_sync ops, all ranks */
    double model_state_bytes; /* weights, gradients and optimizer state of the fullest GPU */
    long nops;
    /* peak memory of the fullest GPU (ep_memory.h): its rank and its parts */
    ep_mem_peak memory_peak;
    int memory_peak_rank;
} ep_step_metrics;

/* Interval of op `op` of `rank`: start, the moment data began to move (communication) or from
 * which it waited only for its launch (compute; == start when it did not), end. */
typedef void (*ep_op_interval_fn)(const void *ctx, int rank, int op, double *start, double *xfer,
                                  double *end);

/* Launch waits no op interval carries (epsim: communication ops, whose [start, end) is the
 * transfer's): wait k of rank[k] is [t[2k], t[2k+1]), counted in host_wait_s where idle. */
typedef struct {
    long n;
    const int *rank;
    const double *t;
} ep_launch_waits;

/* Computes m for an iteration of length iteration_time_s (> 0 for rates) with per-GPU peak_flops;
 * waits NULL when there are none. Returns 0, or -1 when out of memory. */
int ep_metrics_compute(const ep_sched *s, double iteration_time_s, double peak_flops,
                       ep_op_interval_fn interval, const void *ctx, const ep_launch_waits *waits,
                       ep_step_metrics *m);

/* Writes the shared summary members, "iteration_time_s" ... "a2a_bytes", as JSON object members
 * without braces (the caller adds its own members and closes the object). */
void ep_metrics_write_json(FILE *f, const ep_sched *s, const ep_step_metrics *m);

#endif
