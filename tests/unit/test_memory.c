/* Activation memory (core/memory.c): the per-layer formula against hand computations
 * (Korthikanti et al. 2022, Megatron-LM's theoretical_memory_usage.py) and the schedule walk's
 * in-flight microbatches (1F1B, interleaved, full recomputation). */
#include <CUnit/CUnit.h>
#include <math.h>

#include "ep_memory.h"
#include "sched_test_util.h"

/* A dense GPT: h 1024, f 4h, 16 heads (MHA), GeLU MLP, s 2048, b 2. */
#define DENSE_GPT                                                                                  \
    "--num-experts 0 --mtp-num-layers 0 --no-swiglu --hidden-size 1024 --ffn-hidden-size 4096 "    \
    "--num-attention-heads 16 --seq-length 2048 --micro-batch-size 2 "

static const ep_mem_model korthikanti = {1, 0}; /* dropout masks, scores materialized */

static double part_sum(const ep_mem_part p[EP_NODE_NUM]) {
    double b = 0;
    for (int n = 0; n < EP_NODE_NUM; n++)
        b += p[n].saved;
    return b;
}

/* What one microbatch's forward of layer l saves on a rank of the config (t tokens). */
static double layer_bytes(const ep_sched *s, int l, double t, const ep_mem_model *a) {
    ep_mem_part p[EP_NODE_NUM];
    ep_mem_layer_saved(&s->cfg, &s->plan.layers[l], t, ep_mem_expected_expert_rows(&s->cfg, t), a,
                       p);
    return part_sum(p);
}

static int near(double a, double b) {
    return fabs(a - b) <= 1e-12 * fabs(b);
}

/* Table 2 of Korthikanti et al.: with tensor and sequence parallelism a transformer layer saves
 * s b h (34 + 5 a s / h) / t bytes; selective recomputation of core attention drops the 5as/h. */
static void test_korthikanti_layer(void) {
    ep_sched s;
    if (sched_build_flags(&s, DENSE_GPT "--num-layers 2 --tensor-model-parallel-size 4 "
                                        "--world-size 4 --global-batch-size 2") != 0)
        return;
    double S = 2048, b = 2, h = 1024, a = 16, tp = 4, t = S * b / tp;
    CU_ASSERT_STRING_EQUAL(s.plan.layers[0].blocks, "*-");
    CU_ASSERT(near(layer_bytes(&s, 0, t, &korthikanti), S * b * h * (34 + 5 * a * S / h) / tp));
    ep_sched_free(&s);
    if (sched_build_flags(&s, DENSE_GPT "--num-layers 2 --tensor-model-parallel-size 4 "
                                        "--world-size 4 --global-batch-size 2 "
                                        "--recompute-granularity selective") != 0)
        return;
    CU_ASSERT(near(layer_bytes(&s, 0, t, &korthikanti), S * b * h * 34 / tp));
    /* flash attention keeps the fp32 log-sum-exp (4 bytes per head and query) in their place */
    ep_sched_free(&s);
    if (sched_build_flags(&s, DENSE_GPT "--num-layers 2 --tensor-model-parallel-size 4 "
                                        "--world-size 4 --global-batch-size 2") != 0)
        return;
    ep_mem_model flash = {1, 1};
    CU_ASSERT(near(layer_bytes(&s, 0, t, &flash), S * b * h * 34 / tp + 4 * a * S * b / tp));
    ep_sched_free(&s);
}

/* Gated SwiGLU keeps fc1's 2f-wide output: 2f/h more than GeLU, per s b h / t. FP8 keeps the
 * linear layers' inputs in one byte. */
