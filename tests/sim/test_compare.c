/* epsim compare: a simulated trace held against itself, renamed and malformed traces, and one
 * committed measured run (docs/epsim.md, "Compare"). */
#include <CUnit/CUnit.h>
#include <math.h>

#include "sim_test_util.h"

/* Two small MoE layers on the two-GPU H200 platform: well under a second. */
#define TINY_ARGS                                                                                  \
    "--num-layers 2 --hidden-size 1024 --num-attention-heads 8 --kv-channels 64 "                  \
    "--ffn-hidden-size 1024 --swiglu --num-experts 8 --moe-router-topk 2 "                         \
    "--moe-ffn-hidden-size 256 --seq-length 1024 --micro-batch-size 1 --global-batch-size 4 "      \
    "--padded-vocab-size 32000 --expert-model-parallel-size 2 --moe-token-dispatcher-type "        \
    "alltoall\n"

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* Makes a "measured" run RUN.{args,trace.json,summary.json} by running epsim itself. */
static int make_self_run(char *run, size_t len) {
    tmp_path(run, len, "cmp_self");
    char p[600], args[2048];
    snprintf(p, sizeof p, "%s.args", run);
    if (write_text(p, TINY_ARGS) != 0) return -1;
    snprintf(args, sizeof args,
             "--topo h200x2 @%s.args --trace %s.trace.json --summary-json %s.summary.json", run,
             run, run);
    return epsim_exec(args, NULL, NULL);
}

static void remove_run(const char *run) {
    static const char *sfx[] = {".args", ".trace.json", ".summary.json"};
    char p[600];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", run, sfx[i]);
        remove(p);
    }
}

static long count_x_events(const char *trace) {
    json_error_t je;
    json_t *root = json_load_file(trace, 0, &je);
    if (!root) return -1;
    long n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        n += ph && strcmp(ph, "X") == 0;
    }
    json_decref(root);
    return n;
}

static int compare(const char *run, const char *js, const char *err) {
    char args[2048];
    snprintf(args, sizeof args, "compare %s --json %s", run, js);
    return epsim_exec(args, NULL, err);
}

static void test_self_zero_error(void) {
    char run[512], js[512], tr[600];
    CU_ASSERT_EQUAL_FATAL(make_self_run(run, sizeof run), 0);
    tmp_path(js, sizeof js, "cmp_self.json");
    CU_ASSERT_EQUAL(compare(run, js, NULL), 0);
    snprintf(tr, sizeof tr, "%s.trace.json", run);
    long n = count_x_events(tr);
    CU_ASSERT(n > 10);
    CU_ASSERT_EQUAL(json_num(js, "ops.matched"), (double)n);
    CU_ASSERT(fabs(json_num(js, "iteration.error_pct")) < 1e-6);
    CU_ASSERT(json_num(js, "iteration.predicted_s") > 0);
    CU_ASSERT(fabs(json_num(js, "ops.median_rel_error")) < 1e-9);
    CU_ASSERT(fabs(json_num(js, "ops.p90_rel_error")) < 1e-9);
    /* committed as RUN.trace.json.xz: read through xz, the same comparison */
    char cmd[1400], xz[700];
    snprintf(cmd, sizeof cmd, "xz -f %s", tr);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    CU_ASSERT(!file_exists(tr));
    CU_ASSERT_EQUAL(compare(run, js, NULL), 0);
    CU_ASSERT_EQUAL(json_num(js, "ops.matched"), (double)n);
    CU_ASSERT(fabs(json_num(js, "iteration.error_pct")) < 1e-6);
    snprintf(xz, sizeof xz, "%s.xz", tr);
    remove(xz);
    remove(js);
    remove_run(run);
}

/* --csv: one row per matched op, each rank's ops in start order; with --json both files appear
 * or neither does */
