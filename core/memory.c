/* Activation memory per layer and the peak of a rank's schedule (ep_memory.h; docs/metrics.md,
 * "Peak memory per GPU").
 *
 * Notation: t = the rank's tokens of a microbatch (sequence-parallel shard), tg = t x TP (the
 * rows of TP-split GEMMs), H = hidden size; "lin" = bytes per element of a saved linear-layer
 * input: 2 (bf16), 1 with FP8 (Transformer Engine keeps the quantized copy for the wgrad).
 * With sequence parallelism every saved tensor of a TP layer is the rank's shard (Korthikanti's
 * division by t: the gathered GEMM inputs are gathered again in the backward). Korthikanti's
 * dense layer, in units of t x H bytes: norms' inputs 4; attention 11 + 5as/h (norm output 2,
 * Q K V 6, attn_proj input 2, dropout mask 1; scores: softmax 2as/h, dropout mask as/h, dropout
 * output 2as/h); MLP 3 + 4f/h (fc1 input 2, GeLU input 2f/h, GeLU output 2f/h, dropout mask 1).
 */
#include "ep_memory.h"

#include <stdlib.h>
#include <string.h>

#include "ep_cost.h"
#include "ep_groups.h"
#include "ep_xfer.h"
#include "sched_internal.h"

void ep_mem_model_default(ep_mem_model *a) {
    a->dropout = 0;
    a->flash = 1;
}

static int rc_on(const ep_config *c, int module) {
    return c->recompute_granularity == EP_RECOMPUTE_SELECTIVE && (c->recompute_mask & module);
}

static void add(ep_mem_part *p, double bytes, int wgrad) {
    p->saved += bytes;
    if (wgrad) p->wgrad += bytes;
}

static int tp_of(const ep_config *c) {
    return c->tensor_model_parallel_size;
}

/* The sequence length attention runs over (THD: the mean packed length), as sched_layer.c. */
static double attn_seq(const ep_config *c) {
    if (c->sequence_packing && c->seqlen_mean < c->seq_length) return c->seqlen_mean;
    return c->seq_length;
}

/* A norm and the mixer after it: the norm's input (the residual stream), its output (the first
 * GEMM's input; dropped by the layernorm module), then the mixer's own tensors. */
static void norm_saved(const ep_config *c, double t, double lin, ep_mem_part *p) {
    double H = c->hidden_size;
    add(p, 2 * t * H, 0);
    if (!rc_on(c, EP_RC_LAYERNORM)) add(p, lin * t * H, 1);
}

/* Self-attention (GQA) or MLA. */
static void attention_saved(const ep_config *c, int mla, double t, double lin,
                            const ep_mem_model *a, ep_mem_part *p) {
    int tp = tp_of(c);
    double H = c->hidden_size, tg = t * tp;
    double heads = c->num_attention_heads / tp;
    double qk, v;
    norm_saved(c, t, lin, p);
    if (mla) {
        qk = c->qk_head_dim + c->qk_pos_emb_head_dim;
        v = c->v_head_dim;
        /* the down projections run on the shard: their outputs (the q/kv norms' inputs) and the
         * normed latents (the up projections' inputs) */
        double kvl = c->kv_lora_rank;
        if (c->q_lora_rank > 0) {
            add(p, 2 * t * c->q_lora_rank, 0);
            add(p, lin * t * c->q_lora_rank, 1);
        }
        add(p, 2 * t * (kvl + c->qk_pos_emb_head_dim), 0);
        add(p, lin * t * kvl, 1);
        /* Q, K, V out of the up projections: the core attention's inputs */
        if (!rc_on(c, EP_RC_MLA_UP_PROJ)) add(p, 2 * tg * heads * (2 * qk + v), 0);
    } else {
        qk = v = c->kv_channels;
        int groups = c->num_query_groups;
        double kv_heads = groups / tp > 0 ? groups / tp : 1;
        add(p, 2 * tg * (heads + 2 * kv_heads) * qk, 0);
    }
    if (!rc_on(c, EP_RC_CORE_ATTN)) {
        if (a->flash) /* the fp32 log-sum-exp of every (head, query) */
            add(p, 4 * tg * heads, 0);
        else /* softmax output (bf16), dropout mask (1 B) and dropout output (bf16) */
            add(p, (2 + (a->dropout ? 3 : 0)) * heads * tg * attn_seq(c), 0);
    }
    /* the core attention's output: attn_proj's input (and, with flash, the kernel's own O) */
    add(p, 2 * tg * heads * v, lin == 2);
    if (lin < 2) add(p, lin * tg * heads * v, 1); /* FP8: attn_proj keeps its quantized copy */
    if (a->dropout) add(p, t * H, 0);
}

