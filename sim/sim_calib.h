/* sim_calib: every number that turns op sizes into time, in one structure (docs/epsim.md,
 * "Calibration"; docs/calibration.md for the fit that fills it from GPU measurements).
 *
 * The defaults are derived from docs/epsim.md, "Calibration". A calibration file (`epsim --calib
 * FILE`, or the one a topology names, written by `epsim calibrate`) replaces any subset of them
 * from a JSON object whose keys are the field names below: numbers, tables as arrays of [x, y]
 * pairs (x ascending), shape tables as {"fwd": [...], "bwd": [...], "bwd_dw": [...]} of [m, n, k,
 * batch, efficiency] (attention: [flops, seq, dqk, dv, efficiency]) rows, and NCCL curves as
 * {"alltoall": {"base_s": s, "efficiency": [[bytes, eff], ...]}, ...} (ep_nvlink: one such curve).
 * Unknown keys are an error, so a typo cannot pass silently; keys starting with '_' are comments.
 */
#ifndef SIM_CALIB_H
#define SIM_CALIB_H

#include <stdio.h>

#include "ep_config.h"
#include "ep_sched.h"
#include "sim_shape.h"

#define SIM_CALIB_MAX_POINTS 32
#define SIM_PHASES           3 /* fwd, bwd, bwd_dw: shape tables are indexed by ep_phase - 1 */

typedef struct {
    int n;
    double x[SIM_CALIB_MAX_POINTS], y[SIM_CALIB_MAX_POINTS];
} sim_table;

/* NCCL operations with a measured curve, keyed as docs/calibration.md keys comm.json records:
 * alltoall bytes per peer, all-gather one member's contribution, reduce-scatter one member's full
 * input, all-reduce the buffer, send the bytes sent. */
typedef enum {
    SIM_COLL_ALLTOALL,
    SIM_COLL_ALL_GATHER,
    SIM_COLL_REDUCE_SCATTER,
    SIM_COLL_ALL_REDUCE,
    SIM_COLL_SEND,
    SIM_COLL_NUM
} sim_coll;

/* The operation whose curve times an op kind (dispatch and combine: alltoall, recv: send),
 * SIM_COLL_NUM for none; and the op kind each operation is measured as. */
sim_coll sim_coll_of(ep_op_kind k);
ep_op_kind sim_coll_kind(sim_coll k);

/* time alone = base_s (+ ring steps) + route latency + link bytes / (bandwidth x efficiency) */
typedef struct {
    double base_s;
    sim_table efficiency; /* by the op's bytes (log-interpolated); empty: the scalar defaults */
} sim_coll_curve;

