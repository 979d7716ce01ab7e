/* config_flags: the table of every configuration flag and the conversion of flag text to fields.
 *
 * One row per flag: Megatron-LM spelling (megatron/training/arguments.py), type, field, default,
 * help. Parsing, defaults, --help and the JSON dump all walk this table, so a flag exists in one
 * place only. Project flags (no Megatron equivalent) carry project = 1.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_config.h"

/* Enum fields are written through an int pointer. */
_Static_assert(sizeof(ep_dispatcher_type) == sizeof(int), "enum size");
_Static_assert(sizeof(ep_fp8_recipe) == sizeof(int), "enum size");
_Static_assert(sizeof(ep_transport) == sizeof(int), "enum size");

static const char *const k_dispatcher[] = {"alltoall", "allgather", "flex", NULL};
static const char *const k_flex[] = {"deepep", "hybridep", NULL};
static const char *const k_pad[] = {"none", "host", "device", NULL};
static const char *const k_route[] = {"uniform", "zipf", "group-limited", NULL};
static const char *const k_seqlen[] = {"fixed", "uniform", "lognormal", NULL};
static const char *const k_outer[] = {"no_shard", "optim", NULL};
static const char *const k_shard[] = {"no_shard", "optim", "optim_grads", "optim_grads_params",
                                      NULL};
static const char *const k_fp8[] = {"none", "e4m3", "hybrid", NULL};
static const char *const k_recipe[] = {"delayed", "tensorwise", "blockwise", "mxfp8", NULL};
static const char *const k_score[] = {"softmax", "sigmoid", NULL};
static const char *const k_balance[] = {"aux_loss",   "seq_aux_loss",       "global_aux_loss",
                                        "sinkhorn",   "quantile_balancing", "none", NULL};
static const char *const k_transport[] = {"kernel", "nccl", NULL};
static const char *const k_dtype[] = {"fp32", "bf16", "fp16", "fp8", NULL};
static const char *const k_drop[] = {"probs", "position", NULL};
static const char *const k_recompute[] = {"none", "full", "selective", NULL};
static const char *const k_rc_method[] = {"none", "uniform", "block", NULL};
static const char *const k_graph_impl[] = {"none", "local", "transformer_engine", NULL};
/* bit i of ep_config.cuda_graph_mask is word i (EP_CG_*) */
static const char *const k_graph_scope[] = {"full",  "full_iteration", "attn", "mlp", "moe",
                                            "moe_router", "moe_preprocess", "mamba", NULL};
/* bit i of ep_config.recompute_mask is word i (EP_RC_*) */
static const char *const k_rc_modules[] = {"core_attn", "moe_act", "layernorm",      "mla_up_proj",
                                           "mlp",       "moe",     "shared_experts", NULL};

#define OFF(field) offsetof(ep_config, field)
#define FI(n, f, d, g, h)                                                                          \
    { n, EP_FLAG_INT, OFF(f), 0, d, NULL, NULL, g, 0, h }
#define FB(n, f, d, g, h)                                                                          \
    { n, EP_FLAG_BOOL, OFF(f), 0, d, NULL, NULL, g, 0, h }
#define FS(n, f, d, g, h)                                                                          \
    { n, EP_FLAG_STRING, OFF(f), sizeof(((ep_config *)0)->f), d, NULL, NULL, g, 0, h }
/* a string of space-separated words from c (a Megatron-LM list flag: --name w1 w2 ...) */
#define FW(n, f, c, d, g, h)                                                                       \
    { n, EP_FLAG_STRING, OFF(f), sizeof(((ep_config *)0)->f), d, c, NULL, g, 0, h }
#define FE(n, f, c, d, g, h)                                                                       \
    { n, EP_FLAG_ENUM, OFF(f), 0, d, c, NULL, g, 0, h }
#define FD(n, f, d, g, h)                                                                          \
    { n, EP_FLAG_DOUBLE, OFF(f), 0, d, NULL, NULL, g, 0, h }
#define PI(n, f, d, g, h)                                                                          \
    { n, EP_FLAG_INT, OFF(f), 0, d, NULL, NULL, g, 1, h }
#define PD(n, f, d, g, h)                                                                          \
    { n, EP_FLAG_DOUBLE, OFF(f), 0, d, NULL, NULL, g, 1, h }
#define PU(n, f, d, g, h)                                                                          \
    { n, EP_FLAG_U64, OFF(f), 0, d, NULL, NULL, g, 1, h }
#define PB(n, f, d, g, h)                                                                          \
    { n, EP_FLAG_BOOL, OFF(f), 0, d, NULL, NULL, g, 1, h }
