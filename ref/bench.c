/* bench: the harness of `epref bench` - timing, rows, the table and the JSON (see bench.h); the
 * benchmarks are listed in bench_list.c and the command line is bench_main.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench.h"
#include "ep_io.h"
#include "ep_route.h"
#include "ep_stats.h"
#include "exec_kern.h"
#include "ref_check.h"

double bench_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

#define AHEAD_MAX_US 200000.0 /* longest wait the GPU is given while the host queues an op */
#define COOL_HOLD    1.5      /* the GPU waits this many times the timed ops' time between timings */

/* bench_time and bench_time_ahead: with `ahead`, a delay kernel holds the stream while the host
 * issues the op, long enough (grown through the warm-up) that the GPU never waits for it. With
 * host_us, the op is issued a second time right behind the timed one (its GPU work runs after the
 * end event): that issue, on a host that just issued the same calls, is what a run's steady stream
 * of launches costs (*host_us); the first one, right after a synchronisation, goes to
 * *host_first_us. */
static double time_op(bench *b, bench_op op, void *arg, int ahead, double *host_us,
                      double *host_first_us) {
    cudaStream_t st = b->ctx->stream;
    int n = b->iters, ranks = b->ctx->w.size;
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float *mine = calloc((size_t)n, sizeof *mine), *all = calloc((size_t)n * ranks, sizeof *all);
    double *worst = calloc((size_t)n, sizeof *worst), *host = calloc((size_t)n, sizeof *host);
    double *first = calloc((size_t)n, sizeof *first);
    if (!mine || !all || !worst || !host || !first) REF_DIE("out of memory");
    double delay = 50;
    for (int i = -b->warmup; i < n; i++) {
        CUDA_CHECK(ep_nvl_barrier(b->barrier, st));
        if (ahead && b->flush_mb > 0) {
            size_t fb = (size_t)b->flush_mb << 20;
            for (int k = 0; k < 2; k++)
                if (!b->flush[k]) CUDA_CHECK(cudaMalloc(&b->flush[k], fb));
            CUDA_CHECK(exec_mem_rw(b->flush[0], b->flush[1], fb, 2.0 * (double)fb, st));
        }
        if (ahead) CUDA_CHECK(exec_delay(delay, st));
        CUDA_CHECK(cudaEventRecord(e0, st));
        double t0 = bench_now_us();
        op(arg, st);
        double th = bench_now_us() - t0;
        CUDA_CHECK(cudaEventRecord(e1, st));
        double th2 = 0;
        if (host_us) {
            double t1 = bench_now_us();
            op(arg, st);
            th2 = bench_now_us() - t1;
        }
        CUDA_CHECK(cudaEventSynchronize(e1));
        if (ep_nvl_failed(b->barrier))
            REF_DIE("an NVLink spin-wait timed out (see the device message above)");
        if (ahead && th > 0.5 * delay) delay = fmin(2 * th + 20, AHEAD_MAX_US);
        float op_ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&op_ms, e0, e1));
        /* the wait before the next timing: at least COOL_HOLD x the GPU time of this iteration's
         * ops (two with host_us), so that the tensor cores' duty stays under 0.4 and no record is
         * taken at a power-capped clock (docs/calibration.md, "Sustained load") */
        if (ahead) delay = fmin(fmax(delay, COOL_HOLD * op_ms * 1e3 * (host_us ? 2 : 1)), AHEAD_MAX_US);
        if (i >= 0) {
            mine[i] = op_ms;
            host[i] = th2;
            first[i] = th;
        }
    }
    if (ref_boot_allgather(&b->ctx->w, mine, all, (size_t)n * sizeof *mine)) REF_DIE("lost a peer");
    for (int i = 0; i < n; i++) {
        worst[i] = 0;
        for (int r = 0; r < ranks; r++)
            if (all[(size_t)r * n + i] > worst[i]) worst[i] = all[(size_t)r * n + i];
    }
    double med = ep_median(worst, n);
    if (host_us) *host_us = bench_mean(b, ep_median(host, n));
    if (host_first_us) *host_first_us = bench_mean(b, ep_median(first, n));
    free(mine);
    free(all);
    free(worst);
    free(host);
    free(first);
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    return med * 1e3;
}

double bench_time(bench *b, bench_op op, void *arg) {
    return time_op(b, op, arg, 0, NULL, NULL);
}

double bench_time_ahead(bench *b, bench_op op, void *arg, double *host_us, double *host_first_us) {
    return time_op(b, op, arg, 1, host_us, host_first_us);
}

double bench_mean(bench *b, double v) {
    int n = b->ctx->w.size;
    double *all = malloc((size_t)n * sizeof *all), s = 0;
    if (!all || ref_boot_allgather(&b->ctx->w, &v, all, sizeof v)) REF_DIE("lost a peer");
    for (int r = 0; r < n; r++)
        s += all[r];
    free(all);
    return s / n;
}