/* Mamba-2 (M) or GDN (G), sized as sched_layer.c sizes them. Approximation: the in_proj output,
 * the conv output, the scan output and the out_proj input are saved; the scan's chunk states are
 * not counted (heads x head_dim x state per chunk, small beside the rows). */
static void ssm_saved(const ep_config *c, int gdn, double t, double lin, ep_mem_part *p) {
    int tp = tp_of(c);
    double H = c->hidden_size, tg = t * tp;
    double heads = ep_config_mamba_heads(c);
    double inner = gdn ? 2 * H : heads * c->mamba_head_dim;
    double state = gdn ? c->kv_channels : c->mamba_state_dim;
    double groups = gdn ? 1 : (double)c->mamba_num_groups / tp; /* as sched_layer.c's ssm() */
    inner /= tp;
    heads /= tp;
    norm_saved(c, t, lin, p);
    add(p, 2 * tg * (2 * inner + 2 * groups * state + heads), 0); /* in_proj output: z x B C dt */
    add(p, 2 * tg * (inner + 2 * groups * state), 0);    /* conv output: the scan's x, B, C */
    add(p, 2 * tg * inner, 0);                           /* scan output: the gated norm's input */
    add(p, lin * tg * inner, 1);                         /* out_proj input */
}

/* An MLP of width F per rank on `rows` rows: fc1's output (the activation's input; gated: 2F) and
 * the activation's output (fc2's input; dropped with drop_act). */
static void mlp_saved(const ep_config *c, double rows, double F, double lin, int drop_act,
                      ep_mem_part *p) {
    add(p, 2 * rows * F * (c->swiglu ? 2 : 1), 0);
    if (!drop_act) add(p, lin * rows * F, 1);
}

double ep_mem_layer_input_bytes(const ep_config *cfg, double tokens) {
    return 2 * tokens * cfg->hidden_size;
}

double ep_mem_expected_expert_rows(const ep_config *cfg, double tokens) {
    return tokens * (cfg->num_experts > 0 ? cfg->moe_router_topk : 0);
}

