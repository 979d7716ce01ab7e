/* epplot: draws traces, validation runs, summaries, sweeps and searches with gnuplot
 * (docs/plots.md).
 * Every command checks its inputs first; any problem is one line on stderr and exit status 2, and
 * no output file is left behind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot_exposed.h"
#include "plot_gnuplot.h"
#include "plot_scatter.h"
#include "plot_scripts.h"
#include "plot_search.h"
#include "plot_sweep.h"
#include "plot_timeline.h"
#include "plot_util.h"

static const char usage[] =
    "usage: epplot timeline [--predicted SIM.trace.json] [--measured REF.trace.json]\n"
    "                       [--ranks 0,1,...] [--from-us A] [--to-us B] -o OUT\n"
    "       epplot scatter  --runs RUNS.csv -o OUT\n"
    "       epplot exposed  --summary A.json [--label L] [--summary B.json [--label L]] ... -o "
    "OUT\n"
    "       epplot sweep    --csv RANKED.csv [--top N] [--label-col COL[,COL...]] -o OUT\n"
    "       epplot search   --csv SEARCH.csv -o OUT\n"
    "OUT ends in .png or .svg. Common options: --title T, --data FILE (also keep the gnuplot "
    "data).\n"
    "RUNS.csv columns: name,measured_s,predicted_s (others ignored). RANKED.csv: "
    "tokens_per_s_per_gpu\n"
    "and a label (--label-col, else `config`, else the columns left of the metric). SEARCH.csv:\n"
    "epsim search --out (rank, iteration_time_s, peak_memory_gib, peak_memory_of_gpu). gnuplot is\n"
    "taken from $EPPLOT_GNUPLOT or PATH. Details: docs/plots.md.\n";

static const char *cmd = "epplot";

static int fail(const char *msg) {
    fprintf(stderr, "%s: %s\n", cmd, msg);
    return 2;
}

typedef struct {
    const char *out, *title, *data;
} common_opts;

/* Takes --title/--data/-o; returns 1 if argv[*i] was one of them, -1 on a missing value. */
static int common_opt(int argc, char **argv, int *i, common_opts *c) {
    const char *a = argv[*i];
    const char **slot = !strcmp(a, "-o") || !strcmp(a, "--out") ? &c->out
                        : !strcmp(a, "--title")                 ? &c->title
                        : !strcmp(a, "--data")                  ? &c->data
                                                                : NULL;
    if (!slot) return 0;
    if (*i + 1 >= argc) return -1;
    *slot = argv[++*i];
    return 1;
}

/* The options of a command that reads one file (`flag FILE`) besides the common ones. Returns 0,
 * or fail()'s status after its one line. */
static int file_cmd_opts(int argc, char **argv, common_opts *c, const char *flag,
                         const char **file) {
    char err[EP_ERRLEN];
    for (int i = 1; i < argc; i++) {
        int k = common_opt(argc, argv, &i, c);
        if (k > 0) continue;
        if (k < 0 || i + 1 >= argc) {
            snprintf(err, EP_ERRLEN, "%s needs a value", argv[i]);
            return fail(err);
        }
        if (strcmp(argv[i], flag) != 0) {
            snprintf(err, EP_ERRLEN, "unknown option %s (see epplot --help)", argv[i]);
            return fail(err);
        }
        *file = argv[++i];
    }
    return 0;
}

static int parse_us(const char *flag, const char *s, double *out, char err[EP_ERRLEN]) {
    if (plot_parse_number(s, out) != 0 || *out < 0) {
        snprintf(err, EP_ERRLEN, "%s %s: expected a time >= 0 in microseconds", flag, s);
        return -1;
    }
    return 0;
}

static int parse_ranks(const char *s, int **ranks, int *n, char err[EP_ERRLEN]) {
    *n = 0;
    *ranks = calloc(strlen(s) / 2 + 1, sizeof **ranks);
    if (!*ranks) {
        snprintf(err, EP_ERRLEN, "out of memory");
        return -1;
    }
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 1 << 24 || errno || (*end && *end != ',')) {
            snprintf(err, EP_ERRLEN, "--ranks %s: expected rank numbers separated by commas", s);
            return -1;
        }
        (*ranks)[(*n)++] = (int)v;
        if (!*end) return 0;
        p = end + 1;
    }
}

