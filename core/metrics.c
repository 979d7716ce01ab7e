/* Iteration metrics from op intervals (ep_metrics.h): a sweep over each rank's interval edges. */
#include "ep_metrics.h"

#include <stdlib.h>
#include <string.h>

#define CLS_COMP  EP_COMM_NUM       /* sweep class of compute intervals */
#define CLS_HOST  (EP_COMM_NUM + 1) /* an op waiting for nothing but its launch */
#define CLS_PEER  (EP_COMM_NUM + 2) /* a collective's member arrived, the others not yet */
#define CLS_STAGE (EP_COMM_NUM + 3) /* a pipeline send/receive waiting for the other stage */
#define NCLS      (EP_COMM_NUM + 4)

typedef struct {
    double t;
    int delta; /* +1 start, -1 end */
    int cls;
} edge_t;

static int edge_cmp(const void *a, const void *b) {
    const edge_t *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->delta != y->delta) return x->delta - y->delta;
    return x->cls - y->cls;
}

static int is_compute(const ep_op *op) {
    return !ep_op_is_comm(op) && op->kind != EP_OP_HOST_SYNC;
}

/* Adds one rank's busy/exposed/idle time over [0, T) from its n sorted edges. */
static void sweep_rank(edge_t *ev, int n, double T, ep_step_metrics *m) {
    qsort(ev, (size_t)n, sizeof *ev, edge_cmp);
    int cnt[NCLS] = {0};
    int xfer = 0;
    double prev = 0;
    for (int i = 0; i <= n; i++) {
        double t = i < n ? ev[i].t : T;
        double len = t - prev;
        if (len > 0) {
            if (cnt[CLS_COMP] > 0) {
                m->compute_busy_s += len;
            } else {
                for (int c = 0; c < EP_COMM_NUM; c++)
                    if (cnt[c] > 0) m->exposed_s[c] += len;
                if (xfer > 0) {
                    m->exposed_total_s += len;
                } else { /* idle, by what it waits for (the first that applies) */
                    m->idle_s += len;
                    if (cnt[CLS_HOST] > 0)
                        m->host_wait_s += len;
                    else if (cnt[CLS_PEER] > 0)
                        m->peer_wait_s += len;
                    else if (cnt[CLS_STAGE] > 0)
                        m->pipeline_wait_s += len;
                }
            }
        }
        prev = t;
        if (i < n) {
            cnt[ev[i].cls] += ev[i].delta;
            if (ev[i].cls < EP_COMM_NUM) xfer += ev[i].delta;
        }
    }
}

/* The launch waits by rank: rank r's are idx[off[r] .. off[r+1]) (a counting sort). */
static int waits_by_rank(const ep_launch_waits *w, int world, long **off, long **idx) {
    *off = calloc((size_t)world + 1, sizeof **off);
    *idx = malloc(sizeof **idx * (size_t)(w && w->n > 0 ? w->n : 1));
    if (!*off || !*idx) return -1;
    long n = w ? w->n : 0;
    for (long k = 0; k < n; k++)
        if (w->rank[k] >= 0 && w->rank[k] < world) (*off)[w->rank[k] + 1]++;
    for (int r = 0; r < world; r++)
        (*off)[r + 1] += (*off)[r];
    long *fill = malloc(sizeof *fill * ((size_t)world + 1));
    if (!fill) return -1;
    memcpy(fill, *off, sizeof *fill * ((size_t)world + 1));
    for (long k = 0; k < n; k++)
        if (w->rank[k] >= 0 && w->rank[k] < world) (*idx)[fill[w->rank[k]]++] = k;
    free(fill);
    return 0;
}

