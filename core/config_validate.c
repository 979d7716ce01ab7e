/* config_validate: cross-flag checks and derived settings of a parsed configuration.
 *
 * Every rule returns one line that names the flags involved, so that the programs can print it and
 * exit 2 (docs/epsim.md, "Failure behaviour"). Most rules mirror Megatron-LM's own assertions
 * (megatron/training/arguments.py); the rest keep the schedule generators' inputs well formed.
 * Derived fields are written back so that a second call returns the same result; the plain
 * "0 = derived" defaults are ep_config_resolve's (config_derived.c), called once the checks that
 * must see the unset 0s have run.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_config.h"
#include "ep_layers.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, EP_ERRLEN, __VA_ARGS__);                                                     \
        return -1;                                                                                 \
    } while (0)

#define MAX_PARALLEL 65536     /* any one parallel size */
#define MAX_WORLD    (1 << 20) /* GPUs */
#define MAX_DIM      (1 << 24) /* model widths, lengths, batch sizes */

typedef struct {
    const char *flag;
    int *value;
    int min, max;
} range_rule;

static int check_ranges(ep_config *c, char err[EP_ERRLEN]) {
    const range_rule rules[] = {
        {"num-layers", &c->num_layers, 1, EP_MAX_LAYERS},
        {"hidden-size", &c->hidden_size, 1, MAX_DIM},
        {"ffn-hidden-size", &c->ffn_hidden_size, 0, MAX_DIM},
        {"num-attention-heads", &c->num_attention_heads, 1, MAX_DIM},
        {"num-query-groups", &c->num_query_groups, 0, MAX_DIM},
        {"kv-channels", &c->kv_channels, 0, MAX_DIM},
        {"q-lora-rank", &c->q_lora_rank, 0, MAX_DIM},
        {"kv-lora-rank", &c->kv_lora_rank, 0, MAX_DIM},
        {"qk-head-dim", &c->qk_head_dim, 0, MAX_DIM},
        {"qk-pos-emb-head-dim", &c->qk_pos_emb_head_dim, 0, MAX_DIM},
        {"v-head-dim", &c->v_head_dim, 0, MAX_DIM},
        {"seq-length", &c->seq_length, 1, MAX_DIM},
        {"micro-batch-size", &c->micro_batch_size, 1, MAX_DIM},
        {"global-batch-size", &c->global_batch_size, 1, MAX_DIM},
        {"padded-vocab-size", &c->vocab_size, 1, MAX_DIM},
        {"num-experts", &c->num_experts, 0, MAX_DIM},
        {"moe-router-topk", &c->moe_router_topk, 1, MAX_DIM},
        {"moe-ffn-hidden-size", &c->moe_ffn_hidden_size, 0, MAX_DIM},
        {"moe-shared-expert-intermediate-size", &c->moe_shared_expert_intermediate_size, 0,
         MAX_DIM},
        {"moe-router-num-groups", &c->moe_router_num_groups, 0, MAX_DIM},
        {"moe-router-group-topk", &c->moe_router_group_topk, 0, MAX_DIM},
        {"mtp-num-layers", &c->mtp_num_layers, 0, EP_MAX_LAYERS - 1},
        {"mamba-state-dim", &c->mamba_state_dim, 1, MAX_DIM},
        {"mamba-head-dim", &c->mamba_head_dim, 1, MAX_DIM},
        {"mamba-num-heads", &c->mamba_num_heads, 0, MAX_DIM},
        {"mamba-num-groups", &c->mamba_num_groups, 1, MAX_DIM},
        {"world-size", &c->world_size, 0, MAX_WORLD},
        {"tensor-model-parallel-size", &c->tensor_model_parallel_size, 1, MAX_PARALLEL},
        {"pipeline-model-parallel-size", &c->pipeline_model_parallel_size, 1, MAX_PARALLEL},
        {"num-virtual-stages-per-pipeline-rank", &c->virtual_pipeline_model_parallel_size, 1,
         MAX_PARALLEL},
        {"num-layers-per-virtual-pipeline-stage", &c->num_layers_per_virtual_pipeline_stage, 0,
         EP_MAX_LAYERS},
        {"decoder-first-pipeline-num-layers", &c->decoder_first_pipeline_num_layers, 0,
         EP_MAX_LAYERS},
        {"decoder-last-pipeline-num-layers", &c->decoder_last_pipeline_num_layers, 0,
         EP_MAX_LAYERS},
        {"expert-model-parallel-size", &c->expert_model_parallel_size, 1, MAX_PARALLEL},
        {"expert-tensor-parallel-size", &c->expert_tensor_parallel_size, 0, MAX_PARALLEL},
        {"context-parallel-size", &c->context_parallel_size, 1, MAX_PARALLEL},
        {"data-parallel-size", &c->data_parallel_size, 0, MAX_WORLD},
        {"num-distributed-optimizer-instances", &c->num_distributed_optimizer_instances, 1,
         MAX_PARALLEL},
        {"gpus-per-node", &c->gpus_per_node, 1, MAX_PARALLEL},
        {"ddp-bucket-size", &c->ddp_bucket_size, 0, 2147483647},
        {"train-iters", &c->train_iters, 1, MAX_DIM},
        {"moe-hybridep-num-blocks-permute", &c->moe_hybridep_num_blocks_permute, 0, 1024},
        {"moe-hybridep-num-sms", &c->moe_hybridep_num_sms, 1, 1024},
        {"moe-deepep-num-sms", &c->moe_deepep_num_sms, 1, 1024},
        {"moe-pad-multiple", &c->pad_multiple, 0, 128},
        {"moe-permute-budget", &c->moe_expert_capacity_permute_budget, 0, 2147483647},
        {"seqlen-mean", &c->seqlen_mean, 0, MAX_DIM},
        {"seqlen-min", &c->seqlen_min, 1, MAX_DIM},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        int v = *rules[i].value;
        if (v < rules[i].min || v > rules[i].max) {
            if (rules[i].max >= 2147483647)
                FAIL("--%s %d must be >= %d", rules[i].flag, v, rules[i].min);
            FAIL("--%s %d is outside %d..%d", rules[i].flag, v, rules[i].min, rules[i].max);
        }
    }
    return 0;
}