#define PE(n, f, c, d, g, h)                                                                       \
    { n, EP_FLAG_ENUM, OFF(f), 0, d, c, NULL, g, 1, h }
#define AL(n, target, g, h)                                                                        \
    { n, EP_FLAG_ALIAS, 0, 0, "", NULL, target, g, 0, h }

#define GM EP_FLAG_GROUP_MODEL
#define GP EP_FLAG_GROUP_PARALLEL
#define GE EP_FLAG_GROUP_MOE
#define GT EP_FLAG_GROUP_THD
#define GX EP_FLAG_GROUP_PROJECT

/* The default model is a small GPT-MoE (4 layers, hidden 1024, 8 experts top-2) that fits on one
 * GPU and simulates in a blink; presets in configs/ describe real models. */
static const ep_flag k_flags[] = {
    /* model */
    FI("num-layers", num_layers, "4", GM, "decoder layers (MTP layers excluded)"),
    FI("hidden-size", hidden_size, "1024", GM, "transformer hidden size"),
    FI("ffn-hidden-size", ffn_hidden_size, "4096", GM, "dense MLP hidden size (0 = 4 x hidden)"),
    FI("num-attention-heads", num_attention_heads, "16", GM, "attention heads"),
    FB("group-query-attention", group_query_attention, "0", GM,
       "grouped-query attention (with --num-query-groups)"),
    FI("num-query-groups", num_query_groups, "0", GM, "query groups for GQA (0 = heads)"),
    FI("kv-channels", kv_channels, "0", GM, "attention head dimension (0 = hidden / heads)"),
    FB("qk-layernorm", qk_layernorm, "0", GM,
       "RMSNorm of queries and keys per head (MLA: of the compressed key/value and query latents)"),
    FS("window-size", window_size, "", GM,
       "sliding-window attention: L,R keys before and after each query (Megatron's tuple; -1 = "
       "unbounded; GPT-OSS: 127,0; \"\" = full attention)"),
    FS("window-attn-skip-freq", window_attn_skip_freq, "", GM,
       "which layers have the window: N = every N-th layer (from 1) has full attention, or a list "
       "[1,0,...] with 1 = windowed (\"\" = every layer)"),
    FB("multi-latent-attention", multi_latent_attention, "0", GM,
       "multi-latent attention (DeepSeek MLA)"),
    FI("q-lora-rank", q_lora_rank, "0", GM, "MLA query low-rank dimension (0 = no compression)"),
    FI("kv-lora-rank", kv_lora_rank, "32", GM, "MLA key/value low-rank dimension"),
    FI("qk-head-dim", qk_head_dim, "128", GM, "MLA query/key head dimension (no position part)"),
    FI("qk-pos-emb-head-dim", qk_pos_emb_head_dim, "64", GM, "MLA rotary position head dimension"),
    FI("v-head-dim", v_head_dim, "128", GM, "MLA value head dimension"),
    FI("seq-length", seq_length, "2048", GM, "sequence length in tokens"),
    FI("micro-batch-size", micro_batch_size, "1", GM, "sequences per microbatch"),
    FI("global-batch-size", global_batch_size, "8", GM, "sequences per iteration (all DP ranks)"),
    FI("padded-vocab-size", vocab_size, "32000", GM, "vocabulary size (already padded)"),
    AL("vocab-size", "padded-vocab-size", GM, "same as --padded-vocab-size"),
    FB("swiglu", swiglu, "1", GM, "gated SwiGLU MLP (three weight matrices)"),
    FB("quick-geglu", quick_geglu, "0", GM,
       "gated MLP with quick-GELU (GPT-OSS; three weight matrices, implies the gate of --swiglu)"),
    PD("activation-func-clamp-value", activation_func_clamp_value, "0", GM,
       "clamp of the gated activation's inputs (Megatron's TransformerConfig field of this name, "
       "set by Megatron-Bridge for GPT-OSS: 7; 0 = none): with --quick-geglu Megatron clamps and "
       "concatenates fc1's output before the fused activation"),
    FB("disable-bias-linear", disable_bias_linear, "0", GM,
       "linear layers without biases (Megatron's default has them: with grouped-GEMM experts, "
       "fc2's bias is added by an eager loop over the experts, the expert_bias op)"),
    FI("mtp-num-layers", mtp_num_layers, "0", GM, "multi-token-prediction layers"),
    FS("hybrid-override-pattern", hybrid_override_pattern, "", GM,
       "hybrid layer pattern: M * D G - E, [..] groups, | stages, / MTP (\"\" = GPT)"),
    FI("mamba-state-dim", mamba_state_dim, "128", GM, "Mamba SSM state dimension"),
    FI("mamba-head-dim", mamba_head_dim, "64", GM, "Mamba head dimension"),
    FI("mamba-num-heads", mamba_num_heads, "0", GM, "Mamba heads (0 = 2 x hidden / head dim)"),
    FI("mamba-num-groups", mamba_num_groups, "8", GM, "Mamba B/C groups (Megatron's default 8)"),

    /* parallel layout */
    FI("tensor-model-parallel-size", tensor_model_parallel_size, "1", GP, "tensor parallel (TP)"),
    FI("pipeline-model-parallel-size", pipeline_model_parallel_size, "1", GP,
       "pipeline stages (PP)"),
    FI("num-virtual-stages-per-pipeline-rank", virtual_pipeline_model_parallel_size, "1", GP,
       "model chunks per pipeline rank (VPP, interleaved 1F1B when > 1)"),
    FI("num-layers-per-virtual-pipeline-stage", num_layers_per_virtual_pipeline_stage, "0", GP,
       "older VPP spelling: layers per chunk, converted to chunks per rank"),
    FI("decoder-first-pipeline-num-layers", decoder_first_pipeline_num_layers, "0", GP,
       "decoder layers of the first pipeline stage (0 = an even split)"),
    FI("decoder-last-pipeline-num-layers", decoder_last_pipeline_num_layers, "0", GP,
       "decoder layers of the last pipeline stage (0 = an even split)"),
    FB("overlap-p2p-communication", overlap_p2p_comm, "1", GP,
       "interleaved 1F1B: a step's forward exchange is posted right after its forward, so the "
       "transfer overlaps the backward (Megatron's default; --no-overlap-p2p-communication: one "
       "exchange after both)"),
    FS("pipeline-model-parallel-layout", pipeline_model_parallel_layout, "", GP,
       "layers of each virtual stage, Megatron's grammar: E embedding, t decoder layer, m MTP, "
       "L loss, | between stages, x*n and (...)*n repeat, e.g. \"Et*2|(t*2|)*6,tL\""),
    FB("account-for-embedding-in-pipeline-split", account_for_embedding_in_pipeline_split, "0", GP,
       "the embedding counts as a layer in the even split (the first stage holds one fewer)"),
    FB("account-for-loss-in-pipeline-split", account_for_loss_in_pipeline_split, "0", GP,
       "the loss counts as a layer in the even split (the last stage holds one fewer)"),
    FI("expert-model-parallel-size", expert_model_parallel_size, "1", GP, "expert parallel (EP)"),
    FI("expert-tensor-parallel-size", expert_tensor_parallel_size, "0", GP,
       "tensor parallel inside experts (ETP, 0 = TP)"),
    FB("tp-comm-overlap", tp_comm_overlap, "0", GP,
       "TP all-gathers and reduce-scatters beside the GEMMs that consume or produce them "
       "(Transformer Engine's userbuffers), on a stream of their own"),
    FB("sequence-parallel", sequence_parallel, "1", GP,
       "TP shards activations along the sequence (always on for TP > 1: the model has no TP "
       "all-reduce path)"),
    FI("context-parallel-size", context_parallel_size, "1", GP, "context parallel (CP)"),
    PI("world-size", world_size, "0", GP, "GPUs in the job (0 = TP x CP x PP x DP)"),
    PI("data-parallel-size", data_parallel_size, "0", GP,
       "data parallel (0 = world / (TP x CP x PP), 1 when neither is given)"),
    PI("gpus-per-node", gpus_per_node, "8", GP, "GPUs per node (epsim takes it from --topo)"),
    FB("use-distributed-optimizer", use_distributed_optimizer, "0", GP,
       "shard optimizer state over DP (ZeRO-1)"),
    FB("use-megatron-fsdp", use_megatron_fsdp, "0", GP, "Megatron FSDP"),
    FB("use-torch-fsdp2", use_torch_fsdp2, "0", GP,
       "PyTorch FSDP2: weights, gradients and optimizer state sharded per layer (PP 1, EP 1)"),
    FE("data-parallel-sharding-strategy", data_parallel_sharding_strategy, k_shard, "no_shard", GP,
       "FSDP sharding inside the (inner) DP group"),
    FI("num-distributed-optimizer-instances", num_distributed_optimizer_instances, "1", GP,
       "optimizer replicas; > 1 with FSDP is HSDP with this many outer groups"),
    FE("outer-dp-sharding-strategy", outer_dp_sharding_strategy, k_outer, "no_shard", GP,
       "HSDP outer groups: no_shard all-reduces, optim reduce-scatters"),
    FE("recompute-granularity", recompute_granularity, k_recompute, "none", GP,
       "recompute activations in the backward: full layers or selective modules"),
    FE("recompute-method", recompute_method, k_rc_method, "none", GP,
       "full: uniform (groups of --recompute-num-layers) or block (the first N of a chunk)"),
    FI("recompute-num-layers", recompute_num_layers, "0", GP,
       "full: layers per recompute group (uniform) or recomputed layers per chunk (block)"),
    FW("recompute-modules", recompute_modules, k_rc_modules, "", GP,
       "selective: modules whose forward is recomputed (default core_attn)"),
    FE("cuda-graph-impl", cuda_graph_impl, k_graph_impl, "none", GP,
       "CUDA graphs: captured ops cost one graph launch on the host, not a launch each"),
    FW("cuda-graph-scope", cuda_graph_scope, k_graph_scope, "full", GP,
       "what is captured: full (every layer), full_iteration, or attn mlp moe moe_router "
       "moe_preprocess mamba"),
    FB("use-precision-aware-optimizer", use_precision_aware_optimizer, "0", GP,
       "optimizer state and main gradients in the dtypes below (TransformerEngine FusedAdam)"),
    FE("main-grads-dtype", main_grads_dtype, k_dtype, "fp32", GP,
       "main gradients: fp32 or bf16 (reduced in that dtype)"),
    FE("main-params-dtype", main_params_dtype, k_dtype, "fp32", GP,
       "optimizer's master weights: fp32 or fp16"),
    FE("exp-avg-dtype", exp_avg_dtype, k_dtype, "fp32", GP,
       "Adam first moment: fp32, fp16, bf16 or fp8"),
    FE("exp-avg-sq-dtype", exp_avg_sq_dtype, k_dtype, "fp32", GP,
       "Adam second moment: fp32, fp16, bf16 or fp8"),
    FB("grad-reduce-in-bf16", grad_reduce_in_bf16, "0", GP,
       "reduce gradients in bf16 instead of fp32"),
    FB("overlap-grad-reduce", overlap_grad_reduce, "0", GP,
       "overlap gradient reduction with backward"),
    FB("overlap-param-gather", overlap_param_gather, "0", GP,
       "overlap parameter all-gather with forward"),
    FB("overlap-param-gather-with-optimizer-step", overlap_param_gather_with_optimizer_step, "0",
       GP, "gather the first model chunk's parameters beside the optimizer step, not the forward"),
    FB("fp8-param-gather", fp8_param_gather, "0", GP,
       "keep linear weights in FP8: parameter all-gathers move 1 B per weight"),
    FI("ddp-bucket-size", ddp_bucket_size, "0", GP,
       "gradient bucket size in parameters (0 = one bucket per layer)"),
    FI("train-iters", train_iters, "1", GP,
       "Megatron-LM's run length: accepted without effect (one iteration is simulated or run; "
       "epref: --iters), named in the note"),

    /* MoE */
    FI("num-experts", num_experts, "8", GE, "routed experts per MoE layer (0 = dense model)"),
    FI("moe-router-topk", moe_router_topk, "2", GE, "experts chosen per token"),
    FI("moe-ffn-hidden-size", moe_ffn_hidden_size, "1024", GE,
       "expert MLP hidden size (0 = --ffn-hidden-size)"),
    FI("moe-shared-expert-intermediate-size", moe_shared_expert_intermediate_size, "0", GE,
       "shared-expert hidden size (0 = none)"),
    FB("moe-shared-expert-overlap", moe_shared_expert_overlap, "0", GE,
       "run the shared experts beside the dispatch and combine all-to-alls"),
    FI("moe-router-num-groups", moe_router_num_groups, "0", GE,
       "expert groups for group-limited routing (0 = none)"),
    FI("moe-router-group-topk", moe_router_group_topk, "0", GE,
       "groups chosen per token in group-limited routing"),
    FE("moe-router-score-function", moe_router_score_function, k_score, "softmax", GE,
       "router score function"),
    FE("moe-router-load-balancing-type", moe_router_load_balancing_type, k_balance, "aux_loss", GE,
       "the router's load-balancing loss; the aux losses cost ops only with "
       "--moe-aux-loss-coeff > 0"),
    FD("moe-aux-loss-coeff", moe_aux_loss_coeff, "0", GE,
       "aux-loss weight (> 0: the router computes the loss, docs/schedule.md)"),
    FB("moe-router-enable-expert-bias", moe_router_enable_expert_bias, "0", GE,
       "aux-loss-free expert bias (the router counts tokens per expert)"),
    FB("moe-router-force-load-balancing", moe_router_force_load_balancing, "0", GE,
       "random router scores (Megatron's benchmark setting): every expert equally likely, "
       "group-limited routing kept"),
    FS("moe-layer-freq", moe_layer_freq, "1", GE,
       "MoE layer placement: N (every Nth from layer 0), ([0]*3+[1]*58) or [1,0,...]"),
    FE("moe-token-dispatcher-type", moe_token_dispatcher_type, k_dispatcher, "alltoall", GE,
       "token dispatcher"),
    FE("moe-flex-dispatcher-backend", moe_flex_dispatcher_backend, k_flex, "deepep", GE,
       "backend of the flex dispatcher"),
    FB("moe-enable-deepep", moe_enable_deepep, "0", GE,
       "older spelling of --moe-flex-dispatcher-backend deepep (needs the flex dispatcher)"),
    FD("moe-expert-capacity-factor", moe_expert_capacity_factor, "0", GE,
       "tokens per expert capped at factor x tokens x top-k / experts per rank (<= 0: dropless)"),
    FB("moe-pad-expert-input-to-capacity", moe_pad_expert_input_to_capacity, "0", GE,
       "pad every expert's input to the capacity (static shapes: no count exchange, no sync)"),
    FE("moe-token-drop-policy", moe_token_drop_policy, k_drop, "probs", GE,
       "tokens over capacity dropped by lowest probability or by position"),
    FB("moe-permute-fusion", moe_permute_fusion, "0", GE, "fused permute/unpermute kernels"),
    PB("moe-alltoall-per-rank", moe_alltoall_per_rank, "0", GE,
       "alltoall dispatcher: one row per token and destination rank, shared by its experts "
       "(Megatron-LM sends one per chosen expert; the validation runs measured before "
       "2026-11-27 ran this)"),
    PB("legacy-dispatch-order", legacy_dispatch_order, "0", GE,
       "the order epref ran before 2026-11-29: with EP overlap the forward dispatch issued before "
       "the backward MLP, and the alltoall dispatcher's split-size host sync at the end of "
       "pre_dispatch (Megatron-LM, and the default: after the backward MLP, at the start of the "
       "dispatch; the validation runs measured before then carry it)"),
    FB("moe-grouped-gemm", moe_grouped_gemm, "0", GE,
       "experts' GEMMs as one grouped call (Transformer Engine); off: Megatron's SequentialMLP, "
       "one module call per expert (its host time per expert: expert_call_s)"),
    FB("moe-hybridep-fuse-permute", moe_hybridep_permute_fusion, "0", GE,
       "fuse permute into hybridep dispatch and unpermute into combine (PR 4073)"),
    FI("moe-hybridep-num-blocks-permute", moe_hybridep_num_blocks_permute, "16", GE,
       "extra thread blocks (SMs) for the fused permute"),
    FI("moe-hybridep-num-sms", moe_hybridep_num_sms, "16", GE, "SMs used by hybridep kernels"),
    FI("moe-deepep-num-sms", moe_deepep_num_sms, "20", GE, "SMs used by DeepEP kernels (even)"),
    FB("moe-router-padding-for-quantization", moe_router_padding_for_quantization, "0", GE,
       "pad each expert's tokens to the fp8 multiple in the router (host side)"),
    AL("moe-router-padding-for-fp8", "moe-router-padding-for-quantization", GE,
       "older spelling of --moe-router-padding-for-quantization"),
    FE("fp8-format", fp8_format, k_fp8, "none", GE,
       "FP8 linear GEMMs (Transformer Engine): e4m3 or hybrid"),
    FE("fp8-recipe", fp8_recipe, k_recipe, "delayed", GE,
       "fp8 scaling recipe (sets the pad multiple: 16, mxfp8 32)"),
    FB("overlap-moe-expert-parallel-comm", overlap_moe_expert_parallel_comm, "0", GE,
       "EP overlap: combined 1F1B of one forward and one backward"),
    FB("delay-wgrad-compute", delay_wgrad_compute, "0", GE,
       "delay weight-gradient GEMMs to overlap dispatch/combine"),
    FB("high-priority-a2a-comm-stream", high_priority_a2a_comm_stream, "0", GE,
       "EP overlap's communication stream at CUDA's highest priority, as Megatron-LM creates it "
       "(epref does too; epsim: no effect, a kernel reached while a GEMM runs waits for it "
       "either way, as measured)"),

    /* THD */
    FB("sequence-packing", sequence_packing, "0", GT,
       "packed sequences (THD): ranks hold different token counts"),
    PE("seqlen-dist", seqlen_dist, k_seqlen, "fixed", GT, "packed sequence length distribution"),
    PI("seqlen-mean", seqlen_mean, "0", GT, "mean sequence length (0 = seq-length / 2)"),
    PI("seqlen-min", seqlen_min, "16", GT, "shortest sequence"),

    /* project */
    PE("routing", route_dist, k_route, "uniform", GX, "token-to-expert routing distribution"),
    PD("routing-zipf-s", route_zipf_s, "1.0", GX, "Zipf exponent of expert popularity"),
    PU("seed", seed, "1234", GX, "seed of routing and sequence lengths"),
    PU("routing-budget", routing_budget, "16777216", GX,
       "token selections drawn per iteration; beyond it microbatch m reuses the routing of "
       "m mod P (0 = draw every microbatch)"),
    PI("routing-layer-draws", routing_layer_draws, "0", GX,
       "MoE layers with a routing draw of their own; the k-th MoE layer reuses the draw of the "
       "(k mod N)-th (0 = every layer; 1: one draw for all, what epsim search's memory estimate "
       "uses)"),
    PE("moe-pad-mode", pad_mode, k_pad, "none", GX,
       "expert row padding: host (a sync per layer) or device (inside hybridep permute)"),
    PI("moe-pad-multiple", pad_multiple, "0", GX,
       "rows per expert rounded to 1|16|32|64|128 (0 = from --fp8-recipe)"),
    PI("moe-permute-budget", moe_expert_capacity_permute_budget, "0", GX,
       "hybridep permuted-row budget, no host sync (0 = exact count, syncs)"),
    PE("moe-flex-transport", ep_transport, k_transport, "kernel", GX,
       "deepep/hybridep token all-to-alls: their SM-driven kernels, or NCCL send/recv (no SMs "
       "of their own, no per-node dedup)"),
};

