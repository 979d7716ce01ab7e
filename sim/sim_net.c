/* Collective decomposition into parallel-task byte matrices (sim_net.h). */
#include "sim_net.h"

#include <stdlib.h>
#include <string.h>
#include <xbt/log.h>

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(epsim_net, root, "epsim: collective decomposition");

int sim_flows_init(sim_flows *f, const sim_platform *p, int world) {
    memset(f, 0, sizeof *f);
    f->p = p;
    f->world = world;
    f->gpn = p->gpus_per_node;
    for (int r = 0; r < p->ngpus; r++)
        if (p->node[r] + 1 > f->nnodes) f->nnodes = p->node[r] + 1;
    f->rank = malloc(sizeof(int) * (size_t)p->ngpus);
    f->idx_of = malloc(sizeof(int) * (size_t)p->ngpus);
    f->node_local = malloc(sizeof(int) * (size_t)f->nnodes * (size_t)f->gpn);
    if (!f->rank || !f->idx_of || !f->node_local) return -1;
    for (int r = 0; r < p->ngpus; r++)
        f->idx_of[r] = -1;
    for (long i = 0; i < (long)f->nnodes * f->gpn; i++)
        f->node_local[i] = -1;
    for (int r = 0; r < p->ngpus; r++)
        f->node_local[p->node[r] * f->gpn + p->local[r]] = r;
    return 0;
}

void sim_flows_free(sim_flows *f) {
    free(f->fsrc);
    free(f->fdst);
    free(f->fbytes);
    free(f->rank);
    free(f->idx_of);
    free(f->matrix);
    free(f->node_local);
    memset(f, 0, sizeof *f);
}

static void put(sim_flows *f, int a, int b, double bytes) {
    if (bytes <= 0 || a == b) return;
    if (f->reverse) {
        int t = a;
        a = b;
        b = t;
    }
    if (f->nflows == f->flowcap) {
        long cap = f->flowcap ? 2 * f->flowcap : 1024;
        int *s = realloc(f->fsrc, sizeof(int) * (size_t)cap);
        if (s) f->fsrc = s;
        int *d = realloc(f->fdst, sizeof(int) * (size_t)cap);
        if (d) f->fdst = d;
        double *y = realloc(f->fbytes, sizeof(double) * (size_t)cap);
        if (y) f->fbytes = y;
        if (!s || !d || !y)
            abort(); /* out of memory in the middle of a simulation: nothing sensible to return */
        f->flowcap = cap;
    }
    f->fsrc[f->nflows] = a;
    f->fdst[f->nflows] = b;
    f->fbytes[f->nflows] = bytes;
    f->nflows++;
}

/* Efficiency of an NVLink flow of `bytes`: by the measured curve where there is one. */
static double nvl_eff(const sim_flows *f, double bytes) {
    return f->nvl_by_flow ? sim_table_eval(f->nvl_by_flow, bytes) : f->eff_nvl;
}

/* One logical transfer a -> b: NVLink inside a node, the NIC on the same rail, and across rails
 * NVLink to the GPU of a's node on b's rail first (PXN). */
static void flow(sim_flows *f, int a, int b, double bytes) {
    const sim_platform *p = f->p;
    if (p->node[a] == p->node[b]) {
        put(f, a, b, bytes / nvl_eff(f, bytes));
    } else if (p->local[a] == p->local[b]) {
        put(f, a, b, bytes / f->eff_net);
    } else {
        int relay = f->node_local[p->node[a] * f->gpn + p->local[b]];
        if (relay < 0) {
            put(f, a, b, bytes / f->eff_net);
        } else {
            put(f, a, relay, bytes / nvl_eff(f, bytes));
            put(f, relay, b, bytes / f->eff_net);
        }
    }
}

