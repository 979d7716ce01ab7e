/* Default calibration and its JSON loader (schema: sim_calib.h, docs/epsim.md "Calibration"). */
#include "sim_calib.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static void table_set(sim_table *t, int n, const double (*pts)[2]) {
    t->n = n;
    for (int i = 0; i < n; i++) {
        t->x[i] = pts[i][0];
        t->y[i] = pts[i][1];
    }
}

void sim_calib_default(sim_calib *c) {
    memset(c, 0, sizeof *c);
    c->launch_s = 4e-6;     /* typical cudaLaunchKernel / ncclGroupEnd host cost */
    c->host_sync_s = 10e-6; /* cudaStreamSynchronize wake-up + D2H copy of a few bytes */
    c->kernel_overhead_s = 2e-6;
    /* h200x2.md: 2048x7168x2048 594, 4096x4096x7168 714, 16384x2048x7168 736, 8192^3 790 TFLOP/s
     * of 989; below 6e10 flops the curve falls towards launch-bound kernels. */
    static const double gemm[][2] = {{1e8, 0.05},     {1e9, 0.25},     {1e10, 0.45},
                                     {6.01e10, 0.60}, {2.41e11, 0.72}, {4.81e11, 0.744},
                                     {1.10e12, 0.80}};
    table_set(&c->gemm_efficiency, (int)(sizeof gemm / sizeof gemm[0]), gemm);
    c->grouped_gemm_factor = 0.9;
    c->attention_efficiency = 0.55;
    c->scan_efficiency = 0.25;
    c->vector_flops_efficiency = 0.5;
    /* h200x2.md: 4277 GB/s of 4800 on a large device copy = 0.89; small copies are latency bound */
    static const double mem[][2] = {
        {1e5, 0.05}, {1e6, 0.30}, {1e7, 0.70}, {1e8, 0.85}, {1e9, 0.89}};
    table_set(&c->memory_efficiency, (int)(sizeof mem / sizeof mem[0]), mem);
    c->comm_hbm_fraction = 0.15; /* ~330 GB/s out + 330 GB/s in of ~4300 GB/s */
    /* h200x2.md, NCCL 2 ranks: 64 KiB alltoall 24.8 us, allreduce 38.7 us (2 ring steps) */
    c->nccl_base_s = 20e-6;
    c->nccl_step_s = 5e-6;
    c->ep_kernel_base_s = 15e-6;
    c->p2p_base_s = 10e-6;
    c->nccl_nvlink_efficiency = 0.69; /* 330 of 478 GB/s at 1 GiB */
    c->nccl_ib_efficiency = 0.90;
    c->ep_nvlink_efficiency = 0.73; /* SM stores saturate at ~350 of 478 GB/s */
    c->ep_rdma_efficiency = 0.90;   /* DeepEP internode 43-50 of 50 GB/s per NIC */
}

double sim_table_eval(const sim_table *t, double x) {
    if (t->n == 0) return 1.0;
    if (x <= t->x[0]) return t->y[0];
    if (x >= t->x[t->n - 1]) return t->y[t->n - 1];
    int i = 1;
    while (t->x[i] < x)
        i++;
    double a = log10(t->x[i - 1]), b = log10(t->x[i]);
    double w = (log10(x) - a) / (b - a);
    return t->y[i - 1] + w * (t->y[i] - t->y[i - 1]);
}

typedef struct {
    const char *key;
    size_t off;
    int is_table;
} field;

#define F(name)                                                                                    \
    { #name, offsetof(sim_calib, name), 0 }
#define T(name)                                                                                    \
    { #name, offsetof(sim_calib, name), 1 }
static const field FIELDS[] = {
    F(launch_s),
    F(host_sync_s),
    F(kernel_overhead_s),
    T(gemm_efficiency),
    F(grouped_gemm_factor),
    F(attention_efficiency),
    F(scan_efficiency),
    F(vector_flops_efficiency),
    T(memory_efficiency),
    F(comm_hbm_fraction),
    F(nccl_base_s),
    F(nccl_step_s),
    F(ep_kernel_base_s),
    F(p2p_base_s),
    F(nccl_nvlink_efficiency),
    F(nccl_ib_efficiency),
    F(ep_nvlink_efficiency),
    F(ep_rdma_efficiency),
};
#undef F
#undef T
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

static int load_table(sim_table *t, json_t *v, const char *key, char err[EP_ERRLEN]) {
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n == 0 || n > SIM_CALIB_MAX_POINTS) {
        snprintf(err, EP_ERRLEN, "calibration key %s: expected 1..%d [x, y] pairs", key,
                 SIM_CALIB_MAX_POINTS);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(v, i);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_number(json_array_get(p, 0)) ||
            !json_is_number(json_array_get(p, 1))) {
            snprintf(err, EP_ERRLEN, "calibration key %s: entry %zu is not an [x, y] pair", key, i);
            return -1;
        }
        double x = json_number_value(json_array_get(p, 0));
        double y = json_number_value(json_array_get(p, 1));
        if (!(x > 0) || !(y > 0) || (i > 0 && !(x > t->x[i - 1]))) {
            snprintf(err, EP_ERRLEN,
                     "calibration key %s: entry %zu needs x > 0, y > 0 and x ascending", key, i);
            return -1;
        }
        t->x[i] = x;
        t->y[i] = y;
    }
    t->n = (int)n;
    return 0;
}

int sim_calib_load(sim_calib *c, const char *path, char err[EP_ERRLEN]) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        snprintf(err, EP_ERRLEN, "--calib %s: %s (line %d)", path, je.text, je.line);
        return -1;
    }
    if (!json_is_object(root)) {
        snprintf(err, EP_ERRLEN, "--calib %s: expected a JSON object", path);
        json_decref(root);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        const field *f = NULL;
        for (size_t i = 0; i < NFIELDS; i++)
            if (strcmp(FIELDS[i].key, key) == 0) f = &FIELDS[i];
        if (!f) {
            /* "_comment" style keys document a file without changing it */
            if (key[0] == '_') continue;
            snprintf(err, EP_ERRLEN, "--calib %s: unknown key \"%s\"", path, key);
            json_decref(root);
            return -1;
        }
        char *dst = (char *)c + f->off;
        if (f->is_table) {
            if (load_table((sim_table *)dst, v, key, err) != 0) {
                json_decref(root);
                return -1;
            }
        } else {
            if (!json_is_number(v) || !(json_number_value(v) >= 0)) {
                snprintf(err, EP_ERRLEN, "--calib %s: key %s needs a number >= 0", path, key);
                json_decref(root);
                return -1;
            }
            *(double *)dst = json_number_value(v);
        }
    }
    json_decref(root);
    return 0;
}

void sim_calib_write_json(const sim_calib *c, FILE *f) {
    fputc('{', f);
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *p = (const char *)c + FIELDS[i].off;
        fprintf(f, "%s\"%s\":", i ? "," : "", FIELDS[i].key);
        if (FIELDS[i].is_table) {
            const sim_table *t = (const sim_table *)p;
            fputc('[', f);
            for (int j = 0; j < t->n; j++)
                fprintf(f, "%s[%.6g,%.6g]", j ? "," : "", t->x[j], t->y[j]);
            fputc(']', f);
        } else {
            fprintf(f, "%.6g", *(const double *)p);
        }
    }
    fputc('}', f);
}
