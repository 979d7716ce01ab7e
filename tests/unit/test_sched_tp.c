/* Tensor parallelism outside the layers (docs/schedule.md, "Outside layers"): with TP > 1 and
 * sequence parallelism the embedding's shards are reduce-scattered to the sequence-parallel ranks
 * (backward: all-gather), the output layer all-gathers the sequence first (backward:
 * reduce-scatter), and the vocab-parallel loss all-reduces three fp32 values per token. */
#include <CUnit/CUnit.h>

#include "sched_test_util.h"

#define TP_MODEL SCHED_SMALL "--expert-model-parallel-size 2 --global-batch-size 2 "

static const ep_op *named(const ep_sched *s, const char *name) {
    int i = sched_find(s, 0, name);
    return i >= 0 ? &s->ranks[0].ops[i] : NULL;
}

static void test_tp_outside_layers(void) {
    ep_sched s;
    if (sched_build_flags(&s, TP_MODEL "--world-size 4 --tensor-model-parallel-size 2") != 0) return;
    const ep_op *ers = named(&s, "mb0.c0.embedding_rs.fwd"), *eag = named(&s, "mb0.c0.embedding_rs.bwd");
    const ep_op *oag = named(&s, "mb0.c0.output_ag.fwd"), *ors = named(&s, "mb0.c0.output_ag.bwd");
    CU_ASSERT_FATAL(ers && eag && oag && ors);
    /* 128 tokens, hidden 256, bf16: the full sequence's rows into the reduce-scatter, this rank's
     * 64 rows into the all-gather */
    CU_ASSERT(ers->kind == EP_OP_REDUCE_SCATTER && ers->bytes == 128.0 * 256 * 2);
    CU_ASSERT(eag->kind == EP_OP_ALL_GATHER && eag->bytes == 64.0 * 256 * 2);
    CU_ASSERT(oag->kind == EP_OP_ALL_GATHER && oag->bytes == 64.0 * 256 * 2);
    CU_ASSERT(ors->kind == EP_OP_REDUCE_SCATTER && ors->bytes == 128.0 * 256 * 2);
    const char *ars[] = {"mb0.c0.loss_max_ar.fwd", "mb0.c0.loss_target_ar.fwd",
                         "mb0.c0.loss_sum_ar.fwd"};
    for (int i = 0; i < 3; i++) {
        const ep_op *a = named(&s, ars[i]);
        CU_ASSERT(a && a->kind == EP_OP_ALL_REDUCE && a->bytes == 4.0 * 128);
    }
    CU_ASSERT_EQUAL(sched_count(&s, 0, "loss_max_ar.bwd"), 0); /* the gradient is local */
    const ep_op *out = named(&s, "mb0.c0.output.fwd");
    CU_ASSERT(out && out->m == 128); /* the gathered sequence */
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    ep_sched_free(&s);

    if (sched_build_flags(&s, TP_MODEL "--world-size 2") != 0) return;
    CU_ASSERT_EQUAL(sched_count(&s, 0, "embedding_rs"), 0);
    CU_ASSERT_EQUAL(sched_count(&s, 0, "output_ag"), 0);
    CU_ASSERT_EQUAL(sched_count(&s, 0, "loss_"), 0);
    ep_sched_free(&s);
}

static int deps_on(const ep_sched *s, int r, int i, int j) {
    const ep_rank_sched *rs = &s->ranks[r];
    for (int d = 0; d < rs->ops[i].ndeps; d++)
        if (rs->deps[rs->ops[i].deps_off + d] == j) return 1;
    return 0;
}

/* --tp-comm-overlap: the TP collectives run on the tp stream beside their GEMMs - the all-gather
 * after its input, the GEMM after it not waiting for it, the ops after that GEMM waiting; the
 * reduce-scatter starting with its producing GEMM and the next op waiting (docs/schedule.md). */
static void test_tp_overlap(void) {
    ep_sched s;
    if (sched_build_flags(&s, TP_MODEL "--world-size 4 --tensor-model-parallel-size 2 "
                                       "--tp-comm-overlap") != 0)
        return;
    int norm = sched_find(&s, 0, "mb0.c0.L1.attn_norm.fwd"), ag = sched_find(&s, 0, "mb0.c0.L1.attn_ag.fwd");
    int qkv = sched_find(&s, 0, "mb0.c0.L1.qkv.fwd"), core = sched_find(&s, 0, "mb0.c0.L1.core_attn.fwd");
    int proj = sched_find(&s, 0, "mb0.c0.L1.attn_proj.fwd"), rs = sched_find(&s, 0, "mb0.c0.L1.attn_rs.fwd");
    int next = sched_find(&s, 0, "mb0.c0.L1.mlp_norm.fwd");
    CU_ASSERT_FATAL(norm >= 0 && ag >= 0 && qkv >= 0 && core >= 0 && proj >= 0 && rs >= 0 && next >= 0);
    const ep_op *o = s.ranks[0].ops;
    CU_ASSERT(o[ag].stream == EP_STREAM_TP && o[rs].stream == EP_STREAM_TP);
    CU_ASSERT(deps_on(&s, 0, ag, norm));  /* after its input */
    CU_ASSERT(!deps_on(&s, 0, qkv, ag));  /* the GEMM runs beside it */
    CU_ASSERT(deps_on(&s, 0, core, ag));  /* what follows the GEMM waits */
    CU_ASSERT(deps_on(&s, 0, rs, core));  /* starts with attn_proj, its producer */
    CU_ASSERT(!deps_on(&s, 0, rs, proj));
    CU_ASSERT(deps_on(&s, 0, next, rs) || o[next].node != o[rs].node); /* next op waits for it */
    /* backward: the reduce-scatter of qkv's dgrad runs beside its wgrad */
    int rsb = sched_find(&s, 0, "mb0.c0.L1.attn_ag.bwd"), dg = sched_find(&s, 0, "mb0.c0.L1.qkv.bwd");
    int wg = sched_find(&s, 0, "mb0.c0.L1.qkv.bwd_dw");
    CU_ASSERT_FATAL(rsb >= 0 && dg >= 0 && wg >= 0);
    CU_ASSERT(o[rsb].kind == EP_OP_REDUCE_SCATTER && o[rsb].stream == EP_STREAM_TP);
    CU_ASSERT(deps_on(&s, 0, rsb, dg) && !deps_on(&s, 0, rsb, wg));
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    ep_sched_free(&s);
}

