/* plot_sweep: the best configurations of a sweep as horizontal bars (docs/plots.md, "Sweep").
 *
 * Input: a CSV with a column `tokens_per_s_per_gpu` and a label: the columns named by --label-col
 * (comma-separated, joined as "col=value"), else a column `config`, else every column left of
 * tokens_per_s_per_gpu except `rank` and `index` (the grid axes of `epsim sweep` output). Rows
 * with an empty metric, or a `status` column other than "ok", are skipped (invalid configurations).
 * Where a `model_state_of_gpu` column (epsim sweep) is above 1, the bar is grey and its label says
 * that the model state alone exceeds the GPU's memory.
 */
#ifndef PLOT_SWEEP_H
#define PLOT_SWEEP_H

#include <stdio.h>

#include "ep_err.h"

typedef struct {
    char label[256];
    double tokens_per_s_per_gpu;
    int row;         /* row in the file, 0-based: breaks ties */
    int over_memory; /* model_state_of_gpu > 1: the configuration cannot fit (drawn grey) */
} plot_sweep_bar;

typedef struct {
    int nbars;
    plot_sweep_bar *bars; /* best first */
    int nrows, nskipped;
} plot_sweep;

/* Reads the CSV and keeps the top `top` rows (top >= 1). label_cols may be NULL. Returns 0, or -1
 * with err (unreadable, a missing column, a bad number, no usable row). */
int plot_sweep_load(const char *path, const char *label_cols, int top, plot_sweep *sw,
                    char err[EP_ERRLEN]);
void plot_sweep_free(plot_sweep *sw);

/* Data: "rank<TAB>tokens_per_s_per_gpu<TAB>label" per bar, best first (rank from 0). */
void plot_sweep_write_data(const plot_sweep *sw, FILE *f);
/* gnuplot settings: nbars, xmax, height_px. */
void plot_sweep_write_vars(const plot_sweep *sw, FILE *f);

#endif
