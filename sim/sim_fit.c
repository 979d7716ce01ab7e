/* epsim calibrate: the cost model fitted from epref's raw calibration files (sim_fit.h;
 * docs/calibration.md, "The fit"). Every fitted number is chosen so that the simulator's own
 * formula (sim_cost.c for compute, sim_algo.c + the engine for NCCL) gives back the measured time
 * of each record; the report prints how closely it does. */
#include "sim_fit.h"

#include <jansson.h>
#include <math.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xbt/log.h>

#include "ep_cost.h"
#include "ep_io.h"
#include "ep_opts.h"
#include "sim_json.h"
#include "ep_stats.h"
#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_cost.h"
#include "sim_fit_draw.h"
#include "ep_xfer.h"
#include "sim_platform.h"
#include "sim_power.h"

#define MAX_DIRS 16

enum {
    F_COMPUTE,
    F_COMM,
    F_HOST,
    F_INTERFERENCE,
    F_DISPATCH,
    F_COMBINE,
    F_CORUN,
    F_KERNELS,
    F_HOST_STACK,
    F_HOST_LAYERS,
    F_POWER,
    F_PERMUTE,
    F_MAMBA,
    F_EXPERT_EXTRAS,
    F_STEP_HOST,
    F_DRAW,
    F_POWER_RISE,
    F_NUM
};
static const char *FILES[F_NUM] = {
    "compute.json", "comm.json",      "host.json",    "interference.json",  "dispatch.json",
    "combine.json", "corun.json",     "kernels.json", "host_torch.json",    "host_megatron.json",
    "power.json",   "permute.json",   "mamba.json",   "expert_extras.json", "step_megatron.json",
    "draw.json",    "power_rise.json"};

enum { HOST_LAYERS_MAX = 16, HOST_LAUNCHES_MAX = 16 };

typedef struct {
    json_t *root[F_NUM]; /* the file's array, or NULL where no DIR has it */
    char path[F_NUM][4200];
    char completed[F_NUM][1024]; /* later files that added records (merge_missing), for _meta */
    sim_platform plat;
    double peak, hbm, bw, lat; /* GPU 0, and the route GPU 0 -> GPU 1 */
    sim_calib c;
    /* kinds whose shape table kernels.json gives (its fitted bf16 records replace compute.json's
     * records of that kind: another software stack's kernels for the same ops) */
    int from_kernels[EP_OP_NUM_KINDS];
    int nkernels, nfp8; /* kernels.json records fitted, FP8 ones among them */
    int grid_only;      /* compute.json without the records of model shapes (--grid-only) */
    const char *model_shapes[MAX_DIRS]; /* the --model-shapes values that added records */
    int nmodel_shapes;
    const char *const *kind_from; /* the --kind-from KIND[/DTYPE]:FILE values, in order */
    int nkind_from;
    /* host_megatron.json's layers: measured beside epsim's host time, for the report */
    int nhost_layers;
    char host_layer_line[HOST_LAYERS_MAX][200];
    int comm_layer, ncomm_launches; /* the layer comm_call_s came from, and its launches */
    /* the fitted dense layer's name and median host time: step_megatron.json's launches are
     * scaled to it; the launches and models its step costs came from */
    const char *host_dense_name;
    double host_dense_s;
    int nstep_launches, nstep_models;
    /* power.json: median powers of a copy, attention and GEMMs at the cap, and the GEMM's demand
     * at full clock that the table implies (W); recovery records the time constant came from */
    double power_watts[4];
    int npower_tau, npower_rise;
    char err[EP_ERRLEN];
} fit;

static int fail2(const char *msg) {
    fprintf(stderr, "epsim calibrate: %s\n", msg);
    return 2;
}

/* ---- reading ------------------------------------------------------------------------------ */

/* Files that a later DIR completes: its records whose key fields no loaded record has join the
 * first DIR's file. host.json: a one-GPU machine measures no NCCL launch, the two-GPU files of the
 * same GPU add it. interference.json: a machine measured without an aggressor (the waiting NCCL
 * all-to-all was measured on 2 x H200 only) takes that aggressor's records from a machine of the
 * same SMs and NCCL. comm.json: the operations timed over two ranks (a pair of a bigger machine,
 * or a two-GPU machine of the same GPU and NVLink) join those over all of the first machine's
 * GPUs: the curves of groups of two (docs/calibration.md, "NCCL curves by group size"). A victim
 * grid's records (source "shapes") are their own key, so they neither hide nor are hidden by the
 * one-victim records. */
static const char *const MERGE_KEYS[F_NUM][3] = {
    [F_HOST] = {"what", NULL},
    [F_INTERFERENCE] = {"victim", "aggressor", "source"},
    [F_COMM] = {"op", "ranks"}, /* a two-rank group's curves beside those over every GPU */
};

/* Files every DIR adds all its records to, in turn: draw.json, one launch per DIR
 * (sim_fit_draw.h). Records every DIR adds to a merged file: interference.json's victim grid, one
 * launch per DIR (equal shapes keep their median in the fitted table). */
static const int APPEND_ALL[F_NUM] = {[F_DRAW] = 1};

static int appends(int which, json_t *r) {
    return which == F_INTERFERENCE && strcmp(sim_json_str(r, "source"), "shapes") == 0;
}

static int same_key(int which, json_t *a, json_t *b) {
    for (int k = 0; k < 3 && MERGE_KEYS[which][k]; k++) {
        json_t *x = json_object_get(a, MERGE_KEYS[which][k]),
               *y = json_object_get(b, MERGE_KEYS[which][k]);
        if (!(x ? y && json_equal(x, y) : !y)) return 0; /* strings and numbers alike */
    }
    return 1;
}

static int merge_missing(int which, json_t *into, json_t *more) {
    int added = 0;
    size_t loaded = json_array_size(into); /* a later file's own records do not hide each other */
    for (size_t i = 1; i < json_array_size(more); i++) {
        json_t *r = json_array_get(more, i);
        int have = 0;
        for (size_t j = 1; j < loaded && !have && !appends(which, r); j++)
            have = same_key(which, r, json_array_get(into, j));
        if (!have) {
            json_array_append(into, r);
            added++;
        }
    }
    return added;
}

/* Loads DIR/file (or DIR/file.xz) from the first DIR that has it; an array whose first element is
 * the meta. host.json and interference.json: the first one, completed by the later ones
 * (merge_missing). */
static int load(fit *x, int which, char **dirs, int ndirs) {
    for (int d = 0; d < ndirs; d++) {
        char path[4200], dir[4096];
        snprintf(dir, sizeof dir, "%s", dirs[d]);
        char *only = strchr(dir, ':'); /* DIR:file,file takes only those files from DIR */
        if (only) {
            *only++ = 0;
            char list[4096];
            snprintf(list, sizeof list, ",%s,", only);
            char want[64];
            snprintf(want, sizeof want, ",%s,", FILES[which]);
            if (!strstr(list, want)) continue;
        }
        char name[4200];
        snprintf(name, sizeof name, "%s/%s", dir, FILES[which]);
        if (ep_infile_find(name, path, sizeof path) != 0) continue; /* or committed as FILE.xz */
        json_error_t je;
        json_t *r = sim_json_load(path, 0, &je);
        if (!r || !json_is_array(r) || json_array_size(r) < 1 ||
            !json_is_object(json_object_get(json_array_get(r, 0), "meta"))) {
            snprintf(x->err, EP_ERRLEN, "%s: not a calibration file (%s, line %d)", path,
                     r ? "expected [{\"meta\":...}, records...]" : je.text, r ? 0 : je.line);
            json_decref(r);
            return -1;
        }
        if (!x->root[which]) {
            x->root[which] = r;
            snprintf(x->path[which], sizeof x->path[which], "%s", path);
            if (!MERGE_KEYS[which][0] && !APPEND_ALL[which]) return 0;
            continue;
        }
        int added;
        if (APPEND_ALL[which]) {
            added = (int)json_array_size(r) - 1;
            if (json_array_extend(x->root[which], r) != 0) added = 0;
        } else {
            added = merge_missing(which, x->root[which], r);
        }
        size_t used = strlen(x->completed[which]);
        if (added > 0 && used < sizeof x->completed[which])
            snprintf(x->completed[which] + used, sizeof x->completed[which] - used, "%s%s (%d)",
                     used ? ", " : "", path, added);
        json_decref(r);
    }
    return 0;
}

/* ---- choosing compute records (--grid-only, --model-shapes, --kind-from) ------------------ */

/* A record of one of a model's own op shapes (source "model:<name>"), not of the grid. */
static int is_model_record(json_t *r, const void *unused) {
    (void)unused;
    return strncmp(sim_json_str(r, "source"), "model:", 6) == 0;
}

/* A record of op kind k->kind and, where k->dtype is set, of that element type (records without a
 * "dtype" are bf16). */
typedef struct {
    char kind[64];
    const char *dtype;
} kind_dtype;

static int is_kind_record(json_t *r, const void *arg) {
    const kind_dtype *k = arg;
    const char *dt = sim_json_str(r, "dtype");
    return strcmp(sim_json_str(r, "kind"), k->kind) == 0 &&
           (!k->dtype || strcmp(*dt ? dt : "bf16", k->dtype) == 0);
}

typedef int (*record_test)(json_t *r, const void *arg);

/* Removes the records of a (after its meta) that pass; returns how many. */
static int remove_records(json_t *a, record_test test, const void *arg) {
    int n = 0;
    for (size_t i = 1; a && i < json_array_size(a);)
        if (test(json_array_get(a, i), arg))
            json_array_remove(a, i), n++;
        else
            i++;
    return n;
}

/* Appends the records of from (after its meta) that pass to a; returns how many. With gpu_only,
 * copies without the host times (host_us, host_first_us): GPU times joining another machine's
 * file, whose host costs are that machine's own. */
static int append_records(json_t *a, json_t *from, record_test test, const void *arg,
                          int gpu_only) {
    int n = 0;
    for (size_t i = 1; i < json_array_size(from); i++) {
        json_t *r = json_array_get(from, i);
        if (!test(r, arg)) continue;
        if (!gpu_only) {
            json_array_append(a, r), n++;
            continue;
        }
        json_t *c = json_deep_copy(r);
        if (!c) return -1;
        json_object_del(c, "host_us"), json_object_del(c, "host_first_us");
        json_array_append_new(a, c), n++;
    }
    return n;
}

/* Another compute.json named by option opt, as its array; NULL with x->err set. */
static json_t *load_compute(fit *x, const char *opt, const char *path) {
    json_error_t je;
    json_t *r = sim_json_load(path, 0, &je);
    if (r && json_is_array(r)) return r;
    snprintf(x->err, EP_ERRLEN, "%s %s: not a compute.json (%s)", opt, path,
             r ? "expected an array" : je.text);
    json_decref(r);
    return NULL;
}

/* Which loaded file records array more belongs with: kernels.json when more's meta says so
 * (Megatron-class kernels timed through PyTorch), else compute.json. */
static int same_type(json_t *more) {
    json_t *meta = json_object_get(json_array_get(more, 0), "meta");
    const char *file = json_string_value(json_object_get(meta, "file"));
    return file && !strcmp(file, "kernels.json") ? F_KERNELS : F_COMPUTE;
}

/* One --kind-from [+]KIND[/DTYPE]:FILE: FILE's records of that kind replace those of the loaded
 * file of FILE's type (with '+': join them without their host times, another part of the same
 * grid timed in another call); returns how many, or -1 (x->err says why). */
static int kind_from_one(fit *x, const char *kind_from) {
    kind_dtype kd = {.dtype = NULL};
    int join = kind_from[0] == '+';
    const char *spec = kind_from + join, *colon = strchr(spec, ':');
    size_t k = colon ? (size_t)(colon - spec) : 0;
    if (k == 0 || k >= sizeof kd.kind) {
        snprintf(x->err, EP_ERRLEN, "--kind-from %s: expected [+]KIND[/DTYPE]:FILE", kind_from);
        return -1;
    }
    memcpy(kd.kind, spec, k);
    kd.kind[k] = 0;
    char *slash = strchr(kd.kind, '/');
    if (slash) *slash = 0, kd.dtype = slash + 1;
    json_t *more = load_compute(x, "--kind-from", colon + 1);
    if (!more) return -1;
    int w = same_type(more);
    json_t *into = x->root[w];
    if (!into) {
        snprintf(x->err, EP_ERRLEN, "--kind-from %s: no %s loaded to change", kind_from,
                 w == F_KERNELS ? "kernels.json" : "compute.json");
        json_decref(more);
        return -1;
    }
    if (!join) remove_records(into, is_kind_record, &kd);
    int n = append_records(into, more, is_kind_record, &kd, join);
    json_decref(more);
    if (n < 0) {
        snprintf(x->err, EP_ERRLEN, "--kind-from %s: out of memory", kind_from);
        return -1;
    }
    if (n == 0) {
        snprintf(x->err, EP_ERRLEN, "--kind-from %s: no %s%s%s records there", kind_from, kd.kind,
                 kd.dtype ? " " : "", kd.dtype ? kd.dtype : "");
        return -1;
    }
    return n;
}

