/* sim_topo / sim_flows / sim_algo: star nodes found (sim_topo_find_stars), flows inside an NVSwitch
 * node regrouped with the same bytes per GPU, large tasks split by zone. SimGrid allows one
 * platform per process: each case runs in a child. */
#include <CUnit/CUnit.h>
#include <math.h>

#include "sim_test_util.h"

static int stars_found(const sim_platform *p) {
    sim_topo t;
    if (sim_topo_init(&t, p, p->ngpus) || sim_topo_find_stars(&t)) return 80;
    int rc = 0;
    for (int nd = 0; nd < t.nnodes; nd++)
        if (t.star[nd] != (p->ngpus > 2)) rc = 1; /* the pair of h200x2 shares one direct link */
    sim_topo_free(&t);
    return rc;
}

static void test_stars(void) {
    CU_ASSERT_EQUAL(platform_in_child("dgx16", stars_found), 0);
    CU_ASSERT_EQUAL(platform_in_child("h200x4", stars_found), 0);
    CU_ASSERT_EQUAL(platform_in_child("h200x2", stars_found), 0);
}

/* An uneven token all-to-all among the 8 GPUs of node 0 of dgx16: the task has at most 15 flows,
 * none from a GPU to itself, and every GPU sends and receives what the 56 direct flows add up to.
 */
static int uneven_a2a_regrouped(const sim_platform *p) {
    hand_sched h;
    hand_init(&h, 8);
    int g = hand_group(&h, 8);
    ep_traffic *t = hand_traffic(&h, g, 8, 1);
    double sent[8] = {0}, recv[8] = {0};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            if (i != j) {
                t->bytes[i * 8 + j] = (int64_t)(1 + (i * 7 + j * 13) % 11) << 20;
                sent[i] += (double)t->bytes[i * 8 + j];
                recv[j] += (double)t->bytes[i * 8 + j];
            }
    const ep_op *ops[8];
    for (int r = 0; r < 8; r++) {
        ep_op op = hand_op(EP_OP_A2A_DISPATCH, EP_STREAM_COMM);
        op.group = g;
        op.traffic = 0;
        hand_plan(&h, &op);
        h.ops[r][0] = op;
        ops[r] = &h.ops[r][0];
    }
    sim_calib c;
    sim_calib_default(&c);
    hand_net net;
    if (hand_net_init(&net, p, p->ngpus)) return 80;
    double fixed;
    hand_net_build(&net, &h, &c, ops, h.groups[g].ranks, 8, &fixed);
    const sim_flows f = net.f;
    int nonzero = 0, rc = 0;
    double got_out[8] = {0}, got_in[8] = {0};
    for (int a = 0; a < f.nhosts; a++)
        for (int b = 0; b < f.nhosts; b++) {
            double x = f.matrix[a * f.nhosts + b];
            if (x == 0) continue;
            nonzero++;
            if (a == b) rc |= 2;
            got_out[f.ends[a]] += x * c.nccl_nvlink_efficiency;
            got_in[f.ends[b]] += x * c.nccl_nvlink_efficiency;
        }
    if (nonzero > 15 || f.nhosts != 8) rc |= 4;
    for (int r = 0; r < 8; r++)
        if (fabs(got_out[r] - sent[r]) > 1e-9 * sent[r] ||
            fabs(got_in[r] - recv[r]) > 1e-9 * recv[r])
            rc |= 8;
    hand_net_free(&net);
    return rc;
}

static void test_regrouped_a2a(void) {
    CU_ASSERT_EQUAL(platform_in_child("dgx16", uneven_a2a_regrouped), 0);
}

/* A ring all-reduce over the 16 GPUs of dgx16 as one task (f->split_hosts at least its 32
 * hosts: the GPUs and every rail's NIC hosts, one ring per channel) or split by zone (split_hosts
 * 4): node 0's NVLink hops, node 1's, and each rail's NIC hops (a channel leaving a node at one
 * rail for the next node's GPU on another is relayed over NVLink to that rail first). Fills bytes[src end][dst end]
 * with the pieces' matrices added up; returns the number of pieces, or -1 when a flow has no
 * route, a host is in a piece twice or (split) a piece has flows of two zones. */
