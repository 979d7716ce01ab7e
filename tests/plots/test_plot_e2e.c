/* End to end: the built epplot draws each plot from small files (needs gnuplot), and refuses bad
 * inputs, a missing or failing gnuplot and bad options with exit status 2, one line on stderr, and
 * no output or temporary file left behind. */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "plot_gnuplot.h"
#include "plot_test_util.h"

#define EPPLOT EP_BINARY_DIR "/plots/epplot"

static char errlog[256];

/* Runs epplot with args (shell words) under env (prefix, may be ""); stderr into errlog. Returns
 * the exit status. */
static int epplot(const char *env, const char *args) {
    char cmd[4096];
    pt_path(errlog, sizeof errlog, "stderr.txt");
    snprintf(cmd, sizeof cmd, "%s %s %s 2>%s >/dev/null", env, EPPLOT, args, errlog);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* stderr of the last run has exactly one line and it contains needle. */
static void one_line_with(const char *needle) {
    char *e = pt_slurp(errlog, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(pt_count(e, "\n"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, needle));
    if (!strstr(e, needle)) fprintf(stderr, "\n  stderr was: %s", e);
    free(e);
}

static int have_gnuplot(void) {
    char p[1024], err[EP_ERRLEN];
    return plot_find_gnuplot(p, sizeof p, err) == 0;
}

static const char tiny_trace[] =
    "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"program\":\"test\"},\"traceEvents\":[\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"comp\"}},\n"
    "{\"ph\":\"X\",\"name\":\"mb0.c0.L0.qkv.fwd\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":100,"
    "\"args\":{\"kind\":\"gemm\",\"mb\":0,\"layer\":0,\"bytes\":0,\"flops\":1}},\n"
    "{\"ph\":\"X\",\"name\":\"mb0.c0.L0.dispatch.fwd\",\"pid\":0,\"tid\":1,\"ts\":100,\"dur\":40,"
    "\"args\":{\"kind\":\"a2a_dispatch\",\"mb\":0,\"layer\":0,\"bytes\":4096,\"flops\":0}},\n"
    "{\"ph\":\"X\",\"name\":\"mb0.c0.L0.expert_fc1.fwd\",\"pid\":1,\"tid\":0,\"ts\":140,\"dur\":80,"
    "\"args\":{\"kind\":\"grouped_gemm\",\"mb\":0,\"layer\":0,\"bytes\":0,\"flops\":1}},\n"
    "{\"ph\":\"X\",\"name\":\"mb0.c0.L0.combine.fwd\",\"pid\":1,\"tid\":1,\"ts\":220,\"dur\":40,"
    "\"args\":{\"kind\":\"a2a_combine\",\"mb\":0,\"layer\":0,\"bytes\":4096,\"flops\":0}}\n]}\n";

static int is_png(const char *path) {
    long n = 0;
    char *b = pt_slurp(path, &n);
    int ok = b && n > 1000 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8);
    free(b);
    return ok;
}

static void test_draws_each_plot(void) {
    if (!have_gnuplot()) {
        CU_PASS("gnuplot is not installed: drawing not tested");
        return;
    }
    char tr[256], out[256], args[2048], a[256], b[256], csv[256], data1[256], data2[256];
    pt_write(tr, sizeof tr, "tiny.trace.json", tiny_trace);
    pt_path(out, sizeof out, "timeline.png");
    snprintf(args, sizeof args, "timeline --predicted %s --measured %s -o %s", tr, tr, out);
    CU_ASSERT_EQUAL(epplot("", args), 0);
    CU_ASSERT(is_png(out));
    unlink(out);

    /* one trace alone, as SVG */
    pt_path(out, sizeof out, "timeline.svg");
    snprintf(args, sizeof args, "timeline --measured %s --ranks 1 -o %s", tr, out);
    CU_ASSERT_EQUAL(epplot("", args), 0);
    char *svg = pt_slurp(out, NULL);
    CU_ASSERT(svg && strstr(svg, "<svg"));
    free(svg);
    unlink(out);

    pt_write(csv, sizeof csv, "runs.csv",
             "name,measured_s,predicted_s,gpus\na,1.0,1.03,2\n"
             "b,2.0,2.3,8\nc,0.5,0.47,16\n");
    pt_path(out, sizeof out, "scatter.png");
    snprintf(args, sizeof args, "scatter --runs %s -o %s", csv, out);
    CU_ASSERT_EQUAL(epplot("", args), 0);
    CU_ASSERT(is_png(out));
    unlink(out);
    unlink(csv);

    pt_write(a, sizeof a, "a.summary.json",
             "{\"exposed_comm_s\":{\"dispatch\":0.01,\"combine\":0.02,\"dp\":0.03,\"pp\":0}}");
    pt_write(b, sizeof b, "b.summary.json",
             "{\"exposed_comm_s\":{\"dispatch\":0.02,\"combine\":0.01,\"dp\":0,\"pp\":0.004}}");
    pt_path(out, sizeof out, "exposed.png");
    snprintf(args, sizeof args, "exposed --summary %s --summary %s --label 'EP 8' -o %s", a, b,
             out);
    CU_ASSERT_EQUAL(epplot("", args), 0);
    CU_ASSERT(is_png(out));
    unlink(out);
    unlink(a);
    unlink(b);

    pt_write(csv, sizeof csv, "ranked.csv",
             "rank,index,--ep,tokens_per_s_per_gpu,status\n1,0,2,5000,ok\n2,1,4,4000,ok\n");
    pt_path(out, sizeof out, "sweep.png");
    pt_path(data1, sizeof data1, "sweep1.tsv");
    pt_path(data2, sizeof data2, "sweep2.tsv");
    snprintf(args, sizeof args, "sweep --csv %s --top 5 --data %s -o %s", csv, data1, out);
    CU_ASSERT_EQUAL(epplot("", args), 0);
    CU_ASSERT(is_png(out));
    snprintf(args, sizeof args, "sweep --csv %s --top 5 --data %s -o %s", csv, data2, out);
    CU_ASSERT_EQUAL(epplot("", args), 0);
    char *d1 = pt_slurp(data1, NULL), *d2 = pt_slurp(data2, NULL);
    CU_ASSERT(d1 && d2 && !strcmp(d1, d2)); /* deterministic data */
    CU_ASSERT(d1 && strstr(d1, "0\t5000.000000\t--ep=2\t29362\n")); /* colour 0x0072b2 */
    free(d1);
    free(d2);
    unlink(data1);
    unlink(data2);
    unlink(out);

    pt_write(csv, sizeof csv, "search.csv",
             "rank,index,iteration_time_s,peak_memory_gib,peak_memory_of_gpu,status\n"
             "1,0,0.5,60,0.75,ok\n,1,0.4,90,1.125,simulated; over\n,2,,,,pruned\n");
    pt_path(out, sizeof out, "search.png");
    snprintf(args, sizeof args, "search --csv %s -o %s", csv, out);
    CU_ASSERT_EQUAL(epplot("", args), 0);
    CU_ASSERT(is_png(out));
    unlink(out);
    unlink(csv);
    unlink(tr);
}

/* TMPDIR for epplot's temporary folder, checked empty afterwards. */
static char tmpdir[256];
static int dir_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n == 0;
}

