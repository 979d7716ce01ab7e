/* sim_cost: the time one compute op takes alone on a GPU, from its flops and bytes (ep_cost.h) and
 * the calibration (sim_calib.h): measured shape tables where the calibration has them, the
 * roofline with calibrated efficiencies elsewhere (docs/cost-model.md, "Compute time"). The engine
 * scales the two parts when ops share the GPU. */
#ifndef SIM_COST_H
#define SIM_COST_H

#include "ep_sched.h"
#include "sim_calib.h"

typedef struct {
    double t0;     /* fixed kernel time */
    double t_flop; /* flops / (peak x efficiency) */
    int outside;   /* its efficiency comes from a shape table the op lies outside of */
    double t_mem;  /* bytes / (HBM x efficiency) */
    double draw;   /* its weight in the power cap's duty, measured (power_draw_*); -1: none */
    /* its flop-time slowdown beside a moving NCCL transfer / an SM-driven transfer, measured for
     * its shape (share_nccl_*, share_kernel_*); -1: none (the calibration's scalars apply) */
    double share_nccl, share_kernel;
} sim_work;

typedef struct sim_cost_memo sim_cost_memo;

/* What the cost of an op needs besides the op: the calibration, the attention geometry of the
 * run's config, and a memo of shape-table lookups (a run has few distinct shapes). */
typedef struct {
    const sim_calib *c;
    int attn_seq, attn_dqk, attn_dv;
    int attn_cp;            /* context parallel size: ring attention runs one kernel per CP step */
    int sequential_experts; /* experts one module call each (--moe-grouped-gemm off) */
    int unfused_permute; /* Megatron's PyTorch permutation (alltoall, --moe-permute-fusion off) */
    const sim_table *act; /* [2] Megatron's MoE activation of this model (NULL: not measured) */
    double optimizer_factor; /* the optimizer's per-tensor host costs: DDP's factor without the
                                distributed optimizer (FSDP and HSDP keep the distributed one's) */
    long memo_n, memo_cap;
    sim_cost_memo *memo;
} sim_cost;

void sim_cost_init(sim_cost *x, const sim_calib *c, const ep_config *cfg);
void sim_cost_free(sim_cost *x);

void sim_op_work(sim_cost *x, const ep_op *op, double peak_flops, double hbm_bw, sim_work *w);

/* What moves a transfer's data, for its effect on the compute beside it (docs/epsim.md,
 * "Compute"): NCCL's kernel; an SM-driven kernel (deepep / hybridep, and Transformer Engine's
 * userbuffers reduce-scatter of --tp-comm-overlap); or the copy engines (userbuffers'
 * all-gather, a ring exchange of peer copies). Without --tp-comm-overlap the tp stream holds
 * NCCL's async backward reduce-scatters. */
typedef enum { SIM_XF_NCCL, SIM_XF_KERNEL, SIM_XF_CE, SIM_XF_NUM } sim_xfer_class;
sim_xfer_class sim_xfer_class_of(const ep_config *cfg, const ep_op *op);

/* The factor a compute op's flop time takes while transfers run beside it on its GPU (running[k]
 * of class k), while an NCCL operation launched there waits for its peers (waiting), with
 * SM-driven transfers holding comm_sms SMs: a running transfer slows compute beyond the SMs it
 * holds (memory system, NCCL's own blocks, a GEMM's last wave waiting for the transfer's SMs: by
 * the op's shape where measured, else one factor; an SM-driven transfer as measured by the SMs it
 * holds), and so does a waiting NCCL kernel (its blocks spin; no memory traffic): the largest of
 * the effects, at least 1. */
double sim_share_slowdown(const sim_calib *c, const sim_work *w, const int running[SIM_XF_NUM],
                          int waiting, int comm_sms);
/* The factor a transfer of class k takes while compute runs on its GPU (the copy engines: 1). */
double sim_xfer_slowdown(const sim_calib *c, sim_xfer_class k);

/* Host time to issue op: op_overhead_s plus its calls - one kernel (launch_s), one cuBLAS GEMM
 * per GEMM and per expert of a grouped GEMM (gemm_launch_s), attention_launch_s, one NCCL
 * operation (nccl_launch_s + comm_call_s; none for a group of one, which moves nothing), and
 * expert_call_s per expert where the experts run one module call each; the optimizer step its
 * Python loops over the parameter tensors before the gradient norm's sync (optimizer_tensor_s).
 * An op captured in a CUDA graph costs nothing, the first of its graph graph_launch_s
 * (ep_op.graph). */
double sim_op_host_s(const sim_cost *x, const ep_op *op, int group_size);

/* Alone on the GPU: t0 + max(t_flop, t_mem). */
double sim_work_alone(const sim_work *w);

/* Memory-bound: its memory time alone exceeds its flop time (compute-bound otherwise); the class
 * the corun_* factors of sim_calib.h are measured by. */
static inline int sim_work_memory_bound(const sim_work *w) {
    return w->t_mem > w->t_flop;
}

#endif