/* The unset fields whose derivation needs a check, before ep_config_resolve fills them. */
static int check_unset(const ep_config *c, char err[EP_ERRLEN]) {
    if (c->kv_channels == 0 && c->hidden_size % c->num_attention_heads != 0)
        FAIL("--hidden-size %d is not divisible by --num-attention-heads %d (or set "
             "--kv-channels)",
             c->hidden_size, c->num_attention_heads);
    if (c->group_query_attention && c->num_query_groups == 0)
        FAIL("--group-query-attention needs --num-query-groups");
    return 0;
}

static int check_attention(ep_config *c, char err[EP_ERRLEN]) {
    int tp = c->tensor_model_parallel_size;
    if (c->num_attention_heads % c->num_query_groups != 0)
        FAIL("--num-query-groups %d does not divide --num-attention-heads %d", c->num_query_groups,
             c->num_attention_heads);
    if (tp > 1 && !c->sequence_parallel) /* Megatron-LM refuses MoE + TP without it too */
        FAIL("--tensor-model-parallel-size %d without --sequence-parallel is not modelled (TP "
             "all-reduces); drop --no-sequence-parallel",
             tp);
    if (c->num_attention_heads % tp != 0)
        FAIL("--tensor-model-parallel-size %d does not divide --num-attention-heads %d", tp,
             c->num_attention_heads);
    if (!c->multi_latent_attention && c->num_query_groups % tp != 0)
        FAIL("--tensor-model-parallel-size %d does not divide --num-query-groups %d", tp,
             c->num_query_groups);
    if (c->multi_latent_attention) {
        if (c->kv_lora_rank < 1) FAIL("--multi-latent-attention needs --kv-lora-rank >= 1");
        if (c->qk_head_dim < 1) FAIL("--multi-latent-attention needs --qk-head-dim >= 1");
        if (c->qk_pos_emb_head_dim < 1)
            FAIL("--multi-latent-attention needs --qk-pos-emb-head-dim >= 1");
        if (c->v_head_dim < 1) FAIL("--multi-latent-attention needs --v-head-dim >= 1");
    }
    int cp = c->context_parallel_size;
    if (cp > 1 && c->seq_length % (2 * cp) != 0) /* CP splits each sequence into 2 x CP chunks */
        FAIL("--seq-length %d is not divisible by 2 x --context-parallel-size %d", c->seq_length,
             cp);
    return 0;
}

static int check_world(ep_config *c, char err[EP_ERRLEN]) {
    long long tp = c->tensor_model_parallel_size, cp = c->context_parallel_size,
              pp = c->pipeline_model_parallel_size;
    long long mp = tp * cp * pp;
    if (c->data_parallel_size > 0 && c->world_size > 0) {
        if (mp * c->data_parallel_size != c->world_size)
            FAIL("--world-size %d does not equal --tensor-model-parallel-size x "
                 "--context-parallel-size x --pipeline-model-parallel-size x --data-parallel-size "
                 "(%lld x %lld x %lld x %d = %lld)",
                 c->world_size, tp, cp, pp, c->data_parallel_size, mp * c->data_parallel_size);
    } else if (c->world_size > 0) {
        if (c->world_size % mp != 0)
            FAIL("--world-size %d is not divisible by --tensor-model-parallel-size x "
                 "--context-parallel-size x --pipeline-model-parallel-size (%lld)",
                 c->world_size, mp);
        c->data_parallel_size = (int)(c->world_size / mp);
    } else {
        if (c->data_parallel_size == 0) {
            /* Neither world nor DP given: the smallest layout the experts fit, i.e. the least DP
             * with ETP x EP dividing TP x CP x DP (epsched @preset --expert-model-parallel-size 2
             * then shows a 2-rank schedule). */
            long long etp = c->expert_tensor_parallel_size;
            long long need = etp * c->expert_model_parallel_size, have = tp * cp;
            long long a = need, b = have;
            while (b) {
                long long r = a % b;
                a = b;
                b = r;
            }
            c->data_parallel_size = need > 0 ? (int)(need / a) : 1;
        }
        if (mp * c->data_parallel_size > MAX_WORLD)
            FAIL("TP x CP x PP x --data-parallel-size = %lld exceeds %d GPUs",
                 mp * c->data_parallel_size, MAX_WORLD);
        c->world_size = (int)(mp * c->data_parallel_size);
    }
    return 0;
}

/* --decoder-first/last-pipeline-num-layers: Megatron-LM's uneven stages. The first and last stage
 * hold the given counts, the stages between share the rest evenly, and with VPP every stage's
 * layers split evenly over its chunks. */
