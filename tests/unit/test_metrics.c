/* ep_metrics: exposure, busy and idle time from hand-made intervals whose answer is known. */
#include <CUnit/CUnit.h>
#include <string.h>

#include "ep_metrics.h"

/* rank 0: gemm [0,1]; dispatch (moves data from 0.5) [0.2,2]; host sync [2,2]; combine [2.5,3]
 * rank 1: gemm [0,3] beside the same collectives, so nothing of them is exposed there. */
static const double iv[2][4][3] = {
    {{0, 0, 1}, {0.2, 0.5, 2}, {2, 2, 2}, {2.5, 2.5, 3}},
    {{0, 0, 3}, {0.2, 0.5, 2}, {2, 2, 2}, {2.5, 2.5, 3}},
};

/* A schedule of `world` ranks over `ranks`, no model, and a layout of one in every parallel
 * dimension (sizes as validation leaves them: readers no longer default a 0). */
static void bare_sched(ep_sched *s, int world, ep_rank_sched *ranks) {
    memset(s, 0, sizeof *s);
    s->world = world;
    s->cfg.tensor_model_parallel_size = s->cfg.context_parallel_size = 1;
    s->cfg.pipeline_model_parallel_size = s->cfg.virtual_pipeline_model_parallel_size = 1;
    s->cfg.data_parallel_size = s->cfg.expert_model_parallel_size = 1;
    s->cfg.expert_tensor_parallel_size = s->cfg.num_distributed_optimizer_instances = 1;
    s->ranks = ranks;
}

/* Intervals from a table: ctx is {start, xfer, end} per op, rank after rank (nops_per_rank each).
 */
typedef struct {
    const double *iv;
    int nops_per_rank;
} table;

static void interval(const void *ctx, int rank, int op, double *start, double *xfer, double *end) {
    const table *t = ctx;
    const double *v = &t->iv[3 * (rank * t->nops_per_rank + op)];
    *start = v[0];
    *xfer = v[1];
    *end = v[2];
}

