/* CUDA graphs (--cuda-graph-impl, --cuda-graph-scope): which ops a scope captures, the first op of
 * each captured run launching its graph, Megatron-LM's refusals (no host sync inside a capture),
 * and the whole iteration as one graph (docs/schedule.md, "CUDA graphs"). */
#include <CUnit/CUnit.h>

#include "exec_plan.h"
#include "sched_test_util.h"

#define CG_MODEL SCHED_SMALL "--global-batch-size 2 --world-size 2 --expert-model-parallel-size 2 "

static int graph_of(const ep_sched *s, const char *name) {
    int i = sched_find(s, 0, name);
    return i >= 0 ? s->ranks[0].ops[i].graph : -1;
}

static void test_scopes(void) {
    ep_sched s;
    if (sched_build_flags(&s, CG_MODEL "--cuda-graph-impl transformer_engine --cuda-graph-scope "
                                       "attn moe_router moe_preprocess") != 0)
        return;
    /* layer 1 (MoE): attention, the pre-MLP norm, router and permute up to the count sync */
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.L1.attn_norm.fwd"), 2);
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.L1.core_attn.fwd"), 1);
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.L1.router.fwd"), 1);
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.L1.permute.fwd"), 1);
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.L1.count_a2a.fwd"), 1);
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.L1.count_sync.fwd"), 0); /* never captured */
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.L1.dispatch.fwd"), 0);   /* not in these scopes */
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.L1.expert_fc1.fwd"), 0);
    CU_ASSERT_EQUAL(graph_of(&s, "mb0.c0.output.fwd"), 0);
    /* the backward of a captured pass is captured too, with a launch of its own */
    CU_ASSERT(graph_of(&s, "mb0.c0.L1.core_attn.bwd") >= 1);
    int launches = 0;
    for (int i = 0; i < s.ranks[0].nops; i++)
        launches += s.ranks[0].ops[i].graph == 2;
    CU_ASSERT_EQUAL(launches, sched_count(&s, 0, "core_attn")); /* one per pass of a layer */
    char err[EP_ERRLEN];
    CU_ASSERT(exec_plan_check(&s, 8, err) != 0); /* epref launches every op itself */
    ep_sched_free(&s);

    if (sched_build_flags(&s, CG_MODEL) != 0) return; /* no graphs by default */
    for (int i = 0; i < s.ranks[0].nops; i++)
        CU_ASSERT_EQUAL(s.ranks[0].ops[i].graph, 0);
    ep_sched_free(&s);
}

static void test_full_iteration(void) {
    ep_sched s;
    if (sched_build_flags(&s, CG_MODEL "--moe-pad-expert-input-to-capacity "
                                       "--moe-expert-capacity-factor 1 --cuda-graph-impl local "
                                       "--cuda-graph-scope full_iteration") != 0)
        return;
    CU_ASSERT_EQUAL(s.ranks[0].ops[0].graph, 2);
    for (int i = 1; i < s.ranks[0].nops; i++)
        CU_ASSERT_EQUAL(s.ranks[0].ops[i].graph, 1);
    ep_sched_free(&s);
}

static void test_refusals(void) {
    ep_config cfg;
    char err[EP_ERRLEN];
    /* a whole dropless alltoall MoE layer holds the count sync */
    CU_ASSERT(ep_test_config(&cfg, CG_MODEL "--cuda-graph-impl transformer_engine", err) != 0);
    CU_ASSERT(strstr(err, "count sync") != NULL);
    CU_ASSERT(ep_test_config(&cfg, CG_MODEL "--cuda-graph-impl transformer_engine "
                                            "--cuda-graph-scope full_iteration", err) != 0);
    CU_ASSERT(ep_test_config(&cfg, CG_MODEL "--cuda-graph-impl local --cuda-graph-scope "
                                            "full_iteration attn", err) != 0);
    CU_ASSERT(ep_test_config(&cfg, CG_MODEL "--cuda-graph-impl local --cuda-graph-scope bogus",
                             err) != 0);
    CU_ASSERT_EQUAL(ep_test_config(&cfg, CG_MODEL "--cuda-graph-impl transformer_engine "
                                                  "--cuda-graph-scope attn", err), 0);
    CU_ASSERT_EQUAL(cfg.cuda_graph_mask, EP_CG_ATTN);
}

void ep_suite_graphs(void) {
    CU_pSuite s = CU_add_suite("graphs", NULL, NULL);
    CU_add_test(s, "scopes capture their ops, a launch per captured run", test_scopes);
    CU_add_test(s, "full_iteration: one graph per rank", test_full_iteration);
    CU_add_test(s, "scopes holding a host sync are refused", test_refusals);
}
