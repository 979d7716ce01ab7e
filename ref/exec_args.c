/* The flags of `epref run` (exec_args.h): plain C, no CUDA. */
#include "exec_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_io.h"

int exec_args_parse(int argc, char **argv, int world, exec_opts *o, char err[EP_ERRLEN]) {
    memset(o, 0, sizeof *o);
    o->iters = 5;
    o->warmup = 2;
    ep_config_defaults(&o->cfg);
    ep_arglist pos, rest;
    memset(&pos, 0, sizeof pos);
    memset(&rest, 0, sizeof rest);
    if (ep_config_parse(&o->cfg, argc, argv, &pos, &rest, err)) return 2;
    for (int i = 0; i < rest.count; i++) {
        const char *f = rest.items[i];
        int known = !strcmp(f, "--trace") || !strcmp(f, "--summary-json") ||
                    !strcmp(f, "--iters") || !strcmp(f, "--warmup");
        if (!known) {
            snprintf(err, EP_ERRLEN, "unknown flag %.200s", f);
            return 2;
        }
        const char *v = i + 1 < rest.count ? rest.items[i + 1] : NULL;
        if (!v || !strncmp(v, "--", 2) || !v[0]) {
            snprintf(err, EP_ERRLEN, "%s needs a value", f);
            return 2;
        }
        i++;
        if (!strcmp(f, "--trace") || !strcmp(f, "--summary-json")) {
            if (ep_output_check(v, err)) return 2;
            *(!strcmp(f, "--trace") ? &o->trace : &o->summary) = v;
            continue;
        }
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        int is_iters = !strcmp(f, "--iters");
        if (*end || errno || x < (is_iters ? 1 : 0) || x > 100000) {
            snprintf(err, EP_ERRLEN, "%s %.64s is out of range (%d to 100000)", f, v,
                     is_iters ? 1 : 0);
            return 2;
        }
        *(is_iters ? &o->iters : &o->warmup) = (int)x;
    }
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