typedef struct {
    /* host side: an op costs op_overhead_s plus its calls (sim_cost.h, sim_op_host_s) */
    double op_overhead_s;      /* the runtime's bookkeeping per op (event records, NVTX) */
    double launch_s;           /* host time to launch one kernel */
    double gemm_launch_s;      /* ... one cuBLAS GEMM call (grouped GEMMs: one per expert) */
    double attention_launch_s; /* ... one core attention op */
    double nccl_launch_s;      /* host time to launch one NCCL operation (a group of send/recv) */
    double host_sync_s;        /* host wake-up after a stream/event synchronisation */
    double graph_launch_s;     /* host time to launch one CUDA graph (its ops launch none) */
    double expert_call_s;      /* host time per expert of an expert GEMM op when the experts run one
                                  module call each (Megatron's SequentialMLP, --moe-grouped-gemm off) */
    double comm_call_s;        /* host time of a communication op beyond op_overhead_s and its NCCL
                                  launch (Megatron's autograd functions around torch.distributed) */
    /* Megatron's step outside the layers (finalize, optimizer, zeroing), by the parameter tensors
     * of the rank's Adam shard: host time per tensor before the gradient norm's read-back, which
     * can run ahead of the GPU (sim_op_host_s); once per step and per tensor after it, with the
     * GPU drained, before Adam's kernels; per tensor of the copy of the updated parameters issued
     * while they run, the least they then last (the last three: sim_op_work) */
    double optimizer_tensor_s;
    double optimizer_step_s;
    double optimizer_sync_tensor_s;
    double optimizer_copy_tensor_s;
    double optimizer_ddp_factor; /* those per-tensor costs under DDP's optimizer (Megatron's
                                    Float16OptimizerWithFloat16Params) over the distributed one's */
    /* GPU compute */
    double kernel_overhead_s; /* fixed GPU time per kernel (launch gap, tail) */
    double op_gap_s;   /* GPU time from one op's end to the next op's start on a stream (events) */
    double op_event_s; /* GPU time of an op that runs nothing (host sync, a group of one): its
                          start and end events */
    sim_table gemm_efficiency;  /* fraction of peak flop/s by GEMM flops (log-interpolated) */
    double grouped_gemm_factor; /* grouped GEMM efficiency relative to one GEMM of a group's size */
    double gemm_k_tile;         /* rows a weight-gradient GEMM reduces over per block: between two
                                   measured rows (per expert) at most one block apart it takes the upper
                                   one's time (sim_shape_rule.x0_tile); 0: log interpolation there too */
    double attention_efficiency; /* fraction of peak flop/s of fused attention */
    double scan_efficiency;      /* fraction of peak flop/s of Mamba/GDN scans */
    double
        vector_flops_efficiency; /* fraction of peak flop/s of memory-bound kernels' arithmetic */
    sim_table memory_efficiency; /* fraction of HBM bandwidth by bytes moved (log-interpolated) */
    /* measured shapes (sim_shape.h); where a kind's table is empty, the scalars above apply */
    sim_shape_table gemm_shapes[SIM_PHASES], grouped_gemm_shapes[SIM_PHASES],
        attention_shapes[SIM_PHASES];
    /* FP8 GEMMs (ep_op.fp8): efficiency of the FP8 peak, fp8_flops_ratio x the platform's BF16
     * peak; measured shapes (kernels.json records with "dtype": "fp8", written only when
     * measured) where given, else the BF16 efficiency of the shape x fp8_gemm_factor */
    double fp8_flops_ratio;
    double fp8_gemm_factor;
    sim_shape_table fp8_gemm_shapes[SIM_PHASES], fp8_grouped_gemm_shapes[SIM_PHASES];
    /* Megatron's Mamba-2 mixer between its projections (mamba_split_conv1d_scan_combined and the
     * grouped RMSNorm, its conv1d as a memory-bound kernel: the mamba_scan op), by features
     * (tokens, channels, state, B/C groups): efficiency of the op's flops (ep_cost_scan_flops;
     * backward EP_SCAN_BWD_FLOPS x); written only when measured (mamba.json); empty:
     * scan_efficiency */
    sim_shape_table mamba_scan_shapes[SIM_PHASES];
    /* the power cap (sim_power.h): flop time x power_duty_slowdown(duty) by the GPU's recent
     * tensor-core duty (linear in duty; empty: no power model), averaged over power_tau_s */
    sim_table power_duty_slowdown;
    /* Megatron's unfused token permutation (--moe-permute-fusion off, alltoall dispatcher): the
     * GPU time per byte of the op by its bytes, forward (and recompute) and backward, of the
     * permute, the unpermute and the (un)sort of chunks (scripts/megatron_permute.py); empty:
     * the memory-kernel roofline, as for a fused kernel */
    sim_table unfused_permute[2], unfused_unpermute[2], unfused_sort[2];
    /* Megatron's MoE activation with bias_activation_fusion (torch.compile'd functions of
     * megatron/core/fusions: the weighted SwiGLU, the weighted quick-GEGLU, and the latter with
     * its clamp and concatenation before it) and TEGroupedMLP's fc2 bias loop: the GPU time per
     * byte of the expert_act / expert_bias op by its bytes, forward (and recompute) and backward
     * (scripts/megatron_expert_extras.py); empty: the memory-kernel roofline */
    sim_table act_swiglu[2], act_geglu[2], act_geglu_clamp[2], expert_bias[2];
    double power_tau_s;
    /* > 0: the cap trips on a window (sim_power.h): the duty averaged over this, the slowdown held
     * and let go over power_tau_s; 0: one average over power_tau_s both ways */
    double power_window_s;
    double power_attention_weight; /* attention's weight in the duty (GEMMs 1, memory ops 0) */
    /* what each op draws, measured (draw.json; sim_fit_draw.c): its weight in the duty by the
     * features of the shape tables above, in [0.01, 1]; where a kind's table is empty, the
     * class weights above. Written only when measured. */
    sim_shape_table power_draw_gemm[SIM_PHASES], power_draw_grouped_gemm[SIM_PHASES],
        power_draw_attention[SIM_PHASES];
    /* GPU sharing */
    double comm_hbm_fraction;     /* HBM share taken by one running transfer (read + write) */
    double comm_flops_slowdown;   /* compute flop rate divided by this while a transfer runs */
    /* ... while SM-driven (deepep / hybridep) transfers run, by the SMs they hold (the store
     * kernel beside a GEMM, interference.json); empty: comm_flops_slowdown */
    sim_table kernel_flops_slowdown;
    /* ... by the op's shape (interference.json's victim grid, `--parts interference-shapes`):
     * the slowdown of a GEMM, grouped GEMM or attention op beside a moving NCCL all-to-all
     * (share_nccl_*) and beside the store kernel on the SMs closest to 16 (share_kernel_*), by
     * the features of the shape tables above; where a kind's table is empty, the scalars above.
     * Written only when measured. */
    sim_shape_table share_nccl_gemm[SIM_PHASES], share_nccl_grouped_gemm[SIM_PHASES],
        share_nccl_attention[SIM_PHASES], share_kernel_gemm[SIM_PHASES],
        share_kernel_grouped_gemm[SIM_PHASES], share_kernel_attention[SIM_PHASES];
    double ce_flops_slowdown; /* ... while copy-engine transfers run (peer copies beside a GEMM) */
    double comm_wait_slowdown;    /* ... while an NCCL kernel waits for its peers (launched, holding
                                     its blocks, moving nothing) */
    double nccl_compute_slowdown; /* NCCL transfer rate divided by this while compute runs */
    double ep_compute_slowdown;   /* the same for SM-driven (deepep / hybridep) transfers */
    /* compute ops beside compute ops on other streams (corun.json): how much longer an op of one
     * class takes beside a continuous op of the other (compute-bound: flop time >= memory time);
     * 2 each splits the GPU evenly */
    double corun_compute_compute, corun_compute_memory, corun_memory_compute, corun_memory_memory;
    /* communication */
    double nccl_base_s;            /* fixed time of one NCCL collective (launch, handshake) */
    double nccl_step_s;            /* extra time per ring step beyond the first */
    double ep_kernel_base_s;       /* fixed time of one deepep / hybridep dispatch or combine */
    double p2p_base_s;             /* fixed time of one pipeline send/recv */
    double nccl_nvlink_efficiency; /* achieved / nominal bandwidth of NCCL over NVLink */
    double nccl_ib_efficiency;     /* ... over the NIC */
    double
        ep_nvlink_efficiency; /* achieved / nominal of SM-driven NVLink stores (deepep, hybridep) */
    double ep_rdma_efficiency; /* ... of their RDMA transfers */
    sim_table ep_rdma_nodes;   /* ep_rdma_efficiency by the nodes the EP group spans (log-
                                  interpolated, clamped); empty: the scalar above */
    sim_table ep_rdma_combine_nodes; /* hybridep: the same for the combine direction
                                        (a2a_combine ops); empty: ep_rdma_nodes */
    sim_table ep_rdma_sm_bytes_s;    /* hybridep: RDMA bytes/s one transfer SM moves, by nodes:
                                        the leg runs at most --moe-hybridep-num-sms x this
                                        (empty: no SM bound) */
    sim_coll_curve nccl_nvlink[SIM_COLL_NUM]; /* measured NCCL curves over NVLink */
    /* ... over two ranks of a machine of more GPUs, for groups of two (a TP 2 or EP 2 group runs
     * NCCL at its own rate, not at that of a ring over all the GPUs); none where the main curves
     * are two-rank ones */
    sim_coll_curve nccl_nvlink_pair[SIM_COLL_NUM];
    sim_coll_curve ep_nvlink; /* measured deepep/hybridep transport over NVLink, bytes per peer */
    char source[512];         /* "built-in defaults" or the file the values came from */
} sim_calib;

