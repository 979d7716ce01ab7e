/* Metrics and output files of a run (sim_report.h). */
#include "sim_report.h"
#include "sim_sample.h"

#include <stdlib.h>
#include <string.h>
#include <xbt/log.h>

#include "ep_cost.h"
#include "ep_io.h"
#include "ep_trace.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(epsim_report, root, "epsim: metrics and outputs");

/* Waiting for launches above this share of the step: the summary says the step is launch-bound */
#define LAUNCH_BOUND 0.10

static void op_interval(const void *ctx, int rank, int op, double *start, double *xfer,
                        double *end) {
    const sim_result *r = ctx;
    const sim_op_time *t = &r->t[r->off[rank] + op];
    *start = t->start;
    *xfer = t->xfer;
    *end = t->end;
}

int sim_metrics_compute(const ep_sched *s, const sim_result *r, const sim_platform *p,
                        sim_metrics *m) {
    memset(m, 0, sizeof *m);
    m->ntransfers = r->ntransfers;
    m->nevents = r->nevents;
    m->ncompute = r->ncompute;
    m->noutside = r->noutside;
    m->outside_fraction = r->compute_s > 0 ? r->outside_s / r->compute_s : 0;
    ep_launch_waits w = {r->nwait, r->wait_rank, r->wait_t};
    if (ep_metrics_compute(s, r->makespan, p->peak_flops[0], op_interval, r, &w, &m->step) != 0)
        return -1;
    for (int k = 0; k < s->world; k++)
        for (int i = 0; i < s->ranks[k].nops; i++) {
            const ep_op *op = &s->ranks[k].ops[i];
            if ((op->kind != EP_OP_A2A_DISPATCH && op->kind != EP_OP_A2A_COMBINE) ||
                op->traffic < 0 || op->traffic >= s->ntraffic)
                continue;
            const ep_traffic *tr = &s->traffic[op->traffic];
            /* counted once per instance: each member carries 1/n of it */
            double pad = (double)tr->thd_pad_tokens;
            if (pad == 0 && tr->thd_padded_tokens > 0 && tr->tokens)
                for (int j = 0; j < tr->n; j++)
                    pad += tr->thd_padded_tokens - tr->tokens[j];
            m->thd_pad_tokens += pad / (tr->n > 0 ? tr->n : 1);
        }
    m->thd_wasted_bytes = m->thd_pad_tokens * s->cfg.hidden_size * EP_BF16;
    return 0;
}

/* s as a JSON string literal into buf (control bytes as \u00XX, quotes and backslashes escaped). */
static void json_text(char *buf, size_t n, const char *s) {
    size_t k = 0;
    if (n < 3) return;
    buf[k++] = '"';
    for (const unsigned char *q = (const unsigned char *)s; *q && k + 8 < n; q++) {
        if (*q == '"' || *q == '\\')
            k += (size_t)snprintf(buf + k, n - k, "\\%c", *q);
        else if (*q < 0x20 || *q == 0x7f)
            k += (size_t)snprintf(buf + k, n - k, "\\u%04x", *q);
        else
            buf[k++] = (char)*q;
    }
    buf[k++] = '"';
    buf[k] = 0;
}

static void num(FILE *f, const char *key, double v, int comma) {
    fprintf(f, "%s\"%s\":%.9g", comma ? "," : "", key, v);
}

int sim_write_summary_json(const char *path, const char *model, const ep_sched *s,
                           const sim_metrics *m, const sim_platform *p, const sim_calib *c,
                           char err[EP_ERRLEN]) {
    ep_outfile o;
    if (ep_outfile_open(&o, path, err) != 0) return -1;
    FILE *f = o.f;
    fputs("{\"model\":", f);
    ep_json_string(f, model);
    fputc(',', f);
    ep_metrics_write_json(f, s, &m->step);
    fputs(",\"thd\":{", f);
    num(f, "pad_tokens", m->thd_pad_tokens, 0);
    num(f, "wasted_bytes", m->thd_wasted_bytes, 1);
    num(f, "wasted_fraction", m->step.a2a_bytes > 0 ? m->thd_wasted_bytes / m->step.a2a_bytes : 0,
        1);
    fputc('}', f);
    fprintf(f, ",\"microbatches\":%d,\"ops\":%ld,\"transfers\":%ld", s->num_microbatches,
            m->step.nops, m->ntransfers);
    if (m->sample_n) /* the steps simulated; the figures above are extrapolated from them */
        fprintf(f, ",\"sampled_microbatches\":[%d,%d]", m->sample_n, 2 * m->sample_n);
    fprintf(f, ",\"compute_outside_calibration\":{\"ops\":%ld,\"of_ops\":%ld", m->noutside,
            m->ncompute);
    num(f, "time_fraction", m->outside_fraction, 1);
    fputc('}', f);
    fputs(",\"topology\":", f);
    ep_json_string(f, p->name);
    fprintf(f, ",\"gpu_memory_bytes\":%.0f", p->hbm_bytes); /* 0: the platform does not say */
    fprintf(f, ",\"memory_fits\":%s",
            p->hbm_bytes > 0 ? (m->step.memory_peak.total <= p->hbm_bytes ? "true" : "false")
                             : "null");
    fputs(",\"config\":", f);
    ep_config_write_json(&s->cfg, f);
    fputs(",\"calibration_file\":", f);
    ep_json_string(f, c->source);
    fputs(",\"calibration\":", f);
    sim_calib_write_json(c, f, 0);
    fputs(",\"meta\":", f);
    char extra[4600];
    snprintf(extra, sizeof extra, "\"platform_file\":");
    json_text(extra + strlen(extra), sizeof extra - strlen(extra), p->name);
    ep_write_meta_json(f, "epsim", extra);
    fputs("}\n", f);
    return ep_outfile_commit(&o, err);
}

