/* ep_config: one resolved training configuration, parsed from Megatron-LM flag names.
 *
 * Both epsim and epref take the same flags (docs/configuration.md). Flags that Megatron has are
 * spelled as Megatron spells them; project flags (routing, THD, padding, world layout) are marked
 * "project" in --help. The flag table lives in config_flags.c; validation in config_validate.c.
 */
#ifndef EP_CONFIG_H
#define EP_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ep_err.h"

#define EP_MAX_PATTERN 1024 /* characters of --hybrid-override-pattern */
#define EP_MAX_LAYERS  512

typedef enum {
    EP_DISPATCHER_ALLTOALL,
    EP_DISPATCHER_ALLGATHER,
    EP_DISPATCHER_FLEX
} ep_dispatcher_type;
typedef enum { EP_FLEX_DEEPEP, EP_FLEX_HYBRIDEP } ep_flex_backend;
/* The backend that actually moves tokens, resolved from type + flex backend. */
typedef enum {
    EP_BACKEND_ALLTOALL,
    EP_BACKEND_ALLGATHER,
    EP_BACKEND_DEEPEP,
    EP_BACKEND_HYBRIDEP
} ep_backend;

typedef enum { EP_PAD_NONE, EP_PAD_HOST, EP_PAD_DEVICE } ep_pad_mode;
/* How deepep/hybridep token all-to-alls move: their own SM-driven kernels over NVLink (and RDMA
 * across nodes), or NCCL send/recv like the alltoall dispatcher. */
typedef enum { EP_TRANSPORT_KERNEL, EP_TRANSPORT_NCCL } ep_transport;
typedef enum { EP_ROUTE_UNIFORM, EP_ROUTE_ZIPF, EP_ROUTE_GROUP_LIMITED } ep_route_dist;
typedef enum { EP_SEQLEN_FIXED, EP_SEQLEN_UNIFORM, EP_SEQLEN_LOGNORMAL } ep_seqlen_dist;
typedef enum { EP_OUTER_NO_SHARD, EP_OUTER_OPTIM } ep_outer_strategy;
/* Megatron FSDP --data-parallel-sharding-strategy */
typedef enum {
    EP_SHARD_NO_SHARD,
    EP_SHARD_OPTIM,
    EP_SHARD_OPTIM_GRADS,
    EP_SHARD_OPTIM_GRADS_PARAMS
} ep_shard_strategy;
typedef enum { EP_FP8_NONE, EP_FP8_E4M3, EP_FP8_HYBRID } ep_fp8_format;
typedef enum {
    EP_FP8_RECIPE_DELAYED,
    EP_FP8_RECIPE_TENSORWISE,
    EP_FP8_RECIPE_BLOCKWISE,
    EP_FP8_RECIPE_MXFP8
} ep_fp8_recipe;
typedef enum { EP_SCORE_SOFTMAX, EP_SCORE_SIGMOID } ep_score_func;
/* --moe-router-load-balancing-type (Megatron-LM's names, in k_balance's order) */
typedef enum {
    EP_BALANCE_AUX_LOSS,
    EP_BALANCE_SEQ_AUX_LOSS,
    EP_BALANCE_GLOBAL_AUX_LOSS,
    EP_BALANCE_SINKHORN,
    EP_BALANCE_QUANTILE,
    EP_BALANCE_NONE
} ep_balance;
/* Storage dtypes of gradients and optimizer state (--main-grads-dtype, --exp-avg-dtype, ...) */
typedef enum { EP_DTYPE_FP32, EP_DTYPE_BF16, EP_DTYPE_FP16, EP_DTYPE_FP8 } ep_dtype;
/* --moe-token-drop-policy: which of an expert's tokens over capacity are dropped */
typedef enum { EP_DROP_PROBS, EP_DROP_POSITION } ep_drop_policy;
/* Activation recomputation (--recompute-granularity, --recompute-method) */
typedef enum { EP_RECOMPUTE_NONE, EP_RECOMPUTE_FULL, EP_RECOMPUTE_SELECTIVE } ep_recompute;
typedef enum {
    EP_RECOMPUTE_METHOD_NONE,
    EP_RECOMPUTE_UNIFORM,
    EP_RECOMPUTE_BLOCK
} ep_recompute_method;
typedef enum { EP_CG_IMPL_NONE, EP_CG_IMPL_LOCAL, EP_CG_IMPL_TE } ep_cuda_graph_impl;
/* --cuda-graph-scope as bits, in the order of the flag's choices (config_flags.c) */
enum {
    EP_CG_FULL = 1 << 0, /* every transformer layer (Megatron's default scope) */
    EP_CG_FULL_ITERATION = 1 << 1,
    EP_CG_ATTN = 1 << 2,
    EP_CG_MLP = 1 << 3,
    EP_CG_MOE = 1 << 4,
    EP_CG_MOE_ROUTER = 1 << 5,
    EP_CG_MOE_PREPROCESS = 1 << 6,
    EP_CG_MAMBA = 1 << 7
};
/* --recompute-modules as bits, in the order of the flag's choices (config_flags.c) */
enum {
    EP_RC_CORE_ATTN = 1 << 0,
    EP_RC_MOE_ACT = 1 << 1,
    EP_RC_LAYERNORM = 1 << 2,
    EP_RC_MLA_UP_PROJ = 1 << 3,
    EP_RC_MLP = 1 << 4,
    EP_RC_MOE = 1 << 5,
    EP_RC_SHARED_EXPERTS = 1 << 6
};

