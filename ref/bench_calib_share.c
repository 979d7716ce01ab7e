/* bench_calib_share: host costs and interference records of `epref bench calib`
 * (docs/calibration.md, host.json, interference.json and corun.json). */
#include <stdlib.h>
#include <string.h>

#include "bench_calib.h"
#include "ep_xfer.h"
#include "ep_stats.h"
#include "exec_gpu.h"
#include "exec_kern.h"
#include "ref_check.h"

#define HOST_REPS 200

void calib_pair_send_recv(void *snd, void *rcv, size_t bytes, int peer, ncclComm_t c,
                          cudaStream_t st) {
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(snd, bytes, ncclUint8, peer, c, st));
    NCCL_CHECK(ncclRecv(rcv, bytes, ncclUint8, peer, c, st));
    NCCL_CHECK(ncclGroupEnd());
}

void calib_host(bench *b, calib_list *out) {
    cudaStream_t st = b->ctx->stream;
    const size_t big = (size_t)1 << 30;
    void *src, *dst;
    CUDA_CHECK(cudaMalloc(&src, big));
    CUDA_CHECK(cudaMalloc(&dst, big));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    double launch[HOST_REPS], gpu[HOST_REPS], trip[HOST_REPS], nccl[HOST_REPS], exop[HOST_REPS];
    /* host launch cost of a tiny kernel, back to back (20 at a time, queue never full) */
    for (int r = 0; r < HOST_REPS; r++) {
        double t0 = bench_now_us();
        for (int i = 0; i < 20; i++)
            CUDA_CHECK(exec_mem_rw(src, dst, 256, 256.0, st));
        launch[r] = (bench_now_us() - t0) / 20;
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
    /* host time of one op as the executor issues it: a tiny kernel between its two events */
    cudaEvent_t ev[40];
    for (int i = 0; i < 40; i++)
        CUDA_CHECK(cudaEventCreate(&ev[i]));
    for (int r = 0; r < HOST_REPS; r++) {
        double t0 = bench_now_us();
        for (int i = 0; i < 20; i++) {
            CUDA_CHECK(cudaEventRecord(ev[2 * i], st));
            CUDA_CHECK(exec_mem_rw(src, dst, 256, 256.0, st));
            CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], st));
        }
        exop[r] = (bench_now_us() - t0) / 20;
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
    /* the same on the GPU, queued behind a long kernel: an op's duration between its events and
     * the gap from one op's end event to the next op's start event (what a trace shows); the
     * gap is measured after full-GPU memory kernels (64 MB, the size of an activation), the
     * duration on tiny ones, and on ops that run nothing between their events (the executor's
     * host syncs and collectives of one member) */
    enum { TINY, BIG, EMPTY };
    double odur[20 * 19], ogap[20 * 19], oempty[20 * 19];
    int nd = 0, ng = 0, ne = 0;
    for (int r = 0; r < 60; r++) {
        int mode = r % 3;
        CUDA_CHECK(exec_mem_rw(src, dst, big, 4.0 * big, st));
        for (int i = 0; i < 20; i++) {
            CUDA_CHECK(cudaEventRecord(ev[2 * i], st));
            if (mode != EMPTY)
                CUDA_CHECK(exec_mem_rw(src, dst, mode == TINY ? 256 : big,
                                       mode == TINY ? 256.0 : 64e6, st));
            CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], st));
        }
        CUDA_CHECK(cudaEventSynchronize(ev[39]));
        for (int i = 1; i < 20; i++) { /* op 0 may start before the host queued the rest */
            float d, g;
            CUDA_CHECK(cudaEventElapsedTime(&d, ev[2 * i], ev[2 * i + 1]));
            CUDA_CHECK(cudaEventElapsedTime(&g, ev[2 * i - 1], ev[2 * i]));
            if (mode == TINY)
                odur[nd++] = d * 1e3;
            else if (mode == BIG)
                ogap[ng++] = g * 1e3;
            else
                oempty[ne++] = d * 1e3;
        }
    }
    double xd = ep_median(odur, nd), xg = ep_median(ogap, ng), xe = ep_median(oempty, ne);
    for (int i = 0; i < 40; i++)
        CUDA_CHECK(cudaEventDestroy(ev[i]));
    /* GPU time per tiny kernel: queued behind a long one, so the GPU never waits for the host */
    for (int r = 0; r < 20; r++) {
        CUDA_CHECK(exec_mem_rw(src, dst, big, 4.0 * big, st));
        CUDA_CHECK(cudaEventRecord(e0, st));
        for (int i = 0; i < 100; i++)
            CUDA_CHECK(exec_mem_rw(src, dst, 256, 256.0, st));
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        gpu[r] = ms * 1e3 / 100;
    }
    /* round trip of a host sync: launch, record, wait */
    for (int r = 0; r < HOST_REPS; r++) {
        double t0 = bench_now_us();
        CUDA_CHECK(exec_mem_rw(src, dst, 256, 256.0, st));
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        trip[r] = bench_now_us() - t0;
    }
    double l = ep_median(launch, HOST_REPS), k = ep_median(gpu, 20);
    double t = ep_median(trip, HOST_REPS), x = ep_median(exop, HOST_REPS);
    int W = b->ctx->w.size, me = b->ctx->w.rank, peer = me ^ 1, nn = 0;
    if (W >= 2 && W % 2 == 0) { /* host time of a grouped 4-byte send/recv with the partner */
        for (int r = 0; r < HOST_REPS; r++, nn++) {
            double t0 = bench_now_us();
            calib_pair_send_recv(src, dst, 4, peer, b->ctx->nccl, st);
            nccl[r] = bench_now_us() - t0;
            CUDA_CHECK(cudaStreamSynchronize(st));
        }
    }
    double nl = nn ? ep_median(nccl, nn) : 0;
    l = bench_mean(b, l), k = bench_mean(b, k), t = bench_mean(b, t), nl = bench_mean(b, nl);
    x = bench_mean(b, x), xd = bench_mean(b, xd), xg = bench_mean(b, xg), xe = bench_mean(b, xe);
    double sync = t - l - k > 0 ? t - l - k : 0;
    calib_add(out, "{\"what\":\"launch\",\"time_us\":%.3f}", l);
    calib_add(out, "{\"what\":\"exec_op\",\"time_us\":%.3f}", x);
    calib_add(out, "{\"what\":\"exec_op_gpu\",\"time_us\":%.3f}", xd);
    calib_add(out, "{\"what\":\"exec_gap\",\"time_us\":%.3f}", xg);
    calib_add(out, "{\"what\":\"exec_empty_gpu\",\"time_us\":%.3f}", xe);
    calib_add(out, "{\"what\":\"kernel_overhead\",\"time_us\":%.3f}", k);
    calib_add(out, "{\"what\":\"sync_round_trip\",\"time_us\":%.3f}", t);
    calib_add(out, "{\"what\":\"host_sync\",\"time_us\":%.3f}", sync);
    if (nn) calib_add(out, "{\"what\":\"nccl_launch\",\"time_us\":%.3f}", nl);
    if (me == 0) {
        printf("  host: launch %.2f us (with the executor's events %.2f us), kernel overhead "
               "%.2f us (between events %.2f us, gap %.2f us), sync round trip %.2f us (host "
               "sync %.2f us), nccl launch %.2f us\n",
               l, x, k, xd, xg, t, sync, nl);
        fflush(stdout);
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaFree(dst));
}

