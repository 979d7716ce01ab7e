/* sched_layer: one logical layer expanded into kernel-level ops, node by node.
 *
 * A layer is split into Megatron's nodes (docs/schedule.md, section 5): pre_dispatch (mixer blocks,
 * pre-MLP norm, router, shared experts, dispatch preprocess), dispatch, mlp, combine, mtp. Each
 * node is first described as a list of forward op specs; the backward walks the list in reverse,
 * turning each GEMM into a dgrad op (phase bwd) and a weight-gradient op (phase bwd_dw).
 * The dispatcher backends add their ops through their hooks (ep_disp.h: one file each,
 * disp_<name>.c, their rows in disp.c); padding modes and THD add theirs here
 * (docs/schedule.md, "Layers").
 */
#include <stdio.h>
#include <string.h>

#include "sched_gen.h"



/* Puts the op just added into recompute modules (a norm, core attention, an up projection). */
static void tag_last(gen *g, int mods) {
    if (g->n > 0) g->out[g->n - 1].mods |= mods;
}

/* --- FP8 (Transformer Engine, --fp8-format) ----------------------------------------------------
 * The linear layers of a block run FP8 GEMMs; the output layer and the router stay BF16 (not TE
 * modules in Megatron-LM). A GEMM's BF16 input is quantized first - a memory-bound kernel that
 * reads it and writes the FP8 copy row-wise and column-wise (the wgrad needs the transpose), plus
 * one more read for the amax of current scaling (tensorwise) - except where TE fuses the
 * quantization into the layer norm before it (LayerNormLinear: qkv, fc1, the MLA up projections,
 * the Mamba/GDN in_proj). Its backward quantizes the incoming gradient the same way before the
 * dgrad (docs/schedule.md, "FP8"). */

/* Bytes a quantization moves per element: read bf16 (2), write fp8 row-wise and column-wise (1+1),
 * and with current scaling a second read for the amax. */
static double fp8_cast_bytes_per_element(const ep_config *c) {
    return c->fp8_recipe == EP_FP8_RECIPE_TENSORWISE ? 6.0 : 4.0;
}

/* label + suffix: static for the labels of this file (the generators ask for every node of every
 * rank, and interning scans the schedule's labels), interned otherwise (a block prefix); NULL out
 * of memory. "_cast": a GEMM's input quantization; "_regather": a sequence-parallel all-gather
 * repeated in the backward. */
static const char *suffixed_label(ep_sched *s, const char *label, const char *suffix) {
    static const char *const known[][3] = {
        {"qkv", "_cast", "qkv_cast"},
        {"q_proj", "_cast", "q_proj_cast"},
        {"q_down", "_cast", "q_down_cast"},
        {"q_up", "_cast", "q_up_cast"},
        {"kv_down", "_cast", "kv_down_cast"},
        {"kv_up", "_cast", "kv_up_cast"},
        {"attn_proj", "_cast", "attn_proj_cast"},
        {"fc1", "_cast", "fc1_cast"},
        {"fc2", "_cast", "fc2_cast"},
        {"shared_fc1", "_cast", "shared_fc1_cast"},
        {"shared_fc2", "_cast", "shared_fc2_cast"},
        {"expert_fc1", "_cast", "expert_fc1_cast"},
        {"expert_fc2", "_cast", "expert_fc2_cast"},
        {"mamba_in_proj", "_cast", "mamba_in_proj_cast"},
        {"mamba_out_proj", "_cast", "mamba_out_proj_cast"},
        {"gdn_in_proj", "_cast", "gdn_in_proj_cast"},
        {"gdn_out_proj", "_cast", "gdn_out_proj_cast"},
        {"eh_proj", "_cast", "eh_proj_cast"},
        {"attn_ag", "_regather", "attn_ag_regather"},
        {"mlp_ag", "_regather", "mlp_ag_regather"},
        {"shared_ag", "_regather", "shared_ag_regather"},
        {"mtp_output_ag", "_regather", "mtp_output_ag_regather"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(label, known[i][0]) && !strcmp(suffix, known[i][1])) return known[i][2];
    char buf[80];
    snprintf(buf, sizeof buf, "%s%s", label, suffix);
    return ep_sched_intern(s, buf);
}

/* Adds the quantization of a GEMM input of `elements` (forward only: its own backward is the
 * GEMM's gradient cast, pass_ops). */
static void fp8_cast(gen *g, const char *label, double elements) {
    const char *l = suffixed_label(g->rb->s, label, "_cast");
    if (!l) {
        g->failed = 1;
        return;
    }
    spec *s = gen_add(g, l, EP_OP_ELEMENTWISE);
    s->bytes = elements * fp8_cast_bytes_per_element(g->cfg);
    s->fwd_only = 1;
    s->fp8 = 1; /* inside the GEMM's module: no module call of its own */
}

static int fp8_on(const gen *g) {
    return g->cfg->fp8_format != EP_FP8_NONE;
}

/* Input quantization fused into the layer norm before the GEMM (TE LayerNormLinear). */
static int fp8_norm_fused(const char *label) {
    static const char *const fused[] = {"qkv",   "fc1",           "q_up",
                                        "kv_up", "mamba_in_proj", "gdn_in_proj"};
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++)
        if (!strcmp(label, fused[i])) return 1;
    return 0;
}

/* A linear layer's GEMM Y[m x n] = X[m x k] W[k x n]: FP8 with --fp8-format (its input quantized
 * first unless fused), BF16 otherwise. */
static void gemm(gen *g, const char *label, double m, double n, double k) {
    if (fp8_on(g) && !fp8_norm_fused(label)) fp8_cast(g, label, m * k);
    spec *s = gen_add(g, label, EP_OP_GEMM);
    s->m = (int)m, s->n = (int)n, s->k = (int)k, s->batch = 1;
    s->flops = ep_cost_gemm_flops(m, n, k);
    s->bytes = ep_cost_gemm_bytes(m, n, k);
    s->weight = 1;
    s->fp8 = fp8_on(g);
}

/* A GEMM kept in BF16 under FP8: the output layer (a vocabulary projection). */
static void gemm_bf16(gen *g, const char *label, double m, double n, double k) {
    spec *s = gen_add(g, label, EP_OP_GEMM);
    s->m = (int)m, s->n = (int)n, s->k = (int)k, s->batch = 1;
    s->flops = ep_cost_gemm_flops(m, n, k);
    s->bytes = ep_cost_gemm_bytes(m, n, k);
    s->weight = 1;
}