static void finish(sim_flows *f) {
    f->nhosts = 0;
    for (long i = 0; i < f->nflows; i++) {
        int ends[2] = {f->fsrc[i], f->fdst[i]};
        for (int e = 0; e < 2; e++)
            if (f->idx_of[ends[e]] < 0) {
                f->idx_of[ends[e]] = f->nhosts;
                f->rank[f->nhosts++] = ends[e];
            }
    }
    long need = (long)f->nhosts * f->nhosts;
    if (need > f->matcap) {
        free(f->matrix);
        f->matrix = malloc(sizeof(double) * (size_t)need);
        if (!f->matrix) abort();
        f->matcap = need;
    }
    memset(f->matrix, 0, sizeof(double) * (size_t)need);
    for (long i = 0; i < f->nflows; i++)
        f->matrix[(long)f->idx_of[f->fsrc[i]] * f->nhosts + f->idx_of[f->fdst[i]]] += f->fbytes[i];
    for (int h = 0; h < f->nhosts; h++)
        f->idx_of[f->rank[h]] = -1;
}

double sim_net_link_bytes(ep_op_kind k, int n, double bytes) {
    switch (k) {
    case EP_OP_ALL_GATHER:
    case EP_OP_ALLTOALL:
    case EP_OP_A2A_DISPATCH:
    case EP_OP_A2A_COMBINE:
        return (n - 1) * bytes;
    case EP_OP_REDUCE_SCATTER:
        return (double)(n - 1) / n * bytes;
    case EP_OP_ALL_REDUCE:
        return 2.0 * (n - 1) / n * bytes;
    default:
        return bytes;
    }
}

int sim_net_ring_steps(ep_op_kind k, int n) {
    switch (k) {
    case EP_OP_ALL_REDUCE:
        return 2 * (n - 1);
    case EP_OP_ALL_GATHER:
    case EP_OP_REDUCE_SCATTER:
        return n - 1;
    default:
        return 0;
    }
}

/* Token all-to-all of one traffic instance. */
static double build_a2a(sim_flows *f, const ep_sched *s, const ep_traffic *t, const int *ranks,
                        int hierarchical) {
    int n = t->n;
    double total = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j) total += (double)t->bytes[(long)i * n + j];
    if (!hierarchical || !t->node_bytes) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j) flow(f, ranks[i], ranks[j], (double)t->bytes[(long)i * n + j]);
        return total;
    }
    (void)s;
    const sim_platform *p = f->p;
    for (int i = 0; i < n; i++) {
        int src = ranks[i];
        for (int nd = 0; nd < t->nnodes; nd++) {
            /* the member of node nd on the sender's rail receives the one RDMA copy */
            int relay = -1, first = -1;
            for (int j = 0; j < n; j++) {
                if (t->node_of[j] != nd) continue;
                if (first < 0) first = j;
                if (p->local[ranks[j]] == p->local[src]) relay = j;
            }
            if (first < 0) continue;
            if (relay < 0) relay = first;
            int local_node = p->node[ranks[relay]] == p->node[src];
            if (!local_node) {
                double nb = (double)t->node_bytes[(long)i * t->nnodes + nd];
                if (p->local[ranks[relay]] == p->local[src])
                    put(f, src, ranks[relay], nb / f->eff_net);
                else
                    flow(f, src, ranks[relay], nb);
            }
            for (int j = 0; j < n; j++) {
                if (t->node_of[j] != nd || j == i) continue;
                double b = (double)t->bytes[(long)i * n + j];
                int from = local_node ? src : ranks[relay];
                put(f, from, ranks[j], b / nvl_eff(f, b));
            }
        }
    }
    return total;
}

/* The measured NCCL curve of an op kind, or NULL where the calibration has none. */
static const sim_coll_curve *nccl_curve(const sim_calib *c, ep_op_kind k) {
    sim_coll i;
    switch (k) {
    case EP_OP_A2A_DISPATCH:
    case EP_OP_A2A_COMBINE:
    case EP_OP_ALLTOALL:
        i = SIM_COLL_ALLTOALL;
        break;
    case EP_OP_ALL_GATHER:
        i = SIM_COLL_ALL_GATHER;
        break;
    case EP_OP_REDUCE_SCATTER:
        i = SIM_COLL_REDUCE_SCATTER;
        break;
    case EP_OP_ALL_REDUCE:
        i = SIM_COLL_ALL_REDUCE;
        break;
    case EP_OP_SEND:
    case EP_OP_RECV:
        i = SIM_COLL_SEND;
        break;
    default:
        return NULL;
    }
    return c->nccl_nvlink[i].efficiency.n > 0 ? &c->nccl_nvlink[i] : NULL;
}

