/* test_overlap: EP overlap changes the timing, not the math (docs/epref.md, "Tests").
 *
 * A small MoE model step on 2 ranks (forked here, as `epref --nproc 2`), EP=2: NL MoE layers
 * (router on given logits, dispatch, expert MLP with SwiGLU through cuBLAS, weighted combine; each
 * layer's output is the next one's input), NMB microbatches with uneven token counts, loss
 * 0.5 * sum(out^2) per microbatch (so dL/dout = out), and the backward: combine's backward
 * (dispatch of the gradient scaled by the router probabilities), expert dgrad, dispatch's backward
 * (plain combine), expert wgrad as separate GEMMs. The router probabilities are constants (no
 * router gradient). Run three ways, for the NCCL alltoall and the NVLink dispatcher: seq      one
 * stream, microbatch after microbatch, forward then backward; 1f1b     combined 1F1B
 * (docs/schedule.md, section 5): forward of microbatch i paired with the backward of i-1, forward
 * layer j with backward layer NL-1-j, node order b.combine_bwd [comm], f.router [comp], f.dispatch
 * [comm], b.dgrad + b.wgrad [comp], b.dispatch_bwd [comm], f.mlp [comp], f.combine [comm]; one CUDA
 * event per microbatch, which every node waits on before and records after; 1f1b_dw  the same with
 * delayed wgrad: b.wgrad after b.dispatch_bwd, on comp, with no event. Loss, the input gradient of
 * every microbatch and every expert weight gradient (summed over the microbatches) of 1f1b and
 * 1f1b_dw must match seq (max abs and relative differences printed; bitwise equality is expected, a
 * bf16 tolerance accepted). Buffers are poisoned (NaN) before each run. Fresh random inputs each
 * run (seed printed). Exit 77 with fewer than 2 GPUs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_ref.h"
#include "ep_expert.h"
#include "ep_route.h"
#include "ref_check.h"
#include "ref_disp.h"

static int failures;
static uint64_t seed;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL rank %d %s:%d: ", ref_rank, __FILE__, __LINE__);                          \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

enum { NL = 2, NMB = 3, E = 8, K = 2, H = 64, F = 32, PAD = 16, MAXT = 160 };
enum { SEQ, OVERLAP, OVERLAP_DW, NVARIANTS };
static const char *variant_name[] = {"seq", "1f1b", "1f1b_dw"};

/* One (microbatch, layer): its dispatcher (layout, buffers) and the expert activations. */
typedef struct {
    ref_disp d;
    float *logits; /* [MAXT][E], fixed */
    int32_t *topk; /* [MAXT][K] router output */
    float *prob;
    int64_t rows[E];                /* host: padded rows per local expert */
    ep_bf16 *px, *ph, *pa, *py;     /* forward, permuted order */
    ep_bf16 *pdy, *pda, *pdh, *pdx; /* backward */
    ep_bf16 *gW1, *gW2;             /* this microbatch's weight gradients */
} unit;

typedef struct {
    ref_ctx *c;
    int ep, me, Ep, ntok[NMB];
    int64_t cap;
    unit u[NMB][NL];
    ep_bf16 *act[NMB][NL + 1];  /* act[m][0] input, act[m][l+1] output of layer l */
    ep_bf16 *grad[NMB][NL + 1]; /* dL/d act[m][l]; grad[m][NL] = act[m][NL] */
    ep_bf16 *W1[NL], *W2[NL];   /* this rank's experts [Ep][H][2F], [Ep][F][H] */
    ep_gemm *g;
    cudaStream_t comp, comm;
    cudaEvent_t ev[NMB];
    int delay_wgrad;
} model;

typedef struct {
    double loss[NMB];
    float *dx[NMB];           /* [ntok][H] */
    float *gW1[NL], *gW2[NL]; /* summed over microbatches */
} result;

