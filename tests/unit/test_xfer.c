/* ep_xfer: what each kind moves per member (the table), the algorithm and SMs the generators record
 * for every communication op, and the transport grid: over (EP, world, GPUs per node, dispatcher,
 * transport), every token all-to-all carries the algorithm its group's shape calls for, and epref
 * runs exactly the ones it implements (ref/exec_plan.c) while epsim costs every one
 * (tests/sim/test_net.c holds sim/sim_algo.c's table). */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>

#include "ep_xfer.h"
#include "exec_plan.h"
#include "sched_test_util.h"

#define NVL_MAX 8 /* epref's NVLink transport: ranks of one group (kernels/ep_kernels.h) */

static int near(double a, double b) {
    return fabs(a - b) <= 1e-12 * fabs(b);
}

/* The nccl-tests byte counts, by hand, for a group of 4 and B = 1000 bytes. */
static void test_sizes(void) {
    ep_xfer_size z = ep_xfer_size_of(EP_OP_ALL_GATHER, 4, 1000);
    CU_ASSERT(near(z.send, 1000) && near(z.recv, 4000) && near(z.link, 3000) && z.steps == 3);
    z = ep_xfer_size_of(EP_OP_REDUCE_SCATTER, 4, 1000); /* whole fp32 counts: 63 x 4 x 4 */
    CU_ASSERT(near(z.send, 1008) && near(z.recv, 252) && near(z.link, 750) && z.steps == 3);
    z = ep_xfer_size_of(EP_OP_ALL_REDUCE, 4, 1000);
    CU_ASSERT(near(z.send, 1000) && near(z.recv, 1000) && near(z.link, 1500) && z.steps == 6);
    z = ep_xfer_size_of(EP_OP_ALLTOALL, 4, 1000); /* bytes per peer */
    CU_ASSERT(near(z.send, 4000) && near(z.recv, 4000) && near(z.link, 3000) && z.steps == 0);
    z = ep_xfer_size_of(EP_OP_A2A_DISPATCH, 4, 1000); /* bytes sent: per peer from the traffic */
    CU_ASSERT(z.send < 0 && z.recv < 0 && near(z.link, 1000) && z.steps == 0);
    z = ep_xfer_size_of(EP_OP_SEND, 2, 1000);
    CU_ASSERT(near(z.send, 1000) && z.recv == 0 && near(z.link, 1000));
    z = ep_xfer_size_of(EP_OP_RECV, 2, 1000);
    CU_ASSERT(z.send == 0 && near(z.recv, 1000));
    z = ep_xfer_size_of(EP_OP_ALL_REDUCE, 1, 1000); /* a group of one moves nothing */
    CU_ASSERT(z.link == 0 && z.steps == 0);
}

/* The plan of a token all-to-all over ranks {0..n) of a given stride, for the flags. */
static ep_xfer_plan plan_of(const char *flags, int n, int stride) {
    ep_config cfg;
    char err[EP_ERRLEN];
    ep_xfer_plan none = {EP_ALGO_NUM, -1};
    if (ep_test_config(&cfg, flags, err) != 0) {
        fprintf(stderr, "\n  flags: %s\n  error: %s\n", flags, err);
        return none;
    }
    int ranks[64];
    for (int i = 0; i < n; i++)
        ranks[i] = i * stride;
    ep_group g = {EP_GROUP_EP, n, ranks};
    return ep_xfer_plan_of(&cfg, EP_OP_A2A_DISPATCH, &g);
}

