/* exec_out: trace and summary files of `epref run` (exec_out.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_io.h"
#include "ep_trace.h"
#include "exec_out.h"

static void meta_extra(char *buf, size_t len, const exec_run_info *ri) {
    snprintf(buf, len,
             "%s,\"timing\":\"CUDA events per op, base event after a world all-reduce; the "
             "median of %d measured iterations after %d warm-up\",\"iters\":%d,\"warmup\":%d",
             ri->meta_members, ri->iters, ri->warmup, ri->iters, ri->warmup);
}

static void exec_span_of(void *ctx, int r, int i, double *start, double *end) {
    exec_span *const *t = ctx;
    *start = t[r][i].start;
    *end = t[r][i].end;
}

int exec_write_trace(const char *path, const ep_sched *s, exec_span *const *t,
                     const exec_run_info *ri, char err[EP_ERRLEN]) {
    /* otherData: the program's metadata object */
    char extra[4096];
    meta_extra(extra, sizeof extra, ri);
    char *meta = NULL;
    size_t mlen = 0;
    FILE *mf = open_memstream(&meta, &mlen);
    if (!mf) {
        snprintf(err, EP_ERRLEN, "out of memory");
        return -1;
    }
    ep_write_meta_json(mf, "epref", extra);
    fclose(mf);
    int rc = ep_sched_write_trace(path, meta, s, exec_span_of, (void *)t, err);
    free(meta);
    return rc;
}

static void num(FILE *f, const char *key, double v, int comma) {
    fprintf(f, "%s\"%s\":%.9g", comma ? "," : "", key, v);
}

int exec_write_summary(const char *path, const ep_sched *s, const exec_metrics *m,
                       const exec_run_info *ri, char err[EP_ERRLEN]) {
    ep_outfile o;
    if (ep_outfile_open(&o, path, err) != 0) return -1;
    FILE *f = o.f;
    fputc('{', f);
    ep_metrics_write_json(f, s, m);
    fprintf(f, ",\"microbatches\":%d,\"ops\":%ld", s->num_microbatches, m->nops);
    num(f, "peak_flops", ri->peak_flops, 1);
    fputs(",\"iteration_times_s\":[", f);
    for (int i = 0; i < ri->iters; i++)
        fprintf(f, "%s%.9g", i ? "," : "", ri->iter_times[i]);
    fprintf(f, "],\"reported_iteration\":%d", ri->chosen);
    num(f, "buffer_bytes_rank0", ri->buffer_bytes, 1);
    num(f, "device_memory_used_peak_bytes", ri->device_used_peak, 1);
    fputs(",\"config\":", f);
    ep_config_write_json(&s->cfg, f);
    fputs(",\"meta\":", f);
    char extra[4096];
    meta_extra(extra, sizeof extra, ri);
    ep_write_meta_json(f, "epref", extra);
    fputs("}\n", f);
    return ep_outfile_commit(&o, err);
}

void exec_print_summary(FILE *f, const ep_sched *s, const exec_metrics *m,
                        const exec_run_info *ri) {
    const ep_config *c = &s->cfg;
    double T = m->iteration_time_s;
    fprintf(f,
            "epref run: %d ranks, TP %d PP %d EP %d DP %d, %s dispatcher, %d microbatches, "
            "%ld ops\n",
            s->world, c->tensor_model_parallel_size, c->pipeline_model_parallel_size,
            c->expert_model_parallel_size, c->data_parallel_size,
            ep_backend_name(ep_config_backend(c)), s->num_microbatches, m->nops);
    fprintf(f, "  iteration time        %12.6f s  (median of %d, iteration %d)\n", T, ri->iters,
            ri->chosen);
    fprintf(f, "  tokens/s/GPU          %12.1f\n", m->tokens_per_s_per_gpu);
    fprintf(f, "  TFLOPS/GPU            %12.1f\n", m->tflops_per_gpu);
    fprintf(f, "  MFU                   %12.3f\n", m->mfu);
    fprintf(f, "  idle                  %12.6f s\n", m->idle_s);
    /* measured: the idle time a member waited for the rest of its collective, a pipeline transfer
     * for the other stage (epref records no launch times: no "waiting for launches") */
    fprintf(f, "    waiting for peers   %12.6f s  (%.1f%%)\n", m->peer_wait_s,
            T > 0 ? 100 * m->peer_wait_s / T : 0);
    fprintf(f, "    pipeline waits      %12.6f s  (%.1f%%)\n", m->pipeline_wait_s,
            T > 0 ? 100 * m->pipeline_wait_s / T : 0);
    static const ep_comm_class order[] = {EP_COMM_DISPATCH, EP_COMM_COMBINE, EP_COMM_DP, EP_COMM_PP,
                                          EP_COMM_OTHER};
    fprintf(f, "  exposed communication (mean per rank):\n");
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        fprintf(f, "    %-10s          %12.6f s  (%.1f%%)\n", ep_comm_class_name(order[i]),
                m->exposed_s[order[i]], T > 0 ? 100 * m->exposed_s[order[i]] / T : 0);
    fprintf(f, "  host syncs            %12ld\n", m->host_syncs);
    const double gib = 1024.0 * 1024 * 1024;
    fprintf(f,
            "  device memory used    %12.1f GiB  (most of any rank; epref's buffers %.1f GiB on "
            "rank 0; it holds no model state or activations)\n",
            ri->device_used_peak / gib, ri->buffer_bytes / gib);
}
