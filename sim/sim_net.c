/* Collective decomposition into parallel-task byte matrices (sim_net.h). */
#include "sim_net.h"

#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdlib.h>
#include <string.h>
#include <xbt/dynar.h>
#include <xbt/log.h>

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(epsim_net, root, "epsim: collective decomposition");

int sim_flows_init(sim_flows *f, const sim_platform *p, int world) {
    memset(f, 0, sizeof *f);
    f->p = p;
    f->world = world;
    f->gpn = p->gpus_per_node;
    for (int r = 0; r < p->ngpus; r++)
        if (p->node[r] + 1 > f->nnodes) f->nnodes = p->node[r] + 1;
    f->nends = p->nic ? 2 * p->ngpus : p->ngpus;
    f->ends = malloc(sizeof(int) * 2 * (size_t)f->nends); /* a host may be in two pieces */
    f->idx_of = malloc(sizeof(int) * (size_t)f->nends);
    size_t slots = (size_t)f->nnodes * (size_t)f->gpn;
    f->node_local = malloc(sizeof(int) * slots);
    f->star = calloc((size_t)f->nnodes, 1);
    f->touched = calloc((size_t)f->nnodes, 1);
    f->tlist = malloc(sizeof(int) * (size_t)f->nnodes);
    f->sent = malloc(sizeof(double) * slots);
    f->received = malloc(sizeof(double) * slots);
    f->rsrc = malloc(sizeof(int) * 2 * slots);
    f->rdst = malloc(sizeof(int) * 2 * slots);
    f->rbytes = malloc(sizeof(double) * 2 * slots);
    f->star_out = calloc(slots, sizeof *f->star_out);
    f->star_in = calloc(slots, sizeof *f->star_in);
    f->star_lat = calloc((size_t)f->nnodes, sizeof *f->star_lat);
    f->piece_host = malloc(sizeof(int) * (size_t)(f->nnodes + f->gpn + 2));
    f->piece_mat = malloc(sizeof(long) * (size_t)(f->nnodes + f->gpn + 2));
    f->zone_head = malloc(sizeof(int) * (size_t)(f->nnodes + f->gpn + 1));
    f->split_hosts = SIM_NET_SPLIT_HOSTS;
    if (!f->ends || !f->idx_of || !f->node_local || !f->star || !f->touched || !f->tlist ||
        !f->sent || !f->received || !f->rsrc || !f->rdst || !f->rbytes || !f->piece_host ||
        !f->piece_mat || !f->zone_head || !f->star_out || !f->star_in || !f->star_lat)
        return -1;
    for (int h = 0; h < f->nends; h++)
        f->idx_of[h] = -1;
    for (long i = 0; i < (long)f->nnodes * f->gpn; i++)
        f->node_local[i] = -1;
    for (int r = 0; r < p->ngpus; r++)
        f->node_local[p->node[r] * f->gpn + p->local[r]] = r;
    return 0;
}

int sim_flows_find_stars(sim_flows *f) {
    const sim_platform *p = f->p;
    int g = f->gpn;
    sg_link_t *out = calloc((size_t)g, sizeof *out), *in = calloc((size_t)g, sizeof *in);
    xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
    int rc = -1;
    f->nstars = 0;
    if (!out || !in) goto done;
    for (int nd = 0; nd < f->nnodes; nd++) {
        int ok = 1, members = 0;
        double lat = -1;
        for (int la = 0; la < g; la++) {
            out[la] = in[la] = NULL;
            members += f->node_local[nd * g + la] >= 0;
        }
        for (int la = 0; la < g && ok; la++) {
            int a = f->node_local[nd * g + la];
            for (int lb = 0; lb < g && ok && a >= 0; lb++) {
                int b = f->node_local[nd * g + lb];
                if (b < 0 || b == a) continue;
                xbt_dynar_reset(d);
                sg_host_get_route(p->host[a], p->host[b], d);
                double l = sg_host_get_route_latency(p->host[a], p->host[b]);
                if (xbt_dynar_length(d) != 2 || (lat >= 0 && l != lat)) {
                    ok = 0;
                    break;
                }
                lat = l;
                sg_link_t l0 = xbt_dynar_get_as(d, 0, sg_link_t);
                sg_link_t l1 = xbt_dynar_get_as(d, 1, sg_link_t);
                if (!out[la]) out[la] = l0;
                if (!in[lb]) in[lb] = l1;
                /* shared links: a link's load is the sum of its flows (not a fat pipe's max) */
                ok =
                    out[la] == l0 && in[lb] == l1 && sg_link_is_shared(l0) && sg_link_is_shared(l1);
            }
        }
        for (int i = 0; i < g && ok; i++) /* own links: no GPU's link is another's */
            for (int j = 0; j < g && ok; j++)
                ok = !out[i] ||
                     ((i == j || (out[i] != out[j] && in[i] != in[j])) && out[i] != in[j]);
        f->star[nd] = (uint8_t)(ok && members >= 3);
        f->nstars += f->star[nd];
        for (int la = 0; la < g && f->star[nd]; la++) {
            f->star_out[nd * g + la] = out[la];
            f->star_in[nd * g + la] = in[la];
        }
        f->star_lat[nd] = f->star[nd] ? lat : 0;
    }
    /* flat platforms: does a route between nodes on one rail cross GPU links of a star node? */
    f->rail_uses_nvlink = 0;
    for (int nd = 0; nd < f->nnodes && !p->nic && f->nnodes > 1; nd++)
        for (int la = 0; la < g && !f->rail_uses_nvlink; la++) {
            int a = f->node_local[nd * g + la], b = f->node_local[(nd + 1) % f->nnodes * g + la];
            if (a < 0 || b < 0) continue;
            xbt_dynar_reset(d);
            sg_host_get_route(p->host[a], p->host[b], d);
            for (unsigned long i = 0; i < xbt_dynar_length(d); i++) {
                sg_link_t l = xbt_dynar_get_as(d, i, sg_link_t);
                for (int k = 0; k < f->nnodes * g; k++)
                    if (f->star_out[k] == l || f->star_in[k] == l) f->rail_uses_nvlink = 1;
            }
        }
    rc = 0;
done:
    xbt_dynar_free(&d);
    free(out);
    free(in);
    return rc;
}

