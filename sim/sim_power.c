/* The power cap's clock slowdown (sim_power.h). */
#include "sim_power.h"

#include <math.h>

int sim_power_on(const sim_calib *c) {
    return c->power_duty_slowdown.n > 0 && c->power_tau_s > 0;
}

double sim_power_weight(const sim_calib *c, const ep_op *op, const sim_work *w) {
    if (w->draw >= 0) return w->draw; /* measured for its shape: flop and HBM time included */
    double cls;
    switch (op->kind) {
    case EP_OP_GEMM:
    case EP_OP_GROUPED_GEMM:
        cls = 1.0;
        break;
    case EP_OP_ATTENTION:
        cls = c->power_attention_weight;
        break;
    default:
        return 0.0;
    }
    double busy = w->t_flop > w->t_mem ? w->t_flop : w->t_mem;
    return busy > 0 ? cls * w->t_flop / busy : 0.0;
}

double sim_power_table(const sim_table *t, double d) {
    if (d <= t->x[0]) return t->y[0];
    if (d >= t->x[t->n - 1]) return t->y[t->n - 1];
    int i = 1;
    while (t->x[i] < d)
        i++;
    double f = (d - t->x[i - 1]) / (t->x[i] - t->x[i - 1]);
    return t->y[i - 1] + f * (t->y[i] - t->y[i - 1]);
}

void sim_power_set(sim_power *p, const sim_calib *c, double now, double weight) {
    if (now > p->t) {
        double dt = now - p->t;
        if (c->power_window_s > 0) {
            /* the window's duty follows the weight; the level trips up to the table at that
             * duty at once and lets go toward where this weight would leave it over tau */
            double d = p->weight + (p->duty - p->weight) * exp(-dt / c->power_window_s);
            double floor = sim_power_table(&c->power_duty_slowdown, p->weight);
            double held = p->level > floor ? floor + (p->level - floor) * exp(-dt / c->power_tau_s)
                                           : p->level;
            double now_at = sim_power_table(&c->power_duty_slowdown, d);
            p->level = held > now_at ? held : now_at;
            p->duty = d;
        } else {
            double keep = exp(-dt / c->power_tau_s);
            p->duty = p->weight + (p->duty - p->weight) * keep;
        }
        p->t = now;
    }
    p->weight = weight < 1.0 ? weight : 1.0;
}

double sim_power_slowdown(const sim_calib *c, double duty) {
    double y = sim_power_table(&c->power_duty_slowdown, duty);
    return y > 1.0 ? round(y * 1000.0) / 1000.0 : 1.0;
}

double sim_power_steady_start(const sim_calib *c, double end_duty, double step_s) {
    double keep = exp(-step_s / c->power_tau_s);
    double d = keep < 1.0 ? end_duty / (1.0 - keep) : 1.0;
    return d < 1.0 ? d : 1.0;
}

double sim_power_factor(const sim_calib *c, const sim_power *p) {
    if (c->power_window_s <= 0) return sim_power_slowdown(c, p->duty);
    double y = p->level;
    return y > 1.0 ? round(y * 1000.0) / 1000.0 : 1.0;
}
