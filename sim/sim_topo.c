/* What the platform connects, as transfers need it (sim_topo.h). */
#include "sim_topo.h"

#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdlib.h>
#include <string.h>
#include <xbt/dynar.h>

int sim_topo_init(sim_topo *t, const sim_platform *p, int world) {
    memset(t, 0, sizeof *t);
    t->p = p;
    t->world = world;
    t->gpn = p->gpus_per_node;
    for (int r = 0; r < p->ngpus; r++)
        if (p->node[r] + 1 > t->nnodes) t->nnodes = p->node[r] + 1;
    t->nends = p->nic ? 2 * p->ngpus : p->ngpus;
    size_t slots = (size_t)t->nnodes * (size_t)t->gpn;
    t->node_local = malloc(sizeof(int) * slots);
    t->star = calloc((size_t)t->nnodes, 1);
    if (!t->node_local || !t->star) return -1;
    for (size_t i = 0; i < slots; i++)
        t->node_local[i] = -1;
    for (int r = 0; r < p->ngpus; r++)
        t->node_local[p->node[r] * t->gpn + p->local[r]] = r;
    return 0;
}

void sim_topo_free(sim_topo *t) {
    free(t->node_local);
    free(t->star);
    memset(t, 0, sizeof *t);
}

void sim_topo_find_nic_rate(sim_topo *t) {
    const sim_platform *p = t->p;
    /* GPU 0's NIC to the NIC on its rail in another node */
    for (int r = 1; p->nic && r < p->ngpus && t->nic_bw == 0; r++)
        if (p->node[r] != p->node[0] && p->local[r] == p->local[0])
            t->nic_bw = sg_host_get_route_bandwidth(p->nic[0], p->nic[r]);
}

int sim_topo_find_stars(sim_topo *t) {
    const sim_platform *p = t->p;
    int g = t->gpn;
    sg_link_t *out = calloc((size_t)g, sizeof *out), *in = calloc((size_t)g, sizeof *in);
    xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
    int rc = -1;
    t->nstars = 0;
    if (!out || !in) goto done;
    for (int nd = 0; nd < t->nnodes; nd++) {
        int ok = 1, members = 0;
        double lat = -1;
        for (int la = 0; la < g; la++) {
            out[la] = in[la] = NULL;
            members += t->node_local[nd * g + la] >= 0;
        }
        for (int la = 0; la < g && ok; la++) {
            int a = t->node_local[nd * g + la];
            for (int lb = 0; lb < g && ok && a >= 0; lb++) {
                int b = t->node_local[nd * g + lb];
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
        t->star[nd] = (uint8_t)(ok && members >= 3);
        t->nstars += t->star[nd];
    }
    rc = 0;
done:
    xbt_dynar_free(&d);
    free(out);
    free(in);
    return rc;
}

double sim_topo_latency(const sim_topo *t, int a, int b) {
    const sim_platform *p = t->p;
    if (!p->nic || p->node[a] == p->node[b])
        return sg_host_get_route_latency(p->host[a], p->host[b]);
    double l = 0;
    int relay = sim_topo_relay(t, a, b);
    if (relay != a) l = sg_host_get_route_latency(p->host[a], p->host[relay]);
    return l + sg_host_get_route_latency(p->nic[relay], p->nic[b]);
}
