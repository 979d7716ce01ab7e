/* Shape tables: storage, sorting and interpolation (sim_shape.h). */
#include "sim_shape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sim_shape_add(sim_shape_table *t, const double x[SIM_SHAPE_DIMS], double y) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        double(*nx)[SIM_SHAPE_DIMS] = realloc(t->x, sizeof *nx * (size_t)cap);
        if (!nx) return -1;
        t->x = nx;
        double *ny = realloc(t->y, sizeof *ny * (size_t)cap);
        if (!ny) return -1;
        t->y = ny;
        t->cap = cap;
    }
    memcpy(t->x[t->n], x, sizeof t->x[0]);
    t->y[t->n] = y;
    t->n++;
    return 0;
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
} point;

static int cmp_point(const void *a, const void *b) {
    const point *p = a, *q = b;
    int c = cmp_features(p->x, q->x);
    return c ? c : (p->y > q->y) - (p->y < q->y);
}

void sim_shape_sort(sim_shape_table *t) {
    if (t->n < 2) return;
    point *p = malloc(sizeof *p * (size_t)t->n);
    if (!p) return; /* unsorted: queries fall back to nearest points, still correct */
    for (int i = 0; i < t->n; i++) {
        memcpy(p[i].x, t->x[i], sizeof p[i].x);
        p[i].y = t->y[i];
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
        memcpy(t->x[n], p[i].x, sizeof t->x[0]);
        t->y[n] = y;
        n++;
        i = j;
    }
    t->n = n;
    free(p);
}

static int same_series(const double *a, const double *b) {
    for (int d = 1; d < SIM_SHAPE_DIMS; d++)
        if (a[d] != b[d]) return 0;
    return 1;
}

/* first point of the series of q, or -1 */
static int series_start(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS]) {
    int lo = 0, hi = t->n;
    double key[SIM_SHAPE_DIMS];
    memcpy(key, q, sizeof key);
    key[0] = 0; /* below every x0 of the series */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cmp_features(t->x[mid], key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && same_series(t->x[lo], q) ? lo : -1;
}

static double along_series(const sim_shape_table *t, int a, const double q[SIM_SHAPE_DIMS],
                           sim_shape_below_fn below, void *ctx) {
    double q0 = q[0];
    int b = a;
    while (b + 1 < t->n && same_series(t->x[b + 1], t->x[a]))
        b++;
    if (q0 == t->x[a][0]) return t->y[a];
    if (q0 < t->x[a][0])
        return below ? below(t->y[a], t->x[a][0], q, ctx) : t->y[a] * q0 / t->x[a][0];
    if (q0 >= t->x[b][0]) return t->y[b];
    int i = a + 1;
    while (t->x[i][0] < q0)
        i++;
    double l0 = log(t->x[i - 1][0]), l1 = log(t->x[i][0]);
    double w = (log(q0) - l0) / (l1 - l0);
    return t->y[i - 1] + w * (t->y[i] - t->y[i - 1]);
}

static double nearest(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS]) {
    double best_d[SIM_SHAPE_NEAREST], best_y[SIM_SHAPE_NEAREST];
    int nb = 0;
    double lq[SIM_SHAPE_DIMS];
    for (int d = 0; d < SIM_SHAPE_DIMS; d++)
        lq[d] = log(q[d]);
    for (int i = 0; i < t->n; i++) {
        double d2 = 0;
        for (int d = 0; d < SIM_SHAPE_DIMS; d++) {
            double e = log(t->x[i][d]) - lq[d];
            d2 += e * e;
        }
        if (d2 == 0) return t->y[i];
        if (nb == SIM_SHAPE_NEAREST && d2 >= best_d[nb - 1]) continue;
        int pos = nb < SIM_SHAPE_NEAREST ? nb++ : nb - 1; /* a full list drops its farthest */
        while (pos > 0 && best_d[pos - 1] > d2) {
            best_d[pos] = best_d[pos - 1];
            best_y[pos] = best_y[pos - 1];
            pos--;
        }
        best_d[pos] = d2;
        best_y[pos] = t->y[i];
    }
    double sw = 0, sy = 0;
    for (int i = 0; i < nb; i++) {
        sw += 1.0 / best_d[i];
        sy += best_y[i] / best_d[i];
    }
    return sy / sw;
}

double sim_shape_eval_below(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS],
                            sim_shape_below_fn below, void *ctx) {
    if (t->n == 0) return -1;
    for (int d = 0; d < SIM_SHAPE_DIMS; d++)
        if (!(q[d] > 0)) return -1;
    int a = series_start(t, q);
    return a >= 0 ? along_series(t, a, q, below, ctx) : nearest(t, q);
}

double sim_shape_eval(const sim_shape_table *t, const double q[SIM_SHAPE_DIMS]) {
    return sim_shape_eval_below(t, q, NULL, NULL);
}

void sim_shape_free(sim_shape_table *t) {
    free(t->x);
    free(t->y);
    memset(t, 0, sizeof *t);
}

int sim_shape_copy(sim_shape_table *dst, const sim_shape_table *src) {
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < src->n; i++)
        if (sim_shape_add(dst, src->x[i], src->y[i]) != 0) {
            sim_shape_free(dst);
            return -1;
        }
    return 0;
}
