/* Cost formulas: hand-computed GEMM, attention and per-layer numbers; Megatron-LM's model flops
 * formula; published parameter counts of DeepSeek-V3, Mixtral-8x7B and Qwen3-30B-A3B. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <string.h>

#include "ep_cost.h"
#include "ep_layers.h"
#include "test_util.h"

#define REL(a, b, tol) CU_ASSERT_DOUBLE_EQUAL((a) / (b), 1.0, (tol))

static ep_layer block(const char *syms, int mtp) {
    ep_layer l;
    memset(&l, 0, sizeof l);
    strcpy(l.blocks, syms);
    l.nblocks = (int)strlen(syms);
    l.is_moe = syms[l.nblocks - 1] == 'E';
    l.is_mtp = mtp;
    l.pp_stage = -1;
    return l;
}

/* H 64, 4 heads of 16 in 2 query groups, SwiGLU, dense 128, 8 experts of 32 top-2, shared 48. */
#define SMALL                                                                                      \
    "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --group-query-attention "             \
    "--num-query-groups 2 --kv-channels 16 --ffn-hidden-size 128 --swiglu --num-experts 8 "        \
    "--moe-router-topk 2 --moe-ffn-hidden-size 32 --moe-shared-expert-intermediate-size 48 "       \
    "--padded-vocab-size 1000 --seq-length 256 --mamba-state-dim 16 --mamba-head-dim 16"

static void small_cfg(ep_config *c) {
    char err[EP_ERRLEN];
    int rc = ep_test_config(c, SMALL, err);
    if (rc != 0) fprintf(stderr, "config: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void test_gemm(void) {
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_gemm_flops(3, 4, 5), 120, 0);
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_gemm_bytes(3, 4, 5), (15 + 20 + 12) * 2, 0);
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_gemm_flops(4096, 7168, 2048), 2.0 * 4096 * 7168 * 2048, 0);
}

static void test_attention(void) {
    /* 4096 tokens, 32 heads of 128: QK and PV each 2 * 4096 * 4096 * 32 * 128, causal halves */
    double full = 2.0 * 4096 * 4096 * 32 * 256;
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_attention_flops(4096, 4096, 32, 128, 128, 0), full, 0);
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_attention_flops(4096, 4096, 32, 128, 128, 1), full / 2, 0);
    /* MLA shapes: qk 192, v 128 */
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_attention_flops(1, 4096, 128, 192, 128, 1),
                           2.0 * 2048 * 128 * 320, 0);
    /* 10 tokens, 4 heads (qk 8, v 6), 2 kv heads: Q 320 + KV 280 + O 240 elements, + LSE */
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_attention_bytes(10, 4, 8, 6, 2), 840 * 2 + 160, 0);
}

/* A causal sliding window of W keys before each query: query i meets min(i, W) + 1 keys. */
static void test_window_keys(void) {
    /* by hand, seq 8, W 2: 1 2 3 3 3 3 3 3 -> 21 / 8 */
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_window_keys(8, 2), 21.0 / 8, 1e-12);
    /* GPT-OSS: seq 4096, W 127 -> (127 * 128 / 2 + 3969 * 128) / 4096 = 126.03 */
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_window_keys(4096, 127), (8128.0 + 3969.0 * 128) / 4096, 1e-9);
    /* no window, or one as long as the sequence: the causal seq / 2 */
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_window_keys(4096, -1), 2048, 0);
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_window_keys(4096, 4095), 2048, 0);
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_window_keys(4096, 100000), 2048, 0);
    /* W 0: every query meets itself */
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_window_keys(4096, 0), 1, 1e-12);
}

