/* epsim engine on hand-built schedules whose times are known on paper (docs/epsim.md, "Tests"). */
#include <CUnit/CUnit.h>
#include <math.h>

#include "sim_cost.h"
#include "sim_power.h"
#include "sim_test_util.h"

#define REL(a, b) (fabs((a) - (b)) <= 1e-9 * fabs(b) + 1e-15)

/* One token all-to-all between the two H200s: bytes / (478 GB/s x NCCL efficiency) + link latency,
 * after one launch and NCCL's fixed cost. */
/* The time alone of one op under calibration c on an H200 (the h200x2 hosts). */
static void op_work(const sim_calib *c, const ep_op *op, sim_work *w) {
    sim_cost x;
    sim_cost_init(&x, c, NULL);
    sim_op_work(&x, op, 989e12, 4.8e12, w);
    sim_cost_free(&x);
}

/* Runs h on h200x2 under c (it must succeed) and gives the times alone of its ops a and b. */
static void run_with_work(hand_sched *h, const sim_calib *c, const ep_op *a, const ep_op *b,
                          hand_result *res, sim_work *wa, sim_work *wb) {
    hand_run(h, "h200x2", c, res);
    CU_ASSERT_EQUAL_FATAL(res->rc, 0);
    op_work(c, a, wa);
    op_work(c, b, wb);
}

/* A token all-to-all of `bytes` each way between ranks 0 and 1 of group g: traffic 0, sequence 0,
 * on each rank's comm stream (sms: the SMs a case sets, 0 for the plan's own). */
static void hand_a2a_pair(hand_sched *h, int g, int64_t bytes, int sms) {
    hand_traffic_pair(h, g, bytes);
    for (int r = 0; r < 2; r++) {
        ep_op op = hand_op(EP_OP_A2A_DISPATCH, EP_STREAM_COMM);
        op.group = g;
        op.seq = 0;
        op.traffic = 0;
        op.bytes = (double)bytes;
        op.sms = (int16_t)sms;
        hand_add(h, r, op, 0, NULL);
    }
}

static void test_a2a_h200x2(void) {
    hand_sched h;
    hand_init(&h, 2);
    int g = hand_group(&h, 2);
    const int64_t B = 256ll << 20;
    hand_a2a_pair(&h, g, B, 0);
    sim_calib c;
    sim_calib_default(&c);
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL_FATAL(res.rc, 0);
    double expect = c.launch_s + c.nccl_base_s + B / (478.116e9 * c.nccl_nvlink_efficiency) + 1e-6;
    CU_ASSERT(REL(res.end[0][0], expect));
    CU_ASSERT(REL(res.end[1][0], expect));
    CU_ASSERT(REL(res.makespan, expect));
}

/* Ring all-reduce of S bytes over the 8 GPUs of a DGX: 2(n-1)/n x S / B + 2(n-1) hop latencies,
 * B the NCCL-achieved NVLink bandwidth; the simulator adds NCCL's fixed and per-step costs. */
static void test_ring_allreduce_dgx8(void) {
    hand_sched h;
    hand_init(&h, 8);
    int g = hand_group(&h, 8);
    const double S = 4.0 * 1024 * 1024 * 1024;
    hand_collective(&h, 8, EP_OP_ALL_REDUCE, EP_STREAM_DP, g, S);
    sim_calib c;
    sim_calib_default(&c);
    hand_result res;
    hand_run(&h, "dgx8", &c, &res);
    CU_ASSERT_EQUAL_FATAL(res.rc, 0);
    int n = 8;
    double hop = 1e-6, Beff = 450e9 * c.nccl_nvlink_efficiency;
    double paper = 2.0 * (n - 1) / n * S / Beff + 2 * (n - 1) * hop;
    double sim = res.end[0][0] - res.start[0][0];
    CU_ASSERT(fabs(sim - paper) / paper < 0.01);
    double exact = c.nccl_base_s + (2 * (n - 1) - 1) * c.nccl_step_s + paper;
    CU_ASSERT(REL(sim, exact));
}

/* A ring over both nodes of dgx16 runs as NCCL's channels: one ring per rail, so 1 GiB all-reduced
 * over the 16 GPUs moves 2(n-1)/n S / 8 through each NIC (50 GB/s x nccl_ib_efficiency), not all
 * of it through one NIC pair; the two GPUs of rail 0, one member per node, keep their one NIC. */