/* ---- interference ------------------------------------------------------------------------- */

const int calib_store_sms[CALIB_STORE_NSMS] = {8, 16, 32};

void *calib_stores_open(bench *b, ep_nvl *nvl) {
    int W = b->ctx->w.size;
    void *src;
    CUDA_CHECK(ep_nvl_create(nvl, W, b->ctx->w.rank, 7168, 1, W, 8192, 1, 0, ref_allgather_cb,
                             &b->ctx->w));
    CUDA_CHECK(cudaMalloc(&src, CALIB_STORE_BYTES));
    CUDA_CHECK(cudaMemset(src, 1, CALIB_STORE_BYTES));
    return src;
}

void calib_stores_close(ep_nvl *nvl, void *src) {
    CUDA_CHECK(cudaFree(src));
    ep_nvl_destroy(nvl);
}

void calib_run_store(void *a, cudaStream_t st) {
    calib_store *s = a;
    s->nvl->num_sms = s->sms;
    for (int p = 0; p < s->nvl->ep; p++)
        if (p != s->nvl->me) CUDA_CHECK(ep_nvl_store_ceiling(s->nvl, s->src, s->bytes, p, st));
}

/* calib_victim_us, with the mean over ranks first..W-1 (the waiting part leaves the late rank 0
 * out). */