/* The model records (source model:*) of the kinds in a --model-shapes prefix (none: every kind). */
typedef struct {
    char kinds[EP_OP_NUM_KINDS][32];
    int n;
} kind_set;

static int is_model_record_of(json_t *r, const void *arg) {
    const kind_set *k = arg;
    if (!is_model_record(r, NULL)) return 0;
    for (int i = 0; i < k->n; i++)
        if (!strcmp(sim_json_str(r, "kind"), k->kinds[i])) return 1;
    return k->n == 0;
}

/* One --model-shapes [KIND,...:]FILE: FILE's model records (of those op kinds only) join the loaded
 * compute.json; returns how many, or -1 (x->err says why). A prefix is what precedes the first ':'
 * when it holds only lower-case letters, '_' and ','. */
static int model_shapes_one(fit *x, const char *spec) {
    kind_set ks = {.n = 0};
    const char *path = spec, *colon = strchr(spec, ':');
    if (colon && colon > spec &&
        strspn(spec, "abcdefghijklmnopqrstuvwxyz_,") == (size_t)(colon - spec)) {
        for (const char *p = spec; p < colon;) {
            size_t k = strcspn(p, ",:");
            if (k == 0 || k >= sizeof ks.kinds[0] || ks.n == EP_OP_NUM_KINDS) {
                snprintf(x->err, EP_ERRLEN, "--model-shapes %s: expected [KIND,...:]FILE", spec);
                return -1;
            }
            memcpy(ks.kinds[ks.n], p, k);
            ks.kinds[ks.n][k] = 0;
            if (sim_json_kind(ks.kinds[ks.n]) == EP_OP_NUM_KINDS) {
                snprintf(x->err, EP_ERRLEN, "--model-shapes %s: %s is no op kind", spec,
                         ks.kinds[ks.n]);
                return -1;
            }
            ks.n++;
            p += k + (p[k] == ',');
        }
        path = colon + 1;
    }
    json_t *more = load_compute(x, "--model-shapes", path);
    if (!more) return -1;
    int n = append_records(x->root[F_COMPUTE], more, is_model_record_of, &ks, 0);
    json_decref(more);
    if (n < 0) snprintf(x->err, EP_ERRLEN, "--model-shapes %s: out of memory", spec);
    if (n == 0 && ks.n) {
        snprintf(x->err, EP_ERRLEN, "--model-shapes %s: no model records of those kinds there",
                 spec);
        return -1;
    }
    return n;
}

/* --model-shapes [KINDS:]FILE, each in turn (model_shapes_one): the model records of another
 * compute.json join the loaded one, so a grid timed on one day and the validation models' own
 * shapes timed on another make one calibration (with KINDS, only those op kinds: the GEMMs timed
 * on one machine, the memory-bound ops on another).
 * --kind-from KIND[/DTYPE]:FILE, each in turn (kind_from_one): the records of one op kind (of one
 * dtype) come from another file instead - that kind timed again in a later call (`epref bench
 * calib --parts attention`) or another implementation of it (TE's multi-stream expert GEMMs).
 * --grid-only: the model records are left out, so the calibration can be held against models whose
 * shapes it never timed (docs/validation.md, "Held out"). Kinds first, then model shapes, then
 * grid-only; *nkind, *nmodel, *ndropped say how many records each moved, and x->model_shapes
 * keeps the specs that added any. Returns 0, or -1 (x->err says why). */
static int choose_records(fit *x, const char *const *model_shapes, int nmodel_shapes, int grid_only,
                          int *nkind, int *nmodel, int *ndropped) {
    json_t *a = x->root[F_COMPUTE];
    *nkind = *nmodel = *ndropped = 0;
    if (nmodel_shapes && !grid_only && !a) { /* --kind-from checks its own target file */
        snprintf(x->err, EP_ERRLEN, "--model-shapes: no compute.json to change");
        return -1;
    }
    for (int i = 0; i < x->nkind_from; i++) {
        int n = kind_from_one(x, x->kind_from[i]);
        if (n < 0) return -1;
        *nkind += n;
    }
    for (int i = 0; i < nmodel_shapes && !grid_only; i++) {
        int n = model_shapes_one(x, model_shapes[i]);
        if (n < 0) return -1;
        if (n > 0) x->model_shapes[x->nmodel_shapes++] = model_shapes[i];
        *nmodel += n;
    }
    if (grid_only) *ndropped = remove_records(a, is_model_record, NULL);
    return 0;
}

/* Records of a file (after its meta), as a jansson array index range. */
#define FOR_RECORDS(x, which, i, rec)                                                              \
    for (size_t i = 1; (x)->root[which] && i < json_array_size((x)->root[which]) &&                \
                       ((rec) = json_array_get((x)->root[which], i));                              \
         i++)

/* ---- compute ------------------------------------------------------------------------------ */

static int is_memory_kind(ep_op_kind k) {
    return k != EP_OP_GEMM && k != EP_OP_GROUPED_GEMM && k != EP_OP_ATTENTION &&
           k < EP_OP_A2A_DISPATCH;
}

/* The op a compute record stands for (a record without a time stands for none). */
static int record_op(json_t *r, ep_op *op) {
    if (sim_json_op(r, op) != 0) return -1;
    return sim_json_num(r, "time_us") > 0 ? 0 : -1;
}

/* Memory-bound kernels: HBM efficiency by bytes, medians per quarter decade. */
static int fit_memory(fit *x, double t0) {
    int cap = 0, n = 0;
    double *b = NULL, *e = NULL;
    json_t *r;
    FOR_RECORDS(x, F_COMPUTE, i, r) {
        ep_op op;
        if (record_op(r, &op) || !is_memory_kind(op.kind) || !(op.bytes > 0)) continue;
        double t = sim_json_num(r, "time_us") * 1e-6 - t0;
        if (!(t > 0)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            double *nb = realloc(b, sizeof *b * (size_t)cap), *ne = NULL;
            if (nb) b = nb;
            if (nb) ne = realloc(e, sizeof *e * (size_t)cap);
            if (ne) e = ne;
            if (!nb || !ne) {
                free(b);
                free(e);
                return -1;
            }
        }
        b[n] = op.bytes;
        e[n] = op.bytes / (x->hbm * t);
        n++;
    }
    if (n == 0) {
        free(b);
        free(e);
        return 0;
    }
    /* bin by quarter decades of bytes; each bin one point (median bytes, median efficiency) */
    sim_table tab = {0};
    int lo = (int)floor(4 * log10(b[0])), hi = lo;
    for (int i = 0; i < n; i++) {
        int k = (int)floor(4 * log10(b[i]));
        if (k < lo) lo = k;
        if (k > hi) hi = k;
    }
    double *vb = malloc(sizeof *vb * (size_t)n), *ve = malloc(sizeof *ve * (size_t)n);
    if (!vb || !ve) {
        free(vb), free(ve), free(b), free(e);
        return -1;
    }
    for (int k = lo; k <= hi && tab.n < SIM_CALIB_MAX_POINTS; k++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if ((int)floor(4 * log10(b[i])) == k) vb[m] = b[i], ve[m] = e[i], m++;
        if (m == 0) continue;
        double mb = ep_median(vb, m), me = ep_median(ve, m);
        if (tab.n > 0 && !(mb > tab.x[tab.n - 1])) continue;
        tab.x[tab.n] = mb;
        tab.y[tab.n] = me;
        tab.n++;
    }
    x->c.memory_efficiency = tab;
    free(vb), free(ve), free(b), free(e);
    return 0;
}

/* kernels.json: a record timed only for comparison (its source is in the meta's "compare_only"
 * list, e.g. the flash backend beside cuDNN attention) */
static int compare_only(const fit *x, json_t *r) {
    json_t *meta = json_object_get(json_array_get(x->root[F_KERNELS], 0), "meta");
    json_t *list = json_object_get(meta, "compare_only");
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *s = json_string_value(json_array_get(list, i));
        if (s && strcmp(s, sim_json_str(r, "source")) == 0) return 1;
    }
    return 0;
}

/* The files whose records the compute fit reads. */
static const int SHAPE_FILES[] = {F_COMPUTE, F_KERNELS};
#define FOR_SHAPE_RECORDS(x, fw, i, rec)                                                           \
    for (int fi_ = 0, fw = 0; fi_ < 2 && ((fw = SHAPE_FILES[fi_]), 1); fi_++)                      \
    FOR_RECORDS(x, fw, i, rec)

static int is_fp8(json_t *r) {
    return strcmp(sim_json_str(r, "dtype"), "fp8") == 0;
}

static int is_shape_kind(ep_op_kind k) {
    return k == EP_OP_GEMM || k == EP_OP_GROUPED_GEMM || k == EP_OP_ATTENTION;
}

/* Whether record r of file w enters the compute fit: kernels.json's bf16 records of the shape
 * kinds (not compare-only; FP8 apart, see want_fp8), compute.json's records of every kind that
 * kernels.json does not give. */
static int want_record(const fit *x, int w, json_t *r, const ep_op *op) {
    if (w == F_KERNELS) return is_shape_kind(op->kind) && !is_fp8(r) && !compare_only(x, r);
    return !x->from_kernels[op->kind];
}

static int want_fp8(const fit *x, int w, json_t *r, const ep_op *op) {
    return w == F_KERNELS && is_fp8(r) && !compare_only(x, r) &&
           (op->kind == EP_OP_GEMM || op->kind == EP_OP_GROUPED_GEMM);
}

/* The kinds kernels.json gives. */
static void mark_kernels(fit *x) {
    json_t *r;
    FOR_RECORDS(x, F_KERNELS, i, r) {
        ep_op op;
        if (record_op(r, &op) || !want_record(x, F_KERNELS, r, &op)) continue;
        x->from_kernels[op.kind] = 1;
    }
}

/* GEMM, grouped GEMM and attention shapes (FP8 GEMMs in their own tables); the flop efficiency
 * of memory-bound kernels that keeps their arithmetic from ever binding (their measured time is
 * set by bytes). */
static int fit_shapes(fit *x, double t0, int *nshape) {
    double vec_need = 0, scan_need = 0;
    json_t *r;
    FOR_SHAPE_RECORDS(x, fw, i, r) {
        ep_op op;
        if (record_op(r, &op) || !(op.flops > 0)) continue;
        int fp8 = want_fp8(x, fw, r, &op);
        if (!fp8 && !want_record(x, fw, r, &op)) continue;
        double t = sim_json_num(r, "time_us") * 1e-6 - t0;
        if (!(t > 0)) continue;
        /* FP8 GEMMs: of the FP8 peak, as the cost model reads them (sim_calib.h) */
        double eff = op.flops / (x->peak * (fp8 ? x->c.fp8_flops_ratio : 1) * t), f[SIM_SHAPE_DIMS];
        int ph = op.phase >= EP_PHASE_FWD ? op.phase - 1 : 0;
        sim_shape_table *tab = NULL;
        if (fw == F_KERNELS) x->nkernels++, x->nfp8 += fp8;
        switch (op.kind) {
        case EP_OP_GEMM:
        case EP_OP_GROUPED_GEMM:
            if (!(op.m > 0 && op.n > 0 && op.k > 0)) continue;
            sim_gemm_features(op.phase == EP_PHASE_BWD_DW, op.m, op.n, op.k, op.batch, f);
            if (fp8)
                tab = op.kind == EP_OP_GEMM ? &x->c.fp8_gemm_shapes[ph]
                                            : &x->c.fp8_grouped_gemm_shapes[ph];
            else
                tab = op.kind == EP_OP_GEMM ? &x->c.gemm_shapes[ph] : &x->c.grouped_gemm_shapes[ph];
            break;
        case EP_OP_ATTENTION:
            f[0] = op.flops, f[1] = sim_json_num(r, "seq"), f[2] = sim_json_num(r, "dqk"),
            f[3] = sim_json_num(r, "dv");
            if (!(f[1] > 0 && f[2] > 0 && f[3] > 0)) continue;
            tab = &x->c.attention_shapes[ph];
            break;
        case EP_OP_SCAN:
            if (eff > scan_need) scan_need = eff;
            continue;
        default:
            if (is_memory_kind(op.kind) && eff > vec_need) vec_need = eff;
            continue;
        }
        /* a model's own shape answers its own series only; the grid answers the rest */
        int exact = is_model_record(r, NULL);
        if ((exact ? sim_shape_add_exact : sim_shape_add)(tab, f, eff) != 0) return -1;
        (*nshape)++;
    }
    for (int ph = 0; ph < SIM_PHASES; ph++)
        if (sim_shape_sort(&x->c.gemm_shapes[ph]) ||
            sim_shape_sort(&x->c.grouped_gemm_shapes[ph]) ||
            sim_shape_sort(&x->c.attention_shapes[ph]) ||
            sim_shape_sort(&x->c.fp8_gemm_shapes[ph]) ||
            sim_shape_sort(&x->c.fp8_grouped_gemm_shapes[ph]))
            return -1;
    if (vec_need > x->c.vector_flops_efficiency) x->c.vector_flops_efficiency = vec_need;
    if (scan_need > x->c.scan_efficiency) x->c.scan_efficiency = scan_need;
    return 0;
}

