/* sim_report: what a run means - iteration metrics, exposed communication, idle time - and the
 * output files (summary JSON, per-op CSV, Chrome trace). Definitions: docs/epsim.md, "Metrics". */
#ifndef SIM_REPORT_H
#define SIM_REPORT_H

#include <stdio.h>
#include "ep_metrics.h"
#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_engine.h"
#include "sim_platform.h"

typedef struct {
    ep_step_metrics step;    /* the figures epref reports too (ep_metrics.h) */
    double thd_pad_tokens;   /* hybridep THD padding rows over all dispatch/combine */
    double thd_wasted_bytes; /* those rows x hidden x 2 bytes */
    long ntransfers, nevents;
    long ncompute, noutside;   /* compute ops, of them outside the calibrated shapes */
    double outside_fraction;   /* their share of the compute ops' time alone */
    int sample_n; /* --sample-microbatches: the steps of n and 2n microbatches simulated and the
                     figures extrapolated (sim_sample.h); 0: the whole step simulated */
    int sample_default; /* sampled without --sample-microbatches: the step is that large */
} sim_metrics;

int sim_metrics_compute(const ep_sched *s, const sim_result *r, const sim_platform *p,
                        sim_metrics *m);

/* Writers: each file appears whole or not at all, and with the others of a set (ep_io.h). Return
 * 0, or -1 with err. `model` names the model simulated (the preset or argument files, or
 * "built-in default"). */
int sim_write_summary_json(const char *path, const char *model, const ep_sched *s,
                           const sim_metrics *m, const sim_platform *p, const sim_calib *c,
                           char err[EP_ERRLEN]);
int sim_write_csv(const char *path, const ep_sched *s, const sim_result *r, char err[EP_ERRLEN]);
int sim_write_trace(const char *path, const ep_sched *s, const sim_result *r, const sim_platform *p,
                    char err[EP_ERRLEN]);
/* The human summary; its first line names the model and the platform. */
void sim_print_summary(FILE *f, const char *model, const ep_sched *s, const sim_metrics *m,
                       const sim_platform *p, const sim_calib *cal);

#endif
