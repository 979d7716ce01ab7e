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

/* The deepep / hybridep kernels' RDMA leg: its efficiency by the nodes the group spans
 * (sim_calib.h); Hybrid-EP's combine has its own, and its transfer SMs bound it (DeepEP's published
 * combine runs as fast as its dispatch, and no per-SM figure of it is published). */
static double kernel_rdma(const sim_calib *c, const ep_sched *s, const ep_op *op, double nic_bw) {
    const ep_traffic *t =
        op->traffic >= 0 && op->traffic < s->ntraffic ? &s->traffic[op->traffic] : NULL;
    const ep_config *cfg = &s->cfg;
    int hybridep = cfg->moe_flex_dispatcher_backend == EP_FLEX_HYBRIDEP;
    const sim_table *nodes = hybridep && op->kind == EP_OP_A2A_COMBINE && c->ep_rdma_combine_nodes.n
                                 ? &c->ep_rdma_combine_nodes
                                 : &c->ep_rdma_nodes;
    double rdma =
        nodes->n && t && t->nnodes > 1 ? sim_table_eval(nodes, t->nnodes) : c->ep_rdma_efficiency;
    if (hybridep && t && t->nnodes > 1 && c->ep_rdma_sm_bytes_s.n && nic_bw > 0) {
        double cap =
            cfg->moe_hybridep_num_sms * sim_table_eval(&c->ep_rdma_sm_bytes_s, t->nnodes) / nic_bw;
        if (cap < rdma) rdma = cap;
    }
    return rdma;
}

sim_algo_eff sim_algo_efficiency(const sim_calib *c, const ep_sched *s, const ep_op *op,
                                 int members, double nic_bw) {
    const sim_coll_curve *curve = sim_calib_nccl_curve(c, op->kind, members);
    switch ((ep_algo)op->algo) {
    case EP_ALGO_RING: /* measured: the efficiency at this size */
    case EP_ALGO_P2P:
        return (sim_algo_eff){curve ? sim_table_eval(&curve->efficiency, op->bytes)
                                    : c->nccl_nvlink_efficiency,
                              c->nccl_ib_efficiency, NULL};
    case EP_ALGO_DIRECT: /* measured: each flow at the efficiency of its own size */
        return (sim_algo_eff){c->nccl_nvlink_efficiency, c->nccl_ib_efficiency,
                              curve ? &curve->efficiency : NULL};
    case EP_ALGO_NVLINK:
    case EP_ALGO_HIER: /* the transport's measured curve (nvl_a2a) by flow */
        return (sim_algo_eff){c->ep_nvlink_efficiency, kernel_rdma(c, s, op, nic_bw),
                              c->ep_nvlink.efficiency.n ? &c->ep_nvlink.efficiency : NULL};
    default:
        return (sim_algo_eff){c->nccl_nvlink_efficiency, c->nccl_ib_efficiency, NULL};
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
    sim_algo_eff e = sim_algo_efficiency(a->c, a->s, op, a->n, f->t->nic_bw);
    sim_flows_begin(f, e.nvl, e.net, e.nvl_by_flow);
    if (fn) payload = fn(f, a, fixed_s);
    if (a->n < 2) *fixed_s = a->c->op_event_s; /* a group of one moves nothing: no NCCL call */
    sim_flows_finish(f);
    XBT_DEBUG("%s (%s) over %d members: %ld flows on %d hosts, %.0f bytes, fixed %.3g s",
              ep_op_kind_name(op->kind), ep_algo_name(algo), a->n, f->nflows, f->nhosts, payload,
              *fixed_s);
    return payload;
}