static void grouped_gemm(gen *g, const char *label, double m, double n, double k, int batch) {
    if (fp8_on(g)) fp8_cast(g, label, m * k);
    spec *s = gen_add(g, label, EP_OP_GROUPED_GEMM);
    s->fp8 = fp8_on(g);
    s->m = (int)m, s->n = (int)n, s->k = (int)k, s->batch = batch;
    s->flops = ep_cost_gemm_flops(m, n, k);
    s->bytes =
        ep_cost_gemm_bytes(m, n, k) + (batch - 1) * k * n * EP_BF16; /* every expert's weight */
    s->weight = 1;
}




/* --- mixer blocks ------------------------------------------------------------------------------
 */

/* The sequence-parallel all-gather before a TP GEMM and reduce-scatter after one; with
 * --tp-comm-overlap they run beside the GEMM on the tp stream (emit_list). Without it the
 * all-gather's backward - the reduce-scatter of the dgrad - still runs beside the wgrad GEMM:
 * Megatron's linear layers and Transformer Engine's issue it async and compute the wgrad
 * meanwhile (LinearWithGradAccumulationAndAsyncCommunication; _LayerNormLinear.backward's
 * reduce_scatter_along_first_dim(async_op=True)). `fp8_input`: the gathered input is the FP8
 * output of a norm with the quantization fused (TE's LayerNormLinear under delayed scaling casts
 * before it gathers), one byte per element. */
static void tp_gather_of(gen *g, const char *label, int fp8_input) {
    if (g->tp < 2) return;
    spec *s = gen_coll(g, label, EP_OP_ALL_GATHER, g->rb->g_tp, g->t * g->R);
    s->side = g->cfg->tp_comm_overlap;
    s->bwd_side = !g->cfg->tp_comm_overlap;
    s->fp8_gather = fp8_input && fp8_on(g) && g->cfg->fp8_recipe == EP_FP8_RECIPE_DELAYED;
    s->regather = suffixed_label(g->rb->s, label, "_regather");
    if (!s->regather) g->failed = 1;
}
static void tp_gather(gen *g, const char *label) {
    tp_gather_of(g, label, 0);
}
/* Its backward all-gathers the incoming gradient of the row-parallel GEMM; under FP8 delayed
 * scaling Transformer Engine casts it first and gathers FP8 (grad_output_preprocess). */
static void tp_scatter(gen *g, const char *label) {
    if (g->tp < 2) return;
    spec *s = gen_coll(g, label, EP_OP_REDUCE_SCATTER, g->rb->g_tp, g->tg * g->R);
    s->side = g->cfg->tp_comm_overlap;
    s->fp8_gather = fp8_on(g) && g->cfg->fp8_recipe == EP_FP8_RECIPE_DELAYED;
}

/* The loss over a TP-sharded vocabulary (Megatron's vocab-parallel cross entropy): all-reduces
 * over TP of the logits' maximum, the target logit and the sum of exponentials, fp32 per token;
 * its gradient is local. */
static void vocab_parallel_loss(gen *g) {
    if (g->tp < 2) return;
    static const char *const labels[] = {"loss_max_ar", "loss_target_ar", "loss_sum_ar"};
    for (int i = 0; i < 3; i++)
        gen_coll(g, labels[i], EP_OP_ALL_REDUCE, g->rb->g_tp, 4 * g->tg)->fwd_only = 1;
}

static double attn_seq(const ep_config *c) {
    if (c->sequence_packing && c->seqlen_mean < c->seq_length)
        return c->seqlen_mean; /* packed sequences attend within themselves */
    return c->seq_length;
}

/* CUDA-graph scopes of a layer's parts (--cuda-graph-scope; full captures every layer) */
#define CG_LAYER(scope) ((scope) | EP_CG_FULL)

/* --qk-layernorm: Megatron's q_layernorm / k_layernorm (MLA: the query and key/value latents'),
 * one RMSNorm kernel each over `width` values per token, read and written once */
static void qk_norm(gen *g, const char *name, double width) {
    gen_mem(g, name, EP_OP_NORM, 2 * g->tg * width * EP_BF16);
}

static void attention(gen *g, int mla) {
    const ep_config *c = g->cfg;
    double H = c->hidden_size, tg = g->tg;
    int saved_cg = g->cg;
    g->cg = CG_LAYER(EP_CG_ATTN);
    int heads = c->num_attention_heads / g->tp;
    gen_mem(g, "attn_norm", EP_OP_NORM, 2 * g->t * g->R);
    tag_last(g, EP_RC_LAYERNORM);
    tp_gather_of(g, "attn_ag", !mla); /* into qkv, whose norm casts to FP8 (not MLA's down GEMMs) */
    int qk, v, kv_heads;
    if (mla) {
        qk = c->qk_head_dim + c->qk_pos_emb_head_dim;
        v = c->v_head_dim;
        kv_heads = heads;
        if (c->q_lora_rank > 0) {
            gemm(g, "q_down", tg, c->q_lora_rank, H);
            if (c->qk_layernorm) qk_norm(g, "q_norm", c->q_lora_rank);
            gemm(g, "q_up", tg, (double)heads * qk, c->q_lora_rank);
            tag_last(g, EP_RC_MLA_UP_PROJ);
        } else {
            gemm(g, "q_proj", tg, (double)heads * qk, H);
        }
        gemm(g, "kv_down", tg, c->kv_lora_rank + c->qk_pos_emb_head_dim, H);
        if (c->qk_layernorm) qk_norm(g, "kv_norm", c->kv_lora_rank);
        gemm(g, "kv_up", tg, (double)heads * (c->qk_head_dim + v), c->kv_lora_rank);
        tag_last(g, EP_RC_MLA_UP_PROJ);
    } else {
        qk = v = c->kv_channels;
        int groups = c->num_query_groups;
        kv_heads = groups / g->tp > 0 ? groups / g->tp : 1;
        gemm(g, "qkv", tg, (double)(heads + 2 * kv_heads) * qk, H);
        if (c->qk_layernorm) {
            qk_norm(g, "q_norm", (double)heads * qk);
            qk_norm(g, "k_norm", (double)kv_heads * qk);
        }
    }
    spec *a = gen_add(g, "core_attn", EP_OP_ATTENTION);
    a->mods |= EP_RC_CORE_ATTN;
    a->m = (int)tg; /* query tokens of this rank (CP: its share of each sequence) */
    /* a windowed layer (--window-size): each query meets its window's keys, not seq / 2; MTP
     * layers attend fully */
    int swa = c->window_left >= 0 && g->layer >= 0 && g->layer < c->num_layers &&
              c->layer_is_swa[g->layer];
    double keys = swa ? ep_cost_window_keys(attn_seq(c), c->window_left) : attn_seq(c) / 2.0;
    a->flops = ep_cost_attention_flops(tg, 2.0 * keys, heads, qk, v, 1);
    a->bytes = ep_cost_attention_bytes(tg, heads, qk, v, kv_heads);
    gemm(g, "attn_proj", tg, H, (double)heads * v);
    tp_scatter(g, "attn_rs");
    g->cg = saved_cg;
}

