/* sched_dp: data-parallel collectives and the optimizer step of one rank.
 *
 * Dense parameters go to the dense data-parallel groups, expert parameters to the expert-DP
 * groups (EP moves tokens only). Gradients are reduced in fp32 (4 bytes), parameters gathered in
 * bf16 (2 bytes). Variants (docs/schedule.md, "Data parallel"):
 *  - DDP: one all-reduce per bucket; distributed optimizer: reduce-scatter per bucket, then a
 *    parameter all-gather after the optimizer (or, with --overlap-param-gather, at the start of
 *    the iteration, each layer's first forward waiting for its bucket; with
 *    --overlap-param-gather-with-optimizer-step the first model chunk's beside the optimizer);
 *    --overlap-grad-reduce launches a bucket once the last microbatch's backward of its layers is
 *    done, otherwise all buckets go after the last backward;
 *  - FSDP (--use-megatron-fsdp): one unit per layer; all-gather before each forward and each
 *    backward (one unit prefetched ahead), reduce-scatter after each microbatch's backward;
 *  - HSDP (N > 1 instances): the above inside the inner groups, plus at the last microbatch an
 *    outer all-reduce (no_shard) or reduce-scatter (optim, which also gathers the outer shard at
 *    the first microbatch) over the outer groups.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

#define PARAM_BYTES               2.0 /* bf16 weights */
#define OPTIMIZER_FLOPS_PER_PARAM 12.0

static double dtype_bytes(ep_dtype d) {
    return d == EP_DTYPE_FP32 ? 4 : d == EP_DTYPE_FP8 ? 1 : 2;
}

/* Main gradients: fp32 (Megatron-LM's default for bf16, reduced in fp32), bf16 with
 * --grad-reduce-in-bf16 or --main-grads-dtype bf16. */
double ep_dp_grad_bytes(const ep_config *c) {
    /* FSDP2 keeps no fp32 main gradients: it reduces in the bf16 parameters' dtype */
    return c->grad_reduce_in_bf16 || c->main_grads_dtype == EP_DTYPE_BF16 || c->use_torch_fsdp2 ? 2
                                                                                                : 4;
}

static double grad_bytes(const ep_rank_builder *rb) {
    return ep_dp_grad_bytes(rb->cfg);
}

/* Adam's master weights, m and v: 12 B in fp32, less with the precision-aware optimizer. */
static double adam_state_bytes(const ep_rank_builder *rb) {
    const ep_config *c = rb->cfg;
    return dtype_bytes(c->main_params_dtype) + dtype_bytes(c->exp_avg_dtype) +
           dtype_bytes(c->exp_avg_sq_dtype);
}

/* Adam reads master, m, v and the gradient, writes master, m, v and the bf16 weights (30 B in
 * fp32). */
static double optimizer_bytes_per_param(const ep_rank_builder *rb) {
    return 2 * adam_state_bytes(rb) + grad_bytes(rb) + PARAM_BYTES;
}

void ep_dp_layer_params(const ep_config *cfg, const ep_layer *l, double *dense, double *expert) {
    ep_layer_params p;
    ep_cost_layer_params(cfg, l, &p);
    int tp = cfg->tensor_model_parallel_size, ep = cfg->expert_model_parallel_size;
    int etp = cfg->expert_tensor_parallel_size;
    *dense = (p.attn + p.dense_mlp + p.shared + p.router) / tp + p.norm;
    *expert = l->is_moe && cfg->num_experts > 0 ? p.expert * (cfg->num_experts / ep) / etp : 0;
}

/* The same layer's parameter tensors on one rank: every TP and ETP rank holds a slice of each,
 * and its local experts their own. */
static void layer_tensors(const ep_config *cfg, const ep_layer *l, double *dense, double *expert) {
    ep_layer_params p;
    ep_cost_layer_params(cfg, l, &p);
    *dense = p.tensors;
    *expert = l->is_moe && cfg->num_experts > 0
                  ? (double)p.expert_tensors * (cfg->num_experts / cfg->expert_model_parallel_size)
                  : 0;
}

