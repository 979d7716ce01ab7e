/* Default calibration and its JSON loader (schema: sim_calib.h, docs/epsim.md "Calibration"). */
#include "sim_calib.h"

#include "ep_sched.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void table_set(sim_table *t, int n, const double (*pts)[2]) {
    t->n = n;
    for (int i = 0; i < n; i++) {
        t->x[i] = pts[i][0];
        t->y[i] = pts[i][1];
    }
}

void sim_calib_default(sim_calib *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "built-in defaults");
    c->launch_s = 4e-6;      /* typical cudaLaunchKernel / ncclGroupEnd host cost */
    c->nccl_launch_s = 4e-6; /* ncclGroupEnd of a few send/recv: about one kernel launch */
    c->gemm_launch_s = 4e-6;
    c->attention_launch_s = 4e-6;
    c->host_sync_s = 10e-6;    /* cudaStreamSynchronize wake-up + D2H copy of a few bytes */
    c->graph_launch_s = 10e-6; /* cudaGraphLaunch of a layer's graph, until measured */
    c->optimizer_ddp_factor = 1.0;
    c->kernel_overhead_s = 2e-6;
    /* docs/epsim.md, "Calibration": 2048x7168x2048 594, 4096x4096x7168 714, 16384x2048x7168 736,
     * 8192^3 790 TFLOP/s of 989; below 6e10 flops the curve falls towards launch-bound kernels. */
    static const double gemm[][2] = {{1e8, 0.05},     {1e9, 0.25},     {1e10, 0.45},
                                     {6.01e10, 0.60}, {2.41e11, 0.72}, {4.81e11, 0.744},
                                     {1.10e12, 0.80}};
    table_set(&c->gemm_efficiency, (int)(sizeof gemm / sizeof gemm[0]), gemm);
    c->grouped_gemm_factor = 0.9;
    /* a weight gradient reduces over the rows in blocks of 64 (bf16 tensor-core GEMMs' K
     * block): at rows per expert off the grid it scores best so (docs/calibration.md, "Between
     * the grid's points") */
    c->gemm_k_tile = 64;
    c->attention_efficiency = 0.55;
    /* Hopper FP8 tensor cores: 1979 of BF16's 989 dense TFLOP/s; until measured, an FP8 GEMM
     * reaches 0.7 of the BF16 efficiency of its shape, 1.4x BF16 speed */
    c->fp8_flops_ratio = 2.0;
    c->fp8_gemm_factor = 0.7;
    c->scan_efficiency = 0.25;
    c->vector_flops_efficiency = 0.5;
    /* docs/epsim.md, "Calibration": 4277 GB/s of 4800 on a large device copy = 0.89; small copies
     * are latency bound */
    static const double mem[][2] = {
        {1e5, 0.05}, {1e6, 0.30}, {1e7, 0.70}, {1e8, 0.85}, {1e9, 0.89}};
    table_set(&c->memory_efficiency, (int)(sizeof mem / sizeof mem[0]), mem);
    c->comm_hbm_fraction = 0.15; /* ~330 GB/s out + 330 GB/s in of ~4300 GB/s */
    /* no interference beyond SMs and HBM until measured (docs/calibration.md) */
    c->comm_flops_slowdown = 1.0;
    c->comm_wait_slowdown = 1.0;
    c->ce_flops_slowdown = 1.0;
    c->nccl_compute_slowdown = 1.0;
    c->ep_compute_slowdown = 1.0;
    /* ops on two streams split the SMs and HBM evenly until measured */
    c->corun_compute_compute = c->corun_compute_memory = 2.0;
    c->corun_memory_compute = c->corun_memory_memory = 2.0;
    /* docs/epsim.md, "Calibration", NCCL 2 ranks: 64 KiB alltoall 24.8 us, allreduce 38.7 us (2
     * ring steps) */
    c->nccl_base_s = 20e-6;
    c->nccl_step_s = 5e-6;
    c->ep_kernel_base_s = 15e-6;
    c->p2p_base_s = 10e-6;
    c->nccl_nvlink_efficiency = 0.69; /* 330 of 478 GB/s at 1 GiB */
    /* 46-48 of 50 GB/s per 400G NIC in published nccl-tests alltoall and ring runs on DGX H100
     * (docs/epsim.md, "Calibration"): the low end, for large messages */
    c->nccl_ib_efficiency = 0.90;
    c->ep_nvlink_efficiency = 0.73; /* SM stores saturate at ~350 of 478 GB/s */
    c->ep_rdma_efficiency = 0.88;   /* beyond the table below: its 8-node value */
    /* Hybrid-EP kernel-only on H100 + 400G NICs, 4096 tokens, H 7168, top-8, 8 local experts
     * (DeepEP docs/README_Hybrid-EP.md): its "IB bandwidth" counts the sender's own node
     * (tests/test_hybrid_ep.py, count_rdma_send_from_routing_map), so the NIC carries (N-1)/N of
     * it. BF16 at 16 SMs, the published count nearest Megatron-Bridge's 32, per NIC of 50 GB/s:
     * dispatch 16 ranks 71.71 / 2 = 35.9 GB/s (0.717), 32 ranks 57.69 x 3/4 (0.865), 64 ranks
     * 49.97 x 7/8 (0.874); combine 62.95 (0.630), 57.46 (0.862), 49.77 (0.871). DeepEP's own
     * EP32 / EP64 figures on H800 agree (58 x 3/4, 51 x 7/8). */
    static const double rdma[][2] = {{2, 0.717}, {4, 0.865}, {8, 0.874}};
    static const double rdma_combine[][2] = {{2, 0.630}, {4, 0.862}, {8, 0.871}};
    table_set(&c->ep_rdma_nodes, (int)(sizeof rdma / sizeof rdma[0]), rdma);
    table_set(&c->ep_rdma_combine_nodes, (int)(sizeof rdma_combine / sizeof rdma_combine[0]),
              rdma_combine);
    /* the same table's 4-SM rows, where SMs bound the leg: RDMA bytes/s per SM, dispatch and
     * combine averaged: 16 ranks (44.40 + 52.00) / 2 / 2 / 4 = 6.03 GB/s, 32 ranks (52.60 +
     * 51.00) / 2 x 3/4 / 4 = 9.71, 64 ranks (48.00 + 46.00) / 2 x 7/8 / 4 = 10.28 */
    static const double sm_rate[][2] = {{2, 6.03e9}, {4, 9.71e9}, {8, 10.28e9}};
    table_set(&c->ep_rdma_sm_bytes_s, (int)(sizeof sm_rate / sizeof sm_rate[0]), sm_rate);
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

