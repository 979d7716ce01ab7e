/* plot_search: step time against peak memory per GPU of the layouts an `epsim search` simulated
 * (docs/plots.md, "Search"; docs/epsim.md, "Search").
 *
 * Input: the search CSV (--out), columns rank, iteration_time_s, peak_memory_gib and
 * peak_memory_of_gpu by name. A row with a step time is a simulated layout: ranked (rank set) when
 * it fits, drawn grey when its simulated peak exceeds the GPU memory; the ten best carry their
 * rank.
 * The GPU memory (peak_memory_gib / peak_memory_of_gpu) is a dashed vertical line.
 */
#ifndef PLOT_SEARCH_H
#define PLOT_SEARCH_H

#include <stdio.h>

#include "ep_err.h"

typedef struct {
    double peak_gib, step_s;
    int rank; /* 1 the fastest that fits; 0 simulated but over the GPU memory */
} plot_search_point;

typedef struct {
    int npoints, nfit, nrows;
    plot_search_point *points;
    double gpu_gib; /* 0 when the CSV does not give it */
} plot_search;

/* Reads the CSV. Returns 0, or -1 with err (unreadable, a missing column, a bad number, no
 * simulated layout). */
int plot_search_load(const char *path, plot_search *ps, char err[EP_ERRLEN]);
void plot_search_free(plot_search *ps);

/* Data: "peak_gib<TAB>step_s<TAB>colour<TAB>label" per point (label: the rank of the ten best). */
void plot_search_write_data(const plot_search *ps, FILE *f);
/* gnuplot settings: gpu_gib, xmax, npoints, nfit. */
void plot_search_write_vars(const plot_search *ps, FILE *f);

#endif
