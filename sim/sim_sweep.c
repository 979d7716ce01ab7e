/* epsim sweep: a grid of configurations, each simulated in its own process (SimGrid runs one
 * simulation per process), ranked by tokens/s/GPU (sim_cli.h; docs/epsim.md, "Sweeps"). */
#include "sim_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ep_config.h"
#include "ep_io.h"
#include "ep_opts.h"
#include "sim_runs.h"

#define MAX_AXES   16
#define MAX_VALUES 64

typedef struct {
    char flag[128];
    int n;
    char *val[MAX_VALUES];
} axis;

typedef struct {
    long index;
    int vi[MAX_AXES];
    sim_run_result res;
} row;

static int parse_grid(char *g, axis *ax, int *nax, char err[EP_ERRLEN]) {
    *nax = 0;
    for (char *save = NULL, *part = strtok_r(g, ";", &save); part;
         part = strtok_r(NULL, ";", &save)) {
        while (*part == ' ')
            part++;
        if (!*part) continue;
        char *eq = strchr(part, '=');
        if (!eq || eq == part || !eq[1] || *nax == MAX_AXES) {
            snprintf(err, EP_ERRLEN, "--grid: '%s' is not flag=v1,v2,... (at most %d flags)", part,
                     MAX_AXES);
            return -1;
        }
        *eq = 0;
        axis *a = &ax[(*nax)++];
        const char *name = part;
        while (*name == '-')
            name++;
        snprintf(a->flag, sizeof a->flag, "%s", name);
        a->n = 0;
        for (char *s2 = NULL, *v = strtok_r(eq + 1, ",", &s2); v; v = strtok_r(NULL, ",", &s2)) {
            if (a->n == MAX_VALUES) {
                snprintf(err, EP_ERRLEN, "--grid: more than %d values for %s", MAX_VALUES, name);
                return -1;
            }
            a->val[a->n++] = v;
        }
        if (a->n == 0) {
            snprintf(err, EP_ERRLEN, "--grid: no values for %s", name);
            return -1;
        }
    }
    if (*nax == 0) {
        snprintf(err, EP_ERRLEN, "--grid: empty grid");
        return -1;
    }
    return 0;
}

/* The sweep's progress line (docs/epsim.md, "Sweeps"): configurations done, running and left,
 * elapsed time, and the best one so far by tokens/s/GPU with its grid values. */
static void sweep_progress(const row *rows, long n, long done, long running, const axis *ax,
                           int nax, double elapsed) {
    const row *best = NULL;
    for (long i = 0; i < n; i++)
        if (rows[i].res.ok && (!best || rows[i].res.tps_gpu > best->res.tps_gpu)) best = &rows[i];
    char b[512] = "";
    if (best) {
        int k = snprintf(b, sizeof b, "; best so far %.1f tokens/s/GPU:", best->res.tps_gpu);
        for (int a = 0; a < nax && k > 0 && k < (int)sizeof b; a++)
            k +=
                snprintf(b + k, sizeof b - (size_t)k, " %s=%s", ax[a].flag, ax[a].val[best->vi[a]]);
    }
    fprintf(stderr, "\repsim sweep: %ld done, %ld running, %ld left, %.0f s elapsed%s\033[K", done,
            running, n - done - running, elapsed, b);
    fflush(stderr);
}

