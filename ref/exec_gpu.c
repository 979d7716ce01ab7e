/* exec_gpu: streams, events, buffers and the launch of every op (exec_gpu.h); communication ops
 * are exec_comm.c's.
 * What each kind runs is listed in docs/epref-run.md ("What each op runs"). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ep_cost.h"
#include "exec_internal.h"
#include "exec_kern.h"

#if defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define EXEC_NVTX 1
#endif
#endif

static size_t max_sz(size_t a, size_t b) {
    return a > b ? a : b;
}

void *exec_dev_alloc(exec_gpu *g, size_t bytes) {
    void *p = NULL;
    bytes = MIB_ALIGN(bytes ? bytes : 256);
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    g->alloc_bytes += (double)bytes;
    return p;
}

/* (sequence, head) blocks of full s x s scores whose QK^T + PV flops equal the op's flops. */
static int64_t attn_blocks(const exec_gpu *g, const ep_op *op) {
    double per = 2.0 * g->attn_seq * (double)g->attn_seq * (g->attn_qk + g->attn_v);
    double nb = floor(op->flops / per + 0.5);
    return nb < 1 ? 1 : (int64_t)nb;
}

/* Elements a GEMM op needs in A, B, C (exec_gemm explains the layouts). */
static void gemm_need(const ep_op *op, size_t *a, size_t *b, size_t *c) {
    size_t m = (size_t)(op->m > 0 ? op->m : 0), n = (size_t)(op->n > 0 ? op->n : 0),
           k = (size_t)(op->k > 0 ? op->k : 0), bt = (size_t)(op->batch > 0 ? op->batch : 1);
    *a = m * k;
    if (op->kind == EP_OP_GROUPED_GEMM && op->phase == EP_PHASE_BWD_DW) {
        *b = k * n;
        *c = bt * m * n;
    } else if (op->kind == EP_OP_GROUPED_GEMM) {
        *b = bt * k * n;
        *c = m * n;
    } else {
        *b = k * n;
        *c = m * n;
    }
}

static void make_buffers(exec_gpu *g) {
    const ep_config *c = &g->s->cfg;
    ep_cost_attention_geometry(c, &g->attn_seq, &g->attn_qk, &g->attn_v);
    size_t mem = 16, snd[EP_NUM_STREAMS] = {0}, rcv[EP_NUM_STREAMS] = {0};
    int64_t maxblocks = 0;
    g->maxbatch = 1;
    for (int i = 0; i < g->nops; i++) {
        const ep_op *op = &g->ops[i];
        size_t a, b, cc, x, y;
        switch (op->kind) {
        case EP_OP_GEMM:
        case EP_OP_GROUPED_GEMM:
            gemm_need(op, &a, &b, &cc);
            g->a_el = max_sz(g->a_el, a);
            g->b_el = max_sz(g->b_el, b);
            g->c_el = max_sz(g->c_el, cc);
            if (op->batch > g->maxbatch) g->maxbatch = op->batch;
            break;
        case EP_OP_ATTENTION: {
            int64_t nb = attn_blocks(g, op);
            if (nb > maxblocks) maxblocks = nb;
            break;
        }
        case EP_OP_HOST_SYNC:
            break;
        default:
            if (ep_op_is_comm(op)) {
                if (g->compute_only) break;
                exec_comm_need(g, op, &x, &y);
                snd[op->stream] = max_sz(snd[op->stream], x);
                rcv[op->stream] = max_sz(rcv[op->stream], y);
            } else {
                mem = max_sz(mem, (size_t)(op->bytes / 2));
            }
        }
    }
    g->mbuf = mem < MEM_BUF_CAP ? (mem + 15) / 16 * 16 : MEM_BUF_CAP;
    g->msrc = exec_dev_alloc(g, g->mbuf);
    g->mdst = exec_dev_alloc(g, g->mbuf);
    g->A = exec_dev_alloc(g, g->a_el * 2);
    g->B = exec_dev_alloc(g, g->b_el * 2);
    g->C = exec_dev_alloc(g, g->c_el * 2);
    CUDA_CHECK(ep_fill_random_bf16(g->A, g->a_el, 11 + (uint64_t)g->rank, 1.f, g->st[0]));
    CUDA_CHECK(ep_fill_random_bf16(g->B, g->b_el, 12 + (uint64_t)g->rank, 0.05f, g->st[0]));
    if (maxblocks > 0) {
        size_t ss = (size_t)g->attn_seq * g->attn_seq;
        int64_t ch = (int64_t)(ATTN_S_CAP / ss);
        g->attn_chunk = (int)(ch < 1 ? 1 : (ch < maxblocks ? ch : maxblocks));
        size_t cb = (size_t)g->attn_chunk, sq = (size_t)g->attn_seq;
        g->q = exec_dev_alloc(g, cb * sq * g->attn_qk * 2);
        g->k = exec_dev_alloc(g, cb * sq * g->attn_qk * 2);
        g->v = exec_dev_alloc(g, cb * sq * g->attn_v * 2);
        g->o = exec_dev_alloc(g, cb * sq * g->attn_v * 2);
        g->sc = exec_dev_alloc(g, cb * ss * 2);
        CUDA_CHECK(ep_fill_random_bf16(g->q, cb * sq * g->attn_qk, 13, 0.1f, g->st[0]));
        CUDA_CHECK(ep_fill_random_bf16(g->k, cb * sq * g->attn_qk, 14, 0.1f, g->st[0]));
        CUDA_CHECK(ep_fill_random_bf16(g->v, cb * sq * g->attn_v, 15, 1.f, g->st[0]));
    }
    for (int st = 0; st < EP_NUM_STREAMS; st++) {
        if (!snd[st] && !rcv[st]) continue;
        g->cb[st].send_bytes = snd[st] + 16;
        g->cb[st].recv_bytes = rcv[st] + 16;
        g->cb[st].send = exec_dev_alloc(g, g->cb[st].send_bytes);
        g->cb[st].recv = exec_dev_alloc(g, g->cb[st].recv_bytes);
    }
    g->align = exec_dev_alloc(g, 64);
    size_t nb = (size_t)g->maxbatch;
    g->gM = calloc(nb * 3, sizeof *g->gM);
    g->gA = calloc(nb, sizeof *g->gA);
    g->gB = calloc(nb, sizeof *g->gB);
    g->gC = calloc(nb, sizeof *g->gC);
    if (!g->gM || !g->gA || !g->gB || !g->gC) REF_DIE("out of memory");
    g->gN = g->gM + nb;
    g->gK = g->gN + nb;
    CUDA_CHECK(cudaStreamSynchronize(g->st[0]));
}

