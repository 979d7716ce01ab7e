/* exec_plan: which ops `epref run` can run - communication by its algorithm (ep_op.algo,
 * core/ep_xfer.h), GEMMs in BF16 only - checked before any GPU work. Plain C with no CUDA, so
 * the CPU tests hold epsim and epref to the same transport for every layout
 * (tests/unit/test_xfer.c). */
#ifndef EXEC_PLAN_H
#define EXEC_PLAN_H

#include "ep_sched.h"

/* The group over which rank r moves NVLink all-to-alls (EP_ALGO_NVLINK), -1 if none, -2 if it
 * would need two. */
int exec_plan_nvl_group(const ep_sched *s, int r);


/* 0 when epref runs every op of s: BF16 GEMMs (no FP8), and for communication NCCL rings, direct
 * all-to-alls and send/recv, NVLink all-to-alls over groups of at most nvl_max_ranks ranks (one
 * group per rank); -1 with the first op it refuses in err otherwise (the hierarchical RDMA
 * transfers of deepep / hybridep across nodes among them). */
int exec_plan_check(const ep_sched *s, int nvl_max_ranks, char err[EP_ERRLEN]);

#endif