/* Mamba-2 (M) and gated delta net (G): in_proj, the mixer between the projections, out_proj.
 * Mamba-2's mixer is Megatron's mamba_split_conv1d_scan_combined and its grouped RMSNorm (the
 * depthwise causal conv1d over x, B and C, the chunked scan with its gate, the norm): one op,
 * mamba_scan, of ~9 flops per (token, channel, state) element that streams its inputs and outputs
 * once, timed whole where the calibration has mamba_scan_shapes (its shape in m = tokens,
 * n = channels, k = state, batch = B/C groups per rank). B and C have --mamba-num-groups groups,
 * split over TP; GDN has one. */
static void ssm(gen *g, int gdn) {
    const ep_config *c = g->cfg;
    double H = c->hidden_size, tg = g->tg;
    double heads = ep_config_mamba_heads(c);
    double inner = gdn ? 2 * H : heads * c->mamba_head_dim;
    double state = gdn ? c->kv_channels : c->mamba_state_dim;
    double groups = gdn ? 1 : (double)c->mamba_num_groups / g->tp;
    inner /= g->tp;
    heads /= g->tp;
    double bc = 2 * groups * state; /* B and C */
    int saved_cg = g->cg;
    g->cg = CG_LAYER(EP_CG_MAMBA);
    gen_mem(g, gdn ? "gdn_norm" : "mamba_norm", EP_OP_NORM, 2 * g->t * g->R);
    tag_last(g, EP_RC_LAYERNORM);
    tp_gather(g, gdn ? "gdn_ag" : "mamba_ag");
    gemm(g, gdn ? "gdn_in_proj" : "mamba_in_proj", tg, 2 * inner + bc + heads, H);
    spec *s = gen_add(g, gdn ? "gdn_scan" : "mamba_scan", EP_OP_SCAN);
    s->m = (int)tg, s->n = (int)inner, s->k = (int)state, s->batch = (int)groups;
    s->flops = ep_cost_scan_flops(tg, inner, state);
    s->bytes = tg * (3 * inner + bc) * EP_BF16;
    gemm(g, gdn ? "gdn_out_proj" : "mamba_out_proj", tg, H, inner);
    tp_scatter(g, gdn ? "gdn_rs" : "mamba_rs");
    g->cg = saved_cg;
}

/* --- MoE ------------------------------------------------------------------------------------- */


static int moe_rows_get(gen *g, moe_rows *r) {
    ep_rank_builder *rb = g->rb;
    int me = r->me = rb->ep_index;
    /* Expert TP: the rows of every ETP member's EP group for this EP index, gathered after the
     * transfer (their draws first: a draw may move the traffic array) */
    double recv = 0, erows = 0, prows = 0;
    r->etp_recv_max = 0;
    for (int i = 0; i < rb->etp_size && rb->g_etp >= 0; i++) {
        int ti = ep_sched_traffic_get(rb->s, g->mb, g->layer, rb->etp_ep_groups[i]);
        if (ti < 0) return -1;
        const ep_traffic *t = &rb->s->traffic[ti];
        recv += (double)t->recv_rows[me];
        erows += (double)t->expert_rows[me];
        prows += (double)t->pad_rows[me];
        if (t->recv_rows[me] > r->etp_recv_max) r->etp_recv_max = (double)t->recv_rows[me];
    }
    r->ti = ep_sched_traffic_get(rb->s, g->mb, g->layer, rb->g_ep);
    if (r->ti < 0) return -1;
    r->tr = &rb->s->traffic[r->ti];
    int n = r->tr->n, etp = rb->g_etp >= 0;
    r->send = (double)r->tr->send_rows[me];
    r->recv = etp ? recv : (double)r->tr->recv_rows[me];
    r->erows = etp ? erows : (double)r->tr->expert_rows[me];
    r->prows = etp ? prows : (double)r->tr->pad_rows[me];
    r->gemm_rows = g->cfg->pad_mode == EP_PAD_NONE ? r->erows : r->prows;
    r->sent_bytes = r->recv_bytes = 0;
    r->tmax = 0;
    for (int j = 0; j < n; j++) {
        if (r->tr->tokens[j] > r->tmax) r->tmax = r->tr->tokens[j];
        if (j == me) continue; /* the local copy does not cross a link */
        r->sent_bytes += (double)r->tr->bytes[(size_t)me * n + j];
        r->recv_bytes += (double)r->tr->bytes[(size_t)j * n + me];
    }
    return 0;
}

/* Expert TP (ETP > 1) around the experts, as Megatron's alltoall dispatcher does: after the
 * transfer the ETP group all-gathers its members' received rows (gather_from_sequence_parallel_
 * region, uneven splits: NCCL moves the largest), and before the combine it reduce-scatters the
 * partial sums of fc2's row-parallel halves back (docs/schedule.md, "Expert TP"). The allgather
 * dispatcher gathers over TP x EP itself (disp_allgather.c). */
static void etp_gather(gen *g, const moe_rows *r) {
    if (g->rb->g_etp < 0 || ep_disp_of(g->cfg)->tpep_gather) return;
    gen_coll(g, "etp_ag", EP_OP_ALL_GATHER, g->rb->g_etp, r->etp_recv_max * g->R);
}

static void etp_scatter(gen *g, const moe_rows *r) {
    if (g->rb->g_etp < 0 || ep_disp_of(g->cfg)->tpep_gather) return;
    gen_coll(g, "etp_rs", EP_OP_REDUCE_SCATTER, g->rb->g_etp,
             g->rb->etp_size * r->etp_recv_max * g->R);
}

static void experts(gen *g, const moe_rows *r) {
    const ep_config *c = g->cfg;
    int local = c->num_experts / c->expert_model_parallel_size;
    double F = (double)c->moe_ffn_hidden_size / g->etp, H = c->hidden_size;
    double m = r->gemm_rows;
    if (c->pad_mode == EP_PAD_HOST) {
        gen_host_sync(g, "pad_sync"); /* tokens_per_expert.tolist() */
        gen_mem(g, "pad", EP_OP_ELEMENTWISE, (r->erows + r->prows) * g->R);
    }
    grouped_gemm(g, "expert_fc1", m, F * (c->swiglu ? 2 : 1), H, local);
    gen_mem(g, "expert_act", EP_OP_ELEMENTWISE, m * F * (c->swiglu ? 3 : 2) * EP_BF16);
    tag_last(g, EP_RC_MOE_ACT);
    grouped_gemm(g, "expert_fc2", m, H, F, local);
    /* Megatron's TEGroupedMLP takes fc2's bias back from the grouped GEMM (skip_bias_add) and
     * adds it, times each row's probability, in an eager loop over the local experts
     * (_apply_bias: a split, t + b * p per expert, a cat and a cast); fc1's bias is in its GEMM.
     * Bytes: the rows read and written once, what a fused add would move (the measured time per
     * byte is in the calibration, docs/calibration.md) */
    if (!c->disable_bias_linear && c->moe_grouped_gemm)
        gen_mem(g, "expert_bias", EP_OP_ELEMENTWISE, 2.0 * m * H * EP_BF16);
    if (c->pad_mode == EP_PAD_HOST)
        gen_mem(g, "unpad", EP_OP_ELEMENTWISE, (r->prows + r->erows) * g->R);
}