static void test_refusals_leave_nothing(void) {
    char tr[256], bad[256], out[256], args[2048], env[512];
    pt_path(tmpdir, sizeof tmpdir, "tmpdir");
    mkdir(tmpdir, 0700);
    pt_write(tr, sizeof tr, "ok.trace.json", tiny_trace);
    pt_write(bad, sizeof bad, "bad.trace.json", "{\"traceEvents\":[{\"ph\":\"X\"");
    pt_path(out, sizeof out, "refused.png");
    unlink(out);

    snprintf(args, sizeof args, "timeline --predicted %s -o %s", bad, out);
    CU_ASSERT_EQUAL(epplot("", args), 2);
    one_line_with("malformed JSON");
    CU_ASSERT_EQUAL(access(out, F_OK), -1);

    snprintf(args, sizeof args, "timeline --predicted %s --ranks 7 -o %s", tr, out);
    CU_ASSERT_EQUAL(epplot("", args), 2);
    one_line_with("epplot timeline: rank 7 is not in the trace");

    snprintf(args, sizeof args, "timeline --predicted %s -o %s.pdf", tr, out);
    CU_ASSERT_EQUAL(epplot("", args), 2);
    one_line_with("name it .png or .svg");

    snprintf(args, sizeof args, "scatter --runs /nonexistent/runs.csv -o %s", out);
    CU_ASSERT_EQUAL(epplot("", args), 2);
    one_line_with("cannot read /nonexistent/runs.csv");

    CU_ASSERT_EQUAL(epplot("", "sweep --csv x.csv --top 0 -o x.png"), 2);
    one_line_with("--top 0");
    CU_ASSERT_EQUAL(epplot("", "exposed --label x -o x.png"), 2);
    one_line_with("--label x must follow its --summary");
    pt_write(bad, sizeof bad, "nosearch.csv", "rank,iteration_time_s\n1,0.5\n");
    snprintf(args, sizeof args, "search --csv %s -o %s", bad, out);
    CU_ASSERT_EQUAL(epplot("", args), 2);
    one_line_with("no column 'peak_memory_gib'");
    CU_ASSERT_EQUAL(access(out, F_OK), -1);
    unlink(bad);
    CU_ASSERT_EQUAL(epplot("", "draw"), 2);
    one_line_with("unknown command draw");

    /* gnuplot missing: not on PATH, or EPPLOT_GNUPLOT names nothing */
    snprintf(args, sizeof args, "timeline --predicted %s -o %s", tr, out);
    snprintf(env, sizeof env, "TMPDIR=%s EPPLOT_GNUPLOT= PATH=/nonexistent", tmpdir);
    CU_ASSERT_EQUAL(epplot(env, args), 2);
    one_line_with("gnuplot not found on PATH (install it: apt-get install gnuplot-nox");
    snprintf(env, sizeof env, "TMPDIR=%s EPPLOT_GNUPLOT=/nonexistent/gnuplot", tmpdir);
    CU_ASSERT_EQUAL(epplot(env, args), 2);
    one_line_with("EPPLOT_GNUPLOT=/nonexistent/gnuplot is not an executable file");
    /* gnuplot that fails: no picture, no temporary folder left */
    snprintf(env, sizeof env, "TMPDIR=%s EPPLOT_GNUPLOT=/bin/false", tmpdir);
    CU_ASSERT_EQUAL(epplot(env, args), 2);
    one_line_with("gnuplot failed (exit status 1)");
    CU_ASSERT_EQUAL(access(out, F_OK), -1);
    CU_ASSERT(dir_empty(tmpdir));
    if (have_gnuplot()) { /* and a good run leaves only the picture */
        snprintf(env, sizeof env, "TMPDIR=%s", tmpdir);
        CU_ASSERT_EQUAL(epplot(env, args), 0);
        CU_ASSERT(is_png(out));
        CU_ASSERT(dir_empty(tmpdir));
    }
    unlink(out);
    unlink(tr);
    unlink(bad);
    unlink(errlog);
    rmdir(tmpdir);
}

static void test_out_kind(void) {
    CU_ASSERT_STRING_EQUAL(plot_out_kind("a/b.png"), "png");
    CU_ASSERT_STRING_EQUAL(plot_out_kind("b.svg"), "svg");
    CU_ASSERT_PTR_NULL(plot_out_kind(".png"));
    CU_ASSERT_PTR_NULL(plot_out_kind("b.PNG.txt"));
}

void ep_suite_plot_e2e(void) {
    CU_pSuite s = CU_add_suite("plot_e2e", NULL, NULL);
    CU_add_test(s, "output kind from the file name", test_out_kind);
    CU_add_test(s, "epplot draws timeline, scatter, exposed, sweep, search", test_draws_each_plot);
    CU_add_test(s, "refusals: exit 2, one line, nothing left", test_refusals_leave_nothing);
}
