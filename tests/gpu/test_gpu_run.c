/* test_gpu_run: `epref --nproc N run` executes the schedule (docs/epref-run.md).
 * On a small MoE model (2 layers, hidden 1024, 8 experts, EP 2), with EP overlap off, on, and on
 * with delayed wgrad, and with the deepep and hybridep (fused permute, EP overlap) dispatchers,
 * whose token all-to-alls go over NVLink stores (with 4 GPUs also deepep at EP 2 on 4 ranks: two
 * NVLink groups), it checks the run succeeds and its trace:
 *   - has exactly one event per op of each rank, named as ep_op_name names it;
 *   - ops of one (rank, stream) do not overlap in time (FIFO streams);
 *   - every op starts after each of its deps ended (CUDA events between streams).
 * and that a deepep run whose EP group spans nodes (`--gpus-per-node 1`: RDMA, not implemented)
 * is refused with exit 2. Usage: test_gpu_run <path of epref>. Exit 77 (skipped) without 2 GPUs.
 * No timing figures are judged here: measured intervals are only checked for order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>

#include "ep_sched.h"

#define EPS_US 2.0 /* event timestamps: cudaEventElapsedTime resolution is ~0.5 us */

static const char *k_model[] = {"--num-layers",
                                "2",
                                "--hidden-size",
                                "1024",
                                "--num-attention-heads",
                                "8",
                                "--ffn-hidden-size",
                                "2048",
                                "--moe-ffn-hidden-size",
                                "512",
                                "--num-experts",
                                "8",
                                "--moe-router-topk",
                                "2",
                                "--expert-model-parallel-size",
                                "2",
                                "--seq-length",
                                "1024"};
#define NMODEL ((int)(sizeof k_model / sizeof k_model[0]))

typedef struct {
    char name[160];
    int pid, tid;
    double ts, dur;
} tev;

static int failures;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Reads the complete events of a trace written by ep_trace (one event per line). */
static tev *read_trace(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    int cap = 1024;
    tev *ev = malloc(sizeof *ev * (size_t)cap);
    char line[4096];
    *n = 0;
    while (ev && fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"ph\":\"X\"")) continue;
        char *p = strstr(line, "\"name\":\"");
        if (!p) continue;
        p += 8;
        char *q = strchr(p, '"');
        if (!q || q - p >= 160) continue;
        if (*n == cap) {
            cap *= 2;
            ev = realloc(ev, sizeof *ev * (size_t)cap);
            if (!ev) break;
        }
        tev *e = &ev[*n];
        memcpy(e->name, p, (size_t)(q - p));
        e->name[q - p] = 0;
        char *a = strstr(q, "\"pid\":");
        if (!a || sscanf(a, "\"pid\":%d,\"tid\":%d,\"ts\":%lf,\"dur\":%lf", &e->pid, &e->tid,
                         &e->ts, &e->dur) != 4)
            continue;
        (*n)++;
    }
    fclose(f);
    return ev;
}

static const tev *find(const tev *ev, int n, int pid, const char *name) {
    for (int i = 0; i < n; i++)
        if (ev[i].pid == pid && !strcmp(ev[i].name, name)) return &ev[i];
    return NULL;
}

