/* plot_exposed: exposed communication per kind, one stacked bar per configuration (docs/plots.md,
 * "Exposed communication").
 *
 * Input: summary JSON files (--summary-json of epsim / epref) with an object "exposed_comm_s"
 * holding numbers "dispatch", "combine", "dp" and "pp" in seconds, and optionally "other" (comm
 * outside these classes, e.g. TP collectives: drawn on top so that a stack adds up to the summary's
 * total); other members are ignored.
 */
#ifndef PLOT_EXPOSED_H
#define PLOT_EXPOSED_H

#include <stdio.h>

#include "ep_err.h"

enum { PLOT_EXPOSED_KINDS = 5, PLOT_EXPOSED_REQUIRED = 4 };
/* dispatch combine dp pp (required), other (optional, 0 when absent) */
extern const char *const plot_exposed_kind[PLOT_EXPOSED_KINDS];

typedef struct {
    char label[128];
    double s[PLOT_EXPOSED_KINDS]; /* seconds, in plot_exposed_kind order */
    double total_s;               /* sum of the kinds */
} plot_exposed_bar;

/* Reads one summary. label NULL: the file name without ".summary.json" / ".json". Returns 0, or -1
 * with err (unreadable, malformed JSON, missing object or key, a negative or non-numeric value). */
int plot_exposed_load(const char *path, const char *label, plot_exposed_bar *bar,
                      char err[EP_ERRLEN]);

/* Data: "label<TAB>dispatch_ms<TAB>combine_ms<TAB>dp_ms<TAB>pp_ms<TAB>other_ms<TAB>total_ms" per
 * bar. */
void plot_exposed_write_data(const plot_exposed_bar *bars, int n, FILE *f);
/* gnuplot settings: nbars, ymax (ms, above the tallest stack). */
void plot_exposed_write_vars(const plot_exposed_bar *bars, int n, FILE *f);

#endif
