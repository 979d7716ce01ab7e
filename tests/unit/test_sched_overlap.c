/* The combined-1F1B EP-overlap order of docs/schedule.md, section 5, written out node by node for
 * 2 MoE layers and 3 microbatches (PP=1): the first forward and the last backward alone, then
 * forward of microbatch i paired with backward of i-1, forward layer j with backward layer 1-j.
 * Also: without overlap, every dispatch/combine node waits for the node before it and is waited
 * for by the next (nothing overlaps, as on Megatron's sequential path). */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "sched_test_util.h"

#define OVERLAP_FLAGS                                                                              \
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "             \
                "--overlap-moe-expert-parallel-comm"

/* Token of an op: f/b/w (fwd, bwd, bwd_dw) + microbatch + layer node, or emb/out for the
 * embedding and the output layer. keep_dw = 0 folds wgrad ops into their backward node. */
static void token(const ep_op *op, int keep_dw, char *buf, size_t n) {
    char ph =
        op->phase == EP_PHASE_FWD ? 'f' : (op->phase == EP_PHASE_BWD_DW && keep_dw ? 'w' : 'b');
    if (op->layer >= 0)
        snprintf(buf, n, "%c%d.L%d.%s", ph, op->mb, op->layer, ep_node_name(op->node));
    else
        snprintf(buf, n, "%c%d.%s", ph == 'w' ? 'b' : ph, op->mb,
                 strcmp(op->label, "embedding") == 0 ? "emb" : "out");
}

/* The node sequence of rank 0 (consecutive ops of one node collapse into one token). */
static int node_sequence(const ep_sched *s, int keep_dw, char tokens[][32], int max) {
    int n = 0;
    for (int i = 0; i < s->ranks[0].nops; i++) {
        const ep_op *op = &s->ranks[0].ops[i];
        if (op->mb < 0 || op->stream == EP_STREAM_DP || op->stream == EP_STREAM_PP) continue;
        char t[32];
        token(op, keep_dw, t, sizeof t);
        if (n > 0 && strcmp(tokens[n - 1], t) == 0) continue;
        if (n == max) return -1;
        strcpy(tokens[n++], t);
        /* dispatch and combine nodes are on the comm stream, all others on comp */
        int comm = op->node == EP_NODE_DISPATCH || op->node == EP_NODE_COMBINE;
        CU_ASSERT_EQUAL(op->stream, comm ? EP_STREAM_COMM : EP_STREAM_COMP);
    }
    return n;
}

/* docs/schedule.md, section 5 with --delay-wgrad-compute ("w" = backward_dw). */
static const char *const k_expected_delayed[] = {
    /* forward of microbatch 0 alone */
    "f0.emb", "f0.L0.pre_dispatch", "f0.L0.dispatch", "f0.L0.mlp", "f0.L0.combine",
    "f0.L1.pre_dispatch", "f0.L1.dispatch", "f0.L1.mlp", "f0.L1.combine", "f0.out",
    /* forward 1 with backward 0: f layer 0 pairs with b layer 1; the host issues b.mlp before
     * f.dispatch, whose host sync then finds the backward MLP queued (Megatron's
     * TransformerLayerSchedulePlan.run) */
    "f1.emb", "b0.out", "b0.L1.combine",             /* overlaps f.pre_dispatch */
    "f1.L0.pre_dispatch", "b0.L1.mlp",               /* b.mlp overlaps f.dispatch */
    "f1.L0.dispatch", "w0.L1.mlp", "b0.L1.dispatch", /* b.dispatch overlaps f.mlp */
    "f1.L0.mlp", "f1.L0.combine",                    /* overlaps b.pre_dispatch */
    "b0.L1.pre_dispatch", "w0.L1.pre_dispatch",
    /* f layer 1 pairs with b layer 0, the last layer of the backward: its pre_dispatch
     * backward_dw waits until after the embedding backward (where the PP send would be) */
    "b0.L0.combine", "f1.L1.pre_dispatch", "b0.L0.mlp", "f1.L1.dispatch", "w0.L0.mlp",
    "b0.L0.dispatch", "f1.L1.mlp", "f1.L1.combine", "b0.L0.pre_dispatch", "f1.out", "b0.emb",
    "w0.L0.pre_dispatch",
    /* forward 2 with backward 1 */
    "f2.emb", "b1.out", "b1.L1.combine", "f2.L0.pre_dispatch", "b1.L1.mlp", "f2.L0.dispatch",
    "w1.L1.mlp", "b1.L1.dispatch", "f2.L0.mlp", "f2.L0.combine", "b1.L1.pre_dispatch",
    "w1.L1.pre_dispatch", "b1.L0.combine", "f2.L1.pre_dispatch", "b1.L0.mlp", "f2.L1.dispatch",
    "w1.L0.mlp", "b1.L0.dispatch", "f2.L1.mlp", "f2.L1.combine", "b1.L0.pre_dispatch", "f2.out",
    "b1.emb", "w1.L0.pre_dispatch",
    /* backward of microbatch 2 alone */
    "b2.out", "b2.L1.combine", "b2.L1.mlp", "w2.L1.mlp", "b2.L1.dispatch", "b2.L1.pre_dispatch",
    "w2.L1.pre_dispatch", "b2.L0.combine", "b2.L0.mlp", "w2.L0.mlp", "b2.L0.dispatch",
    "b2.L0.pre_dispatch", "b2.emb", "w2.L0.pre_dispatch"};

