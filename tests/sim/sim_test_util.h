/* Helpers of the epsim suites: hand-built schedules, simulations in a child process (SimGrid runs
 * one simulation per process), and running the epsim program. Header-only: the runner compiles
 * only tests/sim/test_*.c. */
#ifndef SIM_TEST_UTIL_H
#define SIM_TEST_UTIL_H

#include <CUnit/CUnit.h>
#include <jansson.h>
#include <math.h>
#include <simgrid/engine.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xbt/config.h>
#include <xbt/log.h>

#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_engine.h"
#include "ep_xfer.h"
#include "sim_algo.h"
#include "sim_child.h"
#include "sim_platform.h"

#define HAND_MAX_RANKS 16
#define HAND_MAX_OPS   16

/* A small schedule built op by op. */
typedef struct {
    ep_sched s;
    ep_rank_sched rs[HAND_MAX_RANKS];
    ep_op ops[HAND_MAX_RANKS][HAND_MAX_OPS];
    int deps[HAND_MAX_RANKS][HAND_MAX_OPS * 4];
    ep_group groups[4];
    int granks[4][HAND_MAX_RANKS];
    ep_traffic traffic[2];
    int64_t tbytes[2][HAND_MAX_RANKS * HAND_MAX_RANKS];
    int64_t tnode[2][HAND_MAX_RANKS * 4];
    int tnode_of[2][HAND_MAX_RANKS];
} hand_sched;

static inline void hand_init(hand_sched *h, int world) {
    memset(h, 0, sizeof *h);
    ep_config_defaults(&h->s.cfg);
    ep_config_resolve(&h->s.cfg); /* built by hand: no validation */
    h->s.world = world;
    h->s.ranks = h->rs;
    h->s.groups = h->groups;
    h->s.traffic = h->traffic;
    for (int r = 0; r < world; r++) {
        h->rs[r].ops = h->ops[r];
        h->rs[r].deps = h->deps[r];
        h->rs[r].cap = HAND_MAX_OPS;
        h->rs[r].depcap = HAND_MAX_OPS * 4;
    }
}

static inline ep_op hand_op(ep_op_kind kind, ep_stream stream) {
    ep_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.stream = stream;
    op.label = "t";
    op.mb = op.chunk = op.layer = op.index = -1;
    op.group = op.seq = op.peer = op.traffic = -1;
    return op;
}

/* An n x n x n bf16 GEMM on the compute stream: 2 n^3 flops, three n x n matrices of HBM
 * traffic (m, n, k left unset: efficiency by flops). */
static inline ep_op hand_gemm(int n) {
    ep_op op = hand_op(EP_OP_GEMM, EP_STREAM_COMP);
    op.flops = 2.0 * n * n * n;
    op.bytes = 3.0 * n * n * 2;
    return op;
}

/* What the generators record in a communication op (ep_rb_emit): its algorithm and SMs, from the
 * hand schedule's config and the op's group; SMs a case set itself stay. */
static inline void hand_plan(const hand_sched *h, ep_op *op) {
    int sms = op->sms;
    ep_xfer_set(op, &h->s.cfg, op->group >= 0 ? &h->groups[op->group] : NULL);
    if (sms) op->sms = (int16_t)sms;
}

static inline int hand_add(hand_sched *h, int r, ep_op op, int ndeps, const int *deps) {
    ep_rank_sched *rs = &h->rs[r];
    hand_plan(h, &op);
    op.deps_off = rs->ndeps;
    op.ndeps = ndeps;
    op.index = rs->nops; /* unique names per rank */
    for (int i = 0; i < ndeps; i++)
        rs->deps[rs->ndeps++] = deps[i];
    rs->ops[rs->nops] = op;
    return rs->nops++;
}

/* The group of ranks 0..n-1 (every hand-built collective's). */
static inline int hand_group(hand_sched *h, int n) {
    int g = h->s.ngroups++;
    for (int i = 0; i < n; i++)
        h->granks[g][i] = i;
    h->groups[g].kind = EP_GROUP_EP;
    h->groups[g].size = n;
    h->groups[g].ranks = h->granks[g];
    return g;
}

/* The next token all-to-all instance of group g (n members on nnodes nodes), its per-pair bytes
 * and node indexes zero for the caller to fill. */