static int ring16_pieces(const sim_platform *p, int split_hosts, double *bytes, int nends) {
    hand_sched h;
    hand_init(&h, 16);
    int g = hand_group(&h, 16);
    hand_collective(&h, 16, EP_OP_ALL_REDUCE, EP_STREAM_DP, g, 64 << 20);
    const ep_op *ops[16];
    for (int r = 0; r < 16; r++)
        ops[r] = &h.ops[r][0];
    sim_calib c;
    sim_calib_default(&c);
    hand_net net;
    if (hand_net_init(&net, p, 16)) return -1;
    net.f.split_hosts = split_hosts;
    double fixed;
    hand_net_build(&net, &h, &c, ops, h.groups[g].ranks, 16, &fixed);
    const sim_flows f = net.f;
    int n = f.npieces, bad = f.piece_host[n] != f.nhosts;
    for (int k = 0; k < n; k++) {
        const int *ends = f.ends + f.piece_host[k];
        int nh = f.piece_host[k + 1] - f.piece_host[k], zone = -1;
        const double *m = f.matrix + f.piece_mat[k];
        bad |= f.piece_mat[k + 1] - f.piece_mat[k] != (long)nh * nh;
        for (int a = 0; a < nh; a++)
            for (int b = 0; b < nh; b++) {
                bad |= a != b && ends[a] == ends[b];
                if (m[a * nh + b] == 0) continue;
                int ea = ends[a], eb = ends[b], ga = ea % p->ngpus, gb = eb % p->ngpus;
                int z = ea < p->ngpus ? p->node[ga] : 100 + p->local[ga];
                bad |= (ea < p->ngpus) != (eb < p->ngpus); /* GPU to NIC host: no route */
                bad |= ea < p->ngpus ? p->node[gb] != p->node[ga] : p->local[gb] != p->local[ga];
                bad |= n > 1 && zone >= 0 && z != zone; /* a piece is one zone's */
                zone = z;
                bytes[ea * nends + eb] += m[a * nh + b];
            }
    }
    hand_net_free(&net);
    return bad ? -1 : n;
}

static int ring_split_by_zone(const sim_platform *p) {
    int nends = 2 * p->ngpus, rc = 0;
    double *one = calloc((size_t)(nends * nends), sizeof *one);
    double *split = calloc((size_t)(nends * nends), sizeof *split);
    if (!one || !split) return 80;
    if (ring16_pieces(p, 32, one, nends) != 1) rc |= 1;   /* 16 GPUs + 16 NIC hosts */
    if (ring16_pieces(p, 4, split, nends) != 10) rc |= 2; /* 2 nodes + 8 rails */
    for (int i = 0; i < nends * nends; i++)
        if (one[i] != split[i]) rc |= 4;
    free(one);
    free(split);
    return rc;
}

static void test_ring_split_by_zone(void) {
    CU_ASSERT_EQUAL(platform_in_child("dgx16", ring_split_by_zone), 0);
}

/* epsim costs every algorithm the generators record (the transport grid of tests/unit/test_xfer.c
 * holds the generators and epref). */
static void test_every_algorithm(void) {
    CU_ASSERT(sim_algo_of(EP_ALGO_NONE) == NULL);
    for (int a = EP_ALGO_NONE + 1; a < EP_ALGO_NUM; a++)
        CU_ASSERT(sim_algo_of(a) != NULL);
}

void ep_suite_net(void) {
    CU_pSuite s = CU_add_suite("sim_flows", NULL, NULL);
    CU_add_test(s, "every algorithm has its decomposition", test_every_algorithm);
    CU_add_test(s, "NVSwitch nodes found, a direct pair not", test_stars);
    CU_add_test(s, "uneven all-to-all in a node: 15 flows, same bytes per GPU", test_regrouped_a2a);
    CU_add_test(s, "a task over split_hosts hosts: one piece per zone, the same bytes",
                test_ring_split_by_zone);
}
