/* plot_scatter: predicted against measured iteration time of validation runs (docs/plots.md,
 * "Scatter").
 *
 * Input: a CSV with a header naming at least `name`, `measured_s` and `predicted_s` (seconds per
 * iteration); other columns are ignored. The relative error is (predicted - measured) / measured.
 */
#ifndef PLOT_SCATTER_H
#define PLOT_SCATTER_H

#include <stdio.h>

#include "ep_err.h"

typedef struct {
    char *name;
    double measured_s, predicted_s;
    double rel_err; /* (predicted - measured) / measured */
    int band;       /* 5: within +-5 %, 10: within +-10 %, 0: outside */
} plot_run;

typedef struct {
    int nruns;
    plot_run *runs; /* file order */
    int within5, within10;
    double lo_s, hi_s; /* axis range covering every point with a margin */
} plot_scatter;

/* Relative error and band of one run (band limits included: 5 % off is within +-5 %). */
double plot_rel_err(double measured_s, double predicted_s);
int plot_err_band(double rel_err);

/* Reads the runs CSV. Returns 0, or -1 with err (unreadable, missing column, a measured time not
 * above 0, a predicted time below 0, no rows). */
int plot_scatter_load(const char *path, plot_scatter *sc, char err[EP_ERRLEN]);
void plot_scatter_free(plot_scatter *sc);

/* Data: "measured_s<TAB>predicted_s<TAB>rel_err_pct<TAB>band<TAB>name" per run, file order. */
void plot_scatter_write_data(const plot_scatter *sc, FILE *f);
/* gnuplot settings: lo, hi, nruns, within5, within10. */
void plot_scatter_write_vars(const plot_scatter *sc, FILE *f);

#endif