const ep_flag *ep_config_flags(int *count) {
    *count = (int)(sizeof k_flags / sizeof k_flags[0]);
    return k_flags;
}

const ep_flag *ep_config_find_flag(const char *name) {
    int n;
    const ep_flag *t = ep_config_flags(&n);
    for (int i = 0; i < n; i++) {
        if (strcmp(t[i].name, name) != 0) continue;
        if (t[i].type == EP_FLAG_ALIAS) return ep_config_find_flag(t[i].alias_of);
        return &t[i];
    }
    return NULL;
}

static int parse_bool(const char *v, int *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0) return *out = 1, 0;
        if (strcmp(v, no[i]) == 0) return *out = 0, 0;
    }
    return -1;
}

static void list_choices(const char *const *c, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; c[i] && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", c[i]);
}

int ep_config_word_mask(const ep_flag *f, const char *value, char err[EP_ERRLEN]) {
    int mask = 0;
    for (const char *w = value; *w; w += strspn(w, " ")) {
        size_t n = strcspn(w, " ");
        int i = 0;
        while (f->choices[i] && !(strlen(f->choices[i]) == n && strncmp(f->choices[i], w, n) == 0))
            i++;
        if (!f->choices[i]) {
            char list[256];
            list_choices(f->choices, list, sizeof list);
            snprintf(err, EP_ERRLEN, "--%s: '%.*s' is not one of %s", f->name,
                     (int)(n < 64 ? n : 64), w, list);
            return -1;
        }
        mask |= 1 << i;
        w += n;
    }
    return mask;
}

