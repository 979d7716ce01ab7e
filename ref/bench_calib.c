/* bench_calib: compute and NCCL records, the driver and the files (bench_calib.h). Ops are timed
 * through exec_gpu_launch on one-rank synthetic schedules (compute) or one-group schedules
 * (NCCL), so a record measures exactly what `epref run` launches for an op of that kind. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_calib.h"
#include "ep_cost.h"
#include "ep_io.h"
#include "ep_sched.h"
#include "ep_xfer.h"
#include "exec_gpu.h"
#include "ref_check.h"
#include "ref_comm.h"

#define MAX_OPS       4096
#define MODEL_OPS_CAP 2000 /* distinct ops timed per model (the first ones met) */
#define NVL_CALIB_SMS 16   /* Hybrid-EP's default SMs */

/* ---- compute ------------------------------------------------------------------------------ */

static int same_op(const ep_op *a, const ep_op *b) {
    return a->kind == b->kind && a->phase == b->phase && a->m == b->m && a->n == b->n &&
           a->k == b->k && a->batch == b->batch && a->flops == b->flops && a->bytes == b->bytes;
}

/* Times ops[0..n) of a one-rank schedule with cfg's attention geometry; one record each: the
 * GPU time with the host ahead (time_us) and the host time of issuing the op (host_us steady,
 * host_first_us right after a synchronisation). */
static void time_compute(bench *b, const ep_config *cfg, ep_op *ops, int n, const char *source,
                         calib_list *out) {
    calib_synth y;
    calib_synth_init(&y, cfg, 1);
    y.rk[0].ops = ops;
    y.rk[0].nops = n;
    exec_gpu *g = exec_gpu_create_rank(b->ctx, &y.s, 0, 0);
    int seq, dqk, dv;
    exec_gpu_attention_dims(g, &seq, &dqk, &dv);
    for (int i = 0; i < n; i++) {
        const ep_op *op = &ops[i];
        calib_op la = {g, i};
        double host_us = 0, host_first_us = 0;
        double us = bench_time_ahead(b, calib_launch_op, &la, &host_us, &host_first_us);
        int attn = op->kind == EP_OP_ATTENTION;
        calib_add(out,
                  "{\"kind\":\"%s\",\"phase\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"batch\":%d,"
                  "\"flops\":%.6g,\"bytes\":%.6g,\"seq\":%d,\"dqk\":%d,\"dv\":%d,"
                  "\"time_us\":%.3f,\"host_us\":%.3f,\"host_first_us\":%.3f,\"source\":\"%s\"}",
                  ep_op_kind_name(op->kind), ep_phase_name(op->phase), op->m, op->n, op->k,
                  op->batch, op->flops, op->bytes, attn ? seq : 0, attn ? dqk : 0, attn ? dv : 0,
                  us, host_us, host_first_us, source);
        if (b->ctx->w.rank == 0 && (i % 50 == 0 || i == n - 1)) {
            printf("  %-14s %4d/%d  last %s %.1f us\n", source, i + 1, n, ep_op_kind_name(op->kind),
                   us);
            fflush(stdout);
        }
    }
    exec_gpu_destroy(g);
}

/* The shape grid (docs/calibration.md, "The grid"): geometric, powers of two only, so that no
 * model's widths are in it and a model can be predicted from shapes it never had timed; ops
 * beyond calib_gemm_fits's bounds are left out. */
static const int GRID_ROWS[] = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
static const int GRID_WIDTHS[] = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
/* --parts dense-steps: the dense GEMMs again with rows and widths between the powers of two
 * (3 x 2^k: models' token counts and widths such as 3072, 6144 or 24576 lie there) */
static const int GRID_ROW_STEPS[] = {1536, 3072, 6144, 12288};
static const int GRID_WIDTH_STEPS[] = {384, 768, 1536, 3072, 6144, 12288, 24576};
static const int GRID_HIDDEN[] = {1024, 2048, 4096, 8192};
static const int GRID_FFN[] = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
static const int GRID_EXPERTS[] = {1, 4, 16, 64, 256};
/* rows per expert: powers of two, and from 128 to 1024 every 64 rows, the steps a GEMM's time
 * climbs by (it runs whole tiles of rows: 290 rows cost what 320 do; grouped-probe.models) */
