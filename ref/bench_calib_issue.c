/* bench_calib_issue: how long an NCCL send/recv takes between the executor's two events when the
 * stream waits for the host to issue it, against the same call queued behind work (`epref bench
 * calib --parts nccl-issue`, host.json records "nccl_issue"; docs/calibration.md).
 *
 * Why: in epref's runs the token all-to-all that follows the alltoall dispatcher's count sync is
 * 3-27% longer between its events than the same bytes moved elsewhere in the step. After a host
 * sync the stream is idle, so its start event fires as the host records it, before the NCCL calls;
 * whatever the host and NCCL do until the transfer moves then lies inside the op. Measured on
 * 2 x H200 that is 3-12 us at every size, as epsim's engine charges it: the runs' extra time comes
 * from elsewhere. Each rank pairs with rank ^ 1 and both run the same sequence, aligned by a tiny
 * all-reduce and a stream sync. */
#include <stdio.h>

#include "bench_calib.h"
#include "ep_stats.h"
#include "exec_kern.h"
#include "ref_check.h"

enum { ISSUE_REPS = 21, ISSUE_NEXT = 200 };
/* the buffers of the queued-behind kernel: 8 x through them is 2 GB of HBM, about 0.5 ms */
#define ISSUE_WORK ((size_t)256 << 20)

/* How the send/recv is issued, one timing each per repetition. */
enum {
    QUEUED,      /* behind a long kernel: the stream is busy until after the calls */
    AFTER_SYNC,  /* after a host sync on a short kernel: the stream idle */
    ISSUING,     /* AFTER_SYNC, then the host goes on issuing (the next ops, on another stream) */
    AS_EXECUTOR, /* as epref runs the alltoall dispatcher: a count exchange on another stream and
                  * communicator, the host sync on it, the transfer waiting for it, then ISSUING */
    NMODES
};
static const char *const k_mode_key[NMODES] = {"queued_us", "after_sync_us",
                                               "after_sync_issuing_us", "as_executor_us"};

typedef struct {
    void *snd, *rcv, *src, *dst, *one;
    cudaStream_t st, s2;
    ncclComm_t c, c2;
    cudaEvent_t ev0, ev1, evs;
    int peer;
} issue_ctx;

/* One timing of `mode` at `bytes` per peer: the op between its events, us; *call: the host's time
 * in the NCCL calls, *wake: the sync's event to the start event (idle modes). */
static double issue_once(issue_ctx *x, int mode, size_t bytes, double *call, double *wake) {
    NCCL_CHECK(ncclAllReduce(x->one, x->one, 1, ncclFloat, ncclSum, x->c, x->st));
    CUDA_CHECK(cudaStreamSynchronize(x->st));
    cudaStream_t on = mode == AS_EXECUTOR ? x->s2 : x->st;
    if (mode == QUEUED) {
        CUDA_CHECK(exec_mem_rw(x->src, x->dst, ISSUE_WORK, 8.0 * ISSUE_WORK, x->st));
    } else {
        if (mode == AS_EXECUTOR) /* the count exchange: 96 bytes with the peer */
            calib_pair_send_recv(x->snd, x->rcv, 96, x->peer, x->c, x->st);
        else
            CUDA_CHECK(exec_mem_rw(x->src, x->dst, (size_t)1 << 20, 2.0 * (1 << 20), x->st));
        CUDA_CHECK(cudaEventRecord(x->evs, x->st));
        CUDA_CHECK(cudaEventSynchronize(x->evs));
        if (mode == AS_EXECUTOR) CUDA_CHECK(cudaStreamWaitEvent(on, x->evs, 0));
    }
    CUDA_CHECK(cudaEventRecord(x->ev0, on));
    double t0 = bench_now_us();
    calib_pair_send_recv(x->snd, x->rcv, bytes, x->peer, mode == AS_EXECUTOR ? x->c2 : x->c, on);
    *call = bench_now_us() - t0;
    CUDA_CHECK(cudaEventRecord(x->ev1, on));
    if (mode == ISSUING || mode == AS_EXECUTOR) { /* the next ops wait for this one */
        cudaStream_t next = mode == AS_EXECUTOR ? x->st : x->s2;
        CUDA_CHECK(cudaStreamWaitEvent(next, x->ev1, 0));
        for (int i = 0; i < ISSUE_NEXT; i++)
            CUDA_CHECK(exec_mem_rw(x->src, x->dst, 256, 256.0, next));
    }
    CUDA_CHECK(cudaEventSynchronize(x->ev1));
    CUDA_CHECK(cudaDeviceSynchronize());
    float ms, w = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, x->ev0, x->ev1));
    if (mode != QUEUED) CUDA_CHECK(cudaEventElapsedTime(&w, x->evs, x->ev0));
    *wake = w * 1e3;
    return ms * 1e3;
}