int ep_config_set(ep_config *cfg, const char *name, const char *value, char err[EP_ERRLEN]) {
    const ep_flag *f = ep_config_find_flag(name);
    if (!f) {
        ep_config_unknown_flag(name, err);
        return -1;
    }
    char *field = (char *)cfg + f->offset;
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case EP_FLAG_INT: {
        long v = strtol(value, &end, 10);
        if (!*value || *end || (errno && errno != ERANGE)) {
            snprintf(err, EP_ERRLEN, "--%s: '%.64s' is not an integer", f->name, value);
            return -1;
        }
        if (errno == ERANGE || v < INT_MIN || v > INT_MAX) {
            snprintf(err, EP_ERRLEN, "--%s: %.64s is out of range (an integer from %d to %d)",
                     f->name, value, INT_MIN, INT_MAX);
            return -1;
        }
        *(int *)field = (int)v;
        return 0;
    }
    case EP_FLAG_BOOL:
        if (parse_bool(value, (int *)field) != 0) {
            snprintf(err, EP_ERRLEN, "--%s: '%.64s' is not true or false", f->name, value);
            return -1;
        }
        return 0;
    case EP_FLAG_DOUBLE: {
        double v = strtod(value, &end);
        if (!*value || *end || (errno && errno != ERANGE) || isnan(v)) {
            snprintf(err, EP_ERRLEN, "--%s: '%.64s' is not a number", f->name, value);
            return -1;
        }
        if (!isfinite(v) || (errno == ERANGE && v != 0)) {
            snprintf(err, EP_ERRLEN, "--%s: %.64s is out of range", f->name, value);
            return -1;
        }
        *(double *)field = v;
        return 0;
    }
    case EP_FLAG_U64: {
        unsigned long long v = strtoull(value, &end, 10);
        if (!*value || *end || (errno && errno != ERANGE) || strchr(value, '-')) {
            snprintf(err, EP_ERRLEN, "--%s: '%.64s' is not a non-negative integer", f->name, value);
            return -1;
        }
        if (errno == ERANGE) {
            snprintf(err, EP_ERRLEN, "--%s: %.64s is out of range (at most %llu)", f->name, value,
                     (unsigned long long)UINT64_MAX);
            return -1;
        }
        *(uint64_t *)field = (uint64_t)v;
        return 0;
    }
    case EP_FLAG_STRING:
        if (strlen(value) >= f->size) {
            snprintf(err, EP_ERRLEN, "--%s: value longer than %zu characters", f->name,
                     f->size - 1);
            return -1;
        }
        if (f->choices && ep_config_word_mask(f, value, err) < 0) return -1;
        memcpy(field, value, strlen(value) + 1);
        return 0;
    case EP_FLAG_ENUM:
        for (int i = 0; f->choices[i]; i++) {
            if (strcmp(f->choices[i], value) == 0) {
                *(int *)field = i;
                return 0;
            }
        }
        {
            char list[256];
            list_choices(f->choices, list, sizeof list);
            snprintf(err, EP_ERRLEN, "--%s: '%.64s' is not one of %s", f->name, value, list);
        }
        return -1;
    case EP_FLAG_ALIAS:
        break; /* resolved by ep_config_find_flag */
    }
    snprintf(err, EP_ERRLEN, "--%s: internal flag table error", f->name);
    return -1;
}

