/* cost: flops and HBM bytes from shapes, parameter counts, and model flops per token for MFU.
 *
 * Formulas and sources: docs/cost-model.md. Model flops follow Megatron-LM's
 * num_floating_point_operations (megatron/training/training.py), evaluated per logical layer so
 * that hybrid patterns and GPT layers share one path.
 */
#include "ep_cost.h"

double ep_cost_gemm_flops(double m, double n, double k) {
    return 2.0 * m * n * k;
}

double ep_cost_scan_flops(double tokens, double channels, double state) {
    return 9.0 * tokens * channels * state;
}

double ep_cost_gemm_bytes(double m, double n, double k) {
    return (m * k + k * n + m * n) * EP_BF16;
}

double ep_cost_attention_flops(double tokens, double seq, int heads, int qk_dim, int v_dim,
                               int causal) {
    /* QK^T and PV: each query meets `seq` keys, half of them under a causal mask */
    double keys = causal ? seq / 2.0 : seq;
    return 2.0 * tokens * keys * heads * (double)(qk_dim + v_dim);
}

double ep_cost_window_keys(double seq, int window_left) {
    /* query i (from 0) of a causal window meets min(i, W) + 1 keys; averaged over the sequence,
     * never more than the causal mask's seq / 2 */
    double w = window_left, keys = seq / 2.0;
    if (window_left < 0 || w + 1 >= seq) return keys;
    double avg = (w * (w + 1) / 2 + (seq - w) * (w + 1)) / seq;
    return avg < keys ? avg : keys;
}

double ep_cost_attention_bytes(double tokens, int heads, int qk_dim, int v_dim, int kv_heads) {
    double q = tokens * heads * qk_dim, o = tokens * heads * v_dim;
    double kv = tokens * kv_heads * (double)(qk_dim + v_dim);
    return (q + kv + o) * EP_BF16 + tokens * heads * 4.0; /* + fp32 log-sum-exp per row */
}

void ep_cost_attention_geometry(const ep_config *c, int *seq, int *dqk, int *dv) {
    if (c->multi_latent_attention) {
        *dqk = c->qk_head_dim + c->qk_pos_emb_head_dim;
        *dv = c->v_head_dim;
    } else {
        *dqk = c->kv_channels;
        *dv = c->kv_channels;
    }
    *seq = c->sequence_packing ? c->seqlen_mean : c->seq_length;
}

/* --- model shapes (Megatron's fallbacks for unset sizes are ep_config_resolve's) -------------- */

static int heads(const ep_config *c) {
    return c->num_attention_heads;
}

static double head_dim(const ep_config *c) {
    return c->kv_channels;
}

static double query_groups(const ep_config *c) {
    return c->num_query_groups;
}

static double ffn(const ep_config *c) {
    return c->ffn_hidden_size;
}

static double moe_ffn(const ep_config *c) {
    return c->moe_ffn_hidden_size;
}

/* weight matrices of an MLP: gated (SwiGLU) h->2f and f->h, else h->f and f->h */
static double mlp_mats(const ep_config *c) {
    return c->swiglu ? 3.0 : 2.0;
}

static double routed_topk(const ep_config *c) {
    if (c->num_experts <= 0) return 0;
    return c->moe_router_topk < c->num_experts ? c->moe_router_topk : c->num_experts;
}

typedef struct {
    double d_inner, nheads, state, ngroups;
} mamba_dims;

static mamba_dims mamba(const ep_config *c) {
    mamba_dims m;
    m.d_inner = (double)EP_MAMBA_EXPAND * c->hidden_size;
    m.nheads = ep_config_mamba_heads(c);
    m.state = c->mamba_state_dim;
    m.ngroups = c->mamba_num_groups;
    return m;
}

/* GEMM weights of one attention block (MLA as DeepSeek-V3 when --multi-latent-attention). */
static double attention_weights(const ep_config *c) {
    double h = c->hidden_size, n = heads(c);
    if (c->multi_latent_attention) {
        double qk = c->qk_head_dim + c->qk_pos_emb_head_dim;
        double q = c->q_lora_rank > 0 ? h * c->q_lora_rank + c->q_lora_rank * n * qk : h * n * qk;
        double kv = h * (c->kv_lora_rank + c->qk_pos_emb_head_dim) +
                    (double)c->kv_lora_rank * n * (c->qk_head_dim + c->v_head_dim);
        return q + kv + n * c->v_head_dim * h;
    }
    double d = head_dim(c), g = query_groups(c);
    return h * n * d + 2.0 * h * g * d + n * d * h; /* q, k and v, out */
}

static double attention_inner_norms(const ep_config *c) {
    if (!c->multi_latent_attention) return 0;
    return (double)c->q_lora_rank + c->kv_lora_rank;
}

/* Mamba-2 block: in_proj to (z, x, B, C, dt), depthwise conv with bias, A_log/D/dt_bias, out_proj.
 */
static double mamba_weights(const ep_config *c) {
    mamba_dims m = mamba(c);
    double h = c->hidden_size, bc = 2.0 * m.ngroups * m.state;
    double in_proj = h * (2.0 * m.d_inner + bc + m.nheads);
    double conv = (m.d_inner + bc) * (EP_MAMBA_CONV_KERNEL + 1.0);
    return in_proj + conv + 3.0 * m.nheads + m.d_inner * h;
}

/* Parameter tensors of an attention block: linear_qkv (its fused input norm) and linear_proj, QK
 * norms; MLA: a separate input norm, the query's down and up projections with the fused query
 * norm (one projection without --q-lora-rank), the key-value's down and up with theirs, and the
 * output projection. */
