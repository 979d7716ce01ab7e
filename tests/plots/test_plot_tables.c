/* CSV, validation scatter, exposed-communication bars and sweep bars: column checks and their
 * messages, error-band math, stacked sums, ranking and labels. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <string.h>

#include "plot_csv.h"
#include "plot_exposed.h"
#include "plot_scatter.h"
#include "plot_search.h"
#include "plot_sweep.h"
#include "plot_test_util.h"

static void test_csv_quoting(void) {
    char path[256], err[EP_ERRLEN];
    pt_write(path, sizeof path, "q.csv",
             "\r\nname,x,note\r\n\"a,b\",1,\"say \"\"hi\"\"\"\r\n\r\nc,2,\"two\nlines\"\nd,,\n");
    plot_csv t;
    CU_ASSERT_EQUAL_FATAL(plot_csv_load(path, &t, err), 0);
    CU_ASSERT_EQUAL(t.ncols, 3);
    CU_ASSERT_EQUAL_FATAL(t.nrows, 3);
    CU_ASSERT_STRING_EQUAL(plot_csv_cell(&t, 0, 0), "a,b");
    CU_ASSERT_STRING_EQUAL(plot_csv_cell(&t, 0, 2), "say \"hi\"");
    CU_ASSERT_STRING_EQUAL(plot_csv_cell(&t, 1, 2), "two\nlines");
    CU_ASSERT_STRING_EQUAL(plot_csv_cell(&t, 2, 1), "");
    CU_ASSERT_EQUAL(t.line[0], 3);
    CU_ASSERT_EQUAL(t.line[1], 5);
    CU_ASSERT_EQUAL(t.line[2], 7); /* the quoted line end counted */
    CU_ASSERT_EQUAL(plot_csv_col(&t, "note"), 2);
    CU_ASSERT_EQUAL(plot_csv_col(&t, "nope"), -1);
    double v;
    CU_ASSERT_EQUAL(plot_csv_number(&t, 1, 1, &v, err), 0);
    CU_ASSERT_DOUBLE_EQUAL(v, 2.0, 0);
    CU_ASSERT_EQUAL(plot_csv_number(&t, 2, 1, &v, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, ":7: column 'x': '' is not a finite number"));
    plot_csv_free(&t);
    unlink(path);
}