static int check_uneven_stages(const ep_config *c, char err[EP_ERRLEN]) {
    int pp = c->pipeline_model_parallel_size, vpp = c->virtual_pipeline_model_parallel_size;
    int L = c->num_layers, f = c->decoder_first_pipeline_num_layers;
    int l = c->decoder_last_pipeline_num_layers;
    if (pp < 2)
        FAIL("--decoder-first/last-pipeline-num-layers need --pipeline-model-parallel-size > 1");
    if ((f > 0 && f % vpp != 0) || (l > 0 && l % vpp != 0))
        FAIL("--decoder-first-pipeline-num-layers %d and --decoder-last-pipeline-num-layers %d "
             "must be divisible by --num-virtual-stages-per-pipeline-rank %d",
             f, l, vpp);
    int middle_stages = pp - (f > 0) - (l > 0), mid = L - f - l;
    if (mid < 0 || (middle_stages == 0 && mid != 0) ||
        (middle_stages > 0 && (mid < middle_stages * vpp || mid % (middle_stages * vpp) != 0)))
        FAIL("--num-layers %d minus the first (%d) and last (%d) stage's layers leaves %d for "
             "%d middle stages x %d chunks: not an even split of at least one layer each",
             L, f, l, mid, middle_stages, vpp);
    return 0;
}

/* An explicit pipeline split (before the plan is built, which needs VPP): the layout's virtual
 * stages give VPP, as in Megatron-LM; the accounting flags keep the even split's VPP. Neither mixes
 * with the other ways of placing layers. */
static int check_explicit_split(ep_config *c, char err[EP_ERRLEN]) {
    int layout = c->pipeline_model_parallel_layout[0] != 0;
    int account =
        c->account_for_embedding_in_pipeline_split || c->account_for_loss_in_pipeline_split;
    if (!layout && !account) return 0;
    const char *what = layout ? "--pipeline-model-parallel-layout"
                              : "--account-for-embedding/loss-in-pipeline-split";
    if (layout && account)
        FAIL("--pipeline-model-parallel-layout places the embedding and the loss itself: drop "
             "--account-for-embedding/loss-in-pipeline-split");
    if (c->decoder_first_pipeline_num_layers > 0 || c->decoder_last_pipeline_num_layers > 0)
        FAIL("%s and --decoder-first/last-pipeline-num-layers are mutually exclusive", what);
    if (c->num_layers_per_virtual_pipeline_stage > 0)
        FAIL("%s with --num-layers-per-virtual-pipeline-stage: give "
             "--num-virtual-stages-per-pipeline-rank instead",
             what);
    if (strchr(c->hybrid_override_pattern, '|'))
        FAIL("%s and | stage marks in --hybrid-override-pattern are mutually exclusive", what);
    if (!layout) return 0;
    int pp = c->pipeline_model_parallel_size,
        n = ep_layout_stages(c->pipeline_model_parallel_layout, err);
    if (n < 0) return -1;
    if (n % pp != 0)
        FAIL("--pipeline-model-parallel-layout has %d virtual stages, not a multiple of "
             "--pipeline-model-parallel-size %d",
             n, pp);
    if (c->virtual_pipeline_model_parallel_size != 1 &&
        c->virtual_pipeline_model_parallel_size != n / pp)
        FAIL("--pipeline-model-parallel-layout gives %d virtual stages per rank, not "
             "--num-virtual-stages-per-pipeline-rank %d",
             n / pp, c->virtual_pipeline_model_parallel_size);
    c->virtual_pipeline_model_parallel_size = n / pp;
    return 0;
}

static int check_pipeline(ep_config *c, const ep_layer_plan *plan, char err[EP_ERRLEN]) {
    int pp = c->pipeline_model_parallel_size, L = c->num_layers;
    int uneven =
        c->decoder_first_pipeline_num_layers > 0 || c->decoder_last_pipeline_num_layers > 0;
    if (plan->nvstages > 0) { /* explicit: checked with the plan */
        if (c->virtual_pipeline_model_parallel_size > 1 && pp == 1)
            FAIL("--num-virtual-stages-per-pipeline-rank %d needs --pipeline-model-parallel-size "
                 "> 1",
                 c->virtual_pipeline_model_parallel_size);
        return 0;
    }
    if (c->num_layers_per_virtual_pipeline_stage > 0) {
        int n = c->num_layers_per_virtual_pipeline_stage;
        if (uneven)
            FAIL("--num-layers-per-virtual-pipeline-stage with --decoder-first/last-pipeline-num-"
                 "layers: give --num-virtual-stages-per-pipeline-rank instead");
        if (c->virtual_pipeline_model_parallel_size != 1)
            FAIL("--num-layers-per-virtual-pipeline-stage and "
                 "--num-virtual-stages-per-pipeline-rank are mutually exclusive");
        if (L % (pp * n) != 0)
            FAIL("--num-layers %d is not divisible by --pipeline-model-parallel-size %d x "
                 "--num-layers-per-virtual-pipeline-stage %d",
                 L, pp, n);
        c->virtual_pipeline_model_parallel_size = L / (pp * n);
        c->num_layers_per_virtual_pipeline_stage = 0; /* converted; keeps validation idempotent */
    }
    int vpp = c->virtual_pipeline_model_parallel_size;
    if (vpp > 1 && pp == 1)
        FAIL("--num-virtual-stages-per-pipeline-rank %d needs --pipeline-model-parallel-size > 1",
             vpp);
    if (plan->has_stage_marks) {
        if (uneven)
            FAIL("--hybrid-override-pattern with | stage marks and --decoder-first/last-pipeline-"
                 "num-layers are mutually exclusive");
        int stages = plan->layers[plan->num_layers - 1].pp_stage + 1;
        if (stages != pp)
            FAIL("--hybrid-override-pattern has %d pipeline stages (| marks) but "
                 "--pipeline-model-parallel-size is %d",
                 stages, pp);
        if (vpp != 1)
            FAIL("--hybrid-override-pattern with | stage marks needs "
                 "--num-virtual-stages-per-pipeline-rank 1 (got %d)",
                 vpp);
    } else if (uneven) {
        if (check_uneven_stages(c, err) != 0) return -1;
    } else if ((long long)pp * vpp > L || L % (pp * vpp) != 0) {
        FAIL("--num-layers %d is not divisible by --pipeline-model-parallel-size %d x "
             "--num-virtual-stages-per-pipeline-rank %d",
             L, pp, vpp);
    }
    return 0;
}