int sim_write_csv(const char *path, const ep_sched *s, const sim_result *r, char err[EP_ERRLEN]) {
    ep_outfile o;
    if (ep_outfile_open(&o, path, err) != 0) return -1;
    FILE *f = o.f;
    fputs("rank,stream,name,kind,start_s,end_s,duration_s,bytes,flops,sms\n", f);
    char name[256];
    for (int k = 0; k < s->world; k++)
        for (int i = 0; i < s->ranks[k].nops; i++) {
            const ep_op *op = &s->ranks[k].ops[i];
            const sim_op_time *t = &r->t[r->off[k] + i];
            ep_op_name(op, name, sizeof name);
            fprintf(f, "%d,%s,%s,%s,%.9f,%.9f,%.9f,%.0f,%.0f,%d\n", k, ep_stream_name(op->stream),
                    name, ep_op_kind_name(op->kind), t->start, t->end, t->end - t->start, op->bytes,
                    op->flops, op->sms);
        }
    return ep_outfile_commit(&o, err);
}

static void sim_span(void *ctx, int k, int i, double *start, double *end) {
    const sim_result *r = ctx;
    *start = r->t[r->off[k] + i].start;
    *end = r->t[r->off[k] + i].end;
}

int sim_write_trace(const char *path, const ep_sched *s, const sim_result *r, const sim_platform *p,
                    char err[EP_ERRLEN]) {
    char meta[1024], topo[600];
    json_text(topo, sizeof topo, p->name);
    snprintf(meta, sizeof meta,
             "{\"program\":\"epsim\",\"version\":\"%s\",\"git_revision\":\"%s\",\"topology\":%s}",
             ep_version(), ep_git_revision(), topo);
    return ep_sched_write_trace(path, meta, s, sim_span, (void *)r, err);
}