/* ---- host, interference ------------------------------------------------------------------- */

static void fit_host(fit *x) {
    json_t *r;
    double exec_op = 0, exec_gpu = 0, exec_empty = 0;
    FOR_RECORDS(x, F_HOST, i, r) {
        const char *w = sim_json_str(r, "what");
        double t = sim_json_num(r, "time_us") * 1e-6;
        if (!(t > 0)) continue;
        if (strcmp(w, "launch") == 0) x->c.launch_s = t;
        if (strcmp(w, "exec_op") == 0) exec_op = t;
        if (strcmp(w, "nccl_launch") == 0) x->c.nccl_launch_s = t;
        if (strcmp(w, "host_sync") == 0) x->c.host_sync_s = t;
        if (strcmp(w, "kernel_overhead") == 0) x->c.kernel_overhead_s = t;
        if (strcmp(w, "exec_gap") == 0) x->c.op_gap_s = t;
        if (strcmp(w, "exec_op_gpu") == 0) exec_gpu = t;
        if (strcmp(w, "exec_empty_gpu") == 0) exec_empty = t;
    }
    /* an op that runs nothing: its two events with nothing between, where measured (since
     * 2026-11-29), else what they add around a tiny kernel */
    if (exec_empty > 0)
        x->c.op_event_s = exec_empty;
    else if (exec_gpu > x->c.kernel_overhead_s)
        x->c.op_event_s = exec_gpu - x->c.kernel_overhead_s;
    /* the executor's two events per op, beyond the launch itself */
    if (exec_op > x->c.launch_s) x->c.op_overhead_s = exec_op - x->c.launch_s;
}

/* host_torch.json (scripts/torch_host.py): the host costs of the software stack that drives every
 * kernel from eager PyTorch, as Megatron-LM does. Its time per launched kernel beyond a bare launch
 * becomes the bookkeeping per op (one op of the schedule, one PyTorch call), a fused attention is
 * one call, a CUDA graph's replay is its launch, and NCCL calls cost what torch.distributed's
 * issue costs. Runs after fit_host_calls: it replaces what host.json and compute.json gave. */
static void fit_host_stack(fit *x) {
    json_t *r;
    FOR_RECORDS(x, F_HOST_STACK, i, r) {
        const char *w = sim_json_str(r, "what");
        double t = sim_json_num(r, "time_us") * 1e-6;
        if (!(t > 0)) continue;
        if (strcmp(w, "eager_per_kernel") == 0 && t > x->c.launch_s) {
            x->c.op_overhead_s = t - x->c.launch_s;
            x->c.attention_launch_s = x->c.launch_s;
        }
        if (strcmp(w, "graph_replay") == 0) x->c.graph_launch_s = t;
        if (strcmp(w, "nccl_all_reduce") == 0) x->c.nccl_launch_s = t;
    }
}

/* The host calls (launches, no per-op bookkeeping) that the schedule of `flags` issues for its
 * layer 0 on rank 0, the ops, the expert calls of its expert GEMMs and its communication ops (with
 * a peer). -1 when the flags do not build. */
static int layer_calls(const sim_calib *c, const char *flags, double *calls, int *nops,
                       int *nexperts, int *ncomm, char err[EP_ERRLEN]) {
    ep_config cfg;
    ep_config_defaults(&cfg);
    ep_sched s;
    if (ep_config_parse_text(&cfg, flags, err) || ep_config_validate(&cfg, err) ||
        ep_sched_build(&cfg, &s, err))
        return -1;
    sim_calib bare = *c;
    bare.op_overhead_s = bare.expert_call_s = bare.comm_call_s = 0;
    sim_cost x = {.c = &bare};
    *calls = 0;
    *nops = *nexperts = *ncomm = 0;
    for (int i = 0; i < s.ranks[0].nops; i++) {
        const ep_op *op = &s.ranks[0].ops[i];
        if (op->layer != 0) continue;
        int group = op->group >= 0 ? s.groups[op->group].size : 0;
        *calls += sim_op_host_s(&x, op, group);
        if (op->inner) continue; /* inside another op's call: its launch alone (sim_op_host_s) */
        (*nops)++;
        if (op->kind == EP_OP_GROUPED_GEMM) *nexperts += op->batch > 1 ? op->batch : 1;
        if (ep_op_is_comm(op) && group > 1) (*ncomm)++;
    }
    ep_sched_free(&s);
    return 0;
}

/* host_megatron.json (scripts/megatron_host.py): the host time of Megatron-Core's own layers,
 * forward and backward, with the epsim flags of the same layer, one record per layer and launch.
 * Each layer's time is the median over launches. The dense layer gives the bookkeeping per op of
 * the schedule (its time less the launches, over its ops); the MoE layer, whose experts run one
 * module call each (SequentialMLP), what each expert call adds beyond that (both with a fused
 * core attention where the file has such layers, below), both from the medians over the
 * one-GPU launches. Launches on two GPUs ("ranks": 2) add the layers with communication; the
 * dense one gives what a communication op adds (fit_comm_call). Every other layer of the file is
 * a check of those values: its measured time beside epsim's (printed by epsim calibrate,
 * docs/calibration.md). Runs after fit_host_stack, whose per-op figure it replaces. */
typedef struct {
    const char *name, *config;
    double t[HOST_LAUNCHES_MAX];
    int launch[HOST_LAUNCHES_MAX], ranks[HOST_LAUNCHES_MAX];
    int n;
} host_layer;

/* The index of the layer named `name`, else of the one named `fallback`; -1 without either. */
static int host_layer_of(const host_layer *L, int nl, const char *name, const char *fallback) {
    int f = -1;
    for (int k = 0; k < nl; k++) {
        if (!strcmp(L[k].name, name)) return k;
        if (!strcmp(L[k].name, fallback)) f = k;
    }
    return f;
}

/* Hosts differ from launch to launch by up to 1.55x (docs/calibration.md), so what a layer adds
 * to the dense one is taken launch by launch, as a multiple of that launch's own time per op: for
 * every launch with both layers, (layer - its launches - its ops x the launch's per op) / units
 * / that per op; the median (NAN without a common launch), and the launches in *nlaunch. */
static double per_launch_ratio(const host_layer *L, int dense, int k, const double *calls,
                               const int *nops, int units, int *nlaunch) {
    double ratio[HOST_LAUNCHES_MAX];
    int n = 0;
    for (int i = 0; i < L[k].n && units > 0; i++)
        for (int j = 0; j < L[dense].n; j++) {
            if (L[dense].launch[j] != L[k].launch[i]) continue;
            double op = (L[dense].t[j] - calls[dense]) / nops[dense];
            if (op > 0) ratio[n++] = (L[k].t[i] - calls[k] - nops[k] * op) / units / op;
        }
    if (nlaunch) *nlaunch = n;
    return n ? ep_median(ratio, n) : NAN;
}

/* What a communication op costs Megatron's host beyond a compute op's bookkeeping and NCCL's
 * launch: the layer of the dense pair with its TP communication (dense_sdpa_tp2: sequence-parallel
 * all-gathers and reduce-scatters, timed on two GPUs in the same launches as dense_sdpa), per
 * launch as above; comm_call_s is the median multiple times op_overhead_s. moe_sdpa_ep2 (the
 * alltoall dispatcher's exchanges and host sync at EP 2) is its check. */
static void fit_comm_call(fit *x, const host_layer *L, int nl, int dense, const double *calls,
                          const int *nops, const int *ncomm) {
    int tp = host_layer_of(L, nl, "dense_sdpa_tp2", "");
    x->comm_layer = tp;
    if (tp < 0 || dense < 0 || ncomm[tp] <= ncomm[dense]) return;
    double r =
        per_launch_ratio(L, dense, tp, calls, nops, ncomm[tp] - ncomm[dense], &x->ncomm_launches);
    if (!isnan(r)) x->c.comm_call_s = r > 0 ? r * x->c.op_overhead_s : 0;
}

static int fit_host_layers(fit *x) {
    host_layer L[HOST_LAYERS_MAX];
    int nl = 0;
    json_t *r;
    FOR_RECORDS(x, F_HOST_LAYERS, i, r) {
        double us = sim_json_num(r, "time_us");
        if (strcmp(sim_json_str(r, "pass"), "fwd_bwd") || !(us > 0)) continue;
        int k = 0;
        while (k < nl && strcmp(L[k].name, sim_json_str(r, "layer")))
            k++;
        if (k == nl) {
            if (nl == HOST_LAYERS_MAX) continue;
            L[nl++] =
                (host_layer){.name = sim_json_str(r, "layer"), .config = sim_json_str(r, "config")};
        }
        if (L[k].n < HOST_LAUNCHES_MAX) {
            double ranks = sim_json_num(r, "ranks");
            L[k].launch[L[k].n] = (int)sim_json_num(r, "launch");
            L[k].ranks[L[k].n] = ranks > 1 ? (int)ranks : 1;
            L[k].t[L[k].n++] = us * 1e-6;
        }
    }
    double calls[HOST_LAYERS_MAX], t[HOST_LAYERS_MAX], lo[HOST_LAYERS_MAX], hi[HOST_LAYERS_MAX];
    int nops[HOST_LAYERS_MAX], nexp[HOST_LAYERS_MAX], ncomm[HOST_LAYERS_MAX],
        nused[HOST_LAYERS_MAX];
    int dense, moe;
    for (int k = 0; k < nl; k++) {
        if (layer_calls(&x->c, L[k].config, &calls[k], &nops[k], &nexp[k], &ncomm[k], x->err)) {
            char e[EP_ERRLEN];
            snprintf(e, sizeof e, "%s: layer %s's config: %s", x->path[F_HOST_LAYERS], L[k].name,
                     x->err);
            snprintf(x->err, EP_ERRLEN, "%s", e);
            return -1;
        }
        /* the median over the one-GPU launches where the layer has any: the two-GPU launches
         * (other machines) serve the per-launch fit of the communication op */
        double one[HOST_LAUNCHES_MAX];
        int n1 = 0;
        for (int j = 0; j < L[k].n; j++)
            if (L[k].ranks[j] == 1) one[n1++] = L[k].t[j];
        if (n1 == 0)
            for (int j = 0; j < L[k].n; j++)
                one[n1++] = L[k].t[j];
        lo[k] = hi[k] = one[0];
        for (int j = 1; j < n1; j++)
            lo[k] = fmin(lo[k], one[j]), hi[k] = fmax(hi[k], one[j]);
        nused[k] = n1;
        t[k] = ep_median(one, n1);
    }
    /* the layers fitted: those whose core attention is one fused call (dense_sdpa, moe_sdpa),
     * as Transformer Engine's is in the runs epsim predicts and as epsim's attention op is one
     * launch; files without them, the local spec's unfused attention (dense, moe) */
    dense = host_layer_of(L, nl, "dense_sdpa", "dense");
    moe = host_layer_of(L, nl, "moe_sdpa", "moe");
    if (dense < 0 || !(nops[dense] > 0 && t[dense] > calls[dense])) return 0;
    x->c.op_overhead_s = (t[dense] - calls[dense]) / nops[dense];
    x->host_dense_name = L[dense].name;
    x->host_dense_s = t[dense];
    if (moe >= 0 && nexp[moe] > 0) {
        double rest = t[moe] - calls[moe] - nops[moe] * x->c.op_overhead_s;
        if (rest > 0) x->c.expert_call_s = rest / nexp[moe];
    }
    fit_comm_call(x, L, nl, dense, calls, nops, ncomm);
    x->nhost_layers = nl;
    for (int k = 0; k < nl; k++) {
        double model = calls[k] + nops[k] * x->c.op_overhead_s + nexp[k] * x->c.expert_call_s +
                       ncomm[k] * x->c.comm_call_s;
        snprintf(x->host_layer_line[k], sizeof x->host_layer_line[k],
                 "%-24s measured %8.0f us (median of %d launches, %.0f-%.0f), epsim %8.0f us "
                 "(%+.1f%%)%s",
                 L[k].name, t[k] * 1e6, nused[k], lo[k] * 1e6, hi[k] * 1e6, model * 1e6,
                 100 * (model / t[k] - 1),
                 k == dense || k == moe || k == x->comm_layer ? ", fitted" : "");
    }
    return 0;
}

/* Least squares y = a + b n over k points; 0 when n does not vary. */
static int line_fit(const double *n, const double *y, int k, double *a, double *b) {
    double sn = 0, sy = 0, snn = 0, sny = 0;
    for (int i = 0; i < k; i++)
        sn += n[i], sy += y[i], snn += n[i] * n[i], sny += n[i] * y[i];
    double d = k * snn - sn * sn;
    if (k < 2 || !(d > 0)) return 0;
    *b = (k * sny - sn * sy) / d;
    *a = (sy - *b * sn) / k;
    return 1;
}

enum { STEP_MODELS_MAX = 32 };

