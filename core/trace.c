/* Chrome-trace writer (format in ep_trace.h and docs/epsim.md, "Metrics"). Events are streamed
 * to a temporary file as they come, so memory stays flat for million-op traces; the file is
 * renamed into place only when complete. */
#include "ep_trace.h"

#include <stdlib.h>
#include <string.h>

#include "ep_io.h"

struct ep_trace {
    ep_outfile out;
    int nevents;
};

ep_trace *ep_trace_open(const char *path, const char *meta_json, char err[EP_ERRLEN])
{
    ep_trace *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, EP_ERRLEN, "out of memory opening trace %s", path);
        return NULL;
    }
    if (ep_outfile_open(&t->out, path, err) != 0) {
        free(t);
        return NULL;
    }
    /* otherData first: readers that stream the file see how it was made before the events. */
    fprintf(t->out.f, "{\"displayTimeUnit\":\"ms\",\"otherData\":%s,\n\"traceEvents\":[",
            meta_json && meta_json[0] ? meta_json : "{}");
    return t;
}

static void sep(ep_trace *t)
{
    fputs(t->nevents++ ? ",\n" : "\n", t->out.f);
}

void ep_trace_name_track(ep_trace *t, int rank, int stream, const char *stream_name)
{
    sep(t);
    fprintf(t->out.f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
            rank, stream);
    ep_json_string(t->out.f, stream_name);
    fputs("}}", t->out.f);
    sep(t);
    fprintf(t->out.f,
            "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"rank %d\"}}",
            rank, stream, rank);
}

void ep_trace_add(ep_trace *t, const ep_trace_event *ev)
{
    FILE *f = t->out.f;
    sep(t);
    fputs("{\"ph\":\"X\",\"name\":", f);
    ep_json_string(f, ev->name);
    /* %.3f: nanosecond resolution in microsecond units, stable text for byte-identical outputs */
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"kind\":", ev->rank,
            ev->stream, ev->ts_us, ev->dur_us);
    ep_json_string(f, ev->kind);
    fprintf(f, ",\"mb\":%d,\"layer\":%d,\"bytes\":%.0f,\"flops\":%.0f}}", ev->mb, ev->layer,
            ev->bytes, ev->flops);
}

int ep_trace_close(ep_trace *t, char err[EP_ERRLEN])
{
    fputs("\n]}\n", t->out.f);
    int rc = ep_outfile_commit(&t->out, err);
    free(t);
    return rc;
}

void ep_trace_abort(ep_trace *t)
{
    if (!t)
        return;
    ep_outfile_abort(&t->out);
    free(t);
}
