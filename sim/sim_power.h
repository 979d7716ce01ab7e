/* sim_power: a GPU at its power limit lowers its SM clock (docs/epsim.md, "Power cap").
 *
 * How far depends on how much of the recent time the tensor cores ran: measured on one GPU with
 * GEMMs and HBM copies interleaved at duty cycles from 1/4 to 1 (scripts/sustained_clock.py,
 * docs/calibration.md "Sustained load"). A GPU keeps an exponential average of its power weight
 * over power_tau_s - 1 while a compute-bound GEMM runs, power_attention_weight for attention (it
 * draws less: alone it stays under the cap), 0 for memory-bound ops, transfers and idle time -
 * and compute ops' flop time runs power_duty_slowdown(duty) longer. */
#ifndef SIM_POWER_H
#define SIM_POWER_H

#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_cost.h"

typedef struct {
    double duty;   /* the average weight at time t */
    double t;      /* when duty was last brought forward */
    double weight; /* the weight of what has run since t */
    double level;  /* with power_window_s: the slowdown held at time t (>= the table at duty) */
} sim_power;

/* Whether the calibration has a power model (a measured duty table). */
int sim_power_on(const sim_calib *c);

/* An op's power weight: what was measured for its shape (sim_work.draw, from the calibration's
 * power_draw_* tables) where there is a table of its kind, else its class's (GEMMs 1, attention
 * power_attention_weight, others 0) times the share of its time that is flop time (a
 * memory-bound GEMM draws little). */
double sim_power_weight(const sim_calib *c, const ep_op *op, const sim_work *w);

/* Brings the average forward to `now` under the weight that ran since p->t, then sets the weight
 * that runs from now (capped at 1). */
void sim_power_set(sim_power *p, const sim_calib *c, double now, double weight);

/* A training step is one of many: its GPUs start it at the duty the step before left them. From
 * a step simulated from a cold start (duty 0), of length step_s, ending at end_duty, the duty a
 * step starts at in the steady state: the average is linear in what ran, so the steady start d
 * ends the step at end_duty + d e^(-step_s / tau) = d (capped at 1). */
double sim_power_steady_start(const sim_calib *c, double end_duty, double step_s);

/* The duty table at duty d, linear between its points, clamped at its ends (not rounded). */
double sim_power_table(const sim_table *t, double d);

/* The flop-time factor at this duty: the table, linear in duty, clamped at its ends, rounded to
 * 1e-3 (so that small drifts of the average do not re-time running ops). */
double sim_power_slowdown(const sim_calib *c, double duty);

/* The flop-time factor of a GPU now: with power_window_s its held level (rounded as above), else
 * the table at its duty. */
double sim_power_factor(const sim_calib *c, const sim_power *p);

#endif