/* ep_sched.h */
int ep_dp_ddp_optimizer(const ep_config *c) {
    return !c->use_distributed_optimizer && !c->use_megatron_fsdp && !c->use_torch_fsdp2 &&
           c->num_distributed_optimizer_instances <= 1;
}

/* Bytes an all-gather of a layer's parameters moves per copy: bf16, or with --fp8-param-gather the
 * linear layers' weights in FP8 (Transformer Engine keeps them as FP8 tensors; the router, norms
 * and embeddings stay bf16). FSDP's unsharded buffers hold the same bytes (memory_fsdp.c). */
void ep_dp_layer_gather_bytes(const ep_config *cfg, const ep_layer *l, double *dense,
                              double *expert) {
    ep_dp_layer_params(cfg, l, dense, expert);
    *dense *= PARAM_BYTES;
    *expert *= PARAM_BYTES;
    if (!cfg->fp8_param_gather) return;
    ep_layer_params p;
    ep_cost_layer_params(cfg, l, &p);
    *dense -= (p.attn + p.dense_mlp + p.shared) / cfg->tensor_model_parallel_size *
              (PARAM_BYTES - 1);
    *expert /= PARAM_BYTES;
}

static void layer_gather_bytes(const ep_rank_builder *rb, int layer, double *dense,
                               double *expert) {
    ep_dp_layer_gather_bytes(rb->cfg, &rb->s->plan.layers[layer], dense, expert);
}

static int gsize(const ep_rank_builder *rb, int g) {
    return g >= 0 ? rb->s->groups[g].size : 1;
}

static int hsdp(const ep_rank_builder *rb) {
    return rb->cfg->num_distributed_optimizer_instances > 1;
}

/* The groups gradients are reduced in first (inner for HSDP) and across replicas (outer). */
static int dense_group(const ep_rank_builder *rb) {
    return hsdp(rb) ? rb->g_dp_in : rb->g_dp;
}
static int expert_group(const ep_rank_builder *rb) {
    return hsdp(rb) ? rb->g_edp_in : rb->g_edp;
}

double ep_dp_embedding_params(const ep_config *cfg) {
    return (double)cfg->vocab_size * cfg->hidden_size / cfg->tensor_model_parallel_size;
}

static double emb_params(const ep_rank_builder *rb) {
    return ep_dp_embedding_params(rb->cfg);
}

/* Emits one DP-stream collective (skipped when the group has one member); returns the op index,
 * -1 when skipped, -2 on error. */
static int dp_op(ep_rank_builder *rb, const char *label, ep_op_kind kind, int group, double bytes,
                 int mb, int layer, int index, ep_phase phase, int dep) {
    if (group < 0 || bytes <= 0) return -1;
    ep_op op = ep_op_blank();
    op.kind = kind;
    op.stream = EP_STREAM_DP;
    op.label = label;
    op.mb = (int16_t)mb;
    op.layer = (int16_t)layer;
    op.index = (int16_t)index;
    op.phase = phase;
    op.group = group;
    op.bytes = bytes;
    int idx = ep_rb_emit(rb, &op);
    if (idx < 0 || ep_rb_dep(rb, idx, dep) != 0) return -2;
    rb->dp_last = idx;
    return idx;
}

#define DP_OP(...)                                                                                 \
    do {                                                                                           \
        if (dp_op(rb, __VA_ARGS__) == -2) return -1;                                               \
    } while (0)

/* --- buckets (DDP / distributed optimizer) -------------------------------------------------------
 */

static int fsdp(const ep_rank_builder *rb) {
    return rb->cfg->use_megatron_fsdp || rb->cfg->use_torch_fsdp2;
}

/* FSDP's sharding inside the (inner) DP group; FSDP2 shards everything (fully_shard). */
static ep_shard_strategy shard_strategy(const ep_rank_builder *rb) {
    return rb->cfg->use_torch_fsdp2 ? EP_SHARD_OPTIM_GRADS_PARAMS
                                    : rb->cfg->data_parallel_sharding_strategy;
}