/* Layer kinds: the hybrid pattern, or --moe-layer-freq for GPT models. */
static int check_layers(ep_config *c, ep_layer_plan *plan, char err[EP_ERRLEN]) {
    int L = c->num_layers;
    if (L + c->mtp_num_layers > EP_MAX_LAYERS)
        FAIL("--num-layers %d + --mtp-num-layers %d exceed %d layers", L, c->mtp_num_layers,
             EP_MAX_LAYERS);
    if (c->hybrid_override_pattern[0]) {
        if (strcmp(c->moe_layer_freq, "1") != 0)
            FAIL("--moe-layer-freq and --hybrid-override-pattern are mutually exclusive (the "
                 "pattern's E layers are the MoE layers)");
        if (ep_pattern_parse(c->hybrid_override_pattern, plan, err) != 0) return -1;
        if (plan->num_layers != L)
            FAIL("--hybrid-override-pattern has %d layers but --num-layers is %d", plan->num_layers,
                 L);
        if (plan->num_mtp > 0 && plan->num_mtp != c->mtp_num_layers)
            FAIL("--hybrid-override-pattern has %d MTP layers (after /) but --mtp-num-layers is "
                 "%d",
                 plan->num_mtp, c->mtp_num_layers);
        int moe = 0, mamba = 0;
        for (int i = 0; i < plan->num_layers + plan->num_mtp; i++) {
            moe += plan->layers[i].is_moe;
            mamba += strchr(plan->layers[i].blocks, 'M') != NULL;
        }
        if (moe > 0 && c->num_experts == 0)
            FAIL("--hybrid-override-pattern has E layers but --num-experts is 0");
        if (mamba > 0) {
            int tp = c->tensor_model_parallel_size;
            if (c->mamba_num_heads == 0) {
                if ((2 * c->hidden_size) % c->mamba_head_dim != 0)
                    FAIL("--mamba-head-dim %d does not divide 2 x --hidden-size %d (or set "
                         "--mamba-num-heads)",
                         c->mamba_head_dim, c->hidden_size);
                c->mamba_num_heads = (int)ep_config_mamba_heads(c);
            }
            if (c->mamba_num_heads % tp != 0)
                FAIL("--tensor-model-parallel-size %d does not divide the %d Mamba heads "
                     "(--mamba-num-heads)",
                     tp, c->mamba_num_heads);
            /* Megatron's MambaMixer asserts both */
            if (c->mamba_num_heads % c->mamba_num_groups != 0)
                FAIL("--mamba-num-groups %d does not divide the %d Mamba heads",
                     c->mamba_num_groups, c->mamba_num_heads);
            if (c->mamba_num_groups % tp != 0)
                FAIL("--tensor-model-parallel-size %d does not divide the %d Mamba groups "
                     "(--mamba-num-groups)",
                     tp, c->mamba_num_groups);
        }
        memset(c->moe_layer_is_moe, 0, sizeof c->moe_layer_is_moe);
        for (int i = 0; i < L; i++)
            c->moe_layer_is_moe[i] = plan->layers[i].is_moe;
        return 0;
    }
    memset(c->moe_layer_is_moe, 0, sizeof c->moe_layer_is_moe);
    if (c->num_experts > 0 &&
        ep_moe_layer_freq_parse(c->moe_layer_freq, L, c->moe_layer_is_moe, err) != 0)
        return -1;
    return ep_layer_plan_build(c, plan, err);
}

/* --window-size L,R and --window-attn-skip-freq (Megatron's is_layer_window_attention): the
 * causal window of the layers that have one (docs/cost-model.md, "Attention"). */