typedef struct {
    /* --- model --- */
    int num_layers;                          /* --num-layers (decoder layers, MTP excluded) */
    int hidden_size;                         /* --hidden-size */
    int ffn_hidden_size;                     /* --ffn-hidden-size (dense MLP) */
    int num_attention_heads;                 /* --num-attention-heads */
    int num_query_groups;                    /* --num-query-groups (GQA; 0 = heads) */
    int kv_channels;                         /* --kv-channels (head dim; 0 = hidden/heads) */
    int qk_layernorm;                        /* --qk-layernorm */
    char window_size[32];                    /* --window-size L,R ("" = full attention) */
    char window_attn_skip_freq[256];         /* --window-attn-skip-freq N or [1,0,...] */
    int window_left;                         /* resolved: keys before a query, -1 = no window */
    int layer_is_swa[EP_MAX_LAYERS];         /* resolved: decoder layer i has the window */
    int multi_latent_attention;              /* --multi-latent-attention */
    int q_lora_rank;                         /* --q-lora-rank (0 = none) */
    int kv_lora_rank;                        /* --kv-lora-rank */
    int qk_head_dim;                         /* --qk-head-dim */
    int qk_pos_emb_head_dim;                 /* --qk-pos-emb-head-dim */
    int v_head_dim;                          /* --v-head-dim */
    int seq_length;                          /* --seq-length */
    int micro_batch_size;                    /* --micro-batch-size */
    int global_batch_size;                   /* --global-batch-size */
    int vocab_size;                          /* --padded-vocab-size / --vocab-size */
    int swiglu;                              /* --swiglu (gated MLP, 3 weight matrices) */
    int quick_geglu;                         /* --quick-geglu (gated, quick-GELU; sets swiglu) */
    double activation_func_clamp_value;      /* --activation-func-clamp-value (0 = none) */
    int disable_bias_linear;                 /* --disable-bias-linear (no linear-layer biases) */
    int num_experts;                         /* --num-experts (0 = dense model) */
    int moe_router_topk;                     /* --moe-router-topk */
    int moe_ffn_hidden_size;                 /* --moe-ffn-hidden-size */
    int moe_shared_expert_intermediate_size; /* --moe-shared-expert-intermediate-size */
    int moe_shared_expert_overlap; /* --moe-shared-expert-overlap (beside dispatch/combine) */
    int moe_router_num_groups;     /* --moe-router-num-groups */
    int moe_router_group_topk;     /* --moe-router-group-topk */
    ep_score_func moe_router_score_function; /* --moe-router-score-function */
    int moe_router_force_load_balancing;     /* --moe-router-force-load-balancing */
    ep_balance moe_router_load_balancing_type; /* --moe-router-load-balancing-type */
    double moe_aux_loss_coeff;                 /* --moe-aux-loss-coeff */
    int moe_router_enable_expert_bias;         /* --moe-router-enable-expert-bias */
    char moe_layer_freq[256];                /* --moe-layer-freq: N or ([0]*a+[1]*b) */
    int moe_layer_is_moe[EP_MAX_LAYERS];     /* resolved from moe_layer_freq (or the pattern) */
    int mtp_num_layers;                      /* --mtp-num-layers */
    char hybrid_override_pattern[EP_MAX_PATTERN]; /* --hybrid-override-pattern ("" = GPT) */
    int mamba_state_dim;                          /* --mamba-state-dim */
    int mamba_head_dim;                           /* --mamba-head-dim */
    int mamba_num_heads;                          /* --mamba-num-heads (0 = derived) */
    int mamba_num_groups;                         /* --mamba-num-groups: B/C groups */

    /* --- parallel --- */
    int world_size;                           /* project --world-size (0 = derived: TP*CP*PP*DP) */
    int tensor_model_parallel_size;           /* --tensor-model-parallel-size */
    int pipeline_model_parallel_size;         /* --pipeline-model-parallel-size */
    int virtual_pipeline_model_parallel_size; /* --num-virtual-stages-per-pipeline-rank (1 = none)
                                               */
    int decoder_first_pipeline_num_layers; /* --decoder-first-pipeline-num-layers (0 = even split)
                                            */
    int decoder_last_pipeline_num_layers;  /* --decoder-last-pipeline-num-layers (0 = even split) */
    int overlap_p2p_comm; /* --overlap-p2p-communication (interleaved 1F1B) */
    char pipeline_model_parallel_layout[EP_MAX_PATTERN]; /* --pipeline-model-parallel-layout */
    int account_for_embedding_in_pipeline_split;         /* --account-for-embedding-in-... */
    int account_for_loss_in_pipeline_split;              /* --account-for-loss-in-... */
    int expert_model_parallel_size;        /* --expert-model-parallel-size */
    int expert_tensor_parallel_size;       /* --expert-tensor-parallel-size (0 = TP) */
    int sequence_parallel;                 /* --sequence-parallel (must stay on when TP > 1) */
    int tp_comm_overlap;                   /* --tp-comm-overlap */
    int context_parallel_size;             /* --context-parallel-size */
    int data_parallel_size;                /* project --data-parallel-size (0 = derived) */
    int use_distributed_optimizer;         /* --use-distributed-optimizer */
    int use_megatron_fsdp;                 /* --use-megatron-fsdp */
    int use_torch_fsdp2;                   /* --use-torch-fsdp2 (PyTorch FSDP2, per-layer units) */
    ep_shard_strategy data_parallel_sharding_strategy; /* --data-parallel-sharding-strategy */
    int num_distributed_optimizer_instances; /* --num-distributed-optimizer-instances (HSDP N) */
    ep_outer_strategy outer_dp_sharding_strategy; /* --outer-dp-sharding-strategy */
    int use_precision_aware_optimizer; /* --use-precision-aware-optimizer (TE FusedAdam dtypes) */
    ep_dtype main_grads_dtype;         /* --main-grads-dtype fp32|bf16 (needs the above for bf16) */
    ep_dtype main_params_dtype;        /* --main-params-dtype fp32|fp16 */
    ep_dtype exp_avg_dtype;            /* --exp-avg-dtype fp32|fp16|bf16|fp8 */
    ep_dtype exp_avg_sq_dtype;         /* --exp-avg-sq-dtype fp32|fp16|bf16|fp8 */
    int grad_reduce_in_bf16;           /* --grad-reduce-in-bf16 */
    int overlap_grad_reduce;           /* --overlap-grad-reduce */
    int overlap_param_gather;          /* --overlap-param-gather */
    int overlap_param_gather_with_optimizer_step; /* --overlap-param-gather-with-optimizer-step */
    int fp8_param_gather;              /* --fp8-param-gather (FP8 weights gathered, 1 B) */
    int gpus_per_node;                 /* project --gpus-per-node (epsim: from the topology) */
    int ddp_bucket_size;               /* --ddp-bucket-size in parameters (0 = one per layer) */
    ep_recompute recompute_granularity;   /* --recompute-granularity full|selective */
    ep_recompute_method recompute_method; /* --recompute-method uniform|block (full) */
    int recompute_num_layers;             /* --recompute-num-layers (full; 0 = unset) */
    char recompute_modules[96];           /* --recompute-modules, space-separated (selective) */
    ep_cuda_graph_impl cuda_graph_impl; /* --cuda-graph-impl */
    char cuda_graph_scope[96];          /* --cuda-graph-scope, space-separated */
    int cuda_graph_mask;                /* the scope as EP_CG_* bits (validation); 0: no graphs */
    int recompute_mask;                   /* derived: EP_RC_* bits of the selective modules */

    /* --- MoE dispatch --- */
    ep_dispatcher_type moe_token_dispatcher_type; /* --moe-token-dispatcher-type */
    ep_flex_backend moe_flex_dispatcher_backend;  /* --moe-flex-dispatcher-backend */
    int moe_enable_deepep; /* --moe-enable-deepep (older spelling of the deepep backend) */
    double
        moe_expert_capacity_factor; /* --moe-expert-capacity-factor (<= 0: no capacity, dropless) */
    int moe_pad_expert_input_to_capacity;    /* --moe-pad-expert-input-to-capacity */
    ep_drop_policy moe_token_drop_policy;    /* --moe-token-drop-policy probs|position */
    int moe_permute_fusion;                  /* --moe-permute-fusion */
    int moe_alltoall_per_rank; /* project --moe-alltoall-per-rank: one row per destination rank */
    int legacy_dispatch_order; /* project --legacy-dispatch-order (epref before 2026-11-29) */
    int moe_grouped_gemm;                    /* --moe-grouped-gemm (off: SequentialMLP) */
    int moe_hybridep_permute_fusion;         /* --moe-hybridep-fuse-permute (PR 4073) */
    int moe_hybridep_num_blocks_permute;     /* --moe-hybridep-num-blocks-permute (extra SMs) */
    int moe_hybridep_num_sms;                /* --moe-hybridep-num-sms */
    int moe_deepep_num_sms;                  /* --moe-deepep-num-sms */
    int moe_router_padding_for_quantization; /* --moe-router-padding-for-quantization */
    ep_fp8_format fp8_format;                /* --fp8-format */
    ep_fp8_recipe fp8_recipe;                /* --fp8-recipe */
    int overlap_moe_expert_parallel_comm;    /* --overlap-moe-expert-parallel-comm */
    int delay_wgrad_compute;                 /* --delay-wgrad-compute */
    int high_priority_a2a_comm_stream; /* --high-priority-a2a-comm-stream (epref's comm stream) */
    int moe_expert_capacity_permute_budget;  /* project --moe-permute-budget rows (0 = exact, syncs)
                                              */

    /* --- sequence packing (THD) --- */
    int sequence_packing;       /* --sequence-packing (THD format) */
    ep_seqlen_dist seqlen_dist; /* project --seqlen-dist fixed|uniform|lognormal */
    int seqlen_mean;            /* project --seqlen-mean (tokens) */
    int seqlen_min;             /* project --seqlen-min */

    /* --- project: routing, padding --- */
    ep_route_dist route_dist; /* project --routing uniform|zipf|group-limited */
    double route_zipf_s;      /* project --routing-zipf-s (skew exponent) */
    uint64_t seed;            /* project --seed */
    ep_pad_mode pad_mode;     /* project --moe-pad-mode none|host|device */
    int pad_multiple;         /* project --moe-pad-multiple (0 = from fp8 recipe) */
    int train_iters;          /* --train-iters (iterations simulated / run) */

    /* --- added after the first draft (kept at the end so existing code is unaffected) --- */
    int group_query_attention; /* --group-query-attention (needs --num-query-groups) */
    int num_layers_per_virtual_pipeline_stage; /* older Megatron spelling of VPP; converted by
                                                  ep_config_validate (0 = not given) */
    uint64_t routing_budget;   /* project --routing-budget: token selections drawn per iteration */
    int routing_layer_draws;   /* project --routing-layer-draws: MoE layers with a draw of their own
                                  (0 = all; N: the k-th MoE layer reuses the (k mod N)-th's) */
    ep_transport ep_transport; /* project --moe-flex-transport kernel|nccl */
    char ignored_flags[256];   /* Megatron-LM flags accepted without effect, as given ("--lr ...",
                                  truncated with "..."; see ep_config_ignored_flag) */
} ep_config;