const char *sim_coll_name(sim_coll k) {
    static const char *names[SIM_COLL_NUM] = {"alltoall", "all_gather", "reduce_scatter",
                                              "all_reduce", "send"};
    return k >= 0 && k < SIM_COLL_NUM ? names[k] : "?";
}

const sim_coll_curve *sim_calib_nccl_curve(const sim_calib *c, ep_op_kind k, int members) {
    sim_coll i = sim_coll_of(k);
    if (i == SIM_COLL_NUM) return NULL;
    if (members == 2 && c->nccl_nvlink_pair[i].efficiency.n > 0) return &c->nccl_nvlink_pair[i];
    return c->nccl_nvlink[i].efficiency.n > 0 ? &c->nccl_nvlink[i] : NULL;
}

sim_coll sim_coll_of(ep_op_kind k) {
    switch (k) {
    case EP_OP_A2A_DISPATCH:
    case EP_OP_A2A_COMBINE:
    case EP_OP_ALLTOALL:
        return SIM_COLL_ALLTOALL;
    case EP_OP_ALL_GATHER:
        return SIM_COLL_ALL_GATHER;
    case EP_OP_REDUCE_SCATTER:
        return SIM_COLL_REDUCE_SCATTER;
    case EP_OP_ALL_REDUCE:
        return SIM_COLL_ALL_REDUCE;
    case EP_OP_SEND:
    case EP_OP_RECV:
        return SIM_COLL_SEND;
    default:
        return SIM_COLL_NUM;
    }
}

