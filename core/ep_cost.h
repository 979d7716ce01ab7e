/* ep_cost: flops and HBM bytes of every op from its shapes, and model flops per token (for MFU).
 *
 * Pure formulas, no hardware: the simulator turns them into time with its calibration
 * (docs/cost-model.md). Conventions: bf16 activations and weights (2 bytes), fp32 accumulation not
 * counted as traffic; a GEMM m x n x k does 2mnk flops and moves (mk + kn + mn) * 2 bytes; backward
 * dgrad and wgrad each cost one forward GEMM of the transposed shape.
 */
#ifndef EP_COST_H
#define EP_COST_H

#include "ep_config.h"
#include "ep_layers.h"

#define EP_BF16 2.0

double ep_cost_gemm_flops(double m, double n, double k);
double ep_cost_gemm_bytes(double m, double n, double k);

/* Core attention (forward) for `tokens` query tokens of sequences of length seq (causal: half the
 * square), heads x qk_dim for QK and v_dim for PV; backward is EP_ATTN_BWD_FACTOR x forward
 * (FlashAttention convention: recompute of QK plus dQ, dK, dV). */
#define EP_ATTN_BWD_FACTOR 2.5
double ep_cost_attention_flops(double tokens, double seq, int heads, int qk_dim, int v_dim,
                               int causal);

/* Keys a query of a causal sliding window of window_left keys before it meets, on average over a
 * sequence of seq tokens (Megatron's --window-size L,0); window_left < 0: the causal seq / 2. The
 * attention op of a windowed layer is costed with these keys in place of seq / 2. */
double ep_cost_window_keys(double seq, int window_left);

/* HBM bytes of a fused (flash) attention forward: read Q, K, V, write O and the fp32 row
 * log-sum-exp; K/V re-reads across query tiles are assumed to hit L2. */
double ep_cost_attention_bytes(double tokens, int heads, int qk_dim, int v_dim, int kv_heads);
/* The geometry that times core attention where it runs as s x s score blocks (epref's executor,
 * and the calibration records of it): sequence length (THD: the mean packed length) and the QK
 * and V head dimensions (MLA: qk + rope dims and v_head_dim), read off a resolved configuration
 * (ep_config_validate or ep_config_resolve). */
void ep_cost_attention_geometry(const ep_config *c, int *seq, int *dqk, int *dv);

/* Flops of a selective (Mamba-2 / GDN) scan over tokens x channels x state: ~9 per element; its
 * backward EP_SCAN_BWD_FLOPS x that. */
double ep_cost_scan_flops(double tokens, double channels, double state);
#define EP_SCAN_BWD_FLOPS 2

/* Mamba-2 settings Megatron has but the flag set does not (its defaults); GDN blocks are sized as
 * Mamba-2 blocks (docs/cost-model.md). */
#define EP_MAMBA_CONV_KERNEL 4
#define EP_MAMBA_EXPAND      2

/* Parameters of one logical layer (per whole model, not per rank): attention, dense MLP, one
 * expert, shared experts, router, Mamba. Used for DP collective sizes and for MFU. */
typedef struct {
    double attn;      /* attention (or Mamba/GDN) projections of the layer's mixer blocks */
    double dense_mlp; /* dense MLP ('-') */
    double expert;    /* one routed expert */
    double shared;    /* shared experts */
    double router;
    double norm; /* every norm weight of the layer (block input norms, MLA/Mamba inner norms) */
    double mtp;  /* MTP layers: the 2H x H projection and its three norms */
    /* parameter tensors as Megatron's Transformer Engine modules hold them (a norm fused into the
     * linear layer after it is that module's layer_norm_weight): the optimizer's host loops issue
     * a kernel per tensor (sched_dp.c). Linear biases count, norm biases do not. */
    int tensors;        /* all but the routed experts' */
    int expert_tensors; /* one routed expert's */
} ep_layer_params;
void ep_cost_layer_params(const ep_config *cfg, const ep_layer *layer, ep_layer_params *out);

/* Forward flops per token of one logical layer, as Megatron counts them: weight GEMMs of the
 * active parameters (top-k experts, shared, dense, attention/Mamba projections; no router) and
 * causal core attention over --seq-length; MTP layers add their projection and norms. */
double ep_cost_layer_fwd_flops_per_token(const ep_config *cfg, const ep_layer *layer);

/* Model flops per token for one training step (forward + backward = 3x forward): GEMMs over the
 * active parameters (top-k experts + shared + dense), attention, embedding/output layer, MTP. */
double ep_cost_model_flops_per_token(const ep_config *cfg, const ep_layer_plan *plan);

/* Total and active parameter counts of the model: embedding and output layer (untied), every
 * layer of the plan including MTP layers, the final norm. Active counts top-k routed experts. */
double ep_cost_total_params(const ep_config *cfg, const ep_layer_plan *plan);
double ep_cost_active_params(const ep_config *cfg, const ep_layer_plan *plan);

#endif
