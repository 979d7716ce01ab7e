/* Which communication ops epref runs (exec_plan.h). */
#include "exec_plan.h"

#include <stdio.h>

#include "ep_xfer.h"

int exec_plan_nvl_group(const ep_sched *s, int r) {
    int g = -1;
    for (int i = 0; i < s->ranks[r].nops; i++) {
        const ep_op *op = &s->ranks[r].ops[i];
        if (op->algo != EP_ALGO_NVLINK || op->group < 0) continue;
        if (g >= 0 && op->group != g) return -2;
        g = op->group;
    }
    return g;
}

int exec_plan_check(const ep_sched *s, int nvl_max_ranks, char err[EP_ERRLEN]) {
    for (int r = 0; r < s->world; r++) {
        for (int i = 0; i < s->ranks[r].nops; i++) {
            const ep_op *op = &s->ranks[r].ops[i];
            char name[160];
            if (op->graph) {
                ep_op_name(op, name, sizeof name);
                snprintf(err, EP_ERRLEN,
                         "%s: captured in a CUDA graph (--cuda-graph-impl): epref launches every "
                         "op itself; epsim models the graphs' host cost",
                         name);
                return -1;
            }
            if (op->fp8 && (op->kind == EP_OP_GEMM || op->kind == EP_OP_GROUPED_GEMM)) {
                ep_op_name(op, name, sizeof name);
                snprintf(err, EP_ERRLEN,
                         "%s: an FP8 GEMM (--fp8-format): epref runs BF16 cuBLAS GEMMs only; epsim "
                         "models FP8 from its calibration (docs/schedule.md, \"FP8\")",
                         name);
                return -1;
            }
            if (!ep_op_is_comm(op)) continue;
            ep_op_name(op, name, sizeof name);
            switch (op->algo) {
            case EP_ALGO_RING:
            case EP_ALGO_DIRECT:
            case EP_ALGO_P2P:
                break;
            case EP_ALGO_NVLINK:
                if (op->group >= 0 && s->groups[op->group].size > nvl_max_ranks) {
                    snprintf(err, EP_ERRLEN,
                             "%s: an NVLink group of %d ranks (epref's transport holds at most %d; "
                             "--moe-flex-transport nccl moves it over NCCL)",
                             name, s->groups[op->group].size, nvl_max_ranks);
                    return -1;
                }
                break;
            case EP_ALGO_HIER:
                snprintf(
                    err, EP_ERRLEN,
                    "%s: deepep/hybridep across nodes (RDMA to the peer on the same rail, then "
                    "NVLink) is not implemented in epref; --moe-flex-transport nccl moves the "
                    "same tokens over NCCL, or keep the EP group inside --gpus-per-node %d",
                    name, s->cfg.gpus_per_node);
                return -1;
            default:
                snprintf(err, EP_ERRLEN, "%s: a %s op without an algorithm (schedule bug)", name,
                         ep_op_kind_name(op->kind));
                return -1;
            }
        }
        if (exec_plan_nvl_group(s, r) == -2) {
            snprintf(err, EP_ERRLEN, "rank %d moves NVLink all-to-alls over two groups", r);
            return -1;
        }
    }
    return 0;
}
