/* ep_xfer: how a transfer moves its bytes - the one home of that decision.
 *
 * Every communication op of the schedule carries its algorithm (ep_op.algo), set once when the
 * generators emit it (ep_rb_emit) from the config and the shape of its group. The executors never
 * read the transport from the config again: epsim costs the op's algorithm (sim/sim_algo.c, one
 * file per algorithm), epref runs it or refuses the run (ref/exec_comm.c). What each op kind moves
 * per member, in buffers and through its own link, is the table of xfer.c (the idea of
 * nccl-tests' GetCollByteCount / GetBw). docs/schedule.md, "Transfers", is the contract.
 */
#ifndef EP_XFER_H
#define EP_XFER_H

#include "ep_config.h"
#include "ep_groups.h"
#include "ep_sched.h"

typedef enum {
    EP_ALGO_NONE,   /* not a transfer: compute, host sync */
    EP_ALGO_RING,   /* NCCL ring: all-gather, reduce-scatter, all-reduce over the group order */
    EP_ALGO_DIRECT, /* NCCL send/recv to every peer at once (alltoall, alltoallv); between nodes
                       on another rail over NVLink to the peer's rail first (PXN) */
    EP_ALGO_NVLINK, /* SM kernels storing into every peer's buffer over NVLink: deepep/hybridep
                       with the group inside one node */
    EP_ALGO_HIER,   /* deepep/hybridep across nodes: one RDMA copy per destination node to the GPU
                       on the sender's rail, NVLink fan-out there (combine: the reverse) */
    EP_ALGO_P2P,    /* NCCL send/recv between two ranks */
    EP_ALGO_NUM
} ep_algo;

/* What the generators record for a communication op. */
typedef struct {
    ep_algo algo;
    int sms; /* SMs its kernel holds for the whole op (0: NCCL's own channels, no SMs reserved) */
} ep_xfer_plan;

/* The algorithm and SMs of an op of kind `kind` over group g (NULL or size 1: still the kind's
 * algorithm; executors move nothing for a group of one). Token all-to-alls: deepep / hybridep with
 * --moe-flex-transport kernel run SM kernels, NVLINK when every member is in one node
 * (rank / --gpus-per-node), HIER otherwise; every other dispatcher and the nccl transport DIRECT. */
ep_xfer_plan ep_xfer_plan_of(const ep_config *cfg, ep_op_kind kind, const ep_group *g);

/* Records the plan in a communication op (algo, sms); other ops are left as they are. */
void ep_xfer_set(ep_op *op, const ep_config *cfg, const ep_group *g);

const char *ep_algo_name(ep_algo a);
/* NCCL moves it (its own channels, no SMs in the schedule): RING, DIRECT, P2P. */
int ep_algo_is_nccl(ep_algo a);

/* What one member of an n-member op of kind k moves, from the op's bytes field (whose meaning per
 * kind is docs/schedule.md, "Kinds and their byte counts"). */
typedef struct {
    double send, recv; /* bytes its send and receive buffers hold; token all-to-alls: -1, their
                          per-peer bytes are the traffic matrix (ep_xfer_a2a_bytes) */
    double link;       /* bytes it pushes through its own link (nccl-tests' bus bytes) */
    int steps;         /* ring steps, 0 for the other algorithms */
} ep_xfer_size;

ep_xfer_size ep_xfer_size_of(ep_op_kind k, int n, double bytes);

/* A token all-to-all's bytes between members: what member `me` (group position) of the op sends
 * peer p (the transpose for a combine-direction op, transpose = 1). */
double ep_xfer_a2a_bytes(const ep_traffic *t, const ep_op *op, int me, int p);

/* The largest payload one member of group `group` sends another in any of the group's token
 * all-to-alls (every traffic instance of the group, both directions): what each member's staging
 * holds per peer where the group moves them with SM kernels (EP_ALGO_NVLINK, EP_ALGO_HIER:
 * epref's NVLink staging, the memory estimate).
 * The same on every member, since each holds the whole schedule: a peer writes its rows and flags
 * at offsets of its own region's layout, so the members' layouts must agree. 0 without any. */
double ep_xfer_kernel_payload(const ep_sched *s, int group);

#endif
