/* bench_list: the benchmarks of `epref bench`, one row each. Adding one is a row here and its
 * file (bench.h declares its function). */
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* calib takes its output folder, models and parts from the command line's fields */
static int run_calib(bench *b) {
    return bench_calib(b, b->out_dir, b->models, b->parts);
}

static const bench_entry k_benches[] = {
    {"dispatch", bench_dispatch, 0},
    {"combine", bench_combine, 0},
    {"gemm", bench_gemm, 0},
    {"calib", run_calib, 1},
};

const bench_entry *bench_find(const char *name) {
    for (size_t i = 0; i < sizeof k_benches / sizeof k_benches[0]; i++)
        if (!strcmp(k_benches[i].name, name)) return &k_benches[i];
    return NULL;
}

void bench_names(char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof k_benches / sizeof k_benches[0] && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", k_benches[i].name);
}