void ep_config_format_value(const ep_config *cfg, const ep_flag *f, char *buf, size_t n) {
    const char *field = (const char *)cfg + f->offset;
    switch (f->type) {
    case EP_FLAG_INT:
    case EP_FLAG_BOOL:
        snprintf(buf, n, "%d", *(const int *)field);
        return;
    case EP_FLAG_DOUBLE:
        snprintf(buf, n, "%.17g", *(const double *)field);
        return;
    case EP_FLAG_U64:
        snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)field);
        return;
    case EP_FLAG_STRING:
        snprintf(buf, n, "%s", field);
        return;
    case EP_FLAG_ENUM: {
        int v = *(const int *)field, k = 0;
        while (f->choices[k])
            k++;
        snprintf(buf, n, "%s", v >= 0 && v < k ? f->choices[v] : "?");
        return;
    }
    case EP_FLAG_ALIAS:
        break;
    }
    if (n) buf[0] = 0;
}

static const char *const k_group_title[EP_FLAG_NUM_GROUPS] = {
    "Model", "Parallel layout", "MoE and dispatch", "Sequence packing (THD)",
    "Routing, padding and seed (project flags)"};

static const char *metavar(const ep_flag *f, char *buf, size_t n) {
    if (f->choices && (f->type == EP_FLAG_ENUM || f->type == EP_FLAG_STRING)) {
        size_t used = 0; /* an enum or a word list names its words */
        buf[0] = 0;
        for (int i = 0; f->choices[i] && used < n; i++)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "|" : "", f->choices[i]);
        return buf;
    }
    switch (f->type) {
    case EP_FLAG_INT:
    case EP_FLAG_U64:
        return "N";
    case EP_FLAG_DOUBLE:
        return "X";
    case EP_FLAG_STRING:
        return "STR";
    case EP_FLAG_ENUM:
    case EP_FLAG_BOOL:
    case EP_FLAG_ALIAS:
        break;
    }
    return "";
}