static void test_ring_channels_across_nodes(void) {
    const double S = 1 << 30, nic = 50e9;
    sim_calib c;
    sim_calib_default(&c);
    double through_nics = 2.0 * 15 / 16 * S / (8 * nic * c.nccl_ib_efficiency);
    hand_sched h;
    hand_init(&h, 16);
    int g = hand_group(&h, 16);
    hand_collective(&h, 16, EP_OP_ALL_REDUCE, EP_STREAM_DP, g, S);
    hand_result all;
    hand_run(&h, "dgx16", &c, &all);
    CU_ASSERT_EQUAL_FATAL(all.rc, 0);
    double t = all.end[0][0] - all.start[0][0];
    CU_ASSERT(t > through_nics);
    CU_ASSERT(t < 2 * through_nics); /* one NIC pair would take 8x */
    hand_sched r;
    hand_init(&r, 16);
    int g2 = r.s.ngroups++;
    r.granks[g2][0] = 0, r.granks[g2][1] = 8;
    r.groups[g2].kind = EP_GROUP_EP;
    r.groups[g2].size = 2;
    r.groups[g2].ranks = r.granks[g2];
    for (int m = 0; m < 2; m++) {
        ep_op op = hand_op(EP_OP_ALL_REDUCE, EP_STREAM_DP);
        op.group = g2, op.seq = 0, op.bytes = S;
        hand_add(&r, 8 * m, op, 0, NULL);
    }
    hand_result rail;
    hand_run(&r, "dgx16", &c, &rail);
    CU_ASSERT_EQUAL_FATAL(rail.rc, 0);
    double one_nic = 2.0 * 1 / 2 * S / (nic * c.nccl_ib_efficiency);
    double t2 = rail.end[0][0] - rail.start[0][0];
    CU_ASSERT(t2 > one_nic && t2 < 1.1 * one_nic);
}

/* The same ring over both nodes of dgx16 (16 GPUs: NVLink hops and every rail's NICs) as one
 * SimGrid task and split into its zones (sim_engine_run's split_hosts): every piece moves at its
 * zone's pace and the transfer ends with the last. The one task ends at its most loaded link's
 * pace plus its longest route's latency; the pieces each add their own routes' latency, so the
 * two ends agree within one NIC hop (1 us on dgx16). */
static void test_ring_split_same_end(void) {
    hand_sched h;
    hand_init(&h, 16);
    int g = hand_group(&h, 16);
    hand_collective(&h, 16, EP_OP_ALL_REDUCE, EP_STREAM_DP, g, 1 << 30);
    sim_calib c;
    sim_calib_default(&c);
    hand_result one, split;
    sim_engine_opts o = sim_engine_defaults();
    o.split_hosts = 1000;
    hand_run_opts(&h, "dgx16", &c, o, &one);
    o.split_hosts = 4;
    hand_run_opts(&h, "dgx16", &c, o, &split);
    CU_ASSERT_EQUAL_FATAL(one.rc, 0);
    CU_ASSERT_EQUAL_FATAL(split.rc, 0);
    CU_ASSERT(one.makespan > 0.005); /* 2 x 15/16 GiB over 8 NICs of 50 GB/s */
    for (int r = 0; r < 16; r++)
        CU_ASSERT(fabs(split.end[r][0] - one.end[r][0]) <= 1.0e-6 * (1 + 1e-9));
}

/* Two microbatches: GEMM(mb0) -> dispatch(mb0) on comm, GEMM(mb1) overlaps the dispatch, then
 * dispatch(mb1) and the expert GEMM of mb0. No SM or HBM interference in this calibration, so
 * every time follows from launch, GEMM and all-to-all durations. */
static void test_two_microbatch_overlap(void) {
    hand_sched h;
    hand_init(&h, 2);
    int g = hand_group(&h, 2);
    const int64_t B = 64ll << 20;
    hand_traffic_pair(&h, g, B);
    ep_op gemm = hand_gemm(4096);
    gemm.m = gemm.n = gemm.k = 4096;
    for (int r = 0; r < 2; r++) {
        ep_op a2a = hand_op(EP_OP_A2A_DISPATCH, EP_STREAM_COMM);
        a2a.group = g;
        a2a.traffic = 0;
        a2a.bytes = (double)B;
        int g0 = hand_add(&h, r, gemm, 0, NULL);
        a2a.seq = 0;
        a2a.mb = 0;
        int d0 = hand_add(&h, r, a2a, 1, &g0);
        int g1 = hand_add(&h, r, gemm, 0, NULL);
        a2a.seq = 1;
        a2a.mb = 1;
        hand_add(&h, r, a2a, 1, &g1);
        hand_add(&h, r, gemm, 1, &d0);
    }
    sim_calib c;
    sim_calib_default(&c);
    c.comm_hbm_fraction = 0;
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL_FATAL(res.rc, 0);
    sim_work w;
    op_work(&c, &gemm, &w);
    double G = sim_work_alone(&w);
    double A = c.nccl_base_s + B / (478.116e9 * c.nccl_nvlink_efficiency) + 1e-6;
    double L = c.launch_s;
    CU_ASSERT(REL(res.end[0][0], L + G));
    CU_ASSERT(REL(res.end[0][1], L + G + A)); /* dispatch mb0 */
    CU_ASSERT(REL(res.end[0][2], L + 2 * G)); /* GEMM mb1 ran under the dispatch */
    double d1_start = fmax(L + 2 * G, L + G + A);
    CU_ASSERT(REL(res.start[0][3], d1_start));
    CU_ASSERT(REL(res.end[0][3], d1_start + A));
    CU_ASSERT(REL(res.end[0][4], fmax(L + 2 * G, L + G + A) + G));
    CU_ASSERT(res.makespan < 3 * G + 2 * A); /* overlap happened */
}