static void *dalloc(size_t b) {
    void *p;
    CUDA_CHECK(cudaMalloc(&p, b ? b : 1));
    return p;
}
static void down_bf(float *h, const ep_bf16 *d, size_t n) {
    ep_bf16 *t = malloc(n * 2);
    CUDA_CHECK(cudaMemcpy(t, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        h[i] = bf2f(t[i]);
    free(t);
}

static void model_create(model *M, ref_ctx *c, ref_disp_kind kind) {
    memset(M, 0, sizeof *M);
    M->c = c;
    M->ep = c->w.size;
    M->me = c->w.rank;
    M->Ep = E / M->ep;
    const int Ep = M->Ep;
    const size_t w1 = (size_t)Ep * H * 2 * F, w2 = (size_t)Ep * F * H;
    ep_rng rng;
    ep_rng_seed(&rng, seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(M->me + 1)));
    for (int m = 0; m < NMB; m++) {
        M->ntok[m] = 96 + 17 * m + 23 * M->me; /* uneven over ranks and microbatches */
        for (int l = 0; l <= NL; l++) {
            M->act[m][l] = dalloc((size_t)MAXT * H * 2);
            M->grad[m][l] = l == NL ? M->act[m][NL] : dalloc((size_t)MAXT * H * 2);
        }
        CUDA_CHECK(ep_fill_random_bf16(M->act[m][0], (size_t)M->ntok[m] * H,
                                       seed + 100 * (uint64_t)M->me + (uint64_t)m, 1.f, c->stream));
    }
    for (int l = 0; l < NL; l++) {
        M->W1[l] = dalloc(w1 * 2);
        M->W2[l] = dalloc(w2 * 2);
        CUDA_CHECK(ep_fill_random_bf16(M->W1[l], w1, seed + 1000 + 10 * (uint64_t)M->me + l, 0.5f,
                                       c->stream));
        CUDA_CHECK(ep_fill_random_bf16(M->W2[l], w2, seed + 2000 + 10 * (uint64_t)M->me + l, 0.5f,
                                       c->stream));
    }
    float *lg = malloc(sizeof(float) * MAXT * E);
    for (int m = 0; m < NMB; m++)
        for (int l = 0; l < NL; l++) {
            unit *u = &M->u[m][l];
            ref_disp_create(&u->d, c, kind, H, K, E, MAXT, PAD, 0);
            u->d.nvl.num_sms = 4;
            M->cap = ep_layout_max_perm_rows(ref_disp_layout(&u->d));
            const size_t r = (size_t)M->cap;
            for (size_t i = 0; i < (size_t)MAXT * E; i++)
                lg[i] = (float)(3 * (2 * ep_rng_uniform(&rng) - 1));
            u->logits = dalloc(sizeof(float) * MAXT * E);
            CUDA_CHECK(cudaMemcpy(u->logits, lg, sizeof(float) * MAXT * E, cudaMemcpyHostToDevice));
            u->topk = dalloc(sizeof(int32_t) * MAXT * K);
            u->prob = dalloc(sizeof(float) * MAXT * K);
            u->px = dalloc(r * H * 2), u->ph = dalloc(r * 2 * F * 2), u->pa = dalloc(r * F * 2);
            u->py = dalloc(r * H * 2), u->pdy = dalloc(r * H * 2), u->pda = dalloc(r * F * 2);
            u->pdh = dalloc(r * 2 * F * 2), u->pdx = dalloc(r * H * 2);
            u->gW1 = dalloc(w1 * 2), u->gW2 = dalloc(w2 * 2);
        }
    free(lg);
    M->g = ep_gemm_create(EP_GEMM_DEFAULT, Ep);
    if (!M->g) REF_DIE("ep_gemm_create");
    CUDA_CHECK(cudaStreamCreateWithFlags(&M->comp, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&M->comm, cudaStreamNonBlocking));
    for (int m = 0; m < NMB; m++)
        CUDA_CHECK(cudaEventCreateWithFlags(&M->ev[m], cudaEventDisableTiming));
    CUDA_CHECK(cudaDeviceSynchronize()); /* the pageable copies and fills have landed */
}

static void model_destroy(model *M) {
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int m = 0; m < NMB; m++) {
        for (int l = 0; l < NL; l++) {
            unit *u = &M->u[m][l];
            ref_disp_destroy(&u->d);
            void *b[] = {u->logits, u->topk, u->prob, u->px,  u->ph,  u->pa, u->py,
                         u->pdy,    u->pda,  u->pdh,  u->pdx, u->gW1, u->gW2};
            for (size_t i = 0; i < sizeof b / sizeof *b; i++)
                cudaFree(b[i]);
        }
        for (int l = 0; l <= NL; l++) {
            cudaFree(M->act[m][l]);
            if (l < NL) cudaFree(M->grad[m][l]);
        }
        cudaEventDestroy(M->ev[m]);
    }
    for (int l = 0; l < NL; l++)
        cudaFree(M->W1[l]), cudaFree(M->W2[l]);
    ep_gemm_destroy(M->g);
    cudaStreamDestroy(M->comp);
    cudaStreamDestroy(M->comm);
}

