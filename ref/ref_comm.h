/* ref_comm: one rank's GPU, stream and NCCL communicator, built on the bootstrap channel.
 * defines: ref_ctx, alltoallv over grouped ncclSend/ncclRecv, the host allgather adapter the
 * NVLink backend uses for its IPC handles, and the run metadata (GPU, driver, CUDA, NCCL). */
#ifndef REF_COMM_H
#define REF_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "ref_boot.h"

typedef struct {
    ref_world w;
    int device;
    ncclComm_t nccl;
    cudaStream_t stream;
} ref_ctx;

/* Bootstrap, device (LOCAL_RANK modulo the visible devices), stream, NCCL. Stops on error. */
void ref_ctx_init(ref_ctx *c);
void ref_ctx_fini(ref_ctx *c);

/* Alltoallv of bf16 rows: to peer d send[soff[d] .. +scnt[d]) rows, from peer s into
 * recv[roff[s] ..) rcnt[s] rows (counts and offsets on the host, in rows of `row` elements). */
void ref_alltoallv_rows(ref_ctx *c, const void *send, const int32_t *scnt, const int32_t *soff,
                        void *recv, const int32_t *rcnt, const int32_t *roff, size_t row,
                        cudaStream_t st);

/* ep_allgather_fn over the bootstrap channel (ctx = ref_world *). */
int ref_allgather_cb(void *ctx, const void *mine, void *all, size_t bytes);

/* "gpu":"...","driver":"...","cuda_runtime":"...","nccl":"..." members (no braces). */
void ref_meta_members(ref_ctx *c, char *buf, size_t len);

#endif