/* Defaults: a small GPT-MoE that fits anywhere (documented in --help). */
void ep_config_defaults(ep_config *cfg);

/* Parses argv (flags, "--flag value" or "--flag=value", and @file argument files with # comments).
 * Positional arguments that are not flags are returned through *positional (argv pointers, at most
 * max_positional); unknown flags are an error unless `pass_unknown` is non-NULL, in which case
 * the flag and its value are appended there (used by programs that add flags of their own).
 * Returns 0, or -1 with a one-line message in err. Does not validate: call ep_config_validate. */
typedef struct {
    int count;
    const char *items[64];
} ep_arglist;
int ep_config_parse(ep_config *cfg, int argc, char **argv, ep_arglist *positional,
                    ep_arglist *pass_unknown, char err[EP_ERRLEN]);

/* Megatron-LM flags (name without "--") that are accepted and have no effect on a step
 * (config_ignored.c), by the values they take. */
typedef enum {
    EP_IGNORED_NOT,    /* not one of them */
    EP_IGNORED_BOOL,   /* an on/off flag: no value */
    EP_IGNORED_VALUE,  /* one value */
    EP_IGNORED_VALUES, /* every value up to the next flag ("--data-path 0.7 a 0.3 b") */
} ep_ignored_arity;
ep_ignored_arity ep_config_ignored_flag(const char *name);

