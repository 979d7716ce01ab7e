/* ref_comm: device, stream, NCCL communicator and metadata of one rank (see ref_comm.h). */
#include <stdio.h>
#include <string.h>

#include "ref_check.h"
#include "ref_comm.h"

int ref_rank = -1;

void ref_ctx_init(ref_ctx *c) {
    memset(c, 0, sizeof *c);
    if (ref_boot_init(&c->w)) REF_DIE("bootstrap failed");
    ref_rank = c->w.rank;
    int n = 0;
    CUDA_CHECK(cudaGetDeviceCount(&n));
    c->device = c->w.local_rank % n;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    ncclUniqueId id;
    if (c->w.rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    if (ref_boot_bcast(&c->w, &id, sizeof id)) REF_DIE("cannot share the NCCL unique id");
    NCCL_CHECK(ncclCommInitRank(&c->nccl, c->w.size, id, c->w.rank));
}

void ref_ctx_fini(ref_ctx *c) {
    if (c->nccl) ncclCommDestroy(c->nccl);
    if (c->stream) cudaStreamDestroy(c->stream);
    ref_boot_fini(&c->w);
}

void ref_alltoallv_rows(ref_ctx *c, const void *send, const int32_t *scnt, const int32_t *soff,
                        void *recv, const int32_t *rcnt, const int32_t *roff, size_t row,
                        cudaStream_t st) {
    const size_t es = 2; /* bf16 */
    NCCL_CHECK(ncclGroupStart());
    for (int p = 0; p < c->w.size; p++) {
        if (scnt[p])
            NCCL_CHECK(ncclSend((const char *)send + (size_t)soff[p] * row * es,
                                (size_t)scnt[p] * row, ncclBfloat16, p, c->nccl, st));
        if (rcnt[p])
            NCCL_CHECK(ncclRecv((char *)recv + (size_t)roff[p] * row * es, (size_t)rcnt[p] * row,
                                ncclBfloat16, p, c->nccl, st));
    }
    NCCL_CHECK(ncclGroupEnd());
}

int ref_allgather_cb(void *ctx, const void *mine, void *all, size_t bytes) {
    return ref_boot_allgather((ref_world *)ctx, mine, all, bytes);
}

/* The kernel driver's version, from the line "NVRM version: ... Kernel Module  580.159.04 ...". */
static void driver_version(char *out, size_t len) {
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        char *k = strstr(line, "Kernel Module");
        /* the version is the first word starting with a digit after "Kernel Module" */
        while (k && *k && !(*k >= '0' && *k <= '9' && k[-1] == ' ')) /* not the 86 of x86_64 */
            k++;
        if (k && *k) {
            size_t n = strcspn(k, " \t\n");
            if (n && n < len) snprintf(out, len, "%.*s", (int)n, k);
        }
    }
    fclose(f);
}

void ref_meta_members(ref_ctx *c, char *buf, size_t len) {
    char drvs[64];
    driver_version(drvs, sizeof drvs);
    struct cudaDeviceProp p;
    int drv = 0, rt = 0, nv = 0;
    CUDA_CHECK(cudaGetDeviceProperties(&p, c->device));
    CUDA_CHECK(cudaDriverGetVersion(&drv));
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    NCCL_CHECK(ncclGetVersion(&nv));
    snprintf(buf, len,
             "\"gpu\":\"%s\",\"num_gpus\":%d,\"sm_count\":%d,\"driver\":\"%s\","
             "\"cuda_driver_api\":\"%d.%d\","
             "\"cuda_runtime\":\"%d.%d\",\"nccl\":\"%d.%d.%d\"",
             p.name, c->w.size, p.multiProcessorCount, drvs, drv / 1000, (drv % 1000) / 10,
             rt / 1000, (rt % 1000) / 10, nv / 10000, (nv % 10000) / 100, nv % 100);
}