static int check_window(ep_config *c, char err[EP_ERRLEN]) {
    memset(c->layer_is_swa, 0, sizeof c->layer_is_swa);
    c->window_left = -1;
    if (!c->window_size[0]) {
        if (c->window_attn_skip_freq[0])
            FAIL("--window-attn-skip-freq needs --window-size (which layers have a window of "
                 "what size)");
        return 0;
    }
    char buf[32];
    size_t n = 0;
    for (const char *s = c->window_size; *s && n + 1 < sizeof buf; s++)
        if (!strchr("()'\" ", *s)) buf[n++] = *s;
    buf[n] = 0;
    char *comma = strchr(buf, ','), *end1 = NULL, *end2 = NULL;
    long left = comma ? strtol(buf, &end1, 10) : 0,
         right = comma ? strtol(comma + 1, &end2, 10) : 0;
    if (!comma || end1 != comma || end1 == buf || !end2 || *end2 || end2 == comma + 1 ||
        left < -1 || right < -1 || left > INT_MAX)
        FAIL("--window-size '%.30s' is not L,R (two integers >= -1, -1 = unbounded)",
             c->window_size);
    if (right != 0 && right != -1)
        FAIL("--window-size right part %ld is not modelled: GPT models attend causally, so only "
             "0 (or -1) is meaningful",
             right);
    if (c->context_parallel_size > 1 && left >= 0)
        FAIL("--window-size with --context-parallel-size %d is not modelled (CP splits the "
             "sequence the window slides over)",
             c->context_parallel_size);
    if (left < 0) return 0; /* unbounded: full causal attention */
    c->window_left = (int)left;
    return ep_window_layers_parse(c->window_attn_skip_freq, c->num_layers, c->layer_is_swa, err);
}

static int check_moe(ep_config *c, long long *edp, char err[EP_ERRLEN]) {
    int E = c->num_experts, ep = c->expert_model_parallel_size;
    int tp = c->tensor_model_parallel_size, etp = c->expert_tensor_parallel_size;
    if (E == 0) {
        if (ep > 1) FAIL("--expert-model-parallel-size %d needs --num-experts > 0", ep);
    } else {
        int k = c->moe_router_topk;
        if (k > E) FAIL("--moe-router-topk %d exceeds --num-experts %d", k, E);
        if (E % ep != 0)
            FAIL("--expert-model-parallel-size %d does not divide --num-experts %d", ep, E);
        if (c->moe_ffn_hidden_size % etp != 0)
            FAIL("--expert-tensor-parallel-size %d does not divide --moe-ffn-hidden-size %d", etp,
                 c->moe_ffn_hidden_size);
        int ng = c->moe_router_num_groups, gk = c->moe_router_group_topk;
        if (gk > 0 && ng == 0) FAIL("--moe-router-group-topk needs --moe-router-num-groups");
        if (ng > 0) {
            if (E % ng != 0)
                FAIL("--moe-router-num-groups %d does not divide --num-experts %d", ng, E);
            if (gk == 0) FAIL("--moe-router-num-groups needs --moe-router-group-topk");
            if (gk > ng)
                FAIL("--moe-router-group-topk %d exceeds --moe-router-num-groups %d", gk, ng);
            if ((long long)gk * (E / ng) < k)
                FAIL("--moe-router-topk %d exceeds the %d experts of --moe-router-group-topk %d "
                     "groups",
                     k, gk * (E / ng), gk);
        }
    }
    /* Expert layout: world = ETP x EP x EDP x PP, so ETP x EP must divide the ranks of a stage. */
    long long stage = (long long)tp * c->context_parallel_size * c->data_parallel_size;
    if (stage % ((long long)etp * ep) != 0)
        FAIL("--expert-model-parallel-size %d x --expert-tensor-parallel-size %d does not divide "
             "TP x CP x DP = %lld ranks per pipeline stage",
             ep, etp, stage);
    *edp = ep_config_expert_data_parallel(c);
    if (c->route_dist == EP_ROUTE_GROUP_LIMITED && (E == 0 || c->moe_router_num_groups == 0))
        FAIL("--routing group-limited needs --num-experts and --moe-router-num-groups");
    if (!(c->activation_func_clamp_value >= 0.0) || !isfinite(c->activation_func_clamp_value))
        FAIL("--activation-func-clamp-value %g must be a finite value >= 0 (0: no clamp)",
             c->activation_func_clamp_value);
    if (c->route_dist == EP_ROUTE_ZIPF && !(c->route_zipf_s > 0.0))
        FAIL("--routing-zipf-s %g must be > 0 with --routing zipf", c->route_zipf_s);
    return 0;
}

static int check_batch(ep_config *c, char err[EP_ERRLEN]) {
    long long per = (long long)c->micro_batch_size * c->data_parallel_size;
    if (c->global_batch_size % per != 0)
        FAIL("--global-batch-size %d is not divisible by --micro-batch-size %d x "
             "--data-parallel-size %d",
             c->global_batch_size, c->micro_batch_size, c->data_parallel_size);
    int nmb = (int)(c->global_batch_size / per), pp = c->pipeline_model_parallel_size;
    if (c->virtual_pipeline_model_parallel_size > 1 && nmb % pp != 0)
        FAIL("interleaved pipeline (--num-virtual-stages-per-pipeline-rank %d) needs the %d "
             "microbatches (--global-batch-size / (--micro-batch-size x DP)) to be a multiple of "
             "--pipeline-model-parallel-size %d",
             c->virtual_pipeline_model_parallel_size, nmb, pp);
    return 0;
}

/* The name a dtype flag's value is spelled with (its choices in the flag table). */
static const char *dtype_name(const char *flag, ep_dtype d) {
    return ep_config_find_flag(flag)->choices[d];
}

/* Megatron-LM's OptimizerConfig checks: lower-precision state only through the precision-aware
 * optimizer, and each dtype from the set its flag allows. */
