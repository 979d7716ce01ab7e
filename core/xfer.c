/* How a transfer moves: the algorithm of each communication op and what each kind moves per
 * member (ep_xfer.h). */
#include "ep_xfer.h"

#include "ep_disp.h"

#include <math.h>

/* ---- algorithms ---------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int nccl; /* NCCL's own channels (no SMs in the schedule) */
} k_algos[EP_ALGO_NUM] = {
    [EP_ALGO_NONE] = {"none", 0},  [EP_ALGO_RING] = {"ring", 1},
    [EP_ALGO_DIRECT] = {"direct", 1}, [EP_ALGO_NVLINK] = {"nvlink", 0},
    [EP_ALGO_HIER] = {"hier", 0},  [EP_ALGO_P2P] = {"p2p", 1},
};

const char *ep_algo_name(ep_algo a) {
    return a >= 0 && a < EP_ALGO_NUM ? k_algos[a].name : "?";
}

int ep_algo_is_nccl(ep_algo a) {
    return a >= 0 && a < EP_ALGO_NUM && k_algos[a].nccl;
}

/* Every member of g on one node (rank / gpus_per_node; <= 0: one node). */
static int one_node(const ep_config *cfg, const ep_group *g) {
    int gpn = cfg->gpus_per_node;
    if (!g || gpn <= 0) return 1;
    for (int i = 1; i < g->size; i++)
        if (g->ranks[i] / gpn != g->ranks[0] / gpn) return 0;
    return 1;
}

/* SMs the dispatcher's kernels hold (its row's kernel_sms; 0: NCCL moves its tokens). */
static int kernel_sms(const ep_config *cfg) {
    const ep_dispatcher *d = ep_disp_of(cfg);
    return d->kernel_sms ? d->kernel_sms(cfg) : 0;
}

ep_xfer_plan ep_xfer_plan_of(const ep_config *cfg, ep_op_kind kind, const ep_group *g) {
    ep_xfer_plan p = {EP_ALGO_NONE, 0};
    switch (kind) {
    case EP_OP_ALL_GATHER:
    case EP_OP_REDUCE_SCATTER:
    case EP_OP_ALL_REDUCE:
        p.algo = EP_ALGO_RING;
        break;
    case EP_OP_ALLTOALL:
        p.algo = EP_ALGO_DIRECT;
        break;
    case EP_OP_SEND:
    case EP_OP_RECV:
        p.algo = EP_ALGO_P2P;
        break;
    case EP_OP_A2A_DISPATCH:
    case EP_OP_A2A_COMBINE:
        p.sms = cfg->ep_transport == EP_TRANSPORT_KERNEL ? kernel_sms(cfg) : 0;
        if (p.sms > 0)
            p.algo = one_node(cfg, g) ? EP_ALGO_NVLINK : EP_ALGO_HIER;
        else
            p.algo = EP_ALGO_DIRECT;
        break;
    default:
        break;
    }
    return p;
}

void ep_xfer_set(ep_op *op, const ep_config *cfg, const ep_group *g) {
    if (!ep_op_is_comm(op)) return;
    ep_xfer_plan p = ep_xfer_plan_of(cfg, op->kind, g);
    op->algo = (int8_t)p.algo;
    op->sms = (int16_t)p.sms;
}

/* ---- what each kind moves ------------------------------------------------------------------ */

/* Multiples of the op's bytes B for an n-member group. */
typedef enum { X_0, X_1, X_N, X_PEERS, X_SHARE, X_TWICE_SHARE, X_INV_N, X_TRAFFIC } mult;

static double eval(mult m, int n) {
    switch (m) {
    case X_0:
        return 0;
    case X_1:
        return 1;
    case X_N:
        return n;
    case X_PEERS:
        return n - 1;
    case X_SHARE:
        return (double)(n - 1) / n;
    case X_TWICE_SHARE:
        return 2.0 * (n - 1) / n;
    case X_INV_N:
        return 1.0 / n;
    default:
        return -1;
    }
}

/* Ring steps of an n-member group. */
typedef enum { S_NONE, S_PEERS, S_TWICE_PEERS } steps;

/* One row per communication kind: the element size its buffers are counted in (fp32 sums: 4),
 * its send and receive buffers and its link bytes as multiples of B, and its ring steps. */
static const struct {
    int elem;
    mult send, recv, link;
    steps steps;
} k_kinds[EP_OP_NUM_KINDS] = {
    /* B per peer: n B buffers (its own slot unused), n-1 peers over the link */
    [EP_OP_ALLTOALL] = {1, X_N, X_N, X_PEERS, S_NONE},
    /* B = bytes this member sends other members; per peer: the traffic */
    [EP_OP_A2A_DISPATCH] = {1, X_TRAFFIC, X_TRAFFIC, X_1, S_NONE},
    [EP_OP_A2A_COMBINE] = {1, X_TRAFFIC, X_TRAFFIC, X_1, S_NONE},
    /* B = this member's contribution */
    [EP_OP_ALL_GATHER] = {1, X_1, X_N, X_PEERS, S_PEERS},
    /* B = this member's full fp32 input; it keeps a 1/n shard */
    [EP_OP_REDUCE_SCATTER] = {4, X_1, X_INV_N, X_SHARE, S_PEERS},
    /* B = the fp32 buffer */
    [EP_OP_ALL_REDUCE] = {4, X_1, X_1, X_TWICE_SHARE, S_TWICE_PEERS},
    [EP_OP_SEND] = {1, X_1, X_0, X_1, S_NONE},
    [EP_OP_RECV] = {1, X_0, X_1, X_1, S_NONE},
};

ep_xfer_size ep_xfer_size_of(ep_op_kind k, int n, double bytes) {
    ep_xfer_size z = {0, 0, bytes, 0};
    if (k < 0 || k >= EP_OP_NUM_KINDS || k_kinds[k].elem == 0 || n < 1) return z;
    double elem = k_kinds[k].elem;
    /* fp32 buffers hold whole elements: reduce-scatter a whole count per member */
    double unit = k == EP_OP_REDUCE_SCATTER ? elem * n : elem;
    double b = ceil(bytes / unit) * unit;
    z.send = k_kinds[k].send == X_TRAFFIC ? -1 : b * eval(k_kinds[k].send, n);
    z.recv = k_kinds[k].recv == X_TRAFFIC ? -1 : b * eval(k_kinds[k].recv, n);
    z.link = bytes * eval(k_kinds[k].link, n);
    z.steps = k_kinds[k].steps == S_TWICE_PEERS ? 2 * (n - 1) : k_kinds[k].steps == S_PEERS ? n - 1 : 0;
    return z;
}

double ep_xfer_a2a_bytes(const ep_traffic *t, const ep_op *op, int me, int p) {
    return (double)(op->transpose ? t->bytes[(long)p * t->n + me] : t->bytes[(long)me * t->n + p]);
}

double ep_xfer_kernel_payload(const ep_sched *s, int group) {
    /* every token all-to-all of the group reads one of its traffic instances, whole or transposed:
     * the largest off-diagonal entry over them covers both directions */
    double most = 0;
    for (int t = 0; t < s->ntraffic; t++) {
        const ep_traffic *tr = &s->traffic[t];
        if (tr->group != group) continue;
        for (int a = 0; a < tr->n; a++)
            for (int b = 0; b < tr->n; b++)
                if (a != b && (double)tr->bytes[(long)a * tr->n + b] > most)
                    most = (double)tr->bytes[(long)a * tr->n + b];
    }
    return most;
}