static void expect_sequence(const ep_sched *s, int keep_dw) {
    char got[256][32];
    int n = node_sequence(s, keep_dw, got, 256);
    int want = 0;
    const char *expected[256];
    for (size_t i = 0; i < sizeof k_expected_delayed / sizeof *k_expected_delayed; i++)
        if (keep_dw || k_expected_delayed[i][0] != 'w') expected[want++] = k_expected_delayed[i];
    CU_ASSERT_EQUAL(n, want);
    for (int i = 0; i < n && i < want; i++)
        if (strcmp(got[i], expected[i]) != 0) {
            fprintf(stderr, "\n  node %d: got %s, expected %s\n", i, got[i], expected[i]);
            CU_FAIL("EP-overlap node order differs from docs/schedule.md, section 5");
            break;
        }
}

static void test_order_delayed_wgrad(void) {
    ep_sched s;
    if (sched_build_flags(&s, OVERLAP_FLAGS " --delay-wgrad-compute") != 0) return;
    expect_sequence(&s, 1);
    ep_sched_free(&s);
}

static void test_order_without_delay(void) {
    ep_sched s;
    if (sched_build_flags(&s, OVERLAP_FLAGS) != 0) return;
    expect_sequence(&s, 0);
    /* without delay each weight gradient follows its own dgrad GEMM inside the node */
    int i = sched_find(&s, 0, "mb0.c0.L1.expert_fc2.bwd");
    CU_ASSERT(i >= 0 && sched_find(&s, 0, "mb0.c0.L1.expert_fc2.bwd_dw") == i + 1);
    ep_sched_free(&s);
}

/* --legacy-dispatch-order (the runs measured before 2026-11-29): the forward dispatch issued
 * before the backward MLP, the alltoall split-size sync the last op of pre_dispatch */
static void test_legacy_order(void) {
    ep_sched s;
    if (sched_build_flags(&s, OVERLAP_FLAGS " --legacy-dispatch-order") != 0) return;
    char got[256][32];
    int n = node_sequence(&s, 0, got, 256), disp = -1, mlp = -1;
    for (int i = 0; i < n; i++) {
        if (strcmp(got[i], "f1.L0.dispatch") == 0) disp = i;
        if (strcmp(got[i], "b0.L1.mlp") == 0) mlp = i;
    }
    CU_ASSERT(disp >= 0 && mlp >= 0 && disp + 1 == mlp);
    const ep_rank_sched *r = &s.ranks[0];
    int sync = sched_find(&s, 0, "mb1.c0.L0.count_sync.fwd");
    CU_ASSERT_FATAL(sync >= 0);
    CU_ASSERT_EQUAL(r->ops[sync].node, EP_NODE_PRE_DISPATCH);
    CU_ASSERT_EQUAL(r->ops[sync].stream, EP_STREAM_COMP);
    ep_sched_free(&s);
}

/* Where the alltoall dispatcher reads its split sizes: the start of the dispatch when the output
 * size is static (dropless), the end of pre_dispatch when it is not (token drops), as Megatron's
 * cuda_sync_point picks the earliest point that needs them */
static void test_split_sync_node(void) {
    static const struct {
        const char *flags;
        ep_node node;
    } cases[] = {{"", EP_NODE_DISPATCH},
                 {" --moe-expert-capacity-factor 1", EP_NODE_PRE_DISPATCH},
                 {" --legacy-dispatch-order", EP_NODE_PRE_DISPATCH}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flags[512];
        snprintf(flags, sizeof flags, "%s%s", OVERLAP_FLAGS, cases[i].flags);
        ep_sched s;
        if (sched_build_flags(&s, flags) != 0) return;
        int sync = sched_find(&s, 0, "mb1.c0.L0.count_sync.fwd");
        CU_ASSERT_FATAL(sync >= 0);
        CU_ASSERT_EQUAL(s.ranks[0].ops[sync].node, cases[i].node);
        ep_sched_free(&s);
    }
}