exec_gpu *exec_gpu_create(ref_ctx *ctx, const ep_sched *s) {
    if (s->world != ctx->w.size)
        REF_DIE("the schedule has %d ranks but %d were launched", s->world, ctx->w.size);
    return exec_gpu_create_rank(ctx, s, ctx->w.rank, 1);
}

exec_gpu *exec_gpu_create_rank(ref_ctx *ctx, const ep_sched *s, int rank, int with_comms) {
    if (rank < 0 || rank >= s->world) REF_DIE("rank %d is not in the schedule", rank);
    exec_gpu *g = calloc(1, sizeof *g);
    if (!g) REF_DIE("out of memory");
    g->ctx = ctx;
    g->s = s;
    g->rank = rank;
    g->nops = s->ranks[g->rank].nops;
    g->ops = s->ranks[g->rank].ops;
    g->deps = s->ranks[g->rank].deps;
    /* --high-priority-a2a-comm-stream: the EP communication stream at the greatest priority, as
     * Megatron-LM creates it (on an H200 it does not get a kernel SMs before a running GEMM's
     * last tiles: scripts/kernel_behind_gemm.py) */
    int least, greatest;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int st = 0; st < EP_NUM_STREAMS; st++) {
        int high = st == EP_STREAM_COMM && s->cfg.high_priority_a2a_comm_stream;
        CUDA_CHECK(cudaStreamCreateWithPriority(&g->st[st], cudaStreamNonBlocking,
                                                high ? greatest : least));
    }
    g->ev0 = calloc((size_t)g->nops + 1, sizeof *g->ev0);
    g->ev1 = calloc((size_t)g->nops + 1, sizeof *g->ev1);
    g->names = calloc((size_t)g->nops + 1, sizeof *g->names);
    if (!g->ev0 || !g->ev1 || !g->names) REF_DIE("out of memory");
    for (int i = 0; i < g->nops; i++) {
        CUDA_CHECK(cudaEventCreate(&g->ev0[i]));
        CUDA_CHECK(cudaEventCreate(&g->ev1[i]));
        ep_op_name(&g->ops[i], g->names[i], sizeof g->names[i]);
    }
    CUDA_CHECK(cudaEventCreate(&g->base));
    CUBLAS_CHECK(cublasCreate(&g->blas));
    CUBLAS_CHECK(cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH));
    exec_comm_create(g, with_comms);
    make_buffers(g);
    g->gemm = ep_gemm_create(EP_GEMM_DEFAULT, g->maxbatch);
    if (!g->gemm) REF_DIE("cannot create the GEMM context");
    exec_watch_start(g);
    return g;
}

