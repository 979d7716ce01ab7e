/* sched_trace: a schedule with the start and end of every op as a Chrome trace (ep_trace.h), the
 * one writer that epsim's simulated and epref's measured traces share, so that their tracks, op
 * names and arguments always match. */
#include "ep_sched.h"
#include "ep_trace.h"

int ep_sched_write_trace(const char *path, const char *meta_json, const ep_sched *s,
                         ep_op_span span, void *ctx, char err[EP_ERRLEN]) {
    ep_trace *t = ep_trace_open(path, meta_json, err);
    if (!t) return -1;
    char name[256];
    for (int r = 0; r < s->world; r++) {
        int used[EP_NUM_STREAMS] = {0};
        for (int i = 0; i < s->ranks[r].nops; i++)
            used[s->ranks[r].ops[i].stream] = 1;
        for (int st = 0; st < EP_NUM_STREAMS; st++)
            if (used[st]) ep_trace_name_track(t, r, st, ep_stream_name((ep_stream)st));
        for (int i = 0; i < s->ranks[r].nops; i++) {
            const ep_op *op = &s->ranks[r].ops[i];
            double start, end;
            span(ctx, r, i, &start, &end);
            ep_op_name(op, name, sizeof name);
            ep_trace_event ev = {r,           op->stream,
                                 name,        ep_op_kind_name(op->kind),
                                 start * 1e6, (end - start) * 1e6,
                                 op->mb,      op->layer,
                                 op->bytes,   op->flops};
            ep_trace_add(t, &ev);
        }
    }
    return ep_trace_close(t, err);
}