/* Why a Megatron-LM flag that changes the step is refused (config_ignored.c): a line for the
 * "unknown flag" error, or NULL when the flag is not one of those listed. */
const char *ep_config_unmodelled_flag(const char *name);

/* The error for a flag no row of the flag table names: unknown, or Megatron's and not modelled. */
void ep_config_unknown_flag(const char *name, char err[EP_ERRLEN]);

/* Parses argument-file text held in memory (whitespace-separated tokens, # comments, nested @file
 * resolved against the current directory). Unknown flags and positional arguments are errors.
 * Returns 0, or -1 with a one-line message in err. */
int ep_config_parse_text(ep_config *cfg, const char *text, char err[EP_ERRLEN]);

/* Cross-flag checks (world size, EP layout, HSDP, overlap, pattern grammar) and derived fields
 * (data_parallel_size, world_size, moe_layer_is_moe, pad_multiple, mamba_num_heads with Mamba
 * layers, and ep_config_resolve's). Every program goes through it: afterwards every field a
 * reader uses holds its effective value. Returns 0, or -1 with one line naming the flags in err. */
int ep_config_validate(ep_config *cfg, char err[EP_ERRLEN]);

/* Writes the effective value of the "0 = derived" fields that need no check (config_derived.c):
 * ffn_hidden_size 4 x hidden, kv_channels hidden / heads, num_query_groups heads,
 * moe_ffn_hidden_size ffn_hidden_size, expert_tensor_parallel_size TP, seqlen_mean
 * seq_length / 2 (at least 1). Idempotent. ep_config_validate calls it after the checks that
 * must see the unset 0s; configurations built by hand (benchmarks, tests) call it themselves. */