static int finish(const plot_job *job, const common_opts *c, const char *what) {
    char err[EP_ERRLEN];
    if (plot_render(job, c->out, c->data, err) != 0) return fail(err);
    fprintf(stderr, "%s: %s -> %s\n", cmd, what, c->out);
    return 0;
}

static int need_out(const common_opts *c, char err[EP_ERRLEN]) {
    if (!c->out) {
        snprintf(err, EP_ERRLEN, "needs -o OUT.png or -o OUT.svg");
        return -1;
    }
    if (!plot_out_kind(c->out)) {
        snprintf(err, EP_ERRLEN, "output %s: name it .png or .svg", c->out);
        return -1;
    }
    return 0;
}

/* --- timeline ----------------------------------------------------------------------------------
 */

static void tl_data(const void *ctx, FILE *f) {
    plot_timeline_write_data(ctx, f);
}
static void tl_vars(const void *ctx, FILE *f) {
    plot_timeline_write_vars(ctx, f);
}

static int cmd_timeline(int argc, char **argv) {
    common_opts c = {0};
    const char *path[2] = {NULL, NULL};
    int *ranks = NULL, nranks = 0, rc = 2;
    plot_timeline_opts o = {.from_us = 0, .to_us = -1};
    plot_trace tr[2];
    int loaded[2] = {0, 0};
    char err[EP_ERRLEN] = "";
    for (int i = 1; i < argc; i++) {
        int k = common_opt(argc, argv, &i, &c);
        const char *a = argv[i];
        if (k > 0) continue;
        if (k < 0 || i + 1 >= argc) {
            snprintf(err, EP_ERRLEN, "%s needs a value", a);
            goto out;
        }
        if (!strcmp(a, "--predicted"))
            path[PLOT_PREDICTED] = argv[++i];
        else if (!strcmp(a, "--measured"))
            path[PLOT_MEASURED] = argv[++i];
        else if (!strcmp(a, "--ranks")) {
            free(ranks);
            if (parse_ranks(argv[++i], &ranks, &nranks, err)) goto out;
        } else if (!strcmp(a, "--from-us")) {
            if (parse_us(a, argv[++i], &o.from_us, err)) goto out;
        } else if (!strcmp(a, "--to-us")) {
            if (parse_us(a, argv[++i], &o.to_us, err)) goto out;
        } else {
            snprintf(err, EP_ERRLEN, "unknown option %s (see epplot --help)", a);
            goto out;
        }
    }
    if (!path[0] && !path[1]) {
        snprintf(err, EP_ERRLEN, "needs --predicted TRACE, --measured TRACE or both");
        goto out;
    }
    if (need_out(&c, err)) goto out;
    for (int s = 0; s < 2; s++) {
        if (!path[s]) continue;
        if (plot_trace_load(path[s], &tr[s], err)) goto out;
        loaded[s] = 1;
        o.src[s] = &tr[s];
    }
    o.ranks = ranks;
    o.nranks = nranks;
    plot_timeline tl;
    if (plot_timeline_build(&o, &tl, err)) goto out;
    char title[512];
    if (c.title)
        snprintf(title, sizeof title, "%s", c.title);
    else if (tl.both)
        snprintf(title, sizeof title, "predicted (%s, upper half of each lane) and measured (%s)",
                 tr[0].program[0] ? tr[0].program : "predicted",
                 tr[1].program[0] ? tr[1].program : "measured");
    else
        snprintf(title, sizeof title, "%s (%s)", path[0] ? "predicted" : "measured",
                 o.src[path[0] ? 0 : 1]->program[0] ? o.src[path[0] ? 0 : 1]->program : "trace");
    plot_job job = {.script = plot_script_timeline,
                    .title = title,
                    .data = tl_data,
                    .vars = tl_vars,
                    .ctx = &tl,
                    .width_px = 1600};
    char what[128];
    snprintf(what, sizeof what, "timeline of %d ops in %d lanes", tl.nboxes, tl.nlanes);
    rc = finish(&job, &c, what);
    plot_timeline_free(&tl);
out:
    if (err[0]) rc = fail(err);
    for (int s = 0; s < 2; s++)
        if (loaded[s]) plot_trace_free(&tr[s]);
    free(ranks);
    return rc;
}