static const int GRID_EXPERT_ROWS[] = {16,  32,  64,  128, 192, 256, 320, 384,  448,  512,
                                       576, 640, 704, 768, 832, 896, 960, 1024, 4096, 16384};
static const int GRID_SEQ[] = {512, 1024, 2048, 4096, 8192, 16384};
static const int GRID_ATTN_DIMS[][2] = {{64, 64}, {128, 128}, {192, 128}}; /* MHA, MLA */
static const int GRID_ATTN_BLOCKS[] = {1, 2, 4, 8, 16, 32, 64, 128};
#define LEN(a) (int)(sizeof(a) / sizeof((a)[0]))

/* Times ops gathered so far, as records of `source`, when the next shape could overflow the
 * batch. */
static void grid_flush(bench *b, const ep_config *cfg, ep_op *ops, int *n, int room,
                       const char *source, calib_list *out) {
    if (*n + room <= MAX_OPS) return;
    time_compute(b, cfg, ops, *n, source, out);
    *n = 0;
}

/* Which part of the grid grid_compute times: all of it; only the grouped GEMMs at rows per
 * expert that are no power of two (--parts grouped-steps); only the dense GEMMs (--parts dense);
 * only the dense GEMMs whose rows or a width lie between the powers of two (--parts
 * dense-steps); or grouped GEMMs at rows per expert
 * off the grid, OFF_GRID_DRAWS seeded draws per weight shape between 65 and 1023 and no multiple
 * of 64, labelled as a model's shapes ("model:off-grid") so that `epsim calibrate --holdout`
 * scores how the grid predicts rows it never timed (--parts grouped-off-grid). */
typedef enum { GRID_ALL, GRID_STEPS, GRID_OFF, GRID_DENSE, GRID_DENSE_STEPS } grid_part;
#define OFF_GRID_DRAWS 2

/* the d-th off-grid rows per expert of weight shape s: an LCG step, deterministic */
static int off_grid_rows(unsigned s, int d) {
    unsigned v = (s * 2654435761u + (unsigned)d * 40503u + 12345u) * 1103515245u + 12345u;
    int r = 65 + (int)((v >> 8) % 959u); /* 65 .. 1023 */
    return r % 64 ? r : r + 1;
}

/* The i-th value of a grid series: its powers of two, then its steps. */
static int grid_at(const int *powers, int npowers, const int *steps, int i) {
    return i < npowers ? powers[i] : steps[i - npowers];
}

