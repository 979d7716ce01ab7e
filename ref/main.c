/* epref: runs the MoE layer's kernels on real GPUs, one process per GPU (docs/epref.md).
 *   epref [--nproc N] bench dispatch|combine|gemm|calib [flags]
 *   epref [--nproc N] run [model flags] [--trace P] [--summary-json P]   (docs/epref-run.md)
 * --nproc N forks N local ranks; otherwise ranks come from torchrun/Slurm/mpirun variables. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "exec.h"
#include "ep_io.h"
#include "ref_boot.h"
#include "ref_check.h"
#include "ref_comm.h"

static void usage(FILE *f) {
    fprintf(f, "usage: epref [--nproc N] bench dispatch|combine|gemm|calib [flags]\n"
               "       epref [--nproc N] run [model flags] [--trace P] [--summary-json P]\n"
               "       epref --version\n"
               "  --nproc N   start N local ranks (one per GPU); without it, ranks come from\n"
               "              RANK/WORLD_SIZE/LOCAL_RANK, SLURM_*, or OMPI_COMM_WORLD_* with\n"
               "              MASTER_ADDR/MASTER_PORT (rank 0 shares the NCCL id over TCP)\n"
               "  epref bench dispatch --help   lists the benchmark flags\n"
               "  epref run --help              the schedule executor's flags\n");
}

/* Index of the subcommand ("bench" or "run") in argv, skipping "--nproc N"; 0 if none. */
static int subcommand(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nproc")) {
            i++;
            continue;
        }
        return !strcmp(argv[i], "bench") || !strcmp(argv[i], "run") ? i : 0;
    }
    return 0;
}

int main(int argc, char **argv) {
    int sub = subcommand(argc, argv);
    if (sub && !strcmp(argv[sub], "run"))
        for (int i = sub + 1; i < argc; i++)
            if (!strcmp(argv[i], "--help")) {
                exec_usage(stdout);
                return 0;
            }
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
    int is_run = argc >= 2 && !strcmp(argv[1], "run");
    if (argc < 2 || (strcmp(argv[1], "bench") && !is_run)) {
        usage(stderr);
        return 2;
    }
    ref_ctx ctx;
    ref_ctx_init(&ctx);
    int rc = is_run ? exec_main(&ctx, argc - 1, argv + 1) : bench_main(&ctx, argc - 2, argv + 2);
    CUDA_CHECK(cudaDeviceSynchronize());
    ref_ctx_fini(&ctx);
    return rc;
}