/* One event chain per microbatch: a layer op waits only for ops of its own microbatch. */
static void test_one_chain_per_microbatch(void) {
    ep_sched s;
    if (sched_build_flags(&s, OVERLAP_FLAGS " --delay-wgrad-compute") != 0) return;
    const ep_rank_sched *r = &s.ranks[0];
    int cross = 0, waits = 0;
    for (int i = 0; i < r->nops; i++) {
        const ep_op *op = &r->ops[i];
        if (op->layer < 0) continue;
        for (int d = 0; d < op->ndeps; d++) {
            const ep_op *dep = &r->ops[r->deps[op->deps_off + d]];
            waits++;
            cross += dep->mb != op->mb;
        }
        if (op->phase == EP_PHASE_BWD_DW) CU_ASSERT_EQUAL(op->ndeps, 0); /* no event wait */
    }
    CU_ASSERT(waits > 0);
    CU_ASSERT_EQUAL(cross, 0);
    /* the dispatch node of microbatch 1 (the host read of the split sizes, then the all-to-all,
     * FIFO on the comm stream) waits for its own pre_dispatch only, so it overlaps b0's mlp */
    int disp = sched_find(&s, 0, "mb1.c0.L0.dispatch.fwd");
    int sync = sched_find(&s, 0, "mb1.c0.L0.count_sync.fwd");
    CU_ASSERT_FATAL(disp >= 0 && sync >= 0 && sync < disp);
    CU_ASSERT_EQUAL(r->ops[sync].stream, EP_STREAM_COMM);
    CU_ASSERT_EQUAL(r->ops[disp].ndeps, 0);
    CU_ASSERT_EQUAL_FATAL(r->ops[sync].ndeps, 1);
    const ep_op *tail = &r->ops[r->deps[r->ops[sync].deps_off]];
    CU_ASSERT_EQUAL(tail->mb, 1);
    CU_ASSERT_EQUAL(tail->node, EP_NODE_PRE_DISPATCH);
    ep_sched_free(&s);
}

/* Without overlap: every stream switch between consecutive nodes is an event wait. */
static void test_sequential_without_overlap(void) {
    ep_sched s;
    if (sched_build_flags(&s, SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 "
                                          "--global-batch-size 6") != 0)
        return;
    const ep_rank_sched *r = &s.ranks[0];
    int prev_last = -1, switches = 0;
    for (int i = 0; i < r->nops; i++) {
        const ep_op *op = &r->ops[i];
        if (op->stream == EP_STREAM_DP || op->phase == EP_PHASE_BWD_DW || op->mb < 0) continue;
        if (prev_last >= 0 && r->ops[prev_last].stream != op->stream) {
            int found = 0; /* the previous node's last op (a wgrad GEMM may end it) */
            for (int d = 0; d < op->ndeps; d++) {
                int dep = r->deps[op->deps_off + d];
                found |=
                    dep >= prev_last && dep < i && r->ops[dep].stream == r->ops[prev_last].stream;
            }
            CU_ASSERT(found);
            switches++;
        }
        prev_last = i;
    }
    CU_ASSERT(switches >= 3 * 2 * 2 * 2); /* into and out of comm per dispatch/combine */
    /* forward of microbatch 1 starts only after backward of microbatch 0 */
    CU_ASSERT(sched_find(&s, 0, "mb1.c0.embedding.fwd") >
              sched_find(&s, 0, "mb0.c0.embedding.bwd"));
    ep_sched_free(&s);
}

/* A dense layer has empty dispatch/combine nodes: the event still passes through the comm
 * stream, so the dense mlp of the forward waits for what comm had queued before it. */
static void test_dense_layer_empty_nodes(void) {
    ep_sched s;
    if (sched_build_flags(&s, SCHED_SMALL "--num-layers 2 --hybrid-override-pattern [*E][*-] "
                                          "--expert-model-parallel-size 2 --world-size 2 "
                                          "--global-batch-size 6 "
                                          "--overlap-moe-expert-parallel-comm") != 0)
        return;
    const ep_rank_sched *r = &s.ranks[0];
    CU_ASSERT_EQUAL(sched_count(&s, 0, "L1.dispatch"), 0);
    CU_ASSERT_EQUAL(sched_count(&s, 0, "L1.combine"), 0);
    /* step (f1, b0): the empty b0.L1.combine node records the event on the comm stream after
     * f0's L0 combine, so b0.L1.mlp (the dense MLP backward) waits for a comm op */
    int fc1 = sched_find(&s, 0, "mb0.c0.L1.fc1.bwd");
    CU_ASSERT_FATAL(fc1 >= 0);
    int first = fc1;
    while (first > 0 && r->ops[first - 1].layer == 1 && r->ops[first - 1].mb == 0 &&
           r->ops[first - 1].node == EP_NODE_MLP)
        first--;
    int waits_comm = 0;
    for (int d = 0; d < r->ops[first].ndeps; d++)
        waits_comm |= r->ops[r->deps[r->ops[first].deps_off + d]].stream == EP_STREAM_COMM;
    CU_ASSERT(waits_comm);
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    ep_sched_free(&s);
}

void ep_suite_sched_overlap(void) {
    CU_pSuite s = CU_add_suite("sched_overlap", NULL, NULL);
    CU_add_test(s, "combined 1F1B order with delayed wgrad (docs/schedule.md, section 5)",
                test_order_delayed_wgrad);
    CU_add_test(s, "combined 1F1B order without delayed wgrad", test_order_without_delay);
    CU_add_test(s, "one event chain per microbatch", test_one_chain_per_microbatch);
    CU_add_test(s, "--legacy-dispatch-order: the order of the runs measured before",
                test_legacy_order);
    CU_add_test(s, "the split-size sync: dispatch when dropless, pre_dispatch with drops",
                test_split_sync_node);
    CU_add_test(s, "without overlap nothing overlaps", test_sequential_without_overlap);
    CU_add_test(s, "dense layers: empty dispatch/combine nodes", test_dense_layer_empty_nodes);
}
