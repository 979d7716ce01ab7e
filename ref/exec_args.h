/* exec_args: the flags of `epref run`, parsed and validated without CUDA (docs/epref-run.md), so
 * that bad flags give exit 2 and one line before any GPU call, on any machine (epref checks them
 * in the launcher before it starts a rank, and each rank again). */
#ifndef EXEC_ARGS_H
#define EXEC_ARGS_H

#include <stdio.h>

#include "ep_config.h"

typedef struct {
    ep_config cfg;
    const char *trace, *summary;
    int iters, warmup;
} exec_opts;

/* argv[0] is "run". `world` is the number of launched ranks. Returns 0, or 2 with one line in
 * err (without the "epref: " prefix). */
int exec_args_parse(int argc, char **argv, int world, exec_opts *o, char err[EP_ERRLEN]);
/* Their lines of `epref run --help` (from the option table). */
void exec_args_print_help(FILE *f);

#endif
