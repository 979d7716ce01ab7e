/* NCCL ring all-gather / reduce-scatter / all-reduce over the group order (sim_algo.h): every
 * member sends its neighbour the kind's link bytes (ep_xfer_size_of), as one parallel task; the
 * steps beyond the first add NCCL's per-step cost and a hop latency each. */
#include "sim_algo.h"

double sim_algo_ring(sim_flows *f, const sim_algo_args *a, double *fixed_s) {
    const sim_calib *c = a->c;
    const ep_op *op = a->ops[0];
    const sim_coll_curve *curve = sim_calib_nccl_curve(c, op->kind);
    /* measured: its base, and its efficiency at this size */
    sim_flows_begin(f, curve ? sim_table_eval(&curve->efficiency, op->bytes)
                             : c->nccl_nvlink_efficiency,
                    c->nccl_ib_efficiency, NULL);
    *fixed_s = sim_algo_base_s(c, op);
    int n = a->n;
    if (n < 2) return 0;
    ep_xfer_size z = ep_xfer_size_of(op->kind, n, op->bytes);
    for (int i = 0; i < n; i++)
        sim_flows_send(f, a->ranks[i], a->ranks[(i + 1) % n], z.link);
    *fixed_s += (z.steps - 1) * (c->nccl_step_s + a->hop_latency_s);
    return z.link * n;
}
