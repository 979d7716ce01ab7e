/* Compute time of ops from measured shapes or the calibrated roofline (sim_cost.h). */
#include "sim_cost.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ep_cost.h"
#include "ep_xfer.h"

struct sim_cost_memo {
    const sim_shape_table *t; /* NULL: empty slot */
    double q[SIM_SHAPE_DIMS], y;
    int outside; /* q lies outside the table (sim_shape.h) */
};

void sim_cost_init(sim_cost *x, const sim_calib *c, const ep_config *cfg) {
    memset(x, 0, sizeof *x);
    x->c = c;
    if (cfg) ep_cost_attention_geometry(cfg, &x->attn_seq, &x->attn_dqk, &x->attn_dv);
    x->attn_cp = cfg && cfg->context_parallel_size > 1 ? cfg->context_parallel_size : 1;
    x->sequential_experts = cfg && !cfg->moe_grouped_gemm;
    x->unfused_permute =
        cfg && cfg->moe_token_dispatcher_type == EP_DISPATCHER_ALLTOALL && !cfg->moe_permute_fusion;
    /* the activation Megatron runs (gated ones measured; a clamp with SwiGLU keeps SwiGLU's) */
    if (cfg && cfg->quick_geglu)
        x->act = cfg->activation_func_clamp_value > 0 ? c->act_geglu_clamp : c->act_geglu;
    else if (cfg && cfg->swiglu)
        x->act = c->act_swiglu;
    x->optimizer_factor = cfg && ep_dp_ddp_optimizer(cfg) ? c->optimizer_ddp_factor : 1.0;
}

/* The measured time per byte of the experts' activation or fc2 bias op as Megatron runs them;
 * NULL where the calibration has none. */
static const sim_table *expert_extra_table(const sim_cost *x, const ep_op *op) {
    if (op->kind != EP_OP_ELEMENTWISE || !op->label || op->bytes <= 0) return NULL;
    int bwd = op->phase == EP_PHASE_BWD || op->phase == EP_PHASE_BWD_DW;
    const sim_table *t = !strcmp(op->label, "expert_act")    ? x->act
                         : !strcmp(op->label, "expert_bias") ? x->c->expert_bias
                                                             : NULL;
    return t && t[bwd].n > 0 ? &t[bwd] : NULL;
}

/* The measured time per byte of an unfused permutation op (its function in Megatron's
 * moe_utils.py: permute, unpermute, or sort_chunks_by_idxs for sort_chunks / unsort_chunks);
 * NULL where the calibration has none. */
static const sim_table *unfused_table(const sim_calib *c, const ep_op *op) {
    int bwd = op->phase == EP_PHASE_BWD || op->phase == EP_PHASE_BWD_DW;
    const sim_table *t = strstr(op->label, "sort_chunks") ? c->unfused_sort
                         : op->kind == EP_OP_UNPERMUTE    ? c->unfused_unpermute
                                                          : c->unfused_permute;
    return t[bwd].n > 0 ? &t[bwd] : NULL;
}

void sim_cost_free(sim_cost *x) {
    free(x->memo);
    x->memo = NULL;
    x->memo_n = x->memo_cap = 0;
}