void ep_config_resolve(ep_config *cfg);
/* --expert-tensor-parallel-size, or TP where unset (0): for readers before validation. */
int ep_config_expert_tensor_parallel(const ep_config *cfg);
/* Expert data-parallel size: a pipeline stage's TP x CP x DP ranks over ETP x EP (world = ETP x
 * EP x EDP x PP); 1 where ETP x EP does not divide them (a layout ep_config_validate refuses). */
int ep_config_expert_data_parallel(const ep_config *cfg);
/* Mamba heads: --mamba-num-heads, or 2 x hidden / --mamba-head-dim where unset (0). The field
 * keeps its 0 in configurations without Mamba layers (GDN layers read this too), as the metadata
 * prints it; validation writes it where Mamba layers need it. */
double ep_config_mamba_heads(const ep_config *cfg);

/* Resolved dispatcher backend. */
ep_backend ep_config_backend(const ep_config *cfg);
const char *ep_backend_name(ep_backend b);

/* Number of microbatches per iteration per DP rank: global / (micro * DP). */
int ep_config_num_microbatches(const ep_config *cfg);

/* Writes every resolved setting as a JSON object (no trailing newline), for summaries/metadata. */
void ep_config_write_json(const ep_config *cfg, FILE *f);

/* Prints every flag with its default and one line of help. */
void ep_config_print_help(FILE *f);
/* The same with the defaults a program really uses: the values of `base` (e.g. after a preset),
 * except the flags named in `overrides` (NULL-terminated pairs of a flag name and the text to
 * show), and `intro` (lines ending in a newline) in place of the library defaults' summary. */
