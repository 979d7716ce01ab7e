/* sim_sample: the step of many microbatches from two shorter ones (sim_sample.h). */
#include "sim_sample.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_sched.h"
#include "sim_child.h"
#include "sim_engine.h"

/* a copy of cfg with n microbatches per pipeline, validated */
static int with_microbatches(const ep_config *cfg, int n, ep_config *out, char err[EP_ERRLEN]) {
    *out = *cfg;
    out->global_batch_size = n * cfg->data_parallel_size * cfg->micro_batch_size;
    char e[EP_ERRLEN];
    int valid = ep_config_validate(out, e) == 0;
    if (valid && ep_config_num_microbatches(out) == n) return 0;
    if (valid) /* validated, but the batch splits otherwise */
        snprintf(e, EP_ERRLEN, "global batch %d gives %d microbatches", out->global_batch_size,
                 ep_config_num_microbatches(out));
    snprintf(err, EP_ERRLEN, "--sample-microbatches %d: a step of %d microbatches: %.400s", n, n,
             e);
    return -1;
}

int sim_sample_plan(const char *arg, const ep_config *cfg, int *n, ep_config *a, ep_config *b,
                    char err[EP_ERRLEN]) {
    int pp = cfg->pipeline_model_parallel_size, fill = 2 * pp > 2 ? 2 * pp : 2;
    *n = 0;
    if (!arg) return 0;
    if (!strcmp(arg, "auto")) {
        *n = fill;
    } else {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (*end || end == arg || errno || v < 0 || v > (1 << 20)) {
            snprintf(err, EP_ERRLEN,
                     "--sample-microbatches '%.64s' is not a number of microbatches or auto", arg);
            return -1;
        }
        *n = (int)v;
    }
    if (*n == 0) return 0;
    if (*n < fill) {
        snprintf(err, EP_ERRLEN,
                 "--sample-microbatches %d: at least %d microbatches per pipeline (2 x PP, past "
                 "the pipeline's fill) are needed",
                 *n, fill);
        return -1;
    }
    if (ep_config_num_microbatches(cfg) <= 2 * *n) return 0;
    if (with_microbatches(cfg, *n, a, err) != 0 || with_microbatches(cfg, 2 * *n, b, err) != 0)
        return -1;
    return 1;
}

const char *sim_sample_default(const char *arg, double whole_ops, int per_op_outputs) {
    if (arg) return arg;
    return !per_op_outputs && whole_ops >= SIM_SAMPLE_DEFAULT_OPS ? "auto" : NULL;
}

/* what the child hands back: its status, then its figures or its message */
typedef struct {
    int rc;
    sim_metrics m;
    char err[EP_ERRLEN];
} child_reply;

typedef struct {
    const ep_config *cfg;
    const sim_platform *p;
    const sim_calib *c;
} child_step;

/* In the child (sim_child.h): the step of ctx's config, its figures or its error in out. */
static int run_step(void *ctx, void *out) {
    const child_step *st = ctx;
    child_reply *r = out;
    r->rc = -1;
    ep_sched s;
    if (ep_sched_build(st->cfg, &s, r->err) != 0) return 0;
    sim_result res;
    sim_engine_opts eo = sim_engine_defaults();
    eo.progress = 0;
    if (sim_engine_run(&s, st->p, st->c, &eo, &res, r->err) == 0) {
        if (sim_metrics_compute(&s, &res, st->p, &r->m) == 0)
            r->rc = 0;
        else
            snprintf(r->err, EP_ERRLEN, "out of memory computing metrics");
        sim_result_free(&res);
    }
    ep_sched_free(&s);
    return 0;
}

int sim_sample_run_child(const ep_config *cfg, const sim_platform *p, const sim_calib *c,
                         sim_metrics *m, char err[EP_ERRLEN]) {
    static child_reply r; /* static: its message is EP_ERRLEN long */
    child_step st = {cfg, p, c};
    if (sim_child_call(run_step, &st, &r, sizeof r) != 0) {
        snprintf(err, EP_ERRLEN, "--sample-microbatches: the shorter step's process failed");
        return -1;
    }
    if (r.rc != 0) {
        snprintf(err, EP_ERRLEN, "%s", r.err);
        return -1;
    }
    *m = r.m;
    return 0;
}

void sim_sample_extrapolate(const sim_metrics *a, const sim_metrics *b, int n, int total,
                            sim_metrics *out) {
    double k = (double)(total - 2 * n) / n;
#define EXTRA(x) (b->x + k * (b->x - a->x))
    *out = *b;
    ep_step_metrics *s = &out->step;
    s->iteration_time_s = EXTRA(step.iteration_time_s);
    for (int c = 0; c < EP_COMM_NUM; c++)
        s->exposed_s[c] = EXTRA(step.exposed_s[c]);
    s->exposed_total_s = EXTRA(step.exposed_total_s);
    s->compute_busy_s = EXTRA(step.compute_busy_s);
    s->idle_s = EXTRA(step.idle_s);
    s->host_wait_s = EXTRA(step.host_wait_s);
    s->peer_wait_s = EXTRA(step.peer_wait_s);
    s->pipeline_wait_s = EXTRA(step.pipeline_wait_s);
    s->a2a_bytes = EXTRA(step.a2a_bytes);
    s->host_syncs = (long)(EXTRA(step.host_syncs) + 0.5);
    out->thd_pad_tokens = EXTRA(thd_pad_tokens);
    out->thd_wasted_bytes = EXTRA(thd_wasted_bytes);
    out->ncompute = (long)(EXTRA(ncompute) + 0.5);
    out->noutside = (long)(EXTRA(noutside) + 0.5);
#undef EXTRA
    /* the whole batch's work in the extrapolated time */
    double T = s->iteration_time_s, Tb = b->step.iteration_time_s;
    double rate = T > 0 ? (double)total / (2 * n) * Tb / T : 0;
    s->tokens_per_s *= rate;
    s->tokens_per_s_per_gpu *= rate;
    s->tflops_per_gpu *= rate;
    s->mfu *= rate;
    s->bubble_fraction = T > 0 ? s->idle_s / T : 0;
    /* what was simulated */
    s->nops = a->step.nops + b->step.nops;
    out->ntransfers = a->ntransfers + b->ntransfers;
    out->nevents = a->nevents + b->nevents;
    out->sample_n = n;
}
