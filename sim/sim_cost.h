/* sim_cost: the time one compute op takes alone on a GPU, from its flops and bytes (ep_cost.h) and
 * the calibration (sim_calib.h). The engine scales the two parts when ops share the GPU. */
#ifndef SIM_COST_H
#define SIM_COST_H

#include "ep_sched.h"
#include "sim_calib.h"

typedef struct {
    double t0;     /* fixed kernel time */
    double t_flop; /* flops / (peak x efficiency) */
    double t_mem;  /* bytes / (HBM x efficiency) */
} sim_work;

void sim_op_work(const sim_calib *c, const ep_op *op, double peak_flops, double hbm_bw,
                 sim_work *w);

/* Alone on the GPU: t0 + max(t_flop, t_mem). */
double sim_work_alone(const sim_work *w);

#endif