/* --- scatter -----------------------------------------------------------------------------------
 */

static void sc_data(const void *ctx, FILE *f) {
    plot_scatter_write_data(ctx, f);
}
static void sc_vars(const void *ctx, FILE *f) {
    plot_scatter_write_vars(ctx, f);
}

static int cmd_scatter(int argc, char **argv) {
    common_opts c = {0};
    const char *runs = NULL;
    char err[EP_ERRLEN];
    int rc0 = file_cmd_opts(argc, argv, &c, "--runs", &runs);
    if (rc0) return rc0;
    if (!runs) return fail("needs --runs RUNS.csv (columns name,measured_s,predicted_s)");
    if (need_out(&c, err)) return fail(err);
    plot_scatter sc;
    if (plot_scatter_load(runs, &sc, err)) return fail(err);
    plot_job job = {.script = plot_script_scatter,
                    .title = c.title ? c.title : "predicted vs measured iteration time",
                    .data = sc_data,
                    .vars = sc_vars,
                    .ctx = &sc,
                    .width_px = 900,
                    .height_px = 900};
    char what[128];
    snprintf(what, sizeof what, "scatter of %d runs (%d within 5 %%, %d within 10 %%)", sc.nruns,
             sc.within5, sc.within10);
    int rc = finish(&job, &c, what);
    plot_scatter_free(&sc);
    return rc;
}

/* --- exposed -----------------------------------------------------------------------------------
 */

typedef struct {
    const plot_exposed_bar *bars;
    int n;
} ex_ctx;

static void ex_data(const void *ctx, FILE *f) {
    const ex_ctx *x = ctx;
    plot_exposed_write_data(x->bars, x->n, f);
}
static void ex_vars(const void *ctx, FILE *f) {
    const ex_ctx *x = ctx;
    plot_exposed_write_vars(x->bars, x->n, f);
}

static int cmd_exposed(int argc, char **argv) {
    common_opts c = {0};
    char err[EP_ERRLEN];
    const char **files = calloc((size_t)argc, sizeof *files);
    const char **labels = calloc((size_t)argc, sizeof *labels);
    plot_exposed_bar *bars = calloc((size_t)argc, sizeof *bars);
    int n = 0, rc = 2;
    err[0] = 0;
    if (!files || !labels || !bars) {
        snprintf(err, EP_ERRLEN, "out of memory");
        goto out;
    }
    for (int i = 1; i < argc; i++) {
        int k = common_opt(argc, argv, &i, &c);
        if (k > 0) continue;
        if (k < 0 || i + 1 >= argc) {
            snprintf(err, EP_ERRLEN, "%s needs a value", argv[i]);
            goto out;
        }
        if (!strcmp(argv[i], "--summary")) {
            files[n++] = argv[++i];
        } else if (!strcmp(argv[i], "--label")) {
            if (n == 0 || labels[n - 1]) {
                snprintf(err, EP_ERRLEN, "--label %s must follow its --summary FILE", argv[i + 1]);
                goto out;
            }
            labels[n - 1] = argv[++i];
        } else {
            snprintf(err, EP_ERRLEN, "unknown option %s (see epplot --help)", argv[i]);
            goto out;
        }
    }
    if (n == 0) {
        snprintf(err, EP_ERRLEN, "needs at least one --summary FILE.summary.json");
        goto out;
    }
    if (need_out(&c, err)) goto out;
    for (int i = 0; i < n; i++)
        if (plot_exposed_load(files[i], labels[i], &bars[i], err)) goto out;
    ex_ctx x = {bars, n};
    plot_job job = {.script = plot_script_exposed,
                    .title = c.title ? c.title : "exposed communication per iteration",
                    .data = ex_data,
                    .vars = ex_vars,
                    .ctx = &x,
                    .width_px = n > 6 ? 300 + 110 * n : 1000,
                    .height_px = 650};
    char what[64];
    snprintf(what, sizeof what, "exposed communication of %d configurations", n);
    rc = finish(&job, &c, what);
out:
    if (err[0]) rc = fail(err);
    free(files);
    free(labels);
    free(bars);
    return rc;
}

