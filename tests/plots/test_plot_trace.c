/* Trace reading and op classes: a trace written through core's ep_trace API loads back with its
 * times shifted to 0 and every op in the right colour class; malformed traces are refused with a
 * message that names the file and the problem. */
#include <CUnit/CUnit.h>
#include <string.h>

#include "ep_trace.h"
#include "plot_test_util.h"
#include "plot_trace.h"

/* Writes a two-rank trace with one op of each class; returns its path in buf. */
static char *write_sample(char *buf, size_t len) {
    char err[EP_ERRLEN];
    pt_path(buf, len, "sample.trace.json");
    ep_trace *t = ep_trace_open(buf, "{\"program\":\"epsim\"}", err);
    if (!t) return NULL;
    ep_trace_name_track(t, 0, 0, "comp");
    ep_trace_name_track(t, 0, 1, "nccl");
    static const struct {
        int rank, stream;
        const char *name, *kind;
        double ts, dur;
    } ev[] = {
        {0, 0, "mb0.c0.L1.qkv.fwd", "gemm", 1000, 50},
        {0, 1, "mb0.c0.L1.dispatch.fwd", "a2a_dispatch", 1050, 20},
        {0, 1, "mb0.c0.L1.dispatch.bwd", "a2a_combine", 1200, 20}, /* dispatch node, bwd */
        {0, 1, "mb0.c0.L1.combine.fwd", "a2a_combine", 1100, 20},
        {0, 1, "mb0.c0.L1.attn_ag.fwd", "all_gather", 1010, 5},
        {0, 2, "B0.ddp.ar_dense", "all_reduce", 1300, 40},
        {1, 3, "mb1.c0.pp.send.fwd", "send", 1150, 10},
        {1, 0, "mb0.c0.L1.count_sync", "host_sync", 1090, 0},
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        ep_trace_event e = {
            ev[i].rank, ev[i].stream, ev[i].name, ev[i].kind, ev[i].ts, ev[i].dur, 0, 1, 0, 0};
        ep_trace_add(t, &e);
    }
    return ep_trace_close(t, err) == 0 ? buf : NULL;
}

