/* ep_trace: writer of the shared Chrome-trace format (docs/architecture.md, "Contracts").
 *
 * {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":{meta}}: complete events ph "X" with
 * pid = rank, tid = stream index (named by thread_name metadata events), name = op name, ts/dur in
 * microseconds, args {kind, stream, mb, layer, bytes, flops}. Written to a temporary file beside
 * the target and renamed on ep_trace_close, so no half-written trace is ever left.
 */
#ifndef EP_TRACE_H
#define EP_TRACE_H

#include "ep_err.h"

typedef struct ep_trace ep_trace;

typedef struct {
    int rank;
    int stream;          /* ep_stream value */
    const char *name;    /* op name */
    const char *kind;    /* ep_op_kind_name */
    double ts_us, dur_us;
    int mb, layer;       /* -1 if none */
    double bytes, flops;
} ep_trace_event;

/* Opens a trace for writing. meta_json is a JSON object text (or NULL) stored as "otherData". */
ep_trace *ep_trace_open(const char *path, const char *meta_json, char err[EP_ERRLEN]);
/* Names a (rank, stream) track; call once per track used. */
void ep_trace_name_track(ep_trace *t, int rank, int stream, const char *stream_name);
void ep_trace_add(ep_trace *t, const ep_trace_event *ev);
/* Finishes and renames into place. Returns 0, or -1 with err (the temporary file is removed). */
int ep_trace_close(ep_trace *t, char err[EP_ERRLEN]);
/* Drops the trace: the temporary file is removed, the target untouched. */
void ep_trace_abort(ep_trace *t);

#endif