static uint64_t hash_query(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS]) {
    uint64_t h = (uint64_t)(uintptr_t)t * 0x9E3779B97F4A7C15ull;
    for (int d = 0; d < SIM_SHAPE_DIMS; d++) {
        uint64_t b;
        memcpy(&b, &q[d], sizeof b);
        h = (h ^ b) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

static sim_cost_memo *memo_slot(sim_cost_memo *m, long cap, const sim_shape_table *t,
                                const double q[SIM_SHAPE_DIMS]) {
    long i = (long)(hash_query(t, q) & (uint64_t)(cap - 1));
    while (m[i].t && !(m[i].t == t && memcmp(m[i].q, q, sizeof m[i].q) == 0))
        i = (i + 1) & (cap - 1);
    return &m[i];
}

/* A GEMM below its series' smallest measured row count: that point's efficiency carried along the
 * GPU's efficiency-by-size curve (gemm_efficiency, by each GEMM's flops; features are rows, the
 * two weight dimensions and the expert count), so a large GEMM with fewer rows stays
 * compute-bound and only a small one becomes latency-bound. */
static double gemm_below(double y0, double x0, const double q[SIM_SHAPE_DIMS], void *ctx) {
    const sim_table *curve = ctx;
    double per = 2.0 * q[0] * q[1] * q[2] / q[3]; /* one expert's GEMM at the query */
    double at = sim_table_eval(curve, per * x0 / q[0]);
    return at > 0 ? y0 * sim_table_eval(curve, per) / at : y0 * q[0] / x0;
}

/* How a shape table is read: attention and scans as they are; GEMMs with gemm_below, a grouped
 * GEMM's rows over its experts; a weight gradient's rows are its reduction, run in whole blocks
 * of gemm_k_tile (sim_shape_rule.x0_tile); draw and sharing tables (power_draw_*, share_*) with
 * draw_below, a grouped GEMM's rows over its experts */
enum { SHAPE_PLAIN, SHAPE_GEMM, SHAPE_GEMM_WGRAD, SHAPE_DRAW, SHAPE_DRAW_GROUPED };

/* a draw or sharing table below its smallest point: that point's value (sim_fit_draw.c,
 * sim_fit.c) */
static double draw_below(double y0, double x0, const double q[SIM_SHAPE_DIMS], void *ctx) {
    (void)x0, (void)q, (void)ctx;
    return y0;
}

/* sim_shape_eval_rule through the memo; a failed allocation only costs the memo */
static double shape_eval(const sim_cost *x, const sim_shape_table *t,
                         const double q[SIM_SHAPE_DIMS], int how, int *outside) {
    sim_shape_rule r = {how == SHAPE_PLAIN  ? NULL
                        : how >= SHAPE_DRAW ? draw_below
                                            : gemm_below,
                        (void *)&x->c->gemm_efficiency,
                        how == SHAPE_GEMM || how == SHAPE_GEMM_WGRAD || how == SHAPE_DRAW_GROUPED,
                        how == SHAPE_GEMM_WGRAD ? x->c->gemm_k_tile : 0};
    return sim_shape_eval_rule(t, q, &r, outside);
}

static double shape_eff(sim_cost *x, const sim_shape_table *t, const double q[SIM_SHAPE_DIMS],
                        int how, int *outside) {
    *outside = 0;
    if (t->n == 0) return -1;
    if (2 * (x->memo_n + 1) > x->memo_cap) {
        long cap = x->memo_cap ? 2 * x->memo_cap : 256;
        sim_cost_memo *m = calloc((size_t)cap, sizeof *m);
        if (!m) return shape_eval(x, t, q, how, outside);
        for (long i = 0; i < x->memo_cap; i++)
            if (x->memo[i].t) *memo_slot(m, cap, x->memo[i].t, x->memo[i].q) = x->memo[i];
        free(x->memo);
        x->memo = m;
        x->memo_cap = cap;
    }
    sim_cost_memo *s = memo_slot(x->memo, x->memo_cap, t, q);
    if (!s->t) {
        s->t = t;
        memcpy(s->q, q, sizeof s->q);
        s->y = shape_eval(x, t, q, how, &s->outside);
        x->memo_n++;
    }
    *outside = s->outside;
    return s->y;
}

void sim_op_work(sim_cost *x, const ep_op *op, double peak, double hbm, sim_work *w) {
    const sim_calib *c = x->c;
    int ph = op->phase >= EP_PHASE_FWD && op->phase <= EP_PHASE_BWD_DW ? op->phase - 1 : 0;
    double q[SIM_SHAPE_DIMS], eff, measured = -1;
    int outside = 0, ignore;
    w->draw = w->share_nccl = w->share_kernel = -1;
    switch (op->kind) {
    case EP_OP_GEMM:
    case EP_OP_GROUPED_GEMM: {
        int grouped = op->kind == EP_OP_GROUPED_GEMM;
        const sim_shape_table *t = grouped ? &c->grouped_gemm_shapes[ph] : &c->gemm_shapes[ph];
        int wgrad = op->phase == EP_PHASE_BWD_DW, how = wgrad ? SHAPE_GEMM_WGRAD : SHAPE_GEMM;
        sim_gemm_features(wgrad, op->m, op->n, op->k, op->batch, q);
        measured = shape_eff(x, t, q, how, &outside);
        int per_unit = grouped ? SHAPE_DRAW_GROUPED : SHAPE_DRAW;
        w->draw = shape_eff(x, grouped ? &c->power_draw_grouped_gemm[ph] : &c->power_draw_gemm[ph],
                            q, per_unit, &ignore);
        w->share_nccl =
            shape_eff(x, grouped ? &c->share_nccl_grouped_gemm[ph] : &c->share_nccl_gemm[ph], q,
                      per_unit, &ignore);
        w->share_kernel =
            shape_eff(x, grouped ? &c->share_kernel_grouped_gemm[ph] : &c->share_kernel_gemm[ph], q,
                      per_unit, &ignore);
        /* without a table: experts run as one grouped kernel, each expert's GEMM sets the
         * achievable efficiency */
        double per = grouped ? op->flops / (op->batch > 0 ? op->batch : 1) : op->flops;
        eff = sim_table_eval(&c->gemm_efficiency, per) * (grouped ? c->grouped_gemm_factor : 1);
        if (op->fp8) { /* of the FP8 peak: its own shapes, else the BF16 shape's x the factor */
            const sim_shape_table *t8 =
                grouped ? &c->fp8_grouped_gemm_shapes[ph] : &c->fp8_gemm_shapes[ph];
            int outside8;
            double m8 = shape_eff(x, t8, q, how, &outside8);
            if (m8 > 0) outside = outside8;
            measured = m8 > 0 ? m8 : measured > 0 ? measured * c->fp8_gemm_factor : -1;
            eff *= c->fp8_gemm_factor;
            peak *= c->fp8_flops_ratio;
        }
        break;
    }
    case EP_OP_ATTENTION:
        /* with CP, Transformer Engine's ring attention runs one kernel per CP step, each on
         * the rank's seq / CP queries against one peer's seq / CP keys: the kernel's shape */
        q[0] = op->flops / x->attn_cp, q[1] = x->attn_seq / x->attn_cp;
        q[2] = x->attn_dqk, q[3] = x->attn_dv;
        measured = shape_eff(x, &c->attention_shapes[ph], q, SHAPE_PLAIN, &outside);
        w->draw = shape_eff(x, &c->power_draw_attention[ph], q, SHAPE_DRAW, &ignore);
        w->share_nccl = shape_eff(x, &c->share_nccl_attention[ph], q, SHAPE_DRAW, &ignore);
        w->share_kernel = shape_eff(x, &c->share_kernel_attention[ph], q, SHAPE_DRAW, &ignore);
        eff = c->attention_efficiency;
        break;
    case EP_OP_SCAN:
        /* Mamba-2's mixer as Megatron runs it, where measured (sched_layer.c, ssm()) */
        if (op->m > 0 && op->label && strstr(op->label, "mamba_scan")) {
            q[0] = op->m, q[1] = op->n, q[2] = op->k, q[3] = op->batch;
            measured = shape_eff(x, &c->mamba_scan_shapes[ph], q, SHAPE_PLAIN, &outside);
        }
        eff = c->scan_efficiency;
        break;
    default:
        eff = c->vector_flops_efficiency;
        break;
    }
    /* Megatron's unfused permutation, its MoE activation and fc2 bias loop: PyTorch's kernels of
     * the function, measured whole (their launches included); other memory work: the roofline */
    const sim_table *u = expert_extra_table(x, op);
    if (x->unfused_permute && (op->kind == EP_OP_PERMUTE || op->kind == EP_OP_UNPERMUTE) &&
        op->bytes > 0)
        u = unfused_table(c, op);
    w->t0 = !u && (op->flops > 0 || op->bytes > 0) ? c->kernel_overhead_s : 0;
    w->outside = 0;
    if (u)
        w->t_mem = op->bytes * sim_table_eval(u, op->bytes);
    else
        w->t_mem = op->bytes > 0
                       ? op->bytes / (hbm * sim_table_eval(&c->memory_efficiency, op->bytes))
                       : 0;
    if (measured > 0 && op->flops > 0) {
        /* a measured shape sets the time alone; the HBM part only matters when HBM is shared */
        w->t_flop = op->flops / (peak * measured);
        if (w->t_mem > w->t_flop) w->t_mem = w->t_flop;
        w->outside = outside;
    } else {
        w->t_flop = op->flops > 0 ? op->flops / (peak * eff) : 0;
    }
    /* Megatron's optimizer step reads the gradient norm back (a host sync): what its host does
     * after that, with the GPU drained, comes before Adam's kernels; then it issues the copy of
     * the updated parameters into the model's, a kernel per tensor, while they run, so they end
     * no earlier than that loop (sim_op_host_s has the host time before the sync) */
    if (op->kind == EP_OP_OPTIMIZER) {
        double per = x->optimizer_factor * op->batch;
        double loop = c->optimizer_copy_tensor_s * per;
        if (loop > sim_work_alone(w)) w->t0 += loop - sim_work_alone(w);
        w->t0 += c->optimizer_step_s + c->optimizer_sync_tensor_s * per;
    }
}

double sim_op_host_s(const sim_cost *x, const ep_op *op, int group_size) {
    const sim_calib *c = x->c;
    /* captured in a CUDA graph: the graph's launch, once, and nothing per op */
    if (op->graph) return op->graph == 2 ? c->graph_launch_s : 0;
    /* an op inside another op's module call (ep_op.inner: TE's FP8 quantization inside its GEMM's,
     * a TP regather inside its linear layer's backward): its launch, no op bookkeeping of its own
     * (op_overhead_s was fitted per module-level op) */
    if (op->inner) return ep_op_is_comm(op) ? c->nccl_launch_s : c->launch_s;
    double call;
    if (ep_op_is_comm(op))
        call = group_size > 1 ? c->nccl_launch_s + c->comm_call_s : 0;
    else if (op->kind == EP_OP_GEMM)
        call = c->gemm_launch_s;
    else if (op->kind == EP_OP_GROUPED_GEMM)
        call = (c->gemm_launch_s + (x->sequential_experts ? c->expert_call_s : 0)) *
               (op->batch > 1 ? op->batch : 1);
    else if (op->kind == EP_OP_ATTENTION)
        call = c->attention_launch_s;
    else if (op->kind == EP_OP_OPTIMIZER) /* its loops before the norm's sync (sim_op_work) */
        call = c->launch_s + c->optimizer_tensor_s * x->optimizer_factor * op->batch;
    else
        call = c->launch_s; /* memory kernels; a host sync's device-to-host copy */
    return c->op_overhead_s + call;
}

double sim_work_alone(const sim_work *w) {
    return w->t0 + (w->t_flop > w->t_mem ? w->t_flop : w->t_mem);
}

sim_xfer_class sim_xfer_class_of(const ep_config *cfg, const ep_op *op) {
    if (op->stream == EP_STREAM_TP && cfg->tp_comm_overlap)
        return op->kind == EP_OP_ALL_GATHER ? SIM_XF_CE : SIM_XF_KERNEL;
    return ep_algo_is_nccl(op->algo) ? SIM_XF_NCCL : SIM_XF_KERNEL;
}

double sim_share_slowdown(const sim_calib *c, const sim_work *w, const int running[SIM_XF_NUM],
                          int waiting, int comm_sms) {
    double slow = 1.0;
    if (running[SIM_XF_NCCL] > 0) slow = w->share_nccl > 0 ? w->share_nccl : c->comm_flops_slowdown;
    if (running[SIM_XF_CE] > 0 && c->ce_flops_slowdown > slow) slow = c->ce_flops_slowdown;
    if (running[SIM_XF_KERNEL] > 0) {
        double k = w->share_kernel > 0 ? w->share_kernel
                   : c->kernel_flops_slowdown.n
                       ? sim_table_eval(&c->kernel_flops_slowdown, comm_sms)
                       : c->comm_flops_slowdown;
        if (k > slow) slow = k;
    }
    if (waiting > 0 && c->comm_wait_slowdown > slow) slow = c->comm_wait_slowdown;
    return slow;
}

double sim_xfer_slowdown(const sim_calib *c, sim_xfer_class k) {
    return k == SIM_XF_NCCL     ? c->nccl_compute_slowdown
           : k == SIM_XF_KERNEL ? c->ep_compute_slowdown
                                : 1.0;
}
