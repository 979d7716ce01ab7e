/* bench_calib_draw: draw.json of `epref bench calib --parts draw` - how much a compute op draws
 * toward the GPU's power cap, measured in the units epsim's power model counts it in
 * (docs/calibration.md, "What an op draws").
 *
 * The cap table (power.json) says how much a GEMM slows at a duty d: the share of recent time the
 * GPU ran a large GEMM (weight 1) rather than an HBM copy (weight 0). Here the reference GEMM R
 * (8192^3, the class that table calls weight 1) runs back to back with op X, interleaved, R taking
 * about a share rho of the time. Once the clock has settled, R's time against R alone and cold is
 * the slowdown of the mix's duty d = rho + (1 - rho) w_X; `epsim calibrate` reads d off its table
 * and solves for X's weight w_X. Two mixes: rho = 1/2 (d from 0.5 to 1, where the table rises
 * from its knee: light ops) and rho = 1/10 (d from 0.1 to 1: heavy ops, where the first mix is at
 * the table's flat top). Anchors in the same launch: R mixed with R (weight 1 by definition) and
 * R with an HBM copy (weight 0), which pin both ends of the table to this GPU's slowdowns.
 *
 * The shapes are a coarse lattice of the compute grid's (bench_calib.c): epsim interpolates the
 * weight between them as it does the efficiency. Each executor's ops are first timed cold, after
 * the GPU idled DRAW_COOL_S, then mixed. */
#include <stdio.h>
#include <time.h>

#include "bench_calib.h"
#include "ep_cost.h"
#include "ep_stats.h"
#include "exec_gpu.h"
#include "ref_check.h"

#define DRAW_OPS       512
#define DRAW_WARM_S    0.4 /* 3 power time constants (134 ms on an H200; 170 ms on an H100) */
#define DRAW_MEASURE_S 0.2
#define DRAW_COOL_S    1.0  /* idle before the cold timings: the clock comes back within it */
#define DRAW_PERIODS   1024 /* timed periods at most (a period is 2.7 ms or more) */
#define DRAW_AHEAD     3    /* periods the host keeps queued */
#define DRAW_REF       8192 /* R: a GEMM of DRAW_REF^3 */
#define DRAW_COPY      6e9  /* the copy anchor's bytes read and written (about R's time) */

/* the lattice: dense M x N x K; grouped experts x rows per expert x hidden x FFN (both
 * projections); attention sequence x head dims x blocks */
static const int DRAW_ROWS[] = {2048, 8192, 32768};
static const int DRAW_WIDTHS[] = {1024, 4096, 16384};
static const int DRAW_EXPERTS[] = {8, 64};
static const int DRAW_EXPERT_ROWS[] = {64, 128, 512, 2048};
static const int DRAW_HIDDEN[] = {2048, 8192};
/* FFN 8192 (up-projection 16384 wide) joined on 2026-11-29 after the first two launches, which
 * `--parts draw-wide` times alone (its anchors included) */
static const int DRAW_FFN[] = {512, 2048, 8192};
#define DRAW_WIDE_FFN 8192
static const int DRAW_SEQ[] = {2048, 8192};
static const int DRAW_ATTN_DIMS[][2] = {{128, 128}, {192, 128}};
static const int DRAW_ATTN_BLOCKS[] = {4, 32};
#define LEN(a)           (int)(sizeof(a) / sizeof((a)[0]))

/* One executor's ops: op 0 is R, the rest are timed against it. */
typedef struct {
    ep_config cfg;
    ep_op ops[DRAW_OPS];
    int n;
    double cold_us[DRAW_OPS];
} draw_set;

static void set_init(draw_set *s, const ep_config *cfg) {
    s->cfg = *cfg;
    s->n = 0;
    ep_op *r = calib_synth_op(s->ops, &s->n, DRAW_OPS, EP_OP_GEMM, EP_PHASE_FWD);
    r->m = r->n = r->k = DRAW_REF;
    r->flops = ep_cost_gemm_flops(DRAW_REF, DRAW_REF, DRAW_REF);
    r->bytes = ep_cost_gemm_bytes(DRAW_REF, DRAW_REF, DRAW_REF);
}

/* Runs periods of a launches of op x then b of R back to back: DRAW_WARM_S to settle, then
 * DRAW_MEASURE_S with events around each R block. *x_us, *r_us: the medians of one X's and one
 * R's time in the timed periods. */
