/* exec_internal: the state of one rank's executor that its files share (exec_gpu.c: streams,
 * events, buffers and compute launches; exec_comm.c: communicators, the NVLink transport and the
 * launch of every communication op). Not for other modules: they use exec_gpu.h. */
#ifndef EXEC_INTERNAL_H
#define EXEC_INTERNAL_H

#include <cublas_v2.h>
#include <pthread.h>
#include <stdatomic.h>

#include "ep_expert.h"
#include "ep_kernels.h"
#include "exec_gpu.h"
#include "ref_check.h"

#define MEM_BUF_CAP  ((size_t)512 << 20) /* source and destination of memory-bound ops */
#define ATTN_S_CAP   ((size_t)256 << 20) /* score elements of one attention chunk */
#define EXEC_OP_TIMEOUT_S 120.0 /* no op launched or finished this long: a peer is gone */
#define MIB_ALIGN(x) ((((size_t)(x)) + 255) & ~(size_t)255)

#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) REF_DIE("%s: cuBLAS status %d", #call, (int)s_);          \
    } while (0)

typedef struct {
    void *send, *recv;
    size_t send_bytes, recv_bytes;
} comm_buf;

typedef struct { /* the watchdog thread (exec_gpu.c) */
    pthread_t thread;
    int device;
    atomic_int launched; /* ops launched in the running iteration; -1 between iterations */
    atomic_int stop;
} exec_watch;

struct exec_gpu {
    ref_ctx *ctx;
    const ep_sched *s;
    int rank, nops;
    int compute_only; /* no communicators and no communication buffers */
    const ep_op *ops;
    const int *deps;
    cudaStream_t st[EP_NUM_STREAMS];
    cudaEvent_t *ev0, *ev1, base;
    ncclComm_t *comm; /* [ngroups * EP_NUM_STREAMS], NULL where not a member or not used */
    int *pos;         /* [ngroups] this rank's position in each group, -1 if not a member */
    comm_buf cb[EP_NUM_STREAMS];
    ep_gemm *gemm;
    cublasHandle_t blas;
    ep_bf16 *A, *B, *C;
    size_t a_el, b_el, c_el;
    void *msrc, *mdst;
    size_t mbuf;
    ep_bf16 *q, *k, *v, *sc, *o;
    int attn_seq, attn_qk, attn_v, attn_chunk;
    float *align;
    int maxbatch;
    int64_t *gM, *gN, *gK;
    const ep_bf16 **gA, **gB;
    ep_bf16 **gC;
    char (*names)[160];
    double alloc_bytes;
    double used_peak; /* device memory in use at the end of an iteration, the most seen */
    /* the NVLink transport of EP_ALGO_NVLINK token all-to-alls (SM stores into the peers'
     * buffers) over this rank's EP group (exec_comm.c) */
    int nvl_on;
    exec_watch watch;
    int nvl_group; /* the group it spans, -1 if only a stand-in for the world's handshake */
    ep_nvl nvl;
};

/* Device memory the executor counts in exec_gpu_buffer_bytes. */
void *exec_dev_alloc(exec_gpu *g, size_t bytes);

/* exec_comm.c */
/* Communicators of every (group, stream) the schedule uses, and the NVLink transport where any
 * rank's ops need it; with_comms 0: none (compute only). */
void exec_comm_create(exec_gpu *g, int with_comms);
void exec_comm_destroy(exec_gpu *g);
/* Bytes the op needs in its stream's send and receive buffers on this rank. */
void exec_comm_need(const exec_gpu *g, const ep_op *op, size_t *snd, size_t *rcv);
/* Launches the communication op by its algorithm (ep_op.algo). */
void exec_comm_run(exec_gpu *g, const ep_op *op, cudaStream_t st);

/* The watchdog thread (exec_watch.c): started with the executor, stopped before it is destroyed. */
void exec_watch_start(exec_gpu *g);
void exec_watch_stop(exec_gpu *g);

#endif
