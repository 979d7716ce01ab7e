/* deepep / hybridep token all-to-alls moved by their own SM kernels (sim_algo.h), NVLINK and HIER:
 * inside a node a store into every peer's buffer; to another node one RDMA copy per destination
 * node (the traffic's node_bytes) to the member of that node on the sender's rail, which forwards
 * each row over NVLink to the members that chose it (combine: the reverse, flows reversed). With
 * the transport's measured curve (nvl_a2a) each NVLink flow gets the efficiency of its size; the
 * RDMA leg's by the nodes the group spans (sim_algo_efficiency). */
#include "sim_algo.h"

/* The flows of sender i (group position) to the members of node nd. */
static void to_node(sim_flows *f, const ep_traffic *t, const int *ranks, int i, int nd) {
    const sim_platform *p = f->t->p;
    int n = t->n, src = ranks[i];
    /* the member of node nd on the sender's rail receives the one RDMA copy */
    int relay = -1, first = -1;
    for (int j = 0; j < n; j++) {
        if (t->node_of[j] != nd) continue;
        if (first < 0) first = j;
        if (p->local[ranks[j]] == p->local[src]) relay = j;
    }
    if (first < 0) return;
    if (relay < 0) relay = first;
    int local_node = p->node[ranks[relay]] == p->node[src];
    if (!local_node) {
        double nb = (double)t->node_bytes[(long)i * t->nnodes + nd];
        if (p->local[ranks[relay]] == p->local[src])
            sim_flows_put(f, src, ranks[relay], nb / f->eff_net);
        else
            sim_flows_send(f, src, ranks[relay], nb);
    }
    for (int j = 0; j < n; j++) {
        if (t->node_of[j] != nd || j == i) continue;
        double b = (double)t->bytes[(long)i * n + j];
        int from = local_node ? src : ranks[relay];
        sim_flows_put(f, from, ranks[j], b / sim_flows_nvl_eff(f, b));
    }
}

double sim_algo_kernel(sim_flows *f, const sim_algo_args *a, double *fixed_s) {
    const sim_calib *c = a->c;
    const ep_op *op = a->ops[0];
    const ep_traffic *t =
        op->traffic >= 0 && op->traffic < a->s->ntraffic ? &a->s->traffic[op->traffic] : NULL;
    *fixed_s = sim_algo_base_s(c, op, a->n);
    if (!t) return 0;
    f->reverse = op->transpose != 0;
    int n = t->n;
    double total = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j) total += (double)t->bytes[(long)i * n + j];
    if (!t->node_bytes) { /* no node-deduplicated matrix: every row to its rank */
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j)
                    sim_flows_send(f, a->ranks[i], a->ranks[j], (double)t->bytes[(long)i * n + j]);
        return total;
    }
    for (int i = 0; i < n; i++)
        for (int nd = 0; nd < t->nnodes; nd++)
            to_node(f, t, a->ranks, i, nd);
    return total;
}
