/* Transfers timed by the engine (sim_share.h, SimGrid's L07 sharing solved per component): every
 * case runs twice, with the engine's own sharing and with every transfer in SimGrid (the
 * reference), and the op times must agree. */
#include <CUnit/CUnit.h>
#include <math.h>

#include "sim_test_util.h"

#define REL(a, b) (fabs((a) - (b)) <= 1e-9 * fabs(b) + 1e-15)

/* Runs h on `topo` with calibration c (NULL: the defaults) and tasks over split_hosts hosts split
 * by zone, both ways; every op's start, transfer start and end agree, and the engine's run needed
 * no SimGrid step. */
static void both_ways_on(const hand_sched *h, const char *topo, const sim_calib *c,
                         int split_hosts) {
    sim_calib def;
    sim_calib_default(&def);
    sim_engine_opts o = sim_engine_defaults();
    o.split_hosts = split_hosts;
    hand_result direct, simgrid;
    hand_run_opts(h, topo, c ? c : &def, o, &direct);
    o.direct = 0;
    hand_run_opts(h, topo, c ? c : &def, o, &simgrid);
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
    CU_ASSERT(direct.nwaits == 0);
}

static void both_ways(const hand_sched *h, const sim_calib *c) {
    both_ways_on(h, "dgx8", c, SIM_FLOWS_SPLIT_HOSTS);
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
    both_ways(&h, NULL);
}

/* A second all-to-all on the same GPUs' links (another stream) joins the first: at the same
 * instant, during its latency (host costs below the 1 us route latency) and while its bytes
 * move (behind a GEMM). They share the links from then on. */
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
    both_ways(&h, &c);
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

/* Two all-to-alls of disjoint GPU pairs in one node at once: two components. */
static void test_disjoint_links(void) {
    hand_sched h;
    hand_init(&h, 4);
    add_a2a(&h, 0, 2, EP_STREAM_COMM, 0, 0, NULL);
    add_a2a(&h, 2, 2, EP_STREAM_COMM, 0, 3, NULL);
    both_ways(&h, NULL);
}

/* Link throttling (a transfer runs slower while its GPU computes): a GEMM on rank 0 starts and
 * ends while the all-to-all moves; the transfer is re-rated at both instants. */
static void test_throttled(void) {
    hand_sched h;
    hand_init(&h, 4);
    add_a2a(&h, 0, 4, EP_STREAM_COMM, 0, 0, NULL);
    hand_add(&h, 0, hand_gemm(3072), 0, NULL);
    sim_calib c;
    sim_calib_default(&c);
    c.nccl_compute_slowdown = 1.6;
    both_ways(&h, &c);
}

/* Across the two nodes of dgx16 (NVLink to the relay, then NIC, leaf, NIC): an uneven all-to-all
 * of the 16 ranks and, joining it behind a GEMM on another stream, a ring all-reduce of the same
 * ranks over both nodes; with link throttling, and with the tasks split by zone. */
static void cross_node(int throttle, int split_hosts) {
    hand_sched h;
    hand_init(&h, 16);
    add_a2a(&h, 0, 16, EP_STREAM_COMM, 0, 0, NULL);
    int g = h.s.ngroups++;
    for (int i = 0; i < 16; i++)
        h.granks[g][i] = i;
    h.groups[g].kind = EP_GROUP_DP;
    h.groups[g].size = 16;
    h.groups[g].ranks = h.granks[g];
    for (int r = 0; r < 16; r++) {
        int dep = hand_add(&h, r, hand_gemm(r % 3 == 0 ? 2048 : 1024), 0, NULL);
        ep_op op = hand_op(EP_OP_ALL_REDUCE, EP_STREAM_DP);
        op.group = g;
        op.seq = 0;
        op.bytes = 64 << 20;
        hand_add(&h, r, op, 1, &dep);
    }
    sim_calib c;
    sim_calib_default(&c);
    if (throttle) c.nccl_compute_slowdown = 1.6;
    both_ways_on(&h, "dgx16", &c, split_hosts);
}

static void test_cross_node(void) {
    cross_node(0, SIM_FLOWS_SPLIT_HOSTS);
}

static void test_cross_node_throttled(void) {
    cross_node(1, SIM_FLOWS_SPLIT_HOSTS);
}

static void test_cross_node_split(void) {
    cross_node(1, 4);
}

/* A platform of the user's kind: 4 GPUs in two pairs, each GPU's own link to its pair's switch,
 * the switches joined by a fat pipe (a flow's load counts, not the sum) and a shared trunk of
 * another latency in series: routes of 2 and 4 links, two latencies, no star node. */