static void test_swiglu_fp8(void) {
    ep_sched s;
    const char *f = DENSE_GPT "--num-layers 2 --tensor-model-parallel-size 2 --world-size 2 "
                              "--global-batch-size 2 --recompute-granularity selective";
    if (sched_build_flags(&s, f) != 0) return;
    double S = 2048, b = 2, h = 1024, ff = 4096, tp = 2, t = S * b / tp;
    double gelu = layer_bytes(&s, 0, t, &korthikanti);
    s.cfg.swiglu = 1;
    CU_ASSERT(near(layer_bytes(&s, 0, t, &korthikanti) - gelu, 2 * S * b * ff / tp));
    /* FP8: qkv's, fc1's and fc2's inputs at one byte; attn_proj keeps a quantized copy of its
     * input beside the bf16 one the attention's backward reads */
    s.cfg.swiglu = 0;
    s.cfg.fp8_format = EP_FP8_HYBRID;
    CU_ASSERT(near(layer_bytes(&s, 0, t, &korthikanti), gelu - S * b * (h + ff) / tp));
    ep_sched_free(&s);
}

/* Megatron-LM's compute_activation_memory (theoretical_memory_usage.py) covers the first pipeline
 * stage of 1F1B with PP microbatches in flight: per layer s b h (18 + 4 f / h), times all L layers
 * (PP microbatches x L / PP layers), plus the embedding's 8 s b PP (token ids) and s b h PP
 * (dropout mask), times min(1, microbatches / PP), all over TP. The walk of the first stage gives
 * the same bytes for a Llama-2-7B-sized model (MHA and GeLU, which the formula assumes). */
static double megatron_formula(double S, double b, double h, double f, double L, double pp,
                               double tp, double nmb) {
    double act = S * b * h * (18 + 4 * f / h) * L;
    act += 8 * S * b * pp + S * b * h * pp;
    if (pp > 1) act *= fmin(1, nmb / pp);
    return act / tp;
}

static void test_megatron_first_stage(void) {
    ep_sched s;
    const char *f = "--num-experts 0 --mtp-num-layers 0 --no-swiglu --num-layers 32 "
                    "--hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 "
                    "--seq-length 4096 --micro-batch-size 1 --padded-vocab-size 32000 "
                    "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
                    "--world-size 8 --global-batch-size 8 --recompute-granularity selective";
    if (sched_build_flags(&s, f) != 0) return;
    CU_ASSERT_EQUAL(s.num_microbatches, 8);
    ep_mem_peak p;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &korthikanti, &p), 0);
    CU_ASSERT(near(p.activations, megatron_formula(4096, 1, 4096, 11008, 32, 4, 2, 8)));
    ep_sched_free(&s);
}

/* 1F1B: the first stage holds PP microbatches at once, the last stage one (with the output layer
 * and its fp32 logits); default kernels (flash attention, no dropout). */
#define PP4 DENSE_GPT "--num-layers 8 --pipeline-model-parallel-size 4 --world-size 4 "

static void test_1f1b_in_flight(void) {
    ep_sched s;
    if (sched_build_flags(&s, PP4 "--global-batch-size 16") != 0) return;
    ep_mem_model a;
    ep_mem_model_default(&a);
    double t = 2048 * 2;
    double layer = layer_bytes(&s, 0, t, &a);
    double emb = ep_mem_embedding_saved(&s.cfg, t, &a).saved;
    double out = ep_mem_output_saved(&s.cfg, t, &a).saved;
    ep_mem_peak first, last;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &first), 0);
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 3, &a, &last), 0);
    CU_ASSERT(near(first.activations, 4 * (2 * layer + emb)));
    CU_ASSERT(near(last.activations, 2 * layer + out));
    /* fewer microbatches than stages: only those are in flight */
    ep_sched_free(&s);
    if (sched_build_flags(&s, PP4 "--global-batch-size 4") != 0) return;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &first), 0);
    CU_ASSERT(near(first.activations, 2 * (2 * layer + emb)));
    CU_ASSERT(
        near(first.total, first.model_state + first.activations * (1 + EP_MEM_FRAGMENTATION)));
    CU_ASSERT_EQUAL(first.buffers, 0);
    ep_sched_free(&s);
}