static int row_cmp(const void *a, const void *b) {
    const row *x = a, *y = b;
    if (x->res.ok != y->res.ok) return y->res.ok - x->res.ok;
    if (x->res.ok && x->res.tps_gpu != y->res.tps_gpu)
        return x->res.tps_gpu > y->res.tps_gpu ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int sweep_fail(char **common, const char *fmt, const char *a, const char *b) {
    char msg[EP_ERRLEN], safe[EP_ERRLEN * 4];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    fprintf(stderr, "epsim sweep: %s\n", ep_escape_text(msg, safe, sizeof safe));
    free(common);
    return 2;
}

/* What the options fill; an argument that is none of them goes to every run (common). */
typedef struct {
    const char *grid, *out;
    int jobs, show;
    sim_runs_shard shard;
    char **common;
    int ncommon;
} sweep_opts;

static int sweep_other(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    (void)err;
    sweep_opts *o = ctx;
    o->common[o->ncommon++] = (char *)arg;
    return 0;
}

/* What a run's arguments and the progress line need. */
typedef struct {
    row *rows;
    long n;
    const axis *ax;
    int nax;
    const sweep_opts *so;
    char vals[MAX_AXES][512];
} sweep_ctx;

/* Run i: the common arguments, then --flag=value of each axis. */
static char **sweep_args(void *ctx, long i) {
    sweep_ctx *c = ctx;
    const row *r = &c->rows[i];
    char **a = calloc((size_t)(c->so->ncommon + c->nax + 1), sizeof *a);
    if (!a) return NULL;
    int k = 0;
    for (int j = 0; j < c->so->ncommon; j++)
        a[k++] = c->so->common[j];
    for (int j = 0; j < c->nax; j++) {
        snprintf(c->vals[j], sizeof c->vals[j], "--%.120s=%.380s", c->ax[j].flag,
                 c->ax[j].val[r->vi[j]]);
        a[k++] = c->vals[j];
    }
    return a;
}

static void sweep_show(void *ctx, long done, long running, long left, double elapsed) {
    (void)left;
    sweep_ctx *c = ctx;
    sweep_progress(c->rows, c->n, done, running, c->ax, c->nax, elapsed);
}


int sim_sweep_main(int argc, char **argv) {
    char err[EP_ERRLEN];
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    sweep_opts so = {.jobs = ncpu > 0 ? (int)ncpu : 1, .shard = {0, 1}, .show = -1};
    so.common = calloc((size_t)argc + 1, sizeof *so.common);
    char **common = so.common;
    if (!common) return 1;
    const ep_opt opt_rows[] = {
        {.name = "--grid", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &so.grid},
        {.name = "--out", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &so.out},
        SIM_RUNS_OPT_ROWS(&so.jobs, &so.shard, &so.show, "a sweep"),
        {.name = NULL},
    };
    ep_opts p = {opt_rows, sweep_other, &so, 0};
    if (ep_opts_parse(&p, argc - 1, argv + 1, err) != 0)
        return sweep_fail(common, "%s%s", err, NULL);
    const char *grid = so.grid, *out = so.out;
    int jobs = so.jobs, show = so.show;
    if (!grid) return sweep_fail(common, "needs --grid \"flag=v1,v2;flag2=a,b\"%s%s", NULL, NULL);
    if (!out) return sweep_fail(common, "needs --out CSV (the ranked table)%s%s", NULL, NULL);
    if (ep_output_check(out, err) != 0) return sweep_fail(common, "--out: %s%s", err, NULL);
    char *g = strdup(grid);
    axis ax[MAX_AXES];
    int nax;
    if (!g || parse_grid(g, ax, &nax, err) != 0) {
        fprintf(stderr, "epsim sweep: %s\n", err);
        free(g);
        free(common);
        return 2;
    }
    long total = 1;
    for (int a = 0; a < nax; a++)
        total *= ax[a].n;
    long mine = 0;
    for (long k = 0; k < total; k++)
        mine += sim_runs_mine(k, &so.shard);
    row *rows = calloc((size_t)mine + 1, sizeof *rows);
    sim_run_result *res = calloc((size_t)mine + 1, sizeof *res);
    long *ids = calloc((size_t)mine + 1, sizeof *ids);
    if (!rows || !res || !ids) {
        fprintf(stderr, "epsim sweep: cannot set up: %s\n", strerror(errno));
        free(rows);
        free(res);
        free(ids);
        free(g);
        free(common);
        return 1;
    }
    long n = 0;
    for (long k = 0; k < total; k++) {
        if (!sim_runs_mine(k, &so.shard)) continue;
        rows[n].index = ids[n] = k;
        long rem = k;
        for (int a = nax - 1; a >= 0; a--) {
            rows[n].vi[a] = (int)(rem % ax[a].n);
            rem /= ax[a].n;
        }
        n++;
    }
    if (show < 0) show = isatty(STDERR_FILENO);
    sweep_ctx sc = {.rows = rows, .n = n, .ax = ax, .nax = nax, .so = &so};
    sim_runs runs = {"epsim sweep", n, ids, jobs, show, sweep_args, sweep_show, &sc};
    int xrc = sim_runs_exec(&runs, res);
    for (long i = 0; i < n; i++)
        rows[i].res = res[i];
    free(res);
    free(ids);
    if (xrc != 0) {
        free(rows);
        free(g);
        free(common);
        return xrc;
    }
    qsort(rows, (size_t)n, sizeof *rows, row_cmp);
    ep_outfile o;
    int rc = 0;
    long nok = 0;
    for (long i = 0; i < n; i++)
        nok += rows[i].res.ok;
    if (nok == 0 && n > 0) { /* rows[0] is the first configuration: sorted by index */
        char safe[EP_ERRLEN * 4];
        fprintf(stderr,
                "epsim sweep: none of the %ld configurations could be simulated (the first: %s)\n",
                n, ep_escape_text(rows[0].res.status, safe, sizeof safe));
        rc = 2;
    } else if (ep_outfile_open(&o, out, err) != 0) {
        fprintf(stderr, "epsim sweep: %s\n", err);
        rc = 2;
    } else {
        fputs("rank,index", o.f);
        for (int a = 0; a < nax; a++)
            fprintf(o.f, ",%s", ax[a].flag);
        fputs(",tokens_per_s_per_gpu,iteration_time_s,tflops_per_gpu,mfu,exposed_dispatch_s,"
              "exposed_combine_s,exposed_dp_s,exposed_pp_s,host_wait_s,model_state_gib,"
              "model_state_of_gpu,sampled_microbatches,status\n",
              o.f);
        long ok = 0;
        for (long i = 0; i < n; i++) {
            row *rw = &rows[i];
            const sim_run_result *r = &rw->res;
            if (r->ok)
                fprintf(o.f, "%ld,%ld", ++ok, rw->index);
            else
                fprintf(o.f, ",%ld", rw->index);
            for (int a = 0; a < nax; a++)
                fprintf(o.f, ",%s", ax[a].val[rw->vi[a]]);
            if (r->ok) {
                fprintf(o.f, ",%.6f,%.9f,%.3f,%.5f,%.9f,%.9f,%.9f,%.9f,%.9f,%.3f,", r->tps_gpu,
                        r->iter, r->tflops, r->mfu, r->exp[0], r->exp[1], r->exp[2], r->exp[3],
                        r->host_wait, r->state / (1024.0 * 1024 * 1024));
                if (r->gpu_mem > 0) fprintf(o.f, "%.4f", r->state / r->gpu_mem);
                fputc(',', o.f);
                if (r->sampled > 0) fprintf(o.f, "%d", r->sampled);
                fputs(",ok\n", o.f);
            } else {
                fprintf(o.f, ",,,,,,,,,,,,,%s\n", r->status);
            }
        }
        if (ep_outfile_commit(&o, err) != 0) {
            fprintf(stderr, "epsim sweep: %s\n", err);
            rc = 2;
        } else {
            fprintf(stderr,
                    "epsim sweep: %ld of %ld configurations simulated (%ld invalid) -> %s\n", ok, n,
                    n - ok, out);
        }
    }
    free(rows);
    free(g);
    free(common);
    return rc;
}
