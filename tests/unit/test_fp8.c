/* FP8 (--fp8-format): the linear layers' GEMMs are marked FP8, their BF16 inputs quantized first
 * unless the layer norm does it (qkv, fc1), every FP8 GEMM's incoming gradient quantized before
 * its dgrad, the output layer kept BF16; bytes per element 6 with current scaling, 4 otherwise
 * (docs/schedule.md, "FP8"). */
#include <CUnit/CUnit.h>

#include "exec_plan.h"
#include "sched_test_util.h"

#define FP8_MODEL SCHED_SMALL "--global-batch-size 2 --world-size 2 --expert-model-parallel-size 2 "

static const ep_op *op_named(const ep_sched *s, const char *name) {
    int i = sched_find(s, 0, name);
    return i >= 0 ? &s->ranks[0].ops[i] : NULL;
}

static void test_fp8_ops(void) {
    ep_sched s;
    if (sched_build_flags(&s, FP8_MODEL "--fp8-format hybrid --fp8-recipe tensorwise") != 0)
        return;
    const ep_op *qkv = op_named(&s, "mb0.c0.L1.qkv.fwd");
    const ep_op *proj = op_named(&s, "mb0.c0.L1.attn_proj.fwd");
    const ep_op *out = op_named(&s, "mb0.c0.output.fwd");
    CU_ASSERT_FATAL(qkv && proj && out);
    CU_ASSERT(qkv->fp8 && proj->fp8 && !out->fp8);
    CU_ASSERT(op_named(&s, "mb0.c0.L1.qkv_cast.fwd") == NULL); /* fused into the layer norm */
    const ep_op *pc = op_named(&s, "mb0.c0.L1.attn_proj_cast.fwd");
    CU_ASSERT_FATAL(pc != NULL);
    /* its input: 128 tokens x 4 heads x 64 (kv channels 256 / 4) = 32768 elements x 6 bytes */
    CU_ASSERT_DOUBLE_EQUAL(pc->bytes, (double)proj->m * proj->k * 6, 0);
    CU_ASSERT_DOUBLE_EQUAL(pc->bytes, 128.0 * 256 * 6, 0);
    CU_ASSERT(pc->kind == EP_OP_ELEMENTWISE && pc->fp8); /* inside its GEMM's module */
    /* backward: dY [m x n] quantized before the dgrad, for every FP8 GEMM */
    int gc = sched_find(&s, 0, "mb0.c0.L1.qkv_cast.bwd"), gd = sched_find(&s, 0, "mb0.c0.L1.qkv.bwd");
    CU_ASSERT(gc >= 0 && gd == gc + 1);
    if (gc >= 0)
        CU_ASSERT_DOUBLE_EQUAL(s.ranks[0].ops[gc].bytes, (double)qkv->m * qkv->n * 6, 0);
    CU_ASSERT(op_named(&s, "mb0.c0.L1.expert_fc1_cast.fwd") != NULL);
    CU_ASSERT(op_named(&s, "mb0.c0.L1.expert_fc2_cast.bwd") != NULL);
    CU_ASSERT(op_named(&s, "mb0.c0.output_cast.fwd") == NULL);
    CU_ASSERT(op_named(&s, "mb0.c0.output_cast.bwd") == NULL);
    char err[EP_ERRLEN];
    CU_ASSERT(exec_plan_check(&s, 8, err) != 0); /* epref runs BF16 GEMMs only */
    CU_ASSERT(strstr(err, "an FP8 GEMM") && !strstr(err, "_cast")); /* names a GEMM */
    ep_sched_free(&s);

    if (sched_build_flags(&s, FP8_MODEL "--fp8-format hybrid --fp8-recipe delayed") != 0) return;
    pc = op_named(&s, "mb0.c0.L1.attn_proj_cast.fwd");
    CU_ASSERT(pc && pc->bytes == 128.0 * 256 * 4); /* the amax comes with the cast */
    ep_sched_free(&s);
}

static void test_bf16_has_no_casts(void) {
    ep_sched s;
    if (sched_build_flags(&s, FP8_MODEL) != 0) return;
    CU_ASSERT_EQUAL(sched_count(&s, 0, "_cast"), 0);
    for (int i = 0; i < s.ranks[0].nops; i++)
        CU_ASSERT(!s.ranks[0].ops[i].fp8);
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(exec_plan_check(&s, 8, err), 0);
    ep_sched_free(&s);
}

void ep_suite_fp8(void) {
    CU_pSuite s = CU_add_suite("fp8", NULL, NULL);
    CU_add_test(s, "FP8 GEMMs, input and gradient casts, BF16 output layer", test_fp8_ops);
    CU_add_test(s, "BF16: no casts, epref runs it", test_bf16_has_no_casts);
}
