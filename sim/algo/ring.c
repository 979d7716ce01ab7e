/* NCCL ring all-gather / reduce-scatter / all-reduce over the group order (sim_algo.h): every
 * member sends its neighbour the kind's link bytes (ep_xfer_size_of), as one parallel task; the
 * steps beyond the first add NCCL's per-step cost and a hop latency each.
 *
 * A group over several nodes runs as NCCL runs it there: one ring per channel, each leaving every
 * node at another of its GPUs, so that the channels cross between nodes on different NICs and the
 * bytes split evenly over them. The channels are as many as the fewest members any node has (a
 * DGX's 8 GPUs: 8 rings on 8 rails, as nccl-tests' ring busbw over two nodes is the sum of the
 * NICs'); ring c visits each node's members in group order starting from the c-th. */
#include <stdlib.h>

#include "sim_algo.h"

/* The members of each node in group order: node k's are at[first[k] .. first[k + 1] - 1]
 * (indices into the group; node, at: n entries, first: n + 1); returns the node count. */
static int members_by_node(const sim_platform *p, const int *ranks, int n, int *node, int *at,
                           int *first) {
    int nn = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < nn && node[k] != p->node[ranks[i]])
            k++;
        if (k == nn) node[nn++] = p->node[ranks[i]];
    }
    int w = 0;
    for (int k = 0; k < nn; k++) {
        first[k] = w;
        for (int i = 0; i < n; i++)
            if (p->node[ranks[i]] == node[k]) at[w++] = i;
    }
    first[nn] = w;
    return nn;
}

double sim_algo_ring(sim_flows *f, const sim_algo_args *a, double *fixed_s) {
    const sim_calib *c = a->c;
    const ep_op *op = a->ops[0];
    *fixed_s = sim_algo_base_s(c, op, a->n);
    int n = a->n;
    if (n < 2) return 0;
    ep_xfer_size z = ep_xfer_size_of(op->kind, n, op->bytes);
    *fixed_s += (z.steps - 1) * (c->nccl_step_s + a->hop_latency_s);
    int *node = malloc(sizeof *node * (size_t)(3 * n + 1)), *at = node + n, *first = at + n;
    int nn = node ? members_by_node(f->t->p, a->ranks, n, node, at, first) : -1;
    if (nn < 2) { /* one node (or no memory for the channels): one ring in group order */
        for (int i = 0; i < n; i++)
            sim_flows_send(f, a->ranks[i], a->ranks[(i + 1) % n], z.link);
        free(node);
        return z.link * n;
    }
    int channels = n;
    for (int k = 0; k < nn; k++)
        if (first[k + 1] - first[k] < channels) channels = first[k + 1] - first[k];
    for (int ch = 0; ch < channels; ch++)
        for (int k = 0; k < nn; k++) {
            int g = first[k + 1] - first[k], k1 = (k + 1) % nn, g1 = first[k1 + 1] - first[k1];
            for (int j = 0; j < g; j++) {
                int from = at[first[k] + (j + ch) % g];
                int to = j + 1 < g ? at[first[k] + (j + 1 + ch) % g] : at[first[k1] + ch % g1];
                sim_flows_send(f, a->ranks[from], a->ranks[to], z.link / channels);
            }
        }
    free(node);
    return z.link * n;
}