static void test_plans(void) {
#define BASE    SCHED_SMALL "--world-size 16 --global-batch-size 16 "
#define FLEX(b) BASE "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend " b " "
    ep_xfer_plan p = plan_of(BASE, 8, 1);
    CU_ASSERT(p.algo == EP_ALGO_DIRECT && p.sms == 0);
    p = plan_of(FLEX("deepep"), 8, 1);
    CU_ASSERT(p.algo == EP_ALGO_NVLINK && p.sms == 20);
    p = plan_of(FLEX("deepep"), 8, 2); /* ranks 0..14: two nodes of 8 */
    CU_ASSERT(p.algo == EP_ALGO_HIER && p.sms == 20);
    p = plan_of(FLEX("deepep") "--gpus-per-node 16", 8, 2);
    CU_ASSERT(p.algo == EP_ALGO_NVLINK);
    p = plan_of(FLEX("hybridep") "--moe-hybridep-fuse-permute", 4, 1);
    CU_ASSERT(p.algo == EP_ALGO_NVLINK && p.sms == 16 + 16);
    p = plan_of(FLEX("hybridep") "--moe-flex-transport nccl", 4, 1);
    CU_ASSERT(p.algo == EP_ALGO_DIRECT && p.sms == 0);
#undef FLEX
#undef BASE
    ep_config cfg;
    ep_config_defaults(&cfg);
    CU_ASSERT(ep_xfer_plan_of(&cfg, EP_OP_ALL_REDUCE, NULL).algo == EP_ALGO_RING);
    CU_ASSERT(ep_xfer_plan_of(&cfg, EP_OP_REDUCE_SCATTER, NULL).algo == EP_ALGO_RING);
    CU_ASSERT(ep_xfer_plan_of(&cfg, EP_OP_ALLTOALL, NULL).algo == EP_ALGO_DIRECT);
    CU_ASSERT(ep_xfer_plan_of(&cfg, EP_OP_RECV, NULL).algo == EP_ALGO_P2P);
    CU_ASSERT(ep_xfer_plan_of(&cfg, EP_OP_GEMM, NULL).algo == EP_ALGO_NONE);
}

/* Every communication op of the schedule carries an algorithm of its kind; token all-to-alls the
 * one of their group's shape. Returns what the grid case expects epref to do: 0 runs, 1 refuses. */
static int check_ops(const ep_sched *s, int flex_kernel, int *bad) {
    int hier = 0;
    for (int r = 0; r < s->world; r++)
        for (int i = 0; i < s->ranks[r].nops; i++) {
            const ep_op *op = &s->ranks[r].ops[i];
            if (!ep_op_is_comm(op)) {
                *bad |= op->algo != EP_ALGO_NONE;
                continue;
            }
            if (op->kind != EP_OP_A2A_DISPATCH && op->kind != EP_OP_A2A_COMBINE) {
                *bad |= op->algo == EP_ALGO_NONE || op->algo == EP_ALGO_NVLINK ||
                        op->algo == EP_ALGO_HIER || op->sms != 0;
                continue;
            }
            const ep_group *g = &s->groups[op->group];
            int one_node = 1;
            for (int j = 1; j < g->size; j++)
                one_node &= g->ranks[j] / s->cfg.gpus_per_node == g->ranks[0] / s->cfg.gpus_per_node;
            int want = !flex_kernel ? EP_ALGO_DIRECT : one_node ? EP_ALGO_NVLINK : EP_ALGO_HIER;
            *bad |= op->algo != want || (op->sms > 0) != (want != EP_ALGO_DIRECT);
            hier |= op->algo == EP_ALGO_HIER;
        }
    return hier;
}

