/* ep_memory: the activation memory of a step - what each layer's forward saves for its backward,
 * and the peak a rank holds when its schedule runs (docs/metrics.md, "Peak memory per GPU").
 *
 * Per layer: Megatron's accounting (Korthikanti et al. 2022, "Reducing Activation Recomputation in
 * Large Transformer Models", Table 2; Megatron-LM's theoretical_memory_usage.py) extended to GQA,
 * SwiGLU, MoE, MLA, Mamba/GDN, FP8 and selective recomputation. `tokens` is always the rank's
 * sequence-parallel shard of a microbatch, seq x micro-batch / CP / TP (ep_sched_tokens), so every
 * term is already divided by TP and CP.
 *
 * Per rank: ep_mem_rank_peak walks the rank's ops in launch order, adds a (microbatch, layer,
 * node)'s saved bytes at its first forward op (or, under full recomputation, its rerun), releases
 * them at its last backward op (the wgrad inputs at its last wgrad op), and keeps the largest sum:
 * 1F1B, interleaved and combined-1F1B in-flight microbatches follow from the order itself.
 */
#ifndef EP_MEMORY_H
#define EP_MEMORY_H

#include "ep_config.h"
#include "ep_layers.h"
#include "ep_sched.h"

/* Margin for the caching allocator's fragmentation, on the activations and the dispatch buffers
 * (the model state lives in a few large buffers allocated once): PyTorch rounds and splits cached
 * blocks, and tensors whose sizes change every microbatch (routed rows) leave holes; the gap
 * between reserved and allocated memory of Megatron-LM runs is typically 5-15%. */
#define EP_MEM_FRAGMENTATION 0.10

/* Kernel choices the flags do not carry (--attention-dropout, --hidden-dropout and
 * --attention-backend are accepted and ignored): epsim assumes no dropout and flash (fused)
 * attention, as today's Megatron-LM recipes run. Korthikanti's Table 2 is {dropout 1, flash 0}. */
typedef struct {
    int dropout; /* 1-byte masks after attention scores, attn_proj, fc2 and the embedding */
    int flash;   /* fused attention: saves the fp32 log-sum-exp, not the s x s scores */
} ep_mem_model;
void ep_mem_model_default(ep_mem_model *a);

/* Bytes a node saves at its forward: `saved` is held to the node's backward, of which `wgrad`
 * (inputs of its weight-gradient GEMMs) is held to its last wgrad op (--delay-wgrad-compute). */
typedef struct {
    double saved, wgrad;
} ep_mem_part;

/* What one microbatch's forward of logical layer L saves on a rank, by node (pre_dispatch: mixers,
 * norms, router, shared experts; mlp: dense MLP or the local experts; mtp: an MTP layer's output
 * and loss), selective recomputation (--recompute-modules) applied; full recomputation is the
 * walk's (ep_mem_layer_input_bytes). expert_rows: the rows of the local experts' GEMMs (padding
 * included), e.g. ep_mem_expected_expert_rows. */
void ep_mem_layer_saved(const ep_config *cfg, const ep_layer *L, double tokens, double expert_rows,
                        const ep_mem_model *a, ep_mem_part out[EP_NODE_NUM]);
/* A layer's input (bf16), what a full-recomputation checkpoint keeps. */
double ep_mem_layer_input_bytes(const ep_config *cfg, double tokens);
/* Rows the local experts see with balanced routing, no padding: tokens x top-k. */
double ep_mem_expected_expert_rows(const ep_config *cfg, double tokens);
/* The embedding (first stage: token ids, dropout mask) and the output layer with its loss (last
 * stage: final norm, the output GEMM's input, fp32 logits of the vocabulary shard). */
ep_mem_part ep_mem_embedding_saved(const ep_config *cfg, double tokens, const ep_mem_model *a);
ep_mem_part ep_mem_output_saved(const ep_config *cfg, double tokens, const ep_mem_model *a);

/* Megatron FSDP's unsharded buffers (memory_fsdp.c): which it keeps, by sharding strategy. */
enum {
    EP_MEM_FSDP_NONE,   /* not FSDP, or no_shard / optim: none beyond the model state */
    EP_MEM_FSDP_GRADS,  /* optim_grads: each unit's gradients, unsharded until reduce-scattered */
    EP_MEM_FSDP_PARAMS, /* optim_grads_params (and HSDP): those and the gathered parameters */
    EP_MEM_FSDP_KINDS
};
int ep_mem_fsdp_kind(const ep_config *cfg);
/* Bytes one rank holds in them while logical layer l runs: its parameters gathered with the
 * prefetched ones (forward; backward and its recomputation), the gradient buckets not yet freed
 * (backward), and the parameters of no unit (embedding, output layer), gathered once and kept. */
typedef struct {
    double persistent;
    double *param_fwd, *param_bwd, *grad_bwd; /* by layer */
} ep_mem_fsdp;
int ep_mem_fsdp_init(const ep_sched *s, int rank, ep_mem_fsdp *f); /* 0, or -1 out of memory */
void ep_mem_fsdp_free(ep_mem_fsdp *f);

/* The peak of one rank: model state (sched_dp.c) + the activation bytes live at once + the
 * dispatch buffers of deepep/hybridep kernels + EP_MEM_FRAGMENTATION of those two + FSDP's
 * unsharded parameters and gradients, at the moment their sum is largest. */
typedef struct {
    double model_state, activations, buffers, margin, fsdp_params, fsdp_grads, total;
} ep_mem_peak;
/* Returns 0, or -1 when out of memory. */
int ep_mem_rank_peak(const ep_sched *s, int rank, const ep_mem_model *a, ep_mem_peak *out);

#endif