void calib_nccl_issue(bench *b, calib_list *out) {
    int W = b->ctx->w.size, me = b->ctx->w.rank;
    if (W < 2 || W % 2) return;
    static const size_t sizes[] = {(size_t)4 << 10, (size_t)1 << 20, (size_t)8 << 20,
                                   (size_t)32 << 20, (size_t)80 << 20};
    const size_t nsizes = sizeof sizes / sizeof *sizes, most = sizes[nsizes - 1];
    issue_ctx x = {.st = b->ctx->stream, .c = b->ctx->nccl, .peer = me ^ 1};
    CUDA_CHECK(cudaMalloc(&x.snd, most));
    CUDA_CHECK(cudaMalloc(&x.rcv, most));
    CUDA_CHECK(cudaMalloc(&x.src, ISSUE_WORK));
    CUDA_CHECK(cudaMalloc(&x.dst, ISSUE_WORK));
    CUDA_CHECK(cudaMalloc(&x.one, sizeof(float)));
    CUDA_CHECK(cudaMemset(x.snd, 1, most));
    CUDA_CHECK(cudaStreamCreateWithFlags(&x.s2, cudaStreamNonBlocking));
    NCCL_CHECK(ncclCommSplit(x.c, 0, me, &x.c2, NULL)); /* the executor's second communicator */
    CUDA_CHECK(cudaEventCreate(&x.ev0));
    CUDA_CHECK(cudaEventCreate(&x.ev1));
    CUDA_CHECK(cudaEventCreate(&x.evs));
    for (size_t k = 0; k < nsizes; k++) {
        double t[NMODES][ISSUE_REPS], call[ISSUE_REPS], wake[ISSUE_REPS], med[NMODES];
        for (int r = -2; r < ISSUE_REPS; r++) /* two of warm-up */
            for (int m = 0; m < NMODES; m++) {
                double c, w, v = issue_once(&x, m, sizes[k], &c, &w);
                if (r < 0) continue;
                t[m][r] = v;
                if (m == AFTER_SYNC) call[r] = c, wake[r] = w;
            }
        char rec[512];
        int n = snprintf(rec, sizeof rec, "{\"what\":\"nccl_issue\",\"bytes\":%zu", sizes[k]);
        for (int m = 0; m < NMODES; m++) {
            med[m] = bench_mean(b, ep_median(t[m], ISSUE_REPS));
            n += snprintf(rec + n, sizeof rec - (size_t)n, ",\"%s\":%.3f", k_mode_key[m], med[m]);
        }
        double h = bench_mean(b, ep_median(call, ISSUE_REPS));
        double w = bench_mean(b, ep_median(wake, ISSUE_REPS));
        calib_add(out, "%s,\"call_us\":%.3f,\"sync_to_start_us\":%.3f}", rec, h, w);
        if (me == 0) {
            printf("  nccl issue: %zu bytes per peer: queued %.1f us, after a host sync %.1f "
                   "(host in the calls %.1f, sync event to start event %.1f), issuing on after "
                   "it %.1f, as the executor %.1f\n",
                   sizes[k], med[QUEUED], med[AFTER_SYNC], h, w, med[ISSUING], med[AS_EXECUTOR]);
            fflush(stdout);
        }
    }
    NCCL_CHECK(ncclCommDestroy(x.c2));
    CUDA_CHECK(cudaEventDestroy(x.ev0));
    CUDA_CHECK(cudaEventDestroy(x.ev1));
    CUDA_CHECK(cudaEventDestroy(x.evs));
    CUDA_CHECK(cudaStreamDestroy(x.s2));
    CUDA_CHECK(cudaFree(x.snd));
    CUDA_CHECK(cudaFree(x.rcv));
    CUDA_CHECK(cudaFree(x.src));
    CUDA_CHECK(cudaFree(x.dst));
    CUDA_CHECK(cudaFree(x.one));
}