static void bucket_params(const ep_rank_builder *rb, int b, double *dense, double *expert) {
    *dense = *expert = 0;
    if (b == rb->emb_bucket) {
        *dense = emb_params(rb);
        return;
    }
    for (int l = rb->bucket_first[b]; l < rb->bucket_first[b] + rb->bucket_count[b]; l++) {
        double d, e;
        ep_dp_layer_params(rb->cfg, &rb->s->plan.layers[l], &d, &e);
        *dense += d;
        *expert += e;
        if (l == rb->out_bucket_layer) *dense += emb_params(rb); /* the output layer */
    }
}

/* The same bucket's all-gather bytes (layer_gather_bytes). */
static void bucket_gather_bytes(const ep_rank_builder *rb, int b, double *dense, double *expert) {
    *dense = *expert = 0;
    if (b == rb->emb_bucket) {
        *dense = emb_params(rb) * PARAM_BYTES;
        return;
    }
    for (int l = rb->bucket_first[b]; l < rb->bucket_first[b] + rb->bucket_count[b]; l++) {
        double d, e;
        layer_gather_bytes(rb, l, &d, &e);
        *dense += d;
        *expert += e;
        if (l == rb->out_bucket_layer) *dense += emb_params(rb) * PARAM_BYTES;
    }
}

static int reduce_bucket(ep_rank_builder *rb, int b, int dep) {
    double dense, expert;
    bucket_params(rb, b, &dense, &expert);
    int distopt = rb->cfg->use_distributed_optimizer || hsdp(rb);
    int gd = dense_group(rb), ge = expert_group(rb);
    if (!distopt) {
        DP_OP("ddp.ar_dense", EP_OP_ALL_REDUCE, gd, dense * grad_bytes(rb), -1, -1, b,
              EP_PHASE_NONE, dep);
        DP_OP("ddp.ar_expert", EP_OP_ALL_REDUCE, ge, expert * grad_bytes(rb), -1, -1, b,
              EP_PHASE_NONE, dep);
        return 0;
    }
    DP_OP("distopt.rs_dense", EP_OP_REDUCE_SCATTER, gd, dense * grad_bytes(rb), -1, -1, b,
          EP_PHASE_NONE, dep);
    DP_OP("distopt.rs_expert", EP_OP_REDUCE_SCATTER, ge, expert * grad_bytes(rb), -1, -1, b,
          EP_PHASE_NONE, dep);
    if (hsdp(rb)) { /* the shard is then averaged over the replicas */
        DP_OP("hsdp.ar_dense", EP_OP_ALL_REDUCE, rb->g_dp_out,
              dense * grad_bytes(rb) / gsize(rb, gd), -1, -1, b, EP_PHASE_NONE, dep);
        DP_OP("hsdp.ar_expert", EP_OP_ALL_REDUCE, rb->g_edp_out,
              expert * grad_bytes(rb) / gsize(rb, ge), -1, -1, b, EP_PHASE_NONE, dep);
    }
    return 0;
}

static int gather_bucket(ep_rank_builder *rb, int b, int dep) {
    double dense, expert;
    bucket_gather_bytes(rb, b, &dense, &expert);
    int gd = dense_group(rb), ge = expert_group(rb);
    int a = dp_op(rb, "distopt.ag_dense", EP_OP_ALL_GATHER, gd, dense / gsize(rb, gd), -1, -1, b,
                  EP_PHASE_NONE, dep);
    if (a == -2) return -2;
    int e = dp_op(rb, "distopt.ag_expert", EP_OP_ALL_GATHER, ge, expert / gsize(rb, ge), -1, -1, b,
                  EP_PHASE_NONE, dep);
    if (e == -2) return -2;
    return e >= 0 ? e : a;
}

static int sharded_params(const ep_rank_builder *rb) {
    return rb->cfg->use_distributed_optimizer || hsdp(rb);
}

/* --- setup --------------------------------------------------------------------------------------
 */

