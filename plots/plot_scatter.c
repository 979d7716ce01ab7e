/* Validation scatter data (plot_scatter.h). */
#include "plot_scatter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot_csv.h"
#include "plot_util.h"

double plot_rel_err(double measured_s, double predicted_s) {
    return (predicted_s - measured_s) / measured_s;
}

int plot_err_band(double rel_err) {
    /* a hair of slack so that 1.05 / 1.00 - 1 (0.050000000000000044) still counts as 5 % */
    double e = fabs(rel_err) - 1e-12;
    return e <= 0.05 ? 5 : e <= 0.10 ? 10 : 0;
}

int plot_scatter_load(const char *path, plot_scatter *sc, char err[EP_ERRLEN]) {
    memset(sc, 0, sizeof *sc);
    plot_csv t;
    if (plot_csv_load(path, &t, err) != 0) return -1;
    static const char *const need[] = {"name", "measured_s", "predicted_s"};
    int col[3];
    for (int i = 0; i < 3; i++)
        if ((col[i] = plot_csv_col(&t, need[i])) < 0) {
            snprintf(err, EP_ERRLEN, "%s: no column '%s' (needs name,measured_s,predicted_s)", path,
                     need[i]);
            goto fail;
        }
    if (t.nrows == 0) {
        snprintf(err, EP_ERRLEN, "%s: no runs, only a header", path);
        goto fail;
    }
    sc->runs = calloc((size_t)t.nrows, sizeof *sc->runs);
    if (!sc->runs) {
        snprintf(err, EP_ERRLEN, "%s: out of memory", path);
        goto fail;
    }
    for (int r = 0; r < t.nrows; r++) {
        plot_run *run = &sc->runs[r];
        if (plot_csv_number(&t, r, col[1], &run->measured_s, err) ||
            plot_csv_number(&t, r, col[2], &run->predicted_s, err))
            goto fail;
        if (run->measured_s <= 0 || run->predicted_s < 0) {
            snprintf(err, EP_ERRLEN, "%s:%d: measured_s must be > 0 and predicted_s >= 0", path,
                     t.line[r]);
            goto fail;
        }
        run->name = strdup(plot_csv_cell(&t, r, col[0]));
        if (!run->name) {
            snprintf(err, EP_ERRLEN, "%s: out of memory", path);
            goto fail;
        }
        sc->nruns++;
        run->rel_err = plot_rel_err(run->measured_s, run->predicted_s);
        run->band = plot_err_band(run->rel_err);
        sc->within5 += run->band == 5;
        sc->within10 += run->band != 0;
    }
    double lo = INFINITY, hi = 0;
    for (int r = 0; r < sc->nruns; r++) {
        lo = fmin(lo, fmin(sc->runs[r].measured_s, sc->runs[r].predicted_s));
        hi = fmax(hi, fmax(sc->runs[r].measured_s, sc->runs[r].predicted_s));
    }
    /* 15 % margins keep the +-10 % band visible around the extreme points */
    sc->lo_s = lo * 0.85;
    sc->hi_s = hi * 1.15;
    plot_csv_free(&t);
    return 0;
fail:
    plot_csv_free(&t);
    plot_scatter_free(sc);
    return -1;
}

void plot_scatter_free(plot_scatter *sc) {
    for (int r = 0; r < sc->nruns; r++)
        free(sc->runs[r].name);
    free(sc->runs);
    memset(sc, 0, sizeof *sc);
}

void plot_scatter_write_data(const plot_scatter *sc, FILE *f) {
    for (int r = 0; r < sc->nruns; r++) {
        const plot_run *run = &sc->runs[r];
        fprintf(f, "%.9g\t%.9g\t%.3f\t%d\t", run->measured_s, run->predicted_s, run->rel_err * 100,
                run->band);
        plot_data_field(f, run->name);
        fputc('\n', f);
    }
}

void plot_scatter_write_vars(const plot_scatter *sc, FILE *f) {
    fprintf(f, "lo = %.9g\nhi = %.9g\nnruns = %d\nwithin5 = %d\nwithin10 = %d\n", sc->lo_s,
            sc->hi_s, sc->nruns, sc->within5, sc->within10);
}
