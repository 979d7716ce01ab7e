/* Exposed-communication bars (plot_exposed.h). */
#include "plot_exposed.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "plot_trace.h"
#include "plot_util.h"

const char *const plot_exposed_kind[PLOT_EXPOSED_KINDS] = {"dispatch", "combine", "dp", "pp",
                                                           "other"};

int plot_exposed_load(const char *path, const char *label, plot_exposed_bar *bar,
                      char err[EP_ERRLEN]) {
    memset(bar, 0, sizeof *bar);
    json_t *root = plot_load_json(path, err);
    if (!root) return -1;
    int rc = -1;
    json_t *ex = json_is_object(root) ? json_object_get(root, "exposed_comm_s") : NULL;
    if (!json_is_object(ex)) {
        snprintf(err, EP_ERRLEN, "%s: no \"exposed_comm_s\" object (not a summary JSON?)", path);
        goto out;
    }
    for (int k = 0; k < PLOT_EXPOSED_KINDS; k++) {
        json_t *v = json_object_get(ex, plot_exposed_kind[k]);
        if (!v && k >= PLOT_EXPOSED_REQUIRED) continue;
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0) {
            snprintf(err, EP_ERRLEN, "%s: exposed_comm_s.%s %s", path, plot_exposed_kind[k],
                     v ? "is not a non-negative number" : "is missing");
            goto out;
        }
        bar->s[k] = json_number_value(v);
        bar->total_s += bar->s[k];
    }
    if (label) {
        snprintf(bar->label, sizeof bar->label, "%s", label);
    } else {
        static const char *const suf[] = {".summary.json", ".json", NULL};
        plot_basename(path, suf, bar->label, sizeof bar->label);
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

void plot_exposed_write_data(const plot_exposed_bar *bars, int n, FILE *f) {
    for (int i = 0; i < n; i++) {
        plot_data_field(f, bars[i].label);
        for (int k = 0; k < PLOT_EXPOSED_KINDS; k++)
            fprintf(f, "\t%.6f", bars[i].s[k] * 1e3);
        fprintf(f, "\t%.6f\n", bars[i].total_s * 1e3);
    }
}

void plot_exposed_write_vars(const plot_exposed_bar *bars, int n, FILE *f) {
    double top = 0;
    for (int i = 0; i < n; i++)
        top = fmax(top, bars[i].total_s * 1e3);
    /* room above the tallest stack for its total label; a flat 1 ms axis when all are zero */
    fprintf(f, "nbars = %d\nymax = %.6f\n", n, top > 0 ? top * 1.15 : 1.0);
    /* the timeline's colours, so that a kind looks the same in every plot */
    static const plot_class cls[PLOT_EXPOSED_KINDS] = {PLOT_CLASS_DISPATCH, PLOT_CLASS_COMBINE,
                                                       PLOT_CLASS_DP, PLOT_CLASS_PP,
                                                       PLOT_CLASS_COMM_OTHER};
    fprintf(f, "array kind_title[%d]\narray kind_color[%d]\n", PLOT_EXPOSED_KINDS,
            PLOT_EXPOSED_KINDS);
    for (int k = 0; k < PLOT_EXPOSED_KINDS; k++)
        fprintf(f, "kind_title[%d] = '%s'\nkind_color[%d] = '%s'\n", k + 1, plot_exposed_kind[k],
                k + 1, plot_class_color(cls[k]));
}