/* The shared experts: a TP MLP on the gathered tokens. Part FC1 is the gather, fc1 and the
 * activation, part FC2 fc2 and the scatter: with --moe-shared-expert-overlap Megatron runs the
 * first beside the dispatch all-to-all and the second beside the combine (shared_side below). */
enum { SHARED_FC1, SHARED_FC2 };

static void shared_experts(gen *g, int part) {
    const ep_config *c = g->cfg;
    if (c->moe_shared_expert_intermediate_size <= 0) return;
    double S = (double)c->moe_shared_expert_intermediate_size / g->tp, H = c->hidden_size;
    int saved = g->mods; /* part of the MoE layer in Megatron-LM (its moe module) */
    g->mods |= EP_RC_SHARED_EXPERTS | EP_RC_MOE;
    if (part == SHARED_FC1) {
        tp_gather(g, "shared_ag");
        gemm(g, "shared_fc1", g->tg, S * (c->swiglu ? 2 : 1), H);
        gen_mem(g, "shared_act", EP_OP_ELEMENTWISE, g->tg * S * (c->swiglu ? 3 : 2) * EP_BF16);
    } else {
        gemm(g, "shared_fc2", g->tg, H, S);
        tp_scatter(g, "shared_rs");
    }
    g->mods = saved;
}


static int moe_node_specs(gen *g, ep_node node);

/* The MoE layer's ops of a node, all in the moe recompute module. */
static int moe_node(gen *g, ep_node node) {
    int saved = g->mods, saved_cg = g->cg;
    g->mods |= EP_RC_MOE;
    g->cg = CG_LAYER(EP_CG_MOE);
    int rc = moe_node_specs(g, node);
    g->mods = saved;
    g->cg = saved_cg;
    return rc;
}

/* What Megatron's TopKRouter adds to the routing for load balancing. An aux loss (coefficient >
 * 0): the scores and top-k recomputed for the loss, the tokens per expert summed over the TP
 * group (Megatron's TP x CP group: the CP part is not modelled; global_aux_loss: then over DP),
 * the loss itself; each op has a backward. The expert
 * bias: the tokens per expert counted for the bias update, forward only. Sizes: fp32 scores of
 * the rank's tokens x experts. */
static void router_balance(gen *g) {
    const ep_config *c = g->cfg;
    double te = g->t * c->num_experts * 4;
    ep_balance b = c->moe_router_load_balancing_type;
    if (c->moe_aux_loss_coeff > 0 &&
        (b == EP_BALANCE_AUX_LOSS || b == EP_BALANCE_SEQ_AUX_LOSS ||
         b == EP_BALANCE_GLOBAL_AUX_LOSS)) {
        gen_mem(g, "aux_scores", EP_OP_ELEMENTWISE, 3 * te);
        if (g->rb->g_tp >= 0)
            gen_coll(g, "aux_counts_ar", EP_OP_ALL_REDUCE, g->rb->g_tp, 4 * c->num_experts)
                ->fwd_only = 1;
        if (b == EP_BALANCE_GLOBAL_AUX_LOSS && g->rb->g_dp >= 0)
            gen_coll(g, "aux_counts_dp_ar", EP_OP_ALL_REDUCE, g->rb->g_dp, 4 * c->num_experts)
                ->fwd_only = 1;
        gen_mem(g, "aux_loss", EP_OP_ELEMENTWISE, 2 * te);
    }
    if (c->moe_router_enable_expert_bias) {
        spec *s = gen_add(g, "bias_counts", EP_OP_ELEMENTWISE);
        if (s) s->bytes = te / 4, s->fwd_only = 1;
    }
}

static int moe_node_specs(gen *g, ep_node node) {
    const ep_config *c = g->cfg;
    const ep_dispatcher *d = ep_disp_of(c);
    moe_rows r;
    if (moe_rows_get(g, &r) != 0) return -1;
    double t = g->t, H = c->hidden_size, E = c->num_experts;
    switch (node) {
    case EP_NODE_PRE_DISPATCH: {
        g->cg = CG_LAYER(EP_CG_MOE | EP_CG_MOE_ROUTER);
        spec *s = gen_add(g, "router", EP_OP_ROUTER);
        s->m = (int)t, s->n = (int)E, s->k = (int)H, s->batch = 1;
        s->flops = ep_cost_gemm_flops(t, E, H) + 8 * t * E; /* scores, then top-k and softmax */
        s->bytes = ep_cost_gemm_bytes(t, E, H) + t * E * 4;
        s->weight = 1;
        router_balance(g);
        if (!c->moe_shared_expert_overlap) {
            shared_experts(g, SHARED_FC1);
            shared_experts(g, SHARED_FC2);
        }
        g->cg = CG_LAYER(EP_CG_MOE | EP_CG_MOE_PREPROCESS); /* up to the dispatch */
        if (d->preprocess) d->preprocess(g, &r);
        return 0;
    }
    case EP_NODE_DISPATCH:
        g->cg = CG_LAYER(EP_CG_MOE | EP_CG_MOE_PREPROCESS); /* the layout / routing metadata */
        if (d->metadata) d->metadata(g, &r);
        g->cg = CG_LAYER(EP_CG_MOE);
        d->dispatch(g, &r);
        return 0;
    case EP_NODE_MLP:
        etp_gather(g, &r);
        if (d->permute) d->permute(g, &r);
        experts(g, &r);
        if (d->unpermute) d->unpermute(g, &r);
        etp_scatter(g, &r);
        return 0;
    case EP_NODE_COMBINE:
        d->combine(g, &r);
        return 0;
    default:
        return 0;
    }
}

/* --- nodes of a layer ------------------------------------------------------------------------ */

static int family(char sym) {
    switch (sym) {
    case '*':
    case 'D':
        return 0;
    case 'M':
        return 1;
    case 'G':
        return 2;
    default:
        return 3;
    }
}

