/* epsim calibrate and calibration files: shape-table interpolation, the fit reproducing the
 * committed raw records through the simulator's own formulas, errors, and the topology's default
 * calibration (docs/calibration.md). */
#include <CUnit/CUnit.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ep_cost.h"
#include "ep_stats.h"
#include "sim_cost.h"
#include "sim_fit_draw.h"
#include "sim_power.h"
#include "sim_shape.h"
#include "sim_test_util.h"

#define RAW_H200X2                                                                                 \
    EP_SOURCE_DIR "/traces/h200/calib " EP_SOURCE_DIR "/traces/h200x2/calib " EP_SOURCE_DIR        \
                  "/traces/h200x2/bench --topo h200x2"

static int near(double a, double b, double rel) {
    return fabs(a - b) <= rel * fabs(b);
}

/* ---- shape tables ------------------------------------------------------------------------- */

static void test_shape_table(void) {
    sim_shape_table t = {0};
    double p[][5] = {
        {1000, 10, 20, 1, 0.2}, {4000, 10, 20, 1, 0.6}, {2000, 10, 20, 1, 0.4},
        {2000, 10, 20, 1, 0.5}, {2000, 10, 20, 1, 0.3}, /* one shape measured three times */
        {1000, 50, 20, 1, 0.9},
    };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        CU_ASSERT_EQUAL_FATAL(sim_shape_add(&t, p[i], p[i][4]), 0);
    sim_shape_sort(&t);
    CU_ASSERT_EQUAL(t.n, 4); /* duplicates merged */
    double q[4] = {2000, 10, 20, 1};
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&t, q), 0.4, 1e-12); /* the median of three */
    q[0] = 4000;
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&t, q), 0.6, 1e-12);
    q[0] = sqrt(2000.0 * 4000.0); /* half way in log(rows) */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&t, q), 0.5, 1e-9);
    q[0] = 500; /* below the series: the smallest point's time, so efficiency halves */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&t, q), 0.1, 1e-12);
    q[0] = 1e6; /* above: the largest point's efficiency */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&t, q), 0.6, 1e-12);
    double other[4] = {1000, 50, 20, 1};
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&t, other), 0.9, 1e-12);
    double off[4] = {1000, 30, 20, 1}; /* no series: between its nearest neighbours */
    double y = sim_shape_eval(&t, off);
    CU_ASSERT(y > 0.2 && y < 0.9);
    sim_shape_table empty = {0};
    CU_ASSERT(sim_shape_eval(&empty, q) < 0);
    sim_shape_free(&t);
}

/* Points (x0, x1, x2, x3, y) into a sorted table. */
static void table_of(sim_shape_table *t, const double (*p)[5], int n, int exact) {
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL_FATAL((exact ? sim_shape_add_exact : sim_shape_add)(t, p[i], p[i][4]), 0);
    CU_ASSERT_EQUAL_FATAL(sim_shape_sort(t), 0);
}

/* Across series: the box of grid values around a query, blended multilinearly in log space; a
 * model's own shape answers only its series; a grouped GEMM's corners are read at equal rows per
 * expert; holes renormalise; outside the grid is said. */
static void test_shape_grid(void) {
    sim_shape_table t = {0};
    const double grid[][5] = {
        {100, 1000, 10, 1, 0.2}, {1000, 1000, 10, 1, 0.2}, /* flat series: y depends on x1, x2 */
        {100, 4000, 10, 1, 0.6}, {1000, 4000, 10, 1, 0.6},
        {100, 1000, 40, 1, 0.4}, {1000, 1000, 40, 1, 0.4},
        {100, 4000, 40, 1, 0.8}, {1000, 4000, 40, 1, 0.8},
    };
    table_of(&t, grid, 8, 0);
    int out = -1;
    double q[4] = {500, 2000, 20, 1}; /* half way in log along x1 and x2 */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&t, q, NULL, &out), 0.5, 1e-9);
    CU_ASSERT_EQUAL(out, 0);
    q[2] = 10; /* on a grid line of x2: x1 alone */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&t, q, NULL, &out), 0.4, 1e-9);
    q[1] = 8000; /* beyond the grid: the edge's value, said to be outside */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&t, q, NULL, &out), 0.6, 1e-9);
    CU_ASSERT_EQUAL(out, 1);
    q[1] = 4000, q[0] = 5000; /* a series, above its largest point: outside too */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&t, q, NULL, &out), 0.6, 1e-9);
    CU_ASSERT_EQUAL(out, 1);
    /* a model's own shape in the middle of the box: exact for its series, unseen by others */
    const double model[][5] = {{500, 2000, 20, 1, 0.9}};
    table_of(&t, model, 1, 1);
    double at[4] = {500, 2000, 20, 1}, near_it[4] = {500, 2000, 25, 1};
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&t, at), 0.9, 1e-12);
    double w = log(25.0 / 10) / log(4.0); /* x2 in the box [10, 40], x1 half way */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&t, near_it), 0.4 + 0.2 * w, 1e-9);
    /* a hole: the corner (4000, 40) left out, the other three renormalised */
    sim_shape_table h = {0};
    table_of(&h, grid, 6, 0);
    q[0] = 500, q[1] = 2000, q[2] = 20;
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&h, q), (0.2 + 0.6 + 0.4) / 3, 1e-9);
    /* grouped GEMM: feature 0 is the rows of all x3 experts; the same per-expert curve at 1 and 4
     * experts gives a 2-expert query that curve at its rows per expert */
    sim_shape_table g = {0};
    const double grouped[][5] = {
        {100, 512, 512, 1, 0.1}, {400, 512, 512, 1, 0.4},  /* 100 .. 400 rows per expert */
        {400, 512, 512, 4, 0.1}, {1600, 512, 512, 4, 0.4}, /* the same per expert */
    };
    table_of(&g, grouped, 4, 0);
    sim_shape_rule per_expert = {NULL, NULL, 1, 0};
    double qg[4] = {200, 512, 512, 2}; /* 100 rows per expert */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&g, qg, &per_expert, NULL), 0.1, 1e-9);
    qg[0] = 400; /* 200 per expert: half way in log on both */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&g, qg, &per_expert, NULL), 0.25, 1e-9);
    /* whole tiles (x0_tile): between points at most one tile apart a query takes the upper
     * point's time; farther apart, the log interpolation above */
    sim_shape_table d = {0};
    const double dense[][5] = {{512, 512, 512, 2, 0.4}, /* 256, 320, 1280 rows per expert */
                               {640, 512, 512, 2, 0.45},
                               {2560, 512, 512, 2, 0.8}};
    table_of(&d, dense, 3, 0);
    sim_shape_rule tiled = {NULL, NULL, 1, 64};
    double qd[4] = {580, 512, 512, 2}; /* 290 per expert: 256 and 320 are 64 apart */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&d, qd, &tiled, NULL), 0.45 * 580 / 640, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&d, qd, &per_expert, NULL),
                           0.4 + 0.05 * log(580.0 / 512) / log(640.0 / 512), 1e-9);
    qd[0] = 290; /* one expert of 290 rows: read at the same rows per expert */
    qd[3] = 1;
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&d, qd, &tiled, NULL), 0.45 * 580 / 640, 1e-12);
    qd[0] = 640; /* a point: read as it is */
    qd[3] = 2;
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&d, qd, &tiled, NULL), 0.45, 1e-12);
    qd[0] = 1280; /* 640 per expert: 320 .. 1280 are 960 apart, log interpolation */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&d, qd, &tiled, NULL), 0.45 + 0.35 * 0.5, 1e-9);
    sim_shape_free(&d);
    /* a model's series beyond its measured rows: the grid's trend anchored to its nearest point
     * (grid 0.4 at 1000 rows, 0.8 at 10000; the model measured 0.3 at 1000: 0.6 at 10000) */
    sim_shape_table m = {0};
    const double trend[][5] = {
        {100, 1000, 10, 1, 0.2}, {1000, 1000, 10, 1, 0.4}, {10000, 1000, 10, 1, 0.8},
        {100, 4000, 10, 1, 0.2}, {1000, 4000, 10, 1, 0.4}, {10000, 4000, 10, 1, 0.8},
    };
    const double own[][5] = {{100, 2000, 10, 1, 0.15}, {1000, 2000, 10, 1, 0.3}};
    table_of(&m, trend, 6, 0);
    table_of(&m, own, 2, 1);
    double qm[4] = {10000, 2000, 10, 1};
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval_rule(&m, qm, NULL, &out), 0.6, 1e-9);
    CU_ASSERT_EQUAL(out, 0); /* inside the grid's rows */
    qm[0] = 500; /* inside its own rows: its own series */
    CU_ASSERT_DOUBLE_EQUAL(sim_shape_eval(&m, qm), 0.15 + 0.15 * log(5.0) / log(10.0), 1e-9);
    sim_shape_free(&m);
    sim_shape_free(&t);
    sim_shape_free(&h);
    sim_shape_free(&g);
}

/* A GEMM with fewer rows than its series' smallest measured point: a large one keeps that point's
 * efficiency where the GPU's size curve is flat, a small one falls with the curve; attention keeps
 * the latency-bound rule. */
static void test_gemm_below_series(void) {
    sim_calib c;
    sim_calib_default(&c);
    double pt[SIM_SHAPE_DIMS];
    sim_gemm_features(0, 4096, 129280, 7168, 1, pt);
    CU_ASSERT_EQUAL_FATAL(sim_shape_add(&c.gemm_shapes[0], pt, 0.74), 0);
    sim_gemm_features(0, 4096, 1024, 1024, 1, pt);
    CU_ASSERT_EQUAL_FATAL(sim_shape_add(&c.gemm_shapes[0], pt, 0.30), 0);
    sim_shape_sort(&c.gemm_shapes[0]);
    sim_cost x;
    sim_cost_init(&x, &c, NULL);
    ep_op g = hand_op(EP_OP_GEMM, EP_STREAM_COMP);
    g.phase = EP_PHASE_FWD;
    g.m = 2048, g.n = 129280, g.k = 7168, g.batch = 1;
    g.flops = 2.0 * g.m * g.n * g.k; /* 3.8 TFLOP: on the curve's flat top */
    sim_work w;
    sim_op_work(&x, &g, 989e12, 3.35e12, &w);
    CU_ASSERT(near(w.t_flop, g.flops / (989e12 * 0.74), 1e-9));
    g.n = 1024, g.k = 1024; /* 4.3 GFLOP: the curve falls by its ratio between the two sizes */
    g.flops = 2.0 * g.m * g.n * g.k;
    sim_op_work(&x, &g, 989e12, 3.35e12, &w);
    double ratio = sim_table_eval(&c.gemm_efficiency, g.flops) /
                   sim_table_eval(&c.gemm_efficiency, 2 * g.flops);
    CU_ASSERT(ratio < 1);
    CU_ASSERT(near(w.t_flop, g.flops / (989e12 * 0.30 * ratio), 1e-9));
    sim_cost_free(&x);
    sim_calib_free(&c);
}

/* ---- the fit ------------------------------------------------------------------------------ */

/* Fits the committed 2 x H200 raw files into out; returns the exit status. */
static int fit_h200x2(const char *out, const char *log) {
    char args[4096];
    snprintf(args, sizeof args, "calibrate " RAW_H200X2 " --out %s", out);
    return epsim_exec(args, log, NULL);
}

/* A number after `key` in a text file, or NAN. */
static double number_after(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    char line[2048];
    double v = NAN;
    while (fgets(line, sizeof line, f) && isnan(v)) {
        char *p = strstr(line, key);
        if (p) v = atof(p + strlen(key));
    }
    fclose(f);
    return v;
}