static void test_transport_grid(void) {
    static const char *const disp[] = {
        "--moe-token-dispatcher-type alltoall",
        "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep",
        "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep",
    };
    static const int worlds[] = {8, 16}, gpns[] = {2, 4, 8}, eps[] = {2, 4, 8, 16};
    int cases = 0, refused = 0;
    for (size_t d = 0; d < 3; d++)
        for (int nccl = 0; nccl < 2; nccl++)
            for (size_t w = 0; w < 2; w++)
                for (size_t gp = 0; gp < 3; gp++)
                    for (size_t e = 0; e < 4; e++) {
                        if (eps[e] > worlds[w] || (d == 0 && nccl)) continue; /* flex only */
                        char flags[1024];
                        snprintf(flags, sizeof flags,
                                 SCHED_SMALL "--num-experts 16 --global-batch-size %d "
                                             "--world-size %d --gpus-per-node %d "
                                             "--expert-model-parallel-size %d %s%s",
                                 worlds[w], worlds[w], gpns[gp], eps[e], disp[d],
                                 nccl ? " --moe-flex-transport nccl" : "");
                        ep_sched s;
                        if (sched_build_flags(&s, flags) != 0) continue;
                        int bad = 0, flex_kernel = d > 0 && !nccl;
                        int hier = check_ops(&s, flex_kernel, &bad);
                        char err[EP_ERRLEN];
                        int rc = exec_plan_check(&s, NVL_MAX, err);
                        if (bad || (rc != 0) != hier)
                            fprintf(stderr, "\n  %s: ops %s, epref %s\n", flags,
                                    bad ? "wrong" : "ok", rc ? err : "runs");
                        CU_ASSERT(!bad);
                        CU_ASSERT((rc != 0) == hier);
                        refused += rc != 0;
                        cases++;
                        ep_sched_free(&s);
                    }
    CU_ASSERT(cases == 5 * 3 * 7); /* alltoall, deepep and hybridep with both transports */
    CU_ASSERT(refused > 0 && refused < cases); /* the grid holds both */
}

/* The NVLink staging of every member of an EP group holds the largest payload any member sends any
 * other (each rank's own largest send is not enough: a peer writes its rows and flags at offsets of
 * its own region layout, so the layouts must agree; the EP 4 crash of a skewed routing). */
static void test_nvl_payload(void) {
    ep_sched s;
    CU_ASSERT_FATAL(sched_build_flags(&s, SCHED_SMALL "--num-experts 16 --moe-router-topk 2 "
                                                      "--global-batch-size 8 --world-size 4 "
                                                      "--gpus-per-node 4 "
                                                      "--expert-model-parallel-size 4 "
                                                      "--moe-token-dispatcher-type flex "
                                                      "--moe-flex-dispatcher-backend hybridep "
                                                      "--routing zipf --routing-zipf-s 1.2") == 0);
    int gi = exec_plan_nvl_group(&s, 0);
    CU_ASSERT_FATAL(gi >= 0);
    double payload = ep_xfer_kernel_payload(&s, gi), own_max[4] = {0}, largest = 0;
    for (int r = 0; r < 4; r++) {
        CU_ASSERT(exec_plan_nvl_group(&s, r) == gi);
        for (int i = 0; i < s.ranks[r].nops; i++) {
            const ep_op *op = &s.ranks[r].ops[i];
            if (op->algo != EP_ALGO_NVLINK) continue;
            const ep_traffic *tr = &s.traffic[op->traffic];
            int me = -1;
            for (int j = 0; j < tr->n; j++)
                if (s.groups[gi].ranks[j] == r) me = j;
            for (int p = 0; p < tr->n; p++) {
                double b = p == me ? 0 : ep_xfer_a2a_bytes(tr, op, me, p);
                if (b > own_max[r]) own_max[r] = b;
            }
        }
        if (own_max[r] > largest) largest = own_max[r];
    }
    CU_ASSERT(payload > 0);
    CU_ASSERT(payload == largest); /* no slack: the largest real send */
    int differ = 0;
    for (int r = 1; r < 4; r++)
        differ |= own_max[r] != own_max[0];
    CU_ASSERT(differ); /* the case the test stands for: members' own maxima differ */
    ep_sched_free(&s);
}

void ep_suite_xfer(void) {
    CU_pSuite s = CU_add_suite("xfer", NULL, NULL);
    CU_add_test(s, "what each kind moves per member", test_sizes);
    CU_add_test(s, "algorithm and SMs of each op", test_plans);
    CU_add_test(s, "transport grid: epsim and epref take the same transport", test_transport_grid);
    CU_add_test(s, "NVLink staging holds the group's largest payload", test_nvl_payload);
}
