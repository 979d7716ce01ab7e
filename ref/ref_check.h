/* ref_check: stop the program on a failed CUDA, NCCL or cuBLAS call, naming rank, file and line.
 * Used at epref's top level only (library code returns errors instead; STYLE.md). */
#ifndef REF_CHECK_H
#define REF_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

extern int ref_rank; /* -1 before the bootstrap */

#define REF_DIE(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "epref: rank %d: %s:%d: ", ref_rank, __FILE__, __LINE__);                  \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) REF_DIE("%s: %s", #call, cudaGetErrorString(e_));                   \
    } while (0)

#define NCCL_CHECK(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) REF_DIE("%s: %s", #call, ncclGetErrorString(r_));                   \
    } while (0)

/* For functions of ep_expert.h, which print their own detail and return non-zero. */
#define OK_CHECK(call)                                                                             \
    do {                                                                                           \
        if ((call) != 0) REF_DIE("%s failed", #call);                                              \
    } while (0)

#endif
