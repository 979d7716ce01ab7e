/* Process groups: Megatron's rank order (dense tp-cp-dp-pp, expert etp-ep-edp-pp), the HSDP
 * example of docs/schedule.md, section 7 exactly, and the partition property for several layouts. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "ep_groups.h"
#include "test_util.h"

static char g_err[EP_ERRLEN];

/* Asserts that rank's group of `kind` is exactly want[0..n). */
static void expect_group(const ep_config *cfg, ep_group_kind kind, int rank, const int *want,
                         int n) {
    int out[1024];
    int got = ep_group_members(cfg, kind, rank, out);
    int ok = got == n;
    for (int i = 0; ok && i < n; i++)
        ok = out[i] == want[i];
    if (!ok) {
        printf("\n  %s group of rank %d:", ep_group_kind_name(kind), rank);
        for (int i = 0; i < got; i++)
            printf(" %d", out[i]);
    }
    CU_ASSERT_TRUE(ok);
}

#define GROUP(cfg, kind, rank, ...)                                                                \
    do {                                                                                           \
        const int w_[] = {__VA_ARGS__};                                                            \
        expect_group(cfg, kind, rank, w_, (int)(sizeof w_ / sizeof w_[0]));                        \
    } while (0)

static void test_hsdp_example(void) {
    ep_config c;
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&c,
                                         "--world-size 16 --expert-model-parallel-size 4 "
                                         "--num-distributed-optimizer-instances 2 "
                                         "--use-megatron-fsdp --global-batch-size 16",
                                         g_err),
                          0);
    /* EP groups {0-3},{4-7},... */
    for (int g = 0; g < 4; g++)
        for (int r = 4 * g; r < 4 * g + 4; r++)
            GROUP(&c, EP_GROUP_EP, r, 4 * g, 4 * g + 1, 4 * g + 2, 4 * g + 3);
    /* expert-DP {0,4,8,12} */
    GROUP(&c, EP_GROUP_EDP, 0, 0, 4, 8, 12);
    GROUP(&c, EP_GROUP_EDP, 8, 0, 4, 8, 12);
    GROUP(&c, EP_GROUP_EDP, 5, 1, 5, 9, 13);
    /* inner expert-DP {0,4},{8,12} */
    GROUP(&c, EP_GROUP_EDP_INNER, 0, 0, 4);
    GROUP(&c, EP_GROUP_EDP_INNER, 4, 0, 4);
    GROUP(&c, EP_GROUP_EDP_INNER, 12, 8, 12);
    GROUP(&c, EP_GROUP_EDP_INNER, 9, 9, 13);
    /* outer {0,8},{4,12},... */
    GROUP(&c, EP_GROUP_EDP_OUTER, 0, 0, 8);
    GROUP(&c, EP_GROUP_EDP_OUTER, 4, 4, 12);
    GROUP(&c, EP_GROUP_EDP_OUTER, 13, 5, 13);
    /* dense inner {0-7},{8-15}; dense outer pairs rank r with r+8 */
    GROUP(&c, EP_GROUP_DP_INNER, 3, 0, 1, 2, 3, 4, 5, 6, 7);
    GROUP(&c, EP_GROUP_DP_INNER, 8, 8, 9, 10, 11, 12, 13, 14, 15);
    GROUP(&c, EP_GROUP_DP_OUTER, 0, 0, 8);
    GROUP(&c, EP_GROUP_DP_OUTER, 15, 7, 15);
    GROUP(&c, EP_GROUP_DP, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    GROUP(&c, EP_GROUP_TPEP, 6, 4, 5, 6, 7);
    GROUP(&c, EP_GROUP_TP, 6, 6);
    ep_coords d, e;
    ep_rank_coords(&c, 13, &d, &e);
    CU_ASSERT_EQUAL(d.dp, 13);
    CU_ASSERT_EQUAL(d.tp, 0);
    CU_ASSERT_EQUAL(e.ep, 1);
    CU_ASSERT_EQUAL(e.edp, 3);
    CU_ASSERT_EQUAL(e.pp, 0);
    int out[16];
    CU_ASSERT_EQUAL(ep_group_members(&c, EP_GROUP_P2P, 0, out), 0);
    CU_ASSERT_EQUAL(ep_group_members(&c, EP_GROUP_EP, 16, out), 0);
}