/* extra: NULL-terminated flags added to the model's */
static void run_case(const char *epref, const char *dir, const char *tag, int nproc,
                     const char *const *extra) {
    char trace[512], summary[512], cmd[4096];
    snprintf(trace, sizeof trace, "%s/%s.trace.json", dir, tag);
    snprintf(summary, sizeof summary, "%s/%s.summary.json", dir, tag);
    int len = snprintf(cmd, sizeof cmd, "%s --nproc %d run", epref, nproc);
    for (int i = 0; i < NMODEL; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s'", k_model[i]);
    for (int i = 0; extra[i]; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", extra[i]);
    snprintf(cmd + len, sizeof cmd - (size_t)len,
             " --iters 2 --warmup 1 --trace %s --summary-json %s", trace, summary);
    printf("%s: %s\n", tag, cmd);
    fflush(stdout);
    int rc = system(cmd);
    CHECK(rc == 0, "%s: epref exited with %d", tag, rc);
    if (rc != 0) return;
    CHECK(access(summary, R_OK) == 0, "%s: no summary", tag);

    /* the same schedule, built here */
    const char *argv[NMODEL + 16];
    int argc = 0;
    argv[argc++] = "test";
    for (int i = 0; i < NMODEL; i++)
        argv[argc++] = k_model[i];
    for (int i = 0; extra[i] && argc < NMODEL + 15; i++)
        argv[argc++] = extra[i];
    ep_config cfg;
    ep_config_defaults(&cfg);
    char err[EP_ERRLEN];
    ep_arglist pos;
    memset(&pos, 0, sizeof pos);
    cfg.world_size = nproc;
    if (ep_config_parse(&cfg, argc, (char **)argv, &pos, NULL, err) ||
        ep_config_validate(&cfg, err)) {
        CHECK(0, "%s: config: %s", tag, err);
        return;
    }
    ep_sched s;
    if (ep_sched_build(&cfg, &s, err)) {
        CHECK(0, "%s: schedule: %s", tag, err);
        return;
    }
    int n = 0;
    tev *ev = read_trace(trace, &n);
    CHECK(ev != NULL, "%s: cannot read %s", tag, trace);
    if (!ev) return;
    int total = 0;
    for (int r = 0; r < s.world; r++)
        total += s.ranks[r].nops;
    CHECK(n == total, "%s: %d events for %d ops", tag, n, total);
    char name[256];
    for (int r = 0; r < s.world; r++) {
        const ep_rank_sched *rs = &s.ranks[r];
        const tev **at = calloc((size_t)rs->nops, sizeof *at);
        for (int i = 0; i < rs->nops; i++) {
            ep_op_name(&rs->ops[i], name, sizeof name);
            at[i] = find(ev, n, r, name);
            CHECK(at[i] != NULL, "%s: rank %d: no event named %s", tag, r, name);
            if (at[i])
                CHECK(at[i]->tid == (int)rs->ops[i].stream, "%s: %s on track %d, stream %d", tag,
                      name, at[i]->tid, (int)rs->ops[i].stream);
        }
        /* FIFO: on one stream, op i+1 (launch order) starts after op i ends */
        const tev *last[EP_NUM_STREAMS] = {0};
        for (int i = 0; i < rs->nops; i++) {
            if (!at[i]) continue;
            int st = rs->ops[i].stream;
            if (last[st])
                CHECK(at[i]->ts + EPS_US >= last[st]->ts + last[st]->dur,
                      "%s: rank %d: %s starts at %.3f before %s ends at %.3f", tag, r, at[i]->name,
                      at[i]->ts, last[st]->name, last[st]->ts + last[st]->dur);
            last[st] = at[i];
            for (int d = 0; d < rs->ops[i].ndeps; d++) {
                const tev *dep = at[rs->deps[rs->ops[i].deps_off + d]];
                if (dep)
                    CHECK(at[i]->ts + EPS_US >= dep->ts + dep->dur,
                          "%s: rank %d: %s starts at %.3f before its dep %s ends at %.3f", tag, r,
                          at[i]->name, at[i]->ts, dep->name, dep->ts + dep->dur);
            }
        }
        free(at);
    }
    printf("%s: %d events checked\n", tag, n);
    free(ev);
    ep_sched_free(&s);
}

int main(int argc, char **argv) {
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 2) {
        printf("test_gpu_run: needs 2 GPUs, skipped\n");
        return 77;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_run <epref>\n");
        return 2;
    }
    char dir[] = "/tmp/test_gpu_run.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    static const char *none[] = {NULL};
    static const char *ov[] = {"--overlap-moe-expert-parallel-comm", NULL};
    static const char *ov_dw[] = {"--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
                                  NULL};
    /* deepep / hybridep: token all-to-alls over NVLink stores (exec_nvl_push), not NCCL */
    static const char *hep[] = {"--moe-token-dispatcher-type",
                                "flex",
                                "--moe-flex-dispatcher-backend",
                                "hybridep",
                                "--moe-hybridep-fuse-permute",
                                "--overlap-moe-expert-parallel-comm",
                                NULL};
    static const char *dep[] = {"--moe-token-dispatcher-type", "flex",
                                "--moe-flex-dispatcher-backend", "deepep", NULL};
    run_case(argv[1], dir, "sequential", 2, none);
    run_case(argv[1], dir, "overlap", 2, ov);
    run_case(argv[1], dir, "overlap_dw", 2, ov_dw);
    run_case(argv[1], dir, "hybridep_fused_overlap", 2, hep);
    run_case(argv[1], dir, "deepep", 2, dep);
    if (ngpu >= 4) /* EP 2 on 4 ranks: each EP group its own NVLink transport */
        run_case(argv[1], dir, "deepep_ep2_of4", 4, dep);
    /* an EP group over two nodes of one GPU each: hierarchical, refused before any GPU work */
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "%s --nproc 2 run --num-layers 2 --hidden-size 1024 --num-attention-heads 8 "
             "--num-experts 8 --expert-model-parallel-size 2 --gpus-per-node 1 "
             "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep "
             ">/dev/null 2>&1",
             argv[1]);
    int rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "deepep across nodes: exit %d, not 2",
          WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("test_gpu_run: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
