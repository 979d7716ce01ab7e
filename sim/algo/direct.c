/* NCCL direct all-to-all (sim_algo.h): every member sends every other its bytes at once, grouped
 * send/recv - the count exchange (uniform bytes per peer) and the token all-to-alls of the
 * alltoall dispatcher or of deepep/hybridep over NCCL (the traffic matrix; combine: transposed).
 * A measured NCCL all-to-all curve gives each NVLink flow the efficiency of its own size
 * (sim_algo_efficiency). */
#include "sim_algo.h"

double sim_algo_direct(sim_flows *f, const sim_algo_args *a, double *fixed_s) {
    const sim_calib *c = a->c;
    const ep_op *op = a->ops[0];
    *fixed_s = sim_algo_base_s(c, op, a->n);
    int n = a->n;
    double payload = 0;
    if (op->kind == EP_OP_ALLTOALL) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j) {
                    sim_flows_send(f, a->ranks[i], a->ranks[j], a->ops[i]->bytes);
                    payload += a->ops[i]->bytes;
                }
        return payload;
    }
    if (op->traffic < 0 || op->traffic >= a->s->ntraffic) return 0;
    const ep_traffic *t = &a->s->traffic[op->traffic];
    f->reverse = op->transpose != 0;
    for (int i = 0; i < t->n; i++)
        for (int j = 0; j < t->n; j++)
            if (i != j) {
                double b = (double)t->bytes[(long)i * t->n + j];
                sim_flows_send(f, a->ranks[i], a->ranks[j], b);
                payload += b;
            }
    return payload;
}