/* Without --tp-comm-overlap only the backward reduce-scatter of a sequence-parallel all-gather
 * runs beside a GEMM (Megatron's and Transformer Engine's async dgrad reduce-scatter during the
 * wgrad); with --delay-wgrad-compute it waits for the dgrad and the next op for it. Under FP8
 * delayed scaling the all-gathers move FP8 (half the bytes): the forward one into qkv and fc1 and
 * the backward one of a row-parallel GEMM's dY; the reduce-scatters stay bf16. qkv's input is
 * gathered again in the backward beside its dgrad, and its wgrad waits for it. */
static void test_tp_async_bwd(void) {
    const struct {
        const char *flags;
        int delayed, fp8_ds;
    } cases[] = {
        {"", 0, 0},
        {"--fp8-format hybrid --fp8-recipe delayed ", 0, 1},
        {"--fp8-format hybrid --fp8-recipe tensorwise ", 0, 0},
        {"--overlap-moe-expert-parallel-comm --delay-wgrad-compute ", 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flags[512];
        snprintf(flags, sizeof flags, TP_MODEL "--world-size 4 --tensor-model-parallel-size 2 %s",
                 cases[i].flags);
        ep_sched s;
        if (sched_build_flags(&s, flags) != 0) continue;
        const ep_op *o = s.ranks[0].ops;
        int ag = sched_find(&s, 0, "mb0.c0.L1.attn_ag.fwd"),
            rs = sched_find(&s, 0, "mb0.c0.L1.attn_rs.fwd");
        int rsb = sched_find(&s, 0, "mb0.c0.L1.attn_ag.bwd"),
            agb = sched_find(&s, 0, "mb0.c0.L1.attn_rs.bwd");
        int dg = sched_find(&s, 0, "mb0.c0.L1.qkv.bwd"),
            wg = sched_find(&s, 0, "mb0.c0.L1.qkv.bwd_dw");
        int after = sched_find(&s, 0, "mb0.c0.L1.attn_norm.bwd");
        CU_ASSERT_FATAL(ag >= 0 && rs >= 0 && rsb >= 0 && agb >= 0 && dg >= 0 && after >= 0);
        CU_ASSERT(o[ag].stream != EP_STREAM_TP && o[rs].stream != EP_STREAM_TP);
        CU_ASSERT(o[agb].stream != EP_STREAM_TP);
        CU_ASSERT(o[rsb].kind == EP_OP_REDUCE_SCATTER && o[rsb].stream == EP_STREAM_TP);
        CU_ASSERT(deps_on(&s, 0, rsb, dg));
        CU_ASSERT(deps_on(&s, 0, after, rsb) || o[after].node != o[rsb].node);
        if (!cases[i].delayed) {
            CU_ASSERT_FATAL(wg >= 0);
            CU_ASSERT(!deps_on(&s, 0, rsb, wg)); /* beside the wgrad */
        }
        /* bytes: the forward gather of this rank's rows at 2 bytes each (FP8 delayed: 1), a
         * TP 2 group's worth in the reduce-scatters, which stay bf16 */
        CU_ASSERT_DOUBLE_EQUAL(o[ag].bytes * (cases[i].fp8_ds ? 2 : 1) * 2, o[rs].bytes, 1e-6);
        CU_ASSERT_DOUBLE_EQUAL(o[rsb].bytes, o[rs].bytes, 1e-6);
        /* qkv's input gathered again for its wgrad, beside the dgrad (the forward's bytes) */
        int re = sched_find(&s, 0, "mb0.c0.L1.attn_ag_regather.bwd");
        CU_ASSERT_FATAL(re >= 0);
        CU_ASSERT(o[re].kind == EP_OP_ALL_GATHER && o[re].stream == EP_STREAM_TP);
        CU_ASSERT_DOUBLE_EQUAL(o[re].bytes, o[ag].bytes, 1e-6);
        CU_ASSERT(!deps_on(&s, 0, dg, re));
        if (!cases[i].delayed) CU_ASSERT(deps_on(&s, 0, wg, re));
        /* the backward gather of attn_proj's dY (this rank's shard): FP8 too under delayed */
        CU_ASSERT_DOUBLE_EQUAL(o[agb].bytes * 2 * (cases[i].fp8_ds ? 2 : 1), o[rs].bytes, 1e-6);
        char err[EP_ERRLEN];
        CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
        ep_sched_free(&s);
    }
}

void ep_suite_sched_tp(void) {
    CU_pSuite s = CU_add_suite("sched_tp", NULL, NULL);
    CU_add_test(s, "TP outside the layers: embedding, output layer, vocab-parallel loss",
                test_tp_outside_layers);
    CU_add_test(s, "--tp-comm-overlap: TP collectives beside their GEMMs", test_tp_overlap);
    CU_add_test(s, "without it: the backward reduce-scatter beside the wgrad; FP8 gathers",
                test_tp_async_bwd);
}
