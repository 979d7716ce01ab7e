/* bench_calib: `epref bench calib`, the raw calibration files of docs/calibration.md.
 *   compute.json      every compute op kind alone, through the executor's own launch (exec_gpu)
 *   comm.json         NCCL operations over all launched ranks, the executor's calls
 *   host.json         launch, NCCL launch, host sync and per-kernel GPU overhead; with --parts
 *                     nccl-issue, an NCCL send/recv after a host sync against queued
 *   interference.json a GEMM beside an NCCL all-to-all or an NVLink store kernel, and back; with
 *                     --parts interference-shapes, a grid of victim shapes beside both
 *   corun.json        a GEMM and a memory kernel beside each other on two streams of one GPU
 *   draw.json         what compute ops draw toward the power cap, back to back with a large GEMM
 * Records are JSON objects kept as text until rank 0 writes the files (one meta record first). */
#ifndef BENCH_CALIB_H
#define BENCH_CALIB_H

#include <stddef.h>
#include "bench.h"
#include "ep_sched.h"
#include "exec_gpu.h"

typedef struct {
    char *text; /* ",\n{...}" per record */
    size_t len, cap;
    int n;
} calib_list;

/* A schedule of `world` ranks made up for timing: rank r runs ranks[r] (compute: world 1 and
 * exec_gpu_create_rank without communicators; NCCL: group 0 = all ranks, group 1 = the pair
 * {0, 1} for send/recv). */
typedef struct {
    ep_sched s;
    ep_rank_sched rk[EP_MAX_RANKS];
    ep_group grp[2];
    int members[EP_MAX_RANKS], pair[2];
} calib_synth;

void calib_synth_init(calib_synth *y, const ep_config *cfg, int world);
/* Appends a zeroed op of kind/phase on the compute stream (no group, batch 1) to ops[*n]. */
ep_op *calib_synth_op(ep_op *ops, int *n, int cap, ep_op_kind kind, ep_phase phase);

/* Op i of an executor, launched as a bench_op (bench_time, bench_time_ahead): arg is a
 * calib_op *. */
typedef struct {
    exec_gpu *g;
    int i;
} calib_op;
void calib_launch_op(void *arg, cudaStream_t st);

/* The bounds of the shapes calibration times (the grid, the draw lattice): ops above
 * CALIB_MAX_FLOPS are left out (their efficiency is the largest point's), grouped GEMMs of more
 * than CALIB_MAX_ROWS rows or whose weights exceed CALIB_MAX_WEIGHTS bytes too (an H100 still
 * holds them beside the activations). Whether a GEMM of `rows` rows over `experts` experts of
 * [k x nn] weights fits them. */
#define CALIB_MAX_FLOPS   4e12
#define CALIB_MAX_WEIGHTS 24e9
#define CALIB_MAX_ROWS    65536
int calib_gemm_fits(double rows, double nn, double k, double experts);

/* Appends a forward GEMM shape and its backward ops (dgrad, wgrad) exactly as
 * core/sched_layer.c derives them. */
void calib_gemm3(ep_op *ops, int *n, int cap, ep_op_kind kind, int m, int nn, int k, int batch);
/* A config whose attention geometry is (seq, dqk, dv): MHA, or MLA where dqk != dv. */
void calib_attention_config(ep_config *cfg, int seq, int dqk, int dv);

/* Appends one record (printf format of the object, braces included). */
void calib_add(calib_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sharing a GPU (bench_calib_share.c): the median GPU time of one victim launch (of nv back to
 * back on s1) while na aggressor launches run on s2 (na 0: alone), mean over ranks; the first and
 * last victims are left out (they may start before or end after the aggressor). */
double calib_victim_us(bench *b, cudaStream_t s1, cudaStream_t s2, bench_op victim, void *va,
                       int nv, bench_op aggr, void *aa, int na);
/* Aggressor launches that outlast nv victims of victim_alone us by half again. */
int calib_cover(double victim_alone, int nv, double aggr_alone);
/* The executor of one NCCL all-to-all of CALIB_A2A_BYTES per peer over every rank (op 0). */
#define CALIB_A2A_BYTES (256.0 * (1 << 20))
exec_gpu *calib_a2a_aggressor(bench *b, const ep_config *cfg);
/* A plain NVLink store kernel on `sms` SMs writing `bytes` to every peer, as a bench_op. */
typedef struct {
    ep_nvl *nvl;
    const void *src;
    size_t bytes;
    int sms;
} calib_store;
void calib_run_store(void *a, cudaStream_t st);
/* The store aggressors of both interference parts: CALIB_STORE_BYTES to every peer on each of
 * calib_store_sms[] SMs. calib_stores_open sets up nvl (over every rank) and returns the source;
 * calib_stores_close frees both. */
#define CALIB_STORE_BYTES ((size_t)64 << 20)
#define CALIB_STORE_NSMS  3
extern const int calib_store_sms[CALIB_STORE_NSMS];
void *calib_stores_open(bench *b, ep_nvl *nvl);
void calib_stores_close(ep_nvl *nvl, void *src);

/* A grouped ncclSend/ncclRecv of `bytes` with the partner `peer` on st: what `nccl_launch` and
 * `nccl_issue` (host.json) time. */
void calib_pair_send_recv(void *snd, void *rcv, size_t bytes, int peer, ncclComm_t c,
                          cudaStream_t st);

/* Host costs (host.json) and interference (interference.json); need b->barrier. */
void calib_host(bench *b, calib_list *out);
void calib_interference(bench *b, calib_list *out, int moving, int waiting);
void calib_corun(bench *b, calib_list *out);
/* Interference by victim shape (bench_calib_victims.c, --parts interference-shapes). */
void calib_interference_shapes(bench *b, calib_list *out);

/* An NCCL send/recv issued after a host sync against queued behind work (bench_calib_issue.c,
 * --parts nccl-issue, host.json). */
void calib_nccl_issue(bench *b, calib_list *out);
/* What compute ops draw toward the power cap (draw.json; bench_calib_draw.c); wide_only: only
 * the grouped GEMMs of the lattice's widest FFN (--parts draw-wide). */
void calib_draw(bench *b, calib_list *out, int wide_only);

#endif
