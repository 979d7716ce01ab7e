/* epref: runs the MoE layer's kernels on real GPUs, one process per GPU (docs/epref.md).
 *   epref [--nproc N] bench dispatch|combine|gemm [flags]
 * --nproc N forks N local ranks; otherwise ranks come from torchrun/Slurm/mpirun variables. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "ep_io.h"
#include "ref_boot.h"
#include "ref_check.h"
#include "ref_comm.h"

static void usage(FILE *f) {
    fprintf(f, "usage: epref [--nproc N] bench dispatch|combine|gemm [flags]\n"
               "       epref --version\n"
               "  --nproc N   start N local ranks (one per GPU); without it, ranks come from\n"
               "              RANK/WORLD_SIZE/LOCAL_RANK, SLURM_*, or OMPI_COMM_WORLD_* with\n"
               "              MASTER_ADDR/MASTER_PORT (rank 0 shares the NCCL id over TCP)\n"
               "  epref bench dispatch --help   lists the benchmark flags\n");
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") && (i == 1 || strcmp(argv[1], "bench"))) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("epref %s (%s)\n", ep_version(), ep_git_revision());
            return 0;
        }
    }
    int status;
    if (ref_boot_launch(&argc, argv, &status)) /* parent of --nproc: children ran */
        return status;
    if (argc < 2 || strcmp(argv[1], "bench")) {
        usage(stderr);
        return 2;
    }
    ref_ctx ctx;
    ref_ctx_init(&ctx);
    int rc = bench_main(&ctx, argc - 2, argv + 2);
    CUDA_CHECK(cudaDeviceSynchronize());
    ref_ctx_fini(&ctx);
    return rc;
}
