/* Timeline lanes and boxes (plot_timeline.h). */
#include "plot_timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot_util.h"

static int lane_cmp(const void *a, const void *b) {
    const plot_lane *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return (x->stream > y->stream) - (x->stream < y->stream);
}

static int box_cmp(const void *a, const void *b) {
    const plot_box *x = a, *y = b;
    if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
    if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
    if (x->source != y->source) return x->source < y->source ? -1 : 1;
    if (x->x0_ms != y->x0_ms) return x->x0_ms < y->x0_ms ? -1 : 1;
    if (x->x1_ms != y->x1_ms) return x->x1_ms < y->x1_ms ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int wanted(const plot_timeline_opts *o, int rank) {
    if (!o->ranks) return 1;
    for (int i = 0; i < o->nranks; i++)
        if (o->ranks[i] == rank) return 1;
    return 0;
}

static int find_lane(const plot_timeline *tl, int rank, int stream) {
    plot_lane key = {.rank = rank, .stream = stream};
    plot_lane *l = bsearch(&key, tl->lanes, (size_t)tl->nlanes, sizeof key, lane_cmp);
    return l ? (int)(l - tl->lanes) : -1;
}

double plot_timeline_lane_y(const plot_timeline *tl, int lane) {
    return (double)(tl->nlanes - 1 - lane);
}

int plot_timeline_build(const plot_timeline_opts *o, plot_timeline *tl, char err[EP_ERRLEN]) {
    memset(tl, 0, sizeof *tl);
    if (!o->src[0] && !o->src[1]) {
        snprintf(err, EP_ERRLEN, "timeline needs --predicted, --measured or both");
        return -1;
    }
    if (o->to_us >= 0 && o->to_us <= o->from_us) {
        snprintf(err, EP_ERRLEN, "empty window: --to-us %g is not after --from-us %g", o->to_us,
                 o->from_us);
        return -1;
    }
    tl->both = o->src[0] && o->src[1];
    long total = 0;
    for (int s = 0; s < 2; s++)
        total += o->src[s] ? o->src[s]->nevents : 0;
    tl->lanes = calloc((size_t)total, sizeof *tl->lanes);
    tl->boxes = calloc((size_t)total, sizeof *tl->boxes);
    if (!tl->lanes || !tl->boxes) {
        snprintf(err, EP_ERRLEN, "out of memory");
        goto fail;
    }
    /* lanes: distinct (rank, stream) of the wanted ranks */
    for (int s = 0; s < 2; s++)
        for (int i = 0; o->src[s] && i < o->src[s]->nevents; i++) {
            const plot_event *e = &o->src[s]->ev[i];
            if (wanted(o, e->rank))
                tl->lanes[tl->nlanes++] = (plot_lane){.rank = e->rank, .stream = e->stream};
        }
    qsort(tl->lanes, (size_t)tl->nlanes, sizeof *tl->lanes, lane_cmp);
    int n = 0;
    for (int i = 0; i < tl->nlanes; i++)
        if (n == 0 || lane_cmp(&tl->lanes[n - 1], &tl->lanes[i])) tl->lanes[n++] = tl->lanes[i];
    tl->nlanes = n;
    for (int i = 0; o->ranks && i < o->nranks; i++) {
        int found = 0;
        for (int l = 0; l < tl->nlanes && !found; l++)
            found = tl->lanes[l].rank == o->ranks[i];
        if (!found) {
            snprintf(err, EP_ERRLEN, "rank %d is not in the trace%s", o->ranks[i],
                     tl->both ? "s" : "");
            goto fail;
        }
    }
    for (int l = 0; l < tl->nlanes; l++) {
        char buf[32];
        plot_lane *ln = &tl->lanes[l];
        /* the name from whichever trace has this track named, the predicted one first */
        const plot_trace *named = o->src[0] ? o->src[0] : o->src[1];
        for (int s = 1; s >= 0; s--)
            for (int i = 0; o->src[s] && i < o->src[s]->nnames; i++)
                if (o->src[s]->names[i].rank == ln->rank &&
                    o->src[s]->names[i].stream == ln->stream)
                    named = o->src[s];
        const char *sn = plot_trace_stream_name(named, ln->rank, ln->stream, buf, sizeof buf);
        snprintf(ln->label, sizeof ln->label, "r%d %s", ln->rank, sn);
    }
    /* boxes, clipped to the window */
    double end_us = 0;
    for (int s = 0; s < 2; s++)
        for (int i = 0; o->src[s] && i < o->src[s]->nevents; i++) {
            const plot_event *e = &o->src[s]->ev[i];
            end_us = fmax(end_us, e->start_us + e->dur_us);
        }
    double lo = o->from_us, hi = o->to_us >= 0 ? o->to_us : end_us;
    for (int s = 0; s < 2; s++)
        for (int i = 0; o->src[s] && i < o->src[s]->nevents; i++) {
            const plot_event *e = &o->src[s]->ev[i];
            double a = e->start_us, b = e->start_us + e->dur_us;
            /* zero-length ops (host syncs) at the window edge still count as inside */
            if (!wanted(o, e->rank) || b < lo || a > hi || (e->dur_us > 0 && (b == lo || a == hi)))
                continue;
            plot_box *bx = &tl->boxes[tl->nboxes++];
            bx->x0_ms = fmax(a, lo) / 1e3;
            bx->x1_ms = fmin(b, hi) / 1e3;
            bx->lane = find_lane(tl, e->rank, e->stream);
            bx->source = s;
            bx->cls = e->cls;
            bx->name = e->name;
        }
    if (tl->nboxes == 0) {
        snprintf(err, EP_ERRLEN, "no ops between %g us and %g us", lo, hi);
        goto fail;
    }
    /* drop lanes with nothing in the window, then place the boxes */
    int *map = calloc((size_t)tl->nlanes, sizeof *map);
    if (!map) {
        snprintf(err, EP_ERRLEN, "out of memory");
        goto fail;
    }
    for (int i = 0; i < tl->nboxes; i++)
        map[tl->boxes[i].lane] = 1;
    n = 0;
    for (int l = 0; l < tl->nlanes; l++) {
        int used = map[l];
        map[l] = n;
        if (used) tl->lanes[n++] = tl->lanes[l];
    }
    tl->nlanes = n;
    for (int i = 0; i < tl->nboxes; i++) {
        plot_box *bx = &tl->boxes[i];
        bx->lane = map[bx->lane];
        double y = plot_timeline_lane_y(tl, bx->lane);
        if (!tl->both) {
            bx->y0 = y - 0.4, bx->y1 = y + 0.4;
        } else if (bx->source == PLOT_PREDICTED) {
            bx->y0 = y + 0.04, bx->y1 = y + 0.44;
        } else {
            bx->y0 = y - 0.44, bx->y1 = y - 0.04;
        }
    }
    free(map);
    qsort(tl->boxes, (size_t)tl->nboxes, sizeof *tl->boxes, box_cmp);
    tl->x_from_ms = lo / 1e3;
    tl->x_to_ms = hi / 1e3;
    return 0;
fail:
    plot_timeline_free(tl);
    return -1;
}

void plot_timeline_free(plot_timeline *tl) {
    free(tl->lanes);
    free(tl->boxes);
    memset(tl, 0, sizeof *tl);
}

void plot_timeline_write_data(const plot_timeline *tl, FILE *f) {
    int blocks = 0;
    for (int i = 0; i < tl->nboxes; i++) {
        const plot_box *b = &tl->boxes[i];
        if (i == 0 || b->cls != tl->boxes[i - 1].cls) {
            if (blocks++) fputs("\n\n", f);
            fprintf(f, "# %s\n", plot_class_name(b->cls));
        }
        fprintf(f, "%.6f\t%.6f\t%.2f\t%.2f\t", b->x0_ms, b->x1_ms, b->y0, b->y1);
        plot_data_field(f, b->name);
        fputc('\n', f);
    }
}

void plot_timeline_write_vars(const plot_timeline *tl, FILE *f) {
    plot_class present[PLOT_NUM_CLASSES];
    int n = 0;
    for (int i = 0; i < tl->nboxes; i++)
        if (n == 0 || present[n - 1] != tl->boxes[i].cls) present[n++] = tl->boxes[i].cls;
    fprintf(f, "nblocks = %d\narray block_title[%d]\narray block_color[%d]\n", n, n, n);
    for (int i = 0; i < n; i++) {
        fprintf(f, "block_title[%d] = ", i + 1);
        plot_gp_string(f, plot_class_name(present[i]));
        fprintf(f, "\nblock_color[%d] = '%s'\n", i + 1, plot_class_color(present[i]));
    }
    fprintf(f, "both = %d\nnlanes = %d\n", tl->both, tl->nlanes);
    fprintf(f, "x_from = %.6f\nx_to = %.6f\n", tl->x_from_ms, tl->x_to_ms);
    fprintf(f, "height_px = %d\n", 140 + tl->nlanes * (tl->both ? 56 : 32));
    fputs("set ytics (", f);
    for (int l = 0; l < tl->nlanes; l++) {
        double y = plot_timeline_lane_y(tl, l);
        char lab[128];
        if (tl->both) {
            snprintf(lab, sizeof lab, "%s predicted", tl->lanes[l].label);
            plot_gp_string(f, lab);
            fprintf(f, " %.2f, ", y + 0.24);
            snprintf(lab, sizeof lab, "%s measured", tl->lanes[l].label);
            plot_gp_string(f, lab);
            fprintf(f, " %.2f%s", y - 0.24, l + 1 < tl->nlanes ? ", " : "");
        } else {
            plot_gp_string(f, tl->lanes[l].label);
            fprintf(f, " %.2f%s", y, l + 1 < tl->nlanes ? ", " : "");
        }
    }
    fputs(")\n", f);
    /* thin lines between lanes so that a lane's two halves read as one group */
    for (int l = 0; l + 1 < tl->nlanes; l++)
        fprintf(f,
                "set arrow from graph 0, first %.2f to graph 1, first %.2f nohead lc rgb "
                "'#c0c0c0' lw 0.5 back\n",
                plot_timeline_lane_y(tl, l) - 0.5, plot_timeline_lane_y(tl, l) - 0.5);
}