static void mix(exec_gpu *g, cudaStream_t st, int x, int a, int b, double *x_us, double *r_us) {
    static cudaEvent_t ev0[DRAW_PERIODS], ev1[DRAW_PERIODS], ring[DRAW_AHEAD];
    static int made;
    if (!made) {
        for (int i = 0; i < DRAW_PERIODS; i++) {
            CUDA_CHECK(cudaEventCreate(&ev0[i]));
            CUDA_CHECK(cudaEventCreate(&ev1[i]));
        }
        for (int i = 0; i < DRAW_AHEAD; i++)
            CUDA_CHECK(cudaEventCreate(&ring[i]));
        made = 1;
    }
    double t0 = bench_now_us();
    for (int p = 0; bench_now_us() - t0 < DRAW_WARM_S * 1e6; p++) {
        for (int i = 0; i < a; i++)
            exec_gpu_launch(g, x, st);
        for (int i = 0; i < b; i++)
            exec_gpu_launch(g, 0, st);
        CUDA_CHECK(cudaEventRecord(ring[p % DRAW_AHEAD], st));
        if (p + 1 >= DRAW_AHEAD) CUDA_CHECK(cudaEventSynchronize(ring[(p + 1) % DRAW_AHEAD]));
    }
    int n = 0;
    double t1 = bench_now_us();
    while (n < DRAW_PERIODS && (n < 4 || bench_now_us() - t1 < DRAW_MEASURE_S * 1e6)) {
        for (int i = 0; i < a; i++)
            exec_gpu_launch(g, x, st);
        CUDA_CHECK(cudaEventRecord(ev0[n], st));
        for (int i = 0; i < b; i++)
            exec_gpu_launch(g, 0, st);
        CUDA_CHECK(cudaEventRecord(ev1[n], st));
        if (++n > DRAW_AHEAD) CUDA_CHECK(cudaEventSynchronize(ev1[n - 1 - DRAW_AHEAD]));
    }
    CUDA_CHECK(cudaEventSynchronize(ev1[n - 1]));
    static double xs[DRAW_PERIODS], rs[DRAW_PERIODS];
    for (int i = 1; i < n; i++) { /* period 0's X block follows the warm-up's last R */
        float xm, rm;
        CUDA_CHECK(cudaEventElapsedTime(&xm, ev1[i - 1], ev0[i]));
        CUDA_CHECK(cudaEventElapsedTime(&rm, ev0[i], ev1[i]));
        xs[i - 1] = xm * 1e3 / a;
        rs[i - 1] = rm * 1e3 / b;
    }
    *x_us = ep_median(xs, n - 1);
    *r_us = ep_median(rs, n - 1);
}

/* the mixes' shares of R's time (rho) */
static const double DRAW_RHO[] = {0.5, 0.1};
#define DRAW_MIXES (int)(sizeof DRAW_RHO / sizeof DRAW_RHO[0])

/* Launches of X (*a) and of R (*b) per period for R's share rho of the time, one of them 1. */
static void reps(double x_us, double r_us, double rho, int *a, int *b) {
    double ratio = r_us * (1 - rho) / (rho * x_us); /* X launches per R launch */
    *a = ratio >= 1 ? (int)(ratio + 0.5) : 1;
    *b = ratio >= 1 ? 1 : (int)(1 / ratio + 0.5);
    if (*a > 4000) *a = 4000;
    if (*b < 1) *b = 1;
}

/* Cold times of every op of s (as the compute grid is timed), then each op's mixes with R. */
static void time_set(bench *b, draw_set *s, calib_list *out) {
    calib_synth y;
    calib_synth_init(&y, &s->cfg, 1);
    y.rk[0].ops = s->ops;
    y.rk[0].nops = s->n;
    exec_gpu *g = exec_gpu_create_rank(b->ctx, &y.s, 0, 0);
    int seq, dqk, dv;
    exec_gpu_attention_dims(g, &seq, &dqk, &dv);
    struct timespec cool = {(time_t)DRAW_COOL_S, (long)((DRAW_COOL_S - (time_t)DRAW_COOL_S) * 1e9)};
    CUDA_CHECK(cudaDeviceSynchronize());
    nanosleep(&cool, NULL);
    for (int i = 0; i < s->n; i++) {
        calib_op l = {g, i};
        s->cold_us[i] = bench_time_ahead(b, calib_launch_op, &l, NULL, NULL);
    }
    cudaStream_t st = b->ctx->stream;
    for (int i = 0; i < s->n; i++) {
        const ep_op *op = &s->ops[i];
        char mixes[512];
        int used = 0;
        for (int m = 0; m < DRAW_MIXES; m++) {
            int a, k;
            double x_us, r_us;
            reps(s->cold_us[i], s->cold_us[0], DRAW_RHO[m], &a, &k);
            mix(g, st, i, a, k, &x_us, &r_us);
            used += snprintf(mixes + used, sizeof mixes - (size_t)used,
                             "%s{\"rho\":%g,\"x_reps\":%d,\"ref_reps\":%d,\"x_us\":%.3f,"
                             "\"ref_us\":%.3f}",
                             m ? "," : "", DRAW_RHO[m], a, k, x_us, r_us);
            if (b->ctx->w.rank == 0) {
                printf("  draw %-12s %-6s %6d x %6d x %6d (%3d)  cold %9.1f us  mix %.1f: %9.1f us "
                       "x%-4d  R %7.1f us x%d (cold %.1f)\n",
                       ep_op_kind_name(op->kind), ep_phase_name(op->phase), op->m, op->n, op->k,
                       op->batch, s->cold_us[i], DRAW_RHO[m], x_us, a, r_us, k, s->cold_us[0]);
                fflush(stdout);
            }
        }
        int attn = op->kind == EP_OP_ATTENTION;
        calib_add(out,
                  "{\"kind\":\"%s\",\"phase\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"batch\":%d,"
                  "\"flops\":%.6g,\"bytes\":%.6g,\"seq\":%d,\"dqk\":%d,\"dv\":%d,"
                  "\"cold_us\":%.3f,\"ref_cold_us\":%.3f,\"mixes\":[%s],\"anchor\":\"%s\","
                  "\"source\":\"draw\"}",
                  ep_op_kind_name(op->kind), ep_phase_name(op->phase), op->m, op->n, op->k,
                  op->batch, op->flops, op->bytes, attn ? seq : 0, attn ? dqk : 0, attn ? dv : 0,
                  s->cold_us[i], s->cold_us[0], mixes,
                  i == 0                          ? "ref"
                  : op->kind == EP_OP_ELEMENTWISE ? "copy"
                                                  : "");
    }
    exec_gpu_destroy(g);
}

