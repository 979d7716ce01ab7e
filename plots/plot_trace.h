/* plot_trace: reads the shared Chrome-trace format (core/ep_trace.h, docs/architecture.md, "Contracts") into a
 * flat array of complete events, and sorts each op into the colour class the timeline draws.
 */
#ifndef PLOT_TRACE_H
#define PLOT_TRACE_H

#include <stddef.h>

#include "ep_err.h"

/* Colour classes of the timeline, in legend order. */
typedef enum {
    PLOT_CLASS_COMPUTE,
    PLOT_CLASS_DISPATCH,
    PLOT_CLASS_COMBINE,
    PLOT_CLASS_DP,
    PLOT_CLASS_PP,
    PLOT_CLASS_COMM_OTHER, /* TP all-gather / reduce-scatter and the like */
    PLOT_CLASS_HOST_SYNC,
    PLOT_NUM_CLASSES
} plot_class;

typedef struct {
    int rank, stream;
    char *name, *kind;
    double start_us, dur_us; /* start relative to the trace's earliest event */
    plot_class cls;
} plot_event;

typedef struct {
    int nevents;
    plot_event *ev;
    int nnames;
    struct plot_track_name {
        int rank, stream;
        char *name;
    } * names;        /* thread_name metadata, in file order */
    char program[64]; /* otherData.program, "" if absent */
    char path[1024];
} plot_trace;

/* Loads path. Event times are shifted so that the earliest event starts at 0. Returns 0, or -1 with
 * one line in err naming the file and, for a bad event, its index in traceEvents. */
int plot_trace_load(const char *path, plot_trace *t, char err[EP_ERRLEN]);
void plot_trace_free(plot_trace *t);

/* The stream's name from thread_name metadata, else the ep_stream name, else "s<N>" (in buf). */
const char *plot_trace_stream_name(const plot_trace *t, int rank, int stream, char *buf,
                                   size_t len);

/* Class of one op from its kind, stream and name: the rules of ep_op_comm_class (core/sched.c),
 * with the node read from the op name's label: dispatch, notify, routing_ag, thd_max -> dispatch;
 * combine -> combine; other communication on the comm stream (TP collectives, the alltoall
 * dispatcher's count exchange) -> other. */
plot_class plot_classify(const char *kind, int stream, const char *name);
const char *plot_class_name(plot_class c);
/* Fill colour as "#rrggbb". */
const char *plot_class_color(plot_class c);

#endif