/* Everything a run writes, to NaN (bf16) / -1 (int32) first. */
static void poison(model *M) {
    const size_t r = (size_t)M->cap, w1 = (size_t)M->Ep * H * 2 * F, w2 = (size_t)M->Ep * F * H;
    cudaStream_t st = M->c->stream;
    for (int m = 0; m < NMB; m++) {
        for (int l = 0; l < NL; l++) {
            unit *u = &M->u[m][l];
            struct {
                void *p;
                size_t n;
            } b[] = {{u->topk, (size_t)MAXT * K * 4},
                     {u->prob, (size_t)MAXT * K * 4},
                     {u->px, r * H * 2},
                     {u->ph, r * 2 * F * 2},
                     {u->pa, r * F * 2},
                     {u->py, r * H * 2},
                     {u->pdy, r * H * 2},
                     {u->pda, r * F * 2},
                     {u->pdh, r * 2 * F * 2},
                     {u->pdx, r * H * 2},
                     {u->gW1, w1 * 2},
                     {u->gW2, w2 * 2},
                     {M->act[m][l + 1], (size_t)MAXT * H * 2},
                     {M->grad[m][l], (size_t)MAXT * H * 2}};
            for (size_t i = 0; i < sizeof b / sizeof *b; i++)
                CUDA_CHECK(cudaMemsetAsync(b[i].p, 0xff, b[i].n, st));
        }
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
}

/* ---- the nodes of one (microbatch m, layer l); each on the stream it is given ---------------- */
static ep_mlp_shape shape(model *M, unit *u) {
    ep_mlp_shape s = {M->Ep, H, F, u->rows};
    return s;
}
static void f_router(model *M, int m, int l, cudaStream_t st) {
    unit *u = &M->u[m][l];
    ep_router_params p = {M->ntok[m], E, K, 0, 0, 0};
    CUDA_CHECK(ep_router(u->logits, NULL, p, u->topk, u->prob, st));
}
static void f_dispatch(model *M, int m, int l, cudaStream_t st) {
    unit *u = &M->u[m][l];
    ref_disp_route(&u->d, u->topk, u->prob, M->ntok[m], st);
    int32_t padded[E];
    ref_disp_counts(&u->d, NULL, padded, NULL, st); /* the GEMM shapes: a host sync */
    for (int e = 0; e < M->Ep; e++)
        u->rows[e] = padded[e];
    ref_disp_dispatch(&u->d, M->act[m][l], u->px, 0, st);
}
static void f_mlp(model *M, int m, int l, cudaStream_t st) {
    unit *u = &M->u[m][l];
    OK_CHECK(ep_mlp_forward(M->g, shape(M, u), u->px, M->W1[l], M->W2[l], u->ph, u->pa, u->py, st));
}
static void f_combine(model *M, int m, int l, cudaStream_t st) {
    unit *u = &M->u[m][l];
    ref_disp_combine(&u->d, u->py, M->act[m][l + 1], 1, st);
}
static void b_combine(model *M, int m, int l, cudaStream_t st) { /* combine's backward */
    unit *u = &M->u[m][l];
    ref_disp_dispatch(&u->d, M->grad[m][l + 1], u->pdy, 1, st);
}
static void b_dgrad(model *M, int m, int l, cudaStream_t st) {
    unit *u = &M->u[m][l];
    OK_CHECK(ep_mlp_dgrad(M->g, shape(M, u), u->pdy, u->ph, M->W1[l], M->W2[l], u->pda, u->pdh,
                          u->pdx, st));
    if (!M->delay_wgrad)
        OK_CHECK(ep_mlp_wgrad(M->g, shape(M, u), u->px, u->pa, u->pdy, u->pdh, u->gW1, u->gW2, st));
}
static void b_wgrad(model *M, int m, int l, cudaStream_t st) { /* delayed: no event (Megatron) */
    unit *u = &M->u[m][l];
    OK_CHECK(ep_mlp_wgrad(M->g, shape(M, u), u->px, u->pa, u->pdy, u->pdh, u->gW1, u->gW2, st));
}
static void b_dispatch(model *M, int m, int l, cudaStream_t st) { /* dispatch's backward */
    unit *u = &M->u[m][l];
    ref_disp_combine(&u->d, u->pdx, M->grad[m][l], 0, st);
}

typedef void (*node_fn)(model *, int, int, cudaStream_t);
/* A node of microbatch m: waits for the microbatch's event, runs, records it. */
static void node(model *M, node_fn fn, int m, int l, cudaStream_t st) {
    CUDA_CHECK(cudaStreamWaitEvent(st, M->ev[m], 0));
    fn(M, m, l, st);
    CUDA_CHECK(cudaEventRecord(M->ev[m], st));
}

static void forward_all(model *M, int m) {
    for (int l = 0; l < NL; l++) {
        node(M, f_router, m, l, M->comp);
        node(M, f_dispatch, m, l, M->comm);
        node(M, f_mlp, m, l, M->comp);
        node(M, f_combine, m, l, M->comm);
    }
}
static void backward_layer(model *M, int m, int l) {
    node(M, b_combine, m, l, M->comm);
    node(M, b_dgrad, m, l, M->comp);
    node(M, b_dispatch, m, l, M->comm);
    if (M->delay_wgrad) b_wgrad(M, m, l, M->comp);
}
static void backward_all(model *M, int m) {
    for (int l = NL - 1; l >= 0; l--)
        backward_layer(M, m, l);
}

static void run(model *M, int variant) {
    poison(M);
    M->delay_wgrad = variant == OVERLAP_DW;
    cudaStream_t comp = M->comp, comm = M->comm;
    if (variant == SEQ) /* one stream for everything */
        M->comp = M->comm = M->c->stream;
    if (variant == SEQ) {
        for (int m = 0; m < NMB; m++) {
            forward_all(M, m);
            backward_all(M, m);
        }
    } else {
        forward_all(M, 0);
        for (int f = 1; f < NMB; f++) {
            int b = f - 1;
            for (int j = 0; j < NL; j++) {
                int lf = j, lb = NL - 1 - j;
                node(M, b_combine, b, lb, M->comm);
                node(M, f_router, f, lf, M->comp);
                node(M, f_dispatch, f, lf, M->comm);
                node(M, b_dgrad, b, lb, M->comp); /* + wgrad unless delayed */
                node(M, b_dispatch, b, lb, M->comm);
                if (M->delay_wgrad) b_wgrad(M, b, lb, M->comp); /* after the next dispatch */
                node(M, f_mlp, f, lf, M->comp);
                node(M, f_combine, f, lf, M->comm);
            }
        }
        backward_all(M, NMB - 1);
    }
    for (int m = 0; m < NMB; m++)
        for (int l = 0; l < NL; l++)
            ref_disp_check(&M->u[m][l].d, M->comm); /* stops if an NVLink spin-wait timed out */
    CUDA_CHECK(cudaDeviceSynchronize());
    M->comp = comp;
    M->comm = comm;
}

static void collect(model *M, result *R) {
    const size_t w1 = (size_t)M->Ep * H * 2 * F, w2 = (size_t)M->Ep * F * H;
    float *t1 = malloc(w1 * 4), *t2 = malloc(w2 * 4);
    for (int m = 0; m < NMB; m++) {
        size_t n = (size_t)M->ntok[m] * H;
        float *o = malloc(n * 4);
        down_bf(o, M->act[m][NL], n);
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += 0.5 * (double)o[i] * o[i];
        R->loss[m] = s;
        free(o);
        R->dx[m] = malloc(n * 4);
        down_bf(R->dx[m], M->grad[m][0], n);
    }
    for (int l = 0; l < NL; l++) {
        R->gW1[l] = calloc(w1, 4);
        R->gW2[l] = calloc(w2, 4);
        for (int m = 0; m < NMB; m++) {
            down_bf(t1, M->u[m][l].gW1, w1);
            down_bf(t2, M->u[m][l].gW2, w2);
            for (size_t i = 0; i < w1; i++)
                R->gW1[l][i] += t1[i];
            for (size_t i = 0; i < w2; i++)
                R->gW2[l][i] += t2[i];
        }
    }
    free(t1), free(t2);
}
static void result_free(result *R) {
    for (int m = 0; m < NMB; m++)
        free(R->dx[m]);
    for (int l = 0; l < NL; l++)
        free(R->gW1[l]), free(R->gW2[l]);
}

/* got vs want: max abs diff, the same relative to max |want|, norm-relative error, bitwise. */
static void diff(const char *run, const char *what, const float *got, const float *want, size_t n,
                 double *worst, double *worst_abs, size_t *ndiff) {
    double maxabs = 0, maxref = 0;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (isnan(got[i]) != isnan(want[i]) || d != 0) differ++;
        if (!(d <= maxabs)) maxabs = d;
        if (fabs(want[i]) > maxref) maxref = fabs(want[i]);
    }
    double err = rel_err(got, want, n), rel = maxref > 0 ? maxabs / maxref : maxabs;
    if (!(err <= *worst)) *worst = err;
    if (!(maxabs <= *worst_abs)) *worst_abs = maxabs;
    *ndiff += differ;
    if (differ || !(err < 1e-2))
        printf(
            "rank %d %s: %s: %zu of %zu values differ, max abs %.3e (%.3e of max |ref|), rel err "
            "%.3e\n",
            ref_rank, run, what, differ, n, maxabs, rel, err);
    EXPECT(err < 1e-2, "%s: %s: rel err %.3e, max abs %.3e vs seq", run, what, err, maxabs);
}