/* step_megatron.json (scripts/megatron_step_host.py): the host time of Megatron's step outside
 * the layers (finalize_model_grads, the optimizer step, zeroing the gradients) of models with
 * different numbers of parameter tensors under the distributed optimizer, its parts, and in the
 * same rounds the dense layer host_megatron.json fits the per-op cost from. Three parts, each a
 * line in the tensors fitted per launch by least squares over the models and scaled by the fitted
 * layer's median host time over this launch's (hosts differ by up to 1.55x: docs/calibration.md;
 * without host_megatron.json the launch's own times): before the gradient norm's read-back
 * (finalize and the gradient copies: optimizer_tensor_s), the copy of the updated parameters
 * (optimizer_copy_tensor_s), and the rest of the tail after the read-back (the norm, clipping,
 * Adam's issue, zeroing: optimizer_sync_tensor_s); optimizer_step_s is the three intercepts.
 * DDP's records (distopt 0) give its tail's slope over the sum of those three slopes
 * (optimizer_ddp_factor). Medians over the launches. */
enum { STEP_PRE, STEP_COPY, STEP_POST, STEP_PARTS };
static const char *const STEP_PIECES[] = {"tail", "finalize", "step.copy_grads",
                                          "step.copy_params"};
enum { PIECE_TAIL, PIECE_FINALIZE, PIECE_COPY_GRADS, PIECE_COPY_PARAMS, NPIECES };

static void fit_step_host(fit *x) {
    double fixed[HOST_LAUNCHES_MAX], slope[STEP_PARTS][HOST_LAUNCHES_MAX], ddp[HOST_LAUNCHES_MAX];
    int nl = 0, launches[HOST_LAUNCHES_MAX], nmodels = 0;
    json_t *r;
    FOR_RECORDS(x, F_STEP_HOST, i, r) {
        int l = (int)sim_json_num(r, "launch"), seen = 0;
        for (int j = 0; j < nl; j++)
            seen |= launches[j] == l;
        if (!seen && nl < HOST_LAUNCHES_MAX) launches[nl++] = l;
    }
    int nfit = 0;
    for (int j = 0; j < nl; j++) {
        const char *model[STEP_MODELS_MAX];
        double n[STEP_MODELS_MAX], t[STEP_MODELS_MAX][NPIECES], layer = NAN;
        double dn[STEP_MODELS_MAX], dtail[STEP_MODELS_MAX]; /* DDP's tails */
        int k = 0, kd = 0;
        FOR_RECORDS(x, F_STEP_HOST, i, r) {
            if ((int)sim_json_num(r, "launch") != launches[j]) continue;
            if (!strcmp(sim_json_str(r, "what"), "megatron_layer") &&
                !strcmp(sim_json_str(r, "layer"),
                        x->host_dense_name ? x->host_dense_name : "dense_sdpa"))
                layer = sim_json_num(r, "time_us") * 1e-6;
            if (strcmp(sim_json_str(r, "what"), "megatron_step")) continue;
            if (sim_json_num(r, "distopt") == 0) {
                if (!strcmp(sim_json_str(r, "piece"), "tail") && kd < STEP_MODELS_MAX)
                    dn[kd] = sim_json_num(r, "tensors"),
                    dtail[kd++] = sim_json_num(r, "time_us") * 1e-6;
                continue;
            }
            if (sim_json_num(r, "distopt") != 1) continue;
            int p = 0;
            while (p < NPIECES && strcmp(STEP_PIECES[p], sim_json_str(r, "piece")))
                p++;
            if (p == NPIECES) continue;
            const char *m = sim_json_str(r, "model");
            int q = 0;
            while (q < k && strcmp(model[q], m))
                q++;
            if (q == k) {
                if (k == STEP_MODELS_MAX) continue;
                model[k] = m, n[k] = sim_json_num(r, "tensors");
                for (int z = 0; z < NPIECES; z++)
                    t[k][z] = NAN;
                k++;
            }
            t[q][p] = sim_json_num(r, "time_us") * 1e-6;
        }
        double scale = x->host_dense_s > 0 && layer > 0 ? x->host_dense_s / layer : 1;
        double y[STEP_PARTS][STEP_MODELS_MAX], nn[STEP_MODELS_MAX];
        int m = 0;
        for (int q = 0; q < k; q++) {
            double pre = t[q][PIECE_FINALIZE] + t[q][PIECE_COPY_GRADS],
                   copy = t[q][PIECE_COPY_PARAMS];
            if (!(n[q] > 0 && pre >= 0 && copy >= 0 && t[q][PIECE_TAIL] >= pre + copy)) continue;
            y[STEP_PRE][m] = pre * scale, y[STEP_COPY][m] = copy * scale;
            y[STEP_POST][m] = (t[q][PIECE_TAIL] - pre - copy) * scale, nn[m++] = n[q];
        }
        double a = 0, ab[STEP_PARTS][2];
        int ok = 1;
        for (int part = 0; part < STEP_PARTS; part++)
            ok &= line_fit(nn, y[part], m, &ab[part][0], &ab[part][1]);
        if (!ok) continue;
        double per = 0, da, db;
        for (int part = 0; part < STEP_PARTS; part++)
            a += ab[part][0], per += ab[part][1], slope[part][nfit] = fmax(ab[part][1], 0);
        /* DDP's tail per tensor over the distributed optimizer's, in the same launch */
        ddp[nfit] = per > 0 && line_fit(dn, dtail, kd, &da, &db) ? db * scale / per : 1.0;
        fixed[nfit++] = fmax(a, 0);
        if (m > nmodels) nmodels = m;
    }
    x->nstep_launches = nfit;
    x->nstep_models = nmodels;
    if (!nfit) return;
    x->c.optimizer_step_s = ep_median(fixed, nfit);
    x->c.optimizer_tensor_s = ep_median(slope[STEP_PRE], nfit);
    x->c.optimizer_sync_tensor_s = ep_median(slope[STEP_POST], nfit);
    x->c.optimizer_copy_tensor_s = ep_median(slope[STEP_COPY], nfit);
    x->c.optimizer_ddp_factor = ep_median(ddp, nfit);
}

/* Host time per cuBLAS GEMM call and per attention op, from the compute records' host_us (the
 * host time of issuing each op alone); records without it leave the defaults. */
static int fit_host_calls(fit *x, int *ngemm, int *nattn) {
    size_t n = x->root[F_COMPUTE] ? json_array_size(x->root[F_COMPUTE]) : 0;
    double *g = malloc(sizeof *g * (n + 1)), *a = malloc(sizeof *a * (n + 1));
    if (!g || !a) {
        free(g), free(a);
        return -1;
    }
    *ngemm = *nattn = 0;
    json_t *r;
    FOR_RECORDS(x, F_COMPUTE, i, r) {
        ep_op op;
        double h = sim_json_num(r, "host_us") * 1e-6;
        if (record_op(r, &op) || !(h > 0)) continue;
        if (op.kind == EP_OP_GEMM || op.kind == EP_OP_GROUPED_GEMM)
            g[(*ngemm)++] = h / (op.kind == EP_OP_GROUPED_GEMM && op.batch > 1 ? op.batch : 1);
        else if (op.kind == EP_OP_ATTENTION)
            a[(*nattn)++] = h;
    }
    if (*ngemm) x->c.gemm_launch_s = ep_median(g, *ngemm);
    if (*nattn) x->c.attention_launch_s = ep_median(a, *nattn);
    free(g), free(a);
    return 0;
}

/* A table of the points (x[i], y[i]), n of them: ascending x, the median y of equal x; at most
 * SIM_CALIB_MAX_POINTS distinct x (the smallest kept). y is reordered. */
static void table_from_points(sim_table *t, const double *x, double *y, int n) {
    t->n = 0;
    for (int done = 0; done < n && t->n < SIM_CALIB_MAX_POINTS;) {
        double lo = INFINITY, prev = t->n ? t->x[t->n - 1] : -INFINITY, v[SIM_CALIB_MAX_POINTS];
        int nv = 0;
        for (int i = 0; i < n; i++)
            if (x[i] > prev && x[i] < lo) lo = x[i];
        for (int i = 0; i < n && nv < SIM_CALIB_MAX_POINTS; i++)
            if (x[i] == lo) v[nv++] = y[i];
        done += nv;
        t->x[t->n] = lo;
        t->y[t->n++] = ep_median(v, nv);
    }
}

/* A record's "slowdown", at least 1 (noise: sharing never speeds an op up); NAN without one. */
static double slowdown_of(json_t *r) {
    double s = sim_json_num(r, "slowdown");
    return !(s > 0) ? NAN : s < 1 ? 1 : s;
}

/* The sharing table of a victim grid record (interference.json, source "shapes"): by its kind
 * and its aggressor (the NCCL all-to-all, or the store kernel on kernel_sms SMs); NULL for any
 * other record. */
static sim_shape_table *share_table(sim_calib *c, json_t *r, int kind, double kernel_sms) {
    const char *a = sim_json_str(r, "aggressor");
    int nccl = strcmp(a, "nccl_alltoall") == 0;
    if (!nccl && !(strcmp(a, "store") == 0 && sim_json_num(r, "aggressor_sms") == kernel_sms))
        return NULL;
    switch (kind) {
    case EP_OP_GEMM:
        return nccl ? c->share_nccl_gemm : c->share_kernel_gemm;
    case EP_OP_GROUPED_GEMM:
        return nccl ? c->share_nccl_grouped_gemm : c->share_kernel_grouped_gemm;
    case EP_OP_ATTENTION:
        return nccl ? c->share_nccl_attention : c->share_kernel_attention;
    default:
        return NULL;
    }
}

/* interference.json's victim grid: each GEMM, grouped GEMM and attention victim's slowdown beside
 * the NCCL all-to-all and beside the store kernel on the SMs closest to 16 (Hybrid-EP's default),
 * by the features of the compute shape tables; every DIR's launch joins, equal shapes keep their
 * median (sim_shape_sort). */
static int fit_share_shapes(fit *x) {
    json_t *r;
    double kernel_sms = NAN;
    FOR_RECORDS(x, F_INTERFERENCE, i, r) {
        double s = sim_json_num(r, "aggressor_sms");
        if (appends(F_INTERFERENCE, r) && s > 0 &&
            (isnan(kernel_sms) || fabs(s - 16) < fabs(kernel_sms - 16)))
            kernel_sms = s;
    }
    FOR_RECORDS(x, F_INTERFERENCE, i, r) {
        if (!appends(F_INTERFERENCE, r)) continue;
        ep_op op;
        sim_json_op(r, &op); /* the grid names its op's kind "victim" */
        op.kind = sim_json_kind(sim_json_str(r, "victim"));
        double s = slowdown_of(r), f[SIM_SHAPE_DIMS];
        int ph = op.phase - EP_PHASE_FWD;
        sim_shape_table *t = share_table(&x->c, r, op.kind, kernel_sms);
        if (!t || isnan(s) || ph < 0 || ph >= SIM_PHASES) continue;
        if (op.kind == EP_OP_ATTENTION) {
            f[0] = op.flops, f[1] = sim_json_num(r, "seq"), f[2] = sim_json_num(r, "dqk"),
            f[3] = sim_json_num(r, "dv");
            if (!(f[1] > 0 && f[2] > 0 && f[3] > 0)) continue; /* no geometry recorded */
        } else {
            sim_gemm_features(op.phase == EP_PHASE_BWD_DW, op.m, op.n, op.k, op.batch, f);
        }
        if (sim_shape_add(&t[ph], f, s) != 0) return -1;
    }
    sim_calib *c = &x->c;
    sim_shape_table *all[] = {c->share_nccl_gemm,           c->share_nccl_grouped_gemm,
                              c->share_nccl_attention,      c->share_kernel_gemm,
                              c->share_kernel_grouped_gemm, c->share_kernel_attention};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        for (int ph = 0; ph < SIM_PHASES; ph++)
            if (all[i][ph].n && sim_shape_sort(&all[i][ph]) != 0) return -1;
    return 0;
}

/* " kind: N shapes, median xM (lo-hi)" of one kind's sharing tables, over their phases */
static void print_share(const char *kind, const sim_shape_table t[SIM_PHASES]) {
    double y[4096];
    int n = 0;
    for (int ph = 0; ph < SIM_PHASES; ph++)
        for (int i = 0; i < t[ph].n && n < 4096; i++)
            y[n++] = t[ph].y[i];
    if (n == 0) return;
    double med = ep_median(y, n), lo = y[0], hi = y[0];
    for (int i = 1; i < n; i++)
        lo = y[i] < lo ? y[i] : lo, hi = y[i] > hi ? y[i] : hi;
    printf(" %s: %d shapes, median x%.2f (%.2f-%.2f);", kind, n, med, lo, hi);
}

