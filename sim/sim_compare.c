/* epsim compare: a measured run against its simulation (sim_compare.h). */
#include "sim_compare.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ep_config.h"
#include "ep_groups.h"
#include "ep_io.h"
#include "ep_opts.h"
#include "sim_cli.h"
#include "sim_json.h"
#include "sim_platform.h"

#define MAX_KINDS 64
#define WORST     10

typedef struct {
    int rank;
    const char *name, *kind; /* owned by the JSON document */
    double dur_us, end_us, ts_us;
} cmp_ev;

typedef struct {
    json_t *root;
    cmp_ev *ev;
    size_t n;
    double span_us, t0_us; /* t0: the earliest start, which the CSV's start columns count from */
    const char *topology; /* otherData.topology, or NULL */
    int num_gpus;         /* otherData.num_gpus (epref), or 0 */
} cmp_trace;

typedef struct {
    const char *name;
    double meas, pred; /* seconds, summed over ranks */
    int count;
    /* the EP exchanges (ARRIVAL_KINDS) timed from the last EP member's start: the transfer
     * without the wait for a late peer, which depends on the other ranks, not on the transfer */
    double meas_arrived, pred_arrived;
    /* the same ops from the last member's start to the last member's end: the group's transfer,
     * whichever rank finishes its own part first */
    double meas_span, pred_span;
    int count_arrived;
} cmp_kind;

typedef struct {
    int rank;
    const char *name, *kind;
    double meas, pred, rel;
    double meas_start, pred_start; /* seconds from each trace's earliest start */
    double meas_arrived, pred_arrived; /* EP exchanges from the last member's start; NAN else */
} cmp_op;

static int fail2(const char *msg) {
    fprintf(stderr, "epsim compare: %s\n", msg);
    return 2;
}

static int ev_cmp(const void *a, const void *b) {
    const cmp_ev *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void trace_free(cmp_trace *t) {
    free(t->ev);
    if (t->root) json_decref(t->root);
    memset(t, 0, sizeof *t);
}

/* Reads the complete ("X") events of a Chrome trace; -1 with err on a missing or malformed file. */
static int trace_load(cmp_trace *t, const char *path, char err[EP_ERRLEN]) {
    memset(t, 0, sizeof *t);
    json_error_t je;
    t->root = sim_json_load(path, 0, &je);
    if (!t->root) {
        snprintf(err, EP_ERRLEN, "%s: %s (line %d)", path, je.text, je.line);
        return -1;
    }
    json_t *evs = json_object_get(t->root, "traceEvents");
    if (!json_is_array(evs)) {
        snprintf(err, EP_ERRLEN, "%s: no traceEvents array", path);
        return -1;
    }
    json_t *other = json_object_get(t->root, "otherData");
    json_t *topo = other ? json_object_get(other, "topology") : NULL;
    if (json_is_string(topo)) t->topology = json_string_value(topo);
    json_t *ngpu = other ? json_object_get(other, "num_gpus") : NULL;
    if (json_is_integer(ngpu) && json_integer_value(ngpu) > 0 && json_integer_value(ngpu) < 1 << 20)
        t->num_gpus = (int)json_integer_value(ngpu);
    size_t cap = json_array_size(evs);
    t->ev = calloc(cap ? cap : 1, sizeof *t->ev);
    if (!t->ev) {
        snprintf(err, EP_ERRLEN, "%s: out of memory", path);
        return -1;
    }
    double lo = INFINITY, hi = -INFINITY;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) {
        json_t *ph = json_object_get(e, "ph");
        if (!json_is_string(ph) || strcmp(json_string_value(ph), "X") != 0) continue;
        json_t *pid = json_object_get(e, "pid"), *name = json_object_get(e, "name");
        json_t *dur = json_object_get(e, "dur"), *ts = json_object_get(e, "ts");
        if (!json_is_integer(pid) || !json_is_string(name) || !json_is_number(dur) ||
            !json_is_number(ts) || json_number_value(dur) < 0) {
            snprintf(err, EP_ERRLEN, "%s: event %zu lacks pid, name, ts or dur", path, i);
            return -1;
        }
        json_t *args = json_object_get(e, "args");
        json_t *kind = args ? json_object_get(args, "kind") : NULL;
        cmp_ev *v = &t->ev[t->n++];
        v->rank = (int)json_integer_value(pid);
        v->name = json_string_value(name);
        v->kind = json_is_string(kind) ? json_string_value(kind) : "unknown";
        v->dur_us = json_number_value(dur);
        v->ts_us = json_number_value(ts);
        v->end_us = v->ts_us + v->dur_us;
        if (v->ts_us < lo) lo = v->ts_us;
        if (v->end_us > hi) hi = v->end_us;
    }
    if (t->n == 0) {
        snprintf(err, EP_ERRLEN, "%s: no complete (\"X\") events", path);
        return -1;
    }
    t->span_us = hi - lo;
    t->t0_us = lo;
    qsort(t->ev, t->n, sizeof *t->ev, ev_cmp);
    for (size_t k = 1; k < t->n; k++)
        if (ev_cmp(&t->ev[k - 1], &t->ev[k]) == 0) {
            snprintf(err, EP_ERRLEN, "%s: op %s appears twice on rank %d", path, t->ev[k].name,
                     t->ev[k].rank);
            return -1;
        }
    return 0;
}