int ep_dp_setup(ep_rank_builder *rb) {
    const ep_layer_plan *plan = &rb->s->plan;
    int nl = plan->num_layers + plan->num_mtp;
    rb->dp_last = -1;
    rb->param_ag = malloc((size_t)nl * sizeof(int));
    rb->fsdp_ag_fwd = malloc((size_t)nl * sizeof(int));
    rb->fsdp_ag_bwd = malloc((size_t)nl * sizeof(int));
    rb->fsdp_ag_fwd_mb = malloc((size_t)nl * sizeof(int));
    rb->fsdp_ag_bwd_mb = malloc((size_t)nl * sizeof(int));
    rb->bucket_of = malloc((size_t)nl * sizeof(int));
    /* at most one bucket per layer plus the embedding's */
    rb->bucket_first = malloc((size_t)(nl + 1) * sizeof(int));
    rb->bucket_count = malloc((size_t)(nl + 1) * sizeof(int));
    rb->bucket_done = calloc((size_t)(nl + 1), sizeof(int));
    rb->bucket_dep = malloc((size_t)(nl + 1) * sizeof(int));
    if (!rb->param_ag || !rb->fsdp_ag_fwd || !rb->fsdp_ag_bwd || !rb->fsdp_ag_fwd_mb ||
        !rb->fsdp_ag_bwd_mb || !rb->bucket_of || !rb->bucket_first || !rb->bucket_count ||
        !rb->bucket_done || !rb->bucket_dep) {
        snprintf(rb->err, EP_ERRLEN, "out of memory");
        return -1;
    }
    for (int l = 0; l < nl; l++) {
        rb->param_ag[l] = rb->fsdp_ag_fwd[l] = rb->fsdp_ag_bwd[l] = -1;
        rb->fsdp_ag_fwd_mb[l] = rb->fsdp_ag_bwd_mb[l] = -1;
        rb->bucket_of[l] = -1;
    }
    rb->nbuckets = 0;
    rb->emb_bucket = rb->out_bucket_layer = -1;
    if (rb->stage == 0) { /* the embedding's gradient is ready last: its own bucket */
        rb->emb_bucket = rb->nbuckets;
        rb->bucket_first[rb->nbuckets] = 0;
        rb->bucket_count[rb->nbuckets] = 0;
        rb->bucket_dep[rb->nbuckets++] = -1;
    }
    double cap = rb->cfg->ddp_bucket_size;
    for (int c = 0; c < rb->vpp; c++) {
        int first, count;
        ep_layer_range(plan, rb->pp, rb->vpp, rb->stage, c, &first, &count);
        if (rb->stage == rb->pp - 1 && c == rb->vpp - 1 && count > 0)
            rb->out_bucket_layer = first + count - 1;
        double filled = 0;
        int b = -1;
        for (int l = first + count - 1; l >= first; l--) { /* gradients arrive top layer first */
            double d, e;
            ep_dp_layer_params(rb->cfg, &plan->layers[l], &d, &e);
            if (b < 0 || cap <= 0 || filled >= cap) {
                b = rb->nbuckets++;
                rb->bucket_count[b] = 0;
                rb->bucket_dep[b] = -1;
                filled = 0;
            }
            rb->bucket_first[b] = l;
            rb->bucket_count[b]++;
            rb->bucket_of[l] = b;
            filled += d + e;
        }
    }
    return 0;
}

void ep_dp_free(ep_rank_builder *rb) {
    free(rb->param_ag);
    free(rb->fsdp_ag_fwd);
    free(rb->fsdp_ag_bwd);
    free(rb->fsdp_ag_fwd_mb);
    free(rb->fsdp_ag_bwd_mb);
    free(rb->bucket_of);
    free(rb->bucket_first);
    free(rb->bucket_count);
    free(rb->bucket_done);
    free(rb->bucket_dep);
}

/* The buckets of model chunks [c0, c1) in forward order: the embedding's (chunk 0 holds it), then
 * each chunk's from its lowest layer up, so that with --overlap-param-gather the first forward's
 * parameters come first on the dp stream. */
static int gather_chunks(ep_rank_builder *rb, int c0, int c1, int dep) {
    if (c0 == 0 && c1 > 0 && rb->emb_bucket >= 0 && gather_bucket(rb, rb->emb_bucket, dep) == -2)
        return -1;
    for (int c = c0; c < c1; c++) {
        int first, count;
        ep_layer_range(&rb->s->plan, rb->pp, rb->vpp, rb->stage, c, &first, &count);
        for (int l = first; l < first + count; l++) {
            int b = rb->bucket_of[l];
            if (b < 0 || rb->bucket_first[b] != l) continue;
            int a = gather_bucket(rb, b, dep);
            if (a == -2) return -1;
            for (int m = l; m < l + rb->bucket_count[b]; m++)
                rb->param_ag[m] = a;
        }
    }
    return 0;
}