/* A host sync stops launching until the stream reaches it: the GEMM after it starts only after
 * the first GEMM finished, the host woke up and launched it. */
static void test_host_sync_blocks_launch(void) {
    hand_sched h;
    hand_init(&h, 1);
    ep_op gemm = hand_gemm(2048);
    hand_add(&h, 0, gemm, 0, NULL);
    hand_add(&h, 0, hand_op(EP_OP_HOST_SYNC, EP_STREAM_COMP), 0, NULL);
    ep_op other = hand_op(EP_OP_ELEMENTWISE, EP_STREAM_COMM);
    other.bytes = 1e8;
    hand_add(&h, 0, other, 0, NULL);
    sim_calib c;
    sim_calib_default(&c);
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL_FATAL(res.rc, 0);
    sim_work w;
    op_work(&c, &gemm, &w);
    double G = sim_work_alone(&w), L = c.launch_s;
    CU_ASSERT(REL(res.end[0][1], L + G));
    /* the op on another stream could have run at 3L without the sync; it starts (its start
     * event) once the woken host begins to issue it, and ends its work after the launch */
    CU_ASSERT(REL(res.start[0][2], L + G + c.host_sync_s));
    op_work(&c, &other, &w);
    CU_ASSERT(REL(res.end[0][2], L + G + c.host_sync_s + L + sim_work_alone(&w)));
}

/* A communication kernel holding half the SMs halves a flop-bound GEMM's speed while it runs. */
static void test_sm_contention(void) {
    hand_sched h;
    hand_init(&h, 2);
    int g = hand_group(&h, 2);
    ep_op gemm = hand_gemm(8192);
    hand_add(&h, 0, gemm, 0, NULL);
    for (int r = 0; r < 2; r++) {
        ep_op ar = hand_op(EP_OP_ALL_REDUCE, EP_STREAM_COMM);
        ar.group = g;
        ar.seq = 0;
        ar.bytes = 64e6;
        ar.sms = 66;
        hand_add(&h, r, ar, 0, NULL);
    }
    sim_calib c;
    sim_calib_default(&c);
    c.comm_hbm_fraction = 0;
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL_FATAL(res.rc, 0);
    sim_work w;
    op_work(&c, &gemm, &w);
    double G = sim_work_alone(&w), L = c.launch_s;
    double a0 = res.start[0][1], a1 = res.end[0][1]; /* SMs held on rank 0 */
    CU_ASSERT(a1 < L + G);                           /* the comm ends inside the GEMM */
    /* fraction of the GEMM done: full speed outside [a0,a1], half speed inside; the GPU takes it
     * up when the host begins issuing it (t = 0: ev0 precedes the launch call) */
    CU_ASSERT(REL(res.start[0][0] + 1.0, 1.0));
    double full = 1.0 / G, half = 1.0 / (w.t0 + w.t_flop * 2);
    double done_at_a1 = a0 * full + (a1 - a0) * half;
    double expect_end = a1 + (1 - done_at_a1) / full;
    CU_ASSERT(REL(res.end[0][0], expect_end));
    CU_ASSERT(res.end[0][0] > L + G + 1e-7);
}

/* Rank 0's GEMM (op 0) ran at full speed except while its transfer (op 1) moved, when it ran at
 * 1 / slow of it: its end follows from that. */