static void mixers(gen *g) {
    const ep_layer *L = g->L;
    int nmix = L->nblocks;
    char last = nmix > 0 ? L->blocks[nmix - 1] : 0;
    if (last == 'E' || last == '-') nmix--;
    static const char *const prefixes[EP_MAX_BLOCKS] = {"b0_", "b1_", "b2_", "b3_",
                                                        "b4_", "b5_", "b6_", "b7_"};
    for (int i = 0; i < nmix; i++) {
        char sym = L->blocks[i];
        int repeated = 0;
        for (int j = 0; j < i; j++)
            repeated |= family(L->blocks[j]) == family(sym);
        g->prefix = repeated ? prefixes[i] : "";
        if (sym == '*')
            attention(g, g->cfg->multi_latent_attention);
        else if (sym == 'D')
            attention(g, 1);
        else if (sym == 'M')
            ssm(g, 0);
        else if (sym == 'G')
            ssm(g, 1);
    }
    g->prefix = "";
}

static int node_specs(gen *g, ep_node node) {
    const ep_config *c = g->cfg;
    const ep_layer *L = g->L;
    char last = L->nblocks > 0 ? L->blocks[L->nblocks - 1] : 0;
    double H = c->hidden_size, V = c->vocab_size;
    switch (node) {
    case EP_NODE_PRE_DISPATCH:
        if (L->is_mtp) {
            gen_mem(g, "mtp_enorm", EP_OP_NORM, 4 * g->t * g->R);
            gemm(g, "eh_proj", g->tg, H, 2 * H);
        }
        mixers(g);
        if (last == 'E' || last == '-') {
            g->cg = CG_LAYER(last == 'E' ? EP_CG_MOE | EP_CG_MOE_ROUTER : EP_CG_MLP);
            gen_mem(g, "mlp_norm", EP_OP_NORM, 2 * g->t * g->R);
            tag_last(g, EP_RC_LAYERNORM);
        }
        if (last == 'E') return moe_node(g, node);
        return 0;
    case EP_NODE_DISPATCH:
    case EP_NODE_COMBINE:
        return last == 'E' ? moe_node(g, node) : 0; /* dense layers: empty nodes */
    case EP_NODE_MLP:
        if (last == 'E') return moe_node(g, node);
        if (last == '-') {
            double F = (double)c->ffn_hidden_size / g->tp;
            g->mods = EP_RC_MLP;
            g->cg = CG_LAYER(EP_CG_MLP);
            tp_gather_of(g, "mlp_ag", 1); /* into fc1, whose norm casts to FP8 */
            gemm(g, "fc1", g->tg, F * (c->swiglu ? 2 : 1), H);
            gen_mem(g, "act", EP_OP_ELEMENTWISE, g->tg * F * (c->swiglu ? 3 : 2) * EP_BF16);
            gemm(g, "fc2", g->tg, H, F);
            tp_scatter(g, "mlp_rs");
            g->mods = 0;
            g->cg = 0;
        }
        return 0;
    case EP_NODE_MTP:
        if (L->is_mtp) {
            gen_mem(g, "mtp_norm", EP_OP_NORM, 2 * g->t * g->R);
            tp_gather(g, "mtp_output_ag");
            gemm_bf16(g, "mtp_output", g->tg, V / g->tp, H);
            spec *s = gen_add(g, "mtp_loss", EP_OP_LOSS);
            s->flops = 5 * g->tg * V / g->tp;
            s->bytes = 2 * g->tg * V / g->tp * 4;
            vocab_parallel_loss(g);
        }
        return 0;
    default:
        return 0;
    }
}

static void gen_init(gen *g, ep_rank_builder *rb, int layer, int mb, spec *buf) {
    memset(g, 0, sizeof *g);
    g->rb = rb;
    g->cfg = rb->cfg;
    g->L = layer >= 0 ? &rb->s->plan.layers[layer] : NULL;
    g->layer = layer;
    g->mb = mb;
    g->tp = rb->tp_size;
    g->etp = rb->cfg->expert_tensor_parallel_size;
    g->t = ep_sched_tokens(rb->cfg, ep_sched_route_mb(rb->s, mb), rb->rank);
    g->tg = g->t * g->tp;
    g->R = EP_ROW_BYTES(rb->cfg);
    g->prefix = "";
    g->out = buf;
}

double ep_layer_activation_bytes(const ep_config *cfg, int mb, int rank) {
    return (double)ep_sched_tokens(cfg, mb, rank) * EP_ROW_BYTES(cfg);
}

/* --- emission ------------------------------------------------------------------------------- */

static ep_op op_of(const gen *g, const spec *sp, int chunk, ep_node node, ep_stream stream) {
    ep_op op = ep_op_blank();
    op.kind = sp->kind;
    op.stream = stream;
    op.node = node;
    op.label = sp->label;
    op.mb = (int16_t)g->mb;
    op.chunk = (int16_t)chunk;
    op.layer = (int16_t)g->layer;
    op.flops = sp->flops;
    op.bytes = sp->bytes;
    op.m = sp->m, op.n = sp->n, op.k = sp->k, op.batch = sp->batch;
    op.group = sp->group;
    op.traffic = sp->traffic;
    op.transpose = (int8_t)sp->transpose;
    op.fp8 = (int8_t)sp->fp8;
    if (sp->side) op.stream = EP_STREAM_TP;
    if (sp->fp8_gather && sp->kind == EP_OP_ALL_GATHER) op.bytes = sp->bytes / EP_BF16; /* FP8 */
    /* captured by a CUDA graph of the configured scopes; a host sync never is */
    op.graph = (sp->cg & g->cfg->cuda_graph_mask) && sp->kind != EP_OP_HOST_SYNC;
    op.inner = sp->fp8 && sp->kind == EP_OP_ELEMENTWISE; /* a quantization inside its GEMM's call */
    return op;
}

static ep_op_kind backward_kind(ep_op_kind k) {
    switch (k) {
    case EP_OP_A2A_DISPATCH:
        return EP_OP_A2A_COMBINE;
    case EP_OP_A2A_COMBINE:
        return EP_OP_A2A_DISPATCH;
    case EP_OP_ALL_GATHER:
        return EP_OP_REDUCE_SCATTER;
    case EP_OP_REDUCE_SCATTER:
        return EP_OP_ALL_GATHER;
    default:
        return k;
    }
}