static void grid_compute(bench *b, calib_list *out, grid_part part) {
    static ep_op ops[MAX_OPS];
    int n = 0;
    ep_config cfg;
    ep_config_defaults(&cfg);
    ep_config_resolve(&cfg); /* built by hand: no validation */
    const char *source = part == GRID_OFF ? "model:off-grid" : "grid";
    /* dense GEMMs: M x N x K over the grid, with their dgrad and wgrad; with the steps, every
     * combination of the powers and the steps that has at least one step */
    const int steps = part == GRID_DENSE_STEPS;
    const int nw = LEN(GRID_WIDTHS) + (steps ? LEN(GRID_WIDTH_STEPS) : 0);
    const int nr = LEN(GRID_ROWS) + (steps ? LEN(GRID_ROW_STEPS) : 0);
    const int dense_only = steps || part == GRID_DENSE;
    for (int in = 0; in < nw && (part == GRID_ALL || dense_only); in++)
        for (int ik = 0; ik < nw; ik++)
            for (int im = 0; im < nr; im++) {
                int m = grid_at(GRID_ROWS, LEN(GRID_ROWS), GRID_ROW_STEPS, im),
                    nn = grid_at(GRID_WIDTHS, LEN(GRID_WIDTHS), GRID_WIDTH_STEPS, in),
                    k = grid_at(GRID_WIDTHS, LEN(GRID_WIDTHS), GRID_WIDTH_STEPS, ik);
                int on_grid = im < LEN(GRID_ROWS) && in < LEN(GRID_WIDTHS) && ik < LEN(GRID_WIDTHS);
                if (steps == on_grid || !calib_gemm_fits(m, nn, k, 1)) continue;
                grid_flush(b, &cfg, ops, &n, 3, source, out);
                calib_gemm3(ops, &n, MAX_OPS, EP_OP_GEMM, m, nn, k, 1);
            }
    if (dense_only) {
        if (n) time_compute(b, &cfg, ops, n, source, out);
        return;
    }
    /* grouped expert GEMMs: hidden x FFN x experts x rows per expert, both projections (up: n =
     * 2 FFN, k = hidden; down: n = hidden, k = FFN) */
    int nrows = part == GRID_OFF ? OFF_GRID_DRAWS : LEN(GRID_EXPERT_ROWS);
    for (int ih = 0; ih < LEN(GRID_HIDDEN); ih++)
        for (int iff = 0; iff < LEN(GRID_FFN); iff++)
            for (int ie = 0; ie < LEN(GRID_EXPERTS); ie++)
                for (int ir = 0; ir < nrows; ir++)
                    for (int proj = 0; proj < 2; proj++) {
                        int h = GRID_HIDDEN[ih], f = GRID_FFN[iff], e = GRID_EXPERTS[ie];
                        unsigned shape =
                            (unsigned)(((ih * LEN(GRID_FFN) + iff) * LEN(GRID_EXPERTS) + ie) * 2 +
                                       proj);
                        int per =
                            part == GRID_OFF ? off_grid_rows(shape, ir) : GRID_EXPERT_ROWS[ir];
                        int rows = e * per;
                        if (part == GRID_STEPS && !(per & (per - 1))) continue;
                        int nn = proj ? h : 2 * f, k = proj ? f : h;
                        if (!calib_gemm_fits(rows, nn, k, e)) continue;
                        grid_flush(b, &cfg, ops, &n, 3, source, out);
                        calib_gemm3(ops, &n, MAX_OPS, EP_OP_GROUPED_GEMM, rows, nn, k, e);
                    }
    if (n) time_compute(b, &cfg, ops, n, source, out);
}

/* memory-bound kernel: one kernel moves `bytes` for every memory-bound kind */
static void grid_memory(bench *b, calib_list *out) {
    static ep_op ops[MAX_OPS];
    int n = 0;
    ep_config cfg;
    ep_config_defaults(&cfg);
    ep_config_resolve(&cfg); /* built by hand: no validation */
    for (double by = 1e4; by < 1.1e10; by *= 3.1623) {
        ep_op *op = calib_synth_op(ops, &n, MAX_OPS, EP_OP_ELEMENTWISE, EP_PHASE_FWD);
        op->bytes = (double)(long long)by;
    }
    time_compute(b, &cfg, ops, n, "grid", out);
}

static void grid_attention(bench *b, calib_list *out) {
    static ep_op ops[MAX_OPS];
    int n = 0;
    ep_config cfg;
    /* attention: one config per (head dims, sequence), whose geometry the executor takes; the
     * forward and the backward op of each block count (the executor runs flops / one block's
     * flops blocks whatever the phase, so both phases are timed at whole blocks) */
    for (int d = 0; d < LEN(GRID_ATTN_DIMS); d++)
        for (int is = 0; is < LEN(GRID_SEQ); is++) {
            int dqk = GRID_ATTN_DIMS[d][0], dv = GRID_ATTN_DIMS[d][1], seq = GRID_SEQ[is];
            calib_attention_config(&cfg, seq, dqk, dv);
            n = 0;
            double per = 2.0 * seq * (double)seq * (dqk + dv);
            for (int ib = 0; ib < LEN(GRID_ATTN_BLOCKS); ib++) {
                double fl = GRID_ATTN_BLOCKS[ib] * per;
                if (fl > CALIB_MAX_FLOPS) continue;
                calib_synth_op(ops, &n, MAX_OPS, EP_OP_ATTENTION, EP_PHASE_FWD)->flops = fl;
                calib_synth_op(ops, &n, MAX_OPS, EP_OP_ATTENTION, EP_PHASE_BWD)->flops = fl;
            }
            if (n) time_compute(b, &cfg, ops, n, "grid", out);
        }
}