static void check_gemm_beside_transfer(const hand_result *res, const sim_calib *c,
                                       const ep_op *gemm, double slow) {
    sim_work w;
    op_work(c, gemm, &w);
    double a0 = res->xfer[0][1], a1 = res->end[0][1];
    CU_ASSERT_FATAL(a1 > a0 && a1 < res->end[0][0]); /* it ends inside the GEMM */
    double full = 1.0 / sim_work_alone(&w), slowed = 1.0 / (w.t0 + w.t_flop * slow);
    double done_at_a1 = (a0 - res->start[0][0]) * full + (a1 - a0) * slowed;
    CU_ASSERT(REL(res->end[0][0], a1 + (1 - done_at_a1) / full));
}

/* A GEMM beside an SM-driven (hybridep) transfer of 16 SMs runs at 1 / kernel_flops_slowdown(16)
 * while the transfer moves, not at NCCL's 1 / comm_flops_slowdown (docs/epsim.md, "Compute"). */
static void test_kernel_transfer_slowdown(void) {
    hand_sched h;
    hand_init(&h, 2);
    h.s.cfg.moe_token_dispatcher_type = EP_DISPATCHER_FLEX;
    h.s.cfg.moe_flex_dispatcher_backend = EP_FLEX_HYBRIDEP;
    h.s.cfg.ep_transport = EP_TRANSPORT_KERNEL;
    int g = hand_group(&h, 2);
    ep_op gemm = hand_gemm(8192);
    hand_add(&h, 0, gemm, 0, NULL);
    hand_a2a_pair(&h, g, 32ll << 20, 16);
    CU_ASSERT_FATAL(!ep_algo_is_nccl(h.rs[0].ops[1].algo));
    sim_calib c;
    sim_calib_default(&c);
    c.comm_hbm_fraction = 0;
    c.comm_flops_slowdown = 3.0; /* NCCL's: must not apply */
    c.kernel_flops_slowdown.n = 2;
    c.kernel_flops_slowdown.x[0] = 8, c.kernel_flops_slowdown.y[0] = 1.2;
    c.kernel_flops_slowdown.x[1] = 16, c.kernel_flops_slowdown.y[1] = 1.5;
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL_FATAL(res.rc, 0);
    check_gemm_beside_transfer(&res, &c, &gemm, 1.5);
}

/* Where the calibration measured sharing by the victim's shape (share_nccl_*, share_kernel_*), a
 * GEMM beside a transfer runs at 1 / its shape's factor, not at the one-GEMM factors: beside an
 * NCCL all-to-all and beside an SM-driven transfer of 16 SMs. */
static void test_shape_transfer_slowdown(void) {
    for (int kernel = 0; kernel < 2; kernel++) {
        hand_sched h;
        hand_init(&h, 2);
        if (kernel) {
            h.s.cfg.moe_token_dispatcher_type = EP_DISPATCHER_FLEX;
            h.s.cfg.moe_flex_dispatcher_backend = EP_FLEX_HYBRIDEP;
            h.s.cfg.ep_transport = EP_TRANSPORT_KERNEL;
        }
        int g = hand_group(&h, 2);
        ep_op gemm = hand_gemm(8192);
        gemm.m = gemm.n = gemm.k = 8192; /* the shape the tables are read at */
        hand_add(&h, 0, gemm, 0, NULL);
        hand_a2a_pair(&h, g, 32ll << 20, kernel ? 16 : 0);
        CU_ASSERT_FATAL(ep_algo_is_nccl(h.rs[0].ops[1].algo) == !kernel);
        sim_calib c;
        sim_calib_default(&c);
        c.comm_hbm_fraction = 0;
        c.comm_flops_slowdown = 3.0; /* the one-GEMM factors: must not apply */
        c.kernel_flops_slowdown.n = 1;
        c.kernel_flops_slowdown.x[0] = 16, c.kernel_flops_slowdown.y[0] = 2.5;
        /* two measured shapes of the GEMM's widths around its rows: read between them */
        double f[SIM_SHAPE_DIMS];
        sim_shape_table *t = kernel ? c.share_kernel_gemm : c.share_nccl_gemm;
        sim_gemm_features(0, gemm.m / 2.0, gemm.n, gemm.k, 1, f);
        CU_ASSERT_FATAL(sim_shape_add(&t[0], f, 1.6) == 0);
        sim_gemm_features(0, gemm.m * 2.0, gemm.n, gemm.k, 1, f);
        CU_ASSERT_FATAL(sim_shape_add(&t[0], f, 1.8) == 0);
        CU_ASSERT_FATAL(sim_shape_sort(&t[0]) == 0);
        hand_result res;
        hand_run(&h, "h200x2", &c, &res);
        CU_ASSERT_EQUAL_FATAL(res.rc, 0);
        check_gemm_beside_transfer(&res, &c, &gemm, 1.7); /* halfway in log(rows) */
        sim_calib_free(&c);
    }
}

