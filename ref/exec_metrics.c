/* exec_metrics: summary figures from measured intervals (exec_metrics.h). */
#include <stdlib.h>
#include <string.h>

#include "exec_metrics.h"

#define CLS_COMP EP_COMM_NUM /* class of compute intervals in the sweep */

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

/* xfer[goff[g] + seq]: the latest start over the members of collective (g, seq). */
static double *transfer_starts(const ep_sched *s, exec_span *const *t, int **goff_out) {
    int *goff = calloc((size_t)s->ngroups + 1, sizeof *goff);
    if (!goff) return NULL;
    int *nseq = calloc((size_t)s->ngroups + 1, sizeof *nseq);
    if (!nseq) {
        free(goff);
        return NULL;
    }
    for (int r = 0; r < s->world; r++)
        for (int i = 0; i < s->ranks[r].nops; i++) {
            const ep_op *op = &s->ranks[r].ops[i];
            if (op->group >= 0 && op->group < s->ngroups && op->seq + 1 > nseq[op->group])
                nseq[op->group] = op->seq + 1;
        }
    for (int g = 0; g < s->ngroups; g++)
        goff[g + 1] = goff[g] + nseq[g];
    free(nseq);
    double *x = malloc(sizeof *x * (size_t)(goff[s->ngroups] + 1));
    if (!x) {
        free(goff);
        return NULL;
    }
    for (int j = 0; j < goff[s->ngroups]; j++)
        x[j] = -1e300;
    for (int r = 0; r < s->world; r++)
        for (int i = 0; i < s->ranks[r].nops; i++) {
            const ep_op *op = &s->ranks[r].ops[i];
            if (op->group < 0 || op->group >= s->ngroups || op->seq < 0) continue;
            double *v = &x[goff[op->group] + op->seq];
            if (t[r][i].start > *v) *v = t[r][i].start;
        }
    *goff_out = goff;
    return x;
}

int exec_metrics_compute(const ep_sched *s, exec_span *const *t, double peak_flops,
                         exec_metrics *m) {
    memset(m, 0, sizeof *m);
    double T = 0;
    int maxops = 0;
    for (int r = 0; r < s->world; r++) {
        if (s->ranks[r].nops > maxops) maxops = s->ranks[r].nops;
        for (int i = 0; i < s->ranks[r].nops; i++)
            if (t[r][i].end > T) T = t[r][i].end;
    }
    m->iteration_time_s = T;
    if (T > 0) {
        m->tokens_per_s = s->tokens_per_iteration / T;
        m->tokens_per_s_per_gpu = m->tokens_per_s / s->world;
        m->tflops_per_gpu = s->model_flops_per_token * m->tokens_per_s_per_gpu / 1e12;
        m->mfu = peak_flops > 0 ? m->tflops_per_gpu * 1e12 / peak_flops : 0;
    }
    int *goff = NULL;
    double *xfer = transfer_starts(s, t, &goff);
    edge_t *ev = malloc(sizeof *ev * (size_t)(2 * maxops + 2));
    if (!xfer || !ev) {
        free(xfer);
        free(goff);
        free(ev);
        return -1;
    }
    for (int r = 0; r < s->world; r++) {
        const ep_rank_sched *rs = &s->ranks[r];
        int n = 0;
        for (int i = 0; i < rs->nops; i++) {
            const ep_op *op = &rs->ops[i];
            m->nops++;
            if (op->kind == EP_OP_HOST_SYNC) m->host_syncs++;
            if (op->kind == EP_OP_A2A_DISPATCH || op->kind == EP_OP_A2A_COMBINE)
                m->a2a_bytes += op->bytes;
            int cls;
            double a;
            if (is_compute(op)) {
                cls = CLS_COMP;
                a = t[r][i].start;
            } else if (ep_op_is_comm(op)) {
                cls = ep_op_comm_class(op);
                a = t[r][i].start;
                if (op->group >= 0 && op->group < s->ngroups && op->seq >= 0 &&
                    xfer[goff[op->group] + op->seq] > a)
                    a = xfer[goff[op->group] + op->seq];
            } else {
                continue;
            }
            if (t[r][i].end <= a) continue;
            ev[n++] = (edge_t){a, +1, cls};
            ev[n++] = (edge_t){t[r][i].end, -1, cls};
        }
        qsort(ev, (size_t)n, sizeof *ev, edge_cmp);
        int cnt[EP_COMM_NUM + 1] = {0};
        int busy_xfer = 0;
        double prev = 0;
        for (int i = 0; i <= n; i++) {
            double tt = i < n ? ev[i].t : T;
            double len = tt - prev;
            if (len > 0) {
                if (cnt[CLS_COMP] > 0) {
                    m->compute_busy_s += len;
                } else {
                    for (int c = 0; c < EP_COMM_NUM; c++)
                        if (cnt[c] > 0) m->exposed_s[c] += len;
                    if (busy_xfer > 0)
                        m->exposed_total_s += len;
                    else
                        m->idle_s += len;
                }
            }
            prev = tt;
            if (i < n) {
                cnt[ev[i].cls] += ev[i].delta;
                if (ev[i].cls != CLS_COMP) busy_xfer += ev[i].delta;
            }
        }
    }
    free(ev);
    free(xfer);
    free(goff);
    double W = s->world;
    for (int c = 0; c < EP_COMM_NUM; c++)
        m->exposed_s[c] /= W;
    m->exposed_total_s /= W;
    m->compute_busy_s /= W;
    m->idle_s /= W;
    m->bubble_fraction = T > 0 ? m->idle_s / T : 0;
    return 0;
}