void exec_gpu_destroy(exec_gpu *g) {
    if (!g) return;
    exec_watch_stop(g);
    CUDA_CHECK(cudaDeviceSynchronize());
    exec_comm_destroy(g);
    for (int i = 0; i < g->nops; i++) {
        CUDA_CHECK(cudaEventDestroy(g->ev0[i]));
        CUDA_CHECK(cudaEventDestroy(g->ev1[i]));
    }
    CUDA_CHECK(cudaEventDestroy(g->base));
    void *bufs[] = {g->msrc, g->mdst, g->A, g->B, g->C, g->q, g->k, g->v, g->sc, g->o, g->align};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) CUDA_CHECK(cudaFree(bufs[i]));
    for (int st = 0; st < EP_NUM_STREAMS; st++) {
        if (g->cb[st].send) CUDA_CHECK(cudaFree(g->cb[st].send));
        if (g->cb[st].recv) CUDA_CHECK(cudaFree(g->cb[st].recv));
        CUDA_CHECK(cudaStreamDestroy(g->st[st]));
    }
    ep_gemm_destroy(g->gemm);
    CUBLAS_CHECK(cublasDestroy(g->blas));
    free(g->ev0);
    free(g->ev1);
    free(g->names);
    free(g->gM);
    free(g->gA);
    free(g->gB);
    free(g->gC);
    free(g);
}

double exec_gpu_buffer_bytes(const exec_gpu *g) {
    return g->alloc_bytes;
}

double exec_gpu_used_peak(const exec_gpu *g) {
    return g->used_peak;
}

/* GEMM: C[m][n] = A[m][k] B[k][n] row-major (dgrad: B stored [n][k], transposed; wgrad: A
 * stored [k][m], transposed). Grouped: the rows (m; k for wgrad) split evenly over `batch`
 * experts, each expert its own weight block; wgrad writes one m x n gradient per expert. */
static void run_gemm(exec_gpu *g, const ep_op *op, cudaStream_t st) {
    int tA = op->phase == EP_PHASE_BWD_DW, tB = op->phase == EP_PHASE_BWD;
    int64_t m = op->m, n = op->n, k = op->k;
    if (m <= 0 || n <= 0 || k <= 0) return;
    if (op->kind == EP_OP_GEMM || op->batch <= 1) {
        OK_CHECK(ep_gemm_rm(g->gemm, tA, tB, m, n, k, g->A, g->B, g->C, 0.f, st));
        return;
    }
    int nb = op->batch;
    int64_t total = tA ? k : m, off = 0;
    for (int e = 0; e < nb; e++) {
        int64_t rows = total / nb + (e < total % nb ? 1 : 0);
        if (tA) { /* wgrad: dW_e[m][n] = X_e^T dY_e, X_e rows off.. of A [k][m], dY_e of B [k][n] */
            g->gM[e] = m, g->gN[e] = n, g->gK[e] = rows;
            g->gA[e] = g->A + off * m;
            g->gB[e] = g->B + off * n;
            g->gC[e] = g->C + (size_t)e * m * n;
        } else { /* fwd / dgrad: Y_e[rows][n] = X_e W_e */
            g->gM[e] = rows, g->gN[e] = n, g->gK[e] = k;
            g->gA[e] = g->A + off * k;
            g->gB[e] = g->B + (size_t)e * k * n;
            g->gC[e] = g->C + off * n;
        }
        off += rows;
    }
    OK_CHECK(ep_gemm_group(g->gemm, nb, tA, tB, g->gM, g->gN, g->gK, g->gA, g->gB, g->gC, 0.f, st));
}

/* Attention: per (sequence, head) block S = Q K^T (s x s x dqk), row softmax, O = P V
 * (s x dv x s), batched over chunks of blocks; attn_blocks() makes the flops the op's. */
static void run_attention(exec_gpu *g, const ep_op *op, cudaStream_t st) {
    int64_t left = attn_blocks(g, op);
    int s = g->attn_seq, dq = g->attn_qk, dv = g->attn_v;
    const float one = 1.f, zero = 0.f;
    CUBLAS_CHECK(cublasSetStream(g->blas, st));
    while (left > 0) {
        int cb = (int)(left < g->attn_chunk ? left : g->attn_chunk);
        /* column-major view: S^T[s x s] = K[s x dq] * Q^T, buffers row-major */
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            g->blas, CUBLAS_OP_T, CUBLAS_OP_N, s, s, dq, &one, g->k, CUDA_R_16BF, dq,
            (long long)s * dq, g->q, CUDA_R_16BF, dq, (long long)s * dq, &zero, g->sc, CUDA_R_16BF,
            s, (long long)s * s, cb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUDA_CHECK(exec_softmax(g->sc, (int64_t)cb * s, s, st));
        /* O^T[dv x s] = V^T * P^T */
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            g->blas, CUBLAS_OP_N, CUBLAS_OP_N, dv, s, s, &one, g->v, CUDA_R_16BF, dv,
            (long long)s * dv, g->sc, CUDA_R_16BF, s, (long long)s * s, &zero, g->o, CUDA_R_16BF,
            dv, (long long)s * dv, cb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        left -= cb;
    }
}