/* Interleaved 1F1B (VPP 2, one layer per virtual stage): the first stage's warm-up is
 * (PP - 1) x 2 + (VPP - 1) x PP = 10 virtual microbatches, so 11 chunk forwards are live when the
 * first backward starts, 7 of them chunk 0's (with the embedding): more than 1F1B's 4 x 2 layers.
 */
static void test_interleaved_in_flight(void) {
    ep_sched s;
    if (sched_build_flags(&s, PP4 "--global-batch-size 16 "
                                  "--num-virtual-stages-per-pipeline-rank 2") != 0)
        return;
    ep_mem_model a;
    ep_mem_model_default(&a);
    double t = 2048 * 2;
    double layer = layer_bytes(&s, 0, t, &a);
    double emb = ep_mem_embedding_saved(&s.cfg, t, &a).saved;
    ep_mem_peak first;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &first), 0);
    CU_ASSERT(near(first.activations, 11 * layer + 8 * emb));
    CU_ASSERT(first.activations > 4 * (2 * layer + emb));
    ep_sched_free(&s);
}

/* Full recomputation (uniform, 1 layer a group): the forward keeps each layer's input only; the
 * peak is the larger of the end of the forward (inputs, embedding, output layer) and the first
 * backward layer's rerun (its whole activations back, the output layer released). */
static void test_full_recompute(void) {
    ep_sched s;
    const char *base = DENSE_GPT "--num-layers 4 --world-size 1 --global-batch-size 4 ";
    char f[1024];
    snprintf(f, sizeof f,
             "%s--recompute-granularity full --recompute-method uniform "
             "--recompute-num-layers 1",
             base);
    if (sched_build_flags(&s, f) != 0) return;
    ep_mem_model a;
    ep_mem_model_default(&a);
    double t = 2048 * 2;
    double layer = layer_bytes(&s, 0, t, &a), in = ep_mem_layer_input_bytes(&s.cfg, t);
    double emb = ep_mem_embedding_saved(&s.cfg, t, &a).saved;
    double out = ep_mem_output_saved(&s.cfg, t, &a).saved;
    CU_ASSERT(in == 2 * t * 1024);
    ep_mem_peak full, none;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &full), 0);
    CU_ASSERT(near(full.activations, 4 * in + emb + fmax(out, layer - in)));
    ep_sched_free(&s);
    /* groups of 2: the forward keeps the input of each group's first layer */
    snprintf(f, sizeof f,
             "%s--recompute-granularity full --recompute-method uniform "
             "--recompute-num-layers 2",
             base);
    if (sched_build_flags(&s, f) != 0) return;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &full), 0);
    CU_ASSERT(near(full.activations, 2 * in + emb + fmax(out, 2 * layer - in)));
    ep_sched_free(&s);
    if (sched_build_flags(&s, base) != 0) return;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &none), 0);
    CU_ASSERT(near(none.activations, 4 * layer + emb + out));
    ep_sched_free(&s);
}

/* A MoE layer's parts by hand: pre_dispatch adds to the attention the pre-MLP norm's input and
 * output and the router's fp32 scores and map (5 t E); the mlp node keeps per routed row m
 * expert_fc1's input, its 2F-wide SwiGLU output, the activation's output and the expert output
 * (2mH + 4mF + 2mF + 2mH). moe_act drops 2mF, the moe module all but the norm output. */
