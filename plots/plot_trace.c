/* Trace reading and op classes (plot_trace.h). */
#include "plot_trace.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_sched.h"
#include "plot_util.h"

static const char *const k_class_names[PLOT_NUM_CLASSES] = {
    "compute", "dispatch", "combine", "dp", "pp", "other comm", "host sync"};
/* Colour-blind-safe (Okabe-Ito) hues; compute grey so communication stands out. */
static const char *const k_class_colors[PLOT_NUM_CLASSES] = {
    "#9e9e9e", "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00"};

const char *plot_class_name(plot_class c) {
    return (unsigned)c < PLOT_NUM_CLASSES ? k_class_names[c] : "?";
}

const char *plot_class_color(plot_class c) {
    return (unsigned)c < PLOT_NUM_CLASSES ? k_class_colors[c] : "#000000";
}

static int is_comm_kind(const char *k) {
    static const char *const comm[] = {"a2a_dispatch",   "a2a_combine", "alltoall", "all_gather",
                                       "reduce_scatter", "all_reduce",  "send",     "recv"};
    for (size_t i = 0; i < sizeof comm / sizeof comm[0]; i++)
        if (!strcmp(k, comm[i])) return 1;
    return 0;
}

/* Does the op name's label (ep_op_name: [mbN.][cN.][LN.][BN.]label[.phase]) equal want? */
static int label_is(const char *name, const char *want) {
    const char *p = name;
    for (;;) { /* skip the index prefixes */
        const char *q = p;
        if (*q == 'm' && q[1] == 'b')
            q += 2;
        else if (*q == 'c' || *q == 'L' || *q == 'B')
            q += 1;
        else
            break;
        if (*q < '0' || *q > '9') break;
        while (*q >= '0' && *q <= '9')
            q++;
        if (*q != '.') break;
        p = q + 1;
    }
    size_t n = strlen(want);
    if (strncmp(p, want, n)) return 0;
    p += n;
    return !*p || !strcmp(p, ".fwd") || !strcmp(p, ".bwd") || !strcmp(p, ".bwd_dw");
}

plot_class plot_classify(const char *kind, int stream, const char *name) {
    if (!strcmp(kind, "host_sync")) return PLOT_CLASS_HOST_SYNC;
    if (!is_comm_kind(kind)) return PLOT_CLASS_COMPUTE;
    if (stream == EP_STREAM_PP || !strcmp(kind, "send") || !strcmp(kind, "recv"))
        return PLOT_CLASS_PP;
    if (stream == EP_STREAM_DP) return PLOT_CLASS_DP;
    /* the communication of Megatron's dispatch node (core/sched_layer.c): the token all-to-all
     * and, before it, deepep's notify, hybridep's routing-map all-gather and THD max all-reduce */
    if (label_is(name, "dispatch") || label_is(name, "notify") || label_is(name, "routing_ag") ||
        label_is(name, "thd_max"))
        return PLOT_CLASS_DISPATCH;
    if (label_is(name, "combine")) return PLOT_CLASS_COMBINE;
    return PLOT_CLASS_COMM_OTHER;
}

static int get_int(json_t *o, const char *key, int *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1 << 24)
        return -1;
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_num(json_t *o, const char *key, double *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v))) return -1;
    *out = json_number_value(v);
    return 0;
}