/* --tp-comm-overlap's all-gather on the tp stream moves by copy engines (Transformer Engine's
 * userbuffers): a GEMM beside it runs at 1 / ce_flops_slowdown, not NCCL's 1 / comm_flops_slowdown,
 * and the transfer is not slowed by the compute. */
static void test_copy_engine_transfer_slowdown(void) {
    hand_sched h;
    hand_init(&h, 2);
    h.s.cfg.tp_comm_overlap = 1; /* without it the tp stream holds NCCL's async transfers */
    int g = hand_group(&h, 2);
    ep_op gemm = hand_gemm(8192);
    hand_add(&h, 0, gemm, 0, NULL);
    hand_collective(&h, 2, EP_OP_ALL_GATHER, EP_STREAM_TP, g, 64e6);
    sim_calib c;
    sim_calib_default(&c);
    c.comm_hbm_fraction = 0;
    c.comm_flops_slowdown = 3.0; /* NCCL's: must not apply */
    c.ce_flops_slowdown = 1.25;
    c.nccl_compute_slowdown = 2.0; /* nor slow the copies */
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL_FATAL(res.rc, 0);
    check_gemm_beside_transfer(&res, &c, &gemm, 1.25);
    double a0 = res.xfer[0][1], a1 = res.end[0][1];
    /* the same transfer without compute beside it takes as long */
    hand_sched h2;
    hand_init(&h2, 2);
    h2.s.cfg.tp_comm_overlap = 1;
    hand_collective(&h2, 2, EP_OP_ALL_GATHER, EP_STREAM_TP, hand_group(&h2, 2), 64e6);
    hand_result r2;
    hand_run(&h2, "h200x2", &c, &r2);
    CU_ASSERT_EQUAL_FATAL(r2.rc, 0);
    CU_ASSERT(REL(a1 - a0, r2.end[0][0] - r2.xfer[0][0]));
}

/* A memory-bound kernel on a second stream while a long GEMM runs: each is slowed by the corun
 * factor of its class beside the other's (docs/epsim.md, "Compute"), the GEMM only while both
 * run. */
static void test_compute_beside_compute(void) {
    hand_sched h;
    hand_init(&h, 1);
    ep_op gemm = hand_gemm(8192);
    hand_add(&h, 0, gemm, 0, NULL);
    ep_op mem = hand_op(EP_OP_ELEMENTWISE, EP_STREAM_COMM);
    mem.bytes = 4e9;
    hand_add(&h, 0, mem, 0, NULL);
    sim_calib c;
    sim_calib_default(&c);
    c.corun_compute_memory = 1.3;
    c.corun_memory_compute = 1.1;
    hand_result res;
    sim_work wg, wm;
    run_with_work(&h, &c, &gemm, &mem, &res, &wg, &wm);
    CU_ASSERT_FATAL(wm.t_mem > wm.t_flop && wg.t_flop > wg.t_mem); /* the two classes */
    double g0 = res.start[0][0], m0 = res.start[0][1], m1 = res.end[0][1];
    CU_ASSERT(REL(m1 - m0, wm.t0 + wm.t_mem * 1.1)); /* inside the GEMM all along */
    double G = sim_work_alone(&wg), Gs = wg.t0 + wg.t_flop * 1.3;
    double done = (m0 - g0) / G + (m1 - m0) / Gs;
    CU_ASSERT_FATAL(done < 1);
    CU_ASSERT(REL(res.end[0][0], m1 + (1 - done) * G));
}

/* Two transfers sharing the h200x2 link while GEMMs run: the second starts when rank 0's sixth GEMM
 * ends; they then split the link evenly until the first ends, and the second finishes alone. Own
 * events during transfers (GEMM ends) are handled from the predicted next transfer completion
 * (docs/epsim.md, "Execution model"); the times must be exactly those of the shared-link model. */