/* The model chunks whose parameters are gathered at the end of the step, [0, n); the others are
 * gathered at its start, each layer's first forward waiting for its bucket. All of them after the
 * optimizer without --overlap-param-gather; none with it, but with
 * --overlap-param-gather-with-optimizer-step the first, whose optimizer
 * Megatron steps first and starts that chunk's all-gathers right after it, beside the other
 * chunks' step (ChainedOptimizer._step), so the next iteration's first forward finds them done. */
static int chunks_gathered_at_end(const ep_rank_builder *rb) {
    if (!rb->cfg->overlap_param_gather) return rb->vpp;
    return rb->cfg->overlap_param_gather_with_optimizer_step ? 1 : 0;
}

int ep_dp_begin(ep_rank_builder *rb) {
    if (!fsdp(rb) && sharded_params(rb))
        return gather_chunks(rb, chunks_gathered_at_end(rb), rb->vpp, -1);
    return 0;
}

/* --- FSDP units ----------------------------------------------------------------------------------
 */

static int fsdp_params_sharded(const ep_rank_builder *rb) {
    return shard_strategy(rb) == EP_SHARD_OPTIM_GRADS_PARAMS;
}

static int same_chunk(const ep_rank_builder *rb, int layer, int chunk) {
    int first, count;
    ep_layer_range(&rb->s->plan, rb->pp, rb->vpp, rb->stage, chunk, &first, &count);
    return layer >= first && layer < first + count;
}

/* All-gathers the unit's parameters for one pass of one microbatch (once). */
static int fsdp_gather(ep_rank_builder *rb, int layer, int mb, ep_phase phase) {
    int *ag = phase == EP_PHASE_FWD ? rb->fsdp_ag_fwd : rb->fsdp_ag_bwd;
    int *agmb = phase == EP_PHASE_FWD ? rb->fsdp_ag_fwd_mb : rb->fsdp_ag_bwd_mb;
    if (agmb[layer] == mb) return 0;
    double dense, expert;
    layer_gather_bytes(rb, layer, &dense, &expert);
    int gd = dense_group(rb), ge = expert_group(rb);
    if (hsdp(rb) && phase == EP_PHASE_FWD && mb == 0 &&
        rb->cfg->outer_dp_sharding_strategy == EP_OUTER_OPTIM) {
        /* optim: the inner shard itself is sharded over the replicas; gather it once */
        int n = gsize(rb, gd) * gsize(rb, rb->g_dp_out),
            ne = gsize(rb, ge) * gsize(rb, rb->g_edp_out);
        DP_OP("hsdp.ag_dense", EP_OP_ALL_GATHER, rb->g_dp_out, dense / n, mb, layer, -1, phase, -1);
        DP_OP("hsdp.ag_expert", EP_OP_ALL_GATHER, rb->g_edp_out, expert / ne, mb, layer, -1, phase,
              -1);
    }
    int a = dp_op(rb, "fsdp.ag_dense", EP_OP_ALL_GATHER, gd, dense / gsize(rb, gd), mb, layer, -1,
                  phase, -1);
    if (a == -2) return -1;
    int e = dp_op(rb, "fsdp.ag_expert", EP_OP_ALL_GATHER, ge, expert / gsize(rb, ge), mb, layer, -1,
                  phase, -1);
    if (e == -2) return -1;
    ag[layer] = e >= 0 ? e : a;
    agmb[layer] = mb;
    return 0;
}

int ep_dp_before_fwd(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk) {
    if (fsdp(rb) && fsdp_params_sharded(rb)) {
        if (fsdp_gather(rb, layer, mb, EP_PHASE_FWD) != 0) return -1;
        if (same_chunk(rb, layer + 1, chunk) && fsdp_gather(rb, layer + 1, mb, EP_PHASE_FWD) != 0)
            return -1; /* prefetch one unit ahead */
        ep_chain_add(c, rb->fsdp_ag_fwd[layer], EP_STREAM_DP);
    }
    if (rb->param_ag[layer] >= 0) { /* the first forward waits for the overlapped gather */
        ep_chain_add(c, rb->param_ag[layer], EP_STREAM_DP);
        rb->param_ag[layer] = -1;
    }
    return 0;
}