/* Distinct compute ops of every rank of each model's schedule (lines "name flags..." of path). */
static int model_compute(bench *b, const char *path, calib_list *out) {
    FILE *f = fopen(path, "r");
    if (!f) {
        if (b->ctx->w.rank == 0) fprintf(stderr, "epref: --models %s: cannot open\n", path);
        return 2;
    }
    static ep_op ops[MAX_OPS];
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p) continue;
        char name[64];
        int used = 0;
        if (sscanf(p, "%63s%n", name, &used) != 1) continue;
        ep_config cfg;
        ep_config_defaults(&cfg);
        char err[EP_ERRLEN];
        ep_sched s;
        if (ep_config_parse_text(&cfg, p + used, err) || ep_config_validate(&cfg, err) ||
            ep_sched_build(&cfg, &s, err)) {
            if (b->ctx->w.rank == 0) fprintf(stderr, "epref: %s:%d: %s\n", path, lineno, err);
            fclose(f);
            return 2;
        }
        int n = 0, skipped = 0;
        for (int r = 0; r < s.world; r++)
            for (int i = 0; i < s.ranks[r].nops; i++) {
                const ep_op *op = &s.ranks[r].ops[i];
                if (ep_op_is_comm(op) || op->kind == EP_OP_HOST_SYNC ||
                    !(op->flops + op->bytes > 0))
                    continue;
                int dup = 0;
                for (int j = 0; j < n && !dup; j++)
                    dup = same_op(&ops[j], op);
                if (dup) continue;
                if (n == MODEL_OPS_CAP) {
                    skipped++;
                    continue;
                }
                ep_op *c = calib_synth_op(ops, &n, MAX_OPS, op->kind, op->phase);
                *c = *op;
                c->stream = EP_STREAM_COMP, c->ndeps = 0, c->group = c->traffic = -1;
            }
        if (skipped && b->ctx->w.rank == 0)
            printf("  model %s: %d more distinct ops beyond the first %d not timed\n", name,
                   skipped, MODEL_OPS_CAP);
        char source[80];
        snprintf(source, sizeof source, "model:%s", name);
        time_compute(b, &cfg, ops, n, source, out);
        ep_sched_free(&s);
    }
    fclose(f);
    return 0;
}

/* ---- NCCL --------------------------------------------------------------------------------- */

static void time_comm(bench *b, calib_list *out) {
    int W = b->ctx->w.size, me = b->ctx->w.rank;
    static ep_op ops[MAX_OPS];
    static const ep_op_kind kinds[] = {EP_OP_ALLTOALL, EP_OP_ALL_GATHER, EP_OP_REDUCE_SCATTER,
                                       EP_OP_ALL_REDUCE, EP_OP_SEND};
    int n = 0, seq[2] = {0, 0};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (double by = 4096; by <= (double)(1 << 30); by *= 4) {
            int p2p = kinds[k] == EP_OP_SEND;
            ep_op *op = calib_synth_op(ops, &n, MAX_OPS, kinds[k], EP_PHASE_FWD);
            op->stream = EP_STREAM_COMM;
            op->group = p2p ? 1 : 0;
            op->seq = seq[p2p]++;
            op->bytes = by;
            if (p2p) op->peer = 1; /* rank 0 sends to rank 1; other ranks have nothing to do */
        }
    ep_config cfg;
    ep_config_defaults(&cfg);
    ep_config_resolve(&cfg); /* built by hand: no validation */
    /* the schedule holds every rank's list: rank 0's (send), rank 1's (recv) and the rest */
    static ep_op rank1[MAX_OPS], rest[MAX_OPS];
    for (int i = 0; i < n; i++) {
        ep_xfer_set(&ops[i], &cfg, NULL); /* NCCL's algorithm of each kind, as a run's */
        rank1[i] = rest[i] = ops[i];
        if (ops[i].kind == EP_OP_SEND) {
            rank1[i].kind = EP_OP_RECV, rank1[i].peer = 0;
            rest[i].kind = EP_OP_HOST_SYNC;
        }
    }
    calib_synth y;
    calib_synth_init(&y, &cfg, W);
    for (int r = 0; r < W; r++) {
        y.rk[r].ops = r == 0 ? ops : r == 1 ? rank1 : rest;
        y.rk[r].nops = n;
    }
    exec_gpu *g = exec_gpu_create_rank(b->ctx, &y.s, me, 1);
    for (int i = 0; i < n; i++) {
        calib_op la = {g, i};
        double us = bench_time(b, calib_launch_op, &la);
        const char *name = ops[i].kind == EP_OP_SEND ? "send" : ep_op_kind_name(ops[i].kind);
        calib_add(out,
                  "{\"op\":\"%s\",\"ranks\":%d,\"link\":\"nvlink\",\"bytes\":%.0f,"
                  "\"time_us\":%.3f}",
                  name, ops[i].kind == EP_OP_SEND ? 2 : W, ops[i].bytes, us);
        if (me == 0) {
            printf("  %-16s %12.0f B %10.1f us\n", name, ops[i].bytes, us);
            fflush(stdout);
        }
    }
    exec_gpu_destroy(g);
}