static void launch(exec_gpu *g, const ep_op *op, cudaStream_t st) {
    switch (op->kind) {
    case EP_OP_GEMM:
    case EP_OP_GROUPED_GEMM:
        run_gemm(g, op, st);
        break;
    case EP_OP_ATTENTION:
        run_attention(g, op, st);
        break;
    case EP_OP_HOST_SYNC:
        break;
    default:
        if (ep_op_is_comm(op))
            exec_comm_run(g, op, st);
        else /* norm, elementwise, router, permute, unpermute, loss, optimizer, scan */
            CUDA_CHECK(exec_mem_rw(g->msrc, g->mdst, g->mbuf, op->bytes, st));
    }
}

void exec_gpu_attention_dims(const exec_gpu *g, int *seq, int *dqk, int *dv) {
    *seq = g->attn_seq;
    *dqk = g->attn_qk;
    *dv = g->attn_v;
}

void exec_gpu_launch(exec_gpu *g, int i, cudaStream_t st) {
    if (i < 0 || i >= g->nops) REF_DIE("op %d out of range", i);
    launch(g, &g->ops[i], st);
}

/* Fault injection for the GPU fault test (tests/gpu/fault.sh): EPREF_STALL=RANK:OPNAME makes that
 * rank stop before launching that op, as a peer that never arrives. */
static void maybe_stall(const exec_gpu *g, int i) {
    static int rank = -2;
    static const char *name;
    if (rank == -2) {
        const char *v = getenv("EPREF_STALL");
        rank = -1;
        if (v && strchr(v, ':')) {
            rank = atoi(v);
            name = strchr(v, ':') + 1;
        }
    }
    if (rank != g->rank || strcmp(g->names[i], name)) return;
    fprintf(stderr, "epref: rank %d: EPREF_STALL: stopping before %s\n", g->rank, name);
    for (;;)
        pause();
}

void exec_gpu_iteration(exec_gpu *g, exec_span *t) {
    cudaStream_t comp = g->st[EP_STREAM_COMP];
    CUDA_CHECK(cudaDeviceSynchronize());
    atomic_store(&g->watch.launched, 0); /* watched from the barrier on */
    if (ref_boot_barrier(&g->ctx->w)) REF_DIE("lost a peer");
    /* one time base: the all-reduce ends on every rank within its last message's latency */
    NCCL_CHECK(ncclAllReduce(g->align, g->align, 1, ncclFloat, ncclSum, g->ctx->nccl, comp));
    CUDA_CHECK(cudaEventRecord(g->base, comp));
    for (int st = 0; st < EP_NUM_STREAMS; st++)
        if (st != EP_STREAM_COMP) CUDA_CHECK(cudaStreamWaitEvent(g->st[st], g->base, 0));
    for (int i = 0; i < g->nops; i++) {
        const ep_op *op = &g->ops[i];
        cudaStream_t st = g->st[op->stream];
        for (int d = 0; d < op->ndeps; d++)
            CUDA_CHECK(cudaStreamWaitEvent(st, g->ev1[g->deps[op->deps_off + d]], 0));
#ifdef EXEC_NVTX
        nvtxRangePushA(g->names[i]);
#endif
        maybe_stall(g, i);
        CUDA_CHECK(cudaEventRecord(g->ev0[i], st));
        launch(g, op, st);
        CUDA_CHECK(cudaEventRecord(g->ev1[i], st));
#ifdef EXEC_NVTX
        nvtxRangePop();
#endif
        atomic_store(&g->watch.launched, i + 1);
        if (op->kind == EP_OP_HOST_SYNC) CUDA_CHECK(cudaEventSynchronize(g->ev1[i]));
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    atomic_store(&g->watch.launched, -1);
    /* the device's use at the iteration's end: context, NCCL, cuBLAS and epref's buffers (no
     * model state, no activations: docs/epref-run.md, "Memory") */
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if ((double)(total_b - free_b) > g->used_peak) g->used_peak = (double)(total_b - free_b);
    if (g->nvl_on && ep_nvl_failed(&g->nvl))
        REF_DIE("an NVLink spin-wait of a token all-to-all timed out (see the device message)");
    for (int i = 0; i < g->nops; i++) {
        float a = 0, b = 0;
        CUDA_CHECK(cudaEventElapsedTime(&a, g->base, g->ev0[i]));
        CUDA_CHECK(cudaEventElapsedTime(&b, g->base, g->ev1[i]));
        t[i].start = a * 1e-3;
        t[i].end = b * 1e-3;
    }
}