void sim_flows_free(sim_flows *f) {
    free(f->star);
    free(f->touched);
    free(f->tlist);
    free(f->sent);
    free(f->received);
    free(f->rsrc);
    free(f->rdst);
    free(f->rbytes);
    free(f->fsrc);
    free(f->fdst);
    free(f->fbytes);
    free(f->ends);
    free(f->idx_of);
    free(f->matrix);
    free(f->node_local);
    free(f->star_out);
    free(f->star_in);
    free(f->star_lat);
    free(f->piece_host);
    free(f->piece_mat);
    free(f->flow_next);
    free(f->zone_head);
    memset(f, 0, sizeof *f);
}

static void append(sim_flows *f, int a, int b, double bytes) {
    if (f->nflows == f->flowcap) {
        long cap = f->flowcap ? 2 * f->flowcap : 1024;
        int *s = realloc(f->fsrc, sizeof(int) * (size_t)cap);
        if (s) f->fsrc = s;
        int *d = realloc(f->fdst, sizeof(int) * (size_t)cap);
        if (d) f->fdst = d;
        double *y = realloc(f->fbytes, sizeof(double) * (size_t)cap);
        if (y) f->fbytes = y;
        int *nx = realloc(f->flow_next, sizeof(int) * (size_t)cap);
        if (nx) f->flow_next = nx;
        if (!s || !d || !y || !nx)
            abort(); /* out of memory in the middle of a simulation: nothing sensible to return */
        f->flowcap = cap;
    }
    f->fsrc[f->nflows] = a;
    f->fdst[f->nflows] = b;
    f->fbytes[f->nflows] = bytes;
    f->nflows++;
}

static void put(sim_flows *f, int a, int b, double bytes) {
    if (bytes <= 0 || a == b) return;
    if (f->reverse)
        append(f, b, a, bytes);
    else
        append(f, a, b, bytes);
}

/* Efficiency of an NVLink flow of `bytes`: by the measured curve where there is one. */
static double nvl_eff(const sim_flows *f, double bytes) {
    return f->nvl_by_flow ? sim_table_eval(f->nvl_by_flow, bytes) : f->eff_nvl;
}

/* The GPU of a's node on b's rail: where a transfer from a to b crosses to the NICs. */
static int relay_of(const sim_flows *f, int a, int b) {
    return f->node_local[f->p->node[a] * f->gpn + f->p->local[b]];
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
        int relay = relay_of(f, a, b);
        if (relay < 0) { /* only on flat platforms (sim_platform_load checks those with NICs) */
            put(f, a, b, bytes / f->eff_net);
        } else {
            put(f, a, relay, bytes / nvl_eff(f, bytes));
            put(f, relay, b, bytes / f->eff_net);
        }
    }
}

/* Flows of star node nd with the totals of f->sent and f->received, at most 2g-1 of them and none
 * from a GPU to itself: the north-west corner rule of the transportation problem, over the
 * receivers taken in turn from each starting point until one gives no GPU-to-itself flow (an
 * even all-to-all gives the ring i -> i+1 at the first). Appends to f->rsrc/rdst/rbytes;
 * returns 0 when no starting point works (the node's flows are then left as they are). */