/* iteration_time_s of a summary JSON (NAN when the file or the member is missing) and, with
 * layout, the parallel layout the simulation resolved (its "config"), enough for
 * ep_group_members: *have_layout 0 when a member is missing. One read of the file. */
static double summary_read(const char *path, ep_config *layout, int *have_layout) {
    static const struct {
        const char *key;
        size_t off;
    } fields[] = {
        {"tensor_model_parallel_size", offsetof(ep_config, tensor_model_parallel_size)},
        {"context_parallel_size", offsetof(ep_config, context_parallel_size)},
        {"pipeline_model_parallel_size", offsetof(ep_config, pipeline_model_parallel_size)},
        {"data_parallel_size", offsetof(ep_config, data_parallel_size)},
        {"expert_model_parallel_size", offsetof(ep_config, expert_model_parallel_size)},
        {"expert_tensor_parallel_size", offsetof(ep_config, expert_tensor_parallel_size)},
        {"num_distributed_optimizer_instances",
         offsetof(ep_config, num_distributed_optimizer_instances)},
        {"world_size", offsetof(ep_config, world_size)},
    };
    if (have_layout) *have_layout = 0;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return NAN;
    json_t *v = json_object_get(root, "iteration_time_s");
    double d = json_is_number(v) ? json_number_value(v) : NAN;
    if (layout) {
        json_t *c = json_object_get(root, "config");
        int ok = 1;
        ep_config_defaults(layout);
        for (size_t i = 0; i < sizeof fields / sizeof fields[0] && ok; i++) {
            json_t *f = c ? json_object_get(c, fields[i].key) : NULL;
            ok = json_is_integer(f) && json_integer_value(f) > 0 && json_integer_value(f) < 1 << 20;
            if (ok) *(int *)((char *)layout + fields[i].off) = (int)json_integer_value(f);
        }
        *have_layout = ok;
    }
    json_decref(root);
    return d;
}

static int file_readable(const char *p) {
    return access(p, R_OK) == 0;
}

static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int op_worse(const void *a, const void *b) {
    const cmp_op *x = a, *y = b;
    return x->rel > y->rel ? -1 : x->rel < y->rel;
}

/* Quantile q of sorted v[0..n) by linear interpolation. */
static double quantile(const double *v, size_t n, double q) {
    if (n == 0) return NAN;
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n) return v[n - 1];
    return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

static double pct(double pred, double meas) {
    return meas > 0 ? 100 * (pred - meas) / meas : NAN;
}