static void test_exposure_known_answer(void) {
    ep_op ops[4] = {
        {.kind = EP_OP_GEMM, .stream = EP_STREAM_COMP},
        {.kind = EP_OP_A2A_DISPATCH,
         .stream = EP_STREAM_COMM,
         .node = EP_NODE_DISPATCH,
         .bytes = 1000},
        {.kind = EP_OP_HOST_SYNC},
        {.kind = EP_OP_A2A_COMBINE,
         .stream = EP_STREAM_COMM,
         .node = EP_NODE_COMBINE,
         .bytes = 500},
    };
    ep_rank_sched ranks[2] = {{.nops = 4, .ops = ops}, {.nops = 4, .ops = ops}};
    ep_sched s;
    bare_sched(&s, 2, ranks);
    s.tokens_per_iteration = 4000;
    s.model_flops_per_token = 1e9;
    ep_step_metrics m;
    CU_ASSERT_EQUAL_FATAL(
        ep_metrics_compute(&s, 4.0, 1e12, interval, &(table){&iv[0][0][0], 4}, NULL, &m), 0);
    /* rank 0: busy [0,1], dispatch exposed [1,2], idle [2,2.5], combine exposed [2.5,3], idle [3,4]
     * rank 1: busy [0,3], idle [3,4] */
    CU_ASSERT_DOUBLE_EQUAL(m.compute_busy_s, (1 + 3) / 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.exposed_s[EP_COMM_DISPATCH], 1 / 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.exposed_s[EP_COMM_COMBINE], 0.5 / 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.exposed_total_s, 1.5 / 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.idle_s, (1.5 + 1) / 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.bubble_fraction, 1.25 / 4.0, 1e-12);
    CU_ASSERT_EQUAL(m.host_syncs, 2);
    CU_ASSERT_EQUAL(m.nops, 8);
    CU_ASSERT_DOUBLE_EQUAL(m.a2a_bytes, 3000, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(m.tokens_per_s_per_gpu, 500, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(m.mfu, 500 * 1e9 / 1e12, 1e-12);
}

/* One rank: gemm A [0,1]; gemm B ready but for its launch from 0.5, running [2,3]; a dispatch
 * arriving at 1.0, moving [1.2,1.5]. Idle: [1,1.2] and [1.5,2] while B waits for its launch (host),
 * [3,4] waiting for nothing (other); B's wait beside A and beside the transfer is not idle. */
static const double iv_host[3][3] = {{0, 0, 1}, {2, 0.5, 3}, {1.0, 1.2, 1.5}};

static void test_host_wait_known_answer(void) {
    ep_op ops[3] = {
        {.kind = EP_OP_GEMM, .stream = EP_STREAM_COMP},
        {.kind = EP_OP_GEMM, .stream = EP_STREAM_COMP},
        {.kind = EP_OP_A2A_DISPATCH, .stream = EP_STREAM_COMM, .node = EP_NODE_DISPATCH},
    };
    ep_rank_sched ranks[1] = {{.nops = 3, .ops = ops}};
    ep_sched s;
    bare_sched(&s, 1, ranks);
    const table host = {&iv_host[0][0], 3};
    ep_step_metrics m;
    CU_ASSERT_EQUAL_FATAL(ep_metrics_compute(&s, 4.0, 1e12, interval, &host, NULL, &m), 0);
    CU_ASSERT_DOUBLE_EQUAL(m.compute_busy_s, 2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.exposed_total_s, 0.3, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.idle_s, 0.2 + 0.5 + 1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.host_wait_s, 0.2 + 0.5, 1e-12);
    /* launch waits of ops whose interval is a transfer: beside gemm A nothing, within B's wait no
     * second count, in the idle [3,4] what they cover; another rank's is not this one's */
    const int wr[4] = {0, 0, 0, 1};
    const double wt[8] = {0.2, 0.8, 1.5, 1.8, 3.2, 3.6, 3.0, 4.0};
    ep_launch_waits w = {4, wr, wt};
    CU_ASSERT_EQUAL_FATAL(ep_metrics_compute(&s, 4.0, 1e12, interval, &host, &w, &m), 0);
    CU_ASSERT_DOUBLE_EQUAL(m.idle_s, 0.2 + 0.5 + 1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.host_wait_s, 0.2 + 0.5 + 0.4, 1e-12);
}

/* One rank: a dispatch arriving at 0 that moves data over [1,1.5) (its peers late), a pipeline
 * receive arriving at 2 whose transfer runs over [3,3.5): idle [0,1) waits for peers, [2,3) for
 * the other stage, [1.5,2) and [3.5,4) for nothing named. */
static const double iv_wait[2][3] = {{0, 1, 1.5}, {2, 3, 3.5}};

static void test_peer_and_pipeline_waits(void) {
    ep_op ops[2] = {
        {.kind = EP_OP_A2A_DISPATCH, .stream = EP_STREAM_COMM, .node = EP_NODE_DISPATCH},
        {.kind = EP_OP_RECV, .stream = EP_STREAM_PP},
    };
    ep_rank_sched ranks[1] = {{.nops = 2, .ops = ops}};
    ep_sched s;
    bare_sched(&s, 1, ranks);
    ep_step_metrics m;
    CU_ASSERT_EQUAL_FATAL(
        ep_metrics_compute(&s, 4.0, 1e12, interval, &(table){&iv_wait[0][0], 2}, NULL, &m), 0);
    CU_ASSERT_DOUBLE_EQUAL(m.exposed_total_s, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.idle_s, 3.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.peer_wait_s, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.pipeline_wait_s, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.host_wait_s, 0, 1e-12);
}

void ep_suite_metrics(void) {
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
    CU_add_test(s, "exposure, busy and idle from known intervals", test_exposure_known_answer);
    CU_add_test(s, "waiting for launches: the idle part of a compute op's wait for its host",
                test_host_wait_known_answer);
    CU_add_test(s, "waiting for peers and for another pipeline stage",
                test_peer_and_pipeline_waits);
}
