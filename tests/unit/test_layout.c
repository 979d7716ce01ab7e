/* Pipelines (docs/schedule.md, section 6): Megatron's --pipeline-model-parallel-layout grammar,
 * the virtual stages it implies, the accounting flags that count the embedding and the loss as
 * layers, and the interleaved schedule's p2p overlap. */
#include <CUnit/CUnit.h>

#include "ep_layers.h"
#include "sched_test_util.h"

#define PP_MODEL                                                                                   \
    "--hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 4 --seq-length 128 "            \
    "--micro-batch-size 1 --world-size 4 --pipeline-model-parallel-size 4 --global-batch-size 8 "

static void test_grammar(void) {
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_layout_stages("Et*2|(t*2|)*34,t*3|(t*2|)*3,tL", err), 40);
    CU_ASSERT_EQUAL(ep_layout_stages("Ettt|(tt|)*29,m|L", err), 32);
    CU_ASSERT_EQUAL(ep_layout_stages("E|t|t|L", err), 4);
    CU_ASSERT_EQUAL(ep_layout_stages(" E t , t | t t L ", err), 2); /* spaces, commas cosmetic */
    CU_ASSERT(ep_layout_stages("tE|tL", err) < 0);                   /* E first */
    CU_ASSERT(ep_layout_stages("Et|Lt", err) < 0);                   /* L last */
    CU_ASSERT(ep_layout_stages("Et|tx|tL", err) < 0);                /* unknown layer */
    CU_ASSERT(ep_layout_stages("E(t|(t|)*2)*2L", err) < 0);          /* nesting */
    CU_ASSERT(ep_layout_stages("E(t|)L", err) < 0);                  /* group without *N */
    CU_ASSERT(ep_layout_stages("Et*|tL", err) < 0);                  /* * without a count */
}

/* Layers of each (stage, chunk) of a config's plan, "s.c:first+count " concatenated. */
static void ranges(const char *flags, char *out, size_t len) {
    ep_config cfg;
    char err[EP_ERRLEN];
    out[0] = 0;
    if (ep_test_config(&cfg, flags, err) != 0) {
        snprintf(out, len, "error: %s", err);
        return;
    }
    ep_layer_plan plan;
    if (ep_layer_plan_build(&cfg, &plan, err) != 0) {
        snprintf(out, len, "error: %s", err);
        return;
    }
    int pp = cfg.pipeline_model_parallel_size, vpp = cfg.virtual_pipeline_model_parallel_size;
    size_t n = 0;
    for (int c = 0; c < vpp; c++)
        for (int s = 0; s < pp; s++) {
            int f, k;
            ep_layer_range(&plan, pp, vpp, s, c, &f, &k);
            n += (size_t)snprintf(out + n, len - n, "%d.%d:%d+%d ", s, c, f, k);
        }
}

static void test_split(void) {
    char r[2048];
    /* 6 layers over PP 4: the embedding stage holds 1, the loss stage 1 */
    ranges(PP_MODEL "--num-layers 6 --pipeline-model-parallel-layout Et|tt|tt|tL", r, sizeof r);
    CU_ASSERT_STRING_EQUAL(r, "0.0:0+1 1.0:1+2 2.0:3+2 3.0:5+1 ");
    /* VPP from the layout: 8 stages over PP 4 is 2 chunks; empty stages allowed */
    ranges(PP_MODEL "--num-layers 6 --pipeline-model-parallel-layout E|t|t|t|t|t|t|L", r,
           sizeof r);
    CU_ASSERT_STRING_EQUAL(r, "0.0:0+0 1.0:0+1 2.0:1+1 3.0:2+1 0.1:3+1 1.1:4+1 2.1:5+1 3.1:6+0 ");
    /* accounting: 6 layers + embedding + loss = 8 units, 2 per stage */
    ranges(PP_MODEL "--num-layers 6 --account-for-embedding-in-pipeline-split "
                    "--account-for-loss-in-pipeline-split",
           r, sizeof r);
    CU_ASSERT_STRING_EQUAL(r, "0.0:0+1 1.0:1+2 2.0:3+2 3.0:5+1 ");
    ranges(PP_MODEL "--num-layers 7 --account-for-loss-in-pipeline-split", r, sizeof r);
    CU_ASSERT_STRING_EQUAL(r, "0.0:0+2 1.0:2+2 2.0:4+2 3.0:6+1 ");
    /* the layout's VPP against a given one, layer counts, mixing */
    ranges(PP_MODEL "--num-layers 6 --num-virtual-stages-per-pipeline-rank 3 "
                    "--pipeline-model-parallel-layout E|t|t|t|t|t|t|L",
           r, sizeof r);
    CU_ASSERT(strstr(r, "error") != NULL);
    ranges(PP_MODEL "--num-layers 7 --pipeline-model-parallel-layout Et|tt|tt|tL", r, sizeof r);
    CU_ASSERT(strstr(r, "decoder layers") != NULL);
    ranges(PP_MODEL "--num-layers 6 --pipeline-model-parallel-layout Et|tt|tL", r, sizeof r);
    CU_ASSERT(strstr(r, "multiple") != NULL);
    ranges(PP_MODEL "--num-layers 6 --account-for-loss-in-pipeline-split", r, sizeof r);
    CU_ASSERT(strstr(r, "not divisible") != NULL);
    ranges(PP_MODEL "--num-layers 6 --decoder-first-pipeline-num-layers 1 "
                    "--account-for-loss-in-pipeline-split",
           r, sizeof r);
    CU_ASSERT(strstr(r, "mutually exclusive") != NULL);
}