static void compare(model *M, const char *run, const result *got, const result *want) {
    char what[64];
    double worst = 0, worst_abs = 0, lworst = 0;
    size_t ndiff = 0;
    for (int m = 0; m < NMB; m++) {
        double dl = fabs(got->loss[m] - want->loss[m]) / (fabs(want->loss[m]) + 1e-30);
        if (dl > lworst || isnan(dl)) lworst = dl;
        EXPECT(dl < 1e-3, "%s: microbatch %d loss %.9g, seq %.9g (rel %.3e)", run, m, got->loss[m],
               want->loss[m], dl);
        snprintf(what, sizeof what, "dx of microbatch %d", m);
        diff(run, what, got->dx[m], want->dx[m], (size_t)M->ntok[m] * H, &worst, &worst_abs,
             &ndiff);
    }
    for (int l = 0; l < NL; l++) {
        snprintf(what, sizeof what, "dW1 of layer %d", l);
        diff(run, what, got->gW1[l], want->gW1[l], (size_t)M->Ep * H * 2 * F, &worst, &worst_abs,
             &ndiff);
        snprintf(what, sizeof what, "dW2 of layer %d", l);
        diff(run, what, got->gW2[l], want->gW2[l], (size_t)M->Ep * F * H, &worst, &worst_abs,
             &ndiff);
    }
    printf(
        "rank %d %s vs seq: loss rel diff %.3e; gradients: %zu values not bitwise equal, max abs "
        "diff %.3e, worst rel err %.3e\n",
        ref_rank, run, lworst, ndiff, worst_abs, worst);
}

