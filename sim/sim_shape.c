/* Shape tables: storage, sorting and interpolation (sim_shape.h). */
#include "sim_shape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void drop_index(sim_shape_table *t);

static int add_point(sim_shape_table *t, const double x[SIM_SHAPE_DIMS], double y, int exact) {
    drop_index(t); /* queries wait for sim_shape_sort */
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        double(*nx)[SIM_SHAPE_DIMS] = realloc(t->x, sizeof *nx * (size_t)cap);
        if (!nx) return -1;
        t->x = nx;
        double *ny = realloc(t->y, sizeof *ny * (size_t)cap);
        if (!ny) return -1;
        t->y = ny;
        unsigned char *ne = realloc(t->exact, (size_t)cap);
        if (!ne) return -1;
        t->exact = ne;
        t->cap = cap;
    }
    memcpy(t->x[t->n], x, sizeof t->x[0]);
    t->y[t->n] = y;
    t->exact[t->n] = (unsigned char)exact;
    t->n++;
    return 0;
}

int sim_shape_add(sim_shape_table *t, const double x[SIM_SHAPE_DIMS], double y) {
    return add_point(t, x, y, 0);
}

int sim_shape_add_exact(sim_shape_table *t, const double x[SIM_SHAPE_DIMS], double y) {
    return add_point(t, x, y, 1);
}

/* (x1, x2, x3) then x0: a series is one contiguous run, sorted by its varying feature */
static int cmp_features(const double *a, const double *b) {
    for (int i = 1; i <= SIM_SHAPE_DIMS; i++) {
        int d = i % SIM_SHAPE_DIMS;
        if (a[d] != b[d]) return a[d] < b[d] ? -1 : 1;
    }
    return 0;
}

typedef struct {
    double x[SIM_SHAPE_DIMS], y;
    int exact;
} point;

static int cmp_point(const void *a, const void *b) {
    const point *p = a, *q = b;
    int c = cmp_features(p->x, q->x);
    return c ? c : (p->y > q->y) - (p->y < q->y);
}

static void drop_index(sim_shape_table *t) {
    free(t->start);
    free(t->grid);
    t->start = NULL;
    t->grid = NULL;
    t->nseries = 0;
    for (int d = 0; d < SIM_SHAPE_DIMS - 1; d++) {
        free(t->vals[d]);
        t->vals[d] = NULL;
        t->nvals[d] = 0;
    }
}

static int same_series(const double *a, const double *b) {
    for (int d = 1; d < SIM_SHAPE_DIMS; d++)
        if (a[d] != b[d]) return 0;
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the series starts, which are grid series, and the distinct values of features 1..3 over
 * the grid series (all series when none is) */
static int build_index(sim_shape_table *t) {
    drop_index(t);
    if (t->n == 0) return 0;
    t->start = malloc(sizeof *t->start * (size_t)(t->n + 1));
    t->grid = calloc((size_t)t->n, 1);
    if (!t->start || !t->grid) return -1;
    int any_grid = 0;
    for (int i = 0; i < t->n; i++) {
        if (i == 0 || !same_series(t->x[i - 1], t->x[i])) t->start[t->nseries++] = i;
        if (!t->exact[i]) t->grid[t->nseries - 1] = 1, any_grid = 1;
    }
    t->start[t->nseries] = t->n;
    if (!any_grid) memset(t->grid, 1, (size_t)t->nseries);
    for (int d = 0; d < SIM_SHAPE_DIMS - 1; d++) {
        double *v = malloc(sizeof *v * (size_t)t->nseries);
        if (!v) return -1;
        int m = 0;
        for (int s = 0; s < t->nseries; s++)
            if (t->grid[s]) v[m++] = t->x[t->start[s]][d + 1];
        qsort(v, (size_t)m, sizeof *v, cmp_double);
        int nv = m;
        m = 0;
        for (int s = 0; s < nv; s++)
            if (m == 0 || v[s] != v[m - 1]) v[m++] = v[s];
        t->vals[d] = v;
        t->nvals[d] = m;
    }
    return 0;
}

int sim_shape_sort(sim_shape_table *t) {
    if (t->n >= 2) {
        point *p = malloc(sizeof *p * (size_t)t->n);
        if (!p) {
            sim_shape_free(t);
            return -1;
        }
        for (int i = 0; i < t->n; i++) {
            memcpy(p[i].x, t->x[i], sizeof p[i].x);
            p[i].y = t->y[i];
            p[i].exact = t->exact[i];
        }
        qsort(p, (size_t)t->n, sizeof *p, cmp_point);
        int n = 0;
        for (int i = 0; i < t->n;) {
            int j = i;
            while (j < t->n && cmp_features(p[i].x, p[j].x) == 0)
                j++;
            /* equal shapes measured more than once (several models share it): the median */
            int m = (j - i) / 2;
            double y = (j - i) % 2 ? p[i + m].y : 0.5 * (p[i + m - 1].y + p[i + m].y);
            int exact = 1; /* a grid point when any of them is */
            for (int k = i; k < j; k++)
                exact &= p[k].exact;
            memcpy(t->x[n], p[i].x, sizeof t->x[0]);
            t->y[n] = y;
            t->exact[n] = (unsigned char)exact;
            n++;
            i = j;
        }
        t->n = n;
        free(p);
    }
    if (build_index(t) != 0) {
        sim_shape_free(t);
        return -1;
    }
    return 0;
}

/* the series whose features 1..3 are key's, or -1 */
static int find_series(const sim_shape_table *t, const double key[SIM_SHAPE_DIMS]) {
    int lo = 0, hi = t->nseries;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const double *x = t->x[t->start[mid]];
        int c = 0;
        for (int d = 1; d < SIM_SHAPE_DIMS && !c; d++)
            c = x[d] < key[d] ? -1 : x[d] > key[d];
        if (c < 0)
            lo = mid + 1;
        else if (c > 0)
            hi = mid;
        else
            return mid;
    }
    return -1;
}