int ep_dp_before_bwd(ep_rank_builder *rb, ep_chain *c, int layer, int mb, int chunk) {
    if (fsdp(rb) && fsdp_params_sharded(rb)) {
        if (fsdp_gather(rb, layer, mb, EP_PHASE_BWD) != 0) return -1;
        if (same_chunk(rb, layer - 1, chunk) && fsdp_gather(rb, layer - 1, mb, EP_PHASE_BWD) != 0)
            return -1;
        ep_chain_add(c, rb->fsdp_ag_bwd[layer], EP_STREAM_DP);
    }
    return 0;
}

static int fsdp_reduce(ep_rank_builder *rb, int layer, int mb, int dep) {
    double dense, expert;
    ep_dp_layer_params(rb->cfg, &rb->s->plan.layers[layer], &dense, &expert);
    if (layer == rb->out_bucket_layer) dense += emb_params(rb);
    int last = mb == rb->nmb - 1;
    int gd = dense_group(rb), ge = expert_group(rb);
    ep_shard_strategy st = shard_strategy(rb);
    if (st >= EP_SHARD_OPTIM_GRADS) { /* gradients sharded: reduce-scatter every microbatch */
        DP_OP("fsdp.rs_dense", EP_OP_REDUCE_SCATTER, gd, dense * grad_bytes(rb), mb, layer, -1,
              EP_PHASE_BWD, dep);
        DP_OP("fsdp.rs_expert", EP_OP_REDUCE_SCATTER, ge, expert * grad_bytes(rb), mb, layer, -1,
              EP_PHASE_BWD, dep);
    } else if (last) { /* replicated gradients accumulate locally, reduced once */
        ep_op_kind k = st == EP_SHARD_NO_SHARD ? EP_OP_ALL_REDUCE : EP_OP_REDUCE_SCATTER;
        DP_OP(k == EP_OP_ALL_REDUCE ? "fsdp.ar_dense" : "fsdp.rs_dense", k, gd,
              dense * grad_bytes(rb), mb, layer, -1, EP_PHASE_BWD, dep);
        DP_OP(k == EP_OP_ALL_REDUCE ? "fsdp.ar_expert" : "fsdp.rs_expert", k, ge,
              expert * grad_bytes(rb), mb, layer, -1, EP_PHASE_BWD, dep);
    }
    if (hsdp(rb) && last) {
        int optim = rb->cfg->outer_dp_sharding_strategy == EP_OUTER_OPTIM;
        ep_op_kind k = optim ? EP_OP_REDUCE_SCATTER : EP_OP_ALL_REDUCE;
        DP_OP(optim ? "hsdp.rs_dense" : "hsdp.ar_dense", k, rb->g_dp_out,
              dense * grad_bytes(rb) / gsize(rb, gd), mb, layer, -1, EP_PHASE_BWD, dep);
        DP_OP(optim ? "hsdp.rs_expert" : "hsdp.ar_expert", k, rb->g_edp_out,
              expert * grad_bytes(rb) / gsize(rb, ge), mb, layer, -1, EP_PHASE_BWD, dep);
    }
    return 0;
}

/* --- hooks ---------------------------------------------------------------------------------------
 */

static int bucket_ready(ep_rank_builder *rb, int b) {
    if (rb->cfg->overlap_grad_reduce) return reduce_bucket(rb, b, rb->bucket_dep[b]);
    return 0; /* reduced at the end, in ep_dp_end */
}

int ep_dp_after_bwd(ep_rank_builder *rb, int layer, int mb, int chunk, int last_op) {
    (void)chunk;
    if (fsdp(rb)) return fsdp_reduce(rb, layer, mb, last_op);
    if (mb != rb->nmb - 1) return 0;
    int b = rb->bucket_of[layer];
    if (b < 0) return 0;
    if (last_op > rb->bucket_dep[b]) rb->bucket_dep[b] = last_op;
    if (++rb->bucket_done[b] == rb->bucket_count[b]) return bucket_ready(rb, b);
    return 0;
}