void sim_print_summary(FILE *f, const char *model, const ep_sched *s, const sim_metrics *m,
                       const sim_platform *p, const sim_calib *cal) {
    const ep_config *c = &s->cfg;
    double T = m->step.iteration_time_s;
    char name[1024];
    fprintf(f,
            "epsim: model %s on %s (%d GPUs used of %d), TP %d PP %d EP %d DP %d, %s dispatcher, "
            "%d microbatches\n",
            model, ep_escape_text(p->name, name, sizeof name), s->world, p->ngpus,
            c->tensor_model_parallel_size, c->pipeline_model_parallel_size,
            c->expert_model_parallel_size, c->data_parallel_size,
            ep_backend_name(ep_config_backend(c)), s->num_microbatches);
    /* the calibration by file name; the full path is in the summary JSON */
    const char *cname = strrchr(cal->source, '/');
    fprintf(f, "  calibration           %s\n", cname ? cname + 1 : cal->source);
    fprintf(f, "  iteration time        %12.6f s\n", T);
    fprintf(f, "  tokens/s              %12.1f\n", m->step.tokens_per_s);
    fprintf(f, "  tokens/s/GPU          %12.1f\n", m->step.tokens_per_s_per_gpu);
    fprintf(f, "  TFLOPS/GPU            %12.1f\n", m->step.tflops_per_gpu);
    fprintf(f, "  MFU                   %12.3f\n", m->step.mfu);
    /* idle split by what it waits for (ep_metrics.h), one line each: a table of label, seconds
     * and what the line means */
    const ep_step_metrics *st = &m->step;
    double other = st->idle_s - st->host_wait_s - st->peer_wait_s - st->pipeline_wait_s;
    const struct {
        const char *label;
        double s;
        const char *what;
    } idle[] = {
        {"waiting for launches", st->host_wait_s, "an op ready but for the host issuing it"},
        {"waiting for peers", st->peer_wait_s, "at collectives: ranks arriving at different times"},
        {"pipeline waits", st->pipeline_wait_s, "a stage waiting for another: bubble, imbalance"},
        {"other waits", other > 0 ? other : 0, "dependencies"},
    };
    fprintf(
        f, "  idle                  %12.6f s  (%.1f%% of the iteration; no compute, no transfer)\n",
        st->idle_s, 100 * st->bubble_fraction);
    for (size_t i = 0; i < sizeof idle / sizeof idle[0]; i++)
        fprintf(f, "    %-20s%12.6f s  (%.1f%%: %s)\n", idle[i].label, idle[i].s,
                T > 0 ? 100 * idle[i].s / T : 0, idle[i].what);
    fprintf(f, "  exposed communication (mean per rank, compute idle while it moves data):\n");
    static const ep_comm_class order[] = {EP_COMM_DISPATCH, EP_COMM_COMBINE, EP_COMM_DP, EP_COMM_PP,
                                          EP_COMM_OTHER};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        fprintf(f, "    %-10s          %12.6f s  (%.1f%%)\n", ep_comm_class_name(order[i]),
                m->step.exposed_s[order[i]], T > 0 ? 100 * m->step.exposed_s[order[i]] / T : 0);
    fprintf(f, "    %-10s          %12.6f s  (%.1f%%)\n", "total", m->step.exposed_total_s,
            T > 0 ? 100 * m->step.exposed_total_s / T : 0);
    fprintf(f, "  host syncs            %12ld\n", m->step.host_syncs);
    /* peak memory of the fullest GPU (ep_memory.h): model state, the activations its schedule
     * holds at once, the dispatch buffers, the allocator's margin, FSDP's unsharded buffers */
    const ep_mem_peak *mp = &m->step.memory_peak;
    double gib = 1024.0 * 1024 * 1024;
    fprintf(f,
            "  peak memory / GPU     %12.1f GiB  (model state %.1f + activations %.1f + buffers "
            "%.1f + margin %.1f",
            mp->total / gib, mp->model_state / gib, mp->activations / gib, mp->buffers / gib,
            mp->margin / gib);
    if (mp->fsdp_params + mp->fsdp_grads > 0) /* Megatron FSDP's unsharded buckets */
        fprintf(f, " + FSDP params %.1f + FSDP grads %.1f", mp->fsdp_params / gib,
                mp->fsdp_grads / gib);
    if (p->hbm_bytes > 0)
        fprintf(f, "; %.0f%% of the GPU's %.1f GiB)\n", 100 * mp->total / p->hbm_bytes,
                p->hbm_bytes / gib);
    else
        fputs(")\n", f);
    if (p->hbm_bytes > 0 && mp->total > p->hbm_bytes)
        fprintf(f,
                "  WARNING: rank %d needs more memory than its GPU has: shard more (EP, PP, "
                "distributed optimizer, FSDP) or recompute activations\n",
                m->step.memory_peak_rank);
    if (m->thd_pad_tokens > 0)
        fprintf(
            f, "  THD padding           %12.0f rows, %.3f GB wasted (%.1f%% of all-to-all bytes)\n",
            m->thd_pad_tokens, m->thd_wasted_bytes / 1e9,
            m->step.a2a_bytes > 0 ? 100 * m->thd_wasted_bytes / m->step.a2a_bytes : 0);
    if (m->noutside > 0) /* shapes beyond what the calibration timed: extrapolated */
        fprintf(f,
                "  outside calibration   %12ld compute ops of %ld (%.1f%% of compute time: shapes "
                "beyond the timed grid, extrapolated)\n",
                m->noutside, m->ncompute, 100 * m->outside_fraction);
    fprintf(f, "  ops simulated         %12ld  (%ld transfers)\n", m->step.nops, m->ntransfers);
    if (m->sample_n) {
        char why[128] = "--sample-microbatches";
        if (m->sample_default)
            snprintf(why, sizeof why,
                     "the default for a step of %.0f M ops or more; --sample-microbatches 0 "
                     "simulates it whole",
                     SIM_SAMPLE_DEFAULT_OPS / 1e6);
        fprintf(f,
                "  sampled: the steps of %d and %d microbatches simulated, the step of %d "
                "extrapolated from them (%s)\n",
                m->sample_n, 2 * m->sample_n, s->num_microbatches, why);
    }
    if (T > 0 && m->step.host_wait_s > LAUNCH_BOUND * T) /* what such a figure rests on */
        fprintf(f,
                "  launch-bound: %.0f%% of the step waits for the host; it scales with the "
                "calibration's host cost per op (one machine's CPU, docs/calibration.md)\n",
                100 * m->step.host_wait_s / T);
}