void ep_mem_layer_saved(const ep_config *c, const ep_layer *L, double t, double expert_rows,
                        const ep_mem_model *a, ep_mem_part out[EP_NODE_NUM]) {
    memset(out, 0, sizeof(ep_mem_part) * EP_NODE_NUM);
    int tp = tp_of(c);
    double H = c->hidden_size, tg = t * tp;
    double lin = c->fp8_format != EP_FP8_NONE ? 1 : 2;
    ep_mem_part *pre = &out[EP_NODE_PRE_DISPATCH], *mlp = &out[EP_NODE_MLP];
    if (L->is_mtp) {
        /* the two norms' inputs (hidden states, embedding) and eh_proj's input (their concat) */
        add(pre, 2 * 2 * t * H, 0);
        add(pre, lin * 2 * t * H, 1);
        out[EP_NODE_MTP] = ep_mem_output_saved(c, t, a);
    }
    char last = L->nblocks > 0 ? L->blocks[L->nblocks - 1] : 0;
    int nmix = L->nblocks - (last == 'E' || last == '-');
    for (int i = 0; i < nmix; i++) {
        char sym = L->blocks[i];
        if (sym == '*' || sym == 'D')
            attention_saved(c, sym == 'D' || c->multi_latent_attention, t, lin, a, pre);
        else if (sym == 'M' || sym == 'G')
            ssm_saved(c, sym == 'G', t, lin, pre);
    }
    if (last == '-') {
        add(pre, 2 * t * H, 0);    /* the pre-MLP norm's input */
        if (rc_on(c, EP_RC_MLP)) { /* the checkpoint keeps the MLP's input only */
            if (!rc_on(c, EP_RC_LAYERNORM)) add(mlp, 2 * t * H, 0);
        } else {
            if (!rc_on(c, EP_RC_LAYERNORM)) add(mlp, lin * t * H, 1);
            mlp_saved(c, t, (double)c->ffn_hidden_size, lin, 0, mlp);
            if (a->dropout) add(mlp, t * H, 0);
        }
    } else if (last == 'E') {
        add(pre, 2 * t * H, 0); /* the pre-MLP norm's input */
        /* its output, the router's bf16 input (and the shared experts'); the moe module's
         * checkpoint keeps it too */
        if (!rc_on(c, EP_RC_LAYERNORM)) add(pre, 2 * t * H, 1);
        if (!rc_on(c, EP_RC_MOE)) {
            double E = c->num_experts;
            add(pre, 4 * t * E + t * E, 0); /* fp32 scores, the routing map */
            double S = (double)c->moe_shared_expert_intermediate_size / tp;
            if (S > 0 && !rc_on(c, EP_RC_SHARED_EXPERTS)) {
                if (lin < 2) add(pre, lin * t * H, 1); /* FP8 copy of shared_fc1's input */
                mlp_saved(c, tg, S, lin, 0, pre);
            }
            double etp = c->expert_tensor_parallel_size;
            double m = expert_rows;
            add(mlp, lin * m * H, 1); /* expert_fc1's input: the permuted rows, padding included */
            mlp_saved(c, m, c->moe_ffn_hidden_size / etp, lin, rc_on(c, EP_RC_MOE_ACT), mlp);
            /* the experts' outputs, kept to differentiate the routing probabilities they are
             * weighted by (unpermute or the experts' probs multiply) */
            add(mlp, 2 * m * H, 0);
            if (a->dropout) add(mlp, t * H, 0);
        }
    }
}

ep_mem_part ep_mem_embedding_saved(const ep_config *cfg, double t, const ep_mem_model *a) {
    ep_mem_part p = {0, 0};
    /* int64 token ids, counted per sequence-parallel shard as Megatron-LM's
     * theoretical_memory_usage.py counts them (8 bytes a token; every TP rank holds them all) */
    add(&p, 8 * t, 0);
    if (a->dropout) add(&p, t * cfg->hidden_size, 0);
    return p;
}

ep_mem_part ep_mem_output_saved(const ep_config *cfg, double t, const ep_mem_model *a) {
    (void)a;
    ep_mem_part p = {0, 0};
    double H = cfg->hidden_size;
    add(&p, 2 * t * H, 0);               /* final norm's input */
    add(&p, 2 * t * H, 1);               /* the output GEMM's input (bf16 also under FP8) */
    add(&p, 4 * t * cfg->vocab_size, 0); /* fp32 logits of the vocabulary shard, t x TP rows */
    return p;
}

/* --- the walk ----------------------------------------------------------------------------------
 */

/* Full recomputation of layer l on this rank: 0 not checkpointed, 1 the first layer of its
 * checkpoint group (keeps the group's input), 2 a later layer of a group (keeps nothing).
 * The groups of ep_layer_emit_recompute (sched_layer.c). */
static void checkpoint_roles(const ep_sched *s, int stage, unsigned char *role) {
    const ep_config *c = &s->cfg;
    int nl = s->plan.num_layers + s->plan.num_mtp;
    memset(role, 0, (size_t)nl);
    if (c->recompute_granularity != EP_RECOMPUTE_FULL) return;
    int pp = c->pipeline_model_parallel_size, vpp = c->virtual_pipeline_model_parallel_size;
    int N = c->recompute_num_layers; /* full recomputation: validated >= 1 */
    for (int ch = 0; ch < vpp; ch++) {
        int first, count;
        ep_layer_range(&s->plan, pp, vpp, stage, ch, &first, &count);
        while (count > 0 && s->plan.layers[first + count - 1].is_mtp)
            count--;
        for (int i = 0; i < count; i++) {
            if (c->recompute_method == EP_RECOMPUTE_BLOCK)
                role[first + i] = i < N ? 1 : 0;
            else
                role[first + i] = i % N == 0 ? 1 : 2;
        }
    }
}