/* The flags of RUN.args as words (# starts a comment). epref writes nested argument files relative
 * to the repository root ("@configs/x.args"): one that is not readable from here is looked up as a
 * bundled config. Returns the word count, or -1 with err. */
#define MAX_WORDS 512
static int read_words(const char *path, char *buf, size_t cap, char **w, char err[EP_ERRLEN]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, EP_ERRLEN, "cannot read %s", path);
        return -1;
    }
    size_t n = fread(buf, 1, cap - 1, f);
    int big = !feof(f);
    fclose(f);
    if (big) {
        snprintf(err, EP_ERRLEN, "%s: too long", path);
        return -1;
    }
    buf[n] = 0;
    int nw = 0;
    for (char *line = buf, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t;
             t = strtok_r(NULL, " \t\r", &save)) {
            if (nw == MAX_WORDS) {
                snprintf(err, EP_ERRLEN, "%s: more than %d words", path, MAX_WORDS);
                return -1;
            }
            w[nw++] = t;
        }
    }
    return nw;
}

/* The topology of a run without otherData.topology: the folder of the run or the one above it
 * (traces/<machine>/runs/<name>, traces/<machine>/heldout/<name>) where a bundled topology has
 * that name, else h200x2 (the lent machine of the first runs). */
static const char *run_machine(const char *run, char *out, size_t len) {
    char d[4096], found[4096];
    snprintf(d, sizeof d, "%s", run);
    for (int up = 0; up < 2; up++) {
        char *s = strrchr(d, '/');
        if (!s) break;
        *s = 0; /* up 0: the run's folder; up 1: the folder above */
        s = strrchr(d, '/');
        snprintf(out, len, "%s", s ? s + 1 : d);
        if (sim_find_data("topos", out, ".xml", found, sizeof found) == 0) return out;
    }
    return "h200x2";
}

/* Runs the simulation in this process (SimGrid allows one per process), its summary on stdout
 * silenced. */
static int simulate(const char *run, const char *topo, const char *calib, int world,
                    const char *trace, const char *summary) {
    static char buf[65536], found[MAX_WORDS][4200];
    char *words[MAX_WORDS], path[4200], err[EP_ERRLEN];
    snprintf(path, sizeof path, "%s.args", run);
    int nw = read_words(path, buf, sizeof buf, words, err);
    if (nw < 0) return fail2(err);
    char *av[MAX_WORDS + 16];
    int ac = 0;
    av[ac++] = "epsim";
    av[ac++] = "--topo";
    av[ac++] = (char *)topo;
    if (calib) {
        av[ac++] = "--calib";
        av[ac++] = (char *)calib;
    }
    av[ac++] = "--trace";
    av[ac++] = (char *)trace;
    av[ac++] = "--summary-json";
    av[ac++] = (char *)summary;
    av[ac++] = "--no-preset"; /* the run's flags are complete */
    char wbuf[32];
    if (world > 0) { /* the measured world, not the topology's size; a flag in RUN.args wins */
        snprintf(wbuf, sizeof wbuf, "%d", world);
        av[ac++] = "--world-size";
        av[ac++] = wbuf;
    }
    for (int i = 0; i < nw; i++) {
        const char *name = words[i] + 1;
        if (words[i][0] == '@' && access(name, R_OK) != 0 && strncmp(name, "configs/", 8) == 0 &&
            sim_find_data("configs", name + 8, ".args", found[i] + 1, sizeof found[i] - 1) == 0) {
            found[i][0] = '@';
            av[ac++] = found[i];
        } else
            av[ac++] = words[i];
    }
    av[ac] = NULL;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *null = fopen("/dev/null", "w");
    if (saved >= 0 && null) dup2(fileno(null), STDOUT_FILENO);
    int rc = sim_cli_run(ac, av);
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
    if (null) fclose(null);
    return rc;
}

typedef struct {
    const char *run, *topo;
    double it_meas, it_pred;
    const char *it_source;
    cmp_kind kinds[MAX_KINDS];
    int nkinds;
    cmp_op *ops;
    size_t nops, nzero;
    double median, p90;
    double median_arrived, p90_arrived; /* the EP exchanges from the last member's start */
} cmp_result;

