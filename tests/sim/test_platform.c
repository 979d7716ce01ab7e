/* Zoned platforms (sim_platform.h): the bundled clusters give every GPU a NIC host gpu<r>.nic in
 * its rail's zone; traffic between nodes runs between NIC hosts, traffic inside a node between GPU
 * hosts, and a flat platform (no NIC hosts) keeps GPU hosts for both, with the same results.
 * SimGrid allows one platform per process: each case runs in a child. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <simgrid/host.h>

#include "sim_test_util.h"

/* The flat layout of the bundled clusters (epsim_gen_topos --flat) in a temporary directory. */
static const char *flat_dir(void) {
    static char dir[512];
    if (!dir[0]) {
        char cmd[2048];
        tmp_path(dir, sizeof dir, "flat_topos");
        snprintf(cmd, sizeof cmd, "mkdir -p %s && %s/sim/epsim_gen_topos --flat %s", dir,
                 EP_BINARY_DIR, dir);
        if (system(cmd) != 0) dir[0] = 0;
    }
    return dir;
}

static int has_nics(const sim_platform *p) {
    if (!p->nic) return 1;
    for (int r = 0; r < p->ngpus; r++) {
        char name[48];
        snprintf(name, sizeof name, "gpu%d.nic", r);
        if (p->nic[r] != sg_host_by_name(name)) return 2;
    }
    return 0;
}

static int no_nics(const sim_platform *p) {
    return p->nic != NULL;
}

static void test_nic_hosts_found(void) {
    char flat[600];
    snprintf(flat, sizeof flat, "%s/dgx16.xml", flat_dir());
    CU_ASSERT_EQUAL(platform_in_child("dgx16", has_nics), 0);
    CU_ASSERT_EQUAL(platform_in_child("dgx256", has_nics), 0);
    CU_ASSERT_EQUAL(platform_in_child(flat, no_nics), 0);
    CU_ASSERT_EQUAL(platform_in_child("dgx8", no_nics), 0);
    CU_ASSERT_EQUAL(platform_in_child("h200x2", no_nics), 0);
    CU_ASSERT_EQUAL(platform_in_child("nvl72", no_nics), 0);
}

/* Every flow of f's task stays inside one zone: GPU hosts of one node, or NIC hosts of one rail on
 * two nodes. Returns 0, or a bit for what was wrong; counts the flows of each kind. */
static int flows_in_zones(const sim_flows *f, int *gpu_flows, int *nic_flows) {
    const sim_platform *p = f->t->p;
    int rc = 0;
    *gpu_flows = *nic_flows = 0;
    for (int i = 0; i < f->nhosts; i++)
        for (int j = 0; j < f->nhosts; j++) {
            if (f->matrix[i * f->nhosts + j] == 0) continue;
            int a = f->ends[i], b = f->ends[j], n = p->ngpus;
            if (a < n && b < n) {
                (*gpu_flows)++;
                if (p->node[a] != p->node[b]) rc |= 1;
            } else if (a >= n && b >= n) {
                (*nic_flows)++;
                if (p->node[a - n] == p->node[b - n] || p->local[a - n] != p->local[b - n]) rc |= 2;
            } else {
                rc |= 4;
            }
        }
    return rc;
}

/* The task of one instance whose members are ops[0..2) on ranks[0..2), built with the default
 * calibration into net (16 ranks). Returns 0, or -1 out of memory. */
static int build_pair(const sim_platform *p, const hand_sched *h, const ep_op *const *ops,
                      const int *ranks, hand_net *net) {
    sim_calib c;
    sim_calib_default(&c);
    if (hand_net_init(net, p, 16)) return -1;
    double fixed;
    hand_net_build(net, h, &c, ops, ranks, 2, &fixed);
    return 0;
}

/* A ring all-reduce between GPU 1 (node 0, rail 1) and GPU 8 (node 1, rail 0) of dgx16: each way
 * one NVLink hop to the sender's GPU on the receiver's rail, then NIC host to NIC host. */