ep_op_kind sim_coll_kind(sim_coll k) {
    static const ep_op_kind kinds[SIM_COLL_NUM] = {
        EP_OP_ALLTOALL, EP_OP_ALL_GATHER, EP_OP_REDUCE_SCATTER, EP_OP_ALL_REDUCE, EP_OP_SEND};
    return kinds[k];
}

void sim_gemm_features(int wgrad, double m, double n, double k, double batch,
                       double x[SIM_SHAPE_DIMS]) {
    x[0] = wgrad ? k : m;
    x[1] = wgrad ? m : n;
    x[2] = wgrad ? n : k;
    x[3] = batch > 0 ? batch : 1;
}

/* ---- the keys of the file ----------------------------------------------------------------- */

typedef enum { K_NUM, K_TABLE, K_SHAPES, K_NCCL, K_CURVE } key_type;
/* SH_GEMM: rows [m, n, k, batch] made GEMM features; SH_ATTENTION: the features as written */
typedef enum { SH_GEMM, SH_ATTENTION } shape_kind;

typedef struct {
    const char *key;
    size_t off;
    key_type type;
    shape_kind shape;
    int optional; /* shapes and tables written only when measured (older files' outputs stay) */
} field;

#define F(name)                                                                                    \
    { #name, offsetof(sim_calib, name), K_NUM, SH_GEMM, 0 }
#define T(name)                                                                                    \
    { #name, offsetof(sim_calib, name), K_TABLE, SH_GEMM, 0 }
#define TO(name)                                                                                   \
    { #name, offsetof(sim_calib, name), K_TABLE, SH_GEMM, 1 }
/* a forward/backward pair of optional tables, keys name_fwd and name_bwd */
/* clang-format off */
#define TO2(name)                                                                                  \
    {#name "_fwd", offsetof(sim_calib, name[0]), K_TABLE, SH_GEMM, 1},                             \
        {#name "_bwd", offsetof(sim_calib, name[1]), K_TABLE, SH_GEMM, 1}
/* clang-format on */
#define S(name, kind)                                                                              \
    { #name, offsetof(sim_calib, name), K_SHAPES, kind, 0 }
#define SO(name, kind)                                                                             \
    { #name, offsetof(sim_calib, name), K_SHAPES, kind, 1 }
static const field FIELDS[] = {
    F(op_overhead_s),
    F(launch_s),
    F(gemm_launch_s),
    F(attention_launch_s),
    F(nccl_launch_s),
    F(host_sync_s),
    F(graph_launch_s),
    F(expert_call_s),
    F(comm_call_s),
    F(optimizer_tensor_s),
    F(optimizer_step_s),
    F(optimizer_sync_tensor_s),
    F(optimizer_copy_tensor_s),
    F(optimizer_ddp_factor),
    F(kernel_overhead_s),
    F(op_gap_s),
    F(op_event_s),
    T(gemm_efficiency),
    F(grouped_gemm_factor),
    F(gemm_k_tile),
    F(attention_efficiency),
    F(scan_efficiency),
    F(vector_flops_efficiency),
    T(memory_efficiency),
    S(gemm_shapes, SH_GEMM),
    S(grouped_gemm_shapes, SH_GEMM),
    S(attention_shapes, SH_ATTENTION),
    F(fp8_flops_ratio),
    F(fp8_gemm_factor),
    SO(fp8_gemm_shapes, SH_GEMM),
    SO(fp8_grouped_gemm_shapes, SH_GEMM),
    SO(mamba_scan_shapes, SH_ATTENTION),
    TO(power_duty_slowdown),
    TO2(unfused_permute),
    TO2(unfused_unpermute),
    TO2(unfused_sort),
    TO2(act_swiglu),
    TO2(act_geglu),
    TO2(act_geglu_clamp),
    TO2(expert_bias),
    F(power_tau_s),
    F(power_window_s),
    F(power_attention_weight),
    SO(power_draw_gemm, SH_GEMM),
    SO(power_draw_grouped_gemm, SH_GEMM),
    SO(power_draw_attention, SH_ATTENTION),
    F(comm_hbm_fraction),
    F(comm_flops_slowdown),
    F(comm_wait_slowdown),
    TO(kernel_flops_slowdown),
    SO(share_nccl_gemm, SH_GEMM),
    SO(share_nccl_grouped_gemm, SH_GEMM),
    SO(share_nccl_attention, SH_ATTENTION),
    SO(share_kernel_gemm, SH_GEMM),
    SO(share_kernel_grouped_gemm, SH_GEMM),
    SO(share_kernel_attention, SH_ATTENTION),
    F(ce_flops_slowdown),
    F(nccl_compute_slowdown),
    F(ep_compute_slowdown),
    F(corun_compute_compute),
    F(corun_compute_memory),
    F(corun_memory_compute),
    F(corun_memory_memory),
    F(nccl_base_s),
    F(nccl_step_s),
    F(ep_kernel_base_s),
    F(p2p_base_s),
    F(nccl_nvlink_efficiency),
    F(nccl_ib_efficiency),
    F(ep_nvlink_efficiency),
    F(ep_rdma_efficiency),
    T(ep_rdma_nodes),
    T(ep_rdma_combine_nodes),
    T(ep_rdma_sm_bytes_s),
    {"nccl_nvlink", offsetof(sim_calib, nccl_nvlink), K_NCCL, SH_GEMM, 0},
    {"nccl_nvlink_pair", offsetof(sim_calib, nccl_nvlink_pair), K_NCCL, SH_GEMM, 0},
    {"ep_nvlink", offsetof(sim_calib, ep_nvlink), K_CURVE, SH_GEMM, 0},
};
#undef F
#undef T
#undef TO
#undef TO2
#undef S
#undef SO
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

void sim_calib_free(sim_calib *c) {
    for (size_t i = 0; i < NFIELDS; i++)
        if (FIELDS[i].type == K_SHAPES)
            for (int ph = 0; ph < SIM_PHASES; ph++)
                sim_shape_free((sim_shape_table *)((char *)c + FIELDS[i].off) + ph);
}

/* Built-in values taken from a published measurement of their part (docs/epsim.md,
 * "Calibration"), with that source: a calibration names them in _meta.published where no
 * measured file replaced them (sim_calib_each_published), so a figure at cluster scale says what
 * it rests on. */
static const struct {
    const char *key, *source;
} PUBLISHED[] = {
    {"nccl_ib_efficiency",
     "NCCL over a 400G InfiniBand NIC: nccl-tests alltoall on 2 x DGX H100 with NVLink off, 46 of "
     "50 GB/s (DeepEP issue 3, 2025-02-25); ring collectives 46-48 GB/s per NIC as NCCL's "
     "maintainers expect (nccl-tests issues 290 and 267); 0.90, the low end, for large messages"},
    {"ep_rdma_nodes",
     "Hybrid-EP kernel-only BF16 dispatch on H100 + 400G NICs at 16 SMs, 4096 tokens, hidden "
     "7168, top-8 (DeepEP docs/README_Hybrid-EP.md): IB bandwidth x (N-1)/N per NIC of 50 GB/s, "
     "16 ranks 71.71 / 2, 32 ranks 57.69 x 3/4, 64 ranks 49.97 x 7/8; DeepEP's EP32 / EP64 H800 "
     "figures agree"},
    {"ep_rdma_combine_nodes",
     "the same Hybrid-EP table's combine at 16 SMs: 62.95 / 2, 57.46 x 3/4, 49.77 x 7/8 GB/s of "
     "50"},
    {"ep_rdma_sm_bytes_s",
     "the same Hybrid-EP table's 4-SM rows per SM, dispatch and combine averaged: (44.40 + "
     "52.00) / 2 / 2 / 4, (52.60 + 51.00) / 2 x 3/4 / 4, (48.00 + 46.00) / 2 x 7/8 / 4 GB/s"},
    {"ep_rdma_efficiency", "ep_rdma_nodes' 8-node value, for a group beyond that table"},
};

static const char *PHASE_KEYS[SIM_PHASES] = {"fwd", "bwd", "bwd_dw"};

static const field *field_named(const char *key) {
    for (size_t i = 0; i < NFIELDS; i++)
        if (strcmp(FIELDS[i].key, key) == 0) return &FIELDS[i];
    return NULL;
}

int sim_calib_each_published(const sim_calib *c,
                             void (*fn)(const char *key, const char *source, void *ctx),
                             void *ctx) {
    sim_calib d;
    sim_calib_default(&d);
    int n = 0;
    for (size_t i = 0; i < sizeof PUBLISHED / sizeof PUBLISHED[0]; i++) {
        const field *f = field_named(PUBLISHED[i].key);
        /* every key names a number or table of FIELDS (test_published_provenance counts them) */
        if (!f || (f->type != K_NUM && f->type != K_TABLE)) continue;
        size_t size = f->type == K_NUM ? sizeof(double) : sizeof(sim_table);
        if (memcmp((const char *)c + f->off, (const char *)&d + f->off, size) != 0) continue;
        fn(PUBLISHED[i].key, PUBLISHED[i].source, ctx);
        n++;
    }
    sim_calib_free(&d);
    return n;
}

/* ---- loading ------------------------------------------------------------------------------ */

typedef struct {
    const char *path;
    char *err;
} ctx;

static int bad(ctx *x, const char *fmt, ...) {
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(x->err, EP_ERRLEN, "--calib %.300s: %s", x->path, what);
    return -1;
}

static int load_table(ctx *x, sim_table *t, json_t *v, const char *key) {
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n == 0 || n > SIM_CALIB_MAX_POINTS)
        return bad(x, "key %s: expected 1..%d [x, y] pairs", key, SIM_CALIB_MAX_POINTS);
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(v, i);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_number(json_array_get(p, 0)) ||
            !json_is_number(json_array_get(p, 1)))
            return bad(x, "key %s: an entry is not an [x, y] pair", key);
        double px = json_number_value(json_array_get(p, 0));
        double py = json_number_value(json_array_get(p, 1));
        if (!(px > 0) || !(py > 0) || (i > 0 && !(px > t->x[i - 1])))
            return bad(x, "key %s: entries need x > 0, y > 0 and x ascending", key);
        t->x[i] = px;
        t->y[i] = py;
    }
    t->n = (int)n;
    return 0;
}

static int load_number(ctx *x, double *dst, json_t *v, const char *key) {
    if (!json_is_number(v) || !(json_number_value(v) >= 0))
        return bad(x, "key %s needs a number >= 0", key);
    *dst = json_number_value(v);
    return 0;
}

/* {"fwd": [[5 numbers], ...], "bwd": ..., "bwd_dw": ...} into three tables */
static int load_shapes(ctx *x, sim_shape_table *tabs, json_t *v, const char *key, shape_kind kind) {
    if (!json_is_object(v)) return bad(x, "key %s: expected an object of phases", key);
    const char *ph;
    json_t *rows;
    json_object_foreach(v, ph, rows) {
        int p = -1;
        for (int i = 0; i < SIM_PHASES; i++)
            if (strcmp(ph, PHASE_KEYS[i]) == 0) p = i;
        if (p < 0) return bad(x, "key %s: unknown phase \"%s\"", key, ph);
        if (!json_is_array(rows)) return bad(x, "key %s.%s: expected an array of rows", key, ph);
        sim_shape_free(&tabs[p]);
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row) {
            /* [m, n, k, batch, efficiency] of a grid point, [..., 1] of a model's own shape */
            double r[6] = {0};
            size_t len = json_is_array(row) ? json_array_size(row) : 0;
            int ok = len == 5 || len == 6;
            for (size_t j = 0; ok && j < len; j++) {
                json_t *e = json_array_get(row, j);
                ok = json_is_number(e) && (j == 5 ? json_number_value(e) == 1
                                                  : json_number_value(e) > 0);
                if (ok) r[j] = json_number_value(e);
            }
            if (!ok)
                return bad(x, "key %s.%s: rows are 5 positive numbers (and 1 for a model shape)",
                           key, ph);
            double f[SIM_SHAPE_DIMS];
            if (kind == SH_GEMM)
                sim_gemm_features(p == EP_PHASE_BWD_DW - 1, r[0], r[1], r[2], r[3], f);
            else
                memcpy(f, r, sizeof f);
            if ((r[5] ? sim_shape_add_exact : sim_shape_add)(&tabs[p], f, r[4]) != 0)
                return bad(x, "out of memory");
        }
        if (sim_shape_sort(&tabs[p]) != 0) return bad(x, "out of memory");
    }
    return 0;
}

/* {"base_s": s, "efficiency": [[bytes, eff], ...]} */
static int load_curve(ctx *x, sim_coll_curve *cv, json_t *v, const char *key) {
    json_t *base = json_object_get(v, "base_s"), *eff = json_object_get(v, "efficiency");
    if (!json_is_object(v) || json_object_size(v) != 2 || !base || !eff)
        return bad(x, "key %s: expected {\"base_s\", \"efficiency\"}", key);
    return load_number(x, &cv->base_s, base, key) || load_table(x, &cv->efficiency, eff, key);
}

/* {"alltoall": {"base_s": s, "efficiency": [[bytes, eff], ...]}, ...} */
static int load_nccl(ctx *x, sim_coll_curve *curves, json_t *v, const char *key) {
    if (!json_is_object(v)) return bad(x, "key %s: expected an object of operations", key);
    const char *op;
    json_t *cv;
    json_object_foreach(v, op, cv) {
        int k = -1;
        for (int i = 0; i < SIM_COLL_NUM; i++)
            if (strcmp(op, sim_coll_name((sim_coll)i)) == 0) k = i;
        if (k < 0) return bad(x, "key %s: unknown operation \"%s\"", key, op);
        char sub[128];
        snprintf(sub, sizeof sub, "%s.%s", key, op);
        if (load_curve(x, &curves[k], cv, sub)) return -1;
    }
    return 0;
}

int sim_calib_load(sim_calib *c, const char *path, char err[EP_ERRLEN]) {
    ctx x = {path, err};
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, EP_ERRLEN, "--calib %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) { /* a directory, a FIFO: not a calibration file */
        snprintf(err, EP_ERRLEN, "--calib %s: %s", path,
                 S_ISDIR(st.st_mode) ? "a directory, not a calibration file"
                                     : "not a regular file");
        return -1;
    }
    if (st.st_size == 0) {
        snprintf(err, EP_ERRLEN, "--calib %s: the file is empty", path);
        return -1;
    }
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        snprintf(err, EP_ERRLEN, "--calib %s: %s (line %d)", path, je.text, je.line);
        return -1;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return bad(&x, "expected a JSON object");
    }
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(root, key, v) {
        const field *f = field_named(key);
        if (!f) {
            /* "_comment" style keys document a file without changing it */
            if (key[0] == '_') continue;
            rc = bad(&x, "unknown key \"%s\"", key);
            break;
        }
        char *dst = (char *)c + f->off;
        switch (f->type) {
        case K_NUM:
            rc = load_number(&x, (double *)dst, v, key);
            break;
        case K_TABLE:
            rc = load_table(&x, (sim_table *)dst, v, key);
            break;
        case K_SHAPES:
            rc = load_shapes(&x, (sim_shape_table *)dst, v, key, f->shape);
            break;
        case K_NCCL:
            rc = load_nccl(&x, (sim_coll_curve *)dst, v, key);
            break;
        case K_CURVE:
            rc = load_curve(&x, (sim_coll_curve *)dst, v, key);
            break;
        }
        if (rc) break;
    }
    json_decref(root);
    if (rc == 0) snprintf(c->source, sizeof c->source, "%s", path);
    return rc;
}

/* ---- writing ------------------------------------------------------------------------------ */

static void write_table(const sim_table *t, FILE *f) {
    fputc('[', f);
    for (int j = 0; j < t->n; j++)
        fprintf(f, "%s[%.6g,%.6g]", j ? "," : "", t->x[j], t->y[j]);
    fputc(']', f);
}

static void write_curve(const sim_coll_curve *cv, FILE *f) {
    fprintf(f, "{\"base_s\":%.6g,\"efficiency\":", cv->base_s);
    write_table(&cv->efficiency, f);
    fputc('}', f);
}

static void write_shapes(const sim_shape_table *tabs, shape_kind kind, FILE *f, int points) {
    fputc('{', f);
    for (int p = 0; p < SIM_PHASES; p++) {
        const sim_shape_table *t = &tabs[p];
        fprintf(f, "%s\"%s\":", p ? "," : "", PHASE_KEYS[p]);
        if (!points) {
            fprintf(f, "%d", t->n);
            continue;
        }
        fputc('[', f);
        for (int i = 0; i < t->n; i++) {
            const double *x = t->x[i];
            double r[4] = {x[0], x[1], x[2], x[3]};
            if (kind == SH_GEMM && p == EP_PHASE_BWD_DW - 1) /* features back to m, n, k */
                r[0] = x[1], r[1] = x[2], r[2] = x[0];
            fprintf(f, "%s\n[%.6g,%.6g,%.6g,%.6g,%.6g%s]", i ? "," : "", r[0], r[1], r[2], r[3],
                    t->y[i], t->exact[i] ? ",1" : "");
        }
        fputc(']', f);
    }
    fputc('}', f);
}

void sim_calib_write_json(const sim_calib *c, FILE *f, int points) {
    fputc('{', f);
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *p = (const char *)c + FIELDS[i].off;
        if (FIELDS[i].type == K_CURVE && ((const sim_coll_curve *)p)->efficiency.n == 0)
            continue; /* not measured: the scalars apply */
        if (FIELDS[i].type == K_NCCL) {
            int any = 0;
            for (int k = 0; k < SIM_COLL_NUM; k++)
                any |= ((const sim_coll_curve *)p)[k].efficiency.n > 0;
            if (!any) continue; /* none measured: the main curves, or the scalars */
        }
        if (FIELDS[i].optional && FIELDS[i].type == K_TABLE) {
            if (((const sim_table *)p)->n == 0) continue;
        } else if (FIELDS[i].optional) {
            const sim_shape_table *t = (const sim_shape_table *)p;
            if (t[0].n + t[1].n + t[2].n == 0) continue;
        }
        fprintf(f, "%s%s\"%s\":", i ? "," : "", points ? "\n" : "", FIELDS[i].key);
        switch (FIELDS[i].type) {
        case K_NUM:
            fprintf(f, "%.6g", *(const double *)p);
            break;
        case K_TABLE:
            write_table((const sim_table *)p, f);
            break;
        case K_SHAPES:
            write_shapes((const sim_shape_table *)p, FIELDS[i].shape, f, points);
            break;
        case K_NCCL: {
            const sim_coll_curve *cv = (const sim_coll_curve *)p;
            fputc('{', f);
            int first = 1;
            for (int k = 0; k < SIM_COLL_NUM; k++) {
                if (cv[k].efficiency.n == 0) continue;
                fprintf(f, "%s\"%s\":", first ? "" : ",", sim_coll_name((sim_coll)k));
                write_curve(&cv[k], f);
                first = 0;
            }
            fputc('}', f);
            break;
        }
        case K_CURVE:
            write_curve((const sim_coll_curve *)p, f);
            break;
        }
    }
    fputc('}', f);
}