/* ---- NVLink transport ---------------------------------------------------------------------- */

typedef struct {
    ep_nvl *nvl;
    const void *src;
    size_t out[EP_MAX_RANKS];
    int n, me;
} push_arg;

static void op_push(void *a, cudaStream_t st) {
    push_arg *p = a;
    exec_nvl_push(p->nvl, p->src, p->out, p->n, p->me, NVL_CALIB_SMS, st);
}

/* deepep/hybridep all-to-alls as epref run moves them (exec_nvl_push) on 16 SMs, bytes per
 * peer as comm.json's alltoall records. */
static void time_nvl(bench *b, calib_list *out) {
    int W = b->ctx->w.size, me = b->ctx->w.rank;
    if (W > EP_MAX_RANKS) return;
    const size_t most = (size_t)256 << 20;
    const int hidden = 7168;
    int rows = (int)((most + 16 + (size_t)hidden * 2 - 1) / ((size_t)hidden * 2));
    static ep_nvl nvl;
    CUDA_CHECK(ep_nvl_create(&nvl, W, me, hidden, 1, W, rows, 1, 0, ref_allgather_cb, &b->ctx->w));
    void *src = NULL;
    CUDA_CHECK(cudaMalloc(&src, most + 16));
    for (double by = 4096; by <= (double)most; by *= 4) {
        push_arg a = {&nvl, src, {0}, W, me};
        for (int p = 0; p < W; p++)
            a.out[p] = p == me ? 0 : (size_t)by;
        double us = bench_time(b, op_push, &a);
        if (ep_nvl_failed(&nvl)) REF_DIE("an NVLink spin-wait timed out");
        calib_add(out,
                  "{\"op\":\"nvl_a2a\",\"ranks\":%d,\"link\":\"nvlink\",\"bytes\":%.0f,"
                  "\"sms\":%d,\"time_us\":%.3f}",
                  W, by, NVL_CALIB_SMS, us);
        if (me == 0) {
            printf("  %-16s %12.0f B %10.1f us\n", "nvl_a2a", by, us);
            fflush(stdout);
        }
    }
    CUDA_CHECK(cudaFree(src));
    ep_nvl_destroy(&nvl);
}

/* ---- files -------------------------------------------------------------------------------- */

static int write_list(bench *b, const char *dir, const char *file, const calib_list *l) {
    char path[4096], err[EP_ERRLEN], meta[1024], date[32];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    ref_meta_members(b->ctx, meta, sizeof meta);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    ep_outfile o;
    if (ep_outfile_open(&o, path, err)) {
        fprintf(stderr, "epref: %s\n", err);
        return -1;
    }
    fprintf(o.f, "[\n{\"meta\":{\"benchmark\":\"calib\",\"file\":\"%s\",\"date\":\"%s\",", file,
            date);
    fprintf(o.f, "\"git_revision\":");
    ep_json_string(o.f, ep_git_revision());
    fprintf(o.f,
            ",\"program\":\"epref\",\"version\":\"%s\",%s,\"ranks\":%d,\"iters\":%d,"
            "\"warmup\":%d,\"time\":\"median over iterations of the slowest rank\","
            "\"format\":\"docs/calibration.md\"}}",
            ep_version(), meta, b->ctx->w.size, b->iters, b->warmup);
    if (l->len) fwrite(l->text, 1, l->len, o.f);
    fprintf(o.f, "\n]\n");
    if (ep_outfile_commit(&o, err)) {
        fprintf(stderr, "epref: %s\n", err);
        return -1;
    }
    printf("wrote %s (%d records)\n", path, l->n);
    return 0;
}

