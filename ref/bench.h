/* bench: the harness of `epref bench dispatch|combine|gemm` (one small file per benchmark).
 * Owns the flags, the routing of each size, timing (median over iterations of the slowest
 * rank's CUDA-event time, each iteration started by a device-side barrier of all ranks), the
 * nccl-tests style table on stdout and the JSON file. Figures are defined in docs/metrics.md. */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>
#include "ep_config.h"
#include "ep_kernels.h"
#include "ref_comm.h"
#include "ref_disp.h"

#define BENCH_MAX_SIZES 32
#define BENCH_MAX_ROWS  512

typedef struct {
    char backend[32];
    int tokens;
    int num_sms;          /* -1: not applicable (NCCL chooses its channels) */
    double time_us;       /* median */
    double link_bytes;    /* bytes one rank pushes across NVLink, mean over ranks */
    double logical_bytes; /* DeepEP's received bytes incl. local, mean over ranks */
    double flops;         /* gemm only */
} bench_row;

typedef struct {
    ref_ctx *ctx;
    ep_config cfg;
    const char *name;
    int tokens[BENCH_MAX_SIZES], ntokens;
    int num_sms, permute_blocks, reduce_blocks, iters, warmup;
    const char *json_path;
    bench_row rows[BENCH_MAX_ROWS];
    int nrows;
    ep_nvl *barrier; /* aligns the ranks before every timed iteration */
    int flush_mb;    /* bench_time_ahead: MiB written before each iteration (0: warm caches) */
    void *flush[2];  /* its source and destination, allocated on first use */
    const char *out_dir, *models, *parts; /* calib: --out, --models, --parts */
} bench;

typedef void (*bench_op)(void *arg, cudaStream_t st);

/* Host clock (CLOCK_MONOTONIC) in microseconds: host costs of launches. */
double bench_now_us(void);
/* Median over iterations of the slowest rank's time of op, in microseconds. */
double bench_time(bench *b, bench_op op, void *arg);
/* The same with the host ahead of the GPU: the op's GPU time alone, without the gaps of a GPU
 * waiting for the host's launches. *host_us gets the host time of issuing it in steady state
 * (issued again right behind the timed issue, as a run issues ops back to back), *host_first_us
 * that of the timed issue right after a synchronisation (medians, mean over ranks; either may be
 * NULL). With b->flush_mb, each iteration first streams that many MiB through HBM, so the op
 * starts with caches holding other data, as inside a run. */
double bench_time_ahead(bench *b, bench_op op, void *arg, double *host_us, double *host_first_us);
/* Records a row (rank 0 prints it at once). */
void bench_add(bench *b, const char *backend, int tokens, int num_sms, double time_us,
               double link_bytes, double logical_bytes, double flops);
/* The baselines every bandwidth benchmark records beside its backends, moving the same per-peer
 * bytes from src: the copy engine ("peer_copy", 0 SMs) and a plain store kernel on the
 * benchmark's SMs ("store_ceiling"), each peer after the other; and the same two with every peer
 * written at once ("copy_all_peers": a copy per peer on its own stream; "store_all_peers": the
 * store kernel's blocks spread over the peers; "tma_all_peers": the same blocks' TMA bulk
 * copies), the ceilings of an all-to-all. */
void bench_add_push_baselines(bench *b, ep_nvl *nvl, const void *src, const size_t *peer_bytes,
                              int me, int ep, int tokens, double link_bytes, double logical_bytes);
/* Mean over ranks of a per-rank value. */
double bench_mean(bench *b, double v);
/* This rank's routing for `tokens` tokens per rank: topk ids and probabilities on the device
 * ([tokens][topk]), drawn by core's seeded generator (same seed -> same traffic as epsim). */
void bench_routing(bench *b, int tokens, int32_t *d_topk, float *d_prob);

void bench_print_header(bench *b, const char *what);
/* Routes `tokens` per rank on both dispatchers, checks that their layouts agree, and returns
 * the host cnt/roff/coff and the mean link and logical (DeepEP) bytes per rank. */
void bench_setup(bench *b, int tokens, ref_disp *nvl, ref_disp *a2a, int32_t *d_topk, float *d_prob,
                 int32_t *cnt, double *link, double *logical);

int bench_dispatch(bench *b);
int bench_combine(bench *b);
int bench_gemm(bench *b);
/* The raw calibration files (docs/calibration.md) into out_dir; models: NULL or a file of lines
 * "name flags..."; parts: a list naming host, compute, comm, interference. */
int bench_calib(bench *b, const char *out_dir, const char *models, const char *parts);
/* Whether the comma-separated --parts list names this part as a whole word ("dense" is a prefix
 * of "dense-steps"). */
int calib_has_part(const char *parts, const char *name);

/* Writes the rows as the JSON file of --json. Returns 0 or -1 (message on stderr). */
int bench_write_json(bench *b);

/* The benchmark table (bench_list.c): a name, its function, and whether it takes its models from
 * --models (with --out and --parts) instead of the flags' one EP group. */
typedef struct {
    const char *name;
    int (*run)(bench *b);
    int own_models;
} bench_entry;
const bench_entry *bench_find(const char *name); /* NULL: no such benchmark */
void bench_names(char *buf, size_t n);           /* "dispatch, combine, ..." */

/* Entry of `epref bench ...` (bench_main.c): argv after "bench". Returns the exit status. */
int bench_main(ref_ctx *ctx, int argc, char **argv);

#endif