static void test_shared_link_with_compute(void) {
    hand_sched h;
    hand_init(&h, 2);
    int g0 = hand_group(&h, 2), g1 = hand_group(&h, 2);
    const int64_t S = 1000000000;
    hand_traffic_pair(&h, g0, S);
    ep_op gemm = hand_gemm(4096);
    enum { K = 6, M = 8 };
    for (int r = 0; r < 2; r++) {
        ep_op a = hand_op(EP_OP_A2A_DISPATCH, EP_STREAM_COMM);
        a.group = g0;
        a.seq = 0;
        a.traffic = 0;
        a.bytes = (double)S;
        hand_add(&h, r, a, 0, NULL);
        int last = -1;
        for (int k = 0; k < K && r == 0; k++)
            last = hand_add(&h, r, gemm, 0, NULL);
        ep_op b = hand_op(EP_OP_ALLTOALL, EP_STREAM_DP);
        b.group = g1;
        b.seq = 0;
        b.bytes = (double)S;
        hand_add(&h, r, b, r == 0, &last);
        for (int k = 0; k < M && r == 0; k++)
            hand_add(&h, r, gemm, 0, NULL);
    }
    sim_calib c;
    sim_calib_default(&c);
    c.comm_hbm_fraction = 0;
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL_FATAL(res.rc, 0);
    sim_work w;
    op_work(&c, &gemm, &w);
    double G = sim_work_alone(&w), L = c.launch_s, lat = 1e-6;
    double bw = 478.116e9 * c.nccl_nvlink_efficiency;
    double ta = L + c.nccl_base_s, t1 = 2 * L + K * G + c.nccl_base_s;
    CU_ASSERT_FATAL(t1 + lat < ta + lat + S / bw); /* the two overlap */
    double a_end = t1 + lat + 2 * (S / bw - (t1 - ta));
    double b_end = a_end + (t1 - ta);
    CU_ASSERT(REL(res.end[0][0], a_end));
    CU_ASSERT(REL(res.end[1][0], a_end));
    CU_ASSERT(REL(res.xfer[0][K + 1], t1 - c.nccl_base_s));
    CU_ASSERT(REL(res.end[0][K + 1], b_end));
    CU_ASSERT(REL(res.end[1][1], b_end));
    for (int k = 0; k < K + M; k++) /* GEMMs back to back from 2L, untouched by the transfers */
        CU_ASSERT(REL(res.end[0][k < K ? 1 + k : 2 + k], 2 * L + (k + 1) * G));
    CU_ASSERT(2 * L + (K + M) * G < b_end); /* every GEMM ended under a transfer */
    CU_ASSERT_EQUAL(res.nlate, 0);
    /* GEMM ends under a transfer were handled without a SimGrid wait each (17 waits if every
     * own event waited, 6 with the prediction) */
    CU_ASSERT(res.nwaits < K + M);
}

/* deepep / hybridep token all-to-all across two DGX nodes: one RDMA copy per destination node,
 * then NVLink fan-out. Rank 0 sends B to every GPU of node 1: the NIC carries B once, GPU 8's
 * NVLink 7 B. Returns the makespan. */
static double hier_makespan(ep_flex_backend backend, ep_op_kind kind, int sms, int64_t B,
                            const sim_calib *c) {
    hand_sched h;
    hand_init(&h, 16);
    h.s.cfg.moe_token_dispatcher_type = EP_DISPATCHER_FLEX;
    h.s.cfg.moe_flex_dispatcher_backend = backend;
    h.s.cfg.moe_hybridep_num_sms = sms;
    int g = hand_group(&h, 16);
    ep_traffic *t = hand_traffic(&h, g, 16, 2);
    t->node_bytes = h.tnode[0];
    for (int i = 0; i < 16; i++)
        t->node_of[i] = i / 8;
    for (int j = 8; j < 16; j++)
        t->bytes[0 * 16 + j] = B;
    t->node_bytes[0 * 2 + 1] = B;
    for (int r = 0; r < 16; r++) {
        ep_op op = hand_op(kind, EP_STREAM_COMM);
        op.group = g;
        op.seq = 0;
        op.traffic = 0;
        hand_add(&h, r, op, 0, NULL);
    }
    hand_result res;
    hand_run(&h, "dgx16", c, &res);
    CU_ASSERT_EQUAL(res.rc, 0);
    return res.rc == 0 ? res.makespan : -1;
}

/* The RDMA leg's efficiency: by nodes (two: 0.717, hybridep's combine 0.630: Hybrid-EP's published
 * 16-SM rows), and for hybridep at most its transfer SMs x the per-SM rate over the NIC's 50 GB/s
 * (4 SMs: 4 x 6.03 / 50 = 0.482). One parallel task: the most loaded link sets the time, plus the
 * longest route's latency (NIC out + NIC in = 2 us). */