static void fit_interference(fit *x) {
    json_t *r;
    double best_sms = 1e9, wait = NAN, ce = NAN, ksms[SIM_CALIB_MAX_POINTS],
           kslow[SIM_CALIB_MAX_POINTS];
    int nk = 0;
    FOR_RECORDS(x, F_INTERFERENCE, i, r) {
        const char *v = sim_json_str(r, "victim"), *a = sim_json_str(r, "aggressor");
        double s = slowdown_of(r);
        if (isnan(s) || appends(F_INTERFERENCE, r)) continue;
        if (strcmp(v, "gemm") == 0 && strcmp(a, "nccl_alltoall") == 0) x->c.comm_flops_slowdown = s;
        if (strcmp(v, "gemm") == 0 && strcmp(a, "nccl_waiting") == 0) wait = s;
        if (strcmp(v, "gemm") == 0 && strcmp(a, "ce_peer") == 0) ce = s;
        if (strcmp(v, "elementwise") == 0 && strcmp(a, "nccl_alltoall") == 0)
            x->c.comm_hbm_fraction = 1.0 - 1.0 / s;
        if (strcmp(v, "nccl_alltoall") == 0 && strcmp(a, "gemm") == 0)
            x->c.nccl_compute_slowdown = s;
        /* compute beside an SM-driven transfer: the GEMM beside the store kernel, by its SMs */
        double asms = sim_json_num(r, "aggressor_sms");
        if (strcmp(v, "gemm") == 0 && strcmp(a, "store") == 0 && asms > 0 &&
            nk < SIM_CALIB_MAX_POINTS)
            ksms[nk] = asms, kslow[nk++] = s;
        /* SM-driven transfers: the store kernel on the SM count closest to Hybrid-EP's 16 */
        double sms = sim_json_num(r, "sms");
        if (strcmp(v, "store") == 0 && strcmp(a, "gemm") == 0 && fabs(sms - 16) < best_sms) {
            best_sms = fabs(sms - 16);
            x->c.ep_compute_slowdown = s;
        }
    }
    /* a waiting NCCL kernel holds the blocks a running one does: without its own record, the
     * running transfer's slowdown */
    x->c.comm_wait_slowdown = isnan(wait) ? x->c.comm_flops_slowdown : wait;
    /* copy engines: peer copies beside a GEMM (scripts/ce_interference.py); without the record,
     * the NCCL figure, as before it was measured */
    x->c.ce_flops_slowdown = isnan(ce) ? x->c.comm_flops_slowdown : ce;
    table_from_points(&x->c.kernel_flops_slowdown, ksms, kslow, nk);
}

/* Compute beside compute (corun.json): each victim class's slowdown beside each other class. */
static void fit_corun(fit *x) {
    json_t *r;
    FOR_RECORDS(x, F_CORUN, i, r) {
        const char *v = sim_json_str(r, "victim"), *b = sim_json_str(r, "beside");
        double s = slowdown_of(r);
        if (isnan(s)) continue;
        int vc = !strcmp(v, "compute"), vm = !strcmp(v, "memory");
        int bc = !strcmp(b, "compute"), bm = !strcmp(b, "memory");
        if (vc && bc) x->c.corun_compute_compute = s;
        if (vc && bm) x->c.corun_compute_memory = s;
        if (vm && bc) x->c.corun_memory_compute = s;
        if (vm && bm) x->c.corun_memory_memory = s;
    }
}

/* ---- NCCL curves -------------------------------------------------------------------------- */

typedef struct {
    double bytes, t; /* op size as the record keys it, measured seconds */
} comm_pt;

/* Time the engine gives an NCCL operation alone besides link bytes / (bandwidth x efficiency):
 * base, extra ring steps, route latency (sim_algo_build, coll_begin). */
static double fixed_part(const fit *x, sim_coll k, int n, double base) {
    int steps = ep_xfer_size_of(sim_coll_kind(k), n, 0).steps;
    double extra = steps > 1 ? (steps - 1) * (x->c.nccl_step_s + x->lat) : 0;
    return base + extra + x->lat;
}

/* Base and efficiency table of one operation from its points (ascending bytes). The base is the
 * overhead of the fastest point (the smallest message) beyond moving its bytes at the efficiency
 * the largest message reaches; every point then gets the efficiency that reproduces it exactly. */
static int fit_curve(fit *x, sim_coll k, int n, comm_pt *p, int np, sim_coll_curve *out) {
    double fx = fixed_part(x, k, n, 0);
    ep_op_kind ok = sim_coll_kind(k);
    int fast = 0;
    for (int i = 0; i < np; i++) {
        if (!(p[i].t > fx)) return -1;
        if (p[i].t < p[fast].t) fast = i;
    }
    double e_big = ep_xfer_size_of(ok, n, p[np - 1].bytes).link / (x->bw * (p[np - 1].t - fx));
    out->base_s = p[fast].t - fx - ep_xfer_size_of(ok, n, p[fast].bytes).link / (x->bw * e_big);
    out->efficiency.n = 0;
    for (int i = 0; i < np && out->efficiency.n < SIM_CALIB_MAX_POINTS; i++) {
        double left = p[i].t - fx - out->base_s;
        int m = out->efficiency.n;
        if (!(left > 0) || (m && !(p[i].bytes > out->efficiency.x[m - 1]))) continue;
        out->efficiency.x[m] = p[i].bytes;
        out->efficiency.y[m] = ep_xfer_size_of(ok, n, p[i].bytes).link / (x->bw * left);
        out->efficiency.n++;
    }
    return 0;
}

/* comm.json points of one operation over NVLink (ascending bytes) timed over *ranks ranks (0: the
 * first record's); returns the count, *ranks. */
static int comm_points(fit *x, const char *name, comm_pt *p, int *ranks) {
    int np = 0;
    json_t *r;
    FOR_RECORDS(x, F_COMM, i, r) {
        if (strcmp(sim_json_str(r, "op"), name) != 0 ||
            strcmp(sim_json_str(r, "link"), "nvlink") != 0 || np == SIM_CALIB_MAX_POINTS)
            continue;
        double b = sim_json_num(r, "bytes"), t = sim_json_num(r, "time_us") * 1e-6;
        int n = (int)sim_json_num(r, "ranks");
        if (!(b > 0) || !(t > 0) || n < 2 || (*ranks && n != *ranks)) continue;
        *ranks = n;
        int j = np++;
        while (j > 0 && p[j - 1].bytes > b) { /* keep ascending */
            p[j] = p[j - 1];
            j--;
        }
        p[j].bytes = b, p[j].t = t;
    }
    return np;
}

static int fit_comm(fit *x) {
    /* NCCL's small-message latency hardly grows with the ring (2 and 4 H200: 11-13 us either
     * way): a measured base carries it, and only the route latency is added per extra step */
    if (x->root[F_COMM]) x->c.nccl_step_s = 0;
    int main_ranks = 0; /* the first file's: every GPU of its machine */
    for (int k = 0; k < SIM_COLL_NUM; k++) {
        comm_pt p[SIM_CALIB_MAX_POINTS], q[SIM_CALIB_MAX_POINTS];
        const char *name = sim_coll_name((sim_coll)k);
        int ranks = 0, np = comm_points(x, name, p, &ranks);
        if (np == 0) continue;
        if (!main_ranks) main_ranks = ranks;
        int pair = 2, nq = ranks != 2 ? comm_points(x, name, q, &pair) : 0;
        if (fit_curve(x, (sim_coll)k, ranks, p, np, &x->c.nccl_nvlink[k]) != 0 ||
            (nq && fit_curve(x, (sim_coll)k, 2, q, nq, &x->c.nccl_nvlink_pair[k]) != 0)) {
            snprintf(x->err, EP_ERRLEN,
                     "%s: %s records faster than the route latency of the topology",
                     x->path[F_COMM], name);
            return -1;
        }
    }
    /* the deepep/hybridep transport of epref run: an all-to-all's shape, its own curve, over the
     * main curves' ranks (not a pair's: it has no curve by group size) */
    comm_pt p[SIM_CALIB_MAX_POINTS];
    int ranks = main_ranks, np = comm_points(x, "nvl_a2a", p, &ranks);
    if (np && fit_curve(x, SIM_COLL_ALLTOALL, ranks, p, np, &x->c.ep_nvlink) != 0) {
        snprintf(x->err, EP_ERRLEN, "%s: nvl_a2a records faster than the route latency",
                 x->path[F_COMM]);
        return -1;
    }
    return 0;
}

/* The NVLink dispatch/combine kernel (the hybridep/deepep model): base from the smallest size,
 * efficiency the median at 4096 tokens and more (docs/calibration.md). */
static void fit_ep_kernels(fit *x) {
    double base = 1e300, eff[64];
    int ne = 0;
    for (int w = F_DISPATCH; w <= F_COMBINE; w++) {
        json_t *r;
        double tmin_tok = 1e300, tmin = 0;
        FOR_RECORDS(x, w, i, r) {
            if (strcmp(sim_json_str(r, "backend"), "nvl") != 0) continue;
            double tok = sim_json_num(r, "tokens"), t = sim_json_num(r, "time_us") * 1e-6;
            if (tok < tmin_tok && t > 0) tmin_tok = tok, tmin = t;
        }
        if (tmin > 0 && tmin - x->lat < base) base = tmin - x->lat;
    }
    if (!(base < 1e300)) return;
    for (int w = F_DISPATCH; w <= F_COMBINE; w++) {
        json_t *r;
        FOR_RECORDS(x, w, i, r) {
            if (strcmp(sim_json_str(r, "backend"), "nvl") != 0 ||
                sim_json_num(r, "tokens") < 4096 || ne == 64)
                continue;
            double t = sim_json_num(r, "time_us") * 1e-6 - base - x->lat,
                   lb = sim_json_num(r, "link_bytes");
            if (t > 0 && lb > 0) eff[ne++] = lb / (x->bw * t);
        }
    }
    if (ne == 0) return;
    x->c.ep_kernel_base_s = base;
    x->c.ep_nvlink_efficiency = ep_median(eff, ne);
}

/* ---- residuals ---------------------------------------------------------------------------- */

/* |simulated - measured| / measured over the compute records, through sim_cost itself. */
static void compute_residuals(fit *x, double *med, double *p90, double *worst) {
    int n = 0, cap = 0;
    double *e = NULL;
    json_t *r;
    sim_cost cost;
    sim_cost_init(&cost, &x->c, NULL);
    FOR_SHAPE_RECORDS(x, fw, i, r) {
        ep_op op;
        if (record_op(r, &op) || !want_record(x, fw, r, &op)) continue;
        cost.attn_seq = (int)sim_json_num(r, "seq"), cost.attn_dqk = (int)sim_json_num(r, "dqk");
        cost.attn_dv = (int)sim_json_num(r, "dv");
        sim_work w;
        sim_op_work(&cost, &op, x->peak, x->hbm, &w);
        double t = sim_json_num(r, "time_us") * 1e-6;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            double *ne = realloc(e, sizeof *e * (size_t)cap);
            if (!ne) break;
            e = ne;
        }
        e[n++] = fabs(sim_work_alone(&w) - t) / t;
    }
    sim_cost_free(&cost);
    *med = ep_median(e, n);
    *p90 = n ? e[(int)(0.9 * (n - 1))] : NAN;
    *worst = n ? e[n - 1] : NAN;
    free(e);
}

/* --holdout FILE: the compute records of another compute.json that no grid chose (source other
 * than "grid": the ops of models) predicted by the fitted tables, per kind and phase: how the
 * calibration carries to shapes it never timed (docs/validation.md, "Held out"). root: FILE's
 * records (load_compute, read before any output), released here. */
static void holdout_report(fit *x, json_t *root, const char *path) {
    enum { NK = 3 };
    static const ep_op_kind kinds[NK] = {EP_OP_GEMM, EP_OP_GROUPED_GEMM, EP_OP_ATTENTION};
    sim_cost cost;
    sim_cost_init(&cost, &x->c, NULL);
    printf("  held out (%s, records not from the grid): |error| median / p90, summed time\n",
           path);
    for (int ki = 0; ki < NK; ki++)
        for (int ph = EP_PHASE_FWD; ph <= EP_PHASE_BWD_DW; ph++) {
            int n = 0;
            double *e = malloc(sizeof *e * json_array_size(root)), meas = 0, pred = 0;
            if (!e) break;
            for (size_t i = 1; i < json_array_size(root); i++) {
                json_t *r = json_array_get(root, i);
                ep_op op;
                if (!strcmp(sim_json_str(r, "source"), "grid") || record_op(r, &op) ||
                    op.kind != kinds[ki] || (int)op.phase != ph)
                    continue;
                cost.attn_seq = (int)sim_json_num(r, "seq"),
                cost.attn_dqk = (int)sim_json_num(r, "dqk");
                cost.attn_dv = (int)sim_json_num(r, "dv");
                sim_work w;
                sim_op_work(&cost, &op, x->peak, x->hbm, &w);
                double t = sim_json_num(r, "time_us") * 1e-6, y = sim_work_alone(&w);
                e[n++] = fabs(y - t) / t;
                meas += t, pred += y;
                if (getenv("EPSIM_HOLDOUT_ALL"))
                    printf("      %s %s m %d n %d k %d batch %d seq %d: measured %.1f us, "
                           "predicted %.1f us (%+.1f%%)%s\n",
                           ep_op_kind_name(op.kind), ep_phase_name(op.phase), op.m, op.n, op.k,
                           op.batch, cost.attn_seq, t * 1e6, y * 1e6, 100 * (y / t - 1),
                           w.outside ? " outside" : "");
            }
            if (n) {
                double med = ep_median(e, n); /* sorts e */
                printf("    %-13s %-7s %5d records  %5.1f%% / %5.1f%%  summed %+6.1f%%\n",
                       ep_op_kind_name(kinds[ki]), ep_phase_name((ep_phase)ph), n, 100 * med,
                       100 * e[(int)(0.9 * (n - 1))], 100 * (pred / meas - 1));
            }
            free(e);
        }
    sim_cost_free(&cost);
    json_decref(root);
}

