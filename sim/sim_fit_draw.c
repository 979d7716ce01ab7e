/* sim_fit_draw: draw.json as weights of the power model's duty (sim_fit_draw.h).
 *
 * In a mix, R (the cap table's weight-1 GEMM) takes a share rho of the time and op X the rest, so
 * the duty is d = rho + (1 - rho) w_X. R's slowdown there, against R alone and cold, reads d off
 * the duty table, pinned to this launch's own ends: R with the copy (w = 0, duty rho0) gives the
 * table's value at rho0, R back to back the table's value at 1; between them the table's shape.
 * The mix of rho = 1/2 resolves light ops (its duty 0.5..1 covers the table's rise); at the top of
 * the table, where it flattens (u >= DRAW_TOP_U of the way from the copy's slowdown to R's), the
 * mix of rho = 1/10 takes over, at least as heavy as the first mix says at that point. */
#include "sim_fit_draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_stats.h"
#include "sim_cost.h"
#include "sim_json.h"
#include "sim_power.h"

#define DRAW_TOP_U 0.9
#define DRAW_MIN_W 0.01 /* shape tables hold positive values: 0.01 stands for none */

/* the smallest duty >= lo at which the table reaches y */
static double duty_for(const sim_table *t, double lo, double y) {
    double prev_d = lo, prev_y = sim_power_table(t, lo);
    if (y <= prev_y) return lo;
    for (int i = 0; i < t->n; i++) {
        if (t->x[i] <= lo) continue;
        if (y <= t->y[i] && t->y[i] > prev_y)
            return prev_d + (y - prev_y) / (t->y[i] - prev_y) * (t->x[i] - prev_d);
        prev_d = t->x[i], prev_y = t->y[i];
    }
    return 1.0;
}

/* X's weight in mix m at the fraction u of the way from the copy's slowdown to R's */
static double weight_at(const sim_table *t, double u, double rho0, double tx, double tr) {
    if (u <= 0) return 0; /* as light as the copy, or lighter */
    double lo = sim_power_table(t, rho0), hi = sim_power_table(t, 1.0);
    double d = u >= 1 ? 1.0 : duty_for(t, rho0, lo + u * (hi - lo));
    return (d * (tx + tr) - tr) / tx;
}