static cmp_kind *kind_of(cmp_result *r, const char *name) {
    for (int k = 0; k < r->nkinds; k++)
        if (strcmp(r->kinds[k].name, name) == 0) return &r->kinds[k];
    if (r->nkinds == MAX_KINDS) return NULL;
    cmp_kind *k = &r->kinds[r->nkinds++];
    k->name = name;
    return k;
}

/* Op kinds exchanged within the EP group (the token all-to-alls, the count / notify exchange):
 * their duration on a rank includes waiting for the last member to start, which depends on the
 * other ranks' compute timing, not on the transfer. */
static const char *const ARRIVAL_KINDS[] = {"a2a_dispatch", "a2a_combine", "alltoall"};

static const cmp_ev *find_ev(const cmp_trace *t, int rank, const char *name) {
    cmp_ev key = {.rank = rank, .name = name};
    return bsearch(&key, t->ev, t->n, sizeof *t->ev, ev_cmp);
}

/* Seconds from the last start of the op among the rank's EP group (same name) to the op's end on
 * the rank, and to the last member's end (*span); both the plain duration where a member lacks
 * the op. */
static double after_arrival(const cmp_trace *t, const cmp_ev *e, const int *members, int n,
                            double *span) {
    double last = e->ts_us, end = e->end_us;
    *span = e->dur_us * 1e-6;
    for (int i = 0; i < n; i++) {
        const cmp_ev *o = members[i] == e->rank ? e : find_ev(t, members[i], e->name);
        if (!o) return e->dur_us * 1e-6;
        if (o->ts_us > last) last = o->ts_us;
        if (o->end_us > end) end = o->end_us;
    }
    *span = (end > last ? end - last : 0) * 1e-6;
    return (e->end_us > last ? e->end_us - last : 0) * 1e-6;
}

static int arrival_kind(const char *kind) {
    for (size_t i = 0; i < sizeof ARRIVAL_KINDS / sizeof ARRIVAL_KINDS[0]; i++)
        if (strcmp(kind, ARRIVAL_KINDS[i]) == 0) return 1;
    return 0;
}

/* Matches ops by (rank, name); -1 with err naming the first unmatched op and the count. layout
 * (NULL: none) gives the EP groups for the transfer times after the last member's start. */
