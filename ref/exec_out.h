/* exec_out: the files of `epref run` - the Chrome trace (ep_trace.h, op names from ep_op_name)
 * and the summary JSON with epsim's keys (docs/epsim.md, "Metrics") plus the measured iteration
 * times. Both are written whole or not at all. */
#ifndef EXEC_OUT_H
#define EXEC_OUT_H

#include "ep_sched.h"
#include "exec_metrics.h"

typedef struct {
    const char *meta_members;  /* "gpu":...,"driver":... (ref_meta_members), no braces */
    int iters, warmup, chosen; /* measured iterations, warm-up, the reported (median) one */
    const double *iter_times;  /* [iters] iteration time of each measured iteration */
    double peak_flops;
    double buffer_bytes; /* device memory of rank 0's executor */
    double device_used_peak; /* largest cudaMemGetInfo total - free over ranks and iterations */
} exec_run_info;

int exec_write_trace(const char *path, const ep_sched *s, exec_span *const *t,
                     const exec_run_info *ri, char err[EP_ERRLEN]);
int exec_write_summary(const char *path, const ep_sched *s, const exec_metrics *m,
                       const exec_run_info *ri, char err[EP_ERRLEN]);
void exec_print_summary(FILE *f, const ep_sched *s, const exec_metrics *m, const exec_run_info *ri);

#endif
