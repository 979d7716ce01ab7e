/* exec_gpu: one rank's executor of the schedule on its GPU (docs/epref-run.md).
 *
 * Streams: one CUDA stream per ep_stream the rank uses. Events: each op gets a start and an end
 * event recorded on its stream around its work; an op first makes its stream wait for the end
 * events of its deps. HOST_SYNC: the host waits for its end event before launching the next op.
 * Communicators: one NCCL communicator per (schedule group, stream) that some rank uses, split
 * from the world communicator in the same order on every rank (groups in index order, then
 * streams), so collectives of one group on one stream are ordered alike on every member.
 * NOTES: every CUDA, NCCL and cuBLAS call is checked; a failure stops the rank (ref_check.h).
 */
#ifndef EXEC_GPU_H
#define EXEC_GPU_H

#include "ep_kernels.h"
#include "ep_sched.h"
#include "exec_metrics.h"
#include "ref_comm.h"

typedef struct exec_gpu exec_gpu;

/* Streams, events, communicators and buffers for rank ctx->w.rank of s (s->world must equal the
 * launched world). Stops the rank on failure. */
exec_gpu *exec_gpu_create(ref_ctx *ctx, const ep_sched *s);
/* Executor of rank `rank`'s ops of s (any rank of the schedule, any launched world). Without
 * with_comms no communicator is made and only compute ops may be launched: `epref bench calib`
 * times ops alone this way. */
exec_gpu *exec_gpu_create_rank(ref_ctx *ctx, const ep_sched *s, int rank, int with_comms);
void exec_gpu_destroy(exec_gpu *g);

/* Launches op i of the rank's list on st: only its work, no events and no dependencies. */
void exec_gpu_launch(exec_gpu *g, int i, cudaStream_t st);
/* The attention geometry the executor runs (sequence length, QK and V head dimensions). */
void exec_gpu_attention_dims(const exec_gpu *g, int *seq, int *dqk, int *dv);

/* Runs one iteration: aligns to the other ranks (an all-reduce over the world, then the base
 * event), launches every op in launch order, waits for the GPU, and writes each op's interval
 * relative to the base into t[0..nops). */
void exec_gpu_iteration(exec_gpu *g, exec_span *t);

/* A token all-to-all over NVLink as deepep / hybridep kernels move it (docs/epref-run.md): one
 * kernel of `sms` blocks (ep_nvl_push) in which every rank enters (their kernels' handshake),
 * pushes out[p] bytes from src into its slot of each peer p's staging, every peer at once, with
 * plain 16-byte stores (no routing: the executor moves the schedule's bytes), and ends when every
 * rank's rows have landed. The executor runs EP_ALGO_NVLINK dispatch and combine this way (any
 * EP group inside a node); bench calib times it for the calibration. */
void exec_nvl_push(ep_nvl *nvl, const void *src, const size_t *out, int n, int me, int sms,
                   cudaStream_t st);

/* Bytes of device memory the executor allocated (buffers only). */
double exec_gpu_buffer_bytes(const exec_gpu *g);
/* The device memory in use (cudaMemGetInfo: every allocation of the process, the CUDA context,
 * NCCL and cuBLAS included) at the end of an iteration, the most seen. */
double exec_gpu_used_peak(const exec_gpu *g);

#endif