static int match(const cmp_trace *m, const cmp_trace *p, const ep_config *layout, cmp_result *r,
                 char err[EP_ERRLEN]) {
    size_t i = 0, j = 0, unmatched = 0;
    const cmp_ev *first = NULL;
    const char *side = NULL;
    while (i < m->n || j < p->n) {
        int c = i == m->n ? 1 : j == p->n ? -1 : ev_cmp(&m->ev[i], &p->ev[j]);
        if (c == 0) {
            i++, j++;
            continue;
        }
        unmatched++;
        if (!first) {
            first = c < 0 ? &m->ev[i] : &p->ev[j];
            side = c < 0 ? "measured but not simulated" : "simulated but not measured";
        }
        if (c < 0)
            i++;
        else
            j++;
    }
    if (unmatched) {
        snprintf(err, EP_ERRLEN, "unmatched op %s on rank %d (%s); %zu unmatched ops in all",
                 first->name, first->rank, side, unmatched);
        return -1;
    }
    r->ops = calloc(m->n, sizeof *r->ops);
    double *rel = calloc(m->n, sizeof *rel), *rel_arrived = calloc(m->n, sizeof *rel_arrived);
    if (!r->ops || !rel || !rel_arrived) {
        free(rel);
        free(rel_arrived);
        snprintf(err, EP_ERRLEN, "out of memory");
        return -1;
    }
    int world = layout ? layout->world_size : 0;
    int *members = world > 0 ? calloc((size_t)world, sizeof *members) : NULL;
    if (world > 0 && !members) {
        free(rel);
        free(rel_arrived);
        snprintf(err, EP_ERRLEN, "out of memory");
        return -1;
    }
    size_t nrel = 0, nrel_arrived = 0;
    for (size_t k = 0; k < m->n; k++) {
        const cmp_ev *a = &m->ev[k], *b = &p->ev[k];
        r->ops[r->nops].meas_arrived = r->ops[r->nops].pred_arrived = NAN;
        cmp_kind *kd = kind_of(r, a->kind);
        if (kd) {
            kd->meas += a->dur_us * 1e-6;
            kd->pred += b->dur_us * 1e-6;
            kd->count++;
            int n = members && arrival_kind(a->kind)
                        ? ep_group_members(layout, EP_GROUP_EP, a->rank, members)
                        : 0;
            double ma = a->dur_us * 1e-6, pa = b->dur_us * 1e-6;
            if (n > 1) {
                double ms, ps;
                ma = after_arrival(m, a, members, n, &ms);
                pa = after_arrival(p, b, members, n, &ps);
                kd->meas_arrived += ma;
                kd->pred_arrived += pa;
                kd->meas_span += ms;
                kd->pred_span += ps;
                r->ops[r->nops].meas_arrived = ma;
                r->ops[r->nops].pred_arrived = pa;
                kd->count_arrived++;
            }
            if (ma > 0) rel_arrived[nrel_arrived++] = fabs(pa - ma) / ma;
        }
        cmp_op *o = &r->ops[r->nops++];
        o->rank = a->rank;
        o->name = a->name;
        o->kind = a->kind;
        o->meas = a->dur_us * 1e-6;
        o->pred = b->dur_us * 1e-6;
        o->meas_start = (a->ts_us - m->t0_us) * 1e-6;
        o->pred_start = (b->ts_us - p->t0_us) * 1e-6;
        if (a->dur_us > 0) {
            o->rel = fabs(b->dur_us - a->dur_us) / a->dur_us;
            rel[nrel++] = o->rel;
        } else {
            o->rel = -1; /* not counted: zero measured duration */
            r->nzero++;
        }
    }
    free(members);
    qsort(rel, nrel, sizeof *rel, dbl_cmp);
    r->median = quantile(rel, nrel, 0.5);
    r->p90 = quantile(rel, nrel, 0.9);
    free(rel);
    qsort(rel_arrived, nrel_arrived, sizeof *rel_arrived, dbl_cmp);
    r->median_arrived = quantile(rel_arrived, nrel_arrived, 0.5);
    r->p90_arrived = quantile(rel_arrived, nrel_arrived, 0.9);
    free(rel_arrived);
    qsort(r->ops, r->nops, sizeof *r->ops, op_worse);
    return 0;
}