static int regroup_node(sim_flows *f, int nd) {
    int g = f->gpn, src[g], dst[g], ns = 0, nr = 0;
    const double *out = &f->sent[nd * g], *in = &f->received[nd * g];
    double total = 0;
    for (int l = 0; l < g; l++) {
        if (out[l] > 0) src[ns++] = l;
        if (in[l] > 0) dst[nr++] = l;
        total += out[l];
    }
    double tiny = 1e-12 * total; /* rounding left over between the two sums */
    for (int rot = 0; rot < nr; rot++) {
        long start = f->nre;
        int p = 0, q = 0, ok = 1;
        double ro = out[src[0]], ri = in[dst[rot]];
        while (p < ns && q < nr) {
            int ls = src[p], ld = dst[(q + rot) % nr];
            int last = p == ns - 1 && q == nr - 1;
            double amt = last || ro < ri ? ro : ri;
            if (amt > tiny) {
                if (ls == ld) {
                    ok = 0;
                    break;
                }
                f->rsrc[f->nre] = f->node_local[nd * g + ls];
                f->rdst[f->nre] = f->node_local[nd * g + ld];
                f->rbytes[f->nre++] = amt;
            }
            if (last) break;
            if (ro <= ri) {
                ri -= ro;
                ro = ++p < ns ? out[src[p]] : 0;
            } else {
                ro -= ri;
                ri = ++q < nr ? in[dst[(q + rot) % nr]] : 0;
            }
        }
        if (ok) return 1;
        f->nre = start;
    }
    return 0;
}

/* Replaces the flows inside star nodes (sim_flows_find_stars) by regrouped ones. */
static void regroup(sim_flows *f) {
    if (f->nstars == 0) return;
    const sim_platform *p = f->p;
    int g = f->gpn, nt = 0;
    for (long i = 0; i < f->nflows; i++) {
        int a = f->fsrc[i], b = f->fdst[i], nd = p->node[a];
        if (p->node[b] != nd || !f->star[nd]) continue;
        if (!f->touched[nd]) {
            f->touched[nd] = 1;
            f->tlist[nt++] = nd;
            memset(&f->sent[nd * g], 0, sizeof(double) * (size_t)g);
            memset(&f->received[nd * g], 0, sizeof(double) * (size_t)g);
        }
        f->sent[nd * g + p->local[a]] += f->fbytes[i];
        f->received[nd * g + p->local[b]] += f->fbytes[i];
    }
    if (nt == 0) return;
    f->nre = 0;
    for (int t = 0; t < nt; t++)
        if (!regroup_node(f, f->tlist[t])) f->touched[f->tlist[t]] = 2;
    long w = 0;
    for (long i = 0; i < f->nflows; i++) {
        int nd = p->node[f->fsrc[i]];
        if (p->node[f->fdst[i]] == nd && f->touched[nd] == 1) continue;
        f->fsrc[w] = f->fsrc[i];
        f->fdst[w] = f->fdst[i];
        f->fbytes[w++] = f->fbytes[i];
    }
    f->nflows = w;
    for (long i = 0; i < f->nre; i++)
        append(f, f->rsrc[i], f->rdst[i], f->rbytes[i]);
    for (int t = 0; t < nt; t++)
        f->touched[f->tlist[t]] = 0;
}

/* With NIC hosts, rails have no routes to each other: a flow between nodes on different rails
 * (one the schedule's nodes put there, such as deepep's fan-out with --gpus-per-node larger than
 * the platform's; flow() relays its own) goes over NVLink to the relay first, as flow() does. */
static void split_cross_rail(sim_flows *f) {
    const sim_platform *p = f->p;
    long n = f->nflows;
    for (long i = 0; i < n; i++) {
        int a = f->fsrc[i], b = f->fdst[i];
        if (p->node[a] == p->node[b] || p->local[a] == p->local[b]) continue;
        int relay = relay_of(f, a, b); /* every node is complete (sim_platform_load) */
        f->fsrc[i] = relay;
        append(f, a, relay, f->fbytes[i]);
    }
}

/* Task endpoint of GPU r in a flow between GPUs a and b (sim_flows.ends). */
static int endpoint(const sim_flows *f, int r, int a, int b) {
    const sim_platform *p = f->p;
    return p->nic && p->node[a] != p->node[b] ? p->ngpus + r : r;
}

/* Room for need entries, keeping the pieces already there. */
static void grow_matrix(sim_flows *f, long need) {
    if (need <= f->matcap) return;
    long cap = need > 2 * f->matcap ? need : 2 * f->matcap;
    double *m = realloc(f->matrix, sizeof(double) * (size_t)cap);
    if (!m) abort(); /* out of memory in the middle of a simulation, as append() */
    f->matrix = m;
    f->matcap = cap;
}