/* dgrad of Y = X W (m x n x k): dX = dY W^T, an m x k x n GEMM. */
static ep_op backward_op(const gen *g, const spec *sp, int chunk, ep_node node, ep_stream stream) {
    ep_op op = op_of(g, sp, chunk, node, stream);
    op.phase = EP_PHASE_BWD;
    op.kind = backward_kind(sp->kind);
    if (sp->bwd_side) op.stream = EP_STREAM_TP;
    switch (sp->kind) {
    case EP_OP_GEMM:
    case EP_OP_GROUPED_GEMM:
        op.n = sp->k, op.k = sp->n;
        break;
    case EP_OP_ROUTER:
        op.flops = 2 * sp->flops; /* dgrad and wgrad of the small router GEMM in one op */
        op.bytes = 2 * sp->bytes;
        break;
    case EP_OP_ATTENTION:
        op.flops = 2.5 * sp->flops;
        op.bytes = 2 * sp->bytes;
        break;
    case EP_OP_SCAN:
        op.flops = EP_SCAN_BWD_FLOPS * sp->flops;
        op.bytes = 2 * sp->bytes;
        break;
    case EP_OP_NORM:
    case EP_OP_ELEMENTWISE:
    case EP_OP_LOSS:
        op.bytes = 2 * sp->bytes; /* reads the saved input and the incoming gradient */
        break;
    case EP_OP_A2A_DISPATCH:
    case EP_OP_A2A_COMBINE:
        op.transpose = (int8_t)!sp->transpose;
        break;
    case EP_OP_ALL_GATHER: /* becomes a reduce-scatter of the gathered size */
        op.bytes = sp->bytes * g->rb->s->groups[sp->group].size;
        break;
    case EP_OP_REDUCE_SCATTER: /* becomes an all-gather of the shard (FP8: tp_scatter) */
        op.bytes = sp->bytes / g->rb->s->groups[sp->group].size / (sp->fp8_gather ? EP_BF16 : 1);
        break;
    default:
        break;
    }
    return op;
}

/* The quantization of an FP8 GEMM's incoming gradient dY [m x n] (phase bwd, label "<gemm>_cast").
 */
static ep_op grad_cast_op(const gen *g, const spec *sp, int chunk, ep_node node, ep_stream stream) {
    ep_op op = op_of(g, sp, chunk, node, stream);
    const char *l = suffixed_label(g->rb->s, sp->label, "_cast");
    op.label = l ? l : "fp8_cast";
    op.kind = EP_OP_ELEMENTWISE;
    op.phase = EP_PHASE_BWD;
    op.flops = 0;
    op.bytes = (double)sp->m * sp->n * fp8_cast_bytes_per_element(g->cfg);
    op.m = op.n = op.k = 0;
    op.batch = 1;
    op.fp8 = 1; /* inside the GEMM's module (ep_op.fp8) */
    op.inner = 1;
    return op;
}

/* Weight gradient dW = X^T dY: a k x n x m GEMM. */
static ep_op wgrad_op(const gen *g, const spec *sp, int chunk, ep_node node, ep_stream stream) {
    ep_op op = op_of(g, sp, chunk, node, stream);
    op.phase = EP_PHASE_BWD_DW;
    op.m = sp->k, op.n = sp->n, op.k = sp->m;
    return op;
}

/* The all-gather again, in the backward, of a sequence-parallel GEMM's saved input (Megatron's and
 * Transformer Engine's linear layers keep the shard, not the gathered input): issued async beside
 * the dgrad, the wgrad waits for it (emit_list, on the tp stream). */
static ep_op regather_op(const gen *g, const spec *ag, int chunk, ep_node node, ep_stream stream) {
    ep_op op = op_of(g, ag, chunk, node, stream); /* its forward's bytes (FP8 where it was) */
    op.label = ag->regather;
    op.phase = EP_PHASE_BWD;
    op.stream = EP_STREAM_TP;
    op.inner = 1; /* a call inside the linear layer's backward */
    return op;
}

/* Selective recomputation (docs/schedule.md, "Recomputation"): is the op's forward run again
 * right before its backward? The moe module spans the layer's nodes and is recomputed whole
 * (recompute_layer below), so its ops are not rerun one by one as well. */
static int rerun_in_bwd(const gen *g, const spec *sp) {
    const ep_config *c = g->cfg;
    if (c->recompute_granularity != EP_RECOMPUTE_SELECTIVE || g->layer < 0) return 0;
    if ((c->recompute_mask & EP_RC_MOE) && (sp->mods & EP_RC_MOE)) return 0;
    return (sp->mods & c->recompute_mask & ~EP_RC_MOE) != 0;
}

/* The ops of a pass over the specs g->out[0..g->n): forward (or its recomputation) in order, or
 * backward in reverse without the forward-only ops, each weighted op's dgrad followed by its
 * wgrad unless deferred, and a run of selectively recomputed ops preceded by its forward again.
 * wait[i] marks the ops that wait on the event chain (all but the wgrads). ops and wait hold
 * 3 x g->n. Returns the count. */
static int pass_ops(const gen *g, int chunk, ep_node node, ep_stream stream, ep_phase phase,
                    int defer_dw, ep_op *ops, int *wait) {
    int n = 0;
    if (phase == EP_PHASE_FWD || phase == EP_PHASE_RECOMPUTE) {
        for (int i = 0; i < g->n; i++) {
            ops[n] = op_of(g, &g->out[i], chunk, node, stream);
            ops[n].phase = phase;
            wait[n++] = 1;
        }
        return n;
    }
    for (int i = g->n - 1; i >= 0; i--) {
        const spec *sp = &g->out[i];
        if (rerun_in_bwd(g, sp) && (i == g->n - 1 || !rerun_in_bwd(g, &g->out[i + 1]))) {
            int a = i; /* the backward reaches a recomputed run: its forward first */
            while (a > 0 && rerun_in_bwd(g, &g->out[a - 1]))
                a--;
            for (int j = a; j <= i; j++) {
                ops[n] = op_of(g, &g->out[j], chunk, node, stream);
                ops[n].phase = EP_PHASE_RECOMPUTE;
                wait[n++] = 1;
            }
        }
        if (sp->fwd_only) continue;
        if (sp->fp8) { /* quantize the incoming gradient dY [m x n] before dgrad and wgrad */
            ops[n] = grad_cast_op(g, sp, chunk, node, stream);
            wait[n++] = 1;
        }
        if (sp->kind == EP_OP_GEMM && i > 0 && g->out[i - 1].regather) {
            ops[n] = regather_op(g, &g->out[i - 1], chunk, node, stream);
            wait[n++] = 1;
        }
        ops[n] = backward_op(g, sp, chunk, node, stream);
        wait[n++] = 1;
        if (sp->weight && !defer_dw) {
            ops[n] = wgrad_op(g, sp, chunk, node, stream);
            wait[n++] = 0;
        }
    }
    return n;
}

static ep_stream node_stream(ep_node node) {
    return node == EP_NODE_DISPATCH || node == EP_NODE_COMBINE ? EP_STREAM_COMM : EP_STREAM_COMP;
}

/* Emits ops[0..n) of a node: the first waits on the chain; an empty node still passes the event
 * through its stream, so the chain then also waits for that stream's last op. */
/* The first op of each run of captured ops launches its graph (a pass of a node is captured as
 * a unit, as Megatron captures a layer's callable). */