/* Series s read at q (features 1..3 those of the series, feature 0 per the rule). */
static double along_series(const sim_shape_table *t, int s, const double q[SIM_SHAPE_DIMS],
                           const sim_shape_rule *r, int *outside) {
    int a = t->start[s], b = t->start[s + 1] - 1;
    double at[SIM_SHAPE_DIMS];
    memcpy(at, t->x[a], sizeof at);
    at[0] = r->x0_per_x3 ? q[0] * at[3] / q[3] : q[0];
    double q0 = at[0];
    if (q0 < t->x[a][0] || q0 > t->x[b][0]) *outside = 1;
    if (q0 <= t->x[a][0]) {
        if (q0 == t->x[a][0]) return t->y[a];
        return r->below ? r->below(t->y[a], t->x[a][0], at, r->ctx) : t->y[a] * q0 / t->x[a][0];
    }
    if (q0 >= t->x[b][0]) return t->y[b];
    int i = a + 1;
    while (t->x[i][0] < q0)
        i++;
    /* two points at most one tile apart: a query between them runs the upper one's tiles and
     * takes its time (its efficiency x q0 / its feature 0) */
    double unit = r->x0_per_x3 ? at[3] : 1;
    if (r->x0_tile > 0 && t->x[i][0] - t->x[i - 1][0] <= r->x0_tile * unit * (1 + 1e-9))
        return t->y[i] * q0 / t->x[i][0];
    double l0 = log(t->x[i - 1][0]), l1 = log(t->x[i][0]);
    double w = (log(q0) - l0) / (l1 - l0);
    return t->y[i - 1] + w * (t->y[i] - t->y[i - 1]);
}

/* Largest value <= v and smallest >= v of an ascending list (both the nearest end outside it). */
static void bracket(const double *v, int n, double q, double *lo, double *hi, int *outside) {
    if (q <= v[0] || q >= v[n - 1]) {
        *lo = *hi = q <= v[0] ? v[0] : v[n - 1];
        if (q < v[0] || q > v[n - 1]) *outside = 1;
        return;
    }
    int i = 1;
    while (v[i] < q)
        i++;
    *hi = v[i];
    *lo = v[i] == q ? q : v[i - 1];
}

/* The SIM_SHAPE_NEAREST series nearest q in log(features 1..3), read at q, by 1 / distance^2. */
static double nearest_series(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS],
                             const sim_shape_rule *r, int *outside) {
    double best_d[SIM_SHAPE_NEAREST];
    int best_s[SIM_SHAPE_NEAREST], nb = 0;
    for (int s = 0; s < t->nseries; s++) {
        if (!t->grid[s]) continue;
        double d2 = 0;
        for (int d = 1; d < SIM_SHAPE_DIMS; d++) {
            double e = log(t->x[t->start[s]][d]) - log(q[d]);
            d2 += e * e;
        }
        if (nb == SIM_SHAPE_NEAREST && d2 >= best_d[nb - 1]) continue;
        int pos = nb < SIM_SHAPE_NEAREST ? nb++ : nb - 1; /* a full list drops its farthest */
        while (pos > 0 && best_d[pos - 1] > d2) {
            best_d[pos] = best_d[pos - 1];
            best_s[pos] = best_s[pos - 1];
            pos--;
        }
        best_d[pos] = d2;
        best_s[pos] = s;
    }
    double sw = 0, sy = 0;
    int nbeyond = 0;
    for (int i = 0; i < nb; i++) {
        double w = 1.0 / best_d[i]; /* d2 > 0: q is no series */
        int beyond = 0;
        sw += w;
        sy += w * along_series(t, best_s[i], q, r, &beyond);
        nbeyond += beyond;
    }
    if (nb > 0 && nbeyond == nb) *outside = 1; /* beyond the range of every series read */
    return sy / sw;
}

