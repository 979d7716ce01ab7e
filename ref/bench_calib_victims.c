/* bench_calib_victims: interference by victim shape (`epref bench calib --parts
 * interference-shapes`, docs/calibration.md "interference.json"). The interference part times one
 * GEMM (4096 x 7168 x 2048) beside each transfer; how much a transfer slows an op depends on the
 * op: a GEMM whose tiles fill one wave loses a whole wave when the transfer holds SMs, a grouped
 * GEMM is a loop of small per-expert GEMMs, attention and memory kernels are bound elsewhere. Here
 * a grid of compute ops (dense GEMMs by size and phase, grouped expert GEMMs by rows per expert,
 * attention, memory kernels by bytes) is timed alone, beside a moving NCCL all-to-all and beside
 * NVLink stores on 8, 16 and 32 SMs. Powers of two only, so no model's shape is in it; records
 * carry "source":"shapes". */
#include <stdio.h>
#include <string.h>

#include "bench_calib.h"
#include "ep_xfer.h"
#include "exec_gpu.h"
#include "ref_check.h"

#define MAX_VICTIMS 24
enum { NV = 8 }; /* victims back to back per timing (calib_victim_us) */

/* One batch of victims on one executor (its buffers sized for the batch): every victim alone,
 * beside the all-to-all and beside each store kernel. */
typedef struct {
    bench *b;
    cudaStream_t s1, s2;
    calib_op a2a;
    double a2a_alone;
    calib_store stores[CALIB_STORE_NSMS];
    double store_alone[CALIB_STORE_NSMS];
    calib_list *out;
    int seq, dqk, dv; /* the attention geometry of the batch's executor */
} victim_bench;

static void victim_record(victim_bench *v, const ep_op *op, const char *aggressor, int asms,
                          double abytes, double alone, double shared) {
    int attn = op->kind == EP_OP_ATTENTION;
    calib_add(v->out,
              "{\"victim\":\"%s\",\"phase\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"batch\":%d,"
              "\"flops\":%.6g,\"bytes\":%.6g,\"seq\":%d,\"dqk\":%d,\"dv\":%d,"
              "\"aggressor\":\"%s\",\"aggressor_sms\":%d,"
              "\"aggressor_bytes\":%.0f,\"alone_us\":%.3f,\"shared_us\":%.3f,\"slowdown\":%.4f,"
              "\"source\":\"shapes\"}",
              ep_op_kind_name(op->kind), ep_phase_name(op->phase), op->m, op->n, op->k, op->batch,
              op->flops, op->bytes, attn ? v->seq : 0, attn ? v->dqk : 0, attn ? v->dv : 0,
              aggressor, asms, abytes, alone, shared, shared / alone);
}

static void time_victims(victim_bench *v, const ep_config *cfg, ep_op *ops, int n) {
    calib_synth y;
    calib_synth_init(&y, cfg, 1);
    y.rk[0].ops = ops, y.rk[0].nops = n;
    exec_gpu *g = exec_gpu_create_rank(v->b->ctx, &y.s, 0, 0);
    exec_gpu_attention_dims(g, &v->seq, &v->dqk, &v->dv);
    for (int i = 0; i < n; i++) {
        calib_op op = {g, i};
        double alone = calib_victim_us(v->b, v->s1, v->s2, calib_launch_op, &op, NV, NULL, NULL, 0);
        double sh = calib_victim_us(v->b, v->s1, v->s2, calib_launch_op, &op, NV, calib_launch_op,
                                    &v->a2a, calib_cover(alone, NV, v->a2a_alone));
        victim_record(v, &ops[i], "nccl_alltoall", -1, CALIB_A2A_BYTES, alone, sh);
        if (v->b->ctx->w.rank == 0)
            printf("  %-12s %-6s m %6d n %5d k %5d x%-3d alone %8.1f us  nccl x%.2f",
                   ep_op_kind_name(ops[i].kind), ep_phase_name(ops[i].phase), ops[i].m, ops[i].n,
                   ops[i].k, ops[i].batch, alone, sh / alone);
        for (int s = 0; s < CALIB_STORE_NSMS; s++) {
            double st =
                calib_victim_us(v->b, v->s1, v->s2, calib_launch_op, &op, NV, calib_run_store,
                                &v->stores[s], calib_cover(alone, NV, v->store_alone[s]));
            victim_record(v, &ops[i], "store", v->stores[s].sms, (double)v->stores[s].bytes, alone,
                          st);
            if (v->b->ctx->w.rank == 0) printf("  %d SMs x%.2f", v->stores[s].sms, st / alone);
        }
        if (v->b->ctx->w.rank == 0) printf("\n"), fflush(stdout);
    }
    exec_gpu_destroy(g);
}

/* The victim grid, in batches that share an executor. Dense GEMMs: rows 256-16384, output
 * widths 256-8192, reductions 64-8192, each with its dgrad and wgrad; grouped expert GEMMs
 * (epref's per-expert loops): both projections of hidden x FFN (up: 2 FFN x hidden, down: hidden
 * x FFN), FFN 64-4096, over 8 and 32 experts at 64-1024 rows per expert, each with its dgrad and
 * wgrad (a GEMM of few blocks leaves SMs free, one of a wave loses a wave; a narrow reduction is
 * bound by its output's bytes); attention (three geometries) forward and backward; memory
 * kernels. */