static void test_layer_params_gqa_moe(void) {
    ep_config c;
    small_cfg(&c);
    ep_layer l = block("*E", 0);
    ep_layer_params p;
    ep_cost_layer_params(&c, &l, &p);
    CU_ASSERT_DOUBLE_EQUAL(p.attn, 64 * 64 + 2 * 64 * 32 + 64 * 64, 0); /* q, k+v, out */
    CU_ASSERT_DOUBLE_EQUAL(p.expert, 3 * 64 * 32, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.shared, 3 * 64 * 48, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.router, 64 * 8, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.norm, 128, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.dense_mlp, 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.mtp, 0, 0);
    l = block("*-", 0);
    ep_cost_layer_params(&c, &l, &p);
    CU_ASSERT_DOUBLE_EQUAL(p.dense_mlp, 3 * 64 * 128, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.expert, 0, 0);
    c.swiglu = 0; /* plain MLP: two matrices */
    ep_cost_layer_params(&c, &l, &p);
    CU_ASSERT_DOUBLE_EQUAL(p.dense_mlp, 2 * 64 * 128, 0);
    l = block("*E", 1); /* MTP: 2H x H projection, enorm, hnorm, final norm */
    ep_cost_layer_params(&c, &l, &p);
    CU_ASSERT_DOUBLE_EQUAL(p.mtp, 2 * 64 * 64 + 3 * 64, 0);
}

static void test_layer_params_mla(void) {
    ep_config c;
    small_cfg(&c);
    c.multi_latent_attention = 1;
    c.q_lora_rank = 32;
    c.kv_lora_rank = 16;
    c.qk_head_dim = 8;
    c.qk_pos_emb_head_dim = 4;
    c.v_head_dim = 8;
    ep_layer l = block("*", 0);
    ep_layer_params p;
    ep_cost_layer_params(&c, &l, &p);
    double q = 64 * 32 + 32 * 4 * 12, kv = 64 * (16 + 4) + 16 * 4 * 16, o = 4 * 8 * 64;
    CU_ASSERT_DOUBLE_EQUAL(p.attn, q + kv + o, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.norm, 64 + 32 + 16, 0);
    /* forward flops per token: 2 x weights + causal core attention over 256 */
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_layer_fwd_flops_per_token(&c, &l),
                           2 * (q + kv + o) + 2.0 * 128 * 4 * (12 + 8), 0);
    c.q_lora_rank = 0; /* no q compression: one H x heads*(qk+rope) matrix */
    ep_cost_layer_params(&c, &l, &p);
    CU_ASSERT_DOUBLE_EQUAL(p.attn, 64 * 4 * 12 + kv + o, 0);
}

static void test_layer_params_mamba(void) {
    ep_config c;
    small_cfg(&c);
    /* d_inner 128, heads 128/16 = 8, state 16, 8 groups: B and C 2*8*16 = 256 */
    double in_proj = 64 * (2 * 128 + 256 + 8), conv = (128 + 256) * 5, out = 128 * 64;
    for (const char *sym = "MG"; *sym; sym++) {
        char s[2] = {*sym, 0};
        ep_layer l = block(s, 0);
        ep_layer_params p;
        ep_cost_layer_params(&c, &l, &p);
        CU_ASSERT_DOUBLE_EQUAL(p.attn, in_proj + conv + 3 * 8 + out, 0);
        CU_ASSERT_DOUBLE_EQUAL(p.norm, 64 + 128, 0);
        CU_ASSERT_DOUBLE_EQUAL(ep_cost_layer_fwd_flops_per_token(&c, &l),
                               2.0 * in_proj + 7.0 * 128 * 16 + 2.0 * out, 0);
    }
    c.mamba_num_heads = 4;
    ep_layer l = block("M", 0);
    ep_layer_params p;
    ep_cost_layer_params(&c, &l, &p);
    CU_ASSERT_DOUBLE_EQUAL(p.attn, 64 * (2 * 128 + 256 + 4) + conv + 3 * 4 + out, 0);
}

