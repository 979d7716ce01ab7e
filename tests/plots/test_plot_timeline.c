/* Timeline lanes and boxes: one lane per (rank, stream) of either trace in rank/stream order,
 * predicted in the upper half and measured in the lower half of a lane, rank filter and time
 * window, and the gnuplot data blocks (one per class present, in class order). */
#include <CUnit/CUnit.h>
#include <string.h>

#include "plot_test_util.h"
#include "plot_timeline.h"

/* Writes a trace of "rank stream kind name ts dur" records. */
static char *trace_file(char *buf, size_t len, const char *name, const char *events) {
    pt_path(buf, len, name);
    FILE *f = fopen(buf, "w");
    if (!f) return NULL;
    fputs("{\"otherData\":{},\"traceEvents\":[", f);
    int rank, stream, n = 0;
    char kind[64], op[64];
    double ts, dur;
    const char *p = events;
    int used;
    while (sscanf(p, "%d %d %63s %63s %lf %lf%n", &rank, &stream, kind, op, &ts, &dur, &used) ==
           6) {
        fprintf(f,
                "%s{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%g,\"dur\":%g,"
                "\"args\":{\"kind\":\"%s\"}}",
                n++ ? "," : "", op, rank, stream, ts, dur, kind);
        p += used;
    }
    fputs("]}\n", f);
    fclose(f);
    return buf;
}

typedef struct {
    plot_trace pred, meas;
    char ppath[256], mpath[256];
} pair;

static int load_pair(pair *p) {
    char err[EP_ERRLEN];
    trace_file(p->ppath, sizeof p->ppath, "pred.json",
               "0 0 gemm mb0.qkv 100 10  0 1 a2a_dispatch mb0.L0.dispatch.fwd 110 5 "
               "1 0 gemm mb0.qkv 100 12  1 1 a2a_combine mb0.L0.combine.fwd 112 4 "
               "0 0 host_sync mb0.L0.count_sync 105 0");
    /* measured: its own clock (starts at 5000 us), rank 0 only, and a dp stream */
    trace_file(p->mpath, sizeof p->mpath, "meas.json",
               "0 0 gemm mb0.qkv 5000 11  0 2 all_reduce B0.ddp.ar_dense 5011 20");
    if (plot_trace_load(p->ppath, &p->pred, err) || plot_trace_load(p->mpath, &p->meas, err))
        return -1;
    return 0;
}

static void free_pair(pair *p) {
    plot_trace_free(&p->pred);
    plot_trace_free(&p->meas);
    unlink(p->ppath);
    unlink(p->mpath);
}