static int is_output_label(const char *l) {
    return !strcmp(l, "final_norm") || !strcmp(l, "output_ag") || !strcmp(l, "output") ||
           !strncmp(l, "loss", 4);
}

/* Key of an op's activations: (microbatch, slot, node), slots = layers, embedding, output. */
static long key_of(const ep_op *op, int nmb, int nl) {
    if (op->mb < 0 || op->mb >= nmb || !op->label) return -1;
    if (op->stream != EP_STREAM_COMP && op->stream != EP_STREAM_COMM && op->stream != EP_STREAM_TP)
        return -1;
    int slot, node = op->node;
    if (op->layer >= 0 && op->layer < nl)
        slot = op->layer;
    else if (op->layer < 0 && !strncmp(op->label, "embedding", 9))
        slot = nl, node = EP_NODE_NONE;
    else if (op->layer < 0 && is_output_label(op->label))
        slot = nl + 1, node = EP_NODE_NONE;
    else
        return -1;
    return ((long)op->mb * (nl + 2) + slot) * EP_NODE_NUM + node;
}

/* Bytes a deepep/hybridep rank's kernels keep in buffers through the step: one slot per peer of
 * its kernel group's largest payload (ep_xfer_kernel_payload), as epref sizes its NVLink staging.
 * NCCL's all-to-alls write into the activations; NCCL's own channel buffers are not counted. */
static double dispatch_buffers(const ep_sched *s, int rank) {
    const ep_rank_sched *rs = &s->ranks[rank];
    for (int i = 0; i < rs->nops; i++) {
        const ep_op *op = &rs->ops[i];
        if ((op->algo == EP_ALGO_NVLINK || op->algo == EP_ALGO_HIER) && op->group >= 0 &&
            op->group < s->ngroups)
            return ep_xfer_kernel_payload(s, op->group) * s->groups[op->group].size;
    }
    return 0;
}

