/* Search points (plot_search.h). */
#include "plot_search.h"

#include <stdlib.h>
#include <string.h>

#include "plot_csv.h"

#define LABELLED 10 /* the best layouts carry their rank */

int plot_search_load(const char *path, plot_search *ps, char err[EP_ERRLEN]) {
    memset(ps, 0, sizeof *ps);
    plot_csv t;
    if (plot_csv_load(path, &t, err) != 0) return -1;
    static const char *const need[] = {"rank", "iteration_time_s", "peak_memory_gib",
                                       "peak_memory_of_gpu"};
    int col[4];
    for (int i = 0; i < 4; i++)
        if ((col[i] = plot_csv_col(&t, need[i])) < 0) {
            snprintf(err, EP_ERRLEN, "%s: no column '%s' (not an epsim search CSV?)", path,
                     need[i]);
            goto fail;
        }
    ps->points = calloc((size_t)(t.nrows ? t.nrows : 1), sizeof *ps->points);
    if (!ps->points) {
        snprintf(err, EP_ERRLEN, "%s: out of memory", path);
        goto fail;
    }
    ps->nrows = t.nrows;
    for (int r = 0; r < t.nrows; r++) {
        if (!plot_csv_cell(&t, r, col[1])[0] || !plot_csv_cell(&t, r, col[2])[0])
            continue; /* not simulated */
        plot_search_point *p = &ps->points[ps->npoints];
        double rank = 0, frac = 0;
        if (plot_csv_number(&t, r, col[1], &p->step_s, err) ||
            plot_csv_number(&t, r, col[2], &p->peak_gib, err) ||
            (plot_csv_cell(&t, r, col[0])[0] && plot_csv_number(&t, r, col[0], &rank, err)) ||
            (plot_csv_cell(&t, r, col[3])[0] && plot_csv_number(&t, r, col[3], &frac, err)))
            goto fail;
        p->rank = (int)rank;
        ps->nfit += p->rank > 0;
        if (frac > 0 && ps->gpu_gib == 0) ps->gpu_gib = p->peak_gib / frac;
        ps->npoints++;
    }
    if (ps->npoints == 0) {
        snprintf(err, EP_ERRLEN, "%s: no simulated layout (no row with iteration_time_s)", path);
        goto fail;
    }
    plot_csv_free(&t);
    return 0;
fail:
    plot_csv_free(&t);
    plot_search_free(ps);
    return -1;
}

void plot_search_free(plot_search *ps) {
    free(ps->points);
    memset(ps, 0, sizeof *ps);
}

void plot_search_write_data(const plot_search *ps, FILE *f) {
    for (int i = 0; i < ps->npoints; i++) {
        const plot_search_point *p = &ps->points[i];
        fprintf(f, "%.6f\t%.9f\t%d\t", p->peak_gib, p->step_s, p->rank > 0 ? 0x0072b2 : 0x999999);
        if (p->rank > 0 && p->rank <= LABELLED)
            fprintf(f, "%d\n", p->rank);
        else
            fputs("\"\"\n", f);
    }
}

void plot_search_write_vars(const plot_search *ps, FILE *f) {
    double xmax = ps->gpu_gib; /* from 0, so that the GPU memory line is in view */
    for (int i = 0; i < ps->npoints; i++)
        if (ps->points[i].peak_gib > xmax) xmax = ps->points[i].peak_gib;
    fprintf(f, "gpu_gib = %.6f\nxmax = %.6f\nnpoints = %d\nnfit = %d\n", ps->gpu_gib,
            xmax > 0 ? xmax * 1.08 : 1.0, ps->npoints, ps->nfit);
}