static void test_lanes_and_halves(void) {
    pair p;
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL_FATAL(load_pair(&p), 0);
    plot_timeline_opts o = {.src = {&p.pred, &p.meas}, .to_us = -1};
    plot_timeline tl;
    CU_ASSERT_EQUAL_FATAL(plot_timeline_build(&o, &tl, err), 0);
    CU_ASSERT_EQUAL(tl.both, 1);
    /* union of both traces, rank-major then stream */
    CU_ASSERT_EQUAL_FATAL(tl.nlanes, 5);
    int want[5][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}};
    for (int l = 0; l < 5; l++) {
        CU_ASSERT_EQUAL(tl.lanes[l].rank, want[l][0]);
        CU_ASSERT_EQUAL(tl.lanes[l].stream, want[l][1]);
    }
    CU_ASSERT_STRING_EQUAL(tl.lanes[2].label, "r0 dp");
    CU_ASSERT(plot_timeline_lane_y(&tl, 0) > plot_timeline_lane_y(&tl, 1)); /* lane 0 on top */
    CU_ASSERT_EQUAL(tl.nboxes, 7);
    int npred = 0, nmeas = 0;
    for (int i = 0; i < tl.nboxes; i++) {
        const plot_box *b = &tl.boxes[i];
        double y = plot_timeline_lane_y(&tl, b->lane);
        CU_ASSERT(b->y0 < b->y1);
        if (b->source == PLOT_PREDICTED) {
            npred++;
            CU_ASSERT(b->y0 > y && b->y1 < y + 0.5); /* upper half */
        } else {
            nmeas++;
            CU_ASSERT(b->y1 < y && b->y0 > y - 0.5); /* lower half */
        }
        CU_ASSERT_EQUAL(tl.lanes[b->lane].rank == 0 || b->source == PLOT_PREDICTED, 1);
    }
    CU_ASSERT_EQUAL(npred, 5);
    CU_ASSERT_EQUAL(nmeas, 2);
    /* both traces start at 0 on the shared axis: the two qkv gemms of rank 0 line up */
    CU_ASSERT_EQUAL(tl.boxes[0].cls, PLOT_CLASS_COMPUTE);
    CU_ASSERT_EQUAL(tl.boxes[0].lane, 0);
    CU_ASSERT_EQUAL(tl.boxes[0].source, PLOT_PREDICTED);
    CU_ASSERT_EQUAL(tl.boxes[1].source, PLOT_MEASURED);
    CU_ASSERT_DOUBLE_EQUAL(tl.boxes[0].x0_ms, 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(tl.boxes[1].x0_ms, 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(tl.boxes[1].x1_ms, 0.011, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(tl.x_to_ms, 0.031, 1e-12); /* measured dp op ends last */
    /* boxes sorted by class: compute, dispatch, combine, dp, host sync */
    for (int i = 1; i < tl.nboxes; i++)
        CU_ASSERT(tl.boxes[i - 1].cls <= tl.boxes[i].cls);
    plot_timeline_free(&tl);

    /* one trace alone fills whole lanes */
    o.src[PLOT_MEASURED] = NULL;
    CU_ASSERT_EQUAL_FATAL(plot_timeline_build(&o, &tl, err), 0);
    CU_ASSERT_EQUAL(tl.both, 0);
    CU_ASSERT_EQUAL(tl.nlanes, 4);
    double y = plot_timeline_lane_y(&tl, tl.boxes[0].lane);
    CU_ASSERT(tl.boxes[0].y0 < y && tl.boxes[0].y1 > y);
    plot_timeline_free(&tl);
    free_pair(&p);
}

static void test_ranks_and_window(void) {
    pair p;
    char err[EP_ERRLEN] = "";
    CU_ASSERT_EQUAL_FATAL(load_pair(&p), 0);
    int r1[] = {1};
    plot_timeline_opts o = {.src = {&p.pred, &p.meas}, .ranks = r1, .nranks = 1, .to_us = -1};
    plot_timeline tl;
    CU_ASSERT_EQUAL_FATAL(plot_timeline_build(&o, &tl, err), 0);
    CU_ASSERT_EQUAL(tl.nlanes, 2);
    CU_ASSERT_EQUAL(tl.nboxes, 2);
    CU_ASSERT_EQUAL(tl.lanes[0].rank, 1);
    plot_timeline_free(&tl);

    int r5[] = {0, 5};
    o.ranks = r5;
    o.nranks = 2;
    CU_ASSERT_EQUAL(plot_timeline_build(&o, &tl, err), -1);
    CU_ASSERT_STRING_EQUAL(err, "rank 5 is not in the traces");

    /* window [8, 11] us: ops overlapping it, clipped to it */
    o.ranks = NULL;
    o.from_us = 8;
    o.to_us = 11;
    CU_ASSERT_EQUAL_FATAL(plot_timeline_build(&o, &tl, err), 0);
    CU_ASSERT_DOUBLE_EQUAL(tl.x_from_ms, 0.008, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(tl.x_to_ms, 0.011, 1e-12);
    for (int i = 0; i < tl.nboxes; i++) {
        CU_ASSERT(tl.boxes[i].x0_ms >= 0.008 - 1e-12);
        CU_ASSERT(tl.boxes[i].x1_ms <= 0.011 + 1e-12);
    }
    /* pred: qkv r0 [0,10], dispatch [10,15], qkv r1 [0,12], combine [12,16] no, sync at 5 no;
     * meas: qkv [0,11] yes, ar [11,31] only touches the edge: no */
    CU_ASSERT_EQUAL(tl.nboxes, 4);
    /* lanes without an op in the window are dropped: r0 comp, r0 comm, r1 comp remain */
    CU_ASSERT_EQUAL_FATAL(tl.nlanes, 3);
    CU_ASSERT_STRING_EQUAL(tl.lanes[2].label, "r1 comp");
    for (int i = 0; i < tl.nboxes; i++)
        CU_ASSERT(tl.boxes[i].lane < 3);
    plot_timeline_free(&tl);

    o.from_us = 100;
    o.to_us = 200;
    CU_ASSERT_EQUAL(plot_timeline_build(&o, &tl, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no ops between 100 us and 200 us"));
    o.from_us = 20;
    o.to_us = 10;
    CU_ASSERT_EQUAL(plot_timeline_build(&o, &tl, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "empty window"));
    plot_timeline_opts none = {.to_us = -1};
    CU_ASSERT_EQUAL(plot_timeline_build(&none, &tl, err), -1);
    free_pair(&p);
}

static void test_data_blocks(void) {
    pair p;
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL_FATAL(load_pair(&p), 0);
    plot_timeline_opts o = {.src = {&p.pred, &p.meas}, .to_us = -1};
    plot_timeline tl;
    CU_ASSERT_EQUAL_FATAL(plot_timeline_build(&o, &tl, err), 0);
    char *data = NULL, *vars = NULL;
    size_t len;
    FILE *f = open_memstream(&data, &len);
    plot_timeline_write_data(&tl, f);
    fclose(f);
    f = open_memstream(&vars, &len);
    plot_timeline_write_vars(&tl, f);
    fclose(f);
    /* 5 classes present -> 5 blocks, 4 double-blank separators, 7 box lines */
    CU_ASSERT_EQUAL(pt_count(data, "\n\n\n"), 4);
    CU_ASSERT_EQUAL(pt_count(data, "# "), 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "# compute\n0.000000\t0.010000\t4.04\t4.44\tmb0.qkv\n"
                                        "0.000000\t0.011000\t3.56\t3.96\tmb0.qkv\n"));
    CU_ASSERT(strstr(data, "# dispatch") < strstr(data, "# combine"));
    CU_ASSERT(strstr(data, "# dp") < strstr(data, "# host sync"));
    CU_ASSERT_PTR_NOT_NULL(strstr(vars, "nblocks = 5\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(vars, "block_title[5] = 'host sync'\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(vars, "block_color[1] = '#9e9e9e'\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(vars, "'r0 comp predicted' 4.24, 'r0 comp measured' 3.76"));
    CU_ASSERT_EQUAL(pt_count(vars, "set arrow"), 4); /* lines between 5 lanes */
    free(data);
    free(vars);
    plot_timeline_free(&tl);
    free_pair(&p);
}

void ep_suite_plot_timeline(void) {
    CU_pSuite s = CU_add_suite("plot_timeline", NULL, NULL);
    CU_add_test(s, "lanes, predicted above measured, shared axis", test_lanes_and_halves);
    CU_add_test(s, "rank filter and time window", test_ranks_and_window);
    CU_add_test(s, "gnuplot data blocks per class", test_data_blocks);
}