static void print_result(FILE *f, const cmp_result *r) {
    fprintf(f, "epsim compare: %s on %s\n", r->run, r->topo);
    fprintf(f, "  iteration time  measured %.6f s (%s)  predicted %.6f s  error %+.1f%%\n",
            r->it_meas, r->it_source, r->it_pred, pct(r->it_pred, r->it_meas));
    fprintf(f, "  per kind (sum of op durations over all ranks):\n");
    fprintf(f, "    %-14s %6s %12s %12s %8s\n", "kind", "ops", "measured s", "predicted s",
            "error");
    for (int k = 0; k < r->nkinds; k++)
        fprintf(f, "    %-14s %6d %12.6f %12.6f %+7.1f%%\n", r->kinds[k].name, r->kinds[k].count,
                r->kinds[k].meas, r->kinds[k].pred, pct(r->kinds[k].pred, r->kinds[k].meas));
    int arrived = 0;
    for (int k = 0; k < r->nkinds; k++)
        if (r->kinds[k].count_arrived) {
            if (!arrived++)
                fprintf(f, "  EP exchanges from the last member's start (peer waits left out):\n");
            fprintf(f, "    after-arrival %-14s %6d %12.6f %12.6f %+7.1f%%\n", r->kinds[k].name,
                    r->kinds[k].count_arrived, r->kinds[k].meas_arrived, r->kinds[k].pred_arrived,
                    pct(r->kinds[k].pred_arrived, r->kinds[k].meas_arrived));
        }
    if (arrived) fprintf(f, "  the same to the last member's end (the group's transfer):\n");
    for (int k = 0; k < r->nkinds; k++)
        if (r->kinds[k].count_arrived)
            fprintf(f, "    group-span %-14s %6d %12.6f %12.6f %+7.1f%%\n", r->kinds[k].name,
                    r->kinds[k].count_arrived, r->kinds[k].meas_span, r->kinds[k].pred_span,
                    pct(r->kinds[k].pred_span, r->kinds[k].meas_span));
    size_t used = r->nops - r->nzero;
    fprintf(f,
            "  per op: %zu matched (%zu with zero measured time left out), |pred-meas|/meas "
            "median %.1f%%  p90 %.1f%%\n",
            r->nops, r->nzero, 100 * r->median, 100 * r->p90);
    if (arrived)
        fprintf(f,
                "  per op, EP exchanges from the last member's start: median %.1f%%  p90 %.1f%%\n",
                100 * r->median_arrived, 100 * r->p90_arrived);
    fprintf(f, "  worst ops:\n");
    for (size_t k = 0; k < used && k < WORST; k++)
        fprintf(f, "    rank %d %-40s measured %10.1f us  predicted %10.1f us  error %+.1f%%\n",
                r->ops[k].rank, r->ops[k].name, r->ops[k].meas * 1e6, r->ops[k].pred * 1e6,
                pct(r->ops[k].pred, r->ops[k].meas));
}

static void json_num(FILE *f, const char *key, double v, int comma) {
    if (isfinite(v))
        fprintf(f, "\"%s\":%.9g%s", key, v, comma ? "," : "");
    else
        fprintf(f, "\"%s\":null%s", key, comma ? "," : "");
}

static int write_json(const char *path, const cmp_result *r, char err[EP_ERRLEN]) {
    ep_outfile o;
    if (ep_outfile_open(&o, path, err) != 0) return -1;
    FILE *f = o.f;
    fputs("{\"run\":", f);
    ep_json_string(f, r->run);
    fputs(",\"topology\":", f);
    ep_json_string(f, r->topo);
    fputs(",\"iteration\":{", f);
    json_num(f, "measured_s", r->it_meas, 1);
    json_num(f, "predicted_s", r->it_pred, 1);
    json_num(f, "error_pct", pct(r->it_pred, r->it_meas), 1);
    fputs("\"measured_from\":", f);
    ep_json_string(f, r->it_source);
    fputs("},\"kinds\":[", f);
    for (int k = 0; k < r->nkinds; k++) {
        fprintf(f, "%s{\"kind\":", k ? "," : "");
        ep_json_string(f, r->kinds[k].name);
        fprintf(f, ",\"ops\":%d,", r->kinds[k].count);
        json_num(f, "measured_s", r->kinds[k].meas, 1);
        json_num(f, "predicted_s", r->kinds[k].pred, 1);
        json_num(f, "error_pct", pct(r->kinds[k].pred, r->kinds[k].meas), 0);
        if (r->kinds[k].count_arrived) {
            fprintf(f, ",\"after_arrival\":{\"ops\":%d,", r->kinds[k].count_arrived);
            json_num(f, "measured_s", r->kinds[k].meas_arrived, 1);
            json_num(f, "predicted_s", r->kinds[k].pred_arrived, 1);
            json_num(f, "error_pct", pct(r->kinds[k].pred_arrived, r->kinds[k].meas_arrived), 0);
            fputs("},\"group_span\":{", f);
            json_num(f, "measured_s", r->kinds[k].meas_span, 1);
            json_num(f, "predicted_s", r->kinds[k].pred_span, 1);
            json_num(f, "error_pct", pct(r->kinds[k].pred_span, r->kinds[k].meas_span), 0);
            fputc('}', f);
        }
        fputc('}', f);
    }
    fprintf(f, "],\"ops\":{\"matched\":%zu,\"zero_measured\":%zu,", r->nops, r->nzero);
    json_num(f, "median_rel_error", r->median, 1);
    json_num(f, "p90_rel_error", r->p90, 1);
    json_num(f, "median_rel_error_after_arrival", r->median_arrived, 1);
    json_num(f, "p90_rel_error_after_arrival", r->p90_arrived, 1);
    fputs("\"worst\":[", f);
    size_t used = r->nops - r->nzero;
    for (size_t k = 0; k < used && k < WORST; k++) {
        fprintf(f, "%s{\"rank\":%d,\"name\":", k ? "," : "", r->ops[k].rank);
        ep_json_string(f, r->ops[k].name);
        fputc(',', f);
        json_num(f, "measured_s", r->ops[k].meas, 1);
        json_num(f, "predicted_s", r->ops[k].pred, 1);
        json_num(f, "rel_error", r->ops[k].rel, 0);
        fputc('}', f);
    }
    fputs("]}}\n", f);
    return ep_outfile_commit(&o, err);
}

