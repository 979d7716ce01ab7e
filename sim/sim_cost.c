/* Roofline time of compute ops with calibrated efficiencies (docs/epsim.md, "Compute"). */
#include "sim_cost.h"

void sim_op_work(const sim_calib *c, const ep_op *op, double peak, double hbm, sim_work *w) {
    double eff;
    switch (op->kind) {
    case EP_OP_GEMM:
        eff = sim_table_eval(&c->gemm_efficiency, op->flops);
        break;
    case EP_OP_GROUPED_GEMM:
        /* experts run as one grouped kernel; each expert's GEMM sets the achievable efficiency */
        eff = c->grouped_gemm_factor *
              sim_table_eval(&c->gemm_efficiency, op->flops / (op->batch > 0 ? op->batch : 1));
        break;
    case EP_OP_ATTENTION:
        eff = c->attention_efficiency;
        break;
    case EP_OP_SCAN:
        eff = c->scan_efficiency;
        break;
    default:
        eff = c->vector_flops_efficiency;
        break;
    }
    w->t0 = op->flops > 0 || op->bytes > 0 ? c->kernel_overhead_s : 0;
    w->t_flop = op->flops > 0 ? op->flops / (peak * eff) : 0;
    w->t_mem =
        op->bytes > 0 ? op->bytes / (hbm * sim_table_eval(&c->memory_efficiency, op->bytes)) : 0;
}

double sim_work_alone(const sim_work *w) {
    return w->t0 + (w->t_flop > w->t_mem ? w->t_flop : w->t_mem);
}