int ep_mem_rank_peak(const ep_sched *s, int rank, const ep_mem_model *a, ep_mem_peak *out) {
    memset(out, 0, sizeof *out);
    const ep_config *c = &s->cfg;
    const ep_rank_sched *rs = &s->ranks[rank];
    int nl = s->plan.num_layers + s->plan.num_mtp, nmb = s->num_microbatches;
    size_t nkeys = (size_t)(nmb > 0 ? nmb : 1) * (size_t)(nl + 2) * EP_NODE_NUM;
    int *last_b = malloc(nkeys * sizeof *last_b), *last_w = malloc(nkeys * sizeof *last_w);
    double *held = calloc(nkeys, sizeof *held), *held_w = calloc(nkeys, sizeof *held_w);
    double *rows = malloc(nkeys * sizeof *rows);
    unsigned char *done = calloc(nkeys, 1), *role = malloc((size_t)nl + 1);
    ep_mem_fsdp fb = {0};
    int rc = -1;
    if (!last_b || !last_w || !held || !held_w || !rows || !done || !role) goto out;
    if (ep_mem_fsdp_init(s, rank, &fb) != 0) goto out;
    for (size_t k = 0; k < nkeys; k++) {
        last_b[k] = last_w[k] = -1;
        rows[k] = -1;
    }
    ep_coords dense, expert;
    ep_rank_coords(c, rank, &dense, &expert);
    checkpoint_roles(s, dense.pp, role);
    int full = c->recompute_granularity == EP_RECOMPUTE_FULL;
    for (int i = 0; i < rs->nops; i++) {
        const ep_op *op = &rs->ops[i];
        long k = key_of(op, nmb, nl);
        if (k < 0) continue;
        if (op->phase == EP_PHASE_BWD) last_b[k] = i;
        if (op->phase == EP_PHASE_BWD_DW) last_w[k] = i;
        if (op->phase == EP_PHASE_FWD && !strcmp(op->label, "expert_fc1")) rows[k] = op->m;
    }
    /* the peak of what the margin scales (activations) plus FSDP's buffers of the running layer */
    double live = 0, peak = 0, best = 0, peak_fp = 0, peak_fg = 0;
    for (int i = 0; i < rs->nops; i++) {
        const ep_op *op = &rs->ops[i];
        long k = key_of(op, nmb, nl);
        if (k < 0) continue;
        int node = (int)(k % EP_NODE_NUM), slot = (int)(k / EP_NODE_NUM % (nl + 2));
        int fwd = op->phase == EP_PHASE_FWD, rerun = op->phase == EP_PHASE_RECOMPUTE && full;
        unsigned char bit = fwd ? 1 : 2;
        if ((fwd || rerun) && !(done[k] & bit)) {
            done[k] |= bit;
            ep_mem_part p = {0, 0};
            double t = ep_sched_tokens(c, ep_sched_route_mb(s, op->mb), rank);
            if (slot == nl) {
                if (fwd) p = ep_mem_embedding_saved(c, t, a);
            } else if (slot == nl + 1) {
                if (fwd) p = ep_mem_output_saved(c, t, a);
            } else {
                ep_mem_part parts[EP_NODE_NUM];
                long km = k - node + EP_NODE_MLP;
                double m = rows[km] >= 0 ? rows[km] : ep_mem_expected_expert_rows(c, t);
                ep_mem_layer_saved(c, &s->plan.layers[slot], t, m, a, parts);
                ep_mem_part kept = {0, 0}; /* what the forward keeps under full recomputation */
                if (role[slot] == 1 && node == EP_NODE_PRE_DISPATCH)
                    kept.saved = ep_mem_layer_input_bytes(c, t);
                if (role[slot] == 0)
                    p = fwd ? parts[node] : kept;
                else if (fwd)
                    p = kept;
                else /* the rerun restores the rest until the layer's backward */
                    p = (ep_mem_part){parts[node].saved - kept.saved, parts[node].wgrad};
            }
            held[k] += p.saved;
            held_w[k] += p.wgrad;
            live += p.saved;
        }
        double fp = 0, fg = 0;
        if (op->layer >= 0 && op->layer < nl && op->phase == EP_PHASE_FWD) {
            fp = fb.param_fwd[op->layer];
        } else if (op->layer >= 0 && op->layer < nl && op->phase != EP_PHASE_NONE) {
            fp = fb.param_bwd[op->layer]; /* backward, wgrad, recomputation */
            fg = fb.grad_bwd[op->layer];
        }
        double now = live * (1 + EP_MEM_FRAGMENTATION) + fb.persistent + fp + fg;
        if (now > best || (now == best && live > peak)) {
            best = now;
            peak = live;
            peak_fp = fb.persistent + fp;
            peak_fg = fg;
        }
        int end = last_b[k] > last_w[k] ? last_b[k] : last_w[k];
        if (i == end) {
            live -= held[k];
            held[k] = held_w[k] = 0;
        } else if (i == last_b[k] && last_w[k] > i) { /* delayed wgrad: keep its inputs */
            live -= held[k] - held_w[k];
            held[k] = held_w[k];
        }
    }
    out->model_state = rs->model_state_bytes;
    out->activations = peak;
    out->buffers = dispatch_buffers(s, rank);
    out->margin = EP_MEM_FRAGMENTATION * (out->activations + out->buffers);
    /* FSDP's buffers take no margin: the same few bucket sizes are freed and taken again layer
     * after layer, which the caching allocator reuses whole */
    out->fsdp_params = peak_fp;
    out->fsdp_grads = peak_fg;
    out->total = out->model_state + out->activations + out->buffers + out->margin +
                 out->fsdp_params + out->fsdp_grads;
    rc = 0;
out:
    ep_mem_fsdp_free(&fb);
    free(last_b);
    free(last_w);
    free(held);
    free(held_w);
    free(rows);
    free(done);
    free(role);
    return rc;
}