/* ---- the power cap (power.json) ----------------------------------------------------------- */

/* power.json: launches of scripts/sustained_clock.py --mix --recovery (docs/calibration.md,
 * "Sustained load"). The duty table pools the GEMM classes (bf16, FP8, grouped): each pattern's
 * duty is the compute op's share of the pattern's measured time, binned, the median per bin, made
 * non-decreasing; back to back is duty 1. Attention's weight comes from the powers read alone:
 * (attention - copy) / (GEMM demand - copy), the GEMM's demand at full clock being what puts the
 * cap where the table starts to rise. The time constant inverts the table on the recovery records
 * (the second and third GEMM after an idle gap; the first also wakes the clock). */
static int is_gemm_class(const char *cls) {
    return !strcmp(cls, "gemm") || !strcmp(cls, "gemm_fp8") || !strcmp(cls, "grouped_gemm");
}

static double median_of(double *v, int n) {
    return n ? ep_median(v, n) : NAN;
}

enum { POWER_BINS = 6, POWER_MAX = 512 };

static void fit_power(fit *x) {
    json_t *root = x->root[F_POWER];
    if (!root) return;
    static const double edge[POWER_BINS + 1] = {0, 0.4, 0.57, 0.69, 0.81, 0.95, 1.01};
    static double bd[POWER_BINS][POWER_MAX], bs[POWER_BINS][POWER_MAX];
    int bn[POWER_BINS] = {0};
    double pmem[POWER_MAX], patt[POWER_MAX], pcap[POWER_MAX];
    int nmem = 0, natt = 0, ncap = 0;
    for (size_t l = 1; l < json_array_size(root); l++) {
        json_t *launch = json_array_get(root, l), *r;
        size_t i;
        json_array_foreach(json_object_get(launch, "ops"), i, r) {
            const char *cls = sim_json_str(r, "class");
            double pw = sim_json_num(r, "power_w_second_half"), sl = sim_json_num(r, "slowdown");
            if (!strcmp(cls, "memory") && pw > 0 && nmem < POWER_MAX) pmem[nmem++] = pw;
            if (!strcmp(cls, "attention") && pw > 0 && natt < POWER_MAX) patt[natt++] = pw;
            if (is_gemm_class(cls) && sl > 0 && bn[POWER_BINS - 1] < POWER_MAX) {
                if (pw > 0 && ncap < POWER_MAX) pcap[ncap++] = pw;
                bd[POWER_BINS - 1][bn[POWER_BINS - 1]] = 1.0;
                bs[POWER_BINS - 1][bn[POWER_BINS - 1]++] = sl;
            }
        }
        json_array_foreach(json_object_get(launch, "mix"), i, r) {
            if (!is_gemm_class(sim_json_str(r, "class"))) continue;
            double di = sim_json_num(r, "duty_isolated"), so = sim_json_num(r, "op_slowdown"),
                   sc = sim_json_num(r, "copy_slowdown");
            if (!(di > 0 && so > 0 && sc > 0)) continue;
            double d = di * so / (di * so + (1 - di) * sc);
            for (int b = 0; b < POWER_BINS; b++)
                if (d >= edge[b] && d < edge[b + 1] && bn[b] < POWER_MAX) {
                    bd[b][bn[b]] = d;
                    bs[b][bn[b]++] = so;
                }
        }
    }
    sim_table *t = &x->c.power_duty_slowdown;
    t->n = 0;
    for (int b = 0; b < POWER_BINS; b++) {
        if (!bn[b]) continue;
        double d = median_of(bd[b], bn[b]), y = median_of(bs[b], bn[b]);
        if (y < 1) y = 1;
        if (t->n && y < t->y[t->n - 1]) y = t->y[t->n - 1];
        if (t->n && !(d > t->x[t->n - 1])) continue;
        t->x[t->n] = d;
        t->y[t->n++] = y;
    }
    if (t->n < 2) {
        t->n = 0;
        return;
    }
    /* where the table leaves 1: the first rising segment extended down to 1 */
    double d0 = t->x[0];
    for (int i = 1; i < t->n; i++)
        if (t->y[i] > 1.01) {
            double slope = (t->y[i] - t->y[i - 1]) / (t->x[i] - t->x[i - 1]);
            d0 = slope > 0 ? t->x[i] - (t->y[i] - 1) / slope : t->x[i];
            break;
        }
    double mem = median_of(pmem, nmem), att = median_of(patt, natt), cap = median_of(pcap, ncap);
    double demand = d0 > 0 ? (cap - (1 - d0) * mem) / d0 : NAN;
    double w = (att - mem) / (demand - mem);
    x->c.power_attention_weight = w > 0 ? (w < 1 ? w : 1) : 0;
    x->power_watts[0] = mem, x->power_watts[1] = att, x->power_watts[2] = cap;
    x->power_watts[3] = demand;
    /* the time constant: e^(-gap / tau) = the duty whose slowdown the GEMMs after the gap show */
    double taus[POWER_MAX];
    int ntau = 0;
    for (size_t l = 1; l < json_array_size(root); l++) {
        json_t *r;
        size_t i;
        json_array_foreach(json_object_get(json_array_get(root, l), "recovery"), i, r) {
            double gap = sim_json_num(r, "gap_ms") * 1e-3;
            json_t *after = json_object_get(r, "slowdown_after");
            for (size_t k = 1; k < json_array_size(after) && ntau < POWER_MAX; k++) {
                double v = json_number_value(json_array_get(after, k));
                if (!(v > t->y[0] + 0.005) || !(v < t->y[t->n - 1]) || !(gap > 0)) continue;
                int j = 1;
                while (j < t->n - 1 && t->y[j] < v)
                    j++;
                double f = t->y[j] > t->y[j - 1] ? (v - t->y[j - 1]) / (t->y[j] - t->y[j - 1]) : 1;
                double d = t->x[j - 1] + f * (t->x[j] - t->x[j - 1]);
                if (d > 0 && d < 1) taus[ntau++] = gap / log(1 / d);
            }
        }
    }
    x->c.power_tau_s = ntau ? median_of(taus, ntau) : 0.2;
    x->npower_tau = ntau;
}

/* power_rise.json (scripts/sustained_clock.py --rise): the large GEMM back to back after copies,
 * each GEMM's slowdown by its start. The cap's window is the time constant of the average that,
 * through the duty table, gives those slowdowns best (least squares over the first 150 ms, the
 * first GEMM left out: it also wakes the clock). */
enum { RISE_POINTS = 4096 };

static void fit_power_window(fit *x) {
    json_t *root = x->root[F_POWER_RISE];
    const sim_table *t = &x->c.power_duty_slowdown;
    if (!root || t->n < 2) return;
    static double pt[RISE_POINTS], ps[RISE_POINTS];
    int n = 0;
    for (size_t l = 1; l < json_array_size(root); l++) {
        json_t *r;
        size_t i;
        json_array_foreach(json_object_get(json_array_get(root, l), "rise"), i, r) {
            json_t *tm = json_object_get(r, "t_ms"), *sl = json_object_get(r, "slowdown");
            for (size_t k = 1; k < json_array_size(tm) && k < json_array_size(sl); k++) {
                double ms = json_number_value(json_array_get(tm, k));
                if (ms > 150 || n == RISE_POINTS) break;
                pt[n] = ms * 1e-3, ps[n++] = json_number_value(json_array_get(sl, k));
            }
        }
    }
    double best = INFINITY, best_tau = 0;
    for (double tau = 1e-3; tau <= 0.2; tau += 5e-4) {
        double e = 0;
        for (int k = 0; k < n; k++) {
            double y = sim_power_table(t, 1 - exp(-pt[k] / tau)) - ps[k];
            e += y * y;
        }
        if (e < best) best = e, best_tau = tau;
    }
    x->c.power_window_s = n ? best_tau : 0;
    x->npower_rise = n;
}

/* ---- functions timed whole, as GPU time per byte (permute.json, expert_extras.json) ------- */

/* The bytes epsim's schedule gives the op of record r of part `o` and pass `bwd` (<= 0: the record
 * is left out). */
typedef double (*op_bytes_fn)(json_t *r, int o, int bwd);

/* For each part (records whose `key` names it) and pass, a table of GPU time per byte by the bytes
 * `bytes` gives the op, the median over the records of equal bytes (launches and repeats of a
 * shape). */
enum { BYTES_POINTS_MAX = 64 };
static void fit_per_byte(fit *x, int file, const char *key, const char *const *parts, int nparts,
                         sim_table (*const *tables)[2], op_bytes_fn bytes) {
    for (int o = 0; o < nparts; o++)
        for (int ps = 0; ps < 2; ps++) {
            double b[BYTES_POINTS_MAX], y[BYTES_POINTS_MAX];
            int n = 0;
            json_t *r;
            FOR_RECORDS(x, file, i, r) {
                if (strcmp(sim_json_str(r, key), parts[o]) ||
                    strcmp(sim_json_str(r, "pass"), ps ? "bwd" : "fwd"))
                    continue;
                double by = bytes(r, o, ps), us = sim_json_num(r, "time_us");
                if (!(by > 0 && us > 0) || n == BYTES_POINTS_MAX) continue;
                b[n] = by;
                y[n++] = us * 1e-6 / by;
            }
            table_from_points(&(*tables[o])[ps], b, y, n);
        }
}

/* permute.json (scripts/megatron_permute.py): Megatron's unfused permutation functions timed
 * whole, forward and backward, over tokens, hidden and experts. A record's bytes are those of the
 * same op in epsim's schedule (docs/schedule.md): rows in and rows out, hidden x 2 each - permute
 * t -> t k, unpermute t k -> t, sort t k -> t k. */
static double permute_bytes(json_t *r, int o, int bwd) {
    (void)bwd;
    double t = sim_json_num(r, "tokens"), k = sim_json_num(r, "topk"),
           h = sim_json_num(r, "hidden");
    if (!(t > 0 && k > 0 && h > 0)) return 0;
    return (o == 2 ? 2 * t * k : t + t * k) * h * 2.0;
}

static void fit_unfused_permute(fit *x) {
    static const char *const OPS[3] = {"permute", "unpermute", "sort_chunks"};
    sim_table(*const tables[3])[2] = {&x->c.unfused_permute, &x->c.unfused_unpermute,
                                      &x->c.unfused_sort};
    fit_per_byte(x, F_PERMUTE, "op", OPS, 3, tables, permute_bytes);
}

/* expert_extras.json (scripts/megatron_expert_extras.py): Megatron's activation functions and
 * TEGroupedMLP's fc2 bias loop timed whole, forward and backward, by rows and width (launches
 * apart by "launch"). A record's bytes are those of epsim's op (sched_layer.c, experts()): the
 * activation reads 2F and writes F bf16 values per row, the bias reads and writes H; a backward
 * elementwise op has twice its forward's bytes (backward_op). */
static double extras_bytes(json_t *r, int o, int bwd) {
    double rows = sim_json_num(r, "rows"), w = sim_json_num(r, "width");
    if (!(rows > 0 && w > 0)) return 0;
    return rows * w * (o == 3 ? 2.0 : 3.0) * 2.0 * (bwd ? 2.0 : 1.0);
}

static void fit_expert_extras(fit *x) {
    static const char *const PARTS[4] = {"swiglu", "geglu", "geglu_clamp", "apply_bias"};
    sim_table(*const tables[4])[2] = {&x->c.act_swiglu, &x->c.act_geglu, &x->c.act_geglu_clamp,
                                      &x->c.expert_bias};
    fit_per_byte(x, F_EXPERT_EXTRAS, "part", PARTS, 4, tables, extras_bytes);
}

/* One line of fit_per_byte's tables, their GB/s of the op's bytes at the smallest and largest
 * bytes; nothing when none was fitted. */
static void print_per_byte(const char *what, const char *const *parts,
                           sim_table (*const *tables)[2], int nparts) {
    int first = 1;
    for (int o = 0; o < nparts; o++)
        for (int ps = 0; ps < 2; ps++) {
            const sim_table *u = &(*tables[o])[ps];
            if (!u->n) continue;
            if (first) printf("  %s (GB/s of the op's bytes, smallest -> largest):", what);
            printf("%s %s %s %.0f -> %.0f", first ? "" : ",", parts[o], ps ? "bwd" : "fwd",
                   1e-9 / u->y[0], 1e-9 / u->y[u->n - 1]);
            first = 0;
        }
    if (!first) printf("\n");
}