double sim_net_build(sim_flows *f, const ep_sched *s, const sim_calib *c, const ep_op *const *ops,
                     const int *ranks, int n, double hop_latency_s, double *fixed_s) {
    const ep_op *op = ops[0];
    const sim_coll_curve *curve = nccl_curve(c, op->kind);
    f->nflows = 0;
    f->reverse = 0;
    f->eff_nvl = c->nccl_nvlink_efficiency;
    f->eff_net = c->nccl_ib_efficiency;
    f->nvl_by_flow = NULL;
    *fixed_s = c->nccl_base_s;
    if (curve) { /* measured: its base, and its efficiency at this size */
        *fixed_s = curve->base_s;
        if (op->kind == EP_OP_ALLTOALL || op->kind == EP_OP_A2A_DISPATCH ||
            op->kind == EP_OP_A2A_COMBINE)
            f->nvl_by_flow = &curve->efficiency;
        else
            f->eff_nvl = sim_table_eval(&curve->efficiency, op->bytes);
    }
    double payload = 0;
    switch (op->kind) {
    case EP_OP_A2A_DISPATCH:
    case EP_OP_A2A_COMBINE: {
        ep_backend b = ep_config_backend(&s->cfg);
        int ep_kernel = (b == EP_BACKEND_DEEPEP || b == EP_BACKEND_HYBRIDEP) &&
                        s->cfg.ep_transport == EP_TRANSPORT_KERNEL;
        if (ep_kernel) {
            const sim_coll_curve *ep = c->ep_nvlink.efficiency.n ? &c->ep_nvlink : NULL;
            f->eff_nvl = c->ep_nvlink_efficiency;
            f->eff_net = c->ep_rdma_efficiency;
            f->nvl_by_flow = ep ? &ep->efficiency : NULL;
            *fixed_s = ep ? ep->base_s : c->ep_kernel_base_s;
        }
        if (op->traffic < 0 || op->traffic >= s->ntraffic) break;
        f->reverse = op->transpose != 0;
        payload = build_a2a(f, s, &s->traffic[op->traffic], ranks, ep_kernel);
        break;
    }
    case EP_OP_ALLTOALL:
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j) {
                    flow(f, ranks[i], ranks[j], ops[i]->bytes);
                    payload += ops[i]->bytes;
                }
        break;
    case EP_OP_ALL_GATHER:
    case EP_OP_REDUCE_SCATTER:
    case EP_OP_ALL_REDUCE: {
        if (n < 2) break;
        int steps = sim_net_ring_steps(op->kind, n);
        double per_hop = sim_net_link_bytes(op->kind, n, op->bytes);
        for (int i = 0; i < n; i++)
            flow(f, ranks[i], ranks[(i + 1) % n], per_hop);
        payload = per_hop * n;
        *fixed_s += (steps - 1) * (c->nccl_step_s + hop_latency_s);
        break;
    }
    case EP_OP_SEND:
    case EP_OP_RECV: {
        *fixed_s = curve ? curve->base_s : c->p2p_base_s;
        for (int i = 0; i < n; i++)
            if (ops[i]->kind == EP_OP_SEND) {
                flow(f, ranks[i], ops[i]->peer, ops[i]->bytes);
                payload += ops[i]->bytes;
            }
        break;
    }
    default:
        *fixed_s = 0;
        break;
    }
    if (n < 2) *fixed_s = c->op_event_s; /* a group of one moves nothing: no NCCL call */
    finish(f);
    XBT_DEBUG("%s over %d members: %ld flows on %d hosts, %.0f bytes, fixed %.3g s",
              ep_op_kind_name(op->kind), n, f->nflows, f->nhosts, payload, *fixed_s);
    return payload;
}
