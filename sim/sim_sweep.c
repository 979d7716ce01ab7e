/* epsim sweep: a grid of configurations, each simulated in its own process (SimGrid runs one
 * simulation per process), ranked by tokens/s/GPU (sim_cli.h; docs/epsim.md, "Sweeps"). */
#include "sim_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ep_config.h"
#include "ep_io.h"
#include "ep_opts.h"

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
    int ok;
    double tps_gpu, iter, tflops, mfu, exp[4];
    double state, gpu_mem; /* model state per GPU and GPU memory, bytes (0: not given) */
    char status[256];
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

static void read_result(row *r, const char *json, const char *errfile, int status) {
    r->ok = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        json_error_t je;
        json_t *o = json_load_file(json, 0, &je);
        if (o) {
            json_t *e = json_object_get(o, "exposed_comm_s");
            r->tps_gpu = json_number_value(json_object_get(o, "tokens_per_s_per_gpu"));
            r->iter = json_number_value(json_object_get(o, "iteration_time_s"));
            r->tflops = json_number_value(json_object_get(o, "tflops_per_gpu"));
            r->mfu = json_number_value(json_object_get(o, "mfu"));
            r->state = json_number_value(json_object_get(o, "model_state_bytes_per_gpu"));
            r->gpu_mem = json_number_value(json_object_get(o, "gpu_memory_bytes"));
            static const char *k[4] = {"dispatch", "combine", "dp", "pp"};
            for (int i = 0; i < 4; i++)
                r->exp[i] = json_number_value(json_object_get(e, k[i]));
            json_decref(o);
            r->ok = 1;
            snprintf(r->status, sizeof r->status, "ok");
            return;
        }
    }
    /* the child's one-line error, made CSV-safe */
    FILE *f = fopen(errfile, "r");
    r->status[0] = 0;
    if (f) { /* the last line: the error (notes come before it) */
        char line[sizeof r->status];
        while (fgets(line, sizeof line, f))
            if (line[0] && line[0] != '\n') memcpy(r->status, line, sizeof line);
        fclose(f);
    }
    for (char *c = r->status; *c; c++)
        if (*c == ',' || *c == '"' || *c == '\n' || *c == '\r')
            *c = *c == ',' ? ';' : *c == '"' ? '\'' : 0;
        else if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    if (!r->status[0]) snprintf(r->status, sizeof r->status, "failed (status %d)", status);
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The sweep's progress line (docs/epsim.md, "Sweeps"): configurations done, running and left,
 * elapsed time, and the best one so far by tokens/s/GPU with its grid values. */
static void sweep_progress(const row *rows, long n, long done, long running, const axis *ax,
                           int nax, double t0) {
    const row *best = NULL;
    for (long i = 0; i < n; i++)
        if (rows[i].ok && (!best || rows[i].tps_gpu > best->tps_gpu)) best = &rows[i];
    char b[512] = "";
    if (best) {
        int k = snprintf(b, sizeof b, "; best so far %.1f tokens/s/GPU:", best->tps_gpu);
        for (int a = 0; a < nax && k > 0 && k < (int)sizeof b; a++)
            k +=
                snprintf(b + k, sizeof b - (size_t)k, " %s=%s", ax[a].flag, ax[a].val[best->vi[a]]);
    }
    fprintf(stderr, "\repsim sweep: %ld done, %ld running, %ld left, %.0f s elapsed%s\033[K", done,
            running, n - done - running, mono() - t0, b);
    fflush(stderr);
}

static int row_cmp(const void *a, const void *b) {
    const row *x = a, *y = b;
    if (x->ok != y->ok) return y->ok - x->ok;
    if (x->ok && x->tps_gpu != y->tps_gpu) return x->tps_gpu > y->tps_gpu ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Ctrl-C or a kill while children run: their files and the folder go (the children remove their
 * own temporaries, ep_io.h). Paths are prepared before each child starts: the handler only
 * unlinks. */
#define MAX_JOBS 256
static char g_dir[64];
static char g_files[MAX_JOBS][2][96];
static volatile sig_atomic_t g_busy[MAX_JOBS];

static void on_signal(int sig) {
    for (int i = 0; i < MAX_JOBS; i++)
        if (g_busy[i]) {
            unlink(g_files[i][0]);
            unlink(g_files[i][1]);
        }
    if (g_dir[0]) rmdir(g_dir);
    raise(sig); /* SA_RESETHAND: the default action */
}

static void install_handlers(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    ep_catch_signals(on_signal, sigs, (int)(sizeof sigs / sizeof sigs[0]));
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
    int jobs, shard_i, shard_n, show;
    char **common;
    int ncommon;
} sweep_opts;

static int sweep_shard(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)row;
    sweep_opts *o = ctx;
    int used = 0;
    if (sscanf(v, "%d/%d%n", &o->shard_i, &o->shard_n, &used) != 2 || v[used] || o->shard_n < 1 ||
        o->shard_i < 0 || o->shard_i >= o->shard_n) {
        snprintf(err, EP_ERRLEN,
                 "--shard %.64s: give i/n with 0 <= i < n (this process runs every n-th "
                 "configuration from the i-th)",
                 v);
        return -1;
    }
    return 0;
}