static int ring_on_nics(const sim_platform *p) {
    hand_sched h;
    hand_init(&h, 16);
    ep_op op[2];
    const ep_op *ops[2] = {&op[0], &op[1]};
    int ranks[2] = {1, 8};
    for (int i = 0; i < 2; i++) {
        op[i] = hand_op(EP_OP_ALL_REDUCE, EP_STREAM_COMM);
        op[i].bytes = 1 << 20;
        hand_plan(&h, &op[i]);
    }
    hand_net net;
    if (build_pair(p, &h, ops, ranks, &net) != 0) return 80;
    int gpu, nic, rc = flows_in_zones(&net.f, &gpu, &nic);
    if (gpu != 2 || nic != 2 || net.f.nhosts != 8) rc |= 8;
    /* the ring's hop: NVLink to GPU 0, then GPU 0's NIC to GPU 8's (1 + 2 us) */
    if (fabs(sim_topo_latency(&net.t, 1, 8) - 3e-6) > 1e-15 ||
        fabs(sim_topo_latency(&net.t, 0, 8) - 2e-6) > 1e-15 ||
        fabs(sim_topo_latency(&net.t, 1, 0) - 1e-6) > 1e-15)
        rc |= 16;
    hand_net_free(&net);
    return rc;
}

static void test_internode_flows_on_nics(void) {
    CU_ASSERT_EQUAL(platform_in_child("dgx16", ring_on_nics), 0);
}

/* deepep's NVLink fan-out between ranks the schedule puts on one node (--gpus-per-node larger than
 * the platform's) crosses nodes and rails: on a zoned platform it goes over NVLink to the relay,
 * then NIC to NIC; on a flat one it stays one flow between the two GPU hosts. */
static int fanout_across_nodes(const sim_platform *p) {
    hand_sched h;
    hand_init(&h, 16);
    h.s.cfg.moe_token_dispatcher_type = EP_DISPATCHER_FLEX;
    h.s.cfg.moe_flex_dispatcher_backend = EP_FLEX_DEEPEP;
    int g = hand_group(&h, 2);
    ep_traffic *t = hand_traffic(&h, g, 2, 1);
    t->node_bytes = h.tnode[0];
    t->bytes[0 * 2 + 1] = 4 << 20; /* rank 1 to rank 8 only */
    ep_op op[2];
    const ep_op *ops[2] = {&op[0], &op[1]};
    int ranks[2] = {1, 8};
    for (int i = 0; i < 2; i++) {
        op[i] = hand_op(EP_OP_A2A_DISPATCH, EP_STREAM_COMM);
        op[i].group = g;
        op[i].traffic = 0;
        hand_plan(&h, &op[i]);
    }
    hand_net net;
    if (build_pair(p, &h, ops, ranks, &net) != 0) return 80;
    int gpu, nic, rc = flows_in_zones(&net.f, &gpu, &nic);
    if (p->nic)
        rc = rc || gpu != 1 || nic != 1 || net.f.nhosts != 4;
    else /* flat: one flow from GPU 1 to GPU 8 (bit 1: between nodes) */
        rc = rc != 1 || gpu != 1 || net.f.nhosts != 2;
    hand_net_free(&net);
    return rc;
}

static void test_fanout_split_at_relay(void) {
    char flat[600];
    snprintf(flat, sizeof flat, "%s/dgx16.xml", flat_dir());
    CU_ASSERT_EQUAL(platform_in_child("dgx16", fanout_across_nodes), 0);
    CU_ASSERT_EQUAL(platform_in_child(flat, fanout_across_nodes), 0);
}

/* Writes a platform of 2 nodes x 2 GPUs with NIC hosts for `nics` of them, GPU `skip` left out
 * (-1: none). */
