/* epref: runs the MoE layer's kernels on real GPUs, one process per GPU (docs/epref.md).
 *   epref [--nproc N] bench dispatch|combine|gemm|calib [flags]
 *   epref [--nproc N] run [model flags] [--trace P] [--summary-json P]   (docs/epref-run.md)
 * --nproc N forks N local ranks; otherwise ranks come from torchrun/Slurm/mpirun variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "exec.h"
#include "exec_args.h"
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
    /* `run`: flags parsed and validated before any rank starts or any CUDA call, so that bad
     * flags give exit 2 and one line on any machine (and once, not once per rank) */
    if (sub && !strcmp(argv[sub], "run")) {
        int world = 0, rank = 0;
        char err[EP_ERRLEN], safe[EP_ERRLEN * 4];
        for (int i = 1; i < sub; i++)
            if (!strcmp(argv[i], "--nproc")) {
                char *end;
                long n = i + 1 < sub ? strtol(argv[i + 1], &end, 10) : 0;
                if (i + 1 >= sub || *end || n < 1 || n > 1024) {
                    fprintf(stderr, "epref: --nproc needs a count between 1 and 1024\n");
                    return 2;
                }
                world = (int)n;
            }
        if (!world && ref_boot_peek(&rank, &world, err, sizeof err)) {
            fprintf(stderr, "epref: %s\n", err);
            return 2;
        }
        exec_opts o;
        if (exec_args_parse(argc - sub, argv + sub, world, &o, err)) {
            if (rank == 0) fprintf(stderr, "epref: %s\n", ep_escape_text(err, safe, sizeof safe));
            return 2;
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
