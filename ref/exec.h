/* exec: `epref run` - executes the schedule of core/ (ep_sched_build) for the launched world on
 * real GPUs, op for op, and writes a trace and a summary (docs/epref-run.md). */
#ifndef EXEC_H
#define EXEC_H

#include <stdio.h>
#include "ref_comm.h"

#define EXEC_PEAK_FLOPS 989e12 /* H100/H200 SXM bf16 dense, per GPU: the MFU denominator */

void exec_usage(FILE *f);
/* argv[0] is "run". Returns the exit status: 0, 1 (runtime failure), 2 (bad flags or config). */
int exec_main(ref_ctx *ctx, int argc, char **argv);

#endif