/* --- sweep -------------------------------------------------------------------------------------
 */

static void sw_data(const void *ctx, FILE *f) {
    plot_sweep_write_data(ctx, f);
}
static void sw_vars(const void *ctx, FILE *f) {
    plot_sweep_write_vars(ctx, f);
}

static int cmd_sweep(int argc, char **argv) {
    common_opts c = {0};
    const char *csv = NULL, *label_col = NULL;
    int top = 20;
    char err[EP_ERRLEN];
    for (int i = 1; i < argc; i++) {
        int k = common_opt(argc, argv, &i, &c);
        const char *a = argv[i];
        if (k > 0) continue;
        if (k < 0 || i + 1 >= argc) {
            snprintf(err, EP_ERRLEN, "%s needs a value", a);
            return fail(err);
        }
        if (!strcmp(a, "--csv")) {
            csv = argv[++i];
        } else if (!strcmp(a, "--label-col")) {
            label_col = argv[++i];
        } else if (!strcmp(a, "--top")) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || v < 1 || v > 1000) {
                snprintf(err, EP_ERRLEN, "--top %s: expected a count from 1 to 1000", argv[i]);
                return fail(err);
            }
            top = (int)v;
        } else {
            snprintf(err, EP_ERRLEN, "unknown option %s (see epplot --help)", a);
            return fail(err);
        }
    }
    if (!csv) return fail("needs --csv RANKED.csv (from epsim sweep)");
    if (need_out(&c, err)) return fail(err);
    plot_sweep sw;
    if (plot_sweep_load(csv, label_col, top, &sw, err)) return fail(err);
    char title[128];
    snprintf(title, sizeof title, "top %d of %d configurations by tokens/s per GPU", sw.nbars,
             sw.nrows - sw.nskipped);
    plot_job job = {.script = plot_script_sweep,
                    .title = c.title ? c.title : title,
                    .data = sw_data,
                    .vars = sw_vars,
                    .ctx = &sw,
                    .width_px = 1400};
    char what[64];
    snprintf(what, sizeof what, "sweep, %d bars", sw.nbars);
    int rc = finish(&job, &c, what);
    plot_sweep_free(&sw);
    return rc;
}

/* --- search ------------------------------------------------------------------------------------
 */

static void se_data(const void *ctx, FILE *f) {
    plot_search_write_data(ctx, f);
}
static void se_vars(const void *ctx, FILE *f) {
    plot_search_write_vars(ctx, f);
}

static int cmd_search(int argc, char **argv) {
    common_opts c = {0};
    const char *csv = NULL;
    char err[EP_ERRLEN];
    int rc0 = file_cmd_opts(argc, argv, &c, "--csv", &csv);
    if (rc0) return rc0;
    if (!csv) return fail("needs --csv SEARCH.csv (from epsim search --out)");
    if (need_out(&c, err)) return fail(err);
    plot_search ps;
    if (plot_search_load(csv, &ps, err)) return fail(err);
    char title[128];
    snprintf(title, sizeof title, "epsim search: %d simulated layouts, %d fit", ps.npoints,
             ps.nfit);
    plot_job job = {.script = plot_script_search,
                    .title = c.title ? c.title : title,
                    .data = se_data,
                    .vars = se_vars,
                    .ctx = &ps,
                    .width_px = 1000,
                    .height_px = 650};
    char what[64];
    snprintf(what, sizeof what, "search, %d layouts", ps.npoints);
    int rc = finish(&job, &c, what);
    plot_search_free(&ps);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } cmds[] = {{"timeline", cmd_timeline},
                {"scatter", cmd_scatter},
                {"exposed", cmd_exposed},
                {"sweep", cmd_sweep},
                {"search", cmd_search}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) {
            static char prog[32];
            snprintf(prog, sizeof prog, "epplot %s", cmds[i].name);
            cmd = prog;
            return cmds[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr,
            "epplot: unknown command %s (timeline, scatter, exposed, sweep, search; --help)\n",
            argv[1]);
    return 2;
}
