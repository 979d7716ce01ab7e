/* exec_comm: every communication op of `epref run`, by its algorithm (ep_op.algo, decided by the
 * generators in core/ep_xfer.h): NCCL rings, direct all-to-alls and send/recv on one communicator
 * per (group, stream); deepep / hybridep token all-to-alls inside a node (EP_ALGO_NVLINK) as SM
 * stores into the peers' buffers over the rank's EP group. Hierarchical (RDMA) transfers are
 * refused before anything runs (exec_plan.h). docs/epref-run.md, "What each op runs". */
#include <stdlib.h>
#include <string.h>

#include "ep_xfer.h"
#include "exec_internal.h"
#include "exec_plan.h"

/* ---- buffers ------------------------------------------------------------------------------- */

void exec_comm_need(const exec_gpu *g, const ep_op *op, size_t *snd, size_t *rcv) {
    const ep_sched *s = g->s;
    int n = op->group >= 0 ? s->groups[op->group].size : 1;
    *snd = *rcv = 0;
    if (op->kind == EP_OP_A2A_DISPATCH || op->kind == EP_OP_A2A_COMBINE) {
        if (op->traffic < 0 || op->traffic >= s->ntraffic) return;
        const ep_traffic *tr = &s->traffic[op->traffic];
        int me = g->pos[tr->group];
        if (me < 0) return;
        for (int j = 0; j < tr->n; j++) {
            if (j == me) continue;
            *snd += (size_t)ep_xfer_a2a_bytes(tr, op, me, j);
            *rcv += (size_t)ep_xfer_a2a_bytes(tr, op, j, me);
        }
        return;
    }
    ep_xfer_size z = ep_xfer_size_of(op->kind, n, op->bytes > 0 ? op->bytes : 0);
    *snd = (size_t)z.send;
    *rcv = (size_t)z.recv;
}

/* ---- communicators ------------------------------------------------------------------------- */

/* Opens every connection a communicator will use (send/recv to each member, the collective
 * algorithms) before the first iteration, in the same order on every member, so that no later
 * launch has to wait on the host for a lazy connection while the peer is blocked in a host sync. */