static void csv_bad(const char *text, const char *needle) {
    char path[256], err[EP_ERRLEN] = "";
    pt_write(path, sizeof path, "bad.csv", text);
    plot_csv t;
    CU_ASSERT_EQUAL(plot_csv_load(path, &t, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
    unlink(path);
}

static void test_csv_malformed(void) {
    csv_bad("a,b,c\n1,2,3\n4,5\n", ":3: 2 fields, the header has 3");
    csv_bad("a,b\n\"1,2\n", ":2: malformed quoted field");
    csv_bad("a,b\n\"1\"x,2\n", ":2: malformed quoted field");
    csv_bad("a,b\n1\"x,2\n", ":2: malformed quoted field");
    csv_bad("\n\n", "empty file");
    csv_bad("a,b,a\n", "column 'a' appears twice");
    char err[EP_ERRLEN];
    plot_csv t;
    CU_ASSERT_EQUAL(plot_csv_load("/nonexistent/runs.csv", &t, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot read /nonexistent/runs.csv"));
}

static void test_error_bands(void) {
    CU_ASSERT_DOUBLE_EQUAL(plot_rel_err(2.0, 2.2), 0.1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(plot_rel_err(2.0, 1.5), -0.25, 1e-12);
    CU_ASSERT_EQUAL(plot_err_band(plot_rel_err(1.0, 1.05)), 5); /* the limit is inside */
    CU_ASSERT_EQUAL(plot_err_band(plot_rel_err(1.0, 0.95)), 5);
    CU_ASSERT_EQUAL(plot_err_band(plot_rel_err(1.0, 1.0501)), 10);
    CU_ASSERT_EQUAL(plot_err_band(plot_rel_err(1.0, 1.10)), 10);
    CU_ASSERT_EQUAL(plot_err_band(plot_rel_err(1.0, 0.90)), 10);
    CU_ASSERT_EQUAL(plot_err_band(plot_rel_err(1.0, 0.8999)), 0);
    CU_ASSERT_EQUAL(plot_err_band(plot_rel_err(3.0, 4.0)), 0);
}

static void test_scatter_load(void) {
    char path[256], err[EP_ERRLEN];
    pt_write(path, sizeof path, "runs.csv",
             "gpu,name,predicted_s,measured_s\nh200,ep2,1.04,1.00\nh200,ep2 pp2,2.3,2.0\n"
             "h200,\"deepep, fused\",0.5,0.54\n");
    plot_scatter sc;
    CU_ASSERT_EQUAL_FATAL(plot_scatter_load(path, &sc, err), 0);
    CU_ASSERT_EQUAL(sc.nruns, 3);
    CU_ASSERT_EQUAL(sc.within5, 1);  /* +4 % */
    CU_ASSERT_EQUAL(sc.within10, 2); /* and -7.4 %; +15 % outside */
    CU_ASSERT_EQUAL(sc.runs[1].band, 0);
    CU_ASSERT_DOUBLE_EQUAL(sc.lo_s, 0.5 * 0.85, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(sc.hi_s, 2.3 * 1.15, 1e-12);
    char *data = NULL;
    size_t len;
    FILE *f = open_memstream(&data, &len);
    plot_scatter_write_data(&sc, f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(data, "1\t1.04\t4.000\t5\tep2\n2\t2.3\t15.000\t0\tep2 pp2\n"
                                 "0.54\t0.5\t-7.407\t10\tdeepep, fused\n");
    free(data);
    plot_scatter_free(&sc);

    const struct {
        const char *text, *needle;
    } bad[] = {
        {"name,measured_s\na,1\n", "no column 'predicted_s' (needs name,measured_s,predicted_s)"},
        {"name,measured_s,predicted_s\n", "no runs, only a header"},
        {"name,measured_s,predicted_s\na,0,1\n", ":2: measured_s must be > 0"},
        {"name,measured_s,predicted_s\na,1,-1\n",
         ":2: measured_s must be > 0 and predicted_s >= 0"},
        {"name,measured_s,predicted_s\na,1,1\nb,1,fast\n",
         ":3: column 'predicted_s': 'fast' is not a finite number"},
        {"name,measured_s,predicted_s\na,nan,1\n", "'nan' is not a finite number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_write(path, sizeof path, "runs.csv", bad[i].text);
        err[0] = 0;
        CU_ASSERT_EQUAL(plot_scatter_load(path, &sc, err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].needle));
    }
    unlink(path);
}

static void test_exposed_bars(void) {
    char path[256], err[EP_ERRLEN];
    pt_write(path, sizeof path, "ep2.summary.json",
             "{\"iteration_time_s\":1.5,\"exposed_comm_s\":{\"dispatch\":0.01,\"combine\":0.02,"
             "\"dp\":0.003,\"pp\":0,\"other\":0.002,\"total\":0.035}}");
    plot_exposed_bar b[2];
    CU_ASSERT_EQUAL_FATAL(plot_exposed_load(path, NULL, &b[0], err), 0);
    char want[128];
    snprintf(want, sizeof want, "epplot_test_%ld_ep2", (long)getpid());
    CU_ASSERT_STRING_EQUAL(b[0].label, want);           /* file name without .summary.json */
    CU_ASSERT_DOUBLE_EQUAL(b[0].total_s, 0.035, 1e-12); /* other included, total ignored */
    CU_ASSERT_EQUAL_FATAL(plot_exposed_load(path, "EP 2", &b[1], err), 0);
    CU_ASSERT_STRING_EQUAL(b[1].label, "EP 2");
    char *data = NULL, *vars = NULL;
    size_t len;
    FILE *f = open_memstream(&data, &len);
    plot_exposed_write_data(&b[1], 1, f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(data,
                           "EP 2\t10.000000\t20.000000\t3.000000\t0.000000\t2.000000\t35.000000\n");
    f = open_memstream(&vars, &len);
    plot_exposed_write_vars(b, 2, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(vars, "nbars = 2\nymax = 40.250000\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(vars, "kind_title[4] = 'pp'\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(vars, "kind_title[5] = 'other'\n"));
    free(data);
    free(vars);

    const struct {
        const char *text, *needle;
    } bad[] = {
        {"{\"exposed_comm_s\":{\"dispatch\":1,\"combine\":1,\"dp\":1}}",
         "exposed_comm_s.pp is missing"},
        {"{\"exposed_comm_s\":{\"dispatch\":1,\"combine\":-1,\"dp\":1,\"pp\":0}}",
         "exposed_comm_s.combine is not a non-negative number"},
        {"{\"exposed_comm_s\":{\"dispatch\":\"1\",\"combine\":1,\"dp\":1,\"pp\":0}}",
         "exposed_comm_s.dispatch is not a non-negative number"},
        {"{\"exposed_comm_s\":{\"dispatch\":1,\"combine\":1,\"dp\":1,\"pp\":0,\"other\":null}}",
         "exposed_comm_s.other is not a non-negative number"},
        {"{\"iteration_time_s\":1}", "no \"exposed_comm_s\" object"},
        {"{\"exposed_comm_s\":{", "malformed JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_write(path, sizeof path, "x.summary.json", bad[i].text);
        err[0] = 0;
        CU_ASSERT_EQUAL(plot_exposed_load(path, NULL, &b[0], err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].needle));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
    }
    unlink(path);
    pt_path(path, sizeof path, "ep2.summary.json");
    unlink(path);
}

/* The layout `epsim sweep` writes: rank,index,<grid flags>,metrics...,status. */
static const char sweep_csv[] =
    "rank,index,--expert-model-parallel-size,--moe-token-dispatcher-type,tokens_per_s_per_gpu,"
    "iteration_time_s,status\n"
    "1,3,4,flex,5000.5,1.0,ok\n"
    "2,0,2,alltoall,4000,1.2,ok\n"
    ",1,8,alltoall,,,world size 8 > 2 GPUs\n"
    "3,2,2,flex,4000,1.2,ok\n";

static void test_sweep_rank_and_labels(void) {
    char path[256], err[EP_ERRLEN];
    pt_write(path, sizeof path, "sweep.csv", sweep_csv);
    plot_sweep sw;
    CU_ASSERT_EQUAL_FATAL(plot_sweep_load(path, NULL, 2, &sw, err), 0);
    CU_ASSERT_EQUAL(sw.nrows, 4);
    CU_ASSERT_EQUAL(sw.nskipped, 1);
    CU_ASSERT_EQUAL_FATAL(sw.nbars, 2);
    CU_ASSERT_STRING_EQUAL(sw.bars[0].label,
                           "--expert-model-parallel-size=4 --moe-token-dispatcher-type=flex");
    CU_ASSERT_DOUBLE_EQUAL(sw.bars[0].tokens_per_s_per_gpu, 5000.5, 0);
    /* a tie keeps file order */
    CU_ASSERT_STRING_EQUAL(sw.bars[1].label,
                           "--expert-model-parallel-size=2 --moe-token-dispatcher-type=alltoall");
    char *data = NULL;
    size_t len;
    FILE *f = open_memstream(&data, &len);
    plot_sweep_write_data(&sw, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "0\t5000.500000\t--expert"));
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "\n1\t4000.000000\t"));
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "=flex\t29362\n")); /* the colour, 0x0072b2 */
    free(data);
    plot_sweep_free(&sw);

    /* model state over the GPU's memory: grey, and the label says so; empty cells are fine */
    char mem[256];
    pt_write(mem, sizeof mem, "sweep_mem.csv",
             "rank,index,--ep,tokens_per_s_per_gpu,model_state_of_gpu,status\n"
             "1,0,8,900,1.0814,ok\n2,1,16,800,0.7848,ok\n3,2,32,700,,ok\n");
    CU_ASSERT_EQUAL_FATAL(plot_sweep_load(mem, NULL, 10, &sw, err), 0);
    unlink(mem);
    CU_ASSERT_EQUAL_FATAL(sw.nbars, 3);
    CU_ASSERT_EQUAL(sw.bars[0].over_memory, 1);
    CU_ASSERT_STRING_EQUAL(sw.bars[0].label, "--ep=8 (model state > GPU memory)");
    CU_ASSERT_EQUAL(sw.bars[1].over_memory, 0);
    CU_ASSERT_EQUAL(sw.bars[2].over_memory, 0);
    f = open_memstream(&data, &len);
    plot_sweep_write_data(&sw, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "memory)\t10066329\n")); /* 0x999999 */
    free(data);
    plot_sweep_free(&sw);

    CU_ASSERT_EQUAL_FATAL(plot_sweep_load(path, "--moe-token-dispatcher-type", 10, &sw, err), 0);
    CU_ASSERT_EQUAL(sw.nbars, 3);
    CU_ASSERT_STRING_EQUAL(sw.bars[0].label, "flex"); /* one column: the bare value */
    CU_ASSERT_STRING_EQUAL(sw.bars[2].label, "flex");
    plot_sweep_free(&sw);

    pt_write(path, sizeof path, "sweep.csv", "config,tokens_per_s_per_gpu\nA,1\nB,3\nC,2\n");
    CU_ASSERT_EQUAL_FATAL(plot_sweep_load(path, NULL, 20, &sw, err), 0);
    CU_ASSERT_EQUAL(sw.nbars, 3);
    CU_ASSERT_STRING_EQUAL(sw.bars[0].label, "B");
    CU_ASSERT_STRING_EQUAL(sw.bars[2].label, "A");
    plot_sweep_free(&sw);

    const struct {
        const char *text, *cols, *needle;
    } bad[] = {
        {"config,tps\nA,1\n", NULL, "no column 'tokens_per_s_per_gpu'"},
        {"config,tokens_per_s_per_gpu\nA,1\n", "name", "no column 'name' (from --label-col)"},
        {"tokens_per_s_per_gpu,x\n1,2\n", NULL, "no label"},
        {"config,tokens_per_s_per_gpu\nA,\n", NULL, "no row with a tokens_per_s_per_gpu value"},
        {"config,tokens_per_s_per_gpu\nA,lots\n", NULL, ":2: column 'tokens_per_s_per_gpu'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_write(path, sizeof path, "sweep.csv", bad[i].text);
        err[0] = 0;
        CU_ASSERT_EQUAL(plot_sweep_load(path, bad[i].cols, 20, &sw, err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].needle));
    }
    unlink(path);
}

/* A search CSV (columns as epsim search writes them, cut down): simulated rows become points, the
 * fitting ones ranked, the GPU memory from peak / fraction; a missing column is refused. */
static void test_search_points(void) {
    char path[256], err[EP_ERRLEN];
    const char *head = "rank,index,tp,iteration_time_s,peak_memory_gib,peak_memory_of_gpu,"
                       "est_peak_memory_gib,status\n";
    char text[1024];
    snprintf(text, sizeof text,
             "%s1,4,1,0.5,60.0,0.75,59,ok\n2,7,2,0.6,40.0,0.5,41,ok\n"
             ",9,1,0.4,90.0,1.125,70,simulated; peak memory exceeds the GPU memory\n"
             ",3,4,,,,85,pruned: estimated peak memory exceeds the GPU memory\n",
             head);
    pt_write(path, sizeof path, "search.csv", text);
    plot_search ps;
    CU_ASSERT_EQUAL_FATAL(plot_search_load(path, &ps, err), 0);
    CU_ASSERT_EQUAL(ps.nrows, 4);
    CU_ASSERT_EQUAL(ps.npoints, 3);
    CU_ASSERT_EQUAL(ps.nfit, 2);
    CU_ASSERT_DOUBLE_EQUAL(ps.gpu_gib, 80.0, 1e-9);
    CU_ASSERT_EQUAL(ps.points[2].rank, 0);
    char *data = NULL;
    size_t len;
    FILE *f = open_memstream(&data, &len);
    plot_search_write_data(&ps, f);
    plot_search_write_vars(&ps, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "60.000000\t0.500000000\t29362\t1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "90.000000\t0.400000000\t10066329\t\"\"\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "gpu_gib = 80.000000\nxmax = 97.200000\n"));
    free(data);
    plot_search_free(&ps);
    const struct {
        const char *text, *needle;
    } bad[] = {
        {"rank,iteration_time_s,peak_memory_gib\n1,0.5,60\n", "no column 'peak_memory_of_gpu'"},
        {"rank,peak_memory_gib,peak_memory_of_gpu\n1,60,0.7\n", "no column 'iteration_time_s'"},
        {"rank,iteration_time_s,peak_memory_gib,peak_memory_of_gpu\n,,,\n",
         "no simulated layout"},
        {"rank,iteration_time_s,peak_memory_gib,peak_memory_of_gpu\n1,fast,60,0.7\n",
         ":2: column 'iteration_time_s'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_write(path, sizeof path, "search.csv", bad[i].text);
        err[0] = 0;
        CU_ASSERT_EQUAL(plot_search_load(path, &ps, err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].needle));
    }
    unlink(path);
}

void ep_suite_plot_tables(void) {
    CU_pSuite s = CU_add_suite("plot_tables", NULL, NULL);
    CU_add_test(s, "CSV quoting, CRLF, blank lines, line numbers", test_csv_quoting);
    CU_add_test(s, "malformed CSV rejected with file:line", test_csv_malformed);
    CU_add_test(s, "relative error and +-5/10 % bands", test_error_bands);
    CU_add_test(s, "scatter runs: columns, values, data", test_scatter_load);
    CU_add_test(s, "exposed bars: four kinds summed, labels, bad summaries", test_exposed_bars);
    CU_add_test(s, "sweep: ranking, ties, labels, bad CSVs", test_sweep_rank_and_labels);
    CU_add_test(s, "search: simulated points, ranks, GPU memory, bad CSVs", test_search_points);
}