/* One NCCL all-to-all of `bytes` per peer on h200x2 alone: its transfer time under calibration
 * c (from the collective's start to its end, as bench calib times it). */
static double one_alltoall(const sim_calib *c, double bytes) {
    hand_sched h;
    hand_init(&h, 2);
    int g = hand_group(&h, 2);
    hand_collective(&h, 2, EP_OP_ALLTOALL, EP_STREAM_COMM, g, bytes);
    hand_result res;
    hand_run(&h, "h200x2", c, &res);
    CU_ASSERT_EQUAL(res.rc, 0);
    return res.end[0][0] - res.xfer[0][0];
}

static void test_fit_reproduces_records(void) {
    char out[512], log[512], err[EP_ERRLEN];
    tmp_path(out, sizeof out, "fit.json");
    tmp_path(log, sizeof log, "fit.log");
    CU_ASSERT_EQUAL_FATAL(fit_h200x2(out, log), 0);
    /* the fit's own check: compute records through sim_cost (duplicates and the binned memory
     * curve are not exact) */
    CU_ASSERT(number_after(log, "within median ") < 1.0);
    CU_ASSERT(number_after(log, ", p90 ") < 5.0);
    sim_calib c;
    sim_calib_default(&c);
    CU_ASSERT_EQUAL_FATAL(sim_calib_load(&c, out, err), 0);
    CU_ASSERT(c.nccl_nvlink[SIM_COLL_ALLTOALL].efficiency.n >= 8);
    CU_ASSERT(c.gemm_shapes[0].n > 100 && c.grouped_gemm_shapes[2].n > 100);
    CU_ASSERT(c.comm_flops_slowdown > 1 && c.nccl_compute_slowdown > 1);
    /* what no file measured and a published figure gave: named with its source in _meta */
    json_error_t je;
    json_t *root = json_load_file(out, 0, &je);
    json_t *pub = json_object_get(json_object_get(root, "_meta"), "published");
    CU_ASSERT(json_object_size(pub) == 5);
    CU_ASSERT(strstr(json_string_value(json_object_get(pub, "nccl_ib_efficiency")), "nccl-tests") !=
              NULL);
    json_decref(root);
    /* comm.json of 2 x H200 (alltoall, bytes per peer -> time): the simulator gives them back */
    json_t *comm = json_load_file(EP_SOURCE_DIR "/traces/h200x2/calib/comm.json", 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(comm);
    int checked = 0;
    for (size_t i = 1; i < json_array_size(comm); i++) {
        json_t *r = json_array_get(comm, i);
        const char *op = json_string_value(json_object_get(r, "op"));
        double b = json_number_value(json_object_get(r, "bytes"));
        double t = json_number_value(json_object_get(r, "time_us")) * 1e-6;
        if (!op || strcmp(op, "alltoall") != 0 || (b != 1048576 && b != 67108864 && b != 1 << 30))
            continue;
        CU_ASSERT(near(one_alltoall(&c, b), t, 0.01));
        checked++;
    }
    CU_ASSERT_EQUAL(checked, 3);
    json_decref(comm);
    /* corun.json: each class beside each, as measured */
    json_t *co = json_load_file(EP_SOURCE_DIR "/traces/h200/calib/corun.json", 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(co);
    CU_ASSERT_EQUAL(json_array_size(co), 5);
    for (size_t i = 1; i < json_array_size(co); i++) {
        json_t *r = json_array_get(co, i);
        int vm = !strcmp(json_string_value(json_object_get(r, "victim")), "memory");
        int bm = !strcmp(json_string_value(json_object_get(r, "beside")), "memory");
        double want = json_number_value(json_object_get(r, "slowdown"));
        double got = vm ? (bm ? c.corun_memory_memory : c.corun_memory_compute)
                        : (bm ? c.corun_compute_memory : c.corun_compute_compute);
        CU_ASSERT(near(got, want < 1 ? 1 : want, 1e-9));
    }
    json_decref(co);
    /* a compute record measured once: given back exactly by the shape table */
    ep_op g = hand_op(EP_OP_GEMM, EP_STREAM_COMP);
    g.phase = EP_PHASE_FWD;
    g.m = 128, g.n = 1024, g.k = 1024, g.batch = 1;
    g.flops = 2.0 * 128 * 1024 * 1024;
    g.bytes = 2.0 * (128 * 1024 + 1024 * 1024 + 128 * 1024);
    json_t *comp = json_load_file(EP_SOURCE_DIR "/traces/h200/calib/compute.json", 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(comp);
    double meas = NAN;
    for (size_t i = 1; i < json_array_size(comp) && isnan(meas); i++) {
        json_t *r = json_array_get(comp, i);
        if (!strcmp(json_string_value(json_object_get(r, "kind")), "gemm") &&
            !strcmp(json_string_value(json_object_get(r, "phase")), "fwd") &&
            json_number_value(json_object_get(r, "m")) == 128 &&
            json_number_value(json_object_get(r, "n")) == 1024 &&
            json_number_value(json_object_get(r, "k")) == 1024)
            meas = json_number_value(json_object_get(r, "time_us")) * 1e-6;
    }
    json_decref(comp);
    sim_cost x;
    sim_cost_init(&x, &c, NULL);
    sim_work w;
    sim_op_work(&x, &g, 989e12, 4.8e12, &w);
    CU_ASSERT(near(sim_work_alone(&w), meas, 1e-4));
    sim_cost_free(&x);
    sim_calib_free(&c);
    remove(out);
    remove(log);
}

static void count_published(const char *key, const char *source, void *ctx) {
    CU_ASSERT(key[0] && strlen(source) > 20);
    ++*(int *)ctx;
}

/* The built-in values from published measurements are named while they hold, and no longer once
 * a calibration replaced them. */
static void test_published_provenance(void) {
    sim_calib c;
    sim_calib_default(&c);
    int n = 0;
    CU_ASSERT_EQUAL(sim_calib_each_published(&c, count_published, &n), 5);
    CU_ASSERT_EQUAL(n, 5);
    c.nccl_ib_efficiency = 0.8;
    c.ep_rdma_nodes.y[0] = 0.5;
    n = 0;
    CU_ASSERT_EQUAL(sim_calib_each_published(&c, count_published, &n), 3);
    sim_calib_free(&c);
}

static void test_fit_deterministic(void) {
    char a[512], b[512], cmd[1200];
    tmp_path(a, sizeof a, "fit_a.json");
    tmp_path(b, sizeof b, "fit_b.json");
    CU_ASSERT_EQUAL_FATAL(fit_h200x2(a, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(fit_h200x2(b, NULL), 0);
    /* the files differ only in the date of _meta */
    snprintf(cmd, sizeof cmd, "diff <(grep -v '\"date\"' %s) <(grep -v '\"date\"' %s) >/dev/null",
             a, b);
    char full[1400];
    snprintf(full, sizeof full, "bash -c \"%s\"", cmd);
    CU_ASSERT_EQUAL(system(full), 0);
    remove(a);
    remove(b);
}

static void test_fit_errors(void) {
    char dir[512], out[512], args[2048];
    tmp_path(dir, sizeof dir, "rawbad");
    tmp_path(out, sizeof out, "fitbad.json");
    snprintf(args, sizeof args,
             "mkdir -p %s && printf '[{\"meta\":{}},{\"kind\":' > %s/compute.json", dir, dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    expect_exit2("calibrate", NULL);
    snprintf(args, sizeof args, "calibrate /nonexistent/calib --topo h200x2 --out %s", out);
    expect_exit2(args, out);
    snprintf(args, sizeof args, "calibrate %s --topo h200x2 --out %s", dir, out);
    expect_exit2(args, out);
    snprintf(args, sizeof args,
             "calibrate " EP_SOURCE_DIR "/traces/h200/calib --topo nosuch --out %s", out);
    expect_exit2(args, out);
    /* the options that choose compute records: bad ones leave no output, --holdout's included
     * (it is read before anything is written) */
    static const char *const choose[] = {
        "--holdout /nonexistent.json", "--model-shapes /nonexistent.json", "--kind-from attention",
        "--kind-from nosuchkind:%s/compute.json", "--kind-from gemm:/nonexistent.json.xz"};
    for (size_t i = 0; i < sizeof choose / sizeof choose[0]; i++) {
        char opt[600];
        snprintf(opt, sizeof opt, choose[i], EP_SOURCE_DIR "/traces/h200/calib");
        snprintf(args, sizeof args,
                 "calibrate " EP_SOURCE_DIR "/traces/h200/calib --topo h200x2 %s --out %s", opt,
                 out);
        expect_exit2(args, out);
    }
    snprintf(args, sizeof args, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(args), 0);
}

/* kernels.json (scripts/torch_kernels.py): its bf16 GEMM / grouped / attention records replace
 * compute.json's of the same kinds, compare-only sources and casts stay out, FP8 GEMMs fill their
 * own tables; the FP8 keys load back and are written only when measured. */
static void test_fit_kernels(void) {
    char dir[512], out[512], out0[512], args[8192], err[EP_ERRLEN];
    tmp_path(dir, sizeof dir, "rawkern");
    tmp_path(out, sizeof out, "fitkern.json");
    tmp_path(out0, sizeof out0, "fitkern0.json");
    const char *rec = "\"m\":1024,\"n\":1024,\"k\":1024,\"batch\":1,\"flops\":2147483648,"
                      "\"bytes\":6291456,\"seq\":0,\"dqk\":0,\"dv\":0";
    snprintf(args, sizeof args,
             "mkdir -p %s && printf '%%s\\n' '[{\"meta\":{}},' "
             "'{\"kind\":\"gemm\",\"phase\":\"fwd\",%s,\"time_us\":10,\"source\":\"grid\"},' "
             "'{\"kind\":\"attention\",\"phase\":\"fwd\",\"m\":0,\"n\":0,\"k\":0,"
             "\"batch\":1,\"flops\":1e9,\"bytes\":0,\"seq\":1024,\"dqk\":64,\"dv\":64,"
             "\"time_us\":30,\"source\":\"grid\"},' "
             "'{\"kind\":\"elementwise\",\"phase\":\"fwd\",\"m\":0,\"n\":0,\"k\":0,"
             "\"batch\":0,\"flops\":0,\"bytes\":1e8,\"seq\":0,\"dqk\":0,\"dv\":0,"
             "\"time_us\":40,\"source\":\"grid\"}]' > %s/compute.json && "
             "printf '%%s\\n' '[{\"meta\":{\"compare_only\":[\"torch:flash\"]}},' "
             "'{\"kind\":\"attention\",\"phase\":\"fwd\",\"m\":1024,\"n\":0,\"k\":0,"
             "\"batch\":0,\"flops\":1e9,\"bytes\":1e6,\"seq\":1024,\"dqk\":64,\"dv\":64,"
             "\"time_us\":12,\"source\":\"torch:cudnn\"},' "
             "'{\"kind\":\"attention\",\"phase\":\"fwd\",\"m\":1024,\"n\":0,\"k\":0,"
             "\"batch\":0,\"flops\":2e9,\"bytes\":1e6,\"seq\":1024,\"dqk\":64,\"dv\":64,"
             "\"time_us\":30,\"source\":\"torch:flash\"},' "
             "'{\"kind\":\"gemm\",\"phase\":\"fwd\",%s,\"time_us\":5,\"dtype\":\"fp8\","
             "\"source\":\"torch:scaled_mm\"},' "
             "'{\"kind\":\"fp8_cast\",\"phase\":\"fwd\",\"m\":0,\"n\":0,\"k\":0,"
             "\"batch\":0,\"flops\":0,\"bytes\":3e6,\"seq\":0,\"dqk\":0,\"dv\":0,"
             "\"time_us\":20,\"source\":\"torch:eager\"}]' > %s/kernels.json",
             dir, rec, dir, rec, dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args, "calibrate %s --topo h200x2 --out %s", dir, out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    sim_calib c;
    sim_calib_default(&c);
    CU_ASSERT_EQUAL_FATAL(sim_calib_load(&c, out, err), 0);
    const double peak = 989e12, t0 = c.kernel_overhead_s;
    /* attention from the cuDNN record alone (the flash one and epref's are out) */
    CU_ASSERT_EQUAL(c.attention_shapes[0].n, 1);
    CU_ASSERT(near(c.attention_shapes[0].y[0], 1e9 / (peak * (12e-6 - t0)), 1e-5));
    /* kernels.json has no bf16 GEMM: compute.json's stays; the FP8 one has its own table */
    CU_ASSERT_EQUAL(c.gemm_shapes[0].n, 1);
    CU_ASSERT(near(c.gemm_shapes[0].y[0], 2147483648.0 / (peak * (10e-6 - t0)), 1e-5));
    CU_ASSERT_EQUAL(c.fp8_gemm_shapes[0].n, 1);
    /* of the FP8 peak, fp8_flops_ratio (2) x the BF16 one */
    CU_ASSERT(near(c.fp8_gemm_shapes[0].y[0], 2147483648.0 / (2 * peak * (5e-6 - t0)), 1e-5));
    CU_ASSERT_EQUAL(c.fp8_grouped_gemm_shapes[0].n + c.fp8_gemm_shapes[2].n, 0);
    CU_ASSERT_EQUAL(c.memory_efficiency.n, 1); /* the cast is not a memory record */
    sim_calib_free(&c);
    /* --kind-from gemm/fp8:FILE, FILE a kernels.json: its FP8 GEMM replaces kernels.json's, its
     * bf16 GEMM stays out (compute.json's is still the table) */
    snprintf(args, sizeof args,
             "printf '%%s\\n' '[{\"meta\":{\"file\":\"kernels.json\"}},' "
             "'{\"kind\":\"gemm\",\"phase\":\"fwd\",%s,\"time_us\":4,\"dtype\":\"fp8\","
             "\"source\":\"torch:cublas_fp8_multistream\"},' "
             "'{\"kind\":\"gemm\",\"phase\":\"fwd\",%s,\"time_us\":7,"
             "\"source\":\"torch:cublas\"}]' > %s/other.json && "
             "mkdir -p %s/k && mv %s/other.json %s/k/kernels_other.json",
             rec, rec, dir, dir, dir, dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args,
             "calibrate %s --topo h200x2 --out %s --kind-from gemm/fp8:%s/k/kernels_other.json",
             dir, out0, dir);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    sim_calib_default(&c);
    CU_ASSERT_EQUAL_FATAL(sim_calib_load(&c, out0, err), 0);
    CU_ASSERT_EQUAL(c.fp8_gemm_shapes[0].n, 1);
    CU_ASSERT(near(c.fp8_gemm_shapes[0].y[0], 2147483648.0 / (2 * peak * (4e-6 - t0)), 1e-5));
    CU_ASSERT(near(c.gemm_shapes[0].y[0], 2147483648.0 / (peak * (10e-6 - t0)), 1e-5));
    sim_calib_free(&c);
    /* repeated, from an xz-compressed file: the bf16 GEMM too, now kernels.json's (and so the
     * table's, compute.json's gives way) */
    snprintf(args, sizeof args, "xz -k %s/k/kernels_other.json", dir);
    CU_ASSERT_EQUAL_FATAL(system(args), 0);
    snprintf(args, sizeof args,
             "calibrate %s --topo h200x2 --out %s --kind-from gemm/fp8:%s/k/kernels_other.json.xz "
             "--kind-from gemm/bf16:%s/k/kernels_other.json.xz",
             dir, out0, dir, dir);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    sim_calib_default(&c);
    CU_ASSERT_EQUAL_FATAL(sim_calib_load(&c, out0, err), 0);
    CU_ASSERT(near(c.fp8_gemm_shapes[0].y[0], 2147483648.0 / (2 * peak * (4e-6 - t0)), 1e-5));
    CU_ASSERT_EQUAL(c.gemm_shapes[0].n, 1);
    CU_ASSERT(near(c.gemm_shapes[0].y[0], 2147483648.0 / (peak * (7e-6 - t0)), 1e-5));
    sim_calib_free(&c);
    /* without kernels.json: epref's attention, and no FP8 keys in the file */
    snprintf(args, sizeof args, "calibrate %s:compute.json --topo h200x2 --out %s", dir, out0);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    sim_calib_default(&c);
    CU_ASSERT_EQUAL_FATAL(sim_calib_load(&c, out0, err), 0);
    CU_ASSERT(near(c.attention_shapes[0].y[0], 1e9 / (peak * (30e-6 - t0)), 1e-5));
    CU_ASSERT_EQUAL(c.fp8_gemm_shapes[0].n, 0);
    sim_calib_free(&c);
    snprintf(args, sizeof args, "grep -q fp8_gemm_shapes %s && ! grep -q fp8_gemm_shapes %s", out,
             out0);
    CU_ASSERT_EQUAL(system(args), 0);
    snprintf(args, sizeof args, "rm -rf %s %s %s", dir, out, out0);
    CU_ASSERT_EQUAL(system(args), 0);
}

/* ---- the topology's calibration ----------------------------------------------------------- */

#define TINY                                                                                       \
    "--topo h200x2 --no-preset --num-layers 2 --hidden-size 1024 --num-attention-heads 8 "         \
    "--ffn-hidden-size 1024 --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 256 "        \
    "--seq-length 1024 --global-batch-size 4 --expert-model-parallel-size 2"

static char *summary_string(const char *path, const char *key) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    const char *s = root ? json_string_value(json_object_get(root, key)) : NULL;
    char *out = s ? strdup(s) : NULL;
    json_decref(root);
    return out;
}

static void test_topology_calibration(void) {
    char a[512], b[512], args[4096];
    tmp_path(a, sizeof a, "cal_topo.json");
    tmp_path(b, sizeof b, "cal_none.json");
    snprintf(args, sizeof args, TINY " --summary-json %s", a);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(args, sizeof args, TINY " --calib none --summary-json %s", b);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    char *fa = summary_string(a, "calibration_file"), *fb = summary_string(b, "calibration_file");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fa);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fb);
    CU_ASSERT(strstr(fa, "traces/calib/h200x2.json") != NULL);
    CU_ASSERT_STRING_EQUAL(fb, "built-in defaults");
    CU_ASSERT(json_num(a, "iteration_time_s") != json_num(b, "iteration_time_s"));
    CU_ASSERT(json_num(a, "calibration.launch_s") != json_num(b, "calibration.launch_s"));
    free(fa);
    free(fb);
    /* a bare name resolves under traces/calib; an unknown one is an error */
    snprintf(args, sizeof args, TINY " --calib h100 --summary-json %s", b);
    CU_ASSERT_EQUAL(epsim_exec(args, NULL, NULL), 0);
    fb = summary_string(b, "calibration_file");
    CU_ASSERT(fb && strstr(fb, "traces/calib/h100.json") != NULL);
    free(fb);
    snprintf(args, sizeof args, TINY " --calib nosuch");
    CU_ASSERT_EQUAL(epsim_exec(args, NULL, NULL), 2);
    remove(a);
    remove(b);
}

/* The software stack's host costs (host_torch.json, host_megatron.json of the H100): the fitted
 * per-op and per-expert-call times give Megatron-Core's measured layer times (the median over
 * the file's launches) back when epsim's own schedule of the same layer is issued with them;
 * graph and NCCL launches are the records'. */
static double record_us(const char *path, const char *layer, const char *what) {
    json_error_t je;
    json_t *a = json_load_file(path, 0, &je), *r;
    size_t i;
    double t[64];
    int n = 0;
    json_array_foreach(a, i, r) {
        json_t *l = json_object_get(r, "layer"), *w = json_object_get(r, "what");
        json_t *ranks = json_object_get(r, "ranks"); /* the fit's medians: one-GPU launches */
        int hit = layer ? l && !strcmp(json_string_value(l), layer) &&
                              !strcmp(json_string_value(json_object_get(r, "pass")), "fwd_bwd") &&
                              !(ranks && json_number_value(ranks) > 1)
                        : w && !strcmp(json_string_value(w), what);
        if (hit && n < 64) t[n++] = json_number_value(json_object_get(r, "time_us"));
    }
    json_decref(a);
    return n ? ep_median(t, n) : -1;
}

/* Writes text to DIR/NAME (DIR created); path receives DIR/NAME. */
static void write_raw_file(const char *dir, const char *name, const char *text, char *path,
                           size_t len) {
    mkdir(dir, 0755);
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* `epsim calibrate DIRS --topo dgx8 --out OUT` must succeed; *c is the calibration it wrote. */
static void calibrate_topo(const char *dirs, const char *topo, const char *out, sim_calib *c) {
    char args[1800], err[EP_ERRLEN];
    snprintf(args, sizeof args, "calibrate %s --topo %s --out %s", dirs, topo, out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    sim_calib_default(c);
    CU_ASSERT_EQUAL_FATAL(sim_calib_load(c, out, err), 0);
}

static void calibrate_into(const char *dirs, const char *out, sim_calib *c) {
    calibrate_topo(dirs, "dgx8", out, c);
}

/* Raw files names[i] holding texts[i], in a directory of their own, calibrated into *c; the
 * directory and the calibration's output are removed again. */
static void calibrate_files(const char *const *names, const char *const *texts, int n,
                            sim_calib *c) {
    char dir[512], path[4][600], out[600];
    CU_ASSERT_FATAL(n <= 4);
    tmp_path(dir, sizeof dir, "rawfiles");
    for (int i = 0; i < n; i++)
        write_raw_file(dir, names[i], texts[i], path[i], sizeof path[i]);
    snprintf(out, sizeof out, "%s.calib.json", dir);
    calibrate_into(dir, out, c);
    remove(out);
    for (int i = 0; i < n; i++)
        remove(path[i]);
    rmdir(dir);
}

/* One raw file `name` holding `text`, alone in a directory of its own, calibrated into *c. */
static void calibrate_one_file(const char *name, const char *text, sim_calib *c) {
    calibrate_files(&name, &text, 1, c);
}

/* A compute record of kind "gemm" (batch 1) or "grouped_gemm" (batch experts, m rows in all), phase
 * fwd, from `source`, into buf. */
static void compute_record(char *buf, size_t len, const char *kind, int m, int n, int k, int batch,
                           double us, const char *source) {
    double flops = 2.0 * m * n * k; /* m: every expert's rows together */
    double bytes = 2.0 * ((double)m * k + (double)batch * k * n + (double)m * n);
    snprintf(buf, len,
             "{\"kind\":\"%s\",\"phase\":\"fwd\",\"m\":%d,\"n\":%d,\"k\":%d,\"batch\":%d,"
             "\"flops\":%.0f,\"bytes\":%.0f,\"seq\":0,\"dqk\":0,\"dv\":0,\"time_us\":%g,"
             "\"source\":\"%s\"}",
             kind, m, n, k, batch, flops, bytes, us, source);
}

static int exact_points(const sim_shape_table *t) {
    int n = 0;
    for (int p = 0; p < SIM_PHASES; p++)
        for (int i = 0; i < t[p].n; i++)
            n += t[p].exact[i];
    return n;
}

/* --model-shapes KIND,...:FILE adds FILE's model records of those op kinds only (the GEMMs timed
 * on one machine, the memory-bound ops on another); repeatable; an unknown kind, or kinds with no
 * model record there, is refused (exit 2, no output). */
static void test_fit_model_shapes_kinds(void) {
    char dir[512], mdir[512], path[600], mpath[600], out[600], args[2600];
    char g1[400], g2[400], g3[400], mg[400], mq[400], text[2400];
    tmp_path(dir, sizeof dir, "shapekinds");
    tmp_path(mdir, sizeof mdir, "shapekinds_models");
    snprintf(out, sizeof out, "%s.calib.json", dir);
    compute_record(g1, sizeof g1, "gemm", 1024, 1024, 1024, 1, 40, "grid");
    compute_record(g2, sizeof g2, "gemm", 2048, 1024, 1024, 1, 70, "grid");
    compute_record(g3, sizeof g3, "grouped_gemm", 4096, 512, 1024, 8, 60, "grid");
    snprintf(text, sizeof text, "[{\"meta\":{\"gpu\":\"test\"}},\n%s,\n%s,\n%s]\n", g1, g2, g3);
    write_raw_file(dir, "compute.json", text, path, sizeof path);
    compute_record(mg, sizeof mg, "gemm", 1536, 1024, 1024, 1, 50, "model:a");
    compute_record(mq, sizeof mq, "grouped_gemm", 3072, 512, 1024, 8, 45, "model:a");
    snprintf(text, sizeof text, "[{\"meta\":{\"gpu\":\"test\"}},\n%s,\n%s]\n", mg, mq);
    write_raw_file(mdir, "compute.json", text, mpath, sizeof mpath);
    static const struct {
        const char *opts;
        int gemm, grouped;
    } cases[] = {
        {"--model-shapes grouped_gemm:%s", 0, 1},
        {"--model-shapes gemm:%s", 1, 0},
        {"--model-shapes gemm:%s --model-shapes grouped_gemm,router:%s", 1, 1},
        {"--model-shapes %s", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char opts[1400];
        snprintf(opts, sizeof opts, cases[i].opts, mpath, mpath);
        snprintf(args, sizeof args, "%s %s", dir, opts);
        sim_calib c;
        calibrate_into(args, out, &c);
        CU_ASSERT_EQUAL(exact_points(c.gemm_shapes), cases[i].gemm);
        CU_ASSERT_EQUAL(exact_points(c.grouped_gemm_shapes), cases[i].grouped);
        sim_calib_free(&c);
        remove(out);
    }
    static const char *const bad[] = {"--model-shapes nosuch:%s", "--model-shapes router:%s",
                                      "--model-shapes gemm,,router:%s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char opt[800];
        snprintf(opt, sizeof opt, bad[i], mpath);
        snprintf(args, sizeof args, "calibrate %s --topo dgx8 %s --out %s", dir, opt, out);
        expect_exit2(args, out);
    }
    remove(path), remove(mpath), rmdir(dir), rmdir(mdir);
}

/* NCCL curves by group size: the 4 x H200 machine's all-to-alls over all four GPUs and over two
 * of them (traces/h200x4/comm-pairs) each come back for a group of their own size (a pair of a
 * bigger machine moves at its own rate: docs/calibration.md, "NCCL curves by group size"). */
static double alltoall_over(const sim_calib *c, int n, double bytes) {
    hand_sched h;
    hand_init(&h, n);
    int g = hand_group(&h, n);
    hand_collective(&h, n, EP_OP_ALLTOALL, EP_STREAM_COMM, g, bytes);
    hand_result res;
    hand_run(&h, "h200x4", c, &res);
    CU_ASSERT_EQUAL(res.rc, 0);
    return res.end[0][0] - res.xfer[0][0];
}

static void test_fit_pair_curves(void) {
    char out[512];
    tmp_path(out, sizeof out, "pairs.json");
    sim_calib c;
    calibrate_topo(EP_SOURCE_DIR "/traces/h200x4/calib " EP_SOURCE_DIR "/traces/h200x4/comm-pairs",
                   "h200x4", out, &c);
    CU_ASSERT(c.nccl_nvlink_pair[SIM_COLL_ALL_GATHER].efficiency.n >= 8);
    CU_ASSERT(c.nccl_nvlink_pair[SIM_COLL_SEND].efficiency.n == 0); /* sends are pairs anyway */
    CU_ASSERT(c.ep_nvlink.efficiency.n == 0); /* the pairs' nvl_a2a is no transport curve */
    CU_ASSERT_PTR_EQUAL(sim_calib_nccl_curve(&c, EP_OP_ALLTOALL, 2),
                        &c.nccl_nvlink_pair[SIM_COLL_ALLTOALL]);
    CU_ASSERT_PTR_EQUAL(sim_calib_nccl_curve(&c, EP_OP_ALLTOALL, 4),
                        &c.nccl_nvlink[SIM_COLL_ALLTOALL]);
    static const struct {
        const char *file;
        int ranks;
    } files[] = {{"traces/h200x4/calib/comm.json", 4}, {"traces/h200x4/comm-pairs/comm.json", 2}};
    int checked = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", EP_SOURCE_DIR, files[f].file);
        json_error_t je;
        json_t *comm = json_load_file(path, 0, &je);
        CU_ASSERT_PTR_NOT_NULL_FATAL(comm);
        for (size_t i = 1; i < json_array_size(comm); i++) {
            json_t *r = json_array_get(comm, i);
            const char *op = json_string_value(json_object_get(r, "op"));
            double b = json_number_value(json_object_get(r, "bytes"));
            double t = json_number_value(json_object_get(r, "time_us")) * 1e-6;
            if (!op || strcmp(op, "alltoall") != 0 || (b != 1048576 && b != 67108864)) continue;
            CU_ASSERT(near(alltoall_over(&c, files[f].ranks, b), t, 0.01));
            checked++;
        }
        json_decref(comm);
    }
    CU_ASSERT_EQUAL(checked, 4);
    sim_calib_free(&c);
    remove(out);
}

#define TOY_LAYER                                                                                  \
    "--num-layers 1 --hidden-size 256 --num-attention-heads 4 --ffn-hidden-size 512 "              \
    "--seq-length 128 --micro-batch-size 1 --swiglu --mtp-num-layers 0 "
#define TOY_DENSE TOY_LAYER "--global-batch-size 1 --world-size 1 --num-experts 0"
#define TOY_DENSE_TP2                                                                              \
    TOY_LAYER "--global-batch-size 1 --world-size 2 --num-experts 0 "                              \
              "--tensor-model-parallel-size 2 --sequence-parallel"

/* epsim's host time of layer 0 on rank 0 of the toy layer `flags` (scripts/megatron_host.py). */
static double flags_host_s(const sim_calib *c, const char *flags) {
    ep_config cfg;
    ep_config_defaults(&cfg);
    char err[EP_ERRLEN];
    ep_sched s;
    if (ep_config_parse_text(&cfg, flags, err) || ep_config_validate(&cfg, err) ||
        ep_sched_build(&cfg, &s, err))
        return -1;
    sim_cost x;
    sim_cost_init(&x, c, &cfg); /* --moe-grouped-gemm off: SequentialMLP, as measured */
    double t = 0;
    for (int i = 0; i < s.ranks[0].nops; i++)
        if (s.ranks[0].ops[i].layer == 0)
            t += sim_op_host_s(&x, &s.ranks[0].ops[i],
                               s.ranks[0].ops[i].group >= 0 ? s.groups[s.ranks[0].ops[i].group].size
                                                            : 0);
    sim_cost_free(&x);
    ep_sched_free(&s);
    return t;
}

static double layer_host_s(const sim_calib *c, int moe) {
    return flags_host_s(c, moe ? TOY_LAYER "--global-batch-size 1 --world-size 1 --num-experts 8 "
                                           "--moe-router-topk 2 --moe-ffn-hidden-size 256 "
                                           "--moe-layer-freq 1 --moe-token-dispatcher-type alltoall"
                               : TOY_DENSE);
}

/* Two-GPU launches ("ranks": 2) give what a communication op adds, as a multiple of their own
 * launch's time per op: a launch on a host twice as fast as the one-GPU launch still gives the
 * one-GPU per op, and its layer with TP communication half that again per communication op. */
static void test_fit_comm_call(void) {
    char dir[512], path[600], out[512];
    tmp_path(dir, sizeof dir, "commcall");
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/host_megatron.json", dir);
    sim_calib slow, fast;
    sim_calib_default(&slow);
    sim_calib_default(&fast);
    slow.op_overhead_s = 200e-6;                 /* the one-GPU launch */
    fast.op_overhead_s = 100e-6;                 /* the two-GPU launch, twice as fast a host */
    fast.comm_call_s = 0.5 * fast.op_overhead_s; /* what the fit must find, as a multiple */
    double t1 = flags_host_s(&slow, TOY_DENSE), t2 = flags_host_s(&fast, TOY_DENSE);
    double t3 = flags_host_s(&fast, TOY_DENSE_TP2);
    CU_ASSERT_FATAL(t1 > 0 && t2 > 0 && t3 > t2);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    fprintf(
        f,
        "[{\"meta\": {\"gpu\": \"test\"}},\n"
        "{\"layer\": \"dense_sdpa\", \"pass\": \"fwd_bwd\", \"time_us\": %.6f, \"launch\": 1,"
        " \"config\": \"%s\"},\n"
        "{\"layer\": \"dense_sdpa\", \"pass\": \"fwd_bwd\", \"time_us\": %.6f, \"launch\": 2,"
        " \"ranks\": 2, \"config\": \"%s\"},\n"
        "{\"layer\": \"dense_sdpa_tp2\", \"pass\": \"fwd_bwd\", \"time_us\": %.6f, \"launch\": 2,"
        " \"ranks\": 2, \"config\": \"%s\"}]\n",
        t1 * 1e6, TOY_DENSE, t2 * 1e6, TOY_DENSE, t3 * 1e6, TOY_DENSE_TP2);
    fclose(f);
    tmp_path(out, sizeof out, "commcall.json");
    sim_calib c;
    calibrate_into(dir, out, &c);
    CU_ASSERT(near(c.op_overhead_s, 200e-6, 1e-5)); /* the one-GPU launch alone */
    CU_ASSERT(near(c.comm_call_s, 100e-6, 1e-4));
    sim_calib_free(&c);
    remove(out);
    remove(path);
    rmdir(dir);
}

/* step_megatron.json: the step's host time outside the layers, three lines in the parameter
 * tensors (before the norm's sync: finalize and the gradient copies; the parameter copy; the rest
 * of the tail), fitted launch by launch in units of the fitted dense layer: launches on a host
 * twice as fast as host_megatron.json's give twice their own costs; DDP's records (distopt 0,
 * 3x here) give its factor on the per-tensor costs. The optimizer step then costs the host the
 * first before the sync (sim_op_host_s) and lasts the fixed and after-sync parts plus at least the
 * copy loop (sim_op_work); without the distributed optimizer the per-tensor parts x the factor. */
static void test_fit_step_host(void) {
    char dir[512], path[600], step[600], out[512];
    tmp_path(dir, sizeof dir, "stephost");
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/host_megatron.json", dir);
    snprintf(step, sizeof step, "%s/step_megatron.json", dir);
    sim_calib slow;
    sim_calib_default(&slow);
    slow.op_overhead_s = 200e-6;
    double t1 = flags_host_s(&slow, TOY_DENSE);
    CU_ASSERT_FATAL(t1 > 0);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    fprintf(f,
            "[{\"meta\": {\"gpu\": \"test\"}},\n"
            "{\"layer\": \"dense_sdpa\", \"pass\": \"fwd_bwd\", \"time_us\": %.6f, "
            "\"launch\": 1, \"config\": \"%s\"}]\n",
            t1 * 1e6, TOY_DENSE);
    fclose(f);
    /* the fast host's own costs (us, n tensors): finalize 100 + 5 n, gradient copies 10 n,
     * parameter copies 10 n, the whole tail 1000 + 40 n (so 900 + 15 n after the sync) */
    f = fopen(step, "w");
    CU_ASSERT_FATAL(f != NULL);
    fprintf(f, "[{\"meta\": {\"gpu\": \"test\"}}");
    const int tensors[] = {10, 100, 400};
    const char *pieces[] = {"tail", "finalize", "step.copy_grads", "step.copy_params"};
    for (int launch = 1; launch <= 2; launch++) {
        fprintf(f,
                ",\n{\"what\": \"megatron_layer\", \"layer\": \"dense_sdpa\", \"pass\": "
                "\"fwd_bwd\", \"time_us\": %.6f, \"launch\": %d}",
                t1 * 1e6 / 2, launch);
        for (int m = 0; m < 3; m++)
            for (int distopt = 0; distopt <= 1; distopt++)
                for (int p = 0; p < 4; p++) {
                    double n = tensors[m], k = distopt ? 1 : 3; /* DDP: 3x every part */
                    double us[] = {1000 + 40 * n, 100 + 5 * n, 10 * n, 10 * n};
                    fprintf(f,
                            ",\n{\"what\": \"megatron_step\", \"model\": \"m%d\", "
                            "\"distopt\": %d, \"tensors\": %d, \"piece\": \"%s\", "
                            "\"time_us\": %.3f, \"launch\": %d}",
                            m, distopt, tensors[m], pieces[p], k * us[p], launch);
                }
    }
    fprintf(f, "]\n");
    fclose(f);
    tmp_path(out, sizeof out, "stephost.json");
    sim_calib c;
    calibrate_into(dir, out, &c);
    CU_ASSERT(near(c.op_overhead_s, 200e-6, 1e-5));
    CU_ASSERT(near(c.optimizer_tensor_s, 30e-6, 1e-6));
    CU_ASSERT(near(c.optimizer_sync_tensor_s, 30e-6, 1e-6));
    CU_ASSERT(near(c.optimizer_copy_tensor_s, 20e-6, 1e-6));
    CU_ASSERT(near(c.optimizer_step_s, 2000e-6, 1e-6));
    CU_ASSERT(near(c.optimizer_ddp_factor, 3.0, 1e-6));
    ep_op op = {.kind = EP_OP_OPTIMIZER, .batch = 300, .group = -1, .traffic = -1};
    sim_cost x;
    ep_config cfg;
    ep_config_defaults(&cfg);
    cfg.use_distributed_optimizer = 1;
    sim_cost_init(&x, &c, &cfg);
    CU_ASSERT(near(sim_op_host_s(&x, &op, 0), c.op_overhead_s + c.launch_s + 300 * 30e-6, 1e-6));
    sim_work w;
    op.bytes = 1e6; /* Adam's kernels: well under the 6 ms copy loop */
    sim_op_work(&x, &op, 1e15, 3e12, &w);
    CU_ASSERT(near(sim_work_alone(&w), 300 * 20e-6 + 2000e-6 + 300 * 30e-6, 1e-9));
    op.bytes = 1e11; /* longer than the loop: Adam's own time after the host's part */
    sim_op_work(&x, &op, 1e15, 3e12, &w);
    CU_ASSERT(w.t_mem > 0.02 && near(w.t0, 2000e-6 + 300 * 30e-6 + c.kernel_overhead_s, 1e-6));
    sim_cost_free(&x);
    cfg.use_distributed_optimizer = 0; /* DDP */
    sim_cost_init(&x, &c, &cfg);
    CU_ASSERT(
        near(sim_op_host_s(&x, &op, 0), c.op_overhead_s + c.launch_s + 3 * 300 * 30e-6, 1e-6));
    sim_cost_free(&x);
    sim_calib_free(&c);
    remove(out);
    remove(path);
    remove(step);
    rmdir(dir);
}

/* An FP8 cast runs inside its GEMM's Transformer Engine module: one kernel launch on the host,
 * no op bookkeeping of its own; its GEMM pays both. */
static void test_fp8_cast_host(void) {
    const char *flags = "--num-layers 1 --hidden-size 256 --num-attention-heads 4 "
                        "--ffn-hidden-size 512 --seq-length 128 --micro-batch-size 1 "
                        "--global-batch-size 1 --world-size 1 --fp8-format hybrid";
    ep_config cfg;
    ep_config_defaults(&cfg);
    char err[EP_ERRLEN];
    ep_sched s;
    CU_ASSERT_FATAL(ep_config_parse_text(&cfg, flags, err) == 0 &&
                    ep_config_validate(&cfg, err) == 0 && ep_sched_build(&cfg, &s, err) == 0);
    sim_calib c;
    sim_calib_default(&c);
    c.op_overhead_s = 100e-6;
    sim_cost x;
    sim_cost_init(&x, &c, &cfg);
    int casts = 0, gemms = 0;
    char name[160];
    for (int i = 0; i < s.ranks[0].nops; i++) {
        const ep_op *op = &s.ranks[0].ops[i];
        ep_op_name(op, name, sizeof name);
        if (strstr(name, "attn_proj_cast.")) {
            CU_ASSERT_DOUBLE_EQUAL(sim_op_host_s(&x, op, 0), c.launch_s, 0);
            casts++;
        } else if (strstr(name, "attn_proj.") && op->kind == EP_OP_GEMM) {
            CU_ASSERT_DOUBLE_EQUAL(sim_op_host_s(&x, op, 0), c.op_overhead_s + c.gemm_launch_s, 0);
            gemms++;
        }
    }
    CU_ASSERT(casts == 2 && gemms >= 2); /* input cast (fwd), gradient cast (bwd) */
    sim_cost_free(&x);
    ep_sched_free(&s);
}

static void test_fit_host_stack(void) {
    char out[512], args[2048], err[EP_ERRLEN];
    tmp_path(out, sizeof out, "fithost.json");
    const char *dir = EP_SOURCE_DIR "/traces/h100";
    snprintf(args, sizeof args,
             "calibrate %s/calib %s/torch:host_torch.json,host_megatron.json --topo dgx8 --out %s",
             dir, dir, out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    sim_calib c;
    sim_calib_default(&c);
    CU_ASSERT_EQUAL_FATAL(sim_calib_load(&c, out, err), 0);
    char meg[600], tor[600];
    snprintf(meg, sizeof meg, "%s/torch/host_megatron.json", dir);
    snprintf(tor, sizeof tor, "%s/torch/host_torch.json", dir);
    CU_ASSERT(c.op_overhead_s > 50e-6 && c.expert_call_s > 0);
    /* within the 6 digits a calibration file keeps */
    /* the fitted layers: fused core attention (dense_sdpa, moe_sdpa) */
    double d = record_us(meg, "dense_sdpa", NULL) * 1e-6;
    double m = record_us(meg, "moe_sdpa", NULL) * 1e-6;
    CU_ASSERT(fabs(layer_host_s(&c, 0) - d) < 1e-5 * d);
    CU_ASSERT(fabs(layer_host_s(&c, 1) - m) < 1e-5 * m);
    CU_ASSERT(fabs(c.graph_launch_s - record_us(tor, NULL, "graph_replay") * 1e-6) < 1e-12);
    CU_ASSERT(fabs(c.nccl_launch_s - record_us(tor, NULL, "nccl_all_reduce") * 1e-6) < 1e-12);
    sim_calib_free(&c);
    remove(out);
}

/* host.json: an op that runs nothing (a host sync, a collective of one member) costs its two
 * events with nothing between where that is measured (exec_empty_gpu), else what the events add
 * around a tiny kernel (exec_op_gpu - kernel_overhead). */
static void test_fit_host_empty_op(void) {
    static const char *const OLD = "[{\"meta\":{}},"
                                   "{\"what\":\"exec_op_gpu\",\"time_us\":3.8},"
                                   "{\"what\":\"kernel_overhead\",\"time_us\":1.9}]";
    static const char *const NEW = "[{\"meta\":{}},"
                                   "{\"what\":\"exec_op_gpu\",\"time_us\":3.8},"
                                   "{\"what\":\"kernel_overhead\",\"time_us\":1.9},"
                                   "{\"what\":\"exec_empty_gpu\",\"time_us\":1.25}]";
    sim_calib derived, measured;
    calibrate_one_file("host.json", OLD, &derived);
    calibrate_one_file("host.json", NEW, &measured);
    CU_ASSERT_DOUBLE_EQUAL(derived.op_event_s, 1.9e-6, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(measured.op_event_s, 1.25e-6, 1e-12);
    sim_calib_free(&derived);
    sim_calib_free(&measured);
}

/* A power.json of one launch: ops alone, mixes with copies, recovery (test_fit_power,
 * test_fit_reads_xz). */
static const char POWER_JSON[] =
    "[{\"meta\": {\"gpu\": \"test\"}}, {\"ops\": ["
    "{\"op\": \"g\", \"class\": \"gemm\", \"slowdown\": 1.2, \"power_w_second_half\": 700},"
    "{\"op\": \"c\", \"class\": \"memory\", \"slowdown\": 1.0, \"power_w_second_half\": 400},"
    "{\"op\": \"a\", \"class\": \"attention\", \"slowdown\": 1.0, \"power_w_second_half\": "
    "550}],"
    "\"mix\": ["
    "{\"class\": \"gemm\", \"duty_isolated\": 0.3, \"op_slowdown\": 1.0, \"copy_slowdown\": "
    "1.0},"
    "{\"class\": \"gemm_fp8\", \"duty_isolated\": 0.6, \"op_slowdown\": 1.05, "
    "\"copy_slowdown\": 1.0},"
    "{\"class\": \"attention\", \"duty_isolated\": 0.6, \"op_slowdown\": 1.5, "
    "\"copy_slowdown\": 1.0},"
    "{\"class\": \"grouped_gemm\", \"duty_isolated\": 0.8, \"op_slowdown\": 1.15, "
    "\"copy_slowdown\": 1.0}],"
    "\"recovery\": [{\"gap_ms\": 100, \"slowdown_after\": [1.3, 1.15, 1.05]}]}]\n";

/* power.json (scripts/sustained_clock.py launches): one launch written here, worked on paper.
 * Mix duties 0.3, 0.6 and 0.8 of the GEMM's isolated time with slowdowns 1.0, 1.05 and 1.15 (copies
 * 1.0) are 0.3, 0.63 / 1.03 and 0.92 / 1.12 of the measured time; back to back 1.2 at duty 1. The
 * table leaves 1 at duty 0.3, so GEMMs demand (700 - 0.7 x 400) / 0.3 = 1400 W and attention at 550
 * W weighs 150 / 1000. After a 100 ms gap GEMMs at 1.15 and 1.05 sit at the duties of those
 * slowdowns: tau = 0.1 / ln(1 / d), their median. */
static void test_fit_power(void) {
    sim_calib c;
    calibrate_one_file("power.json", POWER_JSON, &c);
    const sim_table *t = &c.power_duty_slowdown;
    const double x[] = {0.3, 0.63 / 1.03, 0.92 / 1.12, 1.0}, y[] = {1.0, 1.05, 1.15, 1.2};
    CU_ASSERT_EQUAL_FATAL(t->n, 4);
    for (int i = 0; i < 4; i++) /* the file keeps 6 digits */
        CU_ASSERT(near(t->x[i], x[i], 1e-5) && near(t->y[i], y[i], 1e-5));
    double d0 = x[1] - 0.05 / ((1.05 - 1.0) / (x[1] - x[0]));
    double demand = (700 - (1 - d0) * 400) / d0;
    CU_ASSERT(near(c.power_attention_weight, 150 / (demand - 400), 1e-5));
    double tau = (0.1 / log(1 / x[2]) + 0.1 / log(1 / x[1])) / 2;
    CU_ASSERT(near(c.power_tau_s, tau, 1e-5));
    sim_calib_free(&c);
}

/* power.json (POWER_JSON) and one more raw file `name` holding `text`, calibrated into *c. */
static void calibrate_with_power(const char *name, const char *text, sim_calib *c) {
    const char *names[2] = {"power.json", name}, *texts[2] = {POWER_JSON, text};
    calibrate_files(names, texts, 2, c);
}

/* An op's weight from its mixes with the reference GEMM R, worked on paper. Duty table: 1.0 up to
 * duty 0.5, linear to 1.2 at 1. R alone cold 1000 us, back to back 1200 us; with the copy R stays
 * at 1000 us in both mixes (rho0 1/2 and 1/10). */
static void test_draw_weight(void) {
    sim_table t = {.n = 2, .x = {0.5, 1.0}, .y = {1.0, 1.2}};
    const double s0[2] = {1.0, 1.0}, rho0[2] = {0.5, 0.1};
    /* R at 1100 us beside one X of 1000 us: half way (u 0.5) -> table 1.1 -> duty 0.75 of the
     * mix's 2100 us, so X weighs (0.75 x 2100 - 1100) / 1000 */
    double x_us[2] = {1000, 1000}, r_us[2] = {1100, 1000};
    int xr[2] = {1, 9}, rr[2] = {1, 1};
    CU_ASSERT(near(sim_draw_weight(&t, 1000, 1.2, s0, rho0, x_us, r_us, xr, rr), 0.475, 1e-9));
    /* R at 1195 us in the first mix (u 0.975, the table's top): the second mix decides, R at 1150
     * us beside 9 x 1000 us (u 0.75 -> duty 0.875 -> 0.859), but not below what the first mix says
     * at u 0.9: duty 0.95 of 2195 us -> 0.89025 */
    r_us[0] = 1195, r_us[1] = 1150;
    CU_ASSERT(near(sim_draw_weight(&t, 1000, 1.2, s0, rho0, x_us, r_us, xr, rr), 0.89025, 1e-9));
    /* R as fast as beside the copy: weight 0; faster still: 0, not negative */
    r_us[0] = 1000, r_us[1] = 1000;
    CU_ASSERT(near(sim_draw_weight(&t, 1000, 1.2, s0, rho0, x_us, r_us, xr, rr), 0, 1e-12));
    r_us[0] = 950;
    CU_ASSERT(near(sim_draw_weight(&t, 1000, 1.2, s0, rho0, x_us, r_us, xr, rr), 0, 1e-12));
}

/* draw.json beside power.json: its anchors and one GEMM give that GEMM's weight (and R's 1) in
 * power_draw_gemm; a run's op of that shape weighs it in the duty, an op of a kind without a draw
 * table its class weight. */
static void test_fit_draw(void) {
    static const char DRAW_JSON[] =
        "[{\"meta\":{}},"
        "{\"kind\":\"gemm\",\"phase\":\"fwd\",\"m\":8192,\"n\":8192,\"k\":8192,\"batch\":1,"
        "\"flops\":1.1e12,\"bytes\":4e8,\"seq\":0,\"dqk\":0,\"dv\":0,\"cold_us\":1000,"
        "\"ref_cold_us\":1000,\"mixes\":[{\"rho\":0.5,\"x_reps\":1,\"ref_reps\":1,\"x_us\":1200,"
        "\"ref_us\":1200},{\"rho\":0.1,\"x_reps\":9,\"ref_reps\":1,\"x_us\":1200,\"ref_us\":1200}],"
        "\"anchor\":\"ref\",\"source\":\"draw\"},"
        "{\"kind\":\"elementwise\",\"phase\":\"fwd\",\"m\":0,\"n\":0,\"k\":0,\"batch\":1,"
        "\"flops\":0,\"bytes\":6e9,\"seq\":0,\"dqk\":0,\"dv\":0,\"cold_us\":1000,"
        "\"ref_cold_us\":1000,\"mixes\":[{\"rho\":0.5,\"x_reps\":1,\"ref_reps\":1,\"x_us\":1000,"
        "\"ref_us\":1000},{\"rho\":0.1,\"x_reps\":9,\"ref_reps\":1,\"x_us\":1000,\"ref_us\":1000}],"
        "\"anchor\":\"copy\",\"source\":\"draw\"},"
        "{\"kind\":\"gemm\",\"phase\":\"fwd\",\"m\":2048,\"n\":4096,\"k\":4096,\"batch\":1,"
        "\"flops\":6.9e10,\"bytes\":6e7,\"seq\":0,\"dqk\":0,\"dv\":0,\"cold_us\":100,"
        "\"ref_cold_us\":1000,\"mixes\":[{\"rho\":0.5,\"x_reps\":10,\"ref_reps\":1,\"x_us\":100,"
        "\"ref_us\":1100},{\"rho\":0.1,\"x_reps\":90,\"ref_reps\":1,\"x_us\":100,\"ref_us\":1050}],"
        "\"anchor\":\"\",\"source\":\"draw\"}]\n";
    sim_calib c;
    calibrate_with_power("draw.json", DRAW_JSON, &c);
    CU_ASSERT_EQUAL(c.power_draw_gemm[0].n, 2);
    CU_ASSERT_EQUAL(c.power_draw_grouped_gemm[0].n + c.power_draw_attention[0].n, 0);
    /* the GEMM's weight on the fitted table, as sim_draw_weight gives it */
    const double s0[2] = {1.0, 1.0}, rho0[2] = {0.5, 0.1}, x_us[2] = {100, 100},
                 r_us[2] = {1100, 1050};
    const int xr[2] = {10, 90}, rr[2] = {1, 1};
    double want = sim_draw_weight(&c.power_duty_slowdown, 1000, 1.2, s0, rho0, x_us, r_us, xr, rr);
    CU_ASSERT(want > 0.05 && want < 0.95);
    sim_cost x;
    sim_cost_init(&x, &c, NULL);
    ep_op g = hand_op(EP_OP_GEMM, EP_STREAM_COMP);
    g.phase = EP_PHASE_FWD;
    g.m = 2048, g.n = 4096, g.k = 4096, g.batch = 1;
    g.flops = 2.0 * g.m * g.n * g.k;
    sim_work w;
    sim_op_work(&x, &g, 989e12, 3.35e12, &w);
    CU_ASSERT(near(w.draw, want, 1e-5));
    CU_ASSERT(near(sim_power_weight(&c, &g, &w), want, 1e-5));
    g.m = 8192, g.n = 8192, g.k = 8192; /* R itself: weight 1 */
    g.flops = 2.0 * g.m * g.n * g.k;
    sim_op_work(&x, &g, 989e12, 3.35e12, &w);
    CU_ASSERT(near(sim_power_weight(&c, &g, &w), 1.0, 1e-5));
    ep_op a = hand_op(EP_OP_ATTENTION, EP_STREAM_COMP); /* no draw table: the class weight */
    a.phase = EP_PHASE_FWD;
    a.flops = 1e12;
    sim_op_work(&x, &a, 989e12, 3.35e12, &w);
    CU_ASSERT(w.draw < 0);
    CU_ASSERT(near(sim_power_weight(&c, &a, &w), c.power_attention_weight, 1e-9));
    sim_cost_free(&x);
    sim_calib_free(&c);
}

/* The windowed cap (power_window_s): the duty averaged over the window, the slowdown tripped up to
 * the table at it at once and let go over power_tau_s; worked on paper with the table 1.0 up to
 * duty 0.5, linear to 1.2 at 1, a window of 20 ms and a release of 100 ms. */
static void test_power_window(void) {
    sim_calib c;
    sim_calib_default(&c);
    c.power_duty_slowdown = (sim_table){.n = 2, .x = {0.5, 1.0}, .y = {1.0, 1.2}};
    c.power_tau_s = 0.1, c.power_window_s = 0.02;
    sim_power p = {0};
    sim_power_set(&p, &c, 0, 1); /* a GEMM stream for 100 ms: duty 1 - e^-5 */
    sim_power_set(&p, &c, 0.1, 0);
    double d = 1 - exp(-5), level = 1.0 + (d - 0.5) / 0.5 * 0.2;
    CU_ASSERT(near(p.duty, d, 1e-12) && near(p.level, level, 1e-12));
    CU_ASSERT(near(sim_power_factor(&c, &p), round(level * 1000) / 1000, 1e-12));
    /* then 100 ms idle: the window empties, the level lets go toward 1 over 100 ms */
    sim_power_set(&p, &c, 0.2, 0);
    CU_ASSERT(near(p.duty, d * exp(-5), 1e-12));
    CU_ASSERT(near(p.level, 1.0 + (level - 1.0) * exp(-1), 1e-12));
    /* without a window: one average over 100 ms both ways */
    c.power_window_s = 0;
    sim_power q = {0};
    sim_power_set(&q, &c, 0, 1);
    sim_power_set(&q, &c, 0.1, 0);
    CU_ASSERT(near(sim_power_factor(&c, &q),
                   round((1.0 + (0.5 - exp(-1)) / 0.5 * 0.2) * 1000) / 1000, 1e-12));
}

/* power_rise.json beside power.json: the window is the time constant whose average, through the
 * fitted table, gives the rise's slowdowns; here points made from a 30 ms one. */
static void test_fit_power_window(void) {
    /* the table test_fit_power works out from POWER_JSON */
    sim_table t = {.n = 4, .x = {0.3, 0.63 / 1.03, 0.92 / 1.12, 1.0}, .y = {1.0, 1.05, 1.15, 1.2}};
    char rise[8192], tms[2048] = "", sl[4096] = "";
    size_t a = 0, b = 0;
    for (int ms = 0; ms <= 300; ms += 5) {
        double y = ms ? sim_power_table(&t, 1 - exp(-ms / 30.0)) : 1.3; /* first: waking */
        a += (size_t)snprintf(tms + a, sizeof tms - a, "%s%d", ms ? "," : "", ms);
        b += (size_t)snprintf(sl + b, sizeof sl - b, "%s%.6f", ms ? "," : "", y);
    }
    snprintf(rise, sizeof rise, "[{\"meta\":{}},{\"rise\":[{\"t_ms\":[%s],\"slowdown\":[%s]}]}]\n",
             tms, sl);
    sim_calib c;
    calibrate_with_power("power_rise.json", rise, &c);
    CU_ASSERT(near(c.power_window_s, 0.030, 6e-4));
    sim_calib_free(&c);
    sim_calib none;
    calibrate_one_file("power.json", POWER_JSON, &none); /* no rise: no window */
    CU_ASSERT_EQUAL(none.power_window_s, 0);
    sim_calib_free(&none);
}

/* A raw file committed compressed (DIR/power.json.xz) is read as DIR/power.json. */
static void test_fit_reads_xz(void) {
    char dir[512], path[600], out[600], cmd[800];
    sim_calib plain, packed;
    calibrate_one_file("power.json", POWER_JSON, &plain);
    tmp_path(dir, sizeof dir, "xzfile");
    write_raw_file(dir, "power.json", POWER_JSON, path, sizeof path);
    snprintf(cmd, sizeof cmd, "xz -f %s", path);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(out, sizeof out, "%s.calib.json", dir);
    calibrate_into(dir, out, &packed);
    CU_ASSERT_EQUAL(packed.power_duty_slowdown.n, plain.power_duty_slowdown.n);
    CU_ASSERT(plain.power_duty_slowdown.n > 0);
    for (int i = 0; i < plain.power_duty_slowdown.n; i++)
        CU_ASSERT(packed.power_duty_slowdown.y[i] == plain.power_duty_slowdown.y[i]);
    CU_ASSERT(packed.power_tau_s == plain.power_tau_s && packed.power_tau_s > 0);
    remove(out);
    snprintf(cmd, sizeof cmd, "%s.xz", path);
    remove(cmd);
    rmdir(dir);
    sim_calib_free(&plain);
    sim_calib_free(&packed);
}

/* interference.json of a later DIR adds only the aggressors the first file lacks: the 4 x H100
 * file keeps its own all-to-all figure and takes the waiting all-to-all from 2 x H200. */
static void write_interference(const char *dir, const char *records) {
    char path[600], text[1000];
    snprintf(text, sizeof text, "[{\"meta\": {\"gpu\": \"test\"}}, %s]\n", records);
    write_raw_file(dir, "interference.json", text, path, sizeof path);
}

static void test_interference_completed(void) {
    char a[512], b[512], out[512];
    tmp_path(a, sizeof a, "interf_a");
    tmp_path(b, sizeof b, "interf_b");
    tmp_path(out, sizeof out, "interf.json");
    write_interference(
        a, "{\"victim\": \"gemm\", \"aggressor\": \"nccl_alltoall\", \"slowdown\": 1.5}");
    write_interference(
        b, "{\"victim\": \"gemm\", \"aggressor\": \"nccl_alltoall\", \"slowdown\": 1.2},"
           "{\"victim\": \"gemm\", \"aggressor\": \"nccl_waiting\", \"slowdown\": 1.1}");
    const double wait_alone[] = {1.5, 1.1}; /* without b: the running transfer's slowdown */
    for (int with_b = 0; with_b < 2; with_b++) {
        char dirs[1100];
        snprintf(dirs, sizeof dirs, "%s %s", a, with_b ? b : "");
        sim_calib c;
        calibrate_into(dirs, out, &c);
        CU_ASSERT(near(c.comm_flops_slowdown, 1.5, 1e-9));
        CU_ASSERT(near(c.comm_wait_slowdown, wait_alone[with_b], 1e-9));
        CU_ASSERT(near(c.ce_flops_slowdown, 1.5, 1e-9)); /* no ce_peer record: NCCL's */
        sim_calib_free(&c);
    }
    CU_ASSERT(file_has(out, "\"completed_from\":"));
    CU_ASSERT(file_has(out, "interf_b/interference.json (1)"));
    /* a GEMM beside the store kernel, by its SMs: the SM-driven transfers' compute slowdown */
    write_interference(
        a, "{\"victim\": \"gemm\", \"aggressor\": \"nccl_alltoall\", \"slowdown\": 1.5},"
           "{\"victim\": \"gemm\", \"aggressor\": \"store\", \"aggressor_sms\": 16, "
           "\"slowdown\": 1.3},"
           "{\"victim\": \"gemm\", \"aggressor\": \"store\", \"aggressor_sms\": 8, "
           "\"slowdown\": 1.1},"
           "{\"victim\": \"gemm\", \"aggressor\": \"ce_peer\", \"slowdown\": 1.08}");
    sim_calib c;
    calibrate_into(a, out, &c);
    const sim_table *k = &c.kernel_flops_slowdown;
    CU_ASSERT_EQUAL_FATAL(k->n, 2);
    CU_ASSERT(k->x[0] == 8 && near(k->y[0], 1.1, 1e-9) && k->x[1] == 16 &&
              near(k->y[1], 1.3, 1e-9));
    CU_ASSERT(near(c.comm_flops_slowdown, 1.5, 1e-9)); /* NCCL's own */
    CU_ASSERT(near(c.ce_flops_slowdown, 1.08, 1e-9));  /* peer copies on the copy engines */
    sim_calib_free(&c);
    char path[600];
    snprintf(path, sizeof path, "%s/interference.json", a), remove(path), rmdir(a);
    snprintf(path, sizeof path, "%s/interference.json", b), remove(path), rmdir(b);
    remove(out);
}

/* interference.json's victim grid (source "shapes", `--parts interference-shapes`): each victim's
 * slowdown joins the sharing table of its kind, phase and aggressor (the store kernel on the SMs
 * closest to 16 only), every DIR's launch joins and equal shapes keep their median, and the
 * one-GEMM factors stay those of the records without a source. */
static void test_interference_shapes(void) {
    char a[512], b[512], out[512];
    tmp_path(a, sizeof a, "shapes_a");
    tmp_path(b, sizeof b, "shapes_b");
    tmp_path(out, sizeof out, "shapes.json");
#define VICTIM(kind, phase, agg, sms, s)                                                           \
    "{\"victim\": \"" kind "\", \"phase\": \"" phase "\", \"m\": 4096, \"n\": 2048, \"k\": 1024, " \
    "\"batch\": 8, \"flops\": 1e9, \"bytes\": 0, \"aggressor\": \"" agg                            \
    "\", \"aggressor_sms\": " #sms ", \"slowdown\": " #s ", \"source\": \"shapes\"},"
    /* clang-format off */
    static const char first[] =
        VICTIM("grouped_gemm", "fwd", "nccl_alltoall", -1, 1.9)
        VICTIM("grouped_gemm", "fwd", "store", 16, 1.7)
        VICTIM("grouped_gemm", "fwd", "store", 8, 1.2)
        VICTIM("gemm", "bwd_dw", "nccl_alltoall", -1, 1.5)
        "{\"victim\": \"gemm\", \"aggressor\": \"nccl_alltoall\", \"slowdown\": 1.3}";
    static const char second[] =
        VICTIM("grouped_gemm", "fwd", "nccl_alltoall", -1, 2.1)
        VICTIM("grouped_gemm", "fwd", "nccl_alltoall", -1, 1.6)
        "{\"victim\": \"gemm\", \"aggressor\": \"nccl_alltoall\", \"slowdown\": 1.1}";
    /* clang-format on */
#undef VICTIM
    write_interference(a, first);
    write_interference(b, second);
    char dirs[1100];
    snprintf(dirs, sizeof dirs, "%s %s", a, b);
    sim_calib c;
    calibrate_into(dirs, out, &c); /* and read back from the file written */
    CU_ASSERT(near(c.comm_flops_slowdown, 1.3, 1e-9));
    const sim_shape_table *nccl = &c.share_nccl_grouped_gemm[0],
                          *kern = &c.share_kernel_grouped_gemm[0];
    CU_ASSERT_EQUAL_FATAL(nccl->n, 1);
    CU_ASSERT(near(nccl->y[0], 1.9, 1e-9)); /* the median of 1.9, 2.1, 1.6 */
    CU_ASSERT(nccl->x[0][0] == 4096 && nccl->x[0][3] == 8);
    CU_ASSERT_EQUAL_FATAL(kern->n, 1);
    CU_ASSERT(near(kern->y[0], 1.7, 1e-9)); /* 16 SMs, not 8 */
    const sim_shape_table *wg = &c.share_nccl_gemm[EP_PHASE_BWD_DW - 1];
    CU_ASSERT_EQUAL_FATAL(wg->n, 1);
    CU_ASSERT(wg->x[0][0] == 1024 && near(wg->y[0], 1.5, 1e-9)); /* a wgrad's rows: its k */
    CU_ASSERT(c.share_nccl_attention[0].n == 0 && c.share_kernel_gemm[0].n == 0);
    CU_ASSERT(file_has(out, "\"share_nccl_grouped_gemm\":"));
    sim_calib_free(&c);
    char path[600];
    snprintf(path, sizeof path, "%s/interference.json", a), remove(path), rmdir(a);
    snprintf(path, sizeof path, "%s/interference.json", b), remove(path), rmdir(b);
    remove(out);
}

/* permute.json: the unfused functions' time per byte by the bytes epsim gives the op; an alltoall
 * run without --moe-permute-fusion times its permutation ops by it, a fused one by the roofline. */
static void test_fit_unfused_permute(void) {
    /* permute forward: 128 tokens x top-2 at hidden 64 in 10 us and at hidden 128 in 12 us */
    sim_calib c;
    calibrate_one_file(
        "permute.json",
        "[{\"meta\": {\"gpu\": \"test\"}},\n"
        "{\"what\": \"megatron_unfused\", \"op\": \"permute\", \"pass\": \"fwd\", \"tokens\": 128,"
        " \"topk\": 2, \"hidden\": 64, \"time_us\": 10},\n"
        "{\"what\": \"megatron_unfused\", \"op\": \"permute\", \"pass\": \"fwd\", \"tokens\": 128,"
        " \"topk\": 2, \"hidden\": 128, \"time_us\": 12}]\n",
        &c);
    const sim_table *t = &c.unfused_permute[0];
    const double b0 = (128 + 256) * 64 * 2.0, b1 = (128 + 256) * 128 * 2.0;
    CU_ASSERT_EQUAL_FATAL(t->n, 2);
    CU_ASSERT(near(t->x[0], b0, 1e-6) && near(t->y[0], 10e-6 / b0, 1e-5));
    CU_ASSERT(near(t->x[1], b1, 1e-6) && near(t->y[1], 12e-6 / b1, 1e-5));
    CU_ASSERT_EQUAL(c.unfused_unpermute[0].n, 0);
    ep_op op;
    memset(&op, 0, sizeof op);
    op.kind = EP_OP_PERMUTE, op.phase = EP_PHASE_FWD, op.label = "permute", op.bytes = b1;
    double tw[2];
    for (int fusion = 0; fusion < 2; fusion++) {
        ep_config cfg;
        ep_config_defaults(&cfg);
        cfg.moe_token_dispatcher_type = EP_DISPATCHER_ALLTOALL;
        cfg.moe_permute_fusion = fusion;
        sim_cost x;
        sim_cost_init(&x, &c, &cfg);
        sim_work w;
        sim_op_work(&x, &op, 989e12, 3.35e12, &w);
        tw[fusion] = sim_work_alone(&w);
        sim_cost_free(&x);
    }
    CU_ASSERT(near(tw[0], 12e-6, 1e-5)); /* the measured function */
    CU_ASSERT(tw[1] < 5e-6);             /* the roofline of a fused kernel: 98 KB */
    sim_calib_free(&c);
}

/* With CP, the attention op is read at one ring step's kernel: its flops / CP at seq / CP (two
 * series: seq 1024 at 30% of peak; seq 2048 at 55% and 60%). */
static void test_attention_under_cp(void) {
    sim_calib c;
    sim_calib_default(&c);
    const double q1[SIM_SHAPE_DIMS] = {1e9, 1024, 128, 128}, q2[SIM_SHAPE_DIMS] = {1e9, 2048, 128, 128},
                 q3[SIM_SHAPE_DIMS] = {4e9, 2048, 128, 128};
    CU_ASSERT_FATAL(sim_shape_add(&c.attention_shapes[0], q1, 0.3) == 0 &&
                    sim_shape_add(&c.attention_shapes[0], q2, 0.55) == 0 &&
                    sim_shape_add(&c.attention_shapes[0], q3, 0.6) == 0 &&
                    sim_shape_sort(&c.attention_shapes[0]) == 0);
    ep_op op;
    memset(&op, 0, sizeof op);
    op.kind = EP_OP_ATTENTION, op.phase = EP_PHASE_FWD, op.label = "core_attn";
    op.flops = 2e9; /* a rank's share: seq 2048 over CP 2 */
    double t[2];
    for (int cp = 1; cp <= 2; cp++) {
        ep_config cfg;
        ep_config_defaults(&cfg);
        cfg.seq_length = 2048, cfg.kv_channels = 128, cfg.context_parallel_size = cp;
        sim_cost x;
        sim_cost_init(&x, &c, &cfg);
        sim_work w;
        sim_op_work(&x, &op, 989e12, 3.35e12, &w);
        t[cp - 1] = w.t_flop;
        sim_cost_free(&x);
    }
    CU_ASSERT(near(t[1], 2e9 / (989e12 * 0.3), 1e-6)); /* CP 2: the seq 1024 kernels */
    CU_ASSERT(t[0] < t[1]);                            /* CP 1: a longer kernel, faster */
    sim_calib_free(&c);
}

/* expert_extras.json: Megatron's MoE activation and fc2 bias loop, time per byte by the bytes
 * epsim gives the op (the backward twice the forward's); the activation the model runs picks the
 * table, the bias op has its own. */
static void test_fit_expert_extras(void) {
    /* 1024 rows x F 64: SwiGLU fwd 10 us, bwd 30; clamped quick-GEGLU fwd 40, bwd 90; the bias
     * loop at H 64: fwd 20 us */
    sim_calib c;
    calibrate_one_file(
        "expert_extras.json",
        "[{\"meta\": {\"gpu\": \"test\"}},\n"
        "{\"what\": \"expert_extra\", \"part\": \"swiglu\", \"pass\": \"fwd\", \"rows\": 1024,"
        " \"width\": 64, \"experts\": 0, \"time_us\": 10},\n"
        "{\"what\": \"expert_extra\", \"part\": \"swiglu\", \"pass\": \"bwd\", \"rows\": 1024,"
        " \"width\": 64, \"experts\": 0, \"time_us\": 30},\n"
        "{\"what\": \"expert_extra\", \"part\": \"geglu_clamp\", \"pass\": \"fwd\", \"rows\": 1024,"
        " \"width\": 64, \"experts\": 0, \"time_us\": 40},\n"
        "{\"what\": \"expert_extra\", \"part\": \"geglu_clamp\", \"pass\": \"bwd\", \"rows\": 1024,"
        " \"width\": 64, \"experts\": 0, \"time_us\": 90},\n"
        "{\"what\": \"expert_extra\", \"part\": \"apply_bias\", \"pass\": \"fwd\", \"rows\": 1024,"
        " \"width\": 64, \"experts\": 4, \"time_us\": 20}]\n",
        &c);
    const double act = 1024 * 64 * 3 * 2.0, bias = 1024 * 64 * 2 * 2.0;
    CU_ASSERT_EQUAL_FATAL(c.act_swiglu[0].n, 1);
    CU_ASSERT_EQUAL_FATAL(c.act_swiglu[1].n, 1);
    CU_ASSERT(near(c.act_swiglu[0].x[0], act, 1e-9) &&
              near(c.act_swiglu[0].y[0], 10e-6 / act, 1e-6));
    CU_ASSERT(near(c.act_swiglu[1].x[0], 2 * act, 1e-9));
    CU_ASSERT_EQUAL(c.act_geglu[0].n, 0);
    CU_ASSERT_EQUAL_FATAL(c.expert_bias[0].n, 1);
    CU_ASSERT(near(c.expert_bias[0].x[0], bias, 1e-9));
    /* (label, bytes, phase, quick_geglu, clamp) -> the measured time */
    const struct {
        const char *label;
        double bytes;
        ep_phase phase;
        int geglu;
        double clamp, us;
    } cases[] = {
        {"expert_act", act, EP_PHASE_FWD, 0, 0, 10},
        {"expert_act", 2 * act, EP_PHASE_BWD, 0, 0, 30},
        {"expert_act", act, EP_PHASE_RECOMPUTE, 0, 0, 10},
        {"expert_act", act, EP_PHASE_FWD, 1, 7, 40},
        {"expert_act", 2 * act, EP_PHASE_BWD, 1, 7, 90},
        {"expert_bias", bias, EP_PHASE_FWD, 0, 0, 20},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ep_config cfg;
        ep_config_defaults(&cfg);
        cfg.quick_geglu = cases[i].geglu;
        cfg.activation_func_clamp_value = cases[i].clamp;
        ep_op op;
        memset(&op, 0, sizeof op);
        op.kind = EP_OP_ELEMENTWISE, op.phase = cases[i].phase, op.label = cases[i].label;
        op.bytes = cases[i].bytes;
        sim_cost x;
        sim_cost_init(&x, &c, &cfg);
        sim_work w;
        sim_op_work(&x, &op, 989e12, 3.35e12, &w);
        CU_ASSERT(near(sim_work_alone(&w), cases[i].us * 1e-6, 1e-4));
        /* quick-GEGLU without a measured table (no unclamped record): the roofline, well below */
        if (cases[i].geglu && cases[i].phase == EP_PHASE_FWD) {
            cfg.activation_func_clamp_value = 0;
            sim_cost_free(&x);
            sim_cost_init(&x, &c, &cfg);
            sim_op_work(&x, &op, 989e12, 3.35e12, &w);
            CU_ASSERT(sim_work_alone(&w) < 5e-6);
        }
        sim_cost_free(&x);
    }
    sim_calib_free(&c);
}

/* mamba.json: Megatron's Mamba-2 mixer timed whole; the PyTorch conv1d stand-in inside is taken
 * out (the backward: its recomputed forward and its backward) and the conv1d's memory time put
 * back. Only a Mamba-2 scan op reads the table. */
static void test_fit_mamba_scan(void) {
    /* 1024 tokens x 2 heads of 64 x state 16: forward 100 us (40 of it the stand-in), backward
     * 300 us (80 of it the stand-in's backward): 60 and 180 us less the conv1d's ~1 us */
    sim_calib c;
    calibrate_one_file("mamba.json",
                       "[{\"meta\": {\"gpu\": \"test\"}},\n"
                       "{\"what\": \"mamba_scan\", \"pass\": \"fwd\", \"seq\": 1024, \"heads\": 2,"
                       " \"head_dim\": 64, \"state\": 16, \"groups\": 1, \"time_us\": 100,"
                       " \"conv_fwd_us\": 40},\n"
                       "{\"what\": \"mamba_scan\", \"pass\": \"bwd\", \"seq\": 1024, \"heads\": 2,"
                       " \"head_dim\": 64, \"state\": 16, \"groups\": 1, \"time_us\": 300,"
                       " \"conv_bwd_us\": 80}]\n",
                       &c);
    const sim_shape_table *f = &c.mamba_scan_shapes[EP_PHASE_FWD - 1],
                          *b = &c.mamba_scan_shapes[EP_PHASE_BWD - 1];
    CU_ASSERT_EQUAL_FATAL(f->n, 1);
    CU_ASSERT_EQUAL_FATAL(b->n, 1);
    CU_ASSERT(f->x[0][0] == 1024 && f->x[0][1] == 128 && f->x[0][2] == 16 && f->x[0][3] == 1);
    /* efficiency of 2x the flops in ~3x the time (the conv1d's microsecond moves it < 2%) */
    CU_ASSERT(near(b->y[0] / f->y[0], 2.0 * 60 / 180, 0.02));
    ep_config cfg;
    ep_config_defaults(&cfg);
    sim_cost x;
    sim_cost_init(&x, &c, &cfg);
    ep_op op;
    memset(&op, 0, sizeof op);
    op.kind = EP_OP_SCAN, op.phase = EP_PHASE_FWD, op.label = "mamba_scan";
    op.m = 1024, op.n = 128, op.k = 16, op.batch = 1;
    op.flops = ep_cost_scan_flops(1024, 128, 16), op.bytes = 1024 * (3 * 128 + 32) * 2.0;
    sim_work w;
    double peak = 989e12;
    sim_op_work(&x, &op, peak, 3.35e12, &w);
    CU_ASSERT(near(w.t_flop, op.flops / (peak * f->y[0]), 1e-9));
    op.label = "gdn_scan"; /* no table: the scan efficiency */
    sim_op_work(&x, &op, peak, 3.35e12, &w);
    CU_ASSERT(near(w.t_flop, op.flops / (peak * c.scan_efficiency), 1e-9));
    sim_cost_free(&x);
    sim_calib_free(&c);
}

void ep_suite_calibrate(void) {
    CU_pSuite s = CU_add_suite("epsim calibrate", NULL, NULL);
    CU_add_test(s, "shape tables: exact points, series, below/above, nearest", test_shape_table);
    CU_add_test(s, "fit of the 2 x H200 raw files gives the records back",
                test_fit_reproduces_records);
    CU_add_test(s, "published values named with their source", test_published_provenance);
    CU_add_test(s, "fit is deterministic", test_fit_deterministic);
    CU_add_test(s, "comm.json over two ranks beside all: curves for groups of two",
                test_fit_pair_curves);
    CU_add_test(s, "fit errors: one line, exit 2, no output", test_fit_errors);
    CU_add_test(s, "--model-shapes KINDS:FILE: only those kinds' model records, repeatable",
                test_fit_model_shapes_kinds);
    CU_add_test(s, "kernels.json: replaces kinds, compare-only out, FP8 apart, --kind-from K/DTYPE",
                test_fit_kernels);
    CU_add_test(s, "a software stack's host costs give its layers' host times back",
                test_fit_host_stack);
    CU_add_test(s, "topologies name their calibration; --calib none", test_topology_calibration);
    CU_add_test(s, "an FP8 cast costs the host one launch", test_fp8_cast_host);
    CU_add_test(s, "power.json: duty table, attention weight and time constant", test_fit_power);
    CU_add_test(s, "draw.json: an op's weight from its mixes with the reference GEMM",
                test_draw_weight);
    CU_add_test(s, "draw.json: weights by shape, read by the power model", test_fit_draw);
    CU_add_test(s, "the windowed cap: trips at once, lets go over tau", test_power_window);
    CU_add_test(s, "power_rise.json: the cap's window", test_fit_power_window);
    CU_add_test(s, "host.json: an op that runs nothing, measured or derived",
                test_fit_host_empty_op);
    CU_add_test(s, "a raw file committed as FILE.xz is read", test_fit_reads_xz);
    CU_add_test(s, "host_megatron.json: a communication op's extra from two-GPU launches",
                test_fit_comm_call);
    CU_add_test(s, "step_megatron.json: the step's host time by parameter tensors",
                test_fit_step_host);
    CU_add_test(s, "permute.json: unfused permutation per byte, used only without fusion",
                test_fit_unfused_permute);
    CU_add_test(s, "with CP the attention is read at one ring step's kernel",
                test_attention_under_cp);
    CU_add_test(s, "expert_extras.json: Megatron's MoE activation and fc2 bias loop per byte",
                test_fit_expert_extras);
    CU_add_test(s, "mamba.json: the Mamba-2 mixer timed whole, its conv1d stand-in replaced",
                test_fit_mamba_scan);
    CU_add_test(s, "interference.json: a later file adds only the aggressors the first lacks",
                test_interference_completed);
    CU_add_test(s, "interference.json: the victim grid makes the sharing tables",
                test_interference_shapes);
    CU_add_test(s, "a GEMM below its measured rows follows the size curve", test_gemm_below_series);
    CU_add_test(s, "shape grid: box blend, model shapes apart, holes, per expert, outside",
                test_shape_grid);
}