static int check_optimizer_dtypes(const ep_config *c, char err[EP_ERRLEN]) {
    if (c->main_grads_dtype != EP_DTYPE_FP32 && c->main_grads_dtype != EP_DTYPE_BF16)
        FAIL("--main-grads-dtype %s: fp32 or bf16",
             dtype_name("main-grads-dtype", c->main_grads_dtype));
    if (c->main_params_dtype != EP_DTYPE_FP32 && c->main_params_dtype != EP_DTYPE_FP16)
        FAIL("--main-params-dtype %s: fp32 or fp16",
             dtype_name("main-params-dtype", c->main_params_dtype));
    if (c->use_precision_aware_optimizer) return 0;
    const struct {
        const char *flag;
        ep_dtype d;
    } k[] = {{"main-grads-dtype", c->main_grads_dtype},
             {"main-params-dtype", c->main_params_dtype},
             {"exp-avg-dtype", c->exp_avg_dtype},
             {"exp-avg-sq-dtype", c->exp_avg_sq_dtype}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].d != EP_DTYPE_FP32)
            FAIL("--%s %s needs --use-precision-aware-optimizer (fp32 without it)", k[i].flag,
                 dtype_name(k[i].flag, k[i].d));
    return 0;
}

static int check_data_parallel(ep_config *c, long long edp, char err[EP_ERRLEN]) {
    int n = c->num_distributed_optimizer_instances, dp = c->data_parallel_size;
    int fsdp = c->use_megatron_fsdp, distopt = c->use_distributed_optimizer;
    if (n > 1) {
        if (!fsdp && !distopt)
            FAIL("--num-distributed-optimizer-instances %d needs --use-distributed-optimizer or "
                 "--use-megatron-fsdp",
                 n);
        if (dp % n != 0)
            FAIL("--num-distributed-optimizer-instances %d does not divide the data-parallel "
                 "size %d (--data-parallel-size)",
                 n, dp);
        if (edp % n != 0)
            FAIL("--num-distributed-optimizer-instances %d does not divide the expert "
                 "data-parallel size %lld (TP x CP x DP / (--expert-model-parallel-size x "
                 "--expert-tensor-parallel-size))",
                 n, edp);
    }
    if (c->data_parallel_sharding_strategy != EP_SHARD_NO_SHARD && !fsdp)
        FAIL("--data-parallel-sharding-strategy other than no_shard needs --use-megatron-fsdp");
    if (c->outer_dp_sharding_strategy == EP_OUTER_OPTIM && (!fsdp || n < 2))
        FAIL("--outer-dp-sharding-strategy optim needs --use-megatron-fsdp and "
             "--num-distributed-optimizer-instances > 1");
    if (check_optimizer_dtypes(c, err) != 0) return -1;
    if (c->use_torch_fsdp2) { /* Megatron-LM's own checks (arguments.py) */
        if (c->pipeline_model_parallel_size > 1 || c->expert_model_parallel_size > 1)
            FAIL("--use-torch-fsdp2 needs --pipeline-model-parallel-size 1 and "
                 "--expert-model-parallel-size 1 (Megatron-LM supports neither with it)");
        if (distopt || fsdp)
            FAIL("--use-torch-fsdp2 shards by itself: drop --%s",
                 distopt ? "use-distributed-optimizer" : "use-megatron-fsdp");
        fsdp = 1;
    }
    if (c->fp8_param_gather && c->fp8_format == EP_FP8_NONE)
        FAIL("--fp8-param-gather needs --fp8-format (the weights it gathers are FP8)");
    if (c->fp8_param_gather && !fsdp && !distopt)
        FAIL("--fp8-param-gather needs --use-distributed-optimizer, --use-megatron-fsdp or "
             "--use-torch-fsdp2 (without them no parameters are gathered)");
    if (c->overlap_param_gather && !fsdp && !distopt)
        FAIL("--overlap-param-gather needs --use-distributed-optimizer or --use-megatron-fsdp");
    if (c->overlap_param_gather && !c->overlap_grad_reduce)
        FAIL("--overlap-param-gather needs --overlap-grad-reduce");
    /* Megatron-LM's conditions (arguments.py): its own optimizer for the first model chunk */
    if (c->overlap_param_gather_with_optimizer_step &&
        (!distopt || !c->overlap_param_gather || c->virtual_pipeline_model_parallel_size < 2))
        FAIL("--overlap-param-gather-with-optimizer-step needs --use-distributed-optimizer, "
             "--overlap-param-gather and an interleaved schedule "
             "(--num-virtual-stages-per-pipeline-rank > 1)");
    return 0;
}

