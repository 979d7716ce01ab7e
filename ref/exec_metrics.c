/* exec_metrics: summary figures from measured intervals (exec_metrics.h). */
#include <stdlib.h>
#include <string.h>

#include "exec_metrics.h"

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

typedef struct {
    exec_span *const *t;
    const ep_sched *s;
    const double *xfer;
    const int *goff;
} measured;

/* A collective moves data from its last member's start to its end on this rank. */
static void op_interval(const void *ctx, int rank, int op, double *start, double *xfer,
                        double *end) {
    const measured *me = ctx;
    const ep_op *o = &me->s->ranks[rank].ops[op];
    *start = me->t[rank][op].start;
    *end = me->t[rank][op].end;
    *xfer = *start;
    if (ep_op_is_comm(o) && o->group >= 0 && o->group < me->s->ngroups && o->seq >= 0 &&
        me->xfer[me->goff[o->group] + o->seq] > *xfer)
        *xfer = me->xfer[me->goff[o->group] + o->seq];
}

int exec_metrics_compute(const ep_sched *s, exec_span *const *t, double peak_flops,
                         exec_metrics *m) {
    double T = 0;
    for (int r = 0; r < s->world; r++)
        for (int i = 0; i < s->ranks[r].nops; i++)
            if (t[r][i].end > T) T = t[r][i].end;
    int *goff = NULL;
    double *xfer = transfer_starts(s, t, &goff);
    if (!xfer) return -1;
    measured me = {t, s, xfer, goff};
    int rc = ep_metrics_compute(s, T, peak_flops, op_interval, &me, NULL, m);
    free(xfer);
    free(goff);
    return rc;
}