static inline ep_traffic *hand_traffic(hand_sched *h, int g, int n, int nnodes) {
    int k = h->s.ntraffic++;
    ep_traffic *t = &h->traffic[k];
    t->group = g;
    t->n = n;
    t->nnodes = nnodes;
    t->node_of = h->tnode_of[k];
    t->bytes = h->tbytes[k];
    return t;
}

/* One collective of `kind` on `stream`: sequence 0 of `group`, `bytes` on each of ranks 0..n-1. */
static inline void hand_collective(hand_sched *h, int n, ep_op_kind kind, ep_stream stream,
                                   int group, double bytes) {
    for (int r = 0; r < n; r++) {
        ep_op op = hand_op(kind, stream);
        op.group = group;
        op.seq = 0;
        op.bytes = bytes;
        hand_add(h, r, op, 0, NULL);
    }
}

/* A token all-to-all between the two members of `group` on one node: `bytes` each way.
 * Returns the traffic index. */
static inline int hand_traffic_pair(hand_sched *h, int group, int64_t bytes) {
    int i = h->s.ntraffic++;
    ep_traffic *t = &h->traffic[i];
    t->group = group;
    t->n = 2;
    t->nnodes = 1;
    t->node_of = h->tnode_of[i];
    t->bytes = h->tbytes[i];
    t->bytes[1] = t->bytes[2] = bytes;
    return i;
}

typedef struct {
    int rc;
    char err[256];
    double makespan;
    long nevents, nwaits, nlate;
    double start[HAND_MAX_RANKS][HAND_MAX_OPS], xfer[HAND_MAX_RANKS][HAND_MAX_OPS],
        end[HAND_MAX_RANKS][HAND_MAX_OPS];
} hand_result;

/* In a forked child: SimGrid started quiet with the ptask model, as epsim does. */
static inline void sim_child_init(void) {
    int argc = 1;
    char *argv[] = {"epsim-test", NULL};
    xbt_log_control_set("root.thres:critical");
    simgrid_init(&argc, argv);
    sg_cfg_set_string("host/model", "ptask_L07");
}

/* What a child simulation of a hand-built schedule needs (hand_run_child). */
typedef struct {
    const hand_sched *h;
    const char *topo;
    const sim_calib *c;
    sim_engine_opts opts;
} hand_job;

/* In the child (sim_child_call): simulates the job into *out, whose rc and err say how it went. */
static inline int hand_run_child(void *ctx, void *result) {
    const hand_job *j = ctx;
    hand_result *o = result;
    sim_child_init();
    sim_platform pl;
    char err[EP_ERRLEN] = "";
    if (sim_platform_load(&pl, j->topo, err) != 0) {
        o->rc = -2;
    } else {
        sim_result r;
        o->rc = sim_engine_run(&j->h->s, &pl, j->c, &j->opts, &r, err);
        if (o->rc == 0) {
            o->makespan = r.makespan;
            o->nevents = r.nevents;
            o->nwaits = r.nwaits;
            o->nlate = r.nlate;
            for (int k = 0; k < j->h->s.world; k++)
                for (int i = 0; i < j->h->rs[k].nops; i++) {
                    o->start[k][i] = r.t[r.off[k] + i].start;
                    o->xfer[k][i] = r.t[r.off[k] + i].xfer;
                    o->end[k][i] = r.t[r.off[k] + i].end;
                }
            sim_result_free(&r);
        }
        sim_platform_free(&pl);
    }
    snprintf(o->err, sizeof o->err, "%s", o->rc ? err : "");
    return 0; /* the result says how it went */
}

/* Simulates h on topology `topo` with calibration c and engine options o in a forked child
 * (SimGrid runs one simulation per process); rc -8 when the child could not run or died. */
static inline void hand_run_opts(const hand_sched *h, const char *topo, const sim_calib *c,
                                 sim_engine_opts opts, hand_result *out) {
    memset(out, 0, sizeof *out);
    hand_job j = {h, topo, c, opts};
    if (sim_child_call(hand_run_child, &j, out, sizeof *out) != 0) {
        memset(out, 0, sizeof *out);
        out->rc = -8;
    }
}

static inline void hand_run(const hand_sched *h, const char *topo, const sim_calib *c,
                            hand_result *out) {
    hand_run_opts(h, topo, c, sim_engine_defaults(), out);
}

