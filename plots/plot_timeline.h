/* plot_timeline: lanes and boxes of the timeline plot (docs/plots.md, "Timeline").
 *
 * One lane per (rank, stream) with an op in the window in either trace, ranks ascending then
 * streams ascending, lane 0 at the top. With both traces, the predicted ops fill the upper half of
 * each lane and the measured ops the lower half; with one trace its ops fill the lane. Times are in
 * milliseconds from each trace's earliest event, so the two traces share one time axis.
 */
#ifndef PLOT_TIMELINE_H
#define PLOT_TIMELINE_H

#include <stdio.h>

#include "plot_trace.h"

enum { PLOT_PREDICTED, PLOT_MEASURED };

typedef struct {
    const plot_trace *src[2]; /* [PLOT_PREDICTED], [PLOT_MEASURED]; either may be NULL */
    const int *ranks;         /* ranks to draw, NULL for all */
    int nranks;
    double from_us, to_us; /* window; to_us < 0 for the end of the traces */
} plot_timeline_opts;

typedef struct {
    int rank, stream;
    char label[96]; /* "r0 comp" */
} plot_lane;

typedef struct {
    double x0_ms, x1_ms, y0, y1;
    int lane, source;
    plot_class cls;
    const char *name; /* borrowed from the trace */
} plot_box;

typedef struct {
    int nlanes, nboxes;
    plot_lane *lanes;
    plot_box *boxes; /* sorted by class, lane, source, start, end, name */
    int both;        /* both traces drawn */
    double x_from_ms, x_to_ms;
} plot_timeline;

/* Builds lanes and boxes. Returns 0, or -1 with err (no trace, a rank not in the traces, an
 * empty window). */
int plot_timeline_build(const plot_timeline_opts *o, plot_timeline *tl, char err[EP_ERRLEN]);
void plot_timeline_free(plot_timeline *tl);

/* Centre of lane i on the y axis (lane 0 highest). */
double plot_timeline_lane_y(const plot_timeline *tl, int lane);

/* Data file: one block per class present (class order), blocks separated by two blank lines;
 * lines "x0_ms<TAB>x1_ms<TAB>y0<TAB>y1<TAB>op name". */
void plot_timeline_write_data(const plot_timeline *tl, FILE *f);
/* gnuplot settings the script uses: nblocks, block_title[], block_color[], y tics, lane lines,
 * x range, height_px. */
void plot_timeline_write_vars(const plot_timeline *tl, FILE *f);

#endif