static void connect_comm(exec_gpu *g, ncclComm_t c, int n, int me) {
    const size_t bytes = (size_t)4 << 20;
    char *buf = NULL;
    CUDA_CHECK(cudaMalloc((void **)&buf, bytes * 2 * (size_t)n));
    cudaStream_t st = g->st[EP_STREAM_COMP];
    NCCL_CHECK(ncclGroupStart());
    for (int p = 0; p < n; p++) {
        if (p == me) continue;
        NCCL_CHECK(ncclSend(buf + (size_t)p * bytes, bytes, ncclUint8, p, c, st));
        NCCL_CHECK(ncclRecv(buf + (size_t)(n + p) * bytes, bytes, ncclUint8, p, c, st));
    }
    NCCL_CHECK(ncclGroupEnd());
    NCCL_CHECK(ncclAllReduce(buf, buf, bytes / 4, ncclFloat, ncclSum, c, st));
    NCCL_CHECK(ncclAllGather(buf, buf + bytes, bytes / (size_t)n, ncclUint8, c, st));
    NCCL_CHECK(
        ncclReduceScatter(buf, buf + bytes, bytes / 4 / (size_t)n, ncclFloat, ncclSum, c, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaFree(buf));
}

static void positions(exec_gpu *g) {
    const ep_sched *s = g->s;
    g->pos = malloc(sizeof *g->pos * (size_t)(s->ngroups + 1));
    if (!g->pos) REF_DIE("out of memory");
    for (int gi = 0; gi < s->ngroups; gi++) {
        g->pos[gi] = -1;
        for (int j = 0; j < s->groups[gi].size && !g->compute_only; j++)
            if (s->groups[gi].ranks[j] == g->rank) g->pos[gi] = j;
    }
}

/* NCCL communicators for every (group, stream) with an NCCL op of more than one member. Every
 * rank holds the whole schedule, so every rank computes the same list of splits. */
static void make_comms(exec_gpu *g) {
    const ep_sched *s = g->s;
    int ng = s->ngroups;
    char *need = calloc((size_t)ng * EP_NUM_STREAMS + 1, 1);
    if (!need) REF_DIE("out of memory");
    for (int r = 0; r < s->world; r++)
        for (int i = 0; i < s->ranks[r].nops; i++) {
            const ep_op *op = &s->ranks[r].ops[i];
            if (ep_op_is_comm(op) && op->group >= 0 && op->group < ng &&
                s->groups[op->group].size > 1)
                need[op->group * EP_NUM_STREAMS + op->stream] = 1;
        }
    for (int gi = 0; gi < ng; gi++)
        for (int st = 0; st < EP_NUM_STREAMS; st++) {
            if (!need[gi * EP_NUM_STREAMS + st]) continue;
            int color = g->pos[gi] >= 0 ? 0 : NCCL_SPLIT_NOCOLOR;
            ncclComm_t c = NULL;
            NCCL_CHECK(
                ncclCommSplit(g->ctx->nccl, color, g->pos[gi] >= 0 ? g->pos[gi] : 0, &c, NULL));
            g->comm[gi * EP_NUM_STREAMS + st] = c;
            if (c) connect_comm(g, c, s->groups[gi].size, g->pos[gi]);
        }
    free(need);
}

/* ---- the NVLink transport ------------------------------------------------------------------ */

/* The handshake of ep_nvl_create over a group: a world all-gather (every rank takes part, whether
 * it moves NVLink all-to-alls or not), of which the members' slices are kept. */
typedef struct {
    ref_world *w;
    int n;
    const int *members;
} group_ag;

static int group_allgather(void *ctx, const void *mine, void *all, size_t bytes) {
    group_ag *a = ctx;
    char *world = malloc(bytes * (size_t)a->w->size);
    if (!world) return -1;
    int rc = ref_boot_allgather(a->w, mine, world, bytes);
    for (int j = 0; j < a->n && !rc; j++)
        memcpy((char *)all + (size_t)j * bytes, world + (size_t)a->members[j] * bytes, bytes);
    free(world);
    return rc;
}

/* An IPC-mapped region per rank over its NVLink group, whose staging holds the largest per-peer
 * payload of its ops. Where any rank of the world moves NVLink all-to-alls, every rank makes one
 * (a group of itself alone where it moves none), so that the world-wide handshakes match. */
static void make_nvl(exec_gpu *g) {
    const ep_sched *s = g->s;
    int any = 0;
    for (int r = 0; r < s->world && !any; r++)
        any = exec_plan_nvl_group(s, r) >= 0;
    if (!any) return;
    int gi = exec_plan_nvl_group(s, g->rank);
    const int self[1] = {g->rank};
    group_ag ag = {&g->ctx->w, 1, self};
    int me = 0;
    if (gi >= 0) {
        ag.n = s->groups[gi].size;
        ag.members = s->groups[gi].ranks;
        me = g->pos[gi];
    }
    /* every member sizes its region from the whole group's traffic, so all regions share one
     * layout (ep_xfer_kernel_payload) */
    size_t most = 16;
    if (gi >= 0) {
        double b = ep_xfer_kernel_payload(s, gi);
        if (b > (double)most) most = (size_t)b;
    }
    /* staging rows of `hidden` bf16: 7168 is a multiple of 8 as ep_nvl needs; the rows only size
     * the buffers, payloads are bytes */
    const int hidden = 7168;
    int rows = (int)((most + 16 + (size_t)hidden * 2 - 1) / ((size_t)hidden * 2));
    CUDA_CHECK(ep_nvl_create(&g->nvl, ag.n, me, hidden, 1, ag.n, rows, 1, 0, group_allgather, &ag));
    g->nvl_on = 1;
    g->nvl_group = gi;
}

void exec_comm_create(exec_gpu *g, int with_comms) {
    const ep_sched *s = g->s;
    g->compute_only = !with_comms;
    g->nvl_group = -1;
    g->comm = calloc((size_t)s->ngroups * EP_NUM_STREAMS + 1, sizeof *g->comm);
    if (!g->comm) REF_DIE("out of memory");
    positions(g);
    if (g->compute_only) return; /* no communicator, no group position */
    make_comms(g);
    make_nvl(g);
}

void exec_comm_destroy(exec_gpu *g) {
    for (int i = 0; g->comm && i < g->s->ngroups * EP_NUM_STREAMS; i++)
        if (g->comm[i]) NCCL_CHECK(ncclCommDestroy(g->comm[i]));
    if (g->nvl_on) ep_nvl_destroy(&g->nvl);
    free(g->comm);
    free(g->pos);
}

/* ---- launches ------------------------------------------------------------------------------ */

static ncclComm_t comm_of(exec_gpu *g, const ep_op *op) {
    if (g->compute_only) REF_DIE("communication op launched by a compute-only executor");
    ncclComm_t c = g->comm[op->group * EP_NUM_STREAMS + op->stream];
    if (!c)
        REF_DIE("no communicator for group %d on stream %s", op->group, ep_stream_name(op->stream));
    return c;
}

void exec_nvl_push(ep_nvl *nvl, const void *src, const size_t *out, int n, int me, int sms,
                   cudaStream_t st) {
    nvl->num_sms = sms > 0 ? sms : 16;
    size_t b[EP_MAX_RANKS] = {0};
    for (int p = 0; p < n; p++)
        b[p] = p == me ? 0 : (out[p] + 15) / 16 * 16;
    CUDA_CHECK(ep_nvl_push(nvl, src, b, st));
}

/* A token all-to-all's peers' bytes this rank sends (the traffic; combine: transposed). */
static const ep_traffic *a2a_traffic(const exec_gpu *g, const ep_op *op) {
    const ep_sched *s = g->s;
    if (op->traffic < 0 || op->traffic >= s->ntraffic) REF_DIE("a2a without traffic");
    const ep_traffic *tr = &s->traffic[op->traffic];
    if (tr->group != op->group) REF_DIE("a2a traffic of another group");
    return tr;
}

static void run_nvlink(exec_gpu *g, const ep_op *op, int me, cudaStream_t st) {
    const ep_traffic *tr = a2a_traffic(g, op);
    if (!g->nvl_on || g->nvl_group != op->group)
        REF_DIE("an NVLink all-to-all over group %d without its transport", op->group);
    size_t out[EP_MAX_RANKS] = {0};
    const size_t stage = ep_nvl_slot_bytes(&g->nvl);
    for (int p = 0; p < tr->n; p++) {
        out[p] = p == me ? 0 : (size_t)ep_xfer_a2a_bytes(tr, op, me, p);
        if ((out[p] + 15) / 16 * 16 > stage) {
            char name[160];
            ep_op_name(op, name, sizeof name);
            REF_DIE("%s: %zu bytes for member %d, the NVLink staging holds %zu", name, out[p], p,
                    stage);
        }
    }
    exec_nvl_push(&g->nvl, g->cb[op->stream].send, out, tr->n, me, op->sms, st);
}

/* Grouped send/recv to every peer: the count exchange (op bytes per peer) or a token all-to-all
 * (the traffic's bytes). */
static void run_direct(exec_gpu *g, const ep_op *op, int n, int me, cudaStream_t st) {
    comm_buf *b = &g->cb[op->stream];
    char *snd = b->send, *rcv = b->recv;
    ncclComm_t c = comm_of(g, op);
    const ep_traffic *tr = op->kind == EP_OP_ALLTOALL ? NULL : a2a_traffic(g, op);
    size_t so = 0, ro = 0, each = (size_t)(op->bytes > 0 ? op->bytes : 0);
    NCCL_CHECK(ncclGroupStart());
    for (int p = 0; p < n; p++) {
        if (p == me) continue;
        size_t out = tr ? (size_t)ep_xfer_a2a_bytes(tr, op, me, p) : each;
        size_t in = tr ? (size_t)ep_xfer_a2a_bytes(tr, op, p, me) : each;
        if (!tr) so = ro = (size_t)p * each; /* the count exchange: slot p of each buffer */
        if (out) NCCL_CHECK(ncclSend(snd + so, out, ncclUint8, p, c, st));
        if (in) NCCL_CHECK(ncclRecv(rcv + ro, in, ncclUint8, p, c, st));
        if (tr) so += out, ro += in;
    }
    NCCL_CHECK(ncclGroupEnd());
}

static void run_ring(exec_gpu *g, const ep_op *op, int n, cudaStream_t st) {
    comm_buf *b = &g->cb[op->stream];
    ncclComm_t c = comm_of(g, op);
    size_t bytes = (size_t)(op->bytes > 0 ? op->bytes : 0);
    switch (op->kind) {
    case EP_OP_ALL_GATHER:
        if (bytes) NCCL_CHECK(ncclAllGather(b->send, b->recv, bytes, ncclUint8, c, st));
        break;
    case EP_OP_REDUCE_SCATTER: {
        size_t cnt = (bytes / (size_t)n + 3) / 4; /* fp32 gradients */
        if (cnt) NCCL_CHECK(ncclReduceScatter(b->send, b->recv, cnt, ncclFloat, ncclSum, c, st));
        break;
    }
    case EP_OP_ALL_REDUCE: {
        size_t cnt = (bytes + 3) / 4;
        if (cnt) NCCL_CHECK(ncclAllReduce(b->send, b->recv, cnt, ncclFloat, ncclSum, c, st));
        break;
    }
    default:
        REF_DIE("a ring %s", ep_op_kind_name(op->kind));
    }
}

static void run_p2p(exec_gpu *g, const ep_op *op, int me, cudaStream_t st) {
    const ep_group *gr = &g->s->groups[op->group];
    int peer = 1 - me; /* directed pair {src, dst} */
    if (gr->ranks[peer] != op->peer) REF_DIE("send/recv peer %d not in its pair", op->peer);
    size_t bytes = (size_t)(op->bytes > 0 ? op->bytes : 0);
    if (!bytes) return;
    comm_buf *b = &g->cb[op->stream];
    ncclComm_t c = comm_of(g, op);
    if (op->kind == EP_OP_SEND)
        NCCL_CHECK(ncclSend(b->send, bytes, ncclUint8, peer, c, st));
    else
        NCCL_CHECK(ncclRecv(b->recv, bytes, ncclUint8, peer, c, st));
}

void exec_comm_run(exec_gpu *g, const ep_op *op, cudaStream_t st) {
    const ep_sched *s = g->s;
    if (op->group < 0 || op->group >= s->ngroups || s->groups[op->group].size < 2) return;
    int n = s->groups[op->group].size, me = g->pos[op->group];
    if (me < 0)
        REF_DIE("op %s on group %d that does not hold this rank", ep_op_kind_name(op->kind),
                op->group);
    switch (op->algo) {
    case EP_ALGO_RING:
        run_ring(g, op, n, st);
        break;
    case EP_ALGO_DIRECT:
        run_direct(g, op, n, me, st);
        break;
    case EP_ALGO_NVLINK:
        run_nvlink(g, op, me, st);
        break;
    case EP_ALGO_P2P:
        run_p2p(g, op, me, st);
        break;
    default: /* exec_plan_check refused the run */
        REF_DIE("%s by algorithm %s: not run by epref", ep_op_kind_name(op->kind),
                ep_algo_name(op->algo));
    }
}