static void mark_graph_launches(ep_op *ops, int n) {
    for (int i = 0; i < n; i++)
        if (ops[i].graph && (i == 0 || !ops[i - 1].graph)) ops[i].graph = 2;
}

/* --tp-comm-overlap (docs/schedule.md, "TP communication overlap"): a TP collective of a pass on
 * the tp stream runs beside its GEMM instead of before or after it (without it, only the backward
 * reduce-scatters of the sequence-parallel all-gathers, NCCL's, beside the wgrad). An all-gather
 * waits for the op before it (its input) and the ops after the GEMM that follows it wait for it
 * (the GEMM consumes the gathered chunks as they arrive: Transformer Engine's ring exchange); a
 * reduce-scatter starts with the op that produces its input (it waits for the op before that one)
 * and the next op waits for it - in the backward that is the dgrad, so the reduce-scatter runs
 * beside the wgrad. release[i] is the list position whose op waits for the side op i (n: the pass's
 * end). */
static void side_release(const ep_op *ops, int n, int *release) {
    for (int i = 0; i < n; i++) {
        release[i] = -1;
        if (ops[i].stream != EP_STREAM_TP) continue;
        int g = i + 1;
        if (ops[i].kind == EP_OP_ALL_GATHER)
            while (g < n && ops[g].kind != EP_OP_GEMM && ops[g].kind != EP_OP_GROUPED_GEMM)
                g++;
        release[i] = ops[i].kind == EP_OP_ALL_GATHER && g < n ? g + 1 : i + 1;
    }
}

/* The dependencies of side op i (emitted as idx) on the ops before it, and of the op at position
 * p (emitted as idx) on the side ops it releases. */
static int side_deps(ep_rank_builder *rb, const ep_op *ops, const int *emitted, const int *release,
                     int p, int idx) {
    if (ops[p].stream == EP_STREAM_TP) {
        /* a backward reduce-scatter with no wgrad before it (delayed wgrad) waits for the dgrad
         * right before it */
        int after_dgrad =
            ops[p].phase == EP_PHASE_BWD && p > 0 && ops[p - 1].phase != EP_PHASE_BWD_DW;
        int producer = ops[p].kind == EP_OP_ALL_GATHER || after_dgrad ? p - 1 : p - 2;
        if (producer < 0 && p > 0) producer = p - 1;
        if (producer >= 0 && ep_rb_dep(rb, idx, emitted[producer]) != 0) return -1;
    }
    for (int i = 0; i < p; i++)
        if (release[i] == p && ep_rb_dep(rb, idx, emitted[i]) != 0) return -1;
    return 0;
}

static int emit_list(ep_rank_builder *rb, ep_chain *c, ep_op *ops, const int *chain_wait, int n,
                     ep_stream stream, int layer, int bwd) {
    int first = -1, last = -1, waited_main = 0;
    int release[3 * EP_MAX_NODE_OPS], emitted[3 * EP_MAX_NODE_OPS];
    mark_graph_launches(ops, n);
    side_release(ops, n, release);
    for (int i = 0; i < n; i++) {
        int idx = ep_rb_emit(rb, &ops[i]);
        if (idx < 0) return -1;
        emitted[i] = idx;
        if (side_deps(rb, ops, emitted, release, i, idx) != 0) return -1;
        /* the first op waits for the chain; when that is a side op on the tp stream, the first
         * op of the node's own stream waits too */
        if (chain_wait[i] && (first < 0 || (!waited_main && ops[i].stream == stream))) {
            if (first < 0) first = idx;
            waited_main |= ops[i].stream == stream;
            if (ep_rb_wait_chain(rb, idx, c, ops[i].stream) != 0) return -1;
        }
        last = idx;
    }
    if (n == 0) {
        if (rb->last_on_stream[stream] > c->tail[stream])
            c->tail[stream] = rb->last_on_stream[stream];
        return 0;
    }
    ep_chain_reset(c);
    c->tail[stream] = last;
    for (int i = 0; i < n; i++) /* side ops the pass's end releases: the next node waits */
        if (release[i] >= n) ep_chain_add(c, emitted[i], EP_STREAM_TP);
    if (bwd && layer >= 0) rb->layer_last_bwd[layer] = last;
    return 0;
}

/* --moe-shared-expert-overlap: the shared experts' part that Megatron issues right after the
 * node's all-to-all (fc1 after dispatch, fc2 after combine; backward in reverse) goes on the
 * compute stream without waiting for the transfer, so it runs beside it. It waits for what the node
 * waited for (`before`) and the chain then waits for it too (Megatron adds the shared output to the
 * combined tokens). Megatron uses a stream of its own; on the compute stream the experts' GEMMs
 * queue behind fc1 when fc1 outlasts the dispatch (docs/schedule.md, "Shared experts beside the
 * all-to-alls"). */
static int shared_side(ep_rank_builder *rb, ep_chain *c, const ep_chain *before, int layer, int mb,
                       int chunk, ep_node node, ep_phase phase) {
    const ep_config *cfg = rb->cfg;
    if (!cfg->moe_shared_expert_overlap || layer < 0) return 0;
    if (node != EP_NODE_DISPATCH && node != EP_NODE_COMBINE) return 0;
    const ep_layer *L = &rb->s->plan.layers[layer];
    if (L->nblocks == 0 || L->blocks[L->nblocks - 1] != 'E') return 0;
    spec specs[EP_MAX_NODE_OPS]; /* gen_add() guards this size */
    gen g;
    gen_init(&g, rb, layer, mb, specs);
    shared_experts(&g, node == EP_NODE_DISPATCH ? SHARED_FC1 : SHARED_FC2);
    ep_op ops[3 * EP_MAX_NODE_OPS];
    int wait[3 * EP_MAX_NODE_OPS]; /* the first op waits on `before` instead */
    int n = pass_ops(&g, chunk, EP_NODE_PRE_DISPATCH, EP_STREAM_COMP, phase, 0, ops, wait);
    int release[3 * EP_MAX_NODE_OPS], emitted[3 * EP_MAX_NODE_OPS];
    mark_graph_launches(ops, n);
    side_release(ops, n, release);
    for (int i = 0; i < n; i++) {
        int idx = ep_rb_emit(rb, &ops[i]);
        if (idx < 0) return -1;
        emitted[i] = idx;
        if (side_deps(rb, ops, emitted, release, i, idx) != 0) return -1;
        if (i == 0 && ep_rb_wait_chain(rb, idx, before, EP_STREAM_COMP) != 0) return -1;
        ep_chain_add(c, idx, ops[i].stream);
    }
    return 0;
}