int ep_metrics_compute(const ep_sched *s, double T, double peak_flops, ep_op_interval_fn interval,
                       const void *ctx, const ep_launch_waits *waits, ep_step_metrics *m) {
    memset(m, 0, sizeof *m);
    m->iteration_time_s = T;
    if (T > 0) {
        m->tokens_per_s = s->tokens_per_iteration / T;
        m->tokens_per_s_per_gpu = m->tokens_per_s / s->world;
        m->tflops_per_gpu = s->model_flops_per_token * m->tokens_per_s_per_gpu / 1e12;
        m->mfu = peak_flops > 0 ? m->tflops_per_gpu * 1e12 / peak_flops : 0;
    }
    int rc = -1;
    long *woff = NULL, *widx = NULL;
    edge_t *ev = NULL;
    if (waits_by_rank(waits, s->world, &woff, &widx) != 0) goto out;
    long maxedges = 0;
    for (int r = 0; r < s->world; r++) {
        long e = 4L * s->ranks[r].nops + 2 * (woff[r + 1] - woff[r]);
        if (e > maxedges) maxedges = e;
    }
    ev = malloc(sizeof *ev * (size_t)(maxedges + 2));
    if (!ev) goto out;
    ep_mem_model mm;
    ep_mem_model_default(&mm);
    for (int r = 0; r < s->world; r++) {
        const ep_rank_sched *rs = &s->ranks[r];
        if (rs->model_state_bytes > m->model_state_bytes)
            m->model_state_bytes = rs->model_state_bytes;
        ep_mem_peak peak;
        if (ep_mem_rank_peak(s, r, &mm, &peak) != 0) goto out;
        if (r == 0 || peak.total > m->memory_peak.total) {
            m->memory_peak = peak;
            m->memory_peak_rank = r;
        }
        int n = 0;
        for (int i = 0; i < rs->nops; i++) {
            const ep_op *op = &rs->ops[i];
            m->nops++;
            if (op->kind == EP_OP_HOST_SYNC) m->host_syncs++;
            if (op->kind == EP_OP_A2A_DISPATCH || op->kind == EP_OP_A2A_COMBINE)
                m->a2a_bytes += op->bytes;
            int cls;
            if (is_compute(op))
                cls = CLS_COMP;
            else if (ep_op_is_comm(op))
                cls = ep_op_comm_class(op);
            else
                continue;
            double start, xfer, end;
            interval(ctx, r, i, &start, &xfer, &end);
            if (cls == CLS_COMP && xfer < start) { /* ready but for its launch since xfer */
                ev[n++] = (edge_t){xfer, +1, CLS_HOST};
                ev[n++] = (edge_t){start, -1, CLS_HOST};
            }
            if (cls != CLS_COMP && xfer > start) { /* arrived, waiting for the other side */
                int w = cls == EP_COMM_PP ? CLS_STAGE : CLS_PEER;
                ev[n++] = (edge_t){start, +1, w};
                ev[n++] = (edge_t){xfer, -1, w};
            }
            double a = cls == CLS_COMP ? start : xfer;
            if (end <= a) continue;
            ev[n++] = (edge_t){a, +1, cls};
            ev[n++] = (edge_t){end, -1, cls};
        }
        for (long k = woff[r]; k < woff[r + 1]; k++) {
            const double *t = &waits->t[2 * widx[k]];
            if (t[1] <= t[0]) continue;
            ev[n++] = (edge_t){t[0], +1, CLS_HOST};
            ev[n++] = (edge_t){t[1], -1, CLS_HOST};
        }
        sweep_rank(ev, n, T, m);
    }
    double W = s->world;
    for (int c = 0; c < EP_COMM_NUM; c++)
        m->exposed_s[c] /= W;
    m->exposed_total_s /= W;
    m->compute_busy_s /= W;
    m->idle_s /= W;
    m->host_wait_s /= W;
    m->peer_wait_s /= W;
    m->pipeline_wait_s /= W;
    m->bubble_fraction = T > 0 ? m->idle_s / T : 0;
    rc = 0;
out:
    free(ev);
    free(woff);
    free(widx);
    return rc;
}

static void num(FILE *f, const char *key, double v, int comma) {
    fprintf(f, "%s\"%s\":%.9g", comma ? "," : "", key, v);
}

void ep_metrics_write_json(FILE *f, const ep_sched *s, const ep_step_metrics *m) {
    num(f, "iteration_time_s", m->iteration_time_s, 0);
    num(f, "tokens_per_s", m->tokens_per_s, 1);
    num(f, "tokens_per_s_per_gpu", m->tokens_per_s_per_gpu, 1);
    num(f, "tflops_per_gpu", m->tflops_per_gpu, 1);
    num(f, "mfu", m->mfu, 1);
    fprintf(f, ",\"world_size\":%d", s->world);
    fputs(",\"exposed_comm_s\":{", f);
    num(f, "dispatch", m->exposed_s[EP_COMM_DISPATCH], 0);
    num(f, "combine", m->exposed_s[EP_COMM_COMBINE], 1);
    num(f, "dp", m->exposed_s[EP_COMM_DP], 1);
    num(f, "pp", m->exposed_s[EP_COMM_PP], 1);
    num(f, "other", m->exposed_s[EP_COMM_OTHER], 1);
    num(f, "total", m->exposed_total_s, 1);
    fputc('}', f);
    num(f, "compute_busy_s", m->compute_busy_s, 1);
    num(f, "idle_s", m->idle_s, 1);
    num(f, "host_wait_s", m->host_wait_s, 1);
    num(f, "peer_wait_s", m->peer_wait_s, 1);
    num(f, "pipeline_wait_s", m->pipeline_wait_s, 1);
    num(f, "pp_bubble_fraction", m->bubble_fraction, 1);
    fprintf(f, ",\"host_syncs\":%ld", m->host_syncs);
    num(f, "a2a_bytes", m->a2a_bytes, 1);
    num(f, "model_state_bytes_per_gpu", m->model_state_bytes, 1);
    const ep_mem_peak *p = &m->memory_peak;
    num(f, "memory_peak_bytes", p->total, 1);
    fprintf(f, ",\"memory_peak\":{\"rank\":%d", m->memory_peak_rank);
    num(f, "model_state_bytes", p->model_state, 1);
    num(f, "activation_bytes", p->activations, 1);
    num(f, "buffer_bytes", p->buffers, 1);
    num(f, "fragmentation_margin_bytes", p->margin, 1);
    num(f, "fsdp_param_bytes", p->fsdp_params, 1);
    num(f, "fsdp_grad_bytes", p->fsdp_grads, 1);
    num(f, "fragmentation_fraction", EP_MEM_FRAGMENTATION, 1);
    fputc('}', f);
}
