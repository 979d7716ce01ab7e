/* sim_shape: efficiency tables over op shapes, the calibrated part of the compute cost model
 * (docs/calibration.md, "The fit").
 *
 * A table holds measured points: four positive features and the efficiency (fraction of peak
 * flop/s) the op reached alone on the GPU. Feature 0 is the dimension the work grows with (the
 * token rows of a GEMM, the flops of an attention op); features 1..3 fix the rest of the shape
 * (a GEMM's weight dimensions and expert count; attention's sequence and head dimensions).
 *
 * A query first looks for its series (points whose features 1..3 equal the query's):
 *  - inside the series' range: piecewise linear in log(feature 0);
 *  - below it: the smallest point's efficiency scaled by the caller's size rule
 *    (sim_shape_eval_below; GEMMs: the GPU's efficiency-by-size curve), by default the time of
 *    the smallest point (small kernels are latency bound), i.e. scaled down with feature 0;
 *  - above it: the efficiency of the largest point.
 * Without a series: inverse-distance weighting of the SIM_SHAPE_NEAREST nearest points in
 * log-feature space. A point measured exactly is returned exactly.
 */
#ifndef SIM_SHAPE_H
#define SIM_SHAPE_H

#define SIM_SHAPE_DIMS    4
#define SIM_SHAPE_NEAREST 4

typedef struct {
    int n, cap;
    double (*x)[SIM_SHAPE_DIMS]; /* features, sorted by (x1, x2, x3, x0) after sim_shape_sort */
    double *y;                   /* efficiency */
} sim_shape_table;

/* Appends a point (features > 0, y > 0). Returns 0, or -1 when out of memory. */
int sim_shape_add(sim_shape_table *t, const double x[SIM_SHAPE_DIMS], double y);
/* Sorts the points; a query needs it. Points with equal features keep their median y. */
void sim_shape_sort(sim_shape_table *t);
/* Interpolated efficiency at q, or -1 for an empty table. */
double sim_shape_eval(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS]);
/* How the efficiency y0 of a series' smallest point (feature 0 = x0) carries to a query below it
 * (feature 0 = q0 < x0), for the query q. */
typedef double (*sim_shape_below_fn)(double y0, double x0, const double q[SIM_SHAPE_DIMS],
                                     void *ctx);
/* sim_shape_eval with that rule (NULL: the latency-bound default, y0 x q0 / x0). */
double sim_shape_eval_below(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS],
                            sim_shape_below_fn below, void *ctx);
void sim_shape_free(sim_shape_table *t);
/* Deep copy (dst is overwritten). Returns 0 or -1. */
int sim_shape_copy(sim_shape_table *dst, const sim_shape_table *src);

#endif