/* ---- Megatron's Mamba-2 mixer (mamba.json) ----------------------------------------------- */

/* mamba.json (scripts/mamba_scan.py): mamba_split_conv1d_scan_combined and the grouped RMSNorm
 * timed whole, forward and backward, by shape (launches apart by "launch"; the table keeps the
 * median of equal shapes). The conv1d inside ran as PyTorch's conv1d there, far slower than the
 * memory-bound causal-conv1d CUDA kernel of Megatron's container; it was timed alone in the same
 * record, and is replaced by that kernel's memory time at this calibration's HBM rate: the forward
 * moves x, B and C in and out once (B), the backward runs the forward again and reads the input and
 * the gradient and writes the input's gradient (2.5 B). */
static double conv_s(const fit *x, double bytes) {
    return bytes / (x->hbm * sim_table_eval(&x->c.memory_efficiency, bytes));
}

/* The forward record of backward record r: the same launch and shape (NULL: none). */
static json_t *mamba_fwd_of(fit *x, json_t *r) {
    static const char *const KEYS[] = {"launch", "seq", "heads", "head_dim", "state", "groups"};
    json_t *f;
    FOR_RECORDS(x, F_MAMBA, j, f) {
        if (strcmp(sim_json_str(f, "pass"), "fwd")) continue;
        int same = 1;
        for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0] && same; k++) {
            double a = sim_json_num(f, KEYS[k]),
                   b = sim_json_num(r, KEYS[k]); /* NAN both: no launch given */
            same = a == b || (isnan(a) && isnan(b));
        }
        if (same) return f;
    }
    return NULL;
}

static int fit_mamba_scan(fit *x) {
    json_t *r;
    FOR_RECORDS(x, F_MAMBA, i, r) {
        int bwd = !strcmp(sim_json_str(r, "pass"), "bwd");
        if (!bwd && strcmp(sim_json_str(r, "pass"), "fwd")) continue;
        double seq = sim_json_num(r, "seq"),
               ch = sim_json_num(r, "heads") * sim_json_num(r, "head_dim");
        double state = sim_json_num(r, "state"), groups = sim_json_num(r, "groups");
        /* the stand-in conv1d's forward time, in the forward record of the shape */
        double conv_fwd = sim_json_num(bwd ? mamba_fwd_of(x, r) : r, "conv_fwd_us");
        double us =
            sim_json_num(r, "time_us") - conv_fwd - (bwd ? sim_json_num(r, "conv_bwd_us") : 0);
        double conv_bytes = 2 * seq * (ch + 2 * groups * state) * 2.0; /* bf16 in and out */
        if (!(seq > 0 && ch > 0 && state > 0 && groups > 0 && conv_fwd >= 0 && us > 0)) continue;
        us += 1e6 * conv_s(x, (bwd ? 2.5 : 1) * conv_bytes);
        double flops = ep_cost_scan_flops(seq, ch, state) * (bwd ? EP_SCAN_BWD_FLOPS : 1);
        double q[SIM_SHAPE_DIMS] = {seq, ch, state, groups};
        int ph = (bwd ? EP_PHASE_BWD : EP_PHASE_FWD) - 1;
        if (sim_shape_add(&x->c.mamba_scan_shapes[ph], q, flops / (x->peak * us * 1e-6)) != 0)
            return -1;
    }
    for (int ph = 0; ph < SIM_PHASES; ph++)
        if (sim_shape_sort(&x->c.mamba_scan_shapes[ph]) != 0) return -1;
    return 0;
}

/* ---- output ------------------------------------------------------------------------------- */

static void write_sources(fit *x, FILE *f) {
    fputs("{", f);
    int first = 1;
    for (int w = 0; w < F_NUM; w++) {
        if (!x->root[w]) continue;
        json_t *meta = json_object_get(json_array_get(x->root[w], 0), "meta");
        fprintf(f, "%s\n  \"%s\":{\"path\":", first ? "" : ",", FILES[w]);
        ep_json_string(f, x->path[w]);
        fprintf(f, ",\"records\":%zu,\"gpu\":", json_array_size(x->root[w]) - 1);
        ep_json_string(f, sim_json_str(meta, "gpu"));
        fputs(",\"date\":", f);
        ep_json_string(f, sim_json_str(meta, "date"));
        fputs(",\"git_revision\":", f);
        ep_json_string(f, sim_json_str(meta, "git_revision"));
        if (x->completed[w][0]) { /* records added from later files: path (records) */
            fputs(",\"completed_from\":", f);
            ep_json_string(f, x->completed[w]);
        }
        fputc('}', f);
        first = 0;
    }
    fputs("}", f);
}

typedef struct {
    FILE *f;
    int n;
} published_ctx;

static void write_published(const char *key, const char *source, void *ctx) {
    published_ctx *p = ctx;
    if (p->n++) fputc(',', p->f);
    ep_json_string(p->f, key);
    fputc(':', p->f);
    ep_json_string(p->f, source);
}

static int write_out(fit *x, const char *out, const char *machine) {
    ep_outfile o;
    if (ep_outfile_open(&o, out, x->err) != 0) return -1;
    FILE *f = o.f;
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fputs("{\"_meta\":{\"program\":\"epsim calibrate\",\"version\":", f);
    ep_json_string(f, ep_version());
    fputs(",\"git_revision\":", f);
    ep_json_string(f, ep_git_revision());
    fputs(",\"machine\":", f);
    ep_json_string(f, machine);
    fputs(",\"topology\":", f);
    ep_json_string(f, x->plat.name);
    fprintf(f, ",\"date\":\"%s\",\"format\":\"docs/calibration.md\",%s", date,
            x->grid_only ? "\"grid_only\":true," : "");
    if (x->nmodel_shapes == 1) { /* one file: its name; several: a list */
        fputs("\"model_shapes\":", f);
        ep_json_string(f, x->model_shapes[0]);
        fputc(',', f);
    } else if (x->nmodel_shapes > 1) {
        fputs("\"model_shapes\":[", f);
        for (int i = 0; i < x->nmodel_shapes; i++) {
            if (i) fputc(',', f);
            ep_json_string(f, x->model_shapes[i]);
        }
        fputs("],", f);
    }
    if (x->nkind_from) {
        fputs("\"kind_from\":[", f);
        for (int i = 0; i < x->nkind_from; i++) {
            if (i) fputc(',', f);
            ep_json_string(f, x->kind_from[i]);
        }
        fputs("],", f);
    }
    fputs("\"sources\":", f);
    write_sources(x, f);
    /* the values no file here measured that come from a published measurement of their part */
    published_ctx pc = {f, 0};
    fputs(",\"published\":{", f);
    sim_calib_each_published(&x->c, write_published, &pc);
    fputs("}},", f);
    /* then every key sim_calib_load reads: the object sim_calib_write_json writes, whose opening
     * brace is already out */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        ep_outfile_abort(&o);
        snprintf(x->err, EP_ERRLEN, "out of memory");
        return -1;
    }
    sim_calib_write_json(&x->c, mem, 1);
    fclose(mem);
    fputs(buf + 1, f);
    fputc('\n', f);
    free(buf);
    return ep_outfile_commit(&o, x->err);
}

/* "base B us, efficiency e at 1 MiB, e at 64 MiB, e at the largest size" */
static void print_curve(const sim_coll_curve *cv) {
    const sim_table *t = &cv->efficiency;
    printf("base %.2f us, efficiency %.3f at 1 MiB, %.3f at 64 MiB, %.3f at %.0f MiB\n",
           cv->base_s * 1e6, sim_table_eval(t, 1 << 20), sim_table_eval(t, 64 << 20),
           t->y[t->n - 1], t->x[t->n - 1] / (1 << 20));
}

/* ---- main --------------------------------------------------------------------------------- */

/* A DIR argument as a plain path: without its ":files" and trailing slashes. */
static void dir_path(const char *arg, char *d, size_t len) {
    snprintf(d, len, "%s", arg);
    char *only = strchr(d, ':');
    if (only) *only = 0;
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/')
        d[--n] = 0;
}

static void machine_of(const char *dir, char *out, size_t len) {
    char d[4096];
    dir_path(dir, d, sizeof d);
    char *slash = strrchr(d, '/');
    const char *last = slash ? slash + 1 : d;
    char *json = strstr(d, ".json");
    if (json && json[5] == 0) *json = 0;       /* an output file names its machine */
    if ((strcmp(last, "calib") == 0 || strcmp(last, "grid") == 0) &&
        slash) { /* traces/<machine>/calib, traces/<machine>/grid */
        *slash = 0;
        slash = strrchr(d, '/');
        last = slash ? slash + 1 : d;
    }
    snprintf(out, len, "%s", last);
}

/* traces/<machine>/calib -> traces/calib/<machine>.json */
static void default_out(const char *dir, const char *machine, char *out, size_t len) {
    char d[4096];
    dir_path(dir, d, sizeof d);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(d, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(d, sizeof d, ".");
    }
    snprintf(out, len, "%s/calib/%s.json", d, machine);
}

#define FIT_USAGE                                                                                  \
    "epsim calibrate DIR ... [--topo T] [--out FILE] [--model-shapes [KINDS:]FILE] "               \
    "[--kind-from [+]KIND[/DTYPE]:FILE] [--grid-only] [--holdout FILE]"

static int fit_help(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)row, (void)v, (void)ctx, (void)err;
    puts(
        "usage: epsim calibrate DIR[:file,...] [DIR ...] [--topo T] [--out FILE]\n"
        "       [--model-shapes [KIND,...:]FILE] [--kind-from [+]KIND[/DTYPE]:FILE] [--grid-only]\n"
        "       [--holdout FILE]\n"
        "Fits the calibration from epref bench calib's raw files (docs/calibration.md);\n"
        "each file from the first DIR that has it (DIR:a.json,b.json: only those).\n"
        "--model-shapes FILE adds the model records (source model:*) of another compute.json\n"
        "(with KIND,...: of those op kinds only); repeatable;\n"
        "--kind-from KIND[/DTYPE]:FILE takes the records of one op kind (of one element type)\n"
        "from another compute.json or kernels.json (FILE.xz: decompressed); repeatable;\n"
        "with '+' they join the loaded ones instead (another part of the same grid);\n"
        "--grid-only leaves out the compute records of model shapes (source model:*);\n"
        "--holdout FILE predicts the model records of another compute.json and prints the error.");
    return 1;
}

/* The values of an option given several times (--kind-from, --model-shapes), in order. */
typedef struct {
    const char *v[MAX_DIRS];
    int n;
} fit_list;

typedef struct {
    char *dirs[MAX_DIRS];
    int ndirs;
    fit_list kind_from, model_shapes;
} fit_dirs;

/* An EP_OPT_CALL row whose target is a fit_list: one more value. */
static int fit_list_add(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)ctx;
    fit_list *l = row->target;
    if (l->n == MAX_DIRS) {
        snprintf(err, EP_ERRLEN, "%s: at most %d", row->name, MAX_DIRS);
        return -1;
    }
    l->v[l->n++] = v;
    return 0;
}

/* The DIRs; any other argument is unexpected. */
static int fit_other(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    fit_dirs *d = ctx;
    if (arg[0] == '-' || d->ndirs == MAX_DIRS) {
        snprintf(err, EP_ERRLEN, "unexpected argument %.200s (usage: " FIT_USAGE ")", arg);
        return -1;
    }
    d->dirs[d->ndirs++] = (char *)arg;
    return 0;
}