static const char *fatpipe_platform(char *path, size_t len) {
    tmp_path(path, len, "fatpipe.xml");
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs("<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
          "<platform version=\"4.1\">\n<zone id=\"fp\" routing=\"Floyd\">\n"
          "<prop id=\"gpus_per_node\" value=\"4\"/>\n",
          f);
    for (int g = 0; g < 4; g++)
        fprintf(f,
                "<host id=\"gpu%d\" speed=\"9.89e+14f\"><prop id=\"peak_flops\" value=\"9.89e+14\"/>"
                "<prop id=\"hbm_bw\" value=\"3.35e+12\"/><prop id=\"sm_count\" value=\"132\"/>"
                "<prop id=\"node\" value=\"0\"/><prop id=\"local_index\" value=\"%d\"/>"
                "<prop id=\"gpus_per_node\" value=\"4\"/></host>\n",
                g, g);
    fputs("<router id=\"s0\"/><router id=\"s1\"/><router id=\"m\"/>\n", f);
    for (int g = 0; g < 4; g++)
        fprintf(f,
                "<link id=\"l%d\" bandwidth=\"2e11Bps\" latency=\"5e-07s\" "
                "sharing_policy=\"SPLITDUPLEX\"/>\n",
                g);
    fputs("<link id=\"bus\" bandwidth=\"1.5e11Bps\" latency=\"2e-06s\" sharing_policy=\"FATPIPE\"/>\n"
          "<link id=\"trunk\" bandwidth=\"2.5e11Bps\" latency=\"1e-06s\"/>\n",
          f);
    for (int g = 0; g < 4; g++)
        fprintf(f,
                "<route src=\"gpu%d\" dst=\"s%d\"><link_ctn id=\"l%d\" direction=\"UP\"/></route>\n",
                g, g / 2, g); /* symmetrical: DOWN on the way back */
    fputs("<route src=\"s0\" dst=\"m\"><link_ctn id=\"bus\"/></route>\n"
          "<route src=\"m\" dst=\"s1\"><link_ctn id=\"trunk\"/></route>\n"
          "</zone>\n</platform>\n",
          f);
    fclose(f);
    return path;
}

/* An all-to-all of the 4 GPUs and, behind a GEMM, a ring all-reduce of them on that platform, with
 * link throttling: fat-pipe and shared links of several hops, both ways. */
static void test_fatpipe_routes(void) {
    char path[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fatpipe_platform(path, sizeof path));
    hand_sched h;
    hand_init(&h, 4);
    add_a2a(&h, 0, 4, EP_STREAM_COMM, 0, 0, NULL);
    int g = h.s.ngroups++;
    for (int i = 0; i < 4; i++)
        h.granks[g][i] = i;
    h.groups[g].kind = EP_GROUP_DP;
    h.groups[g].size = 4;
    h.groups[g].ranks = h.granks[g];
    for (int r = 0; r < 4; r++) {
        int dep = hand_add(&h, r, hand_gemm(r == 0 ? 2048 : 1024), 0, NULL);
        ep_op op = hand_op(EP_OP_ALL_REDUCE, EP_STREAM_DP);
        op.group = g;
        op.seq = 0;
        op.bytes = 32 << 20;
        hand_add(&h, r, op, 1, &dep);
    }
    sim_calib c;
    sim_calib_default(&c);
    c.nccl_compute_slowdown = 1.6;
    both_ways_on(&h, path, &c, SIM_FLOWS_SPLIT_HOSTS);
    remove(path);
}

void ep_suite_direct(void) {
    CU_pSuite s = CU_add_suite("sim_share", NULL, NULL);
    CU_add_test(s, "an all-to-all alone in a node: the engine's times are SimGrid's", test_alone);
    CU_add_test(s, "joined at its start: they share the links", test_joined_at_once);
    CU_add_test(s, "joined during its latency", test_joined_in_latency);
    CU_add_test(s, "joined while its bytes move", test_joined_while_moving);
    CU_add_test(s, "all-to-alls on disjoint GPUs of a node", test_disjoint_links);
    CU_add_test(s, "link throttling re-rates a transfer", test_throttled);
    CU_add_test(s, "an all-to-all and a ring across nodes share NVLink and NICs", test_cross_node);
    CU_add_test(s, "... with link throttling", test_cross_node_throttled);
    CU_add_test(s, "... with every task split by zone", test_cross_node_split);
    CU_add_test(s, "a user's platform: fat pipe and shared links over several hops",
                test_fatpipe_routes);
}