double sim_draw_weight(const sim_table *duty, double cold_us, double s1,
                       const double s0[SIM_DRAW_MIXES], const double rho0[SIM_DRAW_MIXES],
                       const double x_us[SIM_DRAW_MIXES], const double r_us[SIM_DRAW_MIXES],
                       const int xr[SIM_DRAW_MIXES], const int rr[SIM_DRAW_MIXES]) {
    double w[SIM_DRAW_MIXES], u[SIM_DRAW_MIXES], top = 0;
    for (int m = 0; m < SIM_DRAW_MIXES; m++) {
        double tx = xr[m] * x_us[m], tr = rr[m] * r_us[m];
        u[m] = (r_us[m] / cold_us - s0[m]) / (s1 - s0[m]);
        w[m] = weight_at(duty, u[m], rho0[m], tx, tr);
        if (m == 0) top = weight_at(duty, DRAW_TOP_U, rho0[m], tx, tr);
    }
    double v = u[0] < DRAW_TOP_U ? w[0] : (w[1] > top ? w[1] : top);
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* a record's mixes: 0, or -1 when it lacks them */
static int mixes_of(json_t *r, double x_us[], double r_us[], int xr[], int rr[]) {
    json_t *a = json_object_get(r, "mixes");
    if (json_array_size(a) != SIM_DRAW_MIXES) return -1;
    for (int m = 0; m < SIM_DRAW_MIXES; m++) {
        json_t *x = json_array_get(a, (size_t)m);
        x_us[m] = sim_json_num(x, "x_us"), r_us[m] = sim_json_num(x, "ref_us");
        xr[m] = (int)sim_json_num(x, "x_reps"), rr[m] = (int)sim_json_num(x, "ref_reps");
        if (!(x_us[m] > 0 && r_us[m] > 0 && xr[m] > 0 && rr[m] > 0)) return -1;
    }
    return 0;
}

typedef struct {
    int cls, ph;
    double f[SIM_SHAPE_DIMS], w;
} draw_point;

/* a weight the measurement resolved (not at either clamp) */
static int inside(double w) {
    return w > DRAW_MIN_W && w < 1;
}

/* the table of a point's class and phase (0 GEMM, 1 grouped GEMM, 2 attention) */
static sim_shape_table *table_of(sim_calib *c, int cls, int ph) {
    return cls == 0   ? &c->power_draw_gemm[ph]
           : cls == 1 ? &c->power_draw_grouped_gemm[ph]
                      : &c->power_draw_attention[ph];
}

int sim_fit_draw(json_t *root, sim_calib *c, sim_draw_report *rep) {
    memset(rep, 0, sizeof *rep);
    if (!root || c->power_duty_slowdown.n < 2) return 1;
    size_t nrec = json_array_size(root);
    draw_point *pt = calloc(nrec + 1, sizeof *pt);
    double *b2b = calloc(nrec + 1, sizeof *b2b), *v = calloc(2 * nrec + 1, sizeof *v);
    if (!pt || !b2b || !v) {
        free(pt), free(b2b), free(v);
        return -1;
    }
    int n = 0, nb2b = 0, have_ref = 0, have_copy = 0;
    double cold = 0, s1 = 0, s0[SIM_DRAW_MIXES] = {0}, rho0[SIM_DRAW_MIXES] = {0};
    for (size_t i = 1; i < nrec; i++) {
        json_t *r = json_array_get(root, i);
        double x_us[SIM_DRAW_MIXES], r_us[SIM_DRAW_MIXES];
        int xr[SIM_DRAW_MIXES], rr[SIM_DRAW_MIXES];
        if (mixes_of(r, x_us, r_us, xr, rr)) continue;
        const char *anchor = sim_json_str(r, "anchor");
        int is_ref = !strcmp(anchor, "ref"); /* R with R: both mixes run R back to back */
        if (is_ref) {
            cold = sim_json_num(r, "ref_cold_us");
            s1 = (r_us[0] + r_us[1]) / 2 / cold;
            b2b[nb2b++] = s1;
            have_ref = cold > 0;
        } else if (!strcmp(anchor, "copy")) {
            for (int m = 0; m < SIM_DRAW_MIXES; m++) {
                s0[m] = r_us[m] / sim_json_num(r, "ref_cold_us");
                rho0[m] = rr[m] * r_us[m] / (rr[m] * r_us[m] + xr[m] * x_us[m]);
            }
            have_copy = 1;
            rep->launches++;
            continue;
        }
        /* R itself weighs 1 by definition; the others need both anchors */
        if (!is_ref && (!have_ref || !have_copy || !(s1 > s0[0] && s1 > s0[1]))) continue;
        ep_op op;
        if (sim_json_op(r, &op) != 0) continue;
        int cls = op.kind == EP_OP_GEMM           ? 0
                  : op.kind == EP_OP_GROUPED_GEMM ? 1
                  : op.kind == EP_OP_ATTENTION    ? 2
                                                  : -1;
        int ph = op.phase >= EP_PHASE_FWD && op.phase <= EP_PHASE_BWD_DW ? op.phase - 1 : -1;
        if (cls < 0 || ph < 0) continue;
        draw_point *p = &pt[n];
        p->cls = cls, p->ph = ph;
        if (cls == 2) {
            p->f[0] = op.flops, p->f[1] = sim_json_num(r, "seq");
            p->f[2] = sim_json_num(r, "dqk"), p->f[3] = sim_json_num(r, "dv");
        } else {
            sim_gemm_features(op.phase == EP_PHASE_BWD_DW, op.m, op.n, op.k, op.batch, p->f);
        }
        if (!(p->f[0] > 0 && p->f[1] > 0 && p->f[2] > 0 && p->f[3] > 0)) continue;
        double w = is_ref ? 1.0
                          : sim_draw_weight(&c->power_duty_slowdown, cold, s1, s0, rho0, x_us, r_us,
                                            xr, rr);
        p->w = w > DRAW_MIN_W ? w : DRAW_MIN_W;
        n++;
    }
    for (int i = 0; i < n; i++)
        if (sim_shape_add(table_of(c, pt[i].cls, pt[i].ph), pt[i].f, pt[i].w) != 0) goto oom;
    for (int ph = 0; ph < SIM_PHASES; ph++)
        for (int cls = 0; cls < 3; cls++)
            if (sim_shape_sort(table_of(c, cls, ph)) != 0) goto oom;
    /* the report: launch-to-launch spread over ops measured twice, medians by class */
    int nd = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (pt[i].cls == pt[j].cls && pt[i].ph == pt[j].ph &&
                !memcmp(pt[i].f, pt[j].f, sizeof pt[i].f) &&
                !(inside(pt[i].w) == 0 && inside(pt[j].w) == 0 && pt[i].w == pt[j].w)) {
                v[nd++] = fabs(pt[i].w - pt[j].w);
                break;
            }
    rep->spread = nd ? ep_median(v, nd) : NAN;
    for (int cls = 0; cls < 3; cls++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (pt[i].cls == cls) v[k++] = pt[i].w;
        rep->median[cls] = k ? ep_median(v, k) : NAN;
    }
    rep->ops = n;
    rep->ref_b2b = nb2b ? ep_median(b2b, nb2b) : NAN;
    free(pt), free(b2b), free(v);
    return n ? 0 : 1;
oom:
    free(pt), free(b2b), free(v);
    return -1;
}
