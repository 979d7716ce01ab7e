/* Transfers alone in an NVSwitch node, timed by the engine (sim_direct.h): every case runs twice,
 * with the direct path and with every transfer in SimGrid, and the op times must agree. */
#include <CUnit/CUnit.h>
#include <math.h>

#include "sim_test_util.h"

#define REL(a, b) (fabs((a) - (b)) <= 1e-9 * fabs(b) + 1e-15)

/* Runs h on dgx8 with calibration c (NULL: the defaults) both ways; every op's start, transfer
 * start and end agree. With `joined`, the direct run needed SimGrid too, else it needed none. */
static void both_ways(const hand_sched *h, const sim_calib *c, int joined) {
    sim_calib def;
    sim_calib_default(&def);
    sim_engine_opts o = sim_engine_defaults();
    hand_result direct, simgrid;
    hand_run_opts(h, "dgx8", c ? c : &def, o, &direct);
    o.direct = 0;
    hand_run_opts(h, "dgx8", c ? c : &def, o, &simgrid);
    CU_ASSERT_EQUAL_FATAL(direct.rc, 0);
    CU_ASSERT_EQUAL_FATAL(simgrid.rc, 0);
    int same = 1;
    for (int r = 0; r < h->s.world; r++)
        for (int i = 0; i < h->rs[r].nops; i++) {
            same &= REL(direct.start[r][i], simgrid.start[r][i]);
            same &= REL(direct.xfer[r][i], simgrid.xfer[r][i]);
            if (!REL(direct.end[r][i], simgrid.end[r][i])) {
                fprintf(stderr, "rank %d op %d ends at %.12f direct, %.12f in SimGrid\n", r, i,
                        direct.end[r][i], simgrid.end[r][i]);
                same = 0;
            }
        }
    CU_ASSERT(same);
    CU_ASSERT(simgrid.nwaits > 0);
    CU_ASSERT(joined ? direct.nwaits > 0 : direct.nwaits == 0);
}

/* An uneven token all-to-all among ranks first .. first+n-1 of one node: the next traffic
 * instance of a new group, its ops added on `stream` of every member after `dep` (-1: none). */
static void add_a2a(hand_sched *h, int first, int n, ep_stream stream, int seq, int scale,
                    const int *dep) {
    int g = h->s.ngroups++;
    for (int i = 0; i < n; i++)
        h->granks[g][i] = first + i;
    h->groups[g].kind = EP_GROUP_EP;
    h->groups[g].size = n;
    h->groups[g].ranks = h->granks[g];
    ep_traffic *t = hand_traffic(h, g, n, 1);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            t->bytes[i * n + j] = i == j ? 0 : (int64_t)(1 + (i * 7 + j * 13 + scale) % 11) << 22;
    for (int i = 0; i < n; i++) {
        ep_op op = hand_op(EP_OP_A2A_DISPATCH, stream);
        op.group = g;
        op.seq = seq;
        op.traffic = h->s.ntraffic - 1;
        op.bytes = 1 << 20;
        hand_add(h, first + i, op, dep ? 1 : 0, dep);
    }
}

static void test_alone(void) {
    hand_sched h;
    hand_init(&h, 8);
    add_a2a(&h, 0, 8, EP_STREAM_COMM, 0, 0, NULL);
    both_ways(&h, NULL, 0);
}

/* A second all-to-all on the same GPUs' links (another stream) joins the first: at the same
 * instant, during its latency (host costs below the 1 us route latency) and while its bytes
 * move (behind a GEMM). The first goes on in SimGrid with what it has left. */
static void joined(int when) {
    hand_sched h;
    hand_init(&h, 4);
    add_a2a(&h, 0, 4, EP_STREAM_COMM, 0, 0, NULL);
    sim_calib c;
    sim_calib_default(&c);
    if (when == 2) {
        int dep = hand_add(&h, 0, hand_gemm(2048), 0, NULL);
        for (int r = 1; r < 4; r++)
            hand_add(&h, r, hand_gemm(2048), 0, NULL);
        add_a2a(&h, 0, 4, EP_STREAM_DP, 0, 5, &dep); /* rank r's op 1 is its GEMM */
    } else { /* host costs of none: both at once; below the route latency: during it */
        c.op_overhead_s = c.nccl_launch_s = when == 1 ? 0.2e-6 : 0;
        add_a2a(&h, 0, 4, EP_STREAM_DP, 0, 5, NULL);
    }
    both_ways(&h, &c, 1);
}

static void test_joined_at_once(void) {
    joined(0);
}

static void test_joined_in_latency(void) {
    joined(1);
}

static void test_joined_while_moving(void) {
    joined(2);
}

/* Two all-to-alls of disjoint GPU pairs in one node at once: both timed directly. */
static void test_disjoint_links(void) {
    hand_sched h;
    hand_init(&h, 4);
    add_a2a(&h, 0, 2, EP_STREAM_COMM, 0, 0, NULL);
    add_a2a(&h, 2, 2, EP_STREAM_COMM, 0, 3, NULL);
    both_ways(&h, NULL, 0);
}

/* Link throttling (a transfer runs slower while its GPU computes): a GEMM on rank 0 starts and
 * ends while the all-to-all moves; the direct transfer is re-rated at both instants. */
static void test_throttled(void) {
    hand_sched h;
    hand_init(&h, 4);
    add_a2a(&h, 0, 4, EP_STREAM_COMM, 0, 0, NULL);
    hand_add(&h, 0, hand_gemm(3072), 0, NULL);
    sim_calib c;
    sim_calib_default(&c);
    c.nccl_compute_slowdown = 1.6;
    both_ways(&h, &c, 0);
}

void ep_suite_direct(void) {
    CU_pSuite s = CU_add_suite("sim_direct", NULL, NULL);
    CU_add_test(s, "an all-to-all alone in a node: the engine's times are SimGrid's", test_alone);
    CU_add_test(s, "joined at its start: it moves on in SimGrid", test_joined_at_once);
    CU_add_test(s, "joined during its latency", test_joined_in_latency);
    CU_add_test(s, "joined while its bytes move", test_joined_while_moving);
    CU_add_test(s, "all-to-alls on disjoint GPUs of a node: both direct", test_disjoint_links);
    CU_add_test(s, "link throttling re-rates a direct transfer", test_throttled);
}