int ep_dp_after_embedding_bwd(ep_rank_builder *rb, int mb, int last_op) {
    if (rb->emb_bucket < 0) return 0;
    if (fsdp(rb)) {
        int last = mb == rb->nmb - 1;
        int gd = dense_group(rb);
        double dense = emb_params(rb);
        if (shard_strategy(rb) >= EP_SHARD_OPTIM_GRADS)
            DP_OP("fsdp.rs_embedding", EP_OP_REDUCE_SCATTER, gd, dense * grad_bytes(rb), mb, -1, -1,
                  EP_PHASE_BWD, last_op);
        else if (last)
            DP_OP("fsdp.ar_embedding", EP_OP_ALL_REDUCE, gd, dense * grad_bytes(rb), mb, -1, -1,
                  EP_PHASE_BWD, last_op);
        if (hsdp(rb) && last)
            DP_OP("hsdp.ar_embedding", EP_OP_ALL_REDUCE, rb->g_dp_out,
                  dense * grad_bytes(rb) / gsize(rb, gd), mb, -1, -1, EP_PHASE_BWD, last_op);
        return 0;
    }
    if (mb != rb->nmb - 1) return 0;
    rb->bucket_dep[rb->emb_bucket] = last_op;
    return bucket_ready(rb, rb->emb_bucket);
}

/* --- end of the iteration ------------------------------------------------------------------------
 */

/* Dense and expert parameters of this rank's layers (embedding on the first stage, output layer
 * on the last), before any data-parallel sharding; with tensors set, their parameter tensors
 * instead (the output layer's with the final norm). */
static void stage_params(const ep_rank_builder *rb, int tensors, double *dense_out,
                         double *expert_out) {
    double dense = 0, expert = 0;
    const ep_layer_plan *plan = &rb->s->plan;
    for (int c = 0; c < rb->vpp; c++) {
        int first, count;
        ep_layer_range(plan, rb->pp, rb->vpp, rb->stage, c, &first, &count);
        for (int l = first; l < first + count; l++) {
            double d, e;
            (tensors ? layer_tensors : ep_dp_layer_params)(rb->cfg, &plan->layers[l], &d, &e);
            dense += d;
            expert += e;
        }
    }
    if (rb->stage == 0) dense += tensors ? 1 : emb_params(rb);
    if (rb->stage == rb->pp - 1) dense += tensors ? 2 : emb_params(rb);
    *dense_out = dense;
    *expert_out = expert;
}

/* Adam's state is sharded over the data-parallel group: the distributed optimizer, HSDP, or FSDP
 * from `optim` up (`no_shard` keeps a whole copy on every rank, as DDP does). */
static int adam_sharded(const ep_rank_builder *rb) {
    return sharded_params(rb) || (fsdp(rb) && shard_strategy(rb) >= EP_SHARD_OPTIM);
}

/* The ranks one copy of Adam's state is spread over, for the dense (expert = 0) or the expert
 * parameters: the (inner) DP group, times the outer group for an HSDP `optim` step; 1 unsharded. */
static double adam_shards(const ep_rank_builder *rb, int expert) {
    if (!adam_sharded(rb)) return 1;
    int outer = hsdp(rb) && rb->cfg->outer_dp_sharding_strategy == EP_OUTER_OPTIM;
    double g = gsize(rb, expert ? expert_group(rb) : dense_group(rb));
    return g * (outer ? gsize(rb, expert ? rb->g_edp_out : rb->g_dp_out) : 1);
}

/* Parameters the optimizer step updates on this rank: its shard of Adam's state; with tensors
 * set, the parameter tensors its host loops walk there (the distributed optimizer copies those
 * of its shard). */
static double local_params(const ep_rank_builder *rb, int tensors) {
    double dense, expert;
    stage_params(rb, tensors, &dense, &expert);
    return dense / adam_shards(rb, 0) + expert / adam_shards(rb, 1);
}

/* Bytes of model state this rank holds through the step (Megatron-LM's accounting in
 * theoretical_memory_usage.py, with EP/ETP sharding of the experts): bf16 weights (2 B), main
 * gradients (fp32 4 B, bf16 2 B), Adam's master weights, m and v (12 B in fp32). The distributed
 * optimizer and HSDP shard the Adam state over the (inner) DP group, an outer `optim` step also
 * over the outer group; FSDP optim_grads shards the gradients too, optim_grads_params the weights
 * as well. */