static void test_csv_rows(void) {
    char run[512], js[512], csv[512], tr[600], args[2048];
    CU_ASSERT_EQUAL_FATAL(make_self_run(run, sizeof run), 0);
    tmp_path(js, sizeof js, "cmp_csv.json");
    tmp_path(csv, sizeof csv, "cmp_csv.csv");
    snprintf(args, sizeof args, "compare %s --json %s --csv %s", run, js, csv);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(tr, sizeof tr, "%s.trace.json", run);
    long n = count_x_events(tr), rows = 0, unsorted = 0, nonzero = 0;
    char *text = read_text(csv);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(strncmp(text, "rank,name,kind,measured_start_s,measured_s,", 43), 0);
    int prev_rank = -1;
    double prev_start = -1;
    for (char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        int rank;
        double start, err;
        char name[200], kind[64];
        if (sscanf(line + 1, "%d,%199[^,],%63[^,],%lf,%*f,%*f,%*f,%lf", &rank, name, kind, &start,
                   &err) != 5)
            continue; /* counted below as a missing row */
        rows++;
        if (rank < prev_rank || (rank == prev_rank && start < prev_start)) unsorted++;
        if (fabs(err) > 1e-9) nonzero++;
        prev_rank = rank, prev_start = start;
    }
    CU_ASSERT_EQUAL(rows, n); /* every op of the self trace has a measured duration > 0 */
    CU_ASSERT_EQUAL(unsorted, 0);
    CU_ASSERT_EQUAL(nonzero, 0);
    /* the after-arrival columns: filled for the EP exchanges (EP 2 here), empty for the rest */
    long filled = 0, exch = 0, stray = 0;
    for (char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char *end = strchr(line + 1, '\n'), kind[64] = "";
        if (end) *end = 0;
        sscanf(line + 1, "%*d,%*[^,],%63[^,]", kind);
        const char *last2 = strrchr(line + 1, ','), *f = last2;
        while (f > line + 1 && f[-1] != ',')
            f--; /* start of measured_after_arrival_s */
        int is_exch = !strcmp(kind, "a2a_dispatch") || !strcmp(kind, "a2a_combine") ||
                      !strcmp(kind, "alltoall");
        int has = last2 && f[0] != ',' && last2[1] != 0;
        exch += is_exch;
        filled += is_exch && has;
        stray += !is_exch && has;
        if (end) *end = '\n';
    }
    CU_ASSERT(exch > 0);
    CU_ASSERT_EQUAL(filled, exch);
    CU_ASSERT_EQUAL(stray, 0);
    free(text);
    remove(js);
    remove(csv);
    /* an unwritable --csv: exit 2 before anything is written, no --json either */
    snprintf(args, sizeof args, "compare %s --json %s --csv /nonexistent/dir/x.csv", run, js);
    CU_ASSERT_EQUAL(epsim_exec(args, NULL, NULL), 2);
    CU_ASSERT(!file_exists(js));
    remove_run(run);
}