/* The start of an awk command over a CSV whose columns are read by name: $h["status"]. */
#define AWK_CSV "awk -F, 'NR==1{for(i=1;i<=NF;i++)h[$i]=i;next} "

/* Runs the epsim program with `args` (shell words) in the build folder; stdout and stderr go to
 * the given files (or /dev/null). Returns the exit status. */
static inline int epsim_exec(const char *args, const char *out, const char *err) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/sim/epsim %s >%s 2>%s", EP_BINARY_DIR, args,
             out ? out : "/dev/null", err ? err : "/dev/null");
    fflush(NULL);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Lines of a text file, -1 when it cannot be read. */
static inline int lines_of(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* Whether a text file (its first 1 MiB) contains `text`. */
static inline int file_has(const char *path, const char *text) {
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, text) != NULL;
}

/* A number at "a" or "a.b" in a JSON file; NAN when missing. */
static inline double json_num(const char *path, const char *key) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return NAN;
    char k[256];
    snprintf(k, sizeof k, "%s", key);
    json_t *v = root;
    for (char *save = NULL, *part = strtok_r(k, ".", &save); part && v;
         part = strtok_r(NULL, ".", &save))
        v = json_object_get(v, part);
    double d = v && json_is_number(v) ? json_number_value(v) : NAN;
    json_decref(root);
    return d;
}

static inline const char *tmp_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/sim_test_%d_%s", EP_BINARY_DIR, (int)getpid(), name);
    return buf;
}

static inline int file_exists(const char *p) {
    return access(p, F_OK) == 0;
}

/* Bad input: epsim `args` exits 2 with one line on stderr, nothing on stdout, and leaves no file
 * at `absent` (when given). */
static inline void expect_exit2(const char *args, const char *absent) {
    char out[512], err[512];
    tmp_path(out, sizeof out, "exit2.out");
    tmp_path(err, sizeof err, "exit2.err");
    CU_ASSERT_EQUAL(epsim_exec(args, out, err), 2);
    CU_ASSERT_EQUAL(lines_of(err), 1);
    CU_ASSERT_EQUAL(lines_of(out), 0);
    if (absent) CU_ASSERT_FALSE(file_exists(absent));
    remove(out);
    remove(err);
}

/* What platform_in_child runs in the child: loads topo, runs check. */
typedef struct {
    const char *topo;
    int (*check)(const sim_platform *);
} platform_job;

static inline int platform_child(void *ctx, void *result) {
    const platform_job *j = ctx;
    int *status = result;
    sim_child_init();
    sim_platform pl;
    char err[EP_ERRLEN];
    if (sim_platform_load(&pl, j->topo, err) != 0) {
        *status = 90;
        return 0;
    }
    sim_platform_seal();
    *status = j->check(&pl);
    return 0;
}

/* Loads topo in a child, runs check(platform) there and returns what it returned (0: all held;
 * 90: the platform did not load; 99: the child died). */
static inline int platform_in_child(const char *topo, int (*check)(const sim_platform *)) {
    platform_job j = {topo, check};
    int status = 99;
    return sim_child_call(platform_child, &j, &status, sizeof status) == 0 ? status : 99;
}

/* The topology and flow builder of a loaded platform, as the engine makes them. */
typedef struct {
    sim_topo t;
    sim_flows f;
} hand_net;

/* Returns 0, or -1 out of memory. */
static inline int hand_net_init(hand_net *n, const sim_platform *p, int world) {
    memset(n, 0, sizeof *n);
    if (sim_topo_init(&n->t, p, world) || sim_topo_find_stars(&n->t)) return -1;
    return sim_flows_init(&n->f, &n->t);
}

static inline void hand_net_free(hand_net *n) {
    sim_flows_free(&n->f);
    sim_topo_free(&n->t);
}

/* The task(s) of one instance: its members' ops and GPUs in group order (sim_algo_build). */
static inline double hand_net_build(hand_net *n, const hand_sched *h, const sim_calib *c,
                                    const ep_op *const *ops, const int *ranks, int members,
                                    double *fixed_s) {
    sim_algo_args a = {&h->s, c, ops, ranks, members, 0};
    return sim_algo_build(&n->f, &a, fixed_s);
}

#endif
