/* exec_kern: the two kernels of the schedule executor that kernels/ does not have
 * (docs/epref-run.md, "What each op runs").
 *   exec_mem_rw   a memory-bound op of `bytes` HBM traffic: reads bytes/2 and writes bytes/2,
 *                 streaming through a fixed source and destination buffer (wrapping around when
 *                 the op is larger than the buffers; the buffers are far larger than L2, so the
 *                 traffic still goes to HBM), in short-lived blocks of 64 KiB each so that
 *                 kernels of other streams get SMs beside a long one.
 *   exec_softmax  row softmax of bf16 scores in place, one block per row (attention's softmax).
 *   exec_delay    one thread that keeps the stream busy for `us` microseconds, so that the host
 *                 can queue the work behind it before the GPU gets there (GPU-only timings).
 * NOTES: both return cudaSuccess or the launch error. */
#ifndef EXEC_KERN_H
#define EXEC_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* src, dst: buffers of buf_bytes each (16-byte aligned). */
cudaError_t exec_mem_rw(const void *src, void *dst, size_t buf_bytes, double bytes,
                        cudaStream_t st);
/* s [rows][cols] bf16 (raw bits), softmax over each row in place. */
cudaError_t exec_softmax(uint16_t *s, int64_t rows, int cols, cudaStream_t st);
cudaError_t exec_delay(double us, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