static void test_moe_layer(void) {
    ep_sched s;
    if (sched_build_flags(&s, SCHED_SMALL "--world-size 1 --expert-model-parallel-size 1 "
                                          "--global-batch-size 1 --mtp-num-layers 0") != 0)
        return;
    ep_mem_model a;
    ep_mem_model_default(&a);
    const ep_layer *L = &s.plan.layers[0];
    CU_ASSERT_EQUAL(L->is_moe, 1);
    double t = 128, H = 256, F = 256, E = 8, m = 300;
    ep_mem_part p[EP_NODE_NUM];
    ep_mem_layer_saved(&s.cfg, L, t, m, &a, p);
    CU_ASSERT(near(p[EP_NODE_MLP].saved, 2 * m * H + 4 * m * F + 2 * m * F + 2 * m * H));
    CU_ASSERT(near(p[EP_NODE_MLP].wgrad, 2 * m * H + 2 * m * F));
    double pre = p[EP_NODE_PRE_DISPATCH].saved;
    s.cfg.recompute_granularity = EP_RECOMPUTE_SELECTIVE;
    s.cfg.recompute_mask = EP_RC_MOE_ACT;
    ep_mem_layer_saved(&s.cfg, L, t, m, &a, p);
    CU_ASSERT(near(p[EP_NODE_MLP].saved, 2 * m * H + 4 * m * F + 2 * m * H));
    s.cfg.recompute_mask = EP_RC_MOE;
    ep_mem_layer_saved(&s.cfg, L, t, m, &a, p);
    CU_ASSERT_EQUAL(p[EP_NODE_MLP].saved, 0);
    CU_ASSERT(near(p[EP_NODE_PRE_DISPATCH].saved, pre - 5 * t * E));
    ep_sched_free(&s);
}

/* One rank without pipeline or EP holds every layer of its one microbatch at the end of the
 * forward: MoE layers with the routed rows of the schedule (all t x top-k local at EP 1), the MTP
 * layer with its own logits, the embedding and the output layer. */
static void test_moe_mtp_walk(void) {
    ep_sched s;
    if (sched_build_flags(&s, SCHED_SMALL "--world-size 1 --expert-model-parallel-size 1 "
                                          "--global-batch-size 2 --mtp-num-layers 1") != 0)
        return;
    ep_mem_model a;
    ep_mem_model_default(&a);
    double t = 128, sum = 0;
    CU_ASSERT_EQUAL(s.plan.num_mtp, 1);
    for (int l = 0; l < 3; l++)
        sum += layer_bytes(&s, l, t, &a);
    sum += ep_mem_embedding_saved(&s.cfg, t, &a).saved + ep_mem_output_saved(&s.cfg, t, &a).saved;
    ep_mem_peak p;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &p), 0);
    CU_ASSERT(near(p.activations, sum));
    ep_sched_free(&s);
}

/* Delayed wgrad: a node's backward frees all but its wgrad inputs, which stay until its wgrad op.
 * A hand-made order F0 B0 F1 W0 B1 W1 of one node peaks at P + W (microbatch 0's wgrad inputs
 * beside microbatch 1's forward), F0 B0 W0 F1 B1 W1 at P. */
static void test_delayed_wgrad_walk(void) {
    ep_sched s;
    if (sched_build_flags(&s, DENSE_GPT "--num-layers 1 --world-size 1 --global-batch-size 4 "
                                        "--micro-batch-size 2") != 0)
        return;
    CU_ASSERT_EQUAL_FATAL(s.num_microbatches, 2);
    ep_mem_model a;
    ep_mem_model_default(&a);
    double t = 2048 * 2;
    ep_mem_part parts[EP_NODE_NUM];
    ep_mem_layer_saved(&s.cfg, &s.plan.layers[0], t, 0, &a, parts);
    double P = parts[EP_NODE_PRE_DISPATCH].saved, W = parts[EP_NODE_PRE_DISPATCH].wgrad;
    CU_ASSERT(W > 0 && W < P);
    static const int orders[2][6][2] = {{{0, EP_PHASE_FWD},
                                         {0, EP_PHASE_BWD},
                                         {1, EP_PHASE_FWD},
                                         {0, EP_PHASE_BWD_DW},
                                         {1, EP_PHASE_BWD},
                                         {1, EP_PHASE_BWD_DW}},
                                        {{0, EP_PHASE_FWD},
                                         {0, EP_PHASE_BWD},
                                         {0, EP_PHASE_BWD_DW},
                                         {1, EP_PHASE_FWD},
                                         {1, EP_PHASE_BWD},
                                         {1, EP_PHASE_BWD_DW}}};
    const double expect[2] = {P + W, P};
    ep_op *saved_ops = s.ranks[0].ops;
    int saved_n = s.ranks[0].nops;
    for (int k = 0; k < 2; k++) {
        ep_op ops[6];
        memset(ops, 0, sizeof ops);
        for (int i = 0; i < 6; i++) {
            ops[i].label = "attn_norm";
            ops[i].mb = (int16_t)orders[k][i][0];
            ops[i].phase = (ep_phase)orders[k][i][1];
            ops[i].chunk = 0;
            ops[i].layer = 0;
            ops[i].node = EP_NODE_PRE_DISPATCH;
            ops[i].stream = EP_STREAM_COMP;
            ops[i].group = ops[i].traffic = -1;
        }
        s.ranks[0].ops = ops;
        s.ranks[0].nops = 6;
        ep_mem_peak p;
        CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &p), 0);
        CU_ASSERT(near(p.activations, expect[k]));
    }
    s.ranks[0].ops = saved_ops;
    s.ranks[0].nops = saved_n;
    ep_sched_free(&s);
}