static void test_tp_cp_pp_order(void) {
    ep_config c;
    /* TP 2, EP 4 with ETP defaulting to TP: one expert group spans the whole stage */
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&c,
                                         "--world-size 8 --tensor-model-parallel-size 2 "
                                         "--expert-model-parallel-size 4",
                                         g_err),
                          0);
    GROUP(&c, EP_GROUP_TP, 5, 4, 5);
    GROUP(&c, EP_GROUP_EP, 0, 0, 2, 4, 6);
    GROUP(&c, EP_GROUP_EP, 3, 1, 3, 5, 7);
    GROUP(&c, EP_GROUP_TPEP, 3, 0, 1, 2, 3, 4, 5, 6, 7);
    GROUP(&c, EP_GROUP_EDP, 3, 3);
    /* expert TP: the two ranks that split the experts of EP index 1 */
    GROUP(&c, EP_GROUP_ETP, 3, 2, 3);
    GROUP(&c, EP_GROUP_ETP, 6, 6, 7);
    /* same with ETP 1: EP groups are consecutive ranks again */
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&c,
                                         "--world-size 8 --tensor-model-parallel-size 2 "
                                         "--expert-model-parallel-size 4 "
                                         "--expert-tensor-parallel-size 1",
                                         g_err),
                          0);
    GROUP(&c, EP_GROUP_EP, 5, 4, 5, 6, 7);
    GROUP(&c, EP_GROUP_EDP, 5, 1, 5);
    GROUP(&c, EP_GROUP_TPEP, 5, 4, 5, 6, 7);
    GROUP(&c, EP_GROUP_ETP, 5, 5);
    GROUP(&c, EP_GROUP_DP, 5, 1, 3, 5, 7);

    /* PP outermost: stage 1 holds ranks 4..7 */
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&c,
                                         "--world-size 8 --pipeline-model-parallel-size 2 "
                                         "--expert-model-parallel-size 2",
                                         g_err),
                          0);
    GROUP(&c, EP_GROUP_PP, 1, 1, 5);
    GROUP(&c, EP_GROUP_DP, 5, 4, 5, 6, 7);
    GROUP(&c, EP_GROUP_EP, 5, 4, 5);
    GROUP(&c, EP_GROUP_EDP, 5, 5, 7);
    ep_coords d;
    ep_rank_coords(&c, 6, &d, NULL);
    CU_ASSERT_EQUAL(d.pp, 1);
    CU_ASSERT_EQUAL(d.dp, 2);

    /* CP between TP and DP; the DP group spans dp x cp; HSDP outer keeps cp fixed */
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&c,
                                         "--world-size 8 --tensor-model-parallel-size 2 "
                                         "--context-parallel-size 2 --use-megatron-fsdp "
                                         "--num-distributed-optimizer-instances 2 "
                                         "--expert-tensor-parallel-size 1 "
                                         "--expert-model-parallel-size 2",
                                         g_err),
                          0);
    GROUP(&c, EP_GROUP_CP, 0, 0, 2);
    GROUP(&c, EP_GROUP_DP, 0, 0, 2, 4, 6);
    GROUP(&c, EP_GROUP_DP_INNER, 0, 0, 2);
    GROUP(&c, EP_GROUP_DP_OUTER, 0, 0, 4);
    GROUP(&c, EP_GROUP_DP_OUTER, 3, 3, 7);
    GROUP(&c, EP_GROUP_EDP_INNER, 0, 0, 2);
    GROUP(&c, EP_GROUP_EDP_OUTER, 0, 0, 4);
}

/* Every kind partitions the world: each rank's group contains it, and every member agrees. */
static void test_partition(void) {
    const char *layouts[] = {
        "--world-size 16 --expert-model-parallel-size 4 --num-distributed-optimizer-instances 2 "
        "--use-megatron-fsdp --global-batch-size 16",
        "--world-size 32 --tensor-model-parallel-size 2 --context-parallel-size 2 "
        "--pipeline-model-parallel-size 2 --expert-model-parallel-size 4 "
        "--expert-tensor-parallel-size 1 --use-distributed-optimizer "
        "--num-distributed-optimizer-instances 2 --global-batch-size 16",
        "--world-size 8 --tensor-model-parallel-size 4 --expert-model-parallel-size 8 "
        "--expert-tensor-parallel-size 1"};
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        ep_config c;
        CU_ASSERT_EQUAL_FATAL(ep_test_config(&c, layouts[k], g_err), 0);
        for (int kind = 0; kind < EP_GROUP_NUM_KINDS; kind++) {
            if (kind == EP_GROUP_P2P) continue;
            int total = 0;
            for (int r = 0; r < c.world_size; r++) {
                int a[64], b[64];
                int n = ep_group_members(&c, kind, r, a);
                int has = 0;
                for (int i = 0; i < n; i++) {
                    has |= a[i] == r;
                    if (i) CU_ASSERT_TRUE(a[i] > a[i - 1]);
                    int m = ep_group_members(&c, kind, a[i], b);
                    CU_ASSERT_EQUAL(m, n);
                    CU_ASSERT_EQUAL(memcmp(a, b, (size_t)n * sizeof a[0]), 0);
                }
                CU_ASSERT_TRUE(has);
                if (a[0] == r) total += n; /* count each group once, at its first member */
            }
            CU_ASSERT_EQUAL(total, c.world_size);
        }
        /* sizes follow the layout */
        int a[64];
        CU_ASSERT_EQUAL(ep_group_members(&c, EP_GROUP_EP, 0, a), c.expert_model_parallel_size);
        CU_ASSERT_EQUAL(ep_group_members(&c, EP_GROUP_TP, 0, a), c.tensor_model_parallel_size);
        CU_ASSERT_EQUAL(ep_group_members(&c, EP_GROUP_DP, 0, a),
                        c.data_parallel_size * c.context_parallel_size);
        CU_ASSERT_EQUAL(ep_group_members(&c, EP_GROUP_DP_INNER, 0, a) *
                            c.num_distributed_optimizer_instances,
                        c.data_parallel_size * c.context_parallel_size);
        CU_ASSERT_EQUAL(ep_group_members(&c, EP_GROUP_WORLD, 0, a), c.world_size);
    }
}

static void test_kind_names(void) {
    for (int i = 0; i < EP_GROUP_NUM_KINDS; i++) {
        CU_ASSERT_STRING_NOT_EQUAL(ep_group_kind_name(i), "?");
        for (int j = 0; j < i; j++)
            CU_ASSERT_STRING_NOT_EQUAL(ep_group_kind_name(i), ep_group_kind_name(j));
    }
    CU_ASSERT_STRING_EQUAL(ep_group_kind_name(EP_GROUP_EDP_INNER), "edp_inner");
}

void ep_suite_groups(void) {
    CU_pSuite s = CU_add_suite("groups", NULL, NULL);
    CU_add_test(s, "HSDP groups for 16 GPUs, EP=4, N=2 (docs/schedule.md, section 7)", test_hsdp_example);
    CU_add_test(s, "rank order with TP, ETP, CP and PP", test_tp_cp_pp_order);
    CU_add_test(s, "every kind partitions the world", test_partition);
    CU_add_test(s, "kind names", test_kind_names);
}
