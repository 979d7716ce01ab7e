/* ep_cost: flops and HBM bytes of every op from its shapes, and model flops per token (for MFU).
 *
 * Pure formulas, no hardware: the simulator turns them into time with its calibration (docs/cost-model.md).
 * Conventions: bf16 activations and weights (2 bytes), fp32 accumulation not counted as traffic;
 * a GEMM m x n x k does 2mnk flops and moves (mk + kn + mn) * 2 bytes; backward dgrad and wgrad each
 * cost one forward GEMM of the transposed shape.
 */
#ifndef EP_COST_H
#define EP_COST_H

#include "ep_config.h"
#include "ep_layers.h"

#define EP_BF16 2.0

double ep_cost_gemm_flops(double m, double n, double k);
double ep_cost_gemm_bytes(double m, double n, double k);

/* Core attention for `tokens` query tokens of sequences of length seq (causal: half the square),
 * heads x head_dim for QK and v_dim for PV; backward is 2.5x forward (FlashAttention convention). */
double ep_cost_attention_flops(double tokens, double seq, int heads, int qk_dim, int v_dim, int causal);
double ep_cost_attention_bytes(double tokens, int heads, int qk_dim, int v_dim, int kv_heads);

/* Parameters of one logical layer (per whole model, not per rank): attention, dense MLP, one
 * expert, shared experts, router, Mamba. Used for DP collective sizes and for MFU. */
typedef struct {
    double attn;      /* attention (or Mamba/GDN) projections of the layer's mixer blocks */
    double dense_mlp; /* dense MLP ('-') */
    double expert;    /* one routed expert */
    double shared;    /* shared experts */
    double router;
    double norm;
} ep_layer_params;
void ep_cost_layer_params(const ep_config *cfg, const ep_layer *layer, ep_layer_params *out);

/* Model flops per token for one training step (forward + backward = 3x forward): GEMMs over the
 * active parameters (top-k experts + shared + dense), attention, embedding/output layer, MTP. */
double ep_cost_model_flops_per_token(const ep_config *cfg, const ep_layer_plan *plan);

/* Total and active parameter counts of the model. */
double ep_cost_total_params(const ep_config *cfg, const ep_layer_plan *plan);
double ep_cost_active_params(const ep_config *cfg, const ep_layer_plan *plan);

#endif