static void test_kind(ref_ctx *c, ref_disp_kind kind) {
    model M;
    model_create(&M, c, kind);
    result R[NVARIANTS];
    for (int v = 0; v < NVARIANTS; v++) {
        run(&M, v);
        collect(&M, &R[v]);
    }
    const char *kn = ref_disp_kind_name(kind);
    char name[64];
    /* sanity of the reference itself: finite, non-zero */
    for (int m = 0; m < NMB; m++)
        EXPECT(isfinite(R[SEQ].loss[m]) && R[SEQ].loss[m] > 0, "%s seq: microbatch %d loss %g", kn,
               m, R[SEQ].loss[m]);
    for (int l = 0; l < NL; l++) {
        double s = 0;
        for (size_t i = 0; i < (size_t)M.Ep * F * H; i++)
            s += fabs(R[SEQ].gW2[l][i]);
        EXPECT(isfinite(s) && s > 0, "%s seq: dW2 of layer %d: sum |g| = %g", kn, l, s);
    }
    if (c->w.rank == 0) {
        printf("%s seq: rank 0 losses", kn);
        for (int m = 0; m < NMB; m++)
            printf(" %.6g", R[SEQ].loss[m]);
        printf("\n");
    }
    for (int v = OVERLAP; v < NVARIANTS; v++) {
        snprintf(name, sizeof name, "%s %s", kn, variant_name[v]);
        compare(&M, name, &R[v], &R[SEQ]);
    }
    for (int v = 0; v < NVARIANTS; v++)
        result_free(&R[v]);
    model_destroy(&M);
}

int main(int argc, char **argv) {
    char *args[] = {argv[0], "--nproc", "2", NULL};
    int nargs = 3, status;
    (void)argc;
    if (ref_boot_launch(&nargs, args, &status)) return status;
    gpu_count_or_skip(2);
    ref_ctx c;
    ref_ctx_init(&c);
    seed = (uint64_t)time(NULL);
    if (ref_boot_bcast(&c.w, &seed, sizeof seed)) REF_DIE("bcast");
    if (c.w.rank == 0) printf("test_overlap: seed %llu\n", (unsigned long long)seed);
    test_kind(&c, REF_DISP_ALLTOALL);
    test_kind(&c, REF_DISP_NVL);
    int all[EP_MAX_RANKS];
    ref_boot_allgather(&c.w, &failures, all, sizeof failures);
    int total = 0;
    for (int i = 0; i < c.w.size; i++)
        total += all[i];
    if (c.w.rank == 0)
        printf("test_overlap: %s (%d failures)\n", total ? "FAILED" : "passed", total);
    CUDA_CHECK(cudaDeviceSynchronize());
    ref_ctx_fini(&c);
    return total ? 1 : 0;
}