void bench_add(bench *b, const char *backend, int tokens, int num_sms, double time_us,
               double link_bytes, double logical_bytes, double flops) {
    if (b->nrows == BENCH_MAX_ROWS) REF_DIE("too many benchmark rows");
    bench_row *r = &b->rows[b->nrows++];
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    r->tokens = tokens;
    r->num_sms = num_sms;
    r->time_us = time_us;
    r->link_bytes = link_bytes;
    r->logical_bytes = logical_bytes;
    r->flops = flops;
    if (b->ctx->w.rank != 0) return;
    char sms[16];
    snprintf(sms, sizeof sms, num_sms < 0 ? "-" : "%d", num_sms);
    if (flops > 0)
        printf("  %-16s %7d %7s %11.2f %14.0f %10.1f\n", backend, tokens, sms, time_us, flops,
               flops / time_us * 1e-6);
    else
        printf("  %-16s %7d %7s %11.2f %14.0f %10.1f %12.1f\n", backend, tokens, sms, time_us,
               link_bytes, link_bytes / time_us * 1e-3, logical_bytes / time_us * 1e-3);
    fflush(stdout);
}

void bench_routing(bench *b, int tokens, int32_t *d_topk, float *d_prob) {
    int ep = b->ctx->w.size, me = b->ctx->w.rank, k = b->cfg.moe_router_topk;
    int ranks[EP_MAX_RANKS], toks[EP_MAX_RANKS];
    for (int r = 0; r < ep; r++) {
        ranks[r] = r;
        toks[r] = tokens;
    }
    ep_routing rt;
    if (ep_route_draw(&b->cfg, 0, 0, 0, ranks, toks, 1, &rt)) REF_DIE("routing: out of memory");
    size_t n = (size_t)tokens * k;
    float *p = malloc(n * sizeof *p);
    if (!p) REF_DIE("out of memory");
    ep_rng g;
    ep_rng_seed(&g, ep_hash4(b->cfg.seed, (uint64_t)me, (uint64_t)tokens, 0x70726f62ULL));
    for (int t = 0; t < tokens; t++) { /* probabilities: any positive weights summing to 1 */
        double s = 0;
        for (int j = 0; j < k; j++)
            s += p[(size_t)t * k + j] = (float)(0.05 + ep_rng_uniform(&g));
        for (int j = 0; j < k; j++)
            p[(size_t)t * k + j] = (float)(p[(size_t)t * k + j] / s);
    }
    CUDA_CHECK(cudaMemcpy(d_topk, rt.choices[me], n * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_prob, p, n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize()); /* pageable copies may land after they return */
    free(p);
    ep_routing_free(&rt);
}

void bench_print_header(bench *b, const char *what) {
    if (b->ctx->w.rank != 0) return;
    const ep_config *c = &b->cfg;
    static const char *dist[] = {"uniform", "zipf", "group-limited"};
    printf("# epref bench %s: EP=%d hidden=%d topk=%d experts=%d bf16 routing=%s seed=%llu\n", what,
           b->ctx->w.size, c->hidden_size, c->moe_router_topk, c->num_experts, dist[c->route_dist],
           (unsigned long long)c->seed);
    printf("# iterations=%d warmup=%d; time = median over iterations of the slowest rank; "
           "figures defined in docs/metrics.md\n",
           b->iters, b->warmup);
    if (!strcmp(what, "gemm"))
        printf("# %-16s %7s %7s %11s %14s %10s\n", "backend", "tokens", "sms", "time_us", "flops",
               "TFLOP/s");
    else
        printf("# %-16s %7s %7s %11s %14s %10s %12s\n", "backend", "tokens", "num_sms", "time_us",
               "link_bytes", "link_GBps", "logical_GBps");
    fflush(stdout);
}

int bench_write_json(bench *b) {
    char err[EP_ERRLEN], meta[1024];
    ep_outfile o;
    ref_meta_members(b->ctx, meta, sizeof meta);
    if (ep_outfile_open(&o, b->json_path, err)) {
        fprintf(stderr, "epref: %s\n", err);
        return -1;
    }
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const ep_config *c = &b->cfg;
    fprintf(o.f, "[\n{\"meta\":{\"benchmark\":\"%s\",\"date\":\"%s\",\"git_revision\":", b->name,
            date);
    ep_json_string(o.f, ep_git_revision());
    fprintf(o.f,
            ",\"program\":\"epref\",\"version\":\"%s\",%s,\"ep\":%d,\"hidden\":%d,\"topk\":%d,"
            "\"num_experts\":%d,\"moe_ffn_hidden\":%d,\"dtype\":\"bf16\",\"routing\":%d,"
            "\"seed\":%llu,\"iters\":%d,\"warmup\":%d,\"permute_blocks\":%d,"
            "\"reduce_blocks\":%d,\"time\":\"median over iterations of the slowest rank\","
            "\"definitions\":\"docs/metrics.md\"}}",
            ep_version(), meta, b->ctx->w.size, c->hidden_size, c->moe_router_topk, c->num_experts,
            c->moe_ffn_hidden_size, (int)c->route_dist, (unsigned long long)c->seed, b->iters,
            b->warmup, b->permute_blocks, b->reduce_blocks);
    for (int i = 0; i < b->nrows; i++) {
        const bench_row *r = &b->rows[i];
        fprintf(o.f, ",\n{\"backend\":\"%s\",\"tokens\":%d,\"num_sms\":", r->backend, r->tokens);
        if (r->num_sms < 0)
            fprintf(o.f, "null");
        else
            fprintf(o.f, "%d", r->num_sms);
        fprintf(o.f, ",\"time_us\":%.3f", r->time_us);
        if (r->flops > 0)
            fprintf(o.f, ",\"flops\":%.0f,\"tflops\":%.2f}", r->flops,
                    r->flops / r->time_us * 1e-6);
        else
            fprintf(o.f,
                    ",\"link_bytes\":%.0f,\"link_GBps\":%.2f,\"logical_bytes\":%.0f,"
                    "\"logical_GBps\":%.2f}",
                    r->link_bytes, r->link_bytes / r->time_us * 1e-3, r->logical_bytes,
                    r->logical_bytes / r->time_us * 1e-3);
    }
    fprintf(o.f, "\n]\n");
    if (ep_outfile_commit(&o, err)) {
        fprintf(stderr, "epref: %s\n", err);
        return -1;
    }
    return 0;
}

typedef struct {
    ep_nvl *nvl;
    const void *src;
    const size_t *peer_bytes;
    int me, ep;
    cudaStream_t side[EP_MAX_RANKS]; /* copy_all_peers: one stream per peer */
    cudaEvent_t ev[EP_MAX_RANKS];
} push_ctx;

static void op_peer_copy(void *a, cudaStream_t st) {
    push_ctx *c = a;
    for (int p = 0; p < c->ep; p++)
        if (p != c->me && c->peer_bytes[p])
            CUDA_CHECK(ep_nvl_peer_copy(c->nvl, c->src, c->peer_bytes[p], p, st));
}

static void op_store_ceiling(void *a, cudaStream_t st) {
    push_ctx *c = a;
    for (int p = 0; p < c->ep; p++)
        if (p != c->me && c->peer_bytes[p])
            CUDA_CHECK(ep_nvl_store_ceiling(c->nvl, c->src, c->peer_bytes[p], p, st));
}

static void op_store_all(void *a, cudaStream_t st) {
    push_ctx *c = a;
    CUDA_CHECK(ep_nvl_store_all(c->nvl, c->src, c->peer_bytes, st));
}

static void op_tma_all(void *a, cudaStream_t st) {
    push_ctx *c = a;
    CUDA_CHECK(ep_nvl_tma_all(c->nvl, c->src, c->peer_bytes, st));
}

static void op_copy_all(void *a, cudaStream_t st) {
    push_ctx *c = a;
    CUDA_CHECK(ep_nvl_copy_all(c->nvl, c->src, c->peer_bytes, c->side, c->ev, st));
}

void bench_add_push_baselines(bench *b, ep_nvl *nvl, const void *src, const size_t *peer_bytes,
                              int me, int ep, int tokens, double link_bytes, double logical_bytes) {
    push_ctx c = {.nvl = nvl, .src = src, .peer_bytes = peer_bytes, .me = me, .ep = ep};
    bench_add(b, "peer_copy", tokens, 0, bench_time(b, op_peer_copy, &c), link_bytes, logical_bytes,
              0);
    bench_add(b, "store_ceiling", tokens, b->num_sms, bench_time(b, op_store_ceiling, &c),
              link_bytes, logical_bytes, 0);
    /* the concurrent ceilings: every peer written at once, as an all-to-all does */
    for (int p = 0; p < ep; p++) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&c.side[p], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&c.ev[p], cudaEventDisableTiming));
    }
    bench_add(b, "store_all_peers", tokens, b->num_sms, bench_time(b, op_store_all, &c), link_bytes,
              logical_bytes, 0);
    bench_add(b, "tma_all_peers", tokens, b->num_sms, bench_time(b, op_tma_all, &c), link_bytes,
              logical_bytes, 0);
    bench_add(b, "copy_all_peers", tokens, 0, bench_time(b, op_copy_all, &c), link_bytes,
              logical_bytes, 0);
    for (int p = 0; p < ep; p++) {
        CUDA_CHECK(cudaStreamDestroy(c.side[p]));
        CUDA_CHECK(cudaEventDestroy(c.ev[p]));
    }
}
