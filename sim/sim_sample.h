/* sim_sample: the step of many microbatches from two shorter ones (--sample-microbatches N;
 * docs/epsim.md, "Sampled steps").
 *
 * Once a pipeline is full, each further microbatch adds the same ops to every rank, each waiting
 * for what the one before it waited for, so every additive figure of the step (its time, the
 * idle and exposed times, host syncs, bytes, ops) grows by the same amount per microbatch. The
 * step of M microbatches per pipeline is then the step of 2N plus (M - 2N) / N times the
 * difference between the steps of 2N and N, with N past the pipeline's fill (N >= 2 x PP). The
 * rates follow from that time and the whole batch; the memory peak and the model state are the
 * 2N step's (a step holds at most its fill's microbatches at once). Routing is drawn per
 * microbatch as in the whole step.
 */
#ifndef SIM_SAMPLE_H
#define SIM_SAMPLE_H

#include "ep_config.h"
#include "sim_calib.h"
#include "sim_platform.h"
#include "sim_report.h"

/* What --sample-microbatches ARG asks of the validated cfg: ARG a number of microbatches per
 * pipeline n, or "auto" for 2 x PP (at least 2: past the pipeline's fill). Returns 1 with *n and
 * the configurations of n and 2n microbatches (global batch n x DP x micro batch) in a and b; 0
 * when the whole step is to be simulated (no ARG, n 0, or at most 2n microbatches); -1 with err
 * when ARG is no count, n is below 2 x PP or not a step Megatron can schedule. */
int sim_sample_plan(const char *arg, const ep_config *cfg, int *n, ep_config *a, ep_config *b,
                    char err[EP_ERRLEN]);

/* A step estimated at this many ops or more is sampled when --sample-microbatches is not given:
 * on the published suite a sampled step is within 0.03% of the whole one at a third to a sixth of
 * its time and memory (docs/epsim.md, "Sampled steps"); smaller steps run whole in seconds. */
#define SIM_SAMPLE_DEFAULT_OPS 2e7

/* The --sample-microbatches argument a run takes: arg when given; else "auto" for a step of
 * whole_ops >= SIM_SAMPLE_DEFAULT_OPS estimated ops unless per-op outputs (--csv, --trace),
 * which need the whole step, are asked for; else NULL (the whole step). */
const char *sim_sample_default(const char *arg, double whole_ops, int per_op_outputs);

/* Simulates the step of cfg in a child process (SimGrid runs once per process) and returns its
 * figures in m. Returns 0, or -1 with err (the child's own message where it gave one). */
int sim_sample_run_child(const ep_config *cfg, const sim_platform *p, const sim_calib *c,
                         sim_metrics *m, char err[EP_ERRLEN]);

/* out = b + (total - 2n) / n x (b - a) for the additive figures of the steps a (n microbatches
 * per pipeline) and b (2n); rates from the extrapolated time; the simulator's own counts (ops
 * simulated, transfers, events) are the two runs' sums; out->sample_n = n. */
void sim_sample_extrapolate(const sim_metrics *a, const sim_metrics *b, int n, int total,
                            sim_metrics *out);

#endif