static int attention_tensors(const ep_config *c) {
    if (c->multi_latent_attention) return 1 + (c->q_lora_rank > 0 ? 3 : 1) + 3 + 1;
    return 3 + (c->qk_layernorm ? 2 : 0) + (c->disable_bias_linear ? 0 : 2);
}

void ep_cost_layer_params(const ep_config *cfg, const ep_layer *layer, ep_layer_params *out) {
    double h = cfg->hidden_size;
    int bias = cfg->disable_bias_linear ? 0 : 1;
    *out = (ep_layer_params){0};
    for (int i = 0; i < layer->nblocks; i++) {
        switch (layer->blocks[i]) {
        case '*':
        case 'D': /* DS-attention sized as the configured attention (indexer not counted) */
            out->attn += attention_weights(cfg);
            out->norm += h + attention_inner_norms(cfg);
            out->tensors += attention_tensors(cfg);
            break;
        case 'M':
        case 'G':
            out->attn += mamba_weights(cfg);
            out->norm += h + mamba(cfg).d_inner; /* input norm, gated inner norm */
            /* in_proj and its fused norm, conv1d weight and bias, A_log, D, dt_bias, the gated
             * norm, out_proj */
            out->tensors += 9;
            break;
        case '-':
            out->dense_mlp += mlp_mats(cfg) * h * ffn(cfg);
            out->norm += h;
            out->tensors += 3 + 2 * bias; /* fc1 and its fused norm, fc2 */
            break;
        case 'E':
            out->expert = mlp_mats(cfg) * h * moe_ffn(cfg);
            out->shared = mlp_mats(cfg) * h * cfg->moe_shared_expert_intermediate_size;
            out->router = h * cfg->num_experts;
            out->norm += h;
            /* the pre-MLP norm, the router, a shared expert's fc1 and fc2; each routed expert's
             * fc1 and fc2 (TE's GroupedLinear holds a weight per expert, as SequentialMLP does) */
            out->tensors += 2 + (cfg->moe_shared_expert_intermediate_size > 0 ? 2 + 2 * bias : 0);
            out->expert_tensors = 2 + 2 * bias;
            break;
        default:
            break;
        }
    }
    if (layer->is_mtp) {
        out->mtp = 2.0 * h * h + 3.0 * h; /* eh projection [e;h] -> h, enorm, hnorm, final norm */
        out->tensors += 4;
    }
}

double ep_cost_layer_fwd_flops_per_token(const ep_config *cfg, const ep_layer *layer) {
    double h = cfg->hidden_size, s = cfg->seq_length, f = 0;
    for (int i = 0; i < layer->nblocks; i++) {
        switch (layer->blocks[i]) {
        case '*':
        case 'D': {
            int qk = cfg->multi_latent_attention ? cfg->qk_head_dim + cfg->qk_pos_emb_head_dim
                                                 : (int)head_dim(cfg);
            int v = cfg->multi_latent_attention ? cfg->v_head_dim : (int)head_dim(cfg);
            f += 2.0 * attention_weights(cfg) + ep_cost_attention_flops(1, s, heads(cfg), qk, v, 1);
            break;
        }
        case 'M':
        case 'G': { /* Megatron's Mamba estimate: projections plus 7 flops per state element */
            mamba_dims m = mamba(cfg);
            f += 2.0 * h * (2.0 * m.d_inner + 2.0 * m.ngroups * m.state + m.nheads) +
                 7.0 * m.d_inner * m.state + 2.0 * m.d_inner * h;
            break;
        }
        case '-':
            f += 2.0 * mlp_mats(cfg) * h * ffn(cfg);
            break;
        case 'E':
            f += 2.0 * mlp_mats(cfg) * h *
                 (moe_ffn(cfg) * routed_topk(cfg) + cfg->moe_shared_expert_intermediate_size);
            break;
        default:
            break;
        }
    }
    if (layer->is_mtp) /* Megatron counts the MTP norms like GEMM weights; so do we */
        f += 2.0 * (2.0 * h * h + 3.0 * h);
    return f;
}

double ep_cost_model_flops_per_token(const ep_config *cfg, const ep_layer_plan *plan) {
    int n = plan->num_layers + plan->num_mtp;
    double fwd = 0;
    for (int i = 0; i < n; i++)
        fwd += ep_cost_layer_fwd_flops_per_token(cfg, &plan->layers[i]);
    /* output layer, once for the model and once per MTP layer */
    fwd += 2.0 * cfg->hidden_size * (double)cfg->vocab_size * (1.0 + plan->num_mtp);
    return 3.0 * fwd; /* forward, backward dgrad, backward wgrad */
}

static double params(const ep_config *cfg, const ep_layer_plan *plan, int active) {
    double h = cfg->hidden_size;
    double p = 2.0 * h * cfg->vocab_size + h; /* embedding, output layer, final norm */
    int n = plan->num_layers + plan->num_mtp;
    for (int i = 0; i < n; i++) {
        ep_layer_params lp;
        ep_cost_layer_params(cfg, &plan->layers[i], &lp);
        double experts = active ? routed_topk(cfg) : cfg->num_experts;
        p +=
            lp.attn + lp.dense_mlp + experts * lp.expert + lp.shared + lp.router + lp.norm + lp.mtp;
    }
    return p;
}

double ep_cost_total_params(const ep_config *cfg, const ep_layer_plan *plan) {
    return params(cfg, plan, 0);
}

double ep_cost_active_params(const ep_config *cfg, const ep_layer_plan *plan) {
    return params(cfg, plan, 1);
}