static double across_series(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS],
                            const sim_shape_rule *r, int *outside) {
    enum { D = SIM_SHAPE_DIMS - 1 };
    double lo[D], hi[D], w[D];
    for (int d = 0; d < D; d++) {
        bracket(t->vals[d], t->nvals[d], q[d + 1], &lo[d], &hi[d], outside);
        w[d] = hi[d] > lo[d] ? (log(q[d + 1]) - log(lo[d])) / (log(hi[d]) - log(lo[d])) : 0;
    }
    double sy = 0, sw = 0;
    int ncorner = 0, nbeyond = 0;
    for (int c = 0; c < 1 << D; c++) {
        double wc = 1, key[SIM_SHAPE_DIMS] = {q[0]};
        for (int d = 0; d < D; d++) {
            int up = c >> d & 1;
            wc *= up ? w[d] : 1 - w[d];
            key[d + 1] = up ? hi[d] : lo[d];
        }
        if (wc == 0) continue;
        int s = find_series(t, key);
        if (s < 0 || !t->grid[s]) continue; /* a hole in the grid (a shape too large to time) */
        int beyond = 0;
        sy += wc * along_series(t, s, q, r, &beyond);
        sw += wc;
        ncorner++;
        nbeyond += beyond;
    }
    /* feature 0 outside the grid: beyond the range of every corner read */
    if (ncorner > 0 && nbeyond == ncorner) *outside = 1;
    /* the corners measured, when they carry at least SIM_SHAPE_MIN_BOX of the weight */
    return sw >= SIM_SHAPE_MIN_BOX ? sy / sw : nearest_series(t, q, r, outside);
}

double sim_shape_eval_rule(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS],
                           const sim_shape_rule *rule, int *outside) {
    static const sim_shape_rule defaults = {NULL, NULL, 0, 0};
    const sim_shape_rule *r = rule ? rule : &defaults;
    int out = 0;
    double y = -1;
    if (t->n > 0 && t->nseries > 0) {
        int ok = 1;
        for (int d = 0; d < SIM_SHAPE_DIMS; d++)
            ok &= q[d] > 0;
        if (ok) {
            int s = find_series(t, q);
            int a = s >= 0 ? t->start[s] : 0, b = s >= 0 ? t->start[s + 1] - 1 : 0;
            if (s >= 0 && !t->grid[s] && (q[0] < t->x[a][0] || q[0] > t->x[b][0])) {
                /* a model's own series beyond the rows it measured: the grid's trend from the
                 * series' nearest measured point, anchored to that point */
                int end = q[0] < t->x[a][0] ? a : b, unused = 0;
                double at[SIM_SHAPE_DIMS];
                memcpy(at, q, sizeof at);
                at[0] = t->x[end][0];
                double g_q = across_series(t, q, r, &out), g_end = across_series(t, at, r, &unused);
                y = g_q > 0 && g_end > 0 ? t->y[end] * g_q / g_end : along_series(t, s, q, r, &out);
            } else {
                y = s >= 0 ? along_series(t, s, q, r, &out) : across_series(t, q, r, &out);
            }
        }
    }
    if (outside) *outside = out;
    return y;
}

double sim_shape_eval(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS]) {
    return sim_shape_eval_rule(t, q, NULL, NULL);
}

void sim_shape_free(sim_shape_table *t) {
    drop_index(t);
    free(t->x);
    free(t->y);
    free(t->exact);
    memset(t, 0, sizeof *t);
}

int sim_shape_copy(sim_shape_table *dst, const sim_shape_table *src) {
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < src->n; i++)
        if (add_point(dst, src->x[i], src->y[i], src->exact[i]) != 0) {
            sim_shape_free(dst);
            return -1;
        }
    return sim_shape_sort(dst);
}
