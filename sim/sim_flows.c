/* The flows of one transfer and the task(s) they become (sim_flows.h). */
#include "sim_flows.h"

#include <stdlib.h>
#include <string.h>

int sim_flows_init(sim_flows *f, const sim_topo *t) {
    memset(f, 0, sizeof *f);
    f->t = t;
    size_t slots = (size_t)t->nnodes * (size_t)t->gpn;
    f->ends = malloc(sizeof(int) * 2 * (size_t)t->nends); /* a host may be in two pieces */
    f->idx_of = malloc(sizeof(int) * (size_t)t->nends);
    f->touched = calloc((size_t)t->nnodes, 1);
    f->tlist = malloc(sizeof(int) * (size_t)t->nnodes);
    f->sent = malloc(sizeof(double) * slots);
    f->received = malloc(sizeof(double) * slots);
    f->rsrc = malloc(sizeof(int) * 2 * slots);
    f->rdst = malloc(sizeof(int) * 2 * slots);
    f->rbytes = malloc(sizeof(double) * 2 * slots);
    f->piece_host = malloc(sizeof(int) * (size_t)(t->nnodes + t->gpn + 2));
    f->piece_mat = malloc(sizeof(long) * (size_t)(t->nnodes + t->gpn + 2));
    f->zone_head = malloc(sizeof(int) * (size_t)(t->nnodes + t->gpn + 1));
    f->split_hosts = SIM_FLOWS_SPLIT_HOSTS;
    if (!f->ends || !f->idx_of || !f->touched || !f->tlist || !f->sent || !f->received ||
        !f->rsrc || !f->rdst || !f->rbytes || !f->piece_host || !f->piece_mat || !f->zone_head)
        return -1;
    for (int h = 0; h < t->nends; h++)
        f->idx_of[h] = -1;
    return 0;
}

void sim_flows_free(sim_flows *f) {
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
    free(f->piece_host);
    free(f->piece_mat);
    free(f->flow_next);
    free(f->zone_head);
    memset(f, 0, sizeof *f);
}

void sim_flows_begin(sim_flows *f, double eff_nvl, double eff_net, const sim_table *nvl_by_flow) {
    f->nflows = 0;
    f->reverse = 0;
    f->eff_nvl = eff_nvl;
    f->eff_net = eff_net;
    f->nvl_by_flow = nvl_by_flow;
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

void sim_flows_put(sim_flows *f, int a, int b, double bytes) {
    if (bytes <= 0 || a == b) return;
    if (f->reverse)
        append(f, b, a, bytes);
    else
        append(f, a, b, bytes);
}

double sim_flows_nvl_eff(const sim_flows *f, double bytes) {
    return f->nvl_by_flow ? sim_table_eval(f->nvl_by_flow, bytes) : f->eff_nvl;
}

void sim_flows_send(sim_flows *f, int a, int b, double bytes) {
    const sim_platform *p = f->t->p;
    if (p->node[a] == p->node[b]) {
        sim_flows_put(f, a, b, bytes / sim_flows_nvl_eff(f, bytes));
    } else if (p->local[a] == p->local[b]) {
        sim_flows_put(f, a, b, bytes / f->eff_net);
    } else {
        int relay = sim_topo_relay(f->t, a, b);
        if (relay < 0) { /* only on flat platforms (sim_platform_load checks those with NICs) */
            sim_flows_put(f, a, b, bytes / f->eff_net);
        } else {
            sim_flows_put(f, a, relay, bytes / sim_flows_nvl_eff(f, bytes));
            sim_flows_put(f, relay, b, bytes / f->eff_net);
        }
    }
}

/* Flows of star node nd with the totals of f->sent and f->received, at most 2g-1 of them and none
 * from a GPU to itself: the north-west corner rule of the transportation problem, over the
 * receivers taken in turn from each starting point until one gives no GPU-to-itself flow (an
 * even all-to-all gives the ring i -> i+1 at the first). Appends to f->rsrc/rdst/rbytes;
 * returns 0 when no starting point works (the node's flows are then left as they are). */
static int regroup_node(sim_flows *f, int nd) {
    int g = f->t->gpn, src[g], dst[g], ns = 0, nr = 0;
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
                f->rsrc[f->nre] = f->t->node_local[nd * g + ls];
                f->rdst[f->nre] = f->t->node_local[nd * g + ld];
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
    if (f->t->nstars == 0) return;
    const sim_platform *p = f->t->p;
    int g = f->t->gpn, nt = 0;
    for (long i = 0; i < f->nflows; i++) {
        int a = f->fsrc[i], b = f->fdst[i], nd = p->node[a];
        if (p->node[b] != nd || !f->t->star[nd]) continue;
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
    const sim_platform *p = f->t->p;
    long n = f->nflows;
    for (long i = 0; i < n; i++) {
        int a = f->fsrc[i], b = f->fdst[i];
        if (p->node[a] == p->node[b] || p->local[a] == p->local[b]) continue;
        int relay = sim_topo_relay(f->t, a, b); /* every node is complete (sim_platform_load) */
        f->fsrc[i] = relay;
        append(f, a, relay, f->fbytes[i]);
    }
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
        int ends[2] = {sim_topo_endpoint(f->t, a, a, b), sim_topo_endpoint(f->t, b, a, b)};
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
        long row = f->idx_of[sim_topo_endpoint(f->t, a, a, b)],
             col = f->idx_of[sim_topo_endpoint(f->t, b, a, b)];
        m[row * nh + col] += f->fbytes[i];
    }
    for (int h = h0; h < f->nhosts; h++)
        f->idx_of[f->ends[h]] = -1;
    f->npieces++;
    f->piece_host[f->npieces] = f->nhosts;
    f->piece_mat[f->npieces] = m0 + nh * nh;
}

/* A dense matrix over h hosts costs h^2 to build, copy and walk (SimGrid's L07 does all three):
 * over split_hosts hosts, the flows of each zone (a node, a rail) become a task of their own, and
 * the transfer ends with the last (docs/epsim.md, "Collectives"). */
void sim_flows_finish(sim_flows *f) {
    if (f->t->p->nic) split_cross_rail(f);
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
    int nz = f->t->nnodes + f->t->gpn;
    for (int z = 0; z < nz; z++)
        f->zone_head[z] = -1;
    for (long i = f->nflows - 1; i >= 0; i--) { /* lists in flow order */
        int z = sim_topo_zone(f->t, f->fsrc[i], f->fdst[i]);
        f->flow_next[i] = f->zone_head[z];
        f->zone_head[z] = (int)i;
    }
    for (int z = 0; z < nz; z++)
        if (f->zone_head[z] >= 0) {
            piece_hosts(f, f->zone_head[z]);
            piece_matrix(f, f->zone_head[z]);
        }
}