/* Rank, then measured start: each rank's ops in the order they ran. */
static int op_in_time(const void *a, const void *b) {
    const cmp_op *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->meas_start < y->meas_start ? -1 : x->meas_start > y->meas_start;
}

/* One row per matched op; error_pct is empty for an op measured at zero duration. */
static int write_csv(const char *path, const cmp_result *r, char err[EP_ERRLEN]) {
    cmp_op *ops = malloc((r->nops ? r->nops : 1) * sizeof *ops);
    if (!ops) {
        snprintf(err, EP_ERRLEN, "out of memory");
        return -1;
    }
    memcpy(ops, r->ops, r->nops * sizeof *ops);
    qsort(ops, r->nops, sizeof *ops, op_in_time);
    ep_outfile o;
    if (ep_outfile_open(&o, path, err) != 0) {
        free(ops);
        return -1;
    }
    fputs("rank,name,kind,measured_start_s,measured_s,predicted_start_s,predicted_s,error_pct,"
          "measured_after_arrival_s,predicted_after_arrival_s\n",
          o.f);
    for (size_t k = 0; k < r->nops; k++) {
        const cmp_op *op = &ops[k];
        fprintf(o.f, "%d,%s,%s,%.9f,%.9f,%.9f,%.9f,", op->rank, op->name, op->kind, op->meas_start,
                op->meas, op->pred_start, op->pred);
        if (op->meas > 0) fprintf(o.f, "%.3f", pct(op->pred, op->meas));
        if (isfinite(op->meas_arrived))
            fprintf(o.f, ",%.9f,%.9f\n", op->meas_arrived, op->pred_arrived);
        else
            fputs(",,\n", o.f);
    }
    free(ops);
    return ep_outfile_commit(&o, err);
}

static int compare_help(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)row, (void)v, (void)ctx, (void)err;
    puts("usage: epsim compare RUN [--topo T] [--calib FILE] [--json OUT] [--csv OUT]\n"
         "  RUN is the path prefix of a measured run: RUN.args, RUN.trace.json (or\n"
         "  RUN.trace.json.xz) and optionally RUN.summary.json (docs/epsim.md, \"Compare\");\n"
         "  --csv writes one row per matched op (outputs appear together or not at all)");
    return 1;
}

/* The one RUN; any other argument is unexpected. */
static int compare_other(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    const char **run = ctx;
    if (arg[0] == '-' || *run) {
        snprintf(err, EP_ERRLEN, "unexpected argument %.200s", arg);
        return -1;
    }
    *run = arg;
    return 0;
}