static void write_small(const char *path, int nics, int skip) {
    FILE *f = fopen(path, "w");
    fputs("<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM "
          "\"https://simgrid.org/simgrid.dtd\">\n<platform version=\"4.1\">"
          "<zone id=\"z\" routing=\"Full\">\n",
          f);
    for (int g = 0; g < 4; g++) {
        if (g == skip) continue;
        int r = g > skip && skip >= 0 ? g - 1 : g; /* ranks stay gpu0, gpu1, ... */
        fprintf(f,
                "<host id=\"gpu%d\" speed=\"1e12f\"><prop id=\"peak_flops\" value=\"1e12\"/>"
                "<prop id=\"hbm_bw\" value=\"1e12\"/><prop id=\"sm_count\" value=\"100\"/>"
                "<prop id=\"node\" value=\"%d\"/><prop id=\"local_index\" value=\"%d\"/></host>\n",
                r, g / 2, g % 2);
        if (r < nics) fprintf(f, "<host id=\"gpu%d.nic\" speed=\"1f\"/>\n", r);
    }
    fputs("</zone></platform>\n", f);
    fclose(f);
}

/* A platform with NIC hosts needs one for every GPU and every node complete: one line, exit 2. */
static void test_nic_platform_errors(void) {
    char xml[512], args[1024], err[512], cmd[2048];
    tmp_path(xml, sizeof xml, "nics.xml");
    tmp_path(err, sizeof err, "nics.err");
    struct {
        int nics, skip;
        const char *msg;
    } cases[] = {{1, -1, "has no NIC host gpu1.nic"}, {3, 3, "node 1 has no GPU of local_index 1"}};
    for (int i = 0; i < 2; i++) {
        write_small(xml, cases[i].nics, cases[i].skip);
        snprintf(args, sizeof args, "--topo %s --num-layers 1", xml);
        CU_ASSERT_EQUAL(epsim_exec(args, NULL, err), 2);
        CU_ASSERT_EQUAL(lines_of(err), 1);
        snprintf(cmd, sizeof cmd, "grep -q '%s' %s", cases[i].msg, err);
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
    remove(xml);
    remove(err);
}

/* The zoned and the flat layout of a cluster are the same network: identical per-op CSVs for runs
 * whose traffic crosses nodes and rails (EP 16 over both nodes, a cross-rail data-parallel ring,
 * deepep's RDMA copies and NVLink fan-out, pipeline sends). */
static void test_zoned_equals_flat(void) {
    static const char *runs[] = {
        "--expert-model-parallel-size 16 --use-distributed-optimizer --overlap-grad-reduce",
        "--expert-model-parallel-size 16 --moe-token-dispatcher-type flex "
        "--moe-flex-dispatcher-backend deepep --overlap-moe-expert-parallel-comm",
        "--pipeline-model-parallel-size 2 --expert-model-parallel-size 8"};
    char zoned[512], flat[512], args[4096];
    tmp_path(zoned, sizeof zoned, "zoned.csv");
    tmp_path(flat, sizeof flat, "flat.csv");
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const char *common = "--num-layers 4 --moe-layer-freq 1 --mtp-num-layers 0";
        snprintf(args, sizeof args, "--topo dgx16 %s %s --csv %s", common, runs[i], zoned);
        CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
        snprintf(args, sizeof args, "--topo %s/dgx16.xml %s %s --csv %s", flat_dir(), common,
                 runs[i], flat);
        CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "cmp -s %s %s", zoned, flat);
        int same = system(cmd) == 0;
        if (!same) fprintf(stderr, "zoned and flat dgx16 differ: %s\n", runs[i]);
        CU_ASSERT(same);
    }
    remove(zoned);
    remove(flat);
}

static int cleanup(void) {
    char cmd[1024];
    if (!flat_dir()[0]) return 0;
    snprintf(cmd, sizeof cmd, "rm -rf %s", flat_dir());
    return system(cmd) == 0 ? 0 : 1;
}

void ep_suite_platform(void) {
    CU_pSuite s = CU_add_suite("sim_platform", NULL, cleanup);
    CU_add_test(s, "NIC hosts found on zoned clusters, none on flat platforms",
                test_nic_hosts_found);
    CU_add_test(s, "flows between nodes run NIC host to NIC host", test_internode_flows_on_nics);
    CU_add_test(s, "a fan-out across nodes and rails is relayed over NVLink",
                test_fanout_split_at_relay);
    CU_add_test(s, "NIC hosts for some GPUs only, or an incomplete node: exit 2",
                test_nic_platform_errors);
    CU_add_test(s, "zoned and flat dgx16 give identical CSVs", test_zoned_equals_flat);
}
