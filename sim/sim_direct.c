/* Transfers alone in an NVSwitch node, timed without SimGrid (sim_direct.h). */
#include "sim_direct.h"

#include <simgrid/link.h>
#include <stdlib.h>

/* A flow that may load the GPU links of its nodes: inside a node; between nodes only on a flat
 * platform, across rails (relayed on no node) or where routes on a rail cross GPU links. */
static int loads_gpu_links(const sim_flows *f, int a, int b) {
    const sim_platform *p = f->t->p;
    if (p->node[a] == p->node[b]) return 1;
    return !p->nic && (p->local[a] != p->local[b] || f->t->rail_uses_nvlink);
}

int sim_direct_node(const sim_flows *f) {
    const sim_platform *p = f->t->p;
    if (f->nflows == 0 || f->npieces != 1) return -1;
    int nd = p->node[f->fsrc[0]];
    if (!f->t->star[nd]) return -1;
    for (long i = 0; i < f->nflows; i++)
        if (p->node[f->fsrc[i]] != nd || p->node[f->fdst[i]] != nd) return -1;
    return nd;
}

sim_direct *sim_direct_new(const sim_flows *f, int node) {
    int g = f->t->gpn;
    sim_direct *d = calloc(1, sizeof *d + sizeof(double) * 2 * (size_t)g);
    if (!d) return NULL;
    d->node = node;
    d->lat = f->t->star_lat[node];
    for (long i = 0; i < f->nflows; i++) {
        double b = f->fbytes[i];
        d->load[f->t->p->local[f->fsrc[i]]] += b;
        d->load[g + f->t->p->local[f->fdst[i]]] += b;
        if (b > d->max_flow) d->max_flow = b;
    }
    return d;
}

double sim_direct_rate(const sim_flows *f, const sim_direct *d, double tcp_gamma) {
    int g = f->t->gpn;
    double rate = -1;
    for (int k = 0; k < 2 * g; k++) {
        if (d->load[k] <= 0) continue;
        sg_link_t l =
            k < g ? f->t->star_out[d->node * g + k] : f->t->star_in[d->node * g + k - g];
        double r = sg_link_get_bandwidth(l) / d->load[k];
        if (rate < 0 || r < rate) rate = r;
    }
    double lat_bytes = d->lat * d->max_flow;
    if (lat_bytes > 0 && tcp_gamma / (2.0 * lat_bytes) < rate) rate = tcp_gamma / (2.0 * lat_bytes);
    return rate;
}

void sim_direct_advance(sim_direct *d, double now) {
    if (now <= d->t_moving || now <= d->last) return;
    double from = d->last > d->t_moving ? d->last : d->t_moving;
    d->progress += (now - from) * d->rate;
    if (d->progress > 1) d->progress = 1;
    d->last = now;
}

double sim_direct_end(const sim_direct *d) {
    double from = d->last > d->t_moving ? d->last : d->t_moving;
    return from + (1.0 - d->progress) / d->rate;
}

long sim_direct_touched(const sim_flows *f, int *links) {
    long n = 0;
    for (long i = 0; i < f->nflows; i++) {
        int a = f->fsrc[i], b = f->fdst[i];
        if (!loads_gpu_links(f, a, b)) continue;
        links[n++] = sim_direct_link(a, 0);
        links[n++] = sim_direct_link(b, 1);
        if (f->t->p->node[a] != f->t->p->node[b]) { /* where the route crosses: any of the four */
            links[n++] = sim_direct_link(a, 1);
            links[n++] = sim_direct_link(b, 0);
        }
    }
    return n;
}

int sim_direct_links(const sim_flows *f, const sim_direct *d, int *links) {
    int g = f->t->gpn, n = 0;
    for (int k = 0; k < 2 * g; k++)
        if (d->load[k] > 0)
            links[n++] = sim_direct_link(f->t->node_local[d->node * g + k % g], k >= g);
    return n;
}
