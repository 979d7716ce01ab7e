/* sim_report: what a run means - iteration metrics, exposed communication, idle time - and the
 * output files (summary JSON, per-op CSV, Chrome trace). Definitions: docs/epsim.md, "Metrics". */
#ifndef SIM_REPORT_H
#define SIM_REPORT_H

#include <stdio.h>
#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_engine.h"
#include "sim_platform.h"

typedef struct {
    double iteration_time_s, tokens_per_s, tokens_per_s_per_gpu, tflops_per_gpu, mfu;
    double exposed_s[EP_COMM_NUM]; /* mean over ranks, by ep_comm_class */
    double exposed_total_s;        /* mean over ranks of the union */
    double compute_busy_s;         /* mean over ranks: some compute op running */
    double idle_s;                 /* mean over ranks: no compute and no transfer */
    double bubble_fraction;        /* idle_s / iteration_time_s */
    double a2a_bytes;              /* token all-to-all payload, all ranks */
    double thd_pad_tokens;         /* hybridep THD padding rows over all dispatch/combine */
    double thd_wasted_bytes;       /* those rows x hidden x 2 bytes */
    long host_syncs;               /* host_sync ops, all ranks */
    long nops, ntransfers, nevents;
} sim_metrics;

int sim_metrics_compute(const ep_sched *s, const sim_result *r, const sim_platform *p,
                        sim_metrics *m);

/* Writers: each file appears whole or not at all (ep_io.h). Return 0, or -1 with err. */
int sim_write_summary_json(const char *path, const ep_sched *s, const sim_metrics *m,
                           const sim_platform *p, const sim_calib *c, char err[EP_ERRLEN]);
int sim_write_csv(const char *path, const ep_sched *s, const sim_result *r, char err[EP_ERRLEN]);
int sim_write_trace(const char *path, const ep_sched *s, const sim_result *r, const sim_platform *p,
                    char err[EP_ERRLEN]);
void sim_print_summary(FILE *f, const ep_sched *s, const sim_metrics *m, const sim_platform *p);

#endif