/* Checks and stores one event; returns NULL or what is wrong with it. */
static const char *take_event(plot_trace *t, json_t *e) {
    if (!json_is_object(e)) return "not an object";
    json_t *ph = json_object_get(e, "ph");
    if (!json_is_string(ph)) return "no \"ph\" string";
    const char *p = json_string_value(ph);
    json_t *name = json_object_get(e, "name");
    json_t *args = json_object_get(e, "args");
    int rank, stream;
    if (!strcmp(p, "M")) {
        json_t *an = json_is_object(args) ? json_object_get(args, "name") : NULL;
        if (!json_is_string(name) || strcmp(json_string_value(name), "thread_name"))
            return NULL; /* process_name and other metadata carry nothing plotted */
        if (get_int(e, "pid", &rank) || get_int(e, "tid", &stream) || !json_is_string(an))
            return "thread_name metadata without pid, tid and args.name";
        struct plot_track_name *tn = &t->names[t->nnames];
        tn->rank = rank;
        tn->stream = stream;
        tn->name = strdup(json_string_value(an));
        if (!tn->name) return "out of memory";
        t->nnames++;
        return NULL;
    }
    if (strcmp(p, "X")) return NULL; /* counters, instants, flows: not drawn */
    plot_event *ev = &t->ev[t->nevents];
    if (!json_is_string(name)) return "complete event without a \"name\" string";
    if (get_int(e, "pid", &rank) || get_int(e, "tid", &stream))
        return "complete event without non-negative integer \"pid\" and \"tid\"";
    if (get_num(e, "ts", &ev->start_us) || get_num(e, "dur", &ev->dur_us) || ev->dur_us < 0)
        return "complete event without numeric \"ts\" and non-negative \"dur\"";
    json_t *kind = json_is_object(args) ? json_object_get(args, "kind") : NULL;
    if (!json_is_string(kind)) return "complete event without an \"args.kind\" string";
    ev->rank = rank;
    ev->stream = stream;
    ev->name = strdup(json_string_value(name));
    ev->kind = strdup(json_string_value(kind));
    if (!ev->name || !ev->kind) {
        free(ev->name);
        free(ev->kind);
        return "out of memory";
    }
    ev->cls = plot_classify(ev->kind, stream, ev->name);
    t->nevents++;
    return NULL;
}

int plot_trace_load(const char *path, plot_trace *t, char err[EP_ERRLEN]) {
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    json_t *root = plot_load_json(path, err);
    if (!root) return -1;
    json_t *evs = json_is_object(root) ? json_object_get(root, "traceEvents") : NULL;
    if (!json_is_array(evs)) {
        snprintf(err, EP_ERRLEN, "%s: not a trace: no \"traceEvents\" array", path);
        json_decref(root);
        return -1;
    }
    json_t *other = json_object_get(root, "otherData");
    json_t *prog = json_is_object(other) ? json_object_get(other, "program") : NULL;
    if (json_is_string(prog))
        snprintf(t->program, sizeof t->program, "%s", json_string_value(prog));
    size_t n = json_array_size(evs);
    t->ev = calloc(n ? n : 1, sizeof *t->ev);
    t->names = calloc(n ? n : 1, sizeof *t->names);
    if (!t->ev || !t->names) {
        snprintf(err, EP_ERRLEN, "%s: out of memory", path);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const char *bad = take_event(t, json_array_get(evs, i));
        if (bad) {
            snprintf(err, EP_ERRLEN, "%s: traceEvents[%zu]: %s", path, i, bad);
            goto fail;
        }
    }
    if (t->nevents == 0) {
        snprintf(err, EP_ERRLEN, "%s: no complete (\"ph\":\"X\") events to plot", path);
        goto fail;
    }
    double t0 = t->ev[0].start_us;
    for (int i = 1; i < t->nevents; i++)
        t0 = fmin(t0, t->ev[i].start_us);
    for (int i = 0; i < t->nevents; i++)
        t->ev[i].start_us -= t0;
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    plot_trace_free(t);
    return -1;
}

void plot_trace_free(plot_trace *t) {
    for (int i = 0; i < t->nevents; i++) {
        free(t->ev[i].name);
        free(t->ev[i].kind);
    }
    for (int i = 0; i < t->nnames; i++)
        free(t->names[i].name);
    free(t->ev);
    free(t->names);
    t->ev = NULL;
    t->names = NULL;
    t->nevents = t->nnames = 0;
}

const char *plot_trace_stream_name(const plot_trace *t, int rank, int stream, char *buf,
                                   size_t len) {
    for (int i = 0; t && i < t->nnames; i++)
        if (t->names[i].rank == rank && t->names[i].stream == stream) return t->names[i].name;
    if (stream >= 0 && stream < EP_NUM_STREAMS) return ep_stream_name((ep_stream)stream);
    snprintf(buf, len, "s%d", stream);
    return buf;
}