static double victim_time(bench *b, cudaStream_t s1, cudaStream_t s2, bench_op victim, void *va,
                          int nv, bench_op aggr, void *aa, int na, int first) {
    enum { REPS = 5, MAXV = 16 };
    cudaEvent_t e0, ev[MAXV + 1];
    CUDA_CHECK(cudaEventCreate(&e0));
    for (int v = 0; v <= nv; v++)
        CUDA_CHECK(cudaEventCreate(&ev[v]));
    double rep[REPS];
    for (int r = 0; r < REPS; r++) {
        CUDA_CHECK(ep_nvl_barrier(b->barrier, b->ctx->stream));
        CUDA_CHECK(cudaEventRecord(e0, b->ctx->stream));
        CUDA_CHECK(cudaStreamWaitEvent(s1, e0, 0));
        CUDA_CHECK(cudaStreamWaitEvent(s2, e0, 0));
        for (int a = 0; a < na; a++)
            aggr(aa, s2);
        for (int v = 0; v < nv; v++) {
            CUDA_CHECK(cudaEventRecord(ev[v], s1));
            victim(va, s1);
        }
        CUDA_CHECK(cudaEventRecord(ev[nv], s1));
        CUDA_CHECK(cudaDeviceSynchronize());
        if (ep_nvl_failed(b->barrier)) REF_DIE("an NVLink spin-wait timed out");
        double t[MAXV];
        for (int v = 1; v < nv - 1; v++) {
            float ms;
            CUDA_CHECK(cudaEventElapsedTime(&ms, ev[v], ev[v + 1]));
            t[v - 1] = ms * 1e3;
        }
        rep[r] = ep_median(t, nv - 2);
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    for (int v = 0; v <= nv; v++)
        CUDA_CHECK(cudaEventDestroy(ev[v]));
    double mine = ep_median(rep, REPS), all[EP_MAX_RANKS], sum = 0;
    int W = b->ctx->w.size;
    if (ref_boot_allgather(&b->ctx->w, &mine, all, sizeof mine)) REF_DIE("lost a peer");
    for (int k = first; k < W; k++)
        sum += all[k];
    return sum / (W - first);
}

double calib_victim_us(bench *b, cudaStream_t s1, cudaStream_t s2, bench_op victim, void *va,
                       int nv, bench_op aggr, void *aa, int na) {
    return victim_time(b, s1, s2, victim, va, nv, aggr, aa, na, 0);
}

int calib_cover(double victim_alone, int nv, double aggr_alone) {
    int n = (int)(1.5 * nv * victim_alone / aggr_alone) + 2;
    return n < 2 ? 2 : n;
}

/* The two victims of both parts into ops[0..2): a dense GEMM of the DeepSeek-V3 widths
 * (compute-bound) and a memory-bound kernel of mem_bytes. Returns 2. */
static int victim_ops(ep_op *ops, int cap, double mem_bytes) {
    int n = 0;
    ep_op *gm = calib_synth_op(ops, &n, cap, EP_OP_GEMM, EP_PHASE_FWD);
    gm->m = 4096, gm->n = 7168, gm->k = 2048, gm->flops = 2.0 * 4096 * 7168 * 2048;
    ep_op *mm = calib_synth_op(ops, &n, cap, EP_OP_ELEMENTWISE, EP_PHASE_FWD);
    mm->bytes = mem_bytes;
    return n;
}

exec_gpu *calib_a2a_aggressor(bench *b, const ep_config *cfg) {
    int W = b->ctx->w.size;
    static ep_op aops[EP_MAX_RANKS][1];
    static calib_synth ay;
    calib_synth_init(&ay, cfg, W);
    for (int r = 0; r < W; r++) {
        int na = 0;
        ep_op *a = calib_synth_op(aops[r], &na, 1, EP_OP_ALLTOALL, EP_PHASE_FWD);
        a->stream = EP_STREAM_COMM, a->group = 0, a->bytes = CALIB_A2A_BYTES;
        ep_xfer_set(a, cfg, NULL);
        ay.rk[r].ops = aops[r], ay.rk[r].nops = 1;
    }
    return exec_gpu_create_rank(b->ctx, &ay.s, b->ctx->w.rank, 1);
}

/* The aggressor of the waiting part: rank 0 posts its NCCL all-to-all only after a delay kernel
 * that outlasts the victims, so on every other rank NCCL's kernel is launched and holds its
 * blocks, spinning, but moves nothing while the victims run. */
typedef struct {
    calib_op a2a;
    double delay_us;
    int me;
} late_a2a;

static void run_late_a2a(void *a, cudaStream_t st) {
    late_a2a *l = a;
    if (l->me == 0) CUDA_CHECK(exec_delay(l->delay_us, st));
    calib_launch_op(&l->a2a, st);
}

/* moving: the victims beside a moving NCCL all-to-all and beside NVLink stores (and those beside
 * the GEMM); waiting: beside an NCCL all-to-all that waits for a late peer (aggressor
 * "nccl_waiting": the slowdown epsim applies to compute beside a launched NCCL operation whose
 * peers have not arrived, docs/calibration.md). */
void calib_interference(bench *b, calib_list *out, int moving, int waiting) {
    int me = b->ctx->w.rank, nv = 8;
    cudaStream_t s1, s2;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    ep_config cfg;
    ep_config_defaults(&cfg);
    ep_config_resolve(&cfg); /* built by hand: no validation */
    static ep_op cops[4];
    int nc = victim_ops(cops, 4, 512.0 * (1 << 20));
    calib_synth cy;
    calib_synth_init(&cy, &cfg, 1);
    cy.rk[0].ops = cops, cy.rk[0].nops = nc;
    exec_gpu *cg = exec_gpu_create_rank(b->ctx, &cy.s, 0, 0);
    /* aggressors: an NCCL all-to-all of 256 MiB per peer, NVLink stores of 64 MiB per peer */
    exec_gpu *ag = calib_a2a_aggressor(b, &cfg);
    static ep_nvl nvl;
    const size_t sbytes = CALIB_STORE_BYTES;
    void *ssrc = moving ? calib_stores_open(b, &nvl) : NULL;
    calib_op vic[2] = {{cg, 0}, {cg, 1}}, a2a = {ag, 0};
    double a2a_alone =
        moving ? calib_victim_us(b, s1, s2, calib_launch_op, &a2a, nv, NULL, NULL, 0) : 0;
    const int *sms = calib_store_sms;
    double gemm_alone = 0;
    for (int v = 0; v < 2; v++) {
        const ep_op *op = &cops[v];
        char what[160];
        if (op->kind == EP_OP_GEMM)
            snprintf(what, sizeof what, "\"victim\":\"gemm\",\"m\":%d,\"n\":%d,\"k\":%d", op->m,
                     op->n, op->k);
        else
            snprintf(what, sizeof what, "\"victim\":\"elementwise\",\"bytes\":%.0f", op->bytes);
        double alone = calib_victim_us(b, s1, s2, calib_launch_op, &vic[v], nv, NULL, NULL, 0);
        if (v == 0) gemm_alone = alone;
        if (waiting) {
            late_a2a late = {a2a, 3.0 * nv * alone + 1000, me};
            double sw =
                victim_time(b, s1, s2, calib_launch_op, &vic[v], nv, run_late_a2a, &late, 1, 1);
            calib_add(out,
                      "{%s,\"aggressor\":\"nccl_waiting\",\"aggressor_sms\":-1,"
                      "\"aggressor_bytes\":%.0f,\"alone_us\":%.3f,\"shared_us\":%.3f,"
                      "\"slowdown\":%.4f}",
                      what, CALIB_A2A_BYTES, alone, sw, sw / alone);
            if (me == 0)
                printf("  %s alone %.1f us, beside a waiting nccl alltoall %.1f us (ranks 1..)\n",
                       what, alone, sw);
        }
        if (!moving) continue;
        double sh = calib_victim_us(b, s1, s2, calib_launch_op, &vic[v], nv, calib_launch_op, &a2a,
                                    calib_cover(alone, nv, a2a_alone));
        calib_add(out,
                  "{%s,\"aggressor\":\"nccl_alltoall\",\"aggressor_sms\":-1,"
                  "\"aggressor_bytes\":%.0f,\"alone_us\":%.3f,\"shared_us\":%.3f,"
                  "\"slowdown\":%.4f}",
                  what, CALIB_A2A_BYTES, alone, sh, sh / alone);
        if (me == 0) printf("  %s alone %.1f us, beside nccl alltoall %.1f us\n", what, alone, sh);
        for (int s = 0; s < CALIB_STORE_NSMS; s++) {
            calib_store st = {&nvl, ssrc, sbytes, sms[s]};
            double st_alone = calib_victim_us(b, s1, s2, calib_run_store, &st, nv, NULL, NULL, 0);
            double sh2 = calib_victim_us(b, s1, s2, calib_launch_op, &vic[v], nv, calib_run_store,
                                         &st, calib_cover(alone, nv, st_alone));
            calib_add(out,
                      "{%s,\"aggressor\":\"store\",\"aggressor_sms\":%d,"
                      "\"aggressor_bytes\":%.0f,\"alone_us\":%.3f,\"shared_us\":%.3f,"
                      "\"slowdown\":%.4f}",
                      what, sms[s], (double)sbytes, alone, sh2, sh2 / alone);
            if (v == 0) { /* and the other way round: the transfer beside the GEMM */
                double back = calib_victim_us(b, s1, s2, calib_run_store, &st, nv, calib_launch_op,
                                              &vic[0], calib_cover(st_alone, nv, alone));
                calib_add(out,
                          "{\"victim\":\"store\",\"sms\":%d,\"bytes\":%.0f,\"aggressor\":\"gemm\","
                          "\"m\":%d,\"n\":%d,\"k\":%d,\"alone_us\":%.3f,\"shared_us\":%.3f,"
                          "\"slowdown\":%.4f}",
                          sms[s], (double)sbytes, op->m, op->n, op->k, st_alone, back,
                          back / st_alone);
            }
            if (me == 0) printf("    beside %d-SM stores %.1f us\n", sms[s], sh2);
        }
    }
    if (moving) {
        double back = calib_victim_us(b, s1, s2, calib_launch_op, &a2a, nv, calib_launch_op,
                                      &vic[0], calib_cover(a2a_alone, nv, gemm_alone));
        calib_add(out,
                  "{\"victim\":\"nccl_alltoall\",\"bytes\":%.0f,\"aggressor\":\"gemm\",\"m\":%d,"
                  "\"n\":%d,\"k\":%d,\"alone_us\":%.3f,\"shared_us\":%.3f,\"slowdown\":%.4f}",
                  CALIB_A2A_BYTES, cops[0].m, cops[0].n, cops[0].k, a2a_alone, back,
                  back / a2a_alone);
        if (me == 0)
            printf("  nccl alltoall alone %.1f us, beside the gemm %.1f us\n", a2a_alone, back);
        calib_stores_close(&nvl, ssrc);
    }
    if (me == 0) fflush(stdout);
    exec_gpu_destroy(ag);
    exec_gpu_destroy(cg);
    CUDA_CHECK(cudaStreamDestroy(s1));
    CUDA_CHECK(cudaStreamDestroy(s2));
}

/* ---- compute beside compute ---------------------------------------------------------------- */

/* Two compute ops of the executor on two streams of one GPU, as an overlapped schedule runs them
 * (permute, unpermute and norms on the communication stream beside GEMMs and attention): each
 * kind's time beside a continuous stream of each other kind, against its time alone. Kinds: a
 * compute-bound dense GEMM (DeepSeek-V3 widths) and a memory-bound kernel of 64 MiB (a norm or
 * permute of the runs' size). */
void calib_corun(bench *b, calib_list *out) {
    int me = b->ctx->w.rank, nv = 8;
    cudaStream_t s1, s2;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    ep_config cfg;
    ep_config_defaults(&cfg);
    ep_config_resolve(&cfg); /* built by hand: no validation */
    static ep_op ops[4];
    int n = victim_ops(ops, 4, 64.0 * (1 << 20));
    /* the same two again for the second stream (the executor's ops share its buffers, in runs
     * as here) */
    ops[n++] = ops[0];
    ops[n++] = ops[1];
    calib_synth y;
    calib_synth_init(&y, &cfg, 1);
    y.rk[0].ops = ops, y.rk[0].nops = n;
    exec_gpu *g = exec_gpu_create_rank(b->ctx, &y.s, 0, 0);
    static const char *kind[2] = {"compute", "memory"};
    calib_op v[2] = {{g, 0}, {g, 1}}, a[2] = {{g, 2}, {g, 3}};
    double alone[2];
    for (int i = 0; i < 2; i++)
        alone[i] = calib_victim_us(b, s1, s2, calib_launch_op, &v[i], nv, NULL, NULL, 0);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double sh = calib_victim_us(b, s1, s2, calib_launch_op, &v[i], nv, calib_launch_op,
                                        &a[j], calib_cover(alone[i], nv, alone[j]));
            calib_add(out,
                      "{\"victim\":\"%s\",\"victim_op\":\"%s\",\"beside\":\"%s\","
                      "\"alone_us\":%.3f,\"shared_us\":%.3f,\"slowdown\":%.4f}",
                      kind[i], i ? "elementwise 64 MiB" : "gemm 4096x7168x2048", kind[j], alone[i],
                      sh, sh / alone[i]);
            if (me == 0)
                printf("  corun: %s %.1f us alone, %.1f us beside %s (x%.2f)\n", kind[i], alone[i],
                       sh, kind[j], sh / alone[i]);
        }
    fflush(stdout);
    exec_gpu_destroy(g);
    CUDA_CHECK(cudaStreamDestroy(s1));
    CUDA_CHECK(cudaStreamDestroy(s2));
}