/* A node's pass; mask -1 keeps every op, else only those of the EP_RC_* modules in mask. */
static int emit_node(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk, ep_node node,
                     ep_phase phase, int defer_dw, int mask) {
    spec specs[EP_MAX_NODE_OPS];
    ep_op ops[3 * EP_MAX_NODE_OPS];
    int wait[3 * EP_MAX_NODE_OPS];
    gen g;
    gen_init(&g, rb, layer, mb, specs);
    if (node_specs(&g, node) != 0 || g.failed) {
        snprintf(rb->err, EP_ERRLEN,
                 "layer %d: cannot build the %s node (out of memory or too many ops)", layer,
                 ep_node_name(node));
        return -1;
    }
    if (mask != -1) {
        int kept = 0;
        for (int i = 0; i < g.n; i++)
            if (specs[i].mods & mask) specs[kept++] = specs[i];
        g.n = kept;
    }
    ep_stream stream = node_stream(node);
    int n = pass_ops(&g, chunk, node, stream, phase, defer_dw, ops, wait);
    ep_chain before = *c;
    if (emit_list(rb, c, ops, wait, n, stream, layer, phase == EP_PHASE_BWD) != 0) return -1;
    return shared_side(rb, c, &before, layer, mb, chunk, node, phase);
}

int ep_layer_emit_node(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk, ep_node node,
                       ep_phase phase, int defer_dw) {
    return emit_node(rb, c, layer, mb, chunk, node, phase, defer_dw, -1);
}

/* A layer's forward again, node by node on each node's stream: all of it (mask -1) or the ops of
 * the given modules. */
static int recompute_layer(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk,
                           int mask) {
    static const ep_node nodes[] = {EP_NODE_PRE_DISPATCH, EP_NODE_DISPATCH, EP_NODE_MLP,
                                    EP_NODE_COMBINE};
    for (int i = 0; i < 4; i++)
        if (emit_node(rb, c, layer, mb, chunk, nodes[i], EP_PHASE_RECOMPUTE, 0, mask) != 0)
            return -1;
    return 0;
}

int ep_layer_emit_recompute(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk) {
    const ep_config *cfg = rb->cfg;
    const ep_layer_plan *plan = &rb->s->plan;
    const ep_layer *L = &plan->layers[layer];
    if (cfg->recompute_granularity == EP_RECOMPUTE_SELECTIVE)
        return (cfg->recompute_mask & EP_RC_MOE) && L->is_moe
                   ? recompute_layer(rb, c, layer, mb, chunk, EP_RC_MOE)
                   : 0;
    if (cfg->recompute_granularity != EP_RECOMPUTE_FULL || L->is_mtp) return 0;
    int first, count, N = cfg->recompute_num_layers;
    ep_layer_range(plan, rb->pp, rb->vpp, rb->stage, chunk, &first, &count);
    while (count > 0 && plan->layers[first + count - 1].is_mtp)
        count--; /* MTP layers are not in the decoder's checkpoints */
    int i = layer - first, lo = layer, hi = layer;
    if (cfg->recompute_method == EP_RECOMPUTE_BLOCK) {
        if (i >= N) return 0; /* only the chunk's first N layers are checkpointed */
    } else {
        lo = first + i / N * N; /* groups of N; the group reruns at its top layer's backward */
        hi = lo + N < first + count ? lo + N - 1 : first + count - 1;
        if (layer != hi) return 0;
    }
    for (int l = lo; l <= hi; l++)
        if (recompute_layer(rb, c, l, mb, chunk, -1) != 0) return -1;
    return 0;
}

int ep_layer_emit_dw(ep_rank_builder *rb, int layer, int mb, int chunk, ep_node node) {
    spec specs[EP_MAX_NODE_OPS];
    gen g;
    gen_init(&g, rb, layer, mb, specs);
    if (node_specs(&g, node) != 0 || g.failed) {
        snprintf(rb->err, EP_ERRLEN, "layer %d: cannot build the %s node", layer,
                 ep_node_name(node));
        return -1;
    }
    ep_stream stream = node_stream(node);
    for (int i = g.n - 1; i >= 0; i--) { /* the order autograd produced the dgrads in */
        if (!specs[i].weight) continue;
        ep_op op = wgrad_op(&g, &specs[i], chunk, node, stream);
        op.graph = 0; /* issued one by one after the graphed backward, not captured */
        int idx = ep_rb_emit(rb, &op);
        if (idx < 0) return -1;
        rb->layer_last_bwd[layer] = idx;
    }
    return 0;
}

int ep_layer_emit_embedding(ep_rank_builder *rb, ep_chain *c, int mb, int chunk, ep_phase phase) {
    spec specs[EP_MAX_NODE_OPS];
    ep_op ops[3 * EP_MAX_NODE_OPS];
    int wait[3 * EP_MAX_NODE_OPS];
    gen g;
    gen_init(&g, rb, -1, mb, specs);
    /* a row gather from this rank's vocabulary shard of the table (rows of other shards zero);
     * with TP the shards' rows are summed and scattered to the sequence-parallel ranks
     * (Megatron's VocabParallelEmbedding: a reduce-scatter; its backward an all-gather) */
    gen_mem(&g, "embedding", EP_OP_ELEMENTWISE, g.tg * g.R / g.tp + g.tg * g.R);
    tp_scatter(&g, "embedding_rs");
    int n = pass_ops(&g, chunk, EP_NODE_NONE, EP_STREAM_COMP, phase, 0, ops, wait);
    return emit_list(rb, c, ops, wait, n, EP_STREAM_COMP, -1, 0);
}

int ep_layer_emit_output(ep_rank_builder *rb, ep_chain *c, int mb, int chunk, ep_phase phase) {
    spec specs[EP_MAX_NODE_OPS];
    ep_op ops[3 * EP_MAX_NODE_OPS];
    int wait[3 * EP_MAX_NODE_OPS];
    gen g;
    gen_init(&g, rb, -1, mb, specs);
    const ep_config *cfg = rb->cfg;
    double V = cfg->vocab_size;
    gen_mem(&g, "final_norm", EP_OP_NORM, 2 * g.t * g.R);
    tp_gather(&g, "output_ag"); /* the sequence-parallel rows, for the vocabulary shard's logits */
    gemm_bf16(&g, "output", g.tg, V / g.tp, cfg->hidden_size);
    spec *s = gen_add(&g, "loss", EP_OP_LOSS);
    s->flops = 5 * g.tg * V / g.tp; /* max, exp, sum, log over the vocabulary shard */
    s->bytes = 2 * g.tg * V / g.tp * 4;
    vocab_parallel_loss(&g);
    int n = pass_ops(&g, chunk, EP_NODE_NONE, EP_STREAM_COMP, phase, 0, ops, wait);
    return emit_list(rb, c, ops, wait, n, EP_STREAM_COMP, -1, 0);
}
