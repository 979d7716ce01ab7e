/* plot_csv: a small reader of comma-separated tables with a header row (docs/plots.md).
 *
 * RFC 4180 quoting ("a,b", "say ""x""") and CRLF line ends are accepted; blank lines are skipped;
 * every row must have as many fields as the header. Columns are found by header name.
 */
#ifndef PLOT_CSV_H
#define PLOT_CSV_H

#include "ep_err.h"

typedef struct {
    int ncols, nrows;
    char **header; /* [ncols] */
    char **cells;  /* [nrows * ncols], row-major */
    int *line;     /* [nrows] line number of each row in the file, for messages */
    char path[1024];
} plot_csv;

/* Reads path. Returns 0, or -1 with one line in err naming the file (and line). */
int plot_csv_load(const char *path, plot_csv *t, char err[EP_ERRLEN]);
void plot_csv_free(plot_csv *t);

/* Index of the column named name, or -1. */
int plot_csv_col(const plot_csv *t, const char *name);
static inline const char *plot_csv_cell(const plot_csv *t, int row, int col) {
    return t->cells[(long)row * t->ncols + col];
}
/* Parses a cell as a finite number. Returns 0, or -1 with err naming file, line and column. */
int plot_csv_number(const plot_csv *t, int row, int col, double *out, char err[EP_ERRLEN]);

#endif
