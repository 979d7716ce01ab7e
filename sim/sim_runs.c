/* Many epsim runs in child processes (sim_runs.h): what sweep and search share. */
#include "sim_runs.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ep_io.h"
#include "sim_cli.h"

void sim_runs_read_result(sim_run_result *r, const char *json, const char *errfile, int status) {
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
            r->mem_peak = json_number_value(json_object_get(o, "memory_peak_bytes"));
            r->host_wait = json_number_value(json_object_get(o, "host_wait_s"));
            r->sampled = (int)json_integer_value(
                json_array_get(json_object_get(o, "sampled_microbatches"), 0));
            static const char *k[6] = {"dispatch", "combine", "dp", "pp", "other", "total"};
            for (int i = 0; i < 6; i++)
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

double sim_runs_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Ctrl-C or a kill while children run: their files and the folder go (the children remove their
 * own temporaries, ep_io.h). Paths are prepared before each child starts: the handler only
 * unlinks. */
static char g_dir[64];
static char g_files[SIM_RUNS_MAX_JOBS][2][96];
static volatile sig_atomic_t g_busy[SIM_RUNS_MAX_JOBS];

static void on_signal(int sig) {
    for (int i = 0; i < SIM_RUNS_MAX_JOBS; i++)
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

int sim_runs_exec(const sim_runs *r, sim_run_result *res) {
    long n = r->n;
    pid_t *pid = calloc((size_t)n + 1, sizeof *pid);
    char tmpl[64];
    const char *word = strchr(r->prog, ' ') ? strchr(r->prog, ' ') + 1 : r->prog;
    snprintf(tmpl, sizeof tmpl, "/tmp/epsim-%s-XXXXXX", word);
    char *dir = mkdtemp(tmpl);
    if (dir) {
        snprintf(g_dir, sizeof g_dir, "%s", dir);
        install_handlers();
    }
    if (!pid || !dir) {
        fprintf(stderr, "%s: cannot set up: %s\n", r->prog, strerror(errno));
        free(pid);
        return 1;
    }
    /* run: at most `jobs` children at a time */
    long next = 0, running = 0, finished = 0;
    char path[512], epath[512];
    double t0 = sim_runs_clock(), shown = 0;
    while (finished < n) {
        while (running < r->jobs && next < n) {
            snprintf(path, sizeof path, "%s/%ld.json", dir, r->ids[next]);
            snprintf(epath, sizeof epath, "%s/%ld.err", dir, r->ids[next]);
            int slot = 0;
            while (slot < SIM_RUNS_MAX_JOBS - 1 && g_busy[slot])
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
                char **a = r->args(r->ctx, next);
                int na = 0;
                while (a && a[na])
                    na++;
                char **cargv = calloc((size_t)na + 5, sizeof *cargv);
                if (!cargv) _exit(1);
                int c = 0;
                cargv[c++] = "epsim";
                for (int i = 0; i < na; i++)
                    cargv[c++] = a[i];
                cargv[c++] = "--summary-json";
                cargv[c++] = path;
                cargv[c++] = "--no-progress";
                _exit(sim_cli_run(c, cargv));
            }
            if (p < 0) {
                fprintf(stderr, "%s: fork: %s\n", r->prog, strerror(errno));
                return 1;
            }
            pid[next++] = p;
            running++;
        }
        int status;
        pid_t done;
        if (r->show) { /* the line twice a second while runs go on */
            while ((done = waitpid(-1, &status, WNOHANG)) == 0) {
                if (sim_runs_clock() - shown >= 0.5 && sim_runs_clock() - t0 >= 2.0) {
                    r->progress(r->ctx, finished, running, n - finished - running,
                                sim_runs_clock() - t0);
                    shown = sim_runs_clock();
                }
                nanosleep(&(struct timespec){0, 50000000}, NULL);
            }
        } else {
            done = wait(&status);
        }
        if (done < 0) break;
        for (long i = 0; i < next; i++)
            if (pid[i] == done) {
                snprintf(path, sizeof path, "%s/%ld.json", dir, r->ids[i]);
                snprintf(epath, sizeof epath, "%s/%ld.err", dir, r->ids[i]);
                sim_runs_read_result(&res[i], path, epath, status);
                remove(path);
                remove(epath);
                pid[i] = 0;
                for (int k = 0; k < SIM_RUNS_MAX_JOBS; k++)
                    if (g_busy[k] && !strcmp(g_files[k][0], path)) g_busy[k] = 0;
            }
        running--;
        finished++;
        if (r->show && shown > 0)
            r->progress(r->ctx, finished, running, n - finished - running, sim_runs_clock() - t0);
    }
    if (r->show && shown > 0) fputs("\r\033[K", stderr);
    rmdir(dir);
    g_dir[0] = 0;
    free(pid);
    return 0;
}

int sim_runs_shard_opt(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)ctx;
    sim_runs_shard *s = row->target;
    int used = 0;
    if (sscanf(v, "%d/%d%n", &s->i, &s->n, &used) != 2 || v[used] || s->n < 1 || s->i < 0 ||
        s->i >= s->n) {
        snprintf(err, EP_ERRLEN,
                 "--shard %.64s: give i/n with 0 <= i < n (this process runs every n-th "
                 "configuration from the i-th)",
                 v);
        return -1;
    }
    return 0;
}

int sim_runs_no_output(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)v, (void)ctx;
    snprintf(err, EP_ERRLEN, "%s is not available in %s (--out CSV holds the rows)", row->name,
             (const char *)row->target);
    return -1;
}