/* The measured NCCL curve that times an op kind over a group of `members` ranks on this
 * calibration (sim_coll_of): the two-rank curve for a group of two where there is one, else the
 * main one; NULL where none was measured (the scalar efficiencies apply). */
const sim_coll_curve *sim_calib_nccl_curve(const sim_calib *c, ep_op_kind k, int members);

/* The documented defaults (docs/epsim.md lists each with its source). */
void sim_calib_default(sim_calib *c);

/* Calls fn(key, source, ctx) for each key whose built-in value comes from a published measurement
 * of its part and which c still holds (no measured file replaced it); returns how many. */
int sim_calib_each_published(const sim_calib *c,
                             void (*fn)(const char *key, const char *source, void *ctx), void *ctx);
void sim_calib_free(sim_calib *c);

/* Overrides fields of c from a JSON file. Returns 0, or -1 with one line in err. */
int sim_calib_load(sim_calib *c, const char *path, char err[EP_ERRLEN]);

/* Piecewise-linear in log10(x), clamped at both ends. */
double sim_table_eval(const sim_table *t, double x);

/* Writes the calibration as a JSON object (the schema sim_calib_load reads). With points == 0
 * the shape tables are written as their point counts only (summaries stay small). */
void sim_calib_write_json(const sim_calib *c, FILE *f, int points);

/* Name of an NCCL curve as comm.json and the calibration file spell it ("alltoall", ...). */
const char *sim_coll_name(sim_coll k);

/* Shape-table features (sim_shape.h) of a GEMM: token rows first - m for fwd and dgrad, k for
 * wgrad (its rows are the reduction) - then the other two dimensions and the expert count. */
void sim_gemm_features(int wgrad, double m, double n, double k, double batch,
                       double x[SIM_SHAPE_DIMS]);

#endif