static double model_state_bytes(const ep_rank_builder *rb) {
    double dense, expert;
    stage_params(rb, 0, &dense, &expert);
    int strategy = fsdp(rb) ? (int)shard_strategy(rb) : EP_SHARD_NO_SHARD;
    double bytes = 0;
    for (int k = 0; k < 2; k++) {
        double n = k ? expert : dense;
        double g = gsize(rb, k ? expert_group(rb) : dense_group(rb));
        bytes += n * (PARAM_BYTES / (strategy >= EP_SHARD_OPTIM_GRADS_PARAMS ? g : 1) +
                      grad_bytes(rb) / (strategy >= EP_SHARD_OPTIM_GRADS ? g : 1) +
                      adam_state_bytes(rb) / adam_shards(rb, k));
    }
    return bytes;
}

int ep_dp_end(ep_rank_builder *rb) {
    rb->out->model_state_bytes = model_state_bytes(rb);
    int last_comp = rb->last_on_stream[EP_STREAM_COMP];
    if (!fsdp(rb) && !rb->cfg->overlap_grad_reduce) {
        /* in the order they became ready: embedding last, others top layer first */
        for (int b = 0; b < rb->nbuckets; b++)
            if (b != rb->emb_bucket && reduce_bucket(rb, b, last_comp) != 0) return -1;
        if (rb->emb_bucket >= 0 && reduce_bucket(rb, rb->emb_bucket, last_comp) != 0) return -1;
    }
    double params = local_params(rb, 0);
    ep_op op = ep_op_blank();
    op.kind = EP_OP_OPTIMIZER;
    op.label = "optimizer.step";
    op.batch = (int)(local_params(rb, 1) + 0.5); /* what its host loops walk (sim_op_host_s) */
    op.bytes = params * optimizer_bytes_per_param(rb);
    op.flops = params * OPTIMIZER_FLOPS_PER_PARAM;
    int idx = ep_rb_emit(rb, &op);
    if (idx < 0 || ep_rb_dep(rb, idx, rb->dp_last) != 0) return -1;
    /* Megatron waits on the pipeline's send handles before the step ends, so the optimizer
     * follows the rank's last exchange. Without it the optimizer's kernels can take every SM
     * first and hold the last send, and the neighbour's backward that waits for it, behind
     * them (measured on 2 x H200: +0.1 s of a 0.63 s PP 2 step). */
    if (ep_rb_dep(rb, idx, rb->last_on_stream[EP_STREAM_PP]) != 0) return -1;
    /* after the step; with --overlap-param-gather the first chunk's are issued after it by the
     * host and run on the dp stream beside its kernels (that chunk's own share of the step comes
     * first in Megatron: a small part of it with 2 or more chunks) */
    if (!fsdp(rb) && sharded_params(rb))
        return gather_chunks(rb, 0, chunks_gathered_at_end(rb),
                             rb->cfg->overlap_param_gather ? -1 : idx);
    if (fsdp(rb) && !fsdp_params_sharded(rb) && shard_strategy(rb) != EP_SHARD_NO_SHARD) {
        /* optimizer state sharded, parameters replicated: gather the updated shards */
        const ep_layer_plan *plan = &rb->s->plan;
        int gd = dense_group(rb), ge = expert_group(rb);
        for (int c = 0; c < rb->vpp; c++) {
            int first, count;
            ep_layer_range(plan, rb->pp, rb->vpp, rb->stage, c, &first, &count);
            for (int l = first; l < first + count; l++) {
                double d, e;
                layer_gather_bytes(rb, l, &d, &e);
                DP_OP("fsdp.ag_dense", EP_OP_ALL_GATHER, gd, d / gsize(rb, gd), -1, l, -1,
                      EP_PHASE_NONE, idx);
                DP_OP("fsdp.ag_expert", EP_OP_ALL_GATHER, ge, e / gsize(rb, ge), -1, l, -1,
                      EP_PHASE_NONE, idx);
            }
        }
    }
    return 0;
}