/* The default of t as shown by --help: from `base` when given (then `overrides`, pairs of a flag
 * name and a text, win), else the table's. */
static void help_default(const ep_flag *t, const ep_config *base, const char *const *overrides,
                         char *def, size_t n) {
    for (int k = 0; overrides && overrides[k]; k += 2)
        if (strcmp(overrides[k], t->name) == 0) {
            snprintf(def, n, "%s", overrides[k + 1]);
            return;
        }
    char val[EP_MAX_PATTERN + 16];
    if (base)
        ep_config_format_value(base, t, val, sizeof val);
    else
        snprintf(val, sizeof val, "%s", t->def);
    if (t->type == EP_FLAG_BOOL)
        snprintf(def, n, "%s", strcmp(val, "1") == 0 ? "on" : "off");
    else
        snprintf(def, n, "%s", *val ? val : "\"\"");
}

static void print_help(FILE *f, const ep_config *base, const char *const *overrides,
                       const char *intro) {
    int n;
    const ep_flag *t = ep_config_flags(&n);
    fprintf(f,
            "Configuration flags (Megatron-LM names; [project] marks flags Megatron-LM does not "
            "have).\n"
            "Arguments: --flag VALUE or --flag=VALUE; on/off flags take no value and have a\n"
            "--no-<flag> form; @FILE reads flags from an argument file (# comments, nesting).\n"
            "%s",
            intro ? intro
                  : "Defaults describe a small GPT-MoE: 4 layers, hidden 1024, 16 heads, 8 experts "
                    "top-2,\nmoe-ffn 1024, seq 2048, micro batch 1, global batch 8, one GPU.\n");
    for (int g = 0; g < EP_FLAG_NUM_GROUPS; g++) {
        fprintf(f, "\n%s:\n", k_group_title[g]);
        for (int i = 0; i < n; i++) {
            if ((int)t[i].group != g) continue;
            char mv[128], left[192], def[96];
            const char *m = metavar(&t[i], mv, sizeof mv);
            snprintf(left, sizeof left, "--%s%s%s", t[i].name, *m ? " " : "", m);
            if (t[i].type == EP_FLAG_ALIAS) { /* shown with the value form of its target */
                const ep_flag *to = ep_config_find_flag(t[i].alias_of);
                m = to ? metavar(to, mv, sizeof mv) : "";
                snprintf(left, sizeof left, "--%s%s%s", t[i].name, *m ? " " : "", m);
                fprintf(f, "  %-44s %s\n", left, t[i].help);
                continue;
            }
            help_default(&t[i], base, overrides, def, sizeof def);
            fprintf(f, "  %-44s %s%s [default %s]\n", left, t[i].project ? "[project] " : "",
                    t[i].help, def);
        }
    }
}

