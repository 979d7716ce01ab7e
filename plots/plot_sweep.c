/* Sweep bars (plot_sweep.h). */
#include "plot_sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot_csv.h"
#include "plot_util.h"

static int bar_cmp(const void *a, const void *b) {
    const plot_sweep_bar *x = a, *y = b;
    if (x->tokens_per_s_per_gpu != y->tokens_per_s_per_gpu)
        return x->tokens_per_s_per_gpu > y->tokens_per_s_per_gpu ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* Label columns into cols; returns their count, or -1 with err. `named` says whether the label is
 * a bare value (one `config`-like column) or col=value pairs. */
static int label_columns(const plot_csv *t, const char *spec, int metric, int *cols, int *named,
                         char err[EP_ERRLEN]) {
    int n = 0;
    if (spec) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", spec);
        for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if ((cols[n] = plot_csv_col(t, tok)) < 0) {
                snprintf(err, EP_ERRLEN, "%s: no column '%s' (from --label-col)", t->path, tok);
                return -1;
            }
            if (++n == t->ncols) break;
        }
        if (n == 0) {
            snprintf(err, EP_ERRLEN, "--label-col names no column");
            return -1;
        }
        *named = n > 1;
        return n;
    }
    if ((cols[0] = plot_csv_col(t, "config")) >= 0) {
        *named = 0;
        return 1;
    }
    for (int c = 0; c < metric; c++)
        if (strcmp(t->header[c], "rank") && strcmp(t->header[c], "index")) cols[n++] = c;
    if (n == 0) {
        snprintf(err, EP_ERRLEN,
                 "%s: no label: no 'config' column and no columns left of tokens_per_s_per_gpu "
                 "(use --label-col)",
                 t->path);
        return -1;
    }
    *named = 1;
    return n;
}

int plot_sweep_load(const char *path, const char *label_cols, int top, plot_sweep *sw,
                    char err[EP_ERRLEN]) {
    memset(sw, 0, sizeof *sw);
    plot_csv t;
    if (plot_csv_load(path, &t, err) != 0) return -1;
    int *cols = calloc((size_t)t.ncols, sizeof *cols);
    int metric = plot_csv_col(&t, "tokens_per_s_per_gpu"), status = plot_csv_col(&t, "status");
    int state = plot_csv_col(&t, "model_state_of_gpu");
    int named = 0, ncols = 0;
    if (!cols) {
        snprintf(err, EP_ERRLEN, "%s: out of memory", path);
        goto fail;
    }
    if (metric < 0) {
        snprintf(err, EP_ERRLEN, "%s: no column 'tokens_per_s_per_gpu'", path);
        goto fail;
    }
    if ((ncols = label_columns(&t, label_cols, metric, cols, &named, err)) < 0) goto fail;
    sw->bars = calloc((size_t)(t.nrows ? t.nrows : 1), sizeof *sw->bars);
    if (!sw->bars) {
        snprintf(err, EP_ERRLEN, "%s: out of memory", path);
        goto fail;
    }
    sw->nrows = t.nrows;
    for (int r = 0; r < t.nrows; r++) {
        const char *m = plot_csv_cell(&t, r, metric);
        if (!m[0] || (status >= 0 && strcmp(plot_csv_cell(&t, r, status), "ok"))) {
            sw->nskipped++;
            continue;
        }
        plot_sweep_bar *b = &sw->bars[sw->nbars];
        if (plot_csv_number(&t, r, metric, &b->tokens_per_s_per_gpu, err)) goto fail;
        b->row = r;
        size_t at = 0;
        for (int i = 0; i < ncols && at < sizeof b->label; i++) {
            const char *v = plot_csv_cell(&t, r, cols[i]);
            int w = named ? snprintf(b->label + at, sizeof b->label - at, "%s%s=%s", i ? " " : "",
                                     t.header[cols[i]], v)
                          : snprintf(b->label + at, sizeof b->label - at, "%s%s", i ? " " : "", v);
            at += w > 0 ? (size_t)w : 0;
        }
        double frac = 0;
        if (state >= 0 && plot_csv_cell(&t, r, state)[0] &&
            plot_csv_number(&t, r, state, &frac, err))
            goto fail;
        b->over_memory = frac > 1;
        if (b->over_memory && at < sizeof b->label)
            snprintf(b->label + at, sizeof b->label - at, " (model state > GPU memory)");
        sw->nbars++;
    }
    if (sw->nbars == 0) {
        snprintf(err, EP_ERRLEN, "%s: no row with a tokens_per_s_per_gpu value (%d skipped)", path,
                 sw->nskipped);
        goto fail;
    }
    qsort(sw->bars, (size_t)sw->nbars, sizeof *sw->bars, bar_cmp);
    if (sw->nbars > top) sw->nbars = top;
    free(cols);
    plot_csv_free(&t);
    return 0;
fail:
    free(cols);
    plot_csv_free(&t);
    plot_sweep_free(sw);
    return -1;
}

void plot_sweep_free(plot_sweep *sw) {
    free(sw->bars);
    memset(sw, 0, sizeof *sw);
}

void plot_sweep_write_data(const plot_sweep *sw, FILE *f) {
    for (int i = 0; i < sw->nbars; i++) {
        fprintf(f, "%d\t%.6f\t", i, sw->bars[i].tokens_per_s_per_gpu);
        plot_data_field(f, sw->bars[i].label);
        fprintf(f, "\t%d\n", sw->bars[i].over_memory ? 0x999999 : 0x0072b2); /* bar colour */
    }
}

void plot_sweep_write_vars(const plot_sweep *sw, FILE *f) {
    double top = sw->nbars ? sw->bars[0].tokens_per_s_per_gpu : 0;
    fprintf(f, "nbars = %d\nxmax = %.6f\nheight_px = %d\n", sw->nbars, top > 0 ? top * 1.12 : 1.0,
            120 + 28 * sw->nbars);
}