/* A layout equal to the even split builds the very same schedule. */
static void test_same_as_even(void) {
    ep_sched a, b;
    if (sched_build_flags(&a, PP_MODEL "--num-layers 8") != 0) return;
    if (sched_build_flags(&b, PP_MODEL "--num-layers 8 --pipeline-model-parallel-layout "
                                       "Ett|tt|tt|ttL") != 0) {
        ep_sched_free(&a);
        return;
    }
    for (int r = 0; r < 4; r++) {
        CU_ASSERT_EQUAL_FATAL(a.ranks[r].nops, b.ranks[r].nops);
        for (int i = 0; i < a.ranks[r].nops; i++) {
            char x[160], y[160];
            ep_op_name(&a.ranks[r].ops[i], x, sizeof x);
            ep_op_name(&b.ranks[r].ops[i], y, sizeof y);
            CU_ASSERT_STRING_EQUAL(x, y);
        }
    }
    ep_sched_free(&a);
    ep_sched_free(&b);
}

/* Interleaved 1F1B with --overlap-p2p-communication (Megatron's default): in a step pairing a
 * forward and a backward, the forward's send is issued before the backward's compute (its transfer
 * runs beside it), and no pass waits for a receive of the other direction. Without it one exchange
 * follows the whole step. Both are deadlock-free (ep_sched_check). */
static int sends_before_backward(const ep_sched *s, int r) {
    const ep_rank_sched *rs = &s->ranks[r];
    int n = 0;
    for (int i = 0; i + 1 < rs->nops; i++) {
        const ep_op *a = &rs->ops[i], *b = &rs->ops[i + 1];
        n += a->stream == EP_STREAM_PP && a->phase == EP_PHASE_FWD &&
             b->stream != EP_STREAM_PP && b->phase == EP_PHASE_BWD;
    }
    return n;
}

static void test_p2p_overlap(void) {
    const char *base = PP_MODEL "--num-layers 8 --num-virtual-stages-per-pipeline-rank 2 ";
    char flags[1024];
    ep_sched a, b;
    if (sched_build_flags(&a, base) != 0) return;
    snprintf(flags, sizeof flags, "%s--no-overlap-p2p-communication", base);
    if (sched_build_flags(&b, flags) != 0) {
        ep_sched_free(&a);
        return;
    }
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_sched_check(&a, err), 0);
    CU_ASSERT_EQUAL(ep_sched_check(&b, err), 0);
    for (int r = 0; r < 4; r++) {
        CU_ASSERT(sends_before_backward(&a, r) > 0);
        CU_ASSERT_EQUAL(sends_before_backward(&b, r), 0);
        CU_ASSERT_EQUAL(a.ranks[r].nops, b.ranks[r].nops); /* the same ops, in another order */
    }
    /* a backward pass never waits on a forward-direction receive */
    const ep_rank_sched *rs = &a.ranks[1];
    for (int i = 0; i < rs->nops; i++) {
        if (rs->ops[i].phase != EP_PHASE_BWD || rs->ops[i].stream != EP_STREAM_COMP) continue;
        for (int d = 0; d < rs->ops[i].ndeps; d++) {
            const ep_op *dep = &rs->ops[rs->deps[rs->ops[i].deps_off + d]];
            CU_ASSERT(!(dep->kind == EP_OP_RECV && dep->phase == EP_PHASE_FWD));
        }
    }
    ep_sched_free(&a);
    ep_sched_free(&b);
}

void ep_suite_layout(void) {
    CU_pSuite s = CU_add_suite("layout", NULL, NULL);
    CU_add_test(s, "Megatron's layout grammar", test_grammar);
    CU_add_test(s, "layers per virtual stage: layout, VPP, accounting, errors", test_split);
    CU_add_test(s, "a layout equal to the even split: the same schedule", test_same_as_even);
    CU_add_test(s, "interleaved 1F1B: --overlap-p2p-communication splits the exchange",
                test_p2p_overlap);
}