/* bench.h */
int calib_has_part(const char *parts, const char *name) {
    size_t n = strlen(name);
    for (const char *p = parts; (p = strstr(p, name)) != NULL; p += n)
        if ((p == parts || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

int bench_calib(bench *b, const char *out_dir, const char *models, const char *parts) {
    int me = b->ctx->w.rank, W = b->ctx->w.size;
    static ep_nvl bar; /* its barrier aligns the ranks before every timed iteration */
    CUDA_CHECK(ep_nvl_create(&bar, W, me, 8, 1, W, 1, 1, 0, ref_allgather_cb, &b->ctx->w));
    b->barrier = &bar;
    enum { NFILES = 6 };
    calib_list lists[NFILES];
    memset(lists, 0, sizeof lists);
    static const char *files[NFILES] = {"compute.json", "comm.json", "host.json",
                                        "interference.json", "corun.json", "draw.json"};
    int rc = 0;
    if (me == 0) {
        printf("# epref bench calib: %d ranks, iterations=%d warmup=%d, parts %s -> %s\n", W,
               b->iters, b->warmup, parts, out_dir);
        fflush(stdout);
    }
    if (calib_has_part(parts, "host")) calib_host(b, &lists[2]);
    /* compute: the whole grid and the models; attention, memory: that part of the grid alone */
    if (calib_has_part(parts, "compute") || calib_has_part(parts, "attention"))
        grid_attention(b, &lists[0]);
    if (calib_has_part(parts, "compute") || calib_has_part(parts, "memory"))
        grid_memory(b, &lists[0]);
    if (calib_has_part(parts, "grouped-steps")) grid_compute(b, &lists[0], GRID_STEPS);
    if (calib_has_part(parts, "dense-steps")) grid_compute(b, &lists[0], GRID_DENSE_STEPS);
    if (calib_has_part(parts, "dense")) grid_compute(b, &lists[0], GRID_DENSE);
    if (calib_has_part(parts, "grouped-off-grid")) grid_compute(b, &lists[0], GRID_OFF);
    /* models: the --models files' ops alone, without the grid */
    if (calib_has_part(parts, "compute") || calib_has_part(parts, "models")) {
        if (calib_has_part(parts, "compute")) grid_compute(b, &lists[0], GRID_ALL);
        /* --models a,b: every file in turn */
        char list[4096];
        snprintf(list, sizeof list, "%s", models ? models : "");
        for (char *save = NULL, *m = strtok_r(list, ",", &save); m && !rc;
             m = strtok_r(NULL, ",", &save))
            rc = model_compute(b, m, &lists[0]);
    }
    if (!rc && W >= 2 && calib_has_part(parts, "comm")) time_comm(b, &lists[1]);
    /* nvl: the NVLink transport alone, re-timed when only it changed */
    if (!rc && W >= 2 && (calib_has_part(parts, "comm") || calib_has_part(parts, "nvl")))
        time_nvl(b, &lists[1]);
    if (!rc && W >= 2 &&
        (calib_has_part(parts, "interference") || calib_has_part(parts, "waiting")))
        calib_interference(b, &lists[3], calib_has_part(parts, "interference"),
                           calib_has_part(parts, "waiting"));
    if (!rc && W >= 2 && calib_has_part(parts, "nccl-issue")) calib_nccl_issue(b, &lists[2]);
    if (!rc && W >= 2 && calib_has_part(parts, "interference-shapes"))
        calib_interference_shapes(b, &lists[3]);
    if (!rc && calib_has_part(parts, "corun")) calib_corun(b, &lists[4]);
    if (!rc && (calib_has_part(parts, "draw") || calib_has_part(parts, "draw-wide")))
        calib_draw(b, &lists[5], !calib_has_part(parts, "draw"));
    for (int i = 0; i < NFILES && !rc; i++)
        if (me == 0 && lists[i].n && write_list(b, out_dir, files[i], &lists[i])) rc = 1;
    for (int i = 0; i < NFILES; i++)
        free(lists[i].text);
    ep_nvl_destroy(&bar);
    return rc;
}