static void test_hierarchical_dispatch_dgx16(void) {
    sim_calib c;
    sim_calib_default(&c);
    const int64_t B = 32ll << 20;
    const struct {
        ep_flex_backend backend;
        ep_op_kind kind;
        int sms;
        double eff;
    } cases[] = {
        {EP_FLEX_DEEPEP, EP_OP_A2A_DISPATCH, 4, 0.717}, /* deepep: no SM bound */
        {EP_FLEX_DEEPEP, EP_OP_A2A_COMBINE, 4, 0.717},  /* deepep's combine as its dispatch */
        {EP_FLEX_HYBRIDEP, EP_OP_A2A_COMBINE, 16, 0.630},
        {EP_FLEX_HYBRIDEP, EP_OP_A2A_DISPATCH, 16, 0.717}, /* 16 x 6.03 / 50 = 1.93: not bound */
        {EP_FLEX_HYBRIDEP, EP_OP_A2A_DISPATCH, 4, 4 * 6.03e9 / 50e9},
        {EP_FLEX_HYBRIDEP, EP_OP_A2A_COMBINE, 4, 4 * 6.03e9 / 50e9},
    };
    double nvl = 7.0 * B / (450e9 * c.ep_nvlink_efficiency);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double nic = B / (50e9 * cases[i].eff);
        double expect = c.launch_s + c.ep_kernel_base_s + fmax(nic, nvl) + 2e-6;
        CU_ASSERT(nic > nvl);
        CU_ASSERT(REL(hier_makespan(cases[i].backend, cases[i].kind, cases[i].sms, B, &c), expect));
    }
}

/* A collective whose second member never posts its op cannot finish: reported, not hung. */
static void test_deadlock_reported(void) {
    hand_sched h;
    hand_init(&h, 2);
    int g = hand_group(&h, 2);
    ep_op ar = hand_op(EP_OP_ALL_REDUCE, EP_STREAM_COMM);
    ar.group = g;
    ar.seq = 0;
    ar.bytes = 1e6;
    hand_add(&h, 0, ar, 0, NULL);
    hand_add(&h, 1, hand_op(EP_OP_ELEMENTWISE, EP_STREAM_COMP), 0, NULL);
    sim_calib c;
    sim_calib_default(&c);
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL(res.rc, -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(res.err, "deadlocked"));
}

/* A world larger than the platform is refused before simulating. */
static void test_world_too_large(void) {
    hand_sched h;
    hand_init(&h, 4);
    sim_calib c;
    sim_calib_default(&c);
    hand_result res;
    hand_run(&h, "h200x2", &c, &res);
    CU_ASSERT_EQUAL(res.rc, -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(res.err, "does not fit"));
}

/* The table of test_power_cap at this duty, linear in duty, rounded to 1e-3. */
static double paper_slowdown(double duty, const double pts[][2]) {
    int k = duty >= 0.75;
    double y =
        duty <= 0.5 ? 1.0 : pts[k][1] + (duty - pts[k][0]) / 0.25 * (pts[k + 1][1] - pts[k][1]);
    return round(y * 1000) / 1000;
}

/* One pass of test_power_cap's rule on paper, from duty d0 at t = 0, with the engine's starts
 * (gaps between ops as the engine has them; the first op's launch wait). With res, checks each
 * op's end against it; returns the duty at the last op's end (*end_t). */
static double paper_pass(double d0, const hand_result *res, const sim_work *wg, const sim_work *wm,
                         const double pts[][2], double tau, int check, double *end_t,
                         double *slow7) {
    double t = 0, duty = d0;
    for (int i = 0; i < 16; i++) {
        double gap = i ? res->start[0][i] - res->end[0][i - 1] : res->start[0][0];
        duty *= exp(-gap / tau); /* idle: weight 0 */
        t += gap;
        double f = i == 8 ? 1.0 : paper_slowdown(duty, pts), w = i == 8 ? 0.0 : 1.0;
        double dur = i == 8 ? sim_work_alone(wm) : wg->t0 + wg->t_flop * f;
        /* the first also waits for its launch to be issued (min_end): within 10 us */
        if (check) CU_ASSERT(fabs(res->end[0][i] - (res->start[0][i] + dur)) < (i ? 1e-9 : 1e-5));
        duty = w + (duty - w) * exp(-dur / tau);
        t += dur;
        if (i == 7 && slow7) *slow7 = f;
    }
    *end_t = t;
    return duty;
}

/* The power cap (sim_power.h): 8 large GEMMs back to back, an HBM-bound op of about 0.3 s, then 7
 * GEMMs, on one GPU. The duty is the average of 1 (a GEMM runs) and 0 (the memory op) over
 * power_tau_s; each GEMM's flop time runs table(duty at its start) longer (nothing else re-times
 * it here), the memory op not at all. The step starts as hot as the same step left the GPU
 * (sim_power_steady_start): worked out on paper from a cold pass, then checked op by op. */
