/* Megatron FSDP's unsharded parameter and gradient buffers on one rank (ep_memory.h;
 * docs/metrics.md, "Peak memory per GPU").
 *
 * As Megatron-LM (d98e8a6) allocates them, megatron/core/distributed/fsdp/src/megatron_fsdp/:
 *  - param_and_grad_buffer.py, _get_parameter_groups: every FSDP unit (a transformer, MoE or Mamba
 *    layer) is one bucket group per kind of parameter, dense first (attention comes first in
 *    named_parameters), then expert; the parameters of no unit (embedding, final norm, output
 *    layer) form buckets of their own.
 *  - AllGatherPipeline.all_gather_params: before a unit's forward (backward) its groups are
 *    gathered into temporary unsharded buckets, and the next groups in forward (backward) order are
 *    prefetched until the prefetched elements reach suggested_AG_prefetch_size; megatron_fsdp.py
 *    (_init_fsdp_param_and_grad_buffer) sets it to half of suggested_communication_unit_size =
 *    max(1e9, 2 x the mean elements of a unit) when --suggested-communication-unit-size is not
 *    given (the only case epsim models). _post_forward and _post_backward_release_module free a
 *    unit's buckets right after it; a recomputed forward keeps them for the backward (lazy
 *    release).
 *    Buckets of no unit are never released (release_bucket's note): gathered once, kept.
 *  - GradReducePipeline: a unit's main_grad is a temporary unsharded bucket in the main-gradient
 *    dtype; after its backward each group is reduce-scattered asynchronously and queued, and the
 *    queue is drained (buckets freed) only while it holds more than
 *    suggested_communication_unit_size elements, before the next group joins; reset() empties it
 *    after each microbatch's backward.
 *    The parameters of no unit share one bucket, ready when its last gradient is: with the
 *    embedding and the output layer in one chunk it is held through the whole backward.
 * Each virtual-pipeline chunk is wrapped on its own (its own pipelines and queue).
 * Not counted: FP8 transpose buffers (MXFP8 --fp8-param-gather), HSDP `optim`'s helper buffers,
 * --fsdp-double-buffer's fixed pool, PyTorch FSDP2 (--use-torch-fsdp2: its own prefetch).
 */
#include <stdlib.h>
#include <string.h>

#include "ep_groups.h"
#include "ep_memory.h"
#include "sched_internal.h"

#define PARAM_BYTES 2.0 /* bf16: the unsharded parameters of no unit */

int ep_mem_fsdp_kind(const ep_config *c) {
    if (!c->use_megatron_fsdp) return EP_MEM_FSDP_NONE;
    if (c->data_parallel_sharding_strategy == EP_SHARD_OPTIM_GRADS_PARAMS)
        return EP_MEM_FSDP_PARAMS;
    if (c->data_parallel_sharding_strategy == EP_SHARD_OPTIM_GRADS) return EP_MEM_FSDP_GRADS;
    return EP_MEM_FSDP_NONE; /* no_shard, optim: the main gradients are model state */
}

/* suggested_communication_unit_size (elements) of a chunk whose units hold `elements`. */
static double unit_size(double elements, int units) {
    double two_mean = units > 0 ? 2 * elements / units : 0;
    return two_mean > 1e9 ? two_mean : 1e9;
}

/* One chunk: g[2u] dense, g[2u + 1] expert group of its unit u. */
static int chunk(const ep_config *c, const ep_layer *layers, int first, int n, int kind, int emb,
                 int out, ep_mem_fsdp *f) {
    double *el = calloc((size_t)(2 * n + 1), sizeof *el);
    double *by = calloc((size_t)(2 * n + 1), sizeof *by);
    double *q = calloc((size_t)(2 * n + 2), sizeof *q);
    int rc = -1;
    if (!el || !by || !q) goto out;
    double total = 0;
    for (int u = 0; u < n; u++) {
        ep_dp_layer_params(c, &layers[first + u], &el[2 * u], &el[2 * u + 1]);
        ep_dp_layer_gather_bytes(c, &layers[first + u], &by[2 * u], &by[2 * u + 1]);
        total += el[2 * u] + el[2 * u + 1];
    }
    double cap = unit_size(total, n), prefetch = cap / 2, gb = ep_dp_grad_bytes(c);
    double other = ep_dp_embedding_params(c); /* the embedding's or the output layer's */
    if (kind == EP_MEM_FSDP_PARAMS) {
        for (int u = 0; u < n; u++) {
            double fwd = by[2 * u] + by[2 * u + 1], bwd = fwd, pre = 0;
            for (int j = 2 * u + 2; j < 2 * n && pre < prefetch; j++)
                pre += el[j], fwd += by[j];
            pre = 0;
            for (int j = 2 * u - 1; j >= 0 && pre < prefetch; j--)
                pre += el[j], bwd += by[j];
            f->param_fwd[first + u] = fwd;
            f->param_bwd[first + u] = bwd;
        }
    }
    /* the reduce-scatter queue in backward order: the output layer's gradient joins first; with
     * the embedding in the same bucket it waits for the embedding's, at the end */
    int head = 0, tail = 0;
    double queued = 0, held = 0;
    if (out && emb)
        held = other * gb;
    else if (out)
        q[tail++] = other, queued += other;
    for (int u = n - 1; u >= 0; u--) {
        f->grad_bwd[first + u] = (queued + el[2 * u] + el[2 * u + 1]) * gb + held;
        for (int k = 0; k < 2; k++) {
            while (queued > cap && head < tail)
                queued -= q[head++];
            q[tail++] = el[2 * u + k], queued += el[2 * u + k];
        }
    }
    rc = 0;
out:
    free(el);
    free(by);
    free(q);
    return rc;
}

int ep_mem_fsdp_init(const ep_sched *s, int rank, ep_mem_fsdp *f) {
    const ep_config *c = &s->cfg;
    int nl = s->plan.num_layers + s->plan.num_mtp;
    memset(f, 0, sizeof *f);
    f->param_fwd = calloc((size_t)nl + 1, sizeof(double));
    f->param_bwd = calloc((size_t)nl + 1, sizeof(double));
    f->grad_bwd = calloc((size_t)nl + 1, sizeof(double));
    if (!f->param_fwd || !f->param_bwd || !f->grad_bwd) {
        ep_mem_fsdp_free(f);
        return -1;
    }
    int kind = ep_mem_fsdp_kind(c);
    if (kind == EP_MEM_FSDP_NONE) return 0;
    ep_coords dense, expert;
    ep_rank_coords(c, rank, &dense, &expert);
    int pp = c->pipeline_model_parallel_size, vpp = c->virtual_pipeline_model_parallel_size;
    int emb = dense.pp == 0, out = dense.pp == pp - 1;
    if (kind == EP_MEM_FSDP_PARAMS) /* as the model state counts them (sched_dp.c) */
        f->persistent = (emb + out) * ep_dp_embedding_params(c) * PARAM_BYTES;
    for (int ch = 0; ch < vpp; ch++) {
        int first, count;
        ep_layer_range(&s->plan, pp, vpp, dense.pp, ch, &first, &count);
        if (chunk(c, s->plan.layers, first, count, kind, emb && ch == 0, out && ch == vpp - 1, f)) {
            ep_mem_fsdp_free(f);
            return -1;
        }
    }
    return 0;
}

void ep_mem_fsdp_free(ep_mem_fsdp *f) {
    free(f->param_fwd);
    free(f->param_bwd);
    free(f->grad_bwd);
    memset(f, 0, sizeof *f);
}
