/* exec_metrics: the summary figures of a measured run, from the op intervals of every rank
 * (docs/epref-run.md, "Metrics"). Definitions are epsim's (docs/epsim.md, "Metrics"):
 *   iteration_time_s   the last op's end on the common time base;
 *   exposed_s[c]       per rank, the time during which an op of class c is transferring and no
 *                      compute op runs, mean over ranks. A collective (or send/recv pair) transfers
 *                      from the moment its last member started it (the latest start over the
 *                      members of (group, seq)) to its end on this rank; waiting for peers counts
 *                      as idle, not as communication.
 * Host-only code: tests/unit can check it without a GPU. */
#ifndef EXEC_METRICS_H
#define EXEC_METRICS_H

#include "ep_metrics.h"
#include "ep_sched.h"

typedef struct {
    double start, end; /* seconds from the aligned base of the iteration */
} exec_span;

/* The figures epsim reports too, by one definition (core/ep_metrics.h). */
typedef ep_step_metrics exec_metrics;

/* t[r][i]: measured interval of op i of rank r. peak_flops: per GPU (bf16 dense).
 * Returns 0, or -1 when out of memory. */
int exec_metrics_compute(const ep_sched *s, exec_span *const *t, double peak_flops,
                         exec_metrics *m);

#endif