void ep_config_print_help(FILE *f) {
    print_help(f, NULL, NULL, NULL);
}

void ep_config_print_help_from(FILE *f, const ep_config *base, const char *const *overrides,
                               const char *intro) {
    print_help(f, base, overrides, intro);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

void ep_config_write_json(const ep_config *cfg, FILE *f) {
    int n;
    const ep_flag *t = ep_config_flags(&n);
    fputc('{', f);
    int first = 1;
    for (int i = 0; i < n; i++) {
        if (t[i].type == EP_FLAG_ALIAS) continue;
        char key[128], val[EP_MAX_PATTERN + 16];
        size_t k = 0;
        for (const char *p = t[i].name; *p && k + 1 < sizeof key; p++)
            key[k++] = *p == '-' ? '_' : *p;
        key[k] = 0;
        fprintf(f, "%s\"%s\":", first ? "" : ",", key);
        first = 0;
        ep_config_format_value(cfg, &t[i], val, sizeof val);
        if (t[i].type == EP_FLAG_STRING || t[i].type == EP_FLAG_ENUM)
            json_string(f, val);
        else if (t[i].type == EP_FLAG_BOOL)
            fputs(*(const int *)((const char *)cfg + t[i].offset) ? "true" : "false", f);
        else
            fputs(val, f);
    }
    /* Settings derived by ep_config_validate that no single flag holds. */
    fprintf(f, ",\"backend\":\"%s\",\"num_microbatches\":%d,\"moe_layers\":[",
            ep_backend_name(ep_config_backend(cfg)), ep_config_num_microbatches(cfg));
    int nl = cfg->num_layers < EP_MAX_LAYERS ? cfg->num_layers : EP_MAX_LAYERS;
    for (int i = 0, w = 0; i < nl; i++)
        if (cfg->moe_layer_is_moe[i] && cfg->num_experts > 0) fprintf(f, "%s%d", w++ ? "," : "", i);
    fputs("],\"ignored_flags\":", f);
    json_string(f, cfg->ignored_flags);
    fputc('}', f);
}
