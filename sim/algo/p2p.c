/* NCCL send/recv between the two ranks of a directed pair (sim_algo.h): the sender's bytes to its
 * peer, with the measured send curve's base (and its efficiency at that size: sim_algo_efficiency)
 * where there is one. */
#include "sim_algo.h"

double sim_algo_p2p(sim_flows *f, const sim_algo_args *a, double *fixed_s) {
    const sim_calib *c = a->c;
    const ep_op *op = a->ops[0];
    *fixed_s = sim_algo_base_s(c, op, a->n);
    double payload = 0;
    for (int i = 0; i < a->n; i++)
        if (a->ops[i]->kind == EP_OP_SEND) {
            sim_flows_send(f, a->ranks[i], a->ops[i]->peer, a->ops[i]->bytes);
            payload += a->ops[i]->bytes;
        }
    return payload;
}