/* Megatron FSDP (optim_grads_params) on 2 ranks, 4 dense layers of L = 12h^2 + 2h parameters
 * (QKV and projection 4h^2, fc1 and fc2 2 x 4h^2, two norms), V = 32000, fp32 main gradients.
 * The prefetch reaches max(1e9, 2L)/2 elements past the running layer; the reduce-scatter queue
 * is drained to at most max(1e9, 2L) elements before a group joins (memory_fsdp.c). */
static void test_fsdp_buffers(void) {
    const char *fsdp = DENSE_GPT "--num-layers 4 --world-size 2 --global-batch-size 4 "
                                 "--use-megatron-fsdp --data-parallel-sharding-strategy "
                                 "optim_grads_params --padded-vocab-size 32000 ";
    char f[1024];
    ep_sched s;
    ep_mem_fsdp b;
    /* h 1024: L = 12.6 M, the prefetch (5e8 elements) reaches every later layer */
    if (sched_build_flags(&s, fsdp) != 0) return;
    double h = 1024, L = 12 * h * h + 2 * h, V = 32000;
    CU_ASSERT_EQUAL_FATAL(ep_mem_fsdp_init(&s, 0, &b), 0);
    CU_ASSERT(near(b.persistent, 2 * V * h * 2)); /* embedding and output layer, bf16 */
    double fwd[4] = {4 * L * 2, 3 * L * 2, 2 * L * 2, 1 * L * 2};
    double bwd[4] = {1 * L * 2, 2 * L * 2, 3 * L * 2, 4 * L * 2};
    for (int l = 0; l < 4; l++) {
        CU_ASSERT(near(b.param_fwd[l], fwd[l]));
        CU_ASSERT(near(b.param_bwd[l], bwd[l]));
        /* the queue keeps every later layer's gradient (4L < 1e9); the embedding and the output
         * layer share a bucket, held through the backward */
        CU_ASSERT(near(b.grad_bwd[l], (4 - l) * L * 4 + V * h * 4));
    }
    ep_mem_fsdp_free(&b);
    ep_sched_free(&s);
    /* the walk's peak, at layer 3's first backward op with a small vocabulary (every layer's
     * activations still live; with V = 32000 the fp32 logits of the loss's forward are larger) */
    snprintf(f, sizeof f, "%s --padded-vocab-size 1024", fsdp);
    if (sched_build_flags(&s, f) != 0) return;
    V = 1024;
    ep_mem_model a;
    ep_mem_model_default(&a);
    ep_mem_peak p;
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &p), 0);
    CU_ASSERT(near(p.fsdp_params, 2 * V * h * 2 + 4 * L * 2));
    CU_ASSERT(near(p.fsdp_grads, L * 4 + V * h * 4));
    CU_ASSERT(near(p.total, p.model_state + p.activations * (1 + EP_MEM_FRAGMENTATION) +
                                p.fsdp_params + p.fsdp_grads));
    ep_sched_free(&s);
    /* h 8192: L = 805 M > 5e8, so the prefetch takes one group (the next layer's, dense) and the
     * queue, capped at 2L, keeps the last two gradient groups */
    snprintf(f, sizeof f, "%s --hidden-size 8192 --ffn-hidden-size 32768", fsdp);
    if (sched_build_flags(&s, f) != 0) return;
    h = 8192, L = 12 * h * h + 2 * h, V = 32000;
    CU_ASSERT_EQUAL_FATAL(ep_mem_fsdp_init(&s, 0, &b), 0);
    double fwd2[4] = {2 * L * 2, 2 * L * 2, 2 * L * 2, 1 * L * 2};
    double bwd2[4] = {1 * L * 2, 2 * L * 2, 2 * L * 2, 2 * L * 2};
    double grad2[4] = {3 * L * 4, 3 * L * 4, 2 * L * 4, 1 * L * 4};
    for (int l = 0; l < 4; l++) {
        CU_ASSERT(near(b.param_fwd[l], fwd2[l]));
        CU_ASSERT(near(b.param_bwd[l], bwd2[l]));
        CU_ASSERT(near(b.grad_bwd[l], grad2[l] + V * h * 4));
    }
    ep_mem_fsdp_free(&b);
    ep_sched_free(&s);
    /* optim_grads keeps the parameters whole: gradient buckets only; DDP none */
    snprintf(f, sizeof f, "%s --data-parallel-sharding-strategy optim_grads", fsdp);
    if (sched_build_flags(&s, f) != 0) return;
    CU_ASSERT_EQUAL(ep_mem_fsdp_kind(&s.cfg), EP_MEM_FSDP_GRADS);
    CU_ASSERT_EQUAL_FATAL(ep_mem_fsdp_init(&s, 0, &b), 0);
    CU_ASSERT_EQUAL(b.persistent + b.param_fwd[0] + b.param_bwd[3], 0);
    CU_ASSERT(near(b.grad_bwd[0], 4 * 1024 * (12 * 1024 + 2.0) * 4 + V * 1024 * 4));
    ep_mem_fsdp_free(&b);
    ep_sched_free(&s);
    if (sched_build_flags(&s, DENSE_GPT "--num-layers 4 --world-size 2 "
                                        "--global-batch-size 4") != 0)
        return;
    CU_ASSERT_EQUAL(ep_mem_fsdp_kind(&s.cfg), EP_MEM_FSDP_NONE);
    CU_ASSERT_EQUAL_FATAL(ep_mem_rank_peak(&s, 0, &a, &p), 0);
    CU_ASSERT_EQUAL(p.fsdp_params + p.fsdp_grads, 0);
    ep_sched_free(&s);
}