static void test_renamed_op(void) {
    char run[512], tr[600], js[512], errf[512];
    CU_ASSERT_EQUAL_FATAL(make_self_run(run, sizeof run), 0);
    snprintf(tr, sizeof tr, "%s.trace.json", run);
    char *s = read_text(tr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    char *hit = strstr(s, "\"name\":\"mb1.c0.L1.router.fwd\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(hit);
    memcpy(strstr(hit, "router"), "ROUTER", 6); /* one op on one rank */
    CU_ASSERT_EQUAL(write_text(tr, s), 0);
    free(s);
    tmp_path(js, sizeof js, "cmp_ren.json");
    tmp_path(errf, sizeof errf, "cmp_ren.err");
    CU_ASSERT_EQUAL(compare(run, js, errf), 2);
    CU_ASSERT(!file_exists(js));
    char *e = read_text(errf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "mb1.c0.L1.ROUTER.fwd"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "2 unmatched"));
    free(e);
    remove(errf);
    remove_run(run);
}

/* key ("measured_s", "predicted_s" or "error_pct") of one kind in a compare JSON: of the kind
 * itself (member NULL) or of its "after_arrival" or "group_span" member; NAN where absent */
static double kind_num(const char *js, const char *kind, const char *member, const char *key) {
    json_error_t je;
    json_t *root = json_load_file(js, 0, &je);
    double d = NAN;
    size_t i;
    json_t *k;
    json_array_foreach(root ? json_object_get(root, "kinds") : NULL, i, k) {
        const char *name = json_string_value(json_object_get(k, "kind"));
        json_t *v = json_object_get(member ? json_object_get(k, member) : k, key);
        if (name && strcmp(name, kind) == 0 && json_is_number(v)) d = json_number_value(v);
    }
    if (root) json_decref(root);
    return d;
}

/* A rank that starts a dispatch 100 us before its peer waits those 100 us inside the op: the
 * per-kind sum counts them, the time from the last EP member's start does not */
static void test_after_arrival(void) {
    char run[512], tr[600], js[512];
    CU_ASSERT_EQUAL_FATAL(make_self_run(run, sizeof run), 0);
    snprintf(tr, sizeof tr, "%s.trace.json", run);
    char *s = read_text(tr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const char *key = "\"name\":\"mb1.c0.L1.dispatch.fwd\",\"pid\":1,\"tid\":1,\"ts\":";
    char *hit = strstr(s, key);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hit);
    double ts, dur;
    int used = 0;
    char *num = hit + strlen(key);
    CU_ASSERT_EQUAL_FATAL(sscanf(num, "%lf,\"dur\":%lf%n", &ts, &dur, &used), 2);
    size_t cap = strlen(s) + 64;
    char *t = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    snprintf(t, cap, "%.*s%.3f,\"dur\":%.3f%s", (int)(num - s), s, ts - 100, dur + 100, num + used);
    CU_ASSERT_EQUAL(write_text(tr, t), 0);
    free(t);
    free(s);
    tmp_path(js, sizeof js, "cmp_arr.json");
    CU_ASSERT_EQUAL_FATAL(compare(run, js, NULL), 0);
    double meas = kind_num(js, "a2a_dispatch", "after_arrival", "measured_s");
    double pred = kind_num(js, "a2a_dispatch", "after_arrival", "predicted_s");
    CU_ASSERT(meas > 0);
    CU_ASSERT(fabs(meas - pred) < 1e-9 * (1 + pred)); /* the wait left out */
    meas = kind_num(js, "a2a_dispatch", "group_span", "measured_s");
    pred = kind_num(js, "a2a_dispatch", "group_span", "predicted_s");
    CU_ASSERT(meas > 0);
    CU_ASSERT(fabs(meas - pred) < 1e-9 * (1 + pred));
    /* the whole durations: 100 us more measured than predicted */
    meas = kind_num(js, "a2a_dispatch", NULL, "measured_s");
    pred = kind_num(js, "a2a_dispatch", NULL, "predicted_s");
    CU_ASSERT(!isnan(meas) && !isnan(pred)); /* the kind is there */
    CU_ASSERT(fabs(meas - pred - 100e-6) < 1e-8);
    /* every op, the EP exchanges after arrival, as predicted */
    CU_ASSERT(fabs(json_num(js, "ops.p90_rel_error_after_arrival")) < 1e-9);
    /* kinds that are not EP exchanges carry no after_arrival */
    CU_ASSERT(isnan(kind_num(js, "gemm", "after_arrival", "measured_s")));
    remove(js);
    remove_run(run);
}

static void test_malformed_trace(void) {
    char run[512], tr[600], js[512], errf[512];
    CU_ASSERT_EQUAL_FATAL(make_self_run(run, sizeof run), 0);
    snprintf(tr, sizeof tr, "%s.trace.json", run);
    CU_ASSERT_EQUAL(write_text(tr, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":"), 0);
    tmp_path(js, sizeof js, "cmp_bad.json");
    tmp_path(errf, sizeof errf, "cmp_bad.err");
    CU_ASSERT_EQUAL(compare(run, js, errf), 2);
    CU_ASSERT(!file_exists(js));
    /* a missing run */
    CU_ASSERT_EQUAL(compare("/nonexistent/run", js, NULL), 2);
    remove(errf);
    remove_run(run);
}

/* A committed run: finite numbers. dsv3_pp2_vpp2.args names "@configs/deepseek-v3-proxy16.args"
 * relative to the repository root, which the test's working directory (the build tree) is not. */
static void committed_run(const char *name, double min_ops) {
    char run[1024], js[512];
    snprintf(run, sizeof run, "%s/traces/h200x2/runs/%s", EP_SOURCE_DIR, name);
    tmp_path(js, sizeof js, "cmp_committed.json");
    CU_ASSERT_EQUAL_FATAL(compare(run, js, NULL), 0);
    CU_ASSERT(json_num(js, "iteration.measured_s") > 0);
    CU_ASSERT(json_num(js, "iteration.predicted_s") > 0);
    CU_ASSERT(isfinite(json_num(js, "iteration.error_pct")));
    CU_ASSERT(isfinite(json_num(js, "ops.p90_rel_error")));
    CU_ASSERT(json_num(js, "ops.matched") > min_ops);
    remove(js);
}

static void test_committed_run(void) {
    committed_run("commbound_alltoall_none", 1000);
    committed_run("dsv3_pp2_vpp2", 500);
}

void ep_suite_compare(void) {
    CU_pSuite s = CU_add_suite("epsim compare", NULL, NULL);
    CU_add_test(s, "self trace: 0% error, all ops matched", test_self_zero_error);
    CU_add_test(s, "--csv: a row per op in start order, outputs together", test_csv_rows);
    CU_add_test(s, "renamed op: exit 2 naming it", test_renamed_op);
    CU_add_test(s, "a dispatch waiting for its peer: left out after arrival", test_after_arrival);
    CU_add_test(s, "malformed trace, missing run: exit 2", test_malformed_trace);
    CU_add_test(s, "committed measured run: finite error", test_committed_run);
}