void calib_draw(bench *b, calib_list *out, int wide_only) {
    static draw_set s;
    ep_config cfg;
    ep_config_defaults(&cfg);
    ep_config_resolve(&cfg); /* built by hand: no validation */
    set_init(&s, &cfg);
    ep_op *copy = calib_synth_op(s.ops, &s.n, DRAW_OPS, EP_OP_ELEMENTWISE, EP_PHASE_FWD);
    copy->bytes = DRAW_COPY;
    for (int im = 0; im < LEN(DRAW_ROWS) && !wide_only; im++)
        for (int in = 0; in < LEN(DRAW_WIDTHS); in++)
            for (int ik = 0; ik < LEN(DRAW_WIDTHS); ik++) {
                int m = DRAW_ROWS[im], nn = DRAW_WIDTHS[in], k = DRAW_WIDTHS[ik];
                if (calib_gemm_fits(m, nn, k, 1))
                    calib_gemm3(s.ops, &s.n, DRAW_OPS, EP_OP_GEMM, m, nn, k, 1);
            }
    for (int ie = 0; ie < LEN(DRAW_EXPERTS); ie++)
        for (int ir = 0; ir < LEN(DRAW_EXPERT_ROWS); ir++)
            for (int ih = 0; ih < LEN(DRAW_HIDDEN); ih++)
                for (int iff = 0; iff < LEN(DRAW_FFN); iff++)
                    for (int proj = 0; proj < 2; proj++) {
                        int e = DRAW_EXPERTS[ie], rows = e * DRAW_EXPERT_ROWS[ir];
                        int h = DRAW_HIDDEN[ih], f = DRAW_FFN[iff];
                        int nn = proj ? h : 2 * f, k = proj ? f : h;
                        if (calib_gemm_fits(rows, nn, k, e) && (!wide_only || f == DRAW_WIDE_FFN))
                            calib_gemm3(s.ops, &s.n, DRAW_OPS, EP_OP_GROUPED_GEMM, rows, nn, k, e);
                    }
    time_set(b, &s, out);
    /* attention: one executor per geometry (the executor takes it from the config) */
    for (int d = 0; d < LEN(DRAW_ATTN_DIMS) && !wide_only; d++)
        for (int is = 0; is < LEN(DRAW_SEQ); is++) {
            int dqk = DRAW_ATTN_DIMS[d][0], dv = DRAW_ATTN_DIMS[d][1], seq = DRAW_SEQ[is];
            calib_attention_config(&cfg, seq, dqk, dv);
            set_init(&s, &cfg);
            double per = 2.0 * seq * (double)seq * (dqk + dv);
            for (int ib = 0; ib < LEN(DRAW_ATTN_BLOCKS); ib++) {
                double fl = DRAW_ATTN_BLOCKS[ib] * per;
                if (fl > CALIB_MAX_FLOPS) continue;
                calib_synth_op(s.ops, &s.n, DRAW_OPS, EP_OP_ATTENTION, EP_PHASE_FWD)->flops = fl;
                calib_synth_op(s.ops, &s.n, DRAW_OPS, EP_OP_ATTENTION, EP_PHASE_BWD)->flops = fl;
            }
            time_set(b, &s, out);
        }
}