/* The zone a flow between GPUs a and b runs in: its node when both are in one, else its rail
 * (flows between nodes are on one rail: flow() and split_cross_rail relay the others first). */
static int zone_of(const sim_flows *f, int a, int b) {
    const sim_platform *p = f->p;
    return p->node[a] == p->node[b] ? p->node[a] : f->nnodes + p->local[a];
}

/* A piece's flows: f->flow_next from head, or every flow when head is -1; -1 after the last. */
static long next_flow(const sim_flows *f, long i, int head) {
    long n = head < 0 ? i + 1 : f->flow_next[i];
    return n < f->nflows ? n : -1;
}

static long first_flow(int head) {
    return head < 0 ? 0 : head;
}

/* Starts a piece: appends the hosts of its flows to ends (f->idx_of gives their place in the
 * piece until piece_matrix). Returns how many. */
static int piece_hosts(sim_flows *f, int head) {
    int h0 = f->nhosts;
    for (long i = first_flow(head); i >= 0; i = next_flow(f, i, head)) {
        int a = f->fsrc[i], b = f->fdst[i];
        int ends[2] = {endpoint(f, a, a, b), endpoint(f, b, a, b)};
        for (int e = 0; e < 2; e++)
            if (f->idx_of[ends[e]] < 0) {
                f->idx_of[ends[e]] = f->nhosts - h0;
                f->ends[f->nhosts++] = ends[e];
            }
    }
    return f->nhosts - h0;
}

/* Ends the piece piece_hosts started with the same flows: its matrix after the previous pieces'. */
static void piece_matrix(sim_flows *f, int head) {
    int h0 = f->piece_host[f->npieces];
    long nh = f->nhosts - h0, m0 = f->piece_mat[f->npieces];
    grow_matrix(f, m0 + nh * nh);
    double *m = f->matrix + m0;
    memset(m, 0, sizeof(double) * (size_t)(nh * nh));
    for (long i = first_flow(head); i >= 0; i = next_flow(f, i, head)) {
        int a = f->fsrc[i], b = f->fdst[i];
        long row = f->idx_of[endpoint(f, a, a, b)], col = f->idx_of[endpoint(f, b, a, b)];
        m[row * nh + col] += f->fbytes[i];
    }
    for (int h = h0; h < f->nhosts; h++)
        f->idx_of[f->ends[h]] = -1;
    f->npieces++;
    f->piece_host[f->npieces] = f->nhosts;
    f->piece_mat[f->npieces] = m0 + nh * nh;
}

/* The task's hosts and byte matrix. A dense matrix over h hosts costs h^2 to build, copy and walk
 * (SimGrid's L07 does all three): over split_hosts hosts, the flows of each zone (a node, a rail)
 * become a task of their own, and the transfer ends with the last (docs/epsim.md, "Collectives").
 */
static void finish(sim_flows *f) {
    if (f->p->nic) split_cross_rail(f);
    regroup(f);
    f->nhosts = 0;
    f->npieces = 0;
    f->piece_host[0] = 0;
    f->piece_mat[0] = 0;
    if (f->nflows == 0) return;
    if (piece_hosts(f, -1) <= f->split_hosts) {
        piece_matrix(f, -1);
        return;
    }
    for (int h = 0; h < f->nhosts; h++) /* too many for one task: a piece per zone instead */
        f->idx_of[f->ends[h]] = -1;
    f->nhosts = 0;
    int nz = f->nnodes + f->gpn;
    for (int z = 0; z < nz; z++)
        f->zone_head[z] = -1;
    for (long i = f->nflows - 1; i >= 0; i--) { /* lists in flow order */
        int z = zone_of(f, f->fsrc[i], f->fdst[i]);
        f->flow_next[i] = f->zone_head[z];
        f->zone_head[z] = (int)i;
    }
    for (int z = 0; z < nz; z++)
        if (f->zone_head[z] >= 0) {
            piece_hosts(f, f->zone_head[z]);
            piece_matrix(f, f->zone_head[z]);
        }
}

double sim_flows_latency(const sim_flows *f, int a, int b) {
    const sim_platform *p = f->p;
    if (!p->nic || p->node[a] == p->node[b])
        return sg_host_get_route_latency(p->host[a], p->host[b]);
    double l = 0;
    int relay = relay_of(f, a, b);
    if (relay != a) l = sg_host_get_route_latency(p->host[a], p->host[relay]);
    return l + sg_host_get_route_latency(p->nic[relay], p->nic[b]);
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
    sim_coll i = sim_coll_of(k);
    if (i == SIM_COLL_NUM) return NULL;
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
