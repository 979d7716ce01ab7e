/* exec_main: flags, iterations, the gather of every rank's op times and the outputs of
 * `epref run` (exec.h). */
#include <stdlib.h>
#include <string.h>

#include "ep_sched.h"
#include "ep_io.h"
#include "exec.h"
#include "exec_args.h"
#include "exec_gpu.h"
#include "exec_plan.h"
#include "exec_metrics.h"
#include "exec_out.h"
#include "ref_check.h"

void exec_usage(FILE *f) {
    fprintf(
        f,
        "usage: epref [--nproc N] run [Megatron flags] [@argfile ...] [--trace P]\n"
        "             [--summary-json P] [--iters N] [--warmup W]\n"
        "  Builds the schedule of one training iteration (the one epsim simulates) for the\n"
        "  launched ranks and executes every op of this rank on its GPU: cuBLAS GEMMs,\n"
        "  attention, memory-bound kernels, NCCL collectives, CUDA events between streams.\n");
    exec_args_print_help(f);
    fputs("  Model and parallel flags: `epsched --help` lists them (the same for epsim).\n", f);
}

/* 0 ok, 2 bad input (message printed by rank 0). */
static int parse(ref_ctx *ctx, int argc, char **argv, exec_opts *o) {
    int loud = ctx->w.rank == 0;
    char err[EP_ERRLEN], safe[EP_ERRLEN * 4];
    int rc = exec_args_parse(argc, argv, ctx->w.size, o, err);
    if (rc && loud) fprintf(stderr, "epref: %s\n", ep_escape_text(err, safe, sizeof safe));
    if (!rc && loud && o->cfg.ignored_flags[0])
        fprintf(stderr, "epref: note: accepted without effect on the run: %s\n",
                o->cfg.ignored_flags);
    return rc;
}

static int cmp_idx_time(const void *a, const void *b, void *ctx) {
    const double *t = ctx;
    double x = t[*(const int *)a], y = t[*(const int *)b];
    return (x > y) - (x < y);
}

/* Index of the median iteration (the lower one for an even count); insertion sort, few items. */
static int median_index(const double *t, int n) {
    int *idx = malloc(sizeof *idx * (size_t)n);
    if (!idx) REF_DIE("out of memory");
    for (int i = 0; i < n; i++) {
        int j = i;
        idx[j] = i;
        while (j > 0 && cmp_idx_time(&idx[j - 1], &idx[j], (void *)t) > 0) {
            int x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
            j--;
        }
    }
    int m = idx[(n - 1) / 2];
    free(idx);
    return m;
}

int exec_main(ref_ctx *ctx, int argc, char **argv) {
    exec_opts o;
    int rc = parse(ctx, argc, argv, &o);
    if (rc) return rc;
    char err[EP_ERRLEN];
    ep_sched s;
    if (ep_sched_build(&o.cfg, &s, err) || ep_sched_check(&s, err)) {
        if (ctx->w.rank == 0) fprintf(stderr, "epref: schedule: %s\n", err);
        return 2;
    }
    if (exec_plan_check(&s, EP_MAX_RANKS, err)) { /* a transfer epref cannot move: refused before any GPU work */
        if (ctx->w.rank == 0) fprintf(stderr, "epref: %s\n", err);
        ep_sched_free(&s);
        return 2;
    }
    int me = ctx->w.rank, W = ctx->w.size, nops = s.ranks[me].nops, maxops = 0;
    for (int r = 0; r < W; r++)
        if (s.ranks[r].nops > maxops) maxops = s.ranks[r].nops;
    if (me == 0)
        printf("epref run: %d ranks, %d ops on rank 0, %d warm-up + %d measured iterations\n", W,
               nops, o.warmup, o.iters);
    fflush(stdout);
    exec_gpu *g = exec_gpu_create(ctx, &s);
    exec_span *mine = calloc((size_t)o.iters * (size_t)(nops + 1), sizeof *mine);
    exec_span *warm = calloc((size_t)nops + 1, sizeof *warm);
    double *ends = calloc((size_t)o.iters, sizeof *ends);
    double *all_ends = calloc((size_t)o.iters * (size_t)W, sizeof *all_ends);
    double *iter_t = calloc((size_t)o.iters, sizeof *iter_t);
    if (!mine || !warm || !ends || !all_ends || !iter_t) REF_DIE("out of memory");
    for (int it = -o.warmup; it < o.iters; it++) {
        exec_span *t = it < 0 ? warm : mine + (size_t)it * nops;
        exec_gpu_iteration(g, t);
        if (it < 0) continue;
        for (int i = 0; i < nops; i++)
            if (t[i].end > ends[it]) ends[it] = t[i].end;
    }
    double buf_bytes = exec_gpu_buffer_bytes(g), used = exec_gpu_used_peak(g), used_max = 0;
    exec_gpu_destroy(g);
    double *all_used = calloc((size_t)W, sizeof *all_used);
    if (!all_used || ref_boot_allgather(&ctx->w, &used, all_used, sizeof used))
        REF_DIE("lost a peer");
    for (int r = 0; r < W; r++)
        if (all_used[r] > used_max) used_max = all_used[r];
    free(all_used);
    /* the iteration time of each measured iteration is its latest end over all ranks */
    if (ref_boot_allgather(&ctx->w, ends, all_ends, sizeof *ends * (size_t)o.iters))
        REF_DIE("lost a peer");
    for (int it = 0; it < o.iters; it++)
        for (int r = 0; r < W; r++)
            if (all_ends[(size_t)r * o.iters + it] > iter_t[it])
                iter_t[it] = all_ends[(size_t)r * o.iters + it];
    int chosen = median_index(iter_t, o.iters);
    /* every rank's op intervals of the reported iteration, to everyone (rank 0 uses them) */
    exec_span *send = calloc((size_t)maxops + 1, sizeof *send);
    exec_span *all = calloc((size_t)(maxops + 1) * (size_t)W, sizeof *all);
    exec_span **tr = calloc((size_t)W, sizeof *tr);
    if (!send || !all || !tr) REF_DIE("out of memory");
    memcpy(send, mine + (size_t)chosen * nops, sizeof *send * (size_t)nops);
    if (ref_boot_allgather(&ctx->w, send, all, sizeof *send * (size_t)(maxops + 1)))
        REF_DIE("lost a peer");
    for (int r = 0; r < W; r++)
        tr[r] = all + (size_t)r * (maxops + 1);
    rc = 0;
    if (me == 0) {
        char members[2048];
        ref_meta_members(ctx, members, sizeof members);
        exec_run_info ri = {members, o.iters, o.warmup, chosen, iter_t,
                            EXEC_PEAK_FLOPS, buf_bytes, used_max};
        exec_metrics m;
        if (exec_metrics_compute(&s, tr, EXEC_PEAK_FLOPS, &m)) REF_DIE("out of memory");
        exec_print_summary(stdout, &s, &m, &ri);
        if (o.trace && exec_write_trace(o.trace, &s, tr, &ri, err)) {
            fprintf(stderr, "epref: %s\n", err);
            rc = 1;
        }
        if (!rc && o.summary && exec_write_summary(o.summary, &s, &m, &ri, err)) {
            fprintf(stderr, "epref: %s\n", err);
            rc = 1;
        }
    }
    free(mine);
    free(warm);
    free(ends);
    free(all_ends);
    free(iter_t);
    free(send);
    free(all);
    free(tr);
    ep_sched_free(&s);
    return rc;
}