static void test_power_cap(void) {
    hand_sched h;
    hand_init(&h, 1);
    ep_op gemm = hand_gemm(32768), mem = hand_op(EP_OP_ELEMENTWISE, EP_STREAM_COMP);
    mem.bytes = 1.2e12;
    for (int i = 0; i < 16; i++)
        hand_add(&h, 0, i == 8 ? mem : gemm, 0, NULL);
    sim_calib c;
    sim_calib_default(&c);
    static const double pts[][2] = {{0.5, 1.0}, {0.75, 1.05}, {1.0, 1.2}};
    c.power_duty_slowdown.n = 3;
    for (int i = 0; i < 3; i++)
        c.power_duty_slowdown.x[i] = pts[i][0], c.power_duty_slowdown.y[i] = pts[i][1];
    c.power_tau_s = 0.1;
    hand_result res;
    sim_work wg, wm;
    run_with_work(&h, &c, &gemm, &mem, &res, &wg, &wm);
    CU_ASSERT_FATAL(wg.t_flop > 1.2 * wg.t_mem && wm.t_mem > 1.2 * wm.t_flop);
    double t_cold, t_steady, slow7 = 0;
    double end_cold = paper_pass(0, &res, &wg, &wm, pts, c.power_tau_s, 0, &t_cold, NULL);
    double d0 = sim_power_steady_start(&c, end_cold, t_cold);
    CU_ASSERT(d0 > end_cold && d0 <= 1.0);
    CU_ASSERT(fabs(d0 - end_cold / (1 - exp(-t_cold / c.power_tau_s))) < 1e-12 || d0 == 1.0);
    double end_steady = paper_pass(d0, &res, &wg, &wm, pts, c.power_tau_s, 1, &t_steady, &slow7);
    CU_ASSERT(fabs(end_steady - d0) < 0.02); /* the steady state: it ends about where it began */
    CU_ASSERT(slow7 > 1.15);                 /* the duty reached about 1 before the memory op */
    /* the first GEMM starts hot: slower than the coolest one, right after the memory op */
    CU_ASSERT(res.end[0][0] - res.start[0][0] > res.end[0][9] - res.start[0][9]);
    CU_ASSERT(res.end[0][9] - res.start[0][9] < res.end[0][7] - res.start[0][7]);
    CU_ASSERT(fabs(sim_power_slowdown(&c, 0.875) - 1.125) < 1e-12);
    CU_ASSERT(sim_power_slowdown(&c, 0.2) == 1.0 && sim_power_slowdown(&c, 2.0) == 1.2);
}

void ep_suite_engine(void) {
    CU_pSuite s = CU_add_suite("sim_engine", NULL, NULL);
    CU_add_test(s, "one all-to-all on h200x2 = launch + base + bytes/bw + latency",
                test_a2a_h200x2);
    CU_add_test(s, "ring all-reduce on dgx8 within 1% of 2(n-1)/n S/B", test_ring_allreduce_dgx8);
    CU_add_test(s, "a ring across nodes: one channel per rail, one member per node one NIC",
                test_ring_channels_across_nodes);
    CU_add_test(s, "a ring over two nodes ends at the same time split by zone",
                test_ring_split_same_end);
    CU_add_test(s, "two-microbatch overlap times", test_two_microbatch_overlap);
    CU_add_test(s, "host sync blocks launching", test_host_sync_blocks_launch);
    CU_add_test(s, "comm SMs slow a concurrent GEMM", test_sm_contention);
    CU_add_test(s, "an SM-driven transfer slows a GEMM by its own measured factor",
                test_kernel_transfer_slowdown);
    CU_add_test(s, "a GEMM beside a transfer runs at its shape's measured factor",
                test_shape_transfer_slowdown);
    CU_add_test(s,
                "a copy-engine transfer (TP overlap's all-gather) slows a GEMM by its own factor",
                test_copy_engine_transfer_slowdown);
    CU_add_test(s, "deepep / hybridep across nodes: the RDMA leg by direction and SMs",
                test_hierarchical_dispatch_dgx16);
    CU_add_test(s, "compute beside compute follows the corun factors", test_compute_beside_compute);
    CU_add_test(s, "two transfers share a link under running GEMMs", test_shared_link_with_compute);
    CU_add_test(s, "missing collective member reported as deadlock", test_deadlock_reported);
    CU_add_test(s, "world larger than the platform refused", test_world_too_large);
    CU_add_test(s, "power cap: GEMMs slow with the recent tensor-core duty", test_power_cap);
}
