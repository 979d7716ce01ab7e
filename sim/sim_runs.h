/* sim_runs: many epsim runs, each in its own process (SimGrid runs one simulation per process),
 * at most N at a time - the machinery `epsim sweep` and `epsim search` share (docs/epsim.md,
 * "Sweeps" and "Search"): the children and their temporary files, cleanup on a signal, reading a
 * run's summary back, the --shard option and the refusal of per-run outputs. */
#ifndef SIM_RUNS_H
#define SIM_RUNS_H

#include <stdio.h>

#include "ep_err.h"
#include "ep_opts.h"

#define SIM_RUNS_MAX_JOBS 256

/* What one run gave: its summary's figures, or its error line as status. */
typedef struct {
    int ok;
    double tps_gpu, iter, tflops, mfu;
    double exp[6];             /* exposed dispatch, combine, dp, pp, other, total (s) */
    double host_wait;          /* idle waiting for launches (s, ep_metrics.h host_wait_s) */
    double state, gpu_mem;     /* model state per GPU and GPU memory, bytes (0: not given) */
    double mem_peak;           /* peak memory of the fullest GPU, bytes */
    int sampled;               /* --sample-microbatches: the shorter simulated step's microbatches
                                  per pipeline (0: the whole step was simulated) */
    char status[256];          /* "ok", or the child's last stderr line, CSV-safe */
} sim_run_result;

/* One batch of runs. args(ctx, i, buf) returns the arguments of run i after "epsim" (NULL-
 * terminated, pointing into buf or into the caller's memory), called in the child. */
typedef struct {
    const char *prog; /* "epsim sweep": the prefix of messages and the temporary folder's name */
    long n;           /* runs */
    const long *ids;  /* [n] names of the runs' temporary files (e.g. their grid index) */
    int jobs;
    int show; /* call progress twice a second once 2 s have passed */
    char **(*args)(void *ctx, long i);
    /* the progress line: runs done, running, left, seconds since the start */
    void (*progress)(void *ctx, long done, long running, long left, double elapsed);
    void *ctx;
} sim_runs;

/* Runs them; res[i] is run i's result. Returns 0, or 1 when the folder or a child could not be
 * made (the message printed). */
int sim_runs_exec(const sim_runs *r, sim_run_result *res);

/* The summary JSON a child wrote, or its last stderr line when it failed (exit status `status`). */
void sim_runs_read_result(sim_run_result *r, const char *json, const char *errfile, int status);

/* Seconds of a monotonic clock. */
double sim_runs_clock(void);

/* --shard i/n: an EP_OPT_CALL row's fn, its target the sim_runs_shard. */
typedef struct {
    int i, n;
} sim_runs_shard;
int sim_runs_shard_opt(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]);
/* Whether configuration k belongs to the shard: k % n == i. */
static inline int sim_runs_mine(long k, const sim_runs_shard *s) {
    return k % s->n == s->i;
}

/* --summary-json, --trace, --csv (EP_OPT_JOINED rows): refused, the runs' outputs are the
 * program's; the row's target is the text after "not available in" ("a sweep"). */
int sim_runs_no_output(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]);

#define SIM_RUNS_STR_(x) #x
#define SIM_RUNS_STR(x)  SIM_RUNS_STR_(x)
/* The option rows of a program of runs (epsim sweep, epsim search): --jobs into *JOBS, --shard
 * into *SHARD, --progress / --no-progress into *SHOW, and --summary-json, --trace, --csv refused
 * (WHAT names the program in the message: "a sweep"). */
#define SIM_RUNS_OPT_ROWS(JOBS, SHARD, SHOW, WHAT)                                                 \
    {.name = "--jobs",                                                                             \
     .takes = EP_OPT_VALUE,                                                                        \
     .kind = EP_OPT_INT,                                                                           \
     .target = (JOBS),                                                                             \
     .min = 1,                                                                                     \
     .max = SIM_RUNS_MAX_JOBS,                                                                     \
     .bad = ": give a number of processes from 1 to " SIM_RUNS_STR(SIM_RUNS_MAX_JOBS)},            \
        {.name = "--shard",                                                                        \
         .takes = EP_OPT_VALUE,                                                                    \
         .kind = EP_OPT_CALL,                                                                      \
         .fn = sim_runs_shard_opt,                                                                 \
         .target = (SHARD)},                                                                       \
        {.name = "--progress", .kind = EP_OPT_FLAG, .target = (SHOW), .set = 1},                   \
        {.name = "--no-progress", .kind = EP_OPT_FLAG, .target = (SHOW), .set = 0},                \
        {.name = "--summary-json",                                                                 \
         .takes = EP_OPT_JOINED,                                                                   \
         .kind = EP_OPT_CALL,                                                                      \
         .fn = sim_runs_no_output,                                                                 \
         .target = (WHAT)},                                                                        \
        {.name = "--trace",                                                                        \
         .takes = EP_OPT_JOINED,                                                                   \
         .kind = EP_OPT_CALL,                                                                      \
         .fn = sim_runs_no_output,                                                                 \
         .target = (WHAT)},                                                                        \
        {.name = "--csv",                                                                          \
         .takes = EP_OPT_JOINED,                                                                   \
         .kind = EP_OPT_CALL,                                                                      \
         .fn = sim_runs_no_output,                                                                 \
         .target = (WHAT)}

#endif