static void victim_grid(victim_bench *v) {
    static const int DENSE_ROWS[] = {256, 1024, 4096, 16384};
    static const int DENSE_N[] = {256, 2048, 8192}, DENSE_K[] = {64, 256, 2048, 8192};
    static const int HIDDEN[] = {2048, 8192}, FFN[] = {64, 256, 1024, 4096}, EXPERTS[] = {8, 32};
    static const int PER_EXPERT[] = {64, 256, 1024};
    static const double ATTN_BLOCKS[] = {4, 32}, MEM_BYTES[] = {4 << 20, 32 << 20, 256 << 20};
    static ep_op ops[MAX_VICTIMS];
    ep_config cfg;
    calib_attention_config(&cfg, 4096, 128, 128);
    int n = 0;
    for (size_t in = 0; in < sizeof DENSE_N / sizeof DENSE_N[0]; in++)
        for (size_t ik = 0; ik < sizeof DENSE_K / sizeof DENSE_K[0]; ik++) {
            n = 0;
            for (size_t r = 0; r < sizeof DENSE_ROWS / sizeof DENSE_ROWS[0]; r++)
                calib_gemm3(ops, &n, MAX_VICTIMS, EP_OP_GEMM, DENSE_ROWS[r], DENSE_N[in],
                            DENSE_K[ik], 1);
            time_victims(v, &cfg, ops, n);
        }
    for (size_t h = 0; h < 2; h++)
        for (size_t f = 0; f < sizeof FFN / sizeof FFN[0]; f++)
            for (int down = 0; down < 2; down++) {
                n = 0;
                for (size_t e = 0; e < 2; e++)
                    for (size_t r = 0; r < sizeof PER_EXPERT / sizeof PER_EXPERT[0]; r++) {
                        int rows = EXPERTS[e] * PER_EXPERT[r];
                        int nn = down ? HIDDEN[h] : 2 * FFN[f], k = down ? FFN[f] : HIDDEN[h];
                        if (calib_gemm_fits(rows, nn, k, EXPERTS[e]))
                            calib_gemm3(ops, &n, MAX_VICTIMS, EP_OP_GROUPED_GEMM, rows, nn, k,
                                        EXPERTS[e]);
                    }
                time_victims(v, &cfg, ops, n);
            }
    /* attention: MHA at two sequence lengths, MLA's head dims; each geometry its own executor */
    static const int ATTN[][3] = {{4096, 128, 128}, {2048, 128, 128}, {4096, 192, 128}};
    for (size_t a = 0; a < sizeof ATTN / sizeof ATTN[0]; a++) {
        calib_attention_config(&cfg, ATTN[a][0], ATTN[a][1], ATTN[a][2]);
        n = 0;
        double per_block = 2.0 * ATTN[a][0] * (double)ATTN[a][0] * (ATTN[a][1] + ATTN[a][2]);
        for (size_t i = 0; i < 2; i++) {
            calib_synth_op(ops, &n, MAX_VICTIMS, EP_OP_ATTENTION, EP_PHASE_FWD)->flops =
                ATTN_BLOCKS[i] * per_block;
            calib_synth_op(ops, &n, MAX_VICTIMS, EP_OP_ATTENTION, EP_PHASE_BWD)->flops =
                ATTN_BLOCKS[i] * per_block;
        }
        if (a == 0)
            for (size_t i = 0; i < 3; i++)
                calib_synth_op(ops, &n, MAX_VICTIMS, EP_OP_ELEMENTWISE, EP_PHASE_FWD)->bytes =
                    MEM_BYTES[i];
        time_victims(v, &cfg, ops, n);
    }
}

void calib_interference_shapes(bench *b, calib_list *out) {
    int me = b->ctx->w.rank;
    victim_bench v = {.b = b, .out = out};
    CUDA_CHECK(cudaStreamCreateWithFlags(&v.s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&v.s2, cudaStreamNonBlocking));
    ep_config cfg;
    ep_config_defaults(&cfg);
    ep_config_resolve(&cfg); /* built by hand: no validation */
    exec_gpu *ag = calib_a2a_aggressor(b, &cfg);
    v.a2a = (calib_op){ag, 0};
    v.a2a_alone = calib_victim_us(b, v.s1, v.s2, calib_launch_op, &v.a2a, NV, NULL, NULL, 0);
    static ep_nvl nvl;
    void *src = calib_stores_open(b, &nvl);
    for (int s = 0; s < CALIB_STORE_NSMS; s++) {
        v.stores[s] = (calib_store){&nvl, src, CALIB_STORE_BYTES, calib_store_sms[s]};
        v.store_alone[s] =
            calib_victim_us(b, v.s1, v.s2, calib_run_store, &v.stores[s], NV, NULL, NULL, 0);
    }
    if (me == 0) {
        printf("  victims by shape: nccl alltoall alone %.1f us; stores on 8/16/32 SMs alone "
               "%.1f/%.1f/%.1f us\n",
               v.a2a_alone, v.store_alone[0], v.store_alone[1], v.store_alone[2]);
        fflush(stdout);
    }
    victim_grid(&v);
    calib_stores_close(&nvl, src);
    exec_gpu_destroy(ag);
    CUDA_CHECK(cudaStreamDestroy(v.s1));
    CUDA_CHECK(cudaStreamDestroy(v.s2));
}