/* --summary-json, --trace, --csv (also as --csv=P): the runs' outputs are the sweep's */
static int sweep_no_output(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)v, (void)ctx;
    snprintf(err, EP_ERRLEN, "%s is not available in a sweep (--out CSV holds the rows)",
             row->name);
    return -1;
}

static int sweep_other(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    (void)err;
    sweep_opts *o = ctx;
    o->common[o->ncommon++] = (char *)arg;
    return 0;
}

#define STR_(x) #x
#define STR(x)  STR_(x)

int sim_sweep_main(int argc, char **argv) {
    char err[EP_ERRLEN];
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    sweep_opts so = {.jobs = ncpu > 0 ? (int)ncpu : 1, .shard_n = 1, .show = -1};
    so.common = calloc((size_t)argc + 1, sizeof *so.common);
    char **common = so.common;
    if (!common) return 1;
    const ep_opt opt_rows[] = {
        {.name = "--grid", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &so.grid},
        {.name = "--out", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &so.out},
        {.name = "--jobs",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_INT,
         .target = &so.jobs,
         .min = 1,
         .max = MAX_JOBS,
         .bad = ": give a number of processes from 1 to " STR(MAX_JOBS)},
        {.name = "--shard", .takes = EP_OPT_VALUE, .kind = EP_OPT_CALL, .fn = sweep_shard},
        /* the sweep's own line: its runs show none */
        {.name = "--progress", .kind = EP_OPT_FLAG, .target = &so.show, .set = 1},
        {.name = "--no-progress", .kind = EP_OPT_FLAG, .target = &so.show, .set = 0},
        {.name = "--summary-json",
         .takes = EP_OPT_JOINED,
         .kind = EP_OPT_CALL,
         .fn = sweep_no_output},
        {.name = "--trace", .takes = EP_OPT_JOINED, .kind = EP_OPT_CALL, .fn = sweep_no_output},
        {.name = "--csv", .takes = EP_OPT_JOINED, .kind = EP_OPT_CALL, .fn = sweep_no_output},
        {.name = NULL},
    };
    ep_opts p = {opt_rows, sweep_other, &so, 0};
    if (ep_opts_parse(&p, argc - 1, argv + 1, err) != 0)
        return sweep_fail(common, "%s%s", err, NULL);
    const char *grid = so.grid, *out = so.out;
    int jobs = so.jobs, shard_i = so.shard_i, shard_n = so.shard_n, show = so.show;
    int ncommon = so.ncommon;
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
        mine += k % shard_n == shard_i;
    row *rows = calloc((size_t)mine + 1, sizeof *rows);
    pid_t *pid = calloc((size_t)mine + 1, sizeof *pid);
    char tmpl[] = "/tmp/epsim-sweep-XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (dir) {
        snprintf(g_dir, sizeof g_dir, "%s", dir);
        install_handlers();
    }
    if (!rows || !pid || !dir) {
        fprintf(stderr, "epsim sweep: cannot set up: %s\n", strerror(errno));
        free(rows);
        free(pid);
        free(g);
        free(common);
        return 1;
    }
    long n = 0;
    for (long k = 0; k < total; k++) {
        if (k % shard_n != shard_i) continue;
        rows[n].index = k;
        long rem = k;
        for (int a = nax - 1; a >= 0; a--) {
            rows[n].vi[a] = (int)(rem % ax[a].n);
            rem /= ax[a].n;
        }
        n++;
    }
    /* run: at most `jobs` children at a time */
    long next = 0, running = 0, finished = 0;
    char path[512], epath[512];
    if (show < 0) show = isatty(STDERR_FILENO);
    double t0 = mono(), shown = 0;
    while (finished < n) {
        while (running < jobs && next < n) {
            row *r = &rows[next];
            snprintf(path, sizeof path, "%s/%ld.json", dir, r->index);
            snprintf(epath, sizeof epath, "%s/%ld.err", dir, r->index);
            int slot = 0;
            while (slot < MAX_JOBS - 1 && g_busy[slot])
                slot++;
            snprintf(g_files[slot][0], sizeof g_files[slot][0], "%s", path);
            snprintf(g_files[slot][1], sizeof g_files[slot][1], "%s", epath);
            g_busy[slot] = 1;
            pid_t p = fork();
            if (p == 0) {
                int dn = open("/dev/null", O_WRONLY);
                int ef = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (dn >= 0) dup2(dn, 1);
                if (ef >= 0) dup2(ef, 2);
                char **cargv = calloc((size_t)(ncommon + nax + 5), sizeof *cargv);
                char vals[MAX_AXES][512];
                int c = 0;
                cargv[c++] = "epsim";
                for (int i = 0; i < ncommon; i++)
                    cargv[c++] = common[i];
                for (int a = 0; a < nax; a++) {
                    snprintf(vals[a], sizeof vals[a], "--%.120s=%.380s", ax[a].flag,
                             ax[a].val[r->vi[a]]);
                    cargv[c++] = vals[a];
                }
                cargv[c++] = "--summary-json";
                cargv[c++] = path;
                cargv[c++] = "--no-progress";
                _exit(sim_cli_run(c, cargv));
            }
            if (p < 0) {
                fprintf(stderr, "epsim sweep: fork: %s\n", strerror(errno));
                return 1;
            }
            pid[next++] = p;
            running++;
        }
        int status;
        pid_t done;
        if (show) { /* the line twice a second while runs go on */
            while ((done = waitpid(-1, &status, WNOHANG)) == 0) {
                if (mono() - shown >= 0.5 && mono() - t0 >= 2.0) {
                    sweep_progress(rows, n, finished, running, ax, nax, t0);
                    shown = mono();
                }
                nanosleep(&(struct timespec){0, 50000000}, NULL);
            }
        } else {
            done = wait(&status);
        }
        if (done < 0) break;
        for (long i = 0; i < next; i++)
            if (pid[i] == done) {
                snprintf(path, sizeof path, "%s/%ld.json", dir, rows[i].index);
                snprintf(epath, sizeof epath, "%s/%ld.err", dir, rows[i].index);
                read_result(&rows[i], path, epath, status);
                remove(path);
                remove(epath);
                pid[i] = 0;
                for (int k = 0; k < MAX_JOBS; k++)
                    if (g_busy[k] && !strcmp(g_files[k][0], path)) g_busy[k] = 0;
            }
        running--;
        finished++;
        if (show && shown > 0) sweep_progress(rows, n, finished, running, ax, nax, t0);
    }
    if (show && shown > 0) fputs("\r\033[K", stderr);
    rmdir(dir);
    g_dir[0] = 0;
    qsort(rows, (size_t)n, sizeof *rows, row_cmp);
    ep_outfile o;
    int rc = 0;
    long nok = 0;
    for (long i = 0; i < n; i++)
        nok += rows[i].ok;
    if (nok == 0 && n > 0) { /* rows[0] is the first configuration: sorted by index */
        char safe[EP_ERRLEN * 4];
        fprintf(stderr,
                "epsim sweep: none of the %ld configurations could be simulated (the first: %s)\n",
                n, ep_escape_text(rows[0].status, safe, sizeof safe));
        rc = 2;
    } else if (ep_outfile_open(&o, out, err) != 0) {
        fprintf(stderr, "epsim sweep: %s\n", err);
        rc = 2;
    } else {
        fputs("rank,index", o.f);
        for (int a = 0; a < nax; a++)
            fprintf(o.f, ",%s", ax[a].flag);
        fputs(",tokens_per_s_per_gpu,iteration_time_s,tflops_per_gpu,mfu,exposed_dispatch_s,"
              "exposed_combine_s,exposed_dp_s,exposed_pp_s,model_state_gib,model_state_of_gpu,"
              "status\n",
              o.f);
        long ok = 0;
        for (long i = 0; i < n; i++) {
            row *r = &rows[i];
            if (r->ok)
                fprintf(o.f, "%ld,%ld", ++ok, r->index);
            else
                fprintf(o.f, ",%ld", r->index);
            for (int a = 0; a < nax; a++)
                fprintf(o.f, ",%s", ax[a].val[r->vi[a]]);
            if (r->ok) {
                fprintf(o.f, ",%.6f,%.9f,%.3f,%.5f,%.9f,%.9f,%.9f,%.9f,%.3f,", r->tps_gpu, r->iter,
                        r->tflops, r->mfu, r->exp[0], r->exp[1], r->exp[2], r->exp[3],
                        r->state / (1024.0 * 1024 * 1024));
                if (r->gpu_mem > 0) fprintf(o.f, "%.4f", r->state / r->gpu_mem);
                fputs(",ok\n", o.f);
            } else {
                fprintf(o.f, ",,,,,,,,,,,%s\n", r->status);
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
    free(pid);
    free(g);
    free(common);
    return rc;
}
