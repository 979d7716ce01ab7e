/* sim_shape: efficiency tables over op shapes, the calibrated part of the compute cost model
 * (docs/calibration.md, "The fit").
 *
 * A table holds measured points: four positive features and the efficiency (fraction of peak
 * flop/s) the op reached alone on the GPU. Feature 0 is the dimension the work grows with (the
 * token rows of a GEMM, the flops of an attention op); features 1..3 fix the rest of the shape
 * (a GEMM's weight dimensions and expert count; attention's sequence and head dimensions).
 *
 * Along a series (points whose features 1..3 are equal):
 *  - inside the series' range: piecewise linear in log(feature 0) (with sim_shape_rule.x0_tile,
 *    between two points at most a tile apart: the upper point's time);
 *  - below it: the smallest point's efficiency scaled by the caller's size rule
 *    (sim_shape_rule.below; GEMMs: the GPU's efficiency-by-size curve), by default the time of
 *    the smallest point (small kernels are latency bound), i.e. scaled down with feature 0;
 *  - above it: the efficiency of the largest point.
 * A point is a grid point (sim_shape_add) or a model's own shape (sim_shape_add_exact: the op
 * shapes of the validation models, timed so that those models' ops are read exactly); a series
 * with a grid point is a grid series. Beyond the range of feature 0 that a series of model shapes
 * measured, a query of that series takes the grid's trend (below) from the series' nearest
 * measured point, anchored to that point: y(nearest point) x grid(q) / grid(nearest point). A query whose features 1..3 are no series: each of them is
 * bracketed by the values the grid series take, every corner series of that box is read along feature 0 as above, and the
 * corners are blended multilinearly in log-feature space. With sim_shape_rule.x0_per_x3 (a grouped
 * GEMM: feature 0 is the rows of all x3 experts) a corner is read at the query's x0 / x3 per unit,
 * not its total. Corners that were not measured (a grid with holes) are left out and the others'
 * weights renormalised; when the measured ones carry less than SIM_SHAPE_MIN_BOX of the weight,
 * the SIM_SHAPE_NEAREST nearest grid series in log(features 1..3) are blended by inverse squared
 * distance instead. (A table without grid points uses all its series as the grid.)
 * A point measured exactly is returned exactly.
 *
 * A query is outside the table when a feature 1..3 lies outside the values of the grid series, or
 * feature 0 outside the range of the series read (then the rules above extrapolate).
 */
#ifndef SIM_SHAPE_H
#define SIM_SHAPE_H

#define SIM_SHAPE_DIMS    4
#define SIM_SHAPE_NEAREST 4
#define SIM_SHAPE_MIN_BOX 0.25 /* weight of a box's measured corners that it needs */

typedef struct {
    int n, cap;
    double (*x)[SIM_SHAPE_DIMS]; /* features, sorted by (x1, x2, x3, x0) after sim_shape_sort */
    double *y;                   /* efficiency */
    unsigned char *exact;        /* 1: a model's own shape, read only by a query of its series */
    /* after sim_shape_sort: series s holds points start[s] .. start[s + 1] - 1; the distinct
     * values of features 1..3 over all series, ascending (vals[d - 1], nvals[d - 1] of them) */
    int nseries, *start;
    unsigned char *grid; /* series s is a grid series */
    int nvals[SIM_SHAPE_DIMS - 1];
    double *vals[SIM_SHAPE_DIMS - 1];
} sim_shape_table;

/* Appends a point (features > 0, y > 0); sim_shape_sort must follow before a query. Returns 0,
 * or -1 when out of memory. */
int sim_shape_add(sim_shape_table *t, const double x[SIM_SHAPE_DIMS], double y);
/* The same for a model's own shape (not a grid point). */
int sim_shape_add_exact(sim_shape_table *t, const double x[SIM_SHAPE_DIMS], double y);
/* Sorts the points and indexes the series; a query needs it. Points with equal features keep
 * their median y. Returns 0, or -1 when out of memory (the table is then empty). */
int sim_shape_sort(sim_shape_table *t);
/* How the efficiency y0 of a series' smallest point (feature 0 = x0) carries to a query below it
 * (feature 0 = q0 < x0), for the query q. */
typedef double (*sim_shape_below_fn)(double y0, double x0, const double q[SIM_SHAPE_DIMS],
                                     void *ctx);
typedef struct {
    sim_shape_below_fn below; /* NULL: the latency-bound default, y0 x q0 / x0 */
    void *ctx;                /* below's */
    int x0_per_x3;            /* feature 0 counts x3 units (rows of x3 experts) */
    /* > 0: feature 0 per unit comes in whole tiles of this (a GEMM's rows: a tile of 64 rows
     * costs the same whether 1 or 64 of its rows are used); a query between two points of a
     * series at most one tile apart takes the upper point's time, not a log interpolation */
    double x0_tile;
} sim_shape_rule;
/* Interpolated efficiency at q (rule NULL: the defaults), or -1 for an empty table; *outside
 * (when not NULL) is set to whether q lies outside the table. */
double sim_shape_eval_rule(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS],
                           const sim_shape_rule *rule, int *outside);
/* sim_shape_eval_rule with the defaults */
double sim_shape_eval(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS]);
void sim_shape_free(sim_shape_table *t);
/* Deep copy (dst is overwritten). Returns 0 or -1. */
int sim_shape_copy(sim_shape_table *dst, const sim_shape_table *src);

#endif
