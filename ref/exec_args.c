/* The flags of `epref run` (exec_args.h): plain C, no CUDA. */
#include "exec_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_io.h"
#include "ep_opts.h"

/* --trace P, --summary-json P: writable paths */
static int take_output(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)ctx;
    if (ep_output_check(v, err)) return -1;
    *(const char **)row->target = v;
    return 0;
}

static int unknown(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    (void)ctx;
    if (strncmp(arg, "--", 2) == 0)
        ep_config_unknown_flag(arg + 2, err); /* a Megatron-LM flag not modelled says why */
    else
        snprintf(err, EP_ERRLEN, "unknown flag %.200s", arg);
    return -1;
}

/* epref run's own flags (the model's are ep_config_parse's); o NULL: for --help. */
static const ep_opt *exec_table(exec_opts *o) {
    static exec_opts none;
    static ep_opt rows[5];
    if (!o) o = &none;
    const ep_opt t[] = {
        {.name = "--trace",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_output,
         .target = &o->trace,
         .arg = "P",
         .help = "Chrome trace of the reported iteration (all ranks, rank 0 writes)"},
        {.name = "--summary-json",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_output,
         .target = &o->summary,
         .arg = "P",
         .help = "epsim's summary keys, measured"},
        {.name = "--iters",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_INT,
         .target = &o->iters,
         .min = 1,
         .max = 100000,
         .arg = "N",
         .help = "measured iterations (default 5); the median one is reported"},
        {.name = "--warmup",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_INT,
         .target = &o->warmup,
         .min = 0,
         .max = 100000,
         .arg = "W",
         .help = "iterations run first and not measured (default 2)"},
        {.name = NULL},
    };
    _Static_assert(sizeof t <= sizeof rows, "exec_table: rows too small");
    memcpy(rows, t, sizeof t);
    return rows;
}

void exec_args_print_help(FILE *f) {
    ep_opts_print_help(f, exec_table(NULL), 19);
}

int exec_args_parse(int argc, char **argv, int world, exec_opts *o, char err[EP_ERRLEN]) {
    memset(o, 0, sizeof *o);
    o->iters = 5;
    o->warmup = 2;
    ep_config_defaults(&o->cfg);
    ep_arglist pos, rest;
    memset(&pos, 0, sizeof pos);
    memset(&rest, 0, sizeof rest);
    if (ep_config_parse(&o->cfg, argc, argv, &pos, &rest, err)) return 2;
    /* the flags ep_config_parse handed back, each with the value that followed it */
    ep_opts p = {exec_table(o), unknown, NULL, 0};
    if (ep_opts_parse(&p, rest.count, (char *const *)rest.items, err)) return 2;
    if (o->trace && o->summary && !strcmp(o->trace, o->summary)) {
        snprintf(err, EP_ERRLEN, "--trace and --summary-json name the same file %.200s", o->trace);
        return 2;
    }
    if (pos.count) {
        snprintf(err, EP_ERRLEN, "unexpected argument '%.200s'", pos.items[0]);
        return 2;
    }
    if (o->cfg.world_size == 0) o->cfg.world_size = world;
    if (ep_config_validate(&o->cfg, err)) return 2;
    if (o->cfg.moe_expert_capacity_factor > 0) { /* its kernels route every selection */
        snprintf(err, EP_ERRLEN,
                 "--moe-expert-capacity-factor: epref runs dropless MoE only (epsim simulates "
                 "token dropping)");
        return 2;
    }
    if (o->cfg.world_size != world) {
        snprintf(err, EP_ERRLEN, "the configuration needs %d ranks but %d were launched",
                 o->cfg.world_size, world);
        return 2;
    }
    return 0;
}