int sim_compare_main(int argc, char **argv) {
    const char *run = NULL, *topo = NULL, *calib = NULL, *json = NULL, *csv = NULL;
    const ep_opt rows[] = {
        {.name = "--topo", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &topo},
        {.name = "--calib", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &calib},
        {.name = "--json", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &json},
        {.name = "--csv", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &csv},
        {.name = "--help", .kind = EP_OPT_CALL, .fn = compare_help},
        {.name = "-h", .kind = EP_OPT_CALL, .fn = compare_help},
        {.name = NULL},
    };
    /* a value is the next argument, whatever it is */
    ep_opts p = {rows, compare_other, &run, 1};
    char err[EP_ERRLEN];
    int prc = ep_opts_parse(&p, argc - 1, argv + 1, err);
    if (prc != 0) return prc > 0 ? 0 : fail2(err);
    if (!run)
        return fail2("usage: epsim compare RUN [--topo T] [--calib FILE] [--json OUT] [--csv OUT]");
    const char *outs[] = {json, csv};
    for (int k = 0; k < 2; k++)
        if (outs[k] && ep_output_check(outs[k], err) != 0) return fail2(err);
    char args[4200], mtrace[4300], msum[4200];
    snprintf(args, sizeof args, "%s.args", run);
    char tr[4200];
    snprintf(tr, sizeof tr, "%s.trace.json", run);
    if (ep_infile_find(tr, mtrace, sizeof mtrace) != 0) /* committed as .trace.json.xz */
        snprintf(mtrace, sizeof mtrace, "%s", tr);
    snprintf(msum, sizeof msum, "%s.summary.json", run);
    if (!file_readable(args)) {
        snprintf(err, EP_ERRLEN, "cannot read %s", args);
        return fail2(err);
    }
    cmp_trace meas, pred;
    memset(&pred, 0, sizeof pred);
    if (trace_load(&meas, mtrace, err) != 0) {
        trace_free(&meas);
        return fail2(err);
    }
    char machine[256];
    if (!topo) topo = meas.topology ? meas.topology : run_machine(run, machine, sizeof machine);

    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || !*tmpdir) tmpdir = "/tmp";
    char ptrace[4200], psum[4200];
    snprintf(ptrace, sizeof ptrace, "%s/epsim_compare_%d.trace.json", tmpdir, (int)getpid());
    snprintf(psum, sizeof psum, "%s/epsim_compare_%d.summary.json", tmpdir, (int)getpid());
    int rc = simulate(run, topo, calib, meas.num_gpus, ptrace, psum);
    if (rc != 0) {
        trace_free(&meas);
        remove(ptrace);
        remove(psum);
        return rc;
    }
    rc = trace_load(&pred, ptrace, err) != 0 ? 1 : 0;
    ep_config layout;
    int have_layout;
    double it_pred = summary_read(psum, &layout, &have_layout);
    remove(ptrace);
    remove(psum);
    if (rc != 0) {
        fprintf(stderr, "epsim compare: simulated trace: %s\n", err);
        trace_free(&meas);
        trace_free(&pred);
        return 1;
    }
    cmp_result r;
    memset(&r, 0, sizeof r);
    r.run = run;
    r.topo = topo;
    r.it_pred = isfinite(it_pred) ? it_pred : pred.span_us * 1e-6;
    r.it_meas = summary_read(msum, NULL, NULL);
    r.it_source = "summary";
    if (!isfinite(r.it_meas)) {
        r.it_meas = meas.span_us * 1e-6;
        r.it_source = "trace span";
    }
    if (match(&meas, &pred, have_layout ? &layout : NULL, &r, err) != 0) {
        rc = fail2(err);
    } else {
        print_result(stdout, &r);
        ep_outputs_begin();
        int wrc = 0;
        if (json) wrc = write_json(json, &r, err);
        if (wrc == 0 && csv) wrc = write_csv(csv, &r, err);
        if (wrc == 0)
            wrc = ep_outputs_commit(err);
        else
            ep_outputs_abort();
        if (wrc != 0) rc = fail2(err);
    }
    free(r.ops);
    trace_free(&meas);
    trace_free(&pred);
    return rc;
}