static void test_small_model_totals(void) {
    ep_config c;
    small_cfg(&c);
    char err[EP_ERRLEN];
    ep_layer_plan plan;
    CU_ASSERT_EQUAL_FATAL(ep_layer_plan_build(&c, &plan, err), 0);
    double attn = 12288, norm = 128, expert = 6144, shared = 9216, router = 512;
    double embed = 2.0 * 64 * 1000 + 64;
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_total_params(&c, &plan),
                           embed + 2 * (attn + norm + 8 * expert + shared + router), 0);
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_active_params(&c, &plan),
                           embed + 2 * (attn + norm + 2 * expert + shared + router), 0);
    /* per layer forward: 2 x attention weights + core (2 * 128 keys * 4 heads * 32) + experts */
    double layer = 2 * attn + 2.0 * 128 * 4 * 32 + 2.0 * 3 * 64 * (2 * 32 + 48);
    CU_ASSERT_DOUBLE_EQUAL(ep_cost_model_flops_per_token(&c, &plan),
                           3.0 * (2 * layer + 2.0 * 64 * 1000), 0);
}

/* --- published models ---------------------------------------------------------------------------
 */

#define DSV3                                                                                       \
    "--num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 128 "        \
    "--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "            \
    "--qk-pos-emb-head-dim 64 --v-head-dim 128 --kv-channels 128 --seq-length 4096 "               \
    "--padded-vocab-size 129280 --swiglu --num-experts 256 --moe-router-topk 8 "                   \
    "--moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 2048 "                       \
    "--moe-layer-freq ([0]*3+[1]*58) "