static void test_load_shared_format(void) {
    char path[256], err[EP_ERRLEN];
    CU_ASSERT_PTR_NOT_NULL_FATAL(write_sample(path, sizeof path));
    plot_trace t;
    CU_ASSERT_EQUAL_FATAL(plot_trace_load(path, &t, err), 0);
    CU_ASSERT_EQUAL(t.nevents, 8);
    CU_ASSERT_STRING_EQUAL(t.program, "epsim");
    CU_ASSERT_DOUBLE_EQUAL(t.ev[0].start_us, 0.0, 1e-9); /* shifted: earliest op at 0 */
    CU_ASSERT_DOUBLE_EQUAL(t.ev[1].start_us, 50.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(t.ev[5].dur_us, 40.0, 1e-9);
    CU_ASSERT_EQUAL(t.ev[6].rank, 1);
    CU_ASSERT_EQUAL(t.ev[6].stream, 3);
    CU_ASSERT_STRING_EQUAL(t.ev[1].kind, "a2a_dispatch");
    plot_class want[] = {PLOT_CLASS_COMPUTE, PLOT_CLASS_DISPATCH,   PLOT_CLASS_DISPATCH,
                         PLOT_CLASS_COMBINE, PLOT_CLASS_COMM_OTHER, PLOT_CLASS_DP,
                         PLOT_CLASS_PP,      PLOT_CLASS_HOST_SYNC};
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(t.ev[i].cls, want[i]);
    char buf[32];
    CU_ASSERT_STRING_EQUAL(plot_trace_stream_name(&t, 0, 1, buf, sizeof buf),
                           "nccl");                                                  /* metadata */
    CU_ASSERT_STRING_EQUAL(plot_trace_stream_name(&t, 1, 3, buf, sizeof buf), "pp"); /* default */
    CU_ASSERT_STRING_EQUAL(plot_trace_stream_name(&t, 1, 7, buf, sizeof buf), "s7");
    plot_trace_free(&t);
    unlink(path);
}

static void test_classify_rules(void) {
    /* the label must be exactly dispatch/combine, after index prefixes and before the phase */
    CU_ASSERT_EQUAL(plot_classify("a2a_dispatch", 1, "mb12.c3.L40.dispatch.bwd_dw"),
                    PLOT_CLASS_DISPATCH);
    CU_ASSERT_EQUAL(plot_classify("a2a_dispatch", 1, "dispatch"), PLOT_CLASS_DISPATCH);
    CU_ASSERT_EQUAL(plot_classify("a2a_dispatch", 1, "mb0.L1.dispatcher.fwd"),
                    PLOT_CLASS_COMM_OTHER);
    CU_ASSERT_EQUAL(plot_classify("all_gather", 1, "mb0.c0.L1.routing_ag.fwd"),
                    PLOT_CLASS_DISPATCH); /* hybridep: in the dispatch node */
    CU_ASSERT_EQUAL(plot_classify("alltoall", 1, "mb0.c0.L1.notify.fwd"), PLOT_CLASS_DISPATCH);
    CU_ASSERT_EQUAL(plot_classify("all_reduce", 1, "mb0.c0.L1.thd_max.fwd"), PLOT_CLASS_DISPATCH);
    CU_ASSERT_EQUAL(plot_classify("alltoall", 1, "mb0.c0.L1.count_a2a.fwd"),
                    PLOT_CLASS_COMM_OTHER); /* pre-dispatch node, "other" in the summary too */
    CU_ASSERT_EQUAL(plot_classify("reduce_scatter", 1, "mb0.c0.L2.combine.fwd"),
                    PLOT_CLASS_COMBINE); /* allgather dispatcher: combine is a reduce-scatter */
    /* the dp and pp streams win over the name, as in ep_op_comm_class */
    CU_ASSERT_EQUAL(plot_classify("all_gather", 2, "L5.fsdp.ag_dense.fwd"), PLOT_CLASS_DP);
    CU_ASSERT_EQUAL(plot_classify("recv", 1, "mb1.pp.recv.fwd"), PLOT_CLASS_PP);
    CU_ASSERT_EQUAL(plot_classify("all_reduce", 3, "x"), PLOT_CLASS_PP);
    /* compute on any stream stays compute (deepep layout kernels run beside comm) */
    CU_ASSERT_EQUAL(plot_classify("permute", 1, "mb0.c0.L1.dispatch.fwd"), PLOT_CLASS_COMPUTE);
    CU_ASSERT_EQUAL(plot_classify("host_sync", 0, "mb0.c0.L1.pad_sync"), PLOT_CLASS_HOST_SYNC);
    CU_ASSERT_STRING_EQUAL(plot_class_name(PLOT_CLASS_HOST_SYNC), "host sync");
    CU_ASSERT_STRING_EQUAL(plot_class_color(PLOT_CLASS_COMPUTE), "#9e9e9e");
    /* every class has its own colour */
    for (int a = 0; a < PLOT_NUM_CLASSES; a++)
        for (int b = 0; b < a; b++)
            CU_ASSERT_STRING_NOT_EQUAL(plot_class_color(a), plot_class_color(b));
}

/* Loads text as a trace; expects failure and every needle in the message. */
static void expect_bad(const char *name, const char *text, const char *n1, const char *n2) {
    char path[256], err[EP_ERRLEN] = "";
    pt_write(path, sizeof path, name, text);
    plot_trace t;
    CU_ASSERT_EQUAL(plot_trace_load(path, &t, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, n1));
    if (n2) CU_ASSERT_PTR_NOT_NULL(strstr(err, n2));
    CU_ASSERT_PTR_NULL(strchr(err, '\n')); /* one line */
    unlink(path);
}

static void test_malformed_rejected(void) {
    expect_bad("bad1.json", "{\"traceEvents\":[\n{\"ph\":\"X\",}]}", "malformed JSON", ":2:");
    expect_bad("bad2.json", "{\"events\":[]}", "no \"traceEvents\" array", NULL);
    expect_bad("bad3.json", "[1,2]", "no \"traceEvents\" array", NULL);
    expect_bad("bad4.json",
               "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":0,\"tid\":0,\"ts\":0,"
               "\"dur\":1,\"args\":{\"kind\":\"gemm\"}},{\"ph\":\"X\",\"name\":\"b\",\"pid\":0,"
               "\"tid\":0,\"ts\":1,\"dur\":1,\"args\":{}}]}",
               "traceEvents[1]", "args.kind");
    expect_bad("bad5.json",
               "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":0,\"tid\":0,\"ts\":0,"
               "\"dur\":-1,\"args\":{\"kind\":\"gemm\"}}]}",
               "traceEvents[0]", "non-negative \"dur\"");
    expect_bad("bad6.json",
               "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":\"0\",\"tid\":0,\"ts\":0,"
               "\"dur\":1,\"args\":{\"kind\":\"gemm\"}}]}",
               "traceEvents[0]", "\"pid\"");
    expect_bad("bad7.json",
               "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":0,"
               "\"args\":{\"name\":\"comp\"}}]}",
               "no complete", NULL);
    expect_bad("bad8.json", "", "malformed JSON", NULL);
    char err[EP_ERRLEN] = "";
    plot_trace t;
    CU_ASSERT_EQUAL(plot_trace_load("/nonexistent/x.trace.json", &t, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot read /nonexistent/x.trace.json"));
}

static void test_other_events_ignored(void) {
    char path[256], err[EP_ERRLEN];
    pt_write(path, sizeof path, "mixed.json",
             "{\"traceEvents\":[{\"ph\":\"C\",\"name\":\"mem\",\"pid\":0,\"ts\":0,\"args\":{}},"
             "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{\"name\":\"rank 0\"}},"
             "{\"ph\":\"X\",\"name\":\"a\",\"pid\":2,\"tid\":1,\"ts\":5e6,\"dur\":1.5,"
             "\"args\":{\"kind\":\"a2a_combine\"}}]}");
    plot_trace t;
    CU_ASSERT_EQUAL_FATAL(plot_trace_load(path, &t, err), 0);
    CU_ASSERT_EQUAL(t.nevents, 1);
    CU_ASSERT_EQUAL(t.nnames, 0);
    CU_ASSERT_STRING_EQUAL(t.program, "");
    CU_ASSERT_DOUBLE_EQUAL(t.ev[0].start_us, 0.0, 1e-9);
    CU_ASSERT_EQUAL(t.ev[0].cls, PLOT_CLASS_COMM_OTHER); /* label "a" is neither */
    plot_trace_free(&t);
    unlink(path);
}

void ep_suite_plot_trace(void) {
    CU_pSuite s = CU_add_suite("plot_trace", NULL, NULL);
    CU_add_test(s, "trace written by ep_trace loads back, shifted to 0", test_load_shared_format);
    CU_add_test(s, "op classes follow ep_op_comm_class", test_classify_rules);
    CU_add_test(s, "malformed traces rejected with file and reason", test_malformed_rejected);
    CU_add_test(s, "counters and process names ignored", test_other_events_ignored);
}
