/* The table of collective algorithms (sim_algo.h). */
#include "sim_algo.h"

#include <xbt/log.h>

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(epsim_net, root, "epsim: collective decomposition");

static const sim_algo_fn k_algos[EP_ALGO_NUM] = {
    [EP_ALGO_RING] = sim_algo_ring,     [EP_ALGO_DIRECT] = sim_algo_direct,
    [EP_ALGO_NVLINK] = sim_algo_kernel, [EP_ALGO_HIER] = sim_algo_kernel,
    [EP_ALGO_P2P] = sim_algo_p2p,
};

double sim_algo_base_s(const sim_calib *c, const ep_op *op, int members) {
    const sim_coll_curve *curve = sim_calib_nccl_curve(c, op->kind, members);
    switch ((ep_algo)op->algo) {
    case EP_ALGO_RING:
    case EP_ALGO_DIRECT:
        return curve ? curve->base_s : c->nccl_base_s;
    case EP_ALGO_P2P:
        return curve ? curve->base_s : c->p2p_base_s;
    case EP_ALGO_NVLINK:
    case EP_ALGO_HIER:
        return c->ep_nvlink.efficiency.n ? c->ep_nvlink.base_s : c->ep_kernel_base_s;
    default:
        return 0;
    }
}

sim_algo_fn sim_algo_of(int algo) {
    return algo > EP_ALGO_NONE && algo < EP_ALGO_NUM ? k_algos[algo] : NULL;
}

double sim_algo_build(sim_flows *f, const sim_algo_args *a, double *fixed_s) {
    const ep_op *op = a->ops[0];
    int algo = op->algo;
    sim_algo_fn fn = sim_algo_of(algo);
    double payload = 0;
    *fixed_s = 0;
    sim_flows_begin(f, a->c->nccl_nvlink_efficiency, a->c->nccl_ib_efficiency, NULL);
    if (fn) payload = fn(f, a, fixed_s);
    if (a->n < 2) *fixed_s = a->c->op_event_s; /* a group of one moves nothing: no NCCL call */
    sim_flows_finish(f);
    XBT_DEBUG("%s (%s) over %d members: %ld flows on %d hosts, %.0f bytes, fixed %.3g s",
              ep_op_kind_name(op->kind), ep_algo_name(algo), a->n, f->nflows, f->nhosts, payload,
              *fixed_s);
    return payload;
}