static int check_dispatch(ep_config *c, char err[EP_ERRLEN]) {
    ep_backend be = ep_config_backend(c);
    int flex = c->moe_token_dispatcher_type == EP_DISPATCHER_FLEX;
    if (c->moe_alltoall_per_rank && be != EP_BACKEND_ALLTOALL)
        FAIL("--moe-alltoall-per-rank needs --moe-token-dispatcher-type alltoall");
    if (c->moe_enable_deepep && !flex) /* Megatron-LM's checks of the deprecated flag */
        FAIL("--moe-enable-deepep needs --moe-token-dispatcher-type flex");
    if (c->moe_enable_deepep && c->moe_flex_dispatcher_backend == EP_FLEX_HYBRIDEP)
        FAIL("--moe-enable-deepep and --moe-flex-dispatcher-backend hybridep: only one backend");
    if (!flex && c->moe_flex_dispatcher_backend == EP_FLEX_HYBRIDEP)
        FAIL("--moe-flex-dispatcher-backend hybridep needs --moe-token-dispatcher-type flex");
    if (c->moe_hybridep_permute_fusion) {
        if (be != EP_BACKEND_HYBRIDEP)
            FAIL("--moe-hybridep-fuse-permute needs --moe-token-dispatcher-type flex and "
                 "--moe-flex-dispatcher-backend hybridep");
        if (c->moe_hybridep_num_blocks_permute < 1)
            FAIL("--moe-hybridep-fuse-permute needs --moe-hybridep-num-blocks-permute >= 1");
    }
    if (c->moe_deepep_num_sms % 2 != 0) /* DeepEP runs its channels on SM pairs */
        FAIL("--moe-deepep-num-sms %d must be even", c->moe_deepep_num_sms);
    if (c->overlap_moe_expert_parallel_comm) {
        int pp = c->pipeline_model_parallel_size;
        if (c->num_experts == 0 || c->expert_model_parallel_size < 2)
            FAIL("--overlap-moe-expert-parallel-comm needs --expert-model-parallel-size > 1 (and "
                 "--num-experts)");
        if (be == EP_BACKEND_ALLGATHER)
            FAIL("--overlap-moe-expert-parallel-comm needs --moe-token-dispatcher-type alltoall "
                 "or flex");
        if (pp > 1 && c->virtual_pipeline_model_parallel_size < 2)
            FAIL("--overlap-moe-expert-parallel-comm with --pipeline-model-parallel-size %d needs "
                 "--num-virtual-stages-per-pipeline-rank > 1",
                 pp);
        if (c->mtp_num_layers > 1)
            FAIL("--overlap-moe-expert-parallel-comm supports at most one MTP layer "
                 "(--mtp-num-layers %d)",
                 c->mtp_num_layers);
    }
    if (c->moe_expert_capacity_factor > 0 && be != EP_BACKEND_ALLTOALL)
        FAIL("--moe-expert-capacity-factor needs --moe-token-dispatcher-type alltoall");
    if (c->moe_pad_expert_input_to_capacity && !(c->moe_expert_capacity_factor > 0))
        FAIL("--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor > 0");
    if (c->moe_shared_expert_overlap) { /* the checks of Megatron-LM's TransformerConfig */
        if (be == EP_BACKEND_ALLGATHER)
            FAIL("--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall or flex");
        if (c->overlap_moe_expert_parallel_comm)
            FAIL("--moe-shared-expert-overlap and --overlap-moe-expert-parallel-comm are mutually "
                 "exclusive (the EP overlap schedules the shared experts itself)");
    }
    if (c->delay_wgrad_compute && !c->overlap_moe_expert_parallel_comm)
        FAIL("--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm");
    if (c->sequence_packing && be == EP_BACKEND_ALLGATHER)
        FAIL("--sequence-packing needs --moe-token-dispatcher-type alltoall or flex "
             "(deepep/hybridep)");
    if (c->seqlen_mean > c->seq_length)
        FAIL("--seqlen-mean %d exceeds --seq-length %d", c->seqlen_mean, c->seq_length);
    if (c->seqlen_min > c->seqlen_mean)
        FAIL("--seqlen-min %d exceeds --seqlen-mean %d", c->seqlen_min, c->seqlen_mean);
    if (c->moe_expert_capacity_permute_budget > 0 && be != EP_BACKEND_HYBRIDEP)
        FAIL("--moe-permute-budget needs --moe-token-dispatcher-type flex and "
             "--moe-flex-dispatcher-backend hybridep");
    return 0;
}

/* Pad multiple: explicit, or from the fp8 recipe when padding is requested, or 1. */
static int check_padding(ep_config *c, char err[EP_ERRLEN]) {
    if (c->moe_router_padding_for_quantization) {
        if (c->fp8_format == EP_FP8_NONE)
            FAIL("--moe-router-padding-for-quantization needs --fp8-format");
        if (c->pad_mode == EP_PAD_NONE) c->pad_mode = EP_PAD_HOST; /* router-map padding */
    }
    if (c->pad_mode == EP_PAD_DEVICE && ep_config_backend(c) != EP_BACKEND_HYBRIDEP)
        FAIL("--moe-pad-mode device needs --moe-token-dispatcher-type flex and "
             "--moe-flex-dispatcher-backend hybridep (padding inside its permute)");
    int m = c->pad_multiple;
    if (m != 0 && m != 1 && m != 16 && m != 32 && m != 64 && m != 128)
        FAIL("--moe-pad-multiple %d must be one of 1, 16, 32, 64, 128", m);
    if (c->pad_mode == EP_PAD_NONE) {
        if (m > 1) FAIL("--moe-pad-multiple %d needs --moe-pad-mode host or device", m);
        c->pad_multiple = 1;
    } else if (m == 0) {
        if (c->fp8_format == EP_FP8_NONE)
            FAIL("--moe-pad-mode %s needs --fp8-format or --moe-pad-multiple",
                 c->pad_mode == EP_PAD_HOST ? "host" : "device");
        c->pad_multiple = c->fp8_recipe == EP_FP8_RECIPE_MXFP8 ? 32 : 16;
    }
    return 0;
}