void ep_config_print_help_from(FILE *f, const ep_config *base, const char *const *overrides,
                               const char *intro);

/* The flag table (config_flags.c): one row per flag, shared by parsing, --help and JSON. */
typedef enum {
    EP_FLAG_INT,
    EP_FLAG_BOOL,
    EP_FLAG_DOUBLE,
    EP_FLAG_U64,
    EP_FLAG_STRING,
    EP_FLAG_ENUM,
    EP_FLAG_ALIAS /* another spelling of `alias_of`; converted values are noted in help */
} ep_flag_type;

typedef enum {
    EP_FLAG_GROUP_MODEL,
    EP_FLAG_GROUP_PARALLEL,
    EP_FLAG_GROUP_MOE,
    EP_FLAG_GROUP_THD,
    EP_FLAG_GROUP_PROJECT,
    EP_FLAG_NUM_GROUPS
} ep_flag_group;

typedef struct {
    const char *name; /* without the leading dashes, e.g. "num-layers" */
    ep_flag_type type;
    size_t offset;              /* of the field in ep_config */
    size_t size;                /* EP_FLAG_STRING: capacity of the char array */
    const char *def;            /* default, as text ("" for an empty string) */
    const char *const *choices; /* EP_FLAG_ENUM: names indexed by enum value, NULL-terminated */
    const char *alias_of;       /* EP_FLAG_ALIAS: the flag this one stands for */
    ep_flag_group group;
    int project;      /* 1: a project flag that Megatron-LM does not have */
    const char *help; /* one line */
} ep_flag;

/* The table and its length. */
/* Bits of the choices a word-list flag's value names (bit i: choice i), or -1 with err set when a
 * word is none of them. */
int ep_config_word_mask(const ep_flag *f, const char *value, char err[EP_ERRLEN]);
const ep_flag *ep_config_flags(int *count);
/* The row for a flag name (without dashes, aliases resolved), or NULL. */
const ep_flag *ep_config_find_flag(const char *name);
/* Sets one flag by name from text, as the command line would ("true"/"false" for booleans).
 * Returns 0, or -1 with a one-line message naming the flag. */
int ep_config_set(ep_config *cfg, const char *name, const char *value, char err[EP_ERRLEN]);
/* Writes a flag's current value as text into buf (enum names, 0/1 for booleans). */
void ep_config_format_value(const ep_config *cfg, const ep_flag *f, char *buf, size_t n);

#endif