static void model(const char *flags, ep_config *c, ep_layer_plan *plan) {
    char err[EP_ERRLEN];
    int rc = ep_test_config(c, flags, err);
    if (rc != 0) fprintf(stderr, "config: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    rc = ep_layer_plan_build(c, plan, err);
    if (rc != 0) fprintf(stderr, "plan: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void test_deepseek_v3_params(void) {
    ep_config c;
    static ep_layer_plan plan;
    model(DSV3 "--mtp-num-layers 0", &c, &plan);
    REL(ep_cost_total_params(&c, &plan), 671e9, 0.02);
    REL(ep_cost_active_params(&c, &plan), 37e9, 0.03);
    /* with its MTP module: 685B in the released checkpoint, which stores the shared embedding
     * and output head of the MTP module a second time (2 x 0.93B) */
    model(DSV3 "--mtp-num-layers 1", &c, &plan);
    REL(ep_cost_total_params(&c, &plan) + 2.0 * 7168 * 129280, 685e9, 0.01);
}

static void test_mixtral_params(void) {
    ep_config c;
    static ep_layer_plan plan;
    model("--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
          "--group-query-attention --num-query-groups 8 --kv-channels 128 --seq-length 4096 "
          "--padded-vocab-size 32000 --swiglu --num-experts 8 --moe-router-topk 2 "
          "--moe-ffn-hidden-size 14336",
          &c, &plan);
    REL(ep_cost_total_params(&c, &plan), 46.7e9, 0.01);
    REL(ep_cost_active_params(&c, &plan), 12.9e9, 0.01);
}

#define QWEN3_30B                                                                                  \
    "--num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 "          \
    "--group-query-attention --num-query-groups 4 --kv-channels 128 --seq-length 4096 "            \
    "--padded-vocab-size 151936 --swiglu --num-experts 128 --moe-router-topk 8 "                   \
    "--moe-ffn-hidden-size 768"

static void test_qwen3_params(void) {
    ep_config c;
    static ep_layer_plan plan;
    model(QWEN3_30B, &c, &plan);
    REL(ep_cost_total_params(&c, &plan), 30.5e9, 0.01);
    REL(ep_cost_active_params(&c, &plan), 3.3e9, 0.03);
}

/* Megatron-LM's transformer formula, written out in its aggregated form (per token). */
static void test_megatron_flops_gqa(void) {
    ep_config c;
    static ep_layer_plan plan;
    model(QWEN3_30B, &c, &plan);
    double H = 2048, s = 4096, V = 151936, L = 48, q = 128.0 * 32, kv = 128.0 * 4;
    double mlp = 6 * H * (768.0 * 8 * 3) * L;
    double attn = 6 * (H * (q + 2 * kv) + q * s / 2 * 2 + q * H) * L;
    double logit = 6 * H * V;
    REL(ep_cost_model_flops_per_token(&c, &plan), mlp + attn + logit, 1e-12);
}

static void test_megatron_flops_mla_mtp(void) {
    ep_config c;
    static ep_layer_plan plan;
    model(DSV3 "--mtp-num-layers 1", &c, &plan);
    double H = 7168, s = 4096, V = 129280, n = 128, mtp = 1;
    double dense = 3, moe = 58 + 1; /* the MTP layer repeats the last (MoE) layer */
    double mlp = 6 * H * (18432.0 * 3 * dense + 2048.0 * 8 * 3 * moe + 2048.0 * 3 * moe);
    double q_term = 1536 * (H + n * (128 + 64) + 1);
    double attn = 6 * (q_term + 512 * (H + n * (128 + 128) + 1) + H * 64 + n * 128 * H +
                       s * n * (128 + 64) / 2 + s * n * 128 / 2);
    double total = mlp + attn * 62 + 6 * mtp * (3 * H + 2 * H * H) + 6 * H * V * (mtp + 1);
    /* Megatron also counts the two MLA norm vectors as GEMM weights: a 3e-6 difference */
    REL(ep_cost_model_flops_per_token(&c, &plan), total, 1e-5);
}

static void test_hybrid_flops(void) {
    ep_config c;
    static ep_layer_plan plan;
    model(SMALL " --num-layers 4 --hybrid-override-pattern M*-E", &c, &plan);
    CU_ASSERT_EQUAL_FATAL(plan.num_layers, 4);
    double H = 64, s = 256;
    double mamba = 2 * H * (2 * 128 + 2 * 8 * 16 + 8) + 7 * 128 * 16 + 2 * 128 * H;
    double attn = 4 * H * 1 * (H + H * 2.0 / 4 + s / 2); /* Megatron attn_layer_flops, p = 1 */
    double mlp = 4 * (128 / H) * 1.5 * H * H;
    double moe = 4 * H * 32 * 2 * 1.5 + 4 * H * 48 * 1.5;
    double logit = 2 * H * 1000;
    REL(ep_cost_model_flops_per_token(&c, &plan), 3 * (mamba + attn + mlp + moe + logit), 1e-12);
}

void ep_suite_cost(void) {
    CU_pSuite s = CU_add_suite("cost", NULL, NULL);
    CU_add_test(s, "GEMM flops and bytes", test_gemm);
    CU_add_test(s, "attention flops and bytes", test_attention);
    CU_add_test(s, "sliding-window attention: keys per query", test_window_keys);
    CU_add_test(s, "layer params: GQA, MoE, dense, MTP", test_layer_params_gqa_moe);
    CU_add_test(s, "layer params: MLA", test_layer_params_mla);
    CU_add_test(s, "layer params: Mamba-2 and GDN", test_layer_params_mamba);
    CU_add_test(s, "small model: params and flops by hand", test_small_model_totals);
    CU_add_test(s, "DeepSeek-V3: 671B total, 37B active", test_deepseek_v3_params);
    CU_add_test(s, "Mixtral-8x7B: 46.7B total, 12.9B active", test_mixtral_params);
    CU_add_test(s, "Qwen3-30B-A3B: 30.5B total, 3.3B active", test_qwen3_params);
    CU_add_test(s, "Megatron flops formula: GQA", test_megatron_flops_gqa);
    CU_add_test(s, "Megatron flops formula: MLA + MTP", test_megatron_flops_mla_mtp);
    CU_add_test(s, "Megatron hybrid flops formula", test_hybrid_flops);
}