/* Activation recomputation, with the checks of Megatron-LM's TransformerConfig: full needs a
 * method and a layer count, selective names modules and takes neither; the EP overlap takes
 * neither full recomputation nor the moe module (docs/schedule.md, "Recomputation"). */
static int check_recompute(ep_config *c, char err[EP_ERRLEN]) {
    int n = c->recompute_num_layers, pp = c->pipeline_model_parallel_size;
    const ep_flag *mods = ep_config_find_flag("recompute-modules");
    c->recompute_mask = 0;
    if (c->recompute_granularity == EP_RECOMPUTE_NONE) {
        if (c->recompute_method != EP_RECOMPUTE_METHOD_NONE || n != 0)
            FAIL("--recompute-method and --recompute-num-layers need --recompute-granularity full");
        if (c->recompute_modules[0])
            FAIL("--recompute-modules needs --recompute-granularity selective");
        return 0;
    }
    if (c->recompute_granularity == EP_RECOMPUTE_FULL) {
        if (c->recompute_method == EP_RECOMPUTE_METHOD_NONE)
            FAIL("--recompute-granularity full needs --recompute-method uniform or block");
        if (n < 1 || (long long)n * pp > c->num_layers)
            FAIL("--recompute-granularity full needs --recompute-num-layers between 1 and the "
                 "layers per pipeline rank (%d), got %d",
                 c->num_layers / pp, n);
        if (c->recompute_modules[0])
            FAIL("--recompute-modules needs --recompute-granularity selective (full recomputes "
                 "whole layers)");
        if (c->overlap_moe_expert_parallel_comm)
            FAIL("--overlap-moe-expert-parallel-comm does not allow --recompute-granularity full");
        return 0;
    }
    if (n != 0) /* a --recompute-method is accepted and unused, as Megatron-LM does */
        FAIL("--recompute-granularity selective takes no --recompute-num-layers");
    c->recompute_mask = c->recompute_modules[0]
                            ? ep_config_word_mask(mods, c->recompute_modules, err)
                            : EP_RC_CORE_ATTN;
    if (c->recompute_mask < 0) return -1;
    if ((c->recompute_mask & EP_RC_MOE) && c->overlap_moe_expert_parallel_comm)
        FAIL("--overlap-moe-expert-parallel-comm does not allow the moe module in "
             "--recompute-modules");
    return 0;
}

/* CUDA graphs (--cuda-graph-impl, --cuda-graph-scope): the scope as bits, with Megatron-LM's
 * limits - a captured region holds no host sync, so a scope over the whole MoE layer (moe, full)
 * or the iteration needs a dispatcher that never waits for counts on the host. */
static int check_cuda_graphs(ep_config *c, char err[EP_ERRLEN]) {
    c->cuda_graph_mask = 0;
    if (c->cuda_graph_impl == EP_CG_IMPL_NONE) return 0;
    int mask =
        ep_config_word_mask(ep_config_find_flag("cuda-graph-scope"), c->cuda_graph_scope, err);
    if (mask < 0) return -1;
    if (mask == 0) mask = EP_CG_FULL;
    if ((mask & EP_CG_FULL_ITERATION) && mask != EP_CG_FULL_ITERATION)
        FAIL("--cuda-graph-scope full_iteration captures everything: name it alone");
    if ((mask & EP_CG_FULL_ITERATION) && c->cuda_graph_impl != EP_CG_IMPL_LOCAL)
        FAIL("--cuda-graph-scope full_iteration needs --cuda-graph-impl local");
    ep_backend be = ep_config_backend(c);
    const char *sync = NULL;
    if (be == EP_BACKEND_ALLTOALL && !c->moe_pad_expert_input_to_capacity)
        sync = "the alltoall dispatcher's count sync (dropless)";
    else if (be == EP_BACKEND_DEEPEP)
        sync = "deepep's notify sync";
    else if (be == EP_BACKEND_HYBRIDEP && c->sequence_packing)
        sync = "hybridep's THD count sync";
    else if (c->pad_mode == EP_PAD_HOST)
        sync = "host-side padding's sync";
    if (sync && c->num_experts > 0 && (mask & (EP_CG_FULL | EP_CG_FULL_ITERATION | EP_CG_MOE)))
        FAIL("--cuda-graph-scope %s would capture %s: use moe_router moe_preprocess, or "
             "--moe-pad-expert-input-to-capacity",
             c->cuda_graph_scope[0] ? c->cuda_graph_scope : "full", sync);
    c->cuda_graph_mask = mask;
    return 0;
}

int ep_config_validate(ep_config *cfg, char err[EP_ERRLEN]) {
    ep_layer_plan plan;
    long long edp = 1;
    err[0] = 0;
    if (check_ranges(cfg, err) || check_unset(cfg, err)) return -1;
    ep_config_resolve(cfg);
    if (check_attention(cfg, err) || check_world(cfg, err) || check_explicit_split(cfg, err) ||
        check_layers(cfg, &plan, err) || check_window(cfg, err) ||
        check_pipeline(cfg, &plan, err) || check_moe(cfg, &edp, err) || check_batch(cfg, err) ||
        check_data_parallel(cfg, edp, err) || check_dispatch(cfg, err) || check_padding(cfg, err) ||
        check_recompute(cfg, err) || check_cuda_graphs(cfg, err))
        return -1;
    return 0;
}
