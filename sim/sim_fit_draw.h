/* sim_fit_draw: what compute ops draw toward the power cap, as their weights in the power
 * model's duty (sim_power.h), from draw.json of `epref bench calib --parts draw`
 * (ref/bench_calib_draw.c; docs/calibration.md, "What an op draws"). */
#ifndef SIM_FIT_DRAW_H
#define SIM_FIT_DRAW_H

#include <jansson.h>

#include "sim_calib.h"

typedef struct {
    int ops;          /* records weighed, over all launches */
    int launches;     /* launches read (one copy anchor each) */
    double ref_b2b;   /* the reference GEMM back to back against alone, median over launches */
    double spread;    /* median |w(launch a) - w(launch b)| over ops measured in two launches */
    double median[3]; /* median weight of the GEMMs, grouped GEMMs and attention */
} sim_draw_report;

/* Weighs every record of root (the draw.json records, launches one after the other, each
 * beginning with its anchors) on c->power_duty_slowdown and fills c->power_draw_*. Returns 0, 1
 * when c has no duty table or root no anchored record (nothing filled), -1 when out of memory. */
int sim_fit_draw(json_t *root, sim_calib *c, sim_draw_report *rep);

/* The weight of one op from its mixes with the reference GEMM (exposed for the unit tests):
 * cold_us R alone and cold; s1 R back to back against cold; s0[m], rho0[m] R's slowdown and time
 * share in mix m with the copy; x_us, r_us, xr, rr the mix's times per launch and launches of X
 * and R. Returns the weight in [0, 1]. */
#define SIM_DRAW_MIXES 2
double sim_draw_weight(const sim_table *duty, double cold_us, double s1,
                       const double s0[SIM_DRAW_MIXES], const double rho0[SIM_DRAW_MIXES],
                       const double x_us[SIM_DRAW_MIXES], const double r_us[SIM_DRAW_MIXES],
                       const int xr[SIM_DRAW_MIXES], const int rr[SIM_DRAW_MIXES]);

#endif