void ep_suite_memory(void) {
    CU_pSuite s = CU_add_suite("activation memory", NULL, NULL);
    CU_add_test(s, "dense layer with TP+SP: Korthikanti's sbh(34+5as/h)/t", test_korthikanti_layer);
    CU_add_test(s, "SwiGLU keeps 2f/h more, FP8 one byte per linear input", test_swiglu_fp8);
    CU_add_test(s, "first stage = Megatron-LM's theoretical activation memory",
                test_megatron_first_stage);
    CU_add_test(s, "1F1B: PP microbatches on the first stage, one on the last",
                test_1f1b_in_flight);
    CU_add_test(s, "interleaved 1F1B holds its longer warm-up", test_interleaved_in_flight);
    CU_add_test(s, "full recomputation keeps layer inputs", test_full_recompute);
    CU_add_test(s, "MoE layer: routed rows, moe_act and moe recompute", test_moe_layer);
    CU_add_test(s, "one rank holds every layer, MoE and MTP, at the forward's end",
                test_moe_mtp_walk);
    CU_add_test(s, "delayed wgrad keeps the wgrad inputs to the wgrad op", test_delayed_wgrad_walk);
    CU_add_test(s, "FSDP: gathered, prefetched and reduce-scattered buckets", test_fsdp_buffers);
}