int sim_fit_main(int argc, char **argv) {
    const char *topo = NULL, *out = NULL, *holdout = NULL;
    int grid_only = 0;
    fit_dirs d = {.ndirs = 0};
    const ep_opt rows[] = {
        {.name = "--topo",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &topo,
         .missing = "unexpected argument --topo (usage: " FIT_USAGE ")"},
        {.name = "--out",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &out,
         .missing = "unexpected argument --out (usage: " FIT_USAGE ")"},
        {.name = "--grid-only", .kind = EP_OPT_FLAG, .target = &grid_only, .set = 1},
        {.name = "--model-shapes",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .target = &d.model_shapes,
         .fn = fit_list_add,
         .missing = "unexpected argument --model-shapes (usage: " FIT_USAGE ")"},
        {.name = "--kind-from",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .target = &d.kind_from,
         .fn = fit_list_add,
         .missing = "unexpected argument --kind-from (usage: " FIT_USAGE ")"},
        {.name = "--holdout",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &holdout,
         .missing = "unexpected argument --holdout (usage: " FIT_USAGE ")"},
        {.name = "--help", .kind = EP_OPT_CALL, .fn = fit_help},
        {.name = "-h", .kind = EP_OPT_CALL, .fn = fit_help},
        {.name = NULL},
    };
    /* a value is the next argument, whatever it is */
    ep_opts p = {rows, fit_other, &d, 1};
    char perr[EP_ERRLEN];
    int prc = ep_opts_parse(&p, argc - 1, argv + 1, perr);
    if (prc != 0) return prc > 0 ? 0 : fail2(perr);
    char **dirs = d.dirs;
    int ndirs = d.ndirs;
    if (ndirs == 0) return fail2("usage: " FIT_USAGE);
    char measured[256], machine[256], outbuf[4400];
    machine_of(dirs[0], measured, sizeof measured); /* traces/<measured>/calib */
    if (!topo) topo = measured;
    if (!out) {
        default_out(dirs[0], measured, outbuf, sizeof outbuf);
        out = outbuf;
    }
    machine_of(out, machine, sizeof machine); /* the calibration's name: traces/calib/<name> */
    static fit x;
    memset(&x, 0, sizeof x);
    x.comm_layer = -1;
    json_t *hold = NULL; /* --holdout's records */
    int rc = 2, any = 0;
    for (int w = 0; w < F_NUM; w++) {
        if (load(&x, w, dirs, ndirs) != 0) goto done;
        any |= x.root[w] != NULL;
    }
    if (!any) {
        snprintf(x.err, EP_ERRLEN, "%s: no calibration files (compute.json, comm.json, ...)",
                 dirs[0]);
        goto done;
    }
    x.grid_only = grid_only;
    int nkind, nadded, ndropped;
    x.kind_from = d.kind_from.v;
    x.nkind_from = d.kind_from.n;
    if (choose_records(&x, d.model_shapes.v, d.model_shapes.n, grid_only, &nkind, &nadded,
                       &ndropped) != 0)
        goto done;
    /* read before anything is written: a bad --holdout file leaves no output */
    hold = holdout ? load_compute(&x, "--holdout", holdout) : NULL;
    if (holdout && !hold) goto done;
    int one = 1;
    char *sgargv[] = {"epsim", NULL};
    xbt_log_control_set("root.thres:critical");
    simgrid_init(&one, sgargv);
    if (sim_platform_load(&x.plat, topo, x.err) != 0) goto done;
    sim_platform_seal();
    if (x.plat.ngpus < 2 && x.root[F_COMM]) {
        snprintf(x.err, EP_ERRLEN, "topology %s has one GPU: no link to fit comm.json against",
                 topo);
        goto done;
    }
    x.peak = x.plat.peak_flops[0];
    x.hbm = x.plat.hbm_bw[0];
    if (x.plat.ngpus >= 2) {
        x.bw = sg_host_get_route_bandwidth(x.plat.host[0], x.plat.host[1]);
        x.lat = sg_host_get_route_latency(x.plat.host[0], x.plat.host[1]);
    }
    sim_calib_default(&x.c);
    fit_host(&x); /* first: the kernel overhead enters every compute efficiency */
    mark_kernels(&x);
    double t0 = x.c.kernel_overhead_s;
    int nshape = 0;
    if (fit_memory(&x, t0) != 0 || fit_shapes(&x, t0, &nshape) != 0) {
        snprintf(x.err, EP_ERRLEN, "out of memory fitting %s", x.path[F_COMPUTE]);
        goto done;
    }
    int ngemm = 0, nattn = 0;
    if (fit_host_calls(&x, &ngemm, &nattn) != 0) {
        snprintf(x.err, EP_ERRLEN, "out of memory fitting %s", x.path[F_COMPUTE]);
        goto done;
    }
    fit_host_stack(&x);
    if (fit_host_layers(&x) != 0) goto done;
    fit_step_host(&x); /* after the layers: its launches are scaled to the fitted layer */
    fit_interference(&x);
    if (fit_share_shapes(&x) != 0) {
        snprintf(x.err, EP_ERRLEN, "out of memory fitting %s", x.path[F_INTERFERENCE]);
        goto done;
    }
    fit_corun(&x);
    if (fit_comm(&x) != 0) goto done;
    fit_ep_kernels(&x);
    fit_power(&x);
    fit_power_window(&x); /* on the table fit_power made */
    sim_draw_report draw;
    if (sim_fit_draw(x.root[F_DRAW], &x.c, &draw) < 0) {
        snprintf(x.err, EP_ERRLEN, "out of memory fitting %s", x.path[F_DRAW]);
        goto done;
    }
    fit_unfused_permute(&x);
    fit_expert_extras(&x);
    if (fit_mamba_scan(&x) != 0) {
        snprintf(x.err, EP_ERRLEN, "out of memory fitting %s", x.path[F_MAMBA]);
        goto done;
    }
    if (write_out(&x, out, machine) != 0) goto done;

    printf("epsim calibrate: %s (topology %s) -> %s\n", machine, x.plat.name, out);
    for (int w = 0; w < F_NUM; w++)
        printf("  %-18s %s\n", FILES[w], x.root[w] ? x.path[w] : "(none: defaults kept)");
    printf("  host: per op %.2f us + launch %.2f us, GEMM call %.2f us (%d records), attention "
           "%.2f us (%d records), NCCL launch %.2f us, host sync %.2f us, kernel overhead "
           "%.2f us, gap between ops %.2f us, events of an empty op %.2f us\n",
           x.c.op_overhead_s * 1e6, x.c.launch_s * 1e6, x.c.gemm_launch_s * 1e6, ngemm,
           x.c.attention_launch_s * 1e6, nattn, x.c.nccl_launch_s * 1e6, x.c.host_sync_s * 1e6,
           t0 * 1e6, x.c.op_gap_s * 1e6, x.c.op_event_s * 1e6);
    if (x.root[F_HOST_STACK] || x.root[F_HOST_LAYERS])
        printf("  software stack: per op %.2f us, per expert call %.2f us, per communication op "
               "+%.2f us (%d launches), graph launch %.2f us\n",
               x.c.op_overhead_s * 1e6, x.c.expert_call_s * 1e6, x.c.comm_call_s * 1e6,
               x.ncomm_launches, x.c.graph_launch_s * 1e6);
    for (int k = 0; k < x.nhost_layers; k++)
        printf("  host layer %s\n", x.host_layer_line[k]);
    if (x.nstep_launches)
        printf("  step outside the layers (%d launches, %d models): per parameter tensor %.2f us "
               "before the norm's sync, %.2f us after it + %.0f us per step, the parameter "
               "copy %.2f us; DDP x%.3f\n",
               x.nstep_launches, x.nstep_models, x.c.optimizer_tensor_s * 1e6,
               x.c.optimizer_sync_tensor_s * 1e6, x.c.optimizer_step_s * 1e6,
               x.c.optimizer_copy_tensor_s * 1e6, x.c.optimizer_ddp_factor);
    if (grid_only)
        printf("  --grid-only: %d compute records of model shapes left out\n", ndropped);
    for (int i = 0; nadded && i < x.nmodel_shapes; i++)
        printf("  --model-shapes: %s\n", x.model_shapes[i]);
    if (nadded) printf("  --model-shapes: %d model records added in all\n", nadded);
    for (int i = 0; nkind && i < x.nkind_from; i++)
        printf("  --kind-from: %s\n", x.kind_from[i]);
    if (nkind) printf("  --kind-from: %d records in all\n", nkind);
    if (x.root[F_KERNELS]) {
        printf("  kernels.json: %d records fitted (%d FP8 GEMMs into fp8_*_shapes); its",
               x.nkernels, x.nfp8);
        for (int k = 0; k < EP_OP_NUM_KINDS; k++)
            if (x.from_kernels[k]) printf(" %s", ep_op_kind_name((ep_op_kind)k));
        printf(" replace compute.json's\n");
    }
    if (x.root[F_COMPUTE] || x.root[F_KERNELS]) {
        double med, p90, worst;
        compute_residuals(&x, &med, &p90, &worst);
        printf("  compute: %d shape points, memory curve of %d points; records reproduced "
               "within median %.2f%%, p90 %.2f%%, worst %.1f%%\n",
               nshape, x.c.memory_efficiency.n, 100 * med, 100 * p90, 100 * worst);
    }
    if (hold) holdout_report(&x, hold, holdout);
    hold = NULL;
    for (int k = 0; k < SIM_COLL_NUM; k++) {
        const sim_coll_curve *cv = &x.c.nccl_nvlink[k];
        if (!cv->efficiency.n) continue;
        printf("  NCCL %-15s ", sim_coll_name((sim_coll)k));
        print_curve(cv);
    }
    if (x.c.ep_nvlink.efficiency.n) {
        printf("  deepep/hybridep NVLink transport (nvl_a2a) ");
        print_curve(&x.c.ep_nvlink);
    } else if (x.root[F_DISPATCH] || x.root[F_COMBINE]) {
        printf("  NVLink dispatch/combine kernel: base %.2f us, efficiency %.3f\n",
               x.c.ep_kernel_base_s * 1e6, x.c.ep_nvlink_efficiency);
    }
    if (x.root[F_INTERFERENCE])
        printf("  interference: compute x%.3f beside a transfer, HBM share %.3f per transfer, "
               "NCCL x%.3f beside compute, SM-driven transfers x%.3f\n",
               x.c.comm_flops_slowdown, x.c.comm_hbm_fraction, x.c.nccl_compute_slowdown,
               x.c.ep_compute_slowdown);
    if (x.c.share_nccl_gemm[0].n || x.c.share_nccl_grouped_gemm[0].n) {
        printf("  interference by shape beside the NCCL all-to-all:");
        print_share("GEMM", x.c.share_nccl_gemm);
        print_share("grouped GEMM", x.c.share_nccl_grouped_gemm);
        print_share("attention", x.c.share_nccl_attention);
        printf("\n  interference by shape beside the store kernel (the SMs closest to 16):");
        print_share("GEMM", x.c.share_kernel_gemm);
        print_share("grouped GEMM", x.c.share_kernel_grouped_gemm);
        print_share("attention", x.c.share_kernel_attention);
        printf("\n");
    }
    if (x.root[F_CORUN])
        printf("  compute beside compute: GEMM x%.3f beside a GEMM, x%.3f beside a memory kernel; "
               "memory kernel x%.3f beside a GEMM, x%.3f beside a memory kernel\n",
               x.c.corun_compute_compute, x.c.corun_compute_memory, x.c.corun_memory_compute,
               x.c.corun_memory_memory);
    if (x.c.power_duty_slowdown.n) {
        const sim_table *t = &x.c.power_duty_slowdown;
        printf("  power cap: flop time x");
        for (int i = 0; i < t->n; i++)
            printf("%s %.3f at duty %.2f", i ? "," : "", t->y[i], t->x[i]);
        printf("; time constant %.0f ms (%d recovery records); attention weight %.2f (copy %.0f W, "
               "attention %.0f W, GEMMs at the cap %.0f W, their demand %.0f W)\n",
               x.c.power_tau_s * 1e3, x.npower_tau, x.c.power_attention_weight,
               x.power_watts[0], x.power_watts[1], x.power_watts[2], x.power_watts[3]);
    }
    if (x.c.power_window_s > 0)
        printf("  power cap window: %.1f ms (%d GEMMs of %s); the slowdown held and let go over "
               "%.0f ms\n",
               x.c.power_window_s * 1e3, x.npower_rise, x.path[F_POWER_RISE],
               x.c.power_tau_s * 1e3);
    if (draw.ops)
        printf("  what ops draw: %d records of %d launches (reference GEMM back to back x%.3f), "
               "weight median: GEMMs %.2f, grouped GEMMs %.2f, attention %.2f; launch to launch "
               "%.2f (median difference)\n",
               draw.ops, draw.launches, draw.ref_b2b, draw.median[0], draw.median[1],
               draw.median[2], draw.spread);
    else if (x.root[F_DRAW])
        printf("  what ops draw: %s not read (%s)\n", x.path[F_DRAW],
               x.c.power_duty_slowdown.n ? "no anchored record" : "no power cap table");
    static const char *const PERMUTE_NAMES[3] = {"permute", "unpermute", "sort chunks"};
    sim_table(*const permute_tables[3])[2] = {&x.c.unfused_permute, &x.c.unfused_unpermute,
                                              &x.c.unfused_sort};
    print_per_byte("unfused permutation", PERMUTE_NAMES, permute_tables, 3);
    static const char *const EXTRAS_NAMES[4] = {"SwiGLU", "quick-GEGLU", "clamped quick-GEGLU",
                                                "fc2 bias loop"};
    sim_table(*const extras_tables[4])[2] = {&x.c.act_swiglu, &x.c.act_geglu, &x.c.act_geglu_clamp,
                                             &x.c.expert_bias};
    print_per_byte("MoE activation and bias", EXTRAS_NAMES, extras_tables, 4);
    if (x.c.mamba_scan_shapes[0].n)
        printf("  Mamba-2 mixer: %d forward and %d backward shapes\n", x.c.mamba_scan_shapes[0].n,
               x.c.mamba_scan_shapes[EP_PHASE_BWD - 1].n);
    rc = 0;
done:
    if (rc) fail2(x.err);
    json_decref(hold);
    for (int w = 0; w < F_NUM; w++)
        json_decref(x.root[w]);
    sim_calib_free(&x.c);
    sim_platform_free(&x.plat);
    return rc;
}
