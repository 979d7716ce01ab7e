/* test_graph: one MoE layer forward captured in a CUDA graph and replayed (docs/epref.md, "Tests").
 *
 * Device-padding mode with a permute budget: router, device layout (padded expert offsets, budget,
 * overflow flag), permute, expert MLP (cuBLAS GEMMs, loop mode, SwiGLU) on fixed-capacity slots
 * (ep_perm_to_slots: cuBLAS takes host shapes, so every expert runs `cap` rows), unpermute with the
 * weighted sum of the k outputs. One GPU, EP=1. The layer is captured once and replayed on fresh
 * inputs copied into the captured input buffers; before each replay every intermediate buffer is
 * poisoned (NaN, -1), so a replay that skipped a step cannot pass on the eager run's leftovers.
 * Each replay must equal the eager forward on the same inputs bitwise (a bf16 tolerance is
 * reported and accepted, flagged), the eager one must match the CPU, and the overflow flag must
 * stay clear; budgets too small for the routing must raise it inside a replay.
 * Host-padding mode (the counts copied to the host to size the GEMMs, as the alltoall dispatcher
 * does) must run eagerly and agree, and must fail to capture: its device-to-host sync is not
 * capturable. Fresh random inputs each run (seed printed). Exit 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_ref.h"
#include "ep_expert.h"
#include "ep_route.h"
#include "ref_check.h"

int ref_rank = 0;
static int failures;
static ep_rng rng;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

enum { T = 256, E = 8, K = 2, H = 128, F = 64, PAD = 16, REPLAYS = 5 };

static float urand(void) {
    return (float)(2 * ep_rng_uniform(&rng) - 1);
}
static void *dalloc(size_t bytes) {
    void *p;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
static void up(void *d, const void *h, size_t n) {
    CUDA_CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize()); /* a pageable copy may return before its DMA lands */
}

/* Weights shared by every layer instance: host floats hold the exact bf16 values. */
static float hW1[E * H * 2 * F], hW2[E * F * H];
static ep_bf16 *dW1, *dW2;

typedef struct {
    const char *name;
    int64_t perm_cap, cap; /* permute budget (rows), slot rows per expert */
    ep_layout L;           /* EP=1: the map is the router's output */
    ep_gemm *g;
    float *logits; /* captured inputs [T][E], [T][H] */
    ep_bf16 *x;
    ep_bf16 *perm, *xs, *hs, *as, *ys, *py, *ph, *pa, *partial; /* intermediates */
    int32_t *h_pad;                                             /* pinned: host-padding counts */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
} layer;

static void layer_create(layer *l, const char *name, int64_t perm_cap, int64_t cap) {
    memset(l, 0, sizeof *l);
    l->name = name;
    CUDA_CHECK(ep_layout_create(&l->L, 1, 0, K, E, T, PAD, perm_cap, NULL, NULL, NULL));
    l->perm_cap = l->L.perm_cap;
    l->cap = cap;
    int ntok = T;
    up(l->L.ntok, &ntok, sizeof ntok);
    l->g = ep_gemm_create(EP_GEMM_LOOP, E); /* the grouped call copies pageable host memory */
    if (!l->g) REF_DIE("ep_gemm_create");
    size_t pr = (size_t)l->perm_cap, sr = (size_t)E * cap;
    l->logits = dalloc((size_t)T * E * 4);
    l->x = dalloc((size_t)T * H * 2);
    l->perm = dalloc(pr * H * 2);
    l->py = dalloc(pr * H * 2);
    l->ph = dalloc(pr * 2 * F * 2);
    l->pa = dalloc(pr * F * 2);
    l->xs = dalloc(sr * H * 2);
    l->hs = dalloc(sr * 2 * F * 2);
    l->as = dalloc(sr * F * 2);
    l->ys = dalloc(sr * H * 2);
    l->partial = dalloc((size_t)T * H * 2);
    CUDA_CHECK(cudaMallocHost((void **)&l->h_pad, E * sizeof(int32_t)));
}

static void layer_destroy(layer *l) {
    if (l->exec) cudaGraphExecDestroy(l->exec);
    if (l->graph) cudaGraphDestroy(l->graph);
    ep_layout_destroy(&l->L);
    ep_gemm_destroy(l->g);
    void *bufs[] = {l->logits, l->x,  l->perm, l->py, l->ph,     l->pa,
                    l->xs,     l->hs, l->as,   l->ys, l->partial};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaFree(bufs[i]);
    cudaFreeHost(l->h_pad);
}

/* Every intermediate to NaN (bf16, float) or -1 (int32), on st. */
static void poison(layer *l, cudaStream_t st) {
    const ep_layout *L = &l->L;
    size_t pr = (size_t)l->perm_cap, sr = (size_t)E * l->cap, tk = (size_t)T * K;
    struct {
        void *p;
        size_t n;
    } b[] = {{l->perm, pr * H * 2},    {l->py, pr * H * 2},    {l->ph, pr * 2 * F * 2},
             {l->pa, pr * F * 2},      {l->xs, sr * H * 2},    {l->hs, sr * 2 * F * 2},
             {l->as, sr * F * 2},      {l->ys, sr * H * 2},    {l->partial, (size_t)T * H * 2},
             {L->topk_idx, tk * 4},    {L->topk_prob, tk * 4}, {L->epos, tk * 4},
             {L->didx, (size_t)T * 4}, {L->exp_padded, E * 4}, {L->exp_off, (E + 1) * 4},
             {L->totals, 3 * 4}};
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        CUDA_CHECK(cudaMemsetAsync(b[i].p, 0xff, b[i].n, st));
}

/* The forward; returns NULL, or the text of the first failing call with *err set (no exit, so a
 * failed capture can be reported). */
#define STEP(call)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            *err = e_;                                                                             \
            return #call;                                                                          \
        }                                                                                          \
    } while (0)
#define STEP_OK(call)                                                                              \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            *err = cudaGetLastError();                                                             \
            if (*err == cudaSuccess) *err = cudaErrorUnknown;                                      \
            return #call;                                                                          \
        }                                                                                          \
    } while (0)

static const char *forward(layer *l, int host_pad, ep_bf16 *out, cudaError_t *err,
                           cudaStream_t st) {
    ep_layout *L = &l->L;
    ep_router_params p = {T, E, K, 0, 0, 0};
    STEP(ep_router(l->logits, NULL, p, L->topk_idx, L->topk_prob, st));
    STEP(ep_layout_compute(L, st));
    /* EP=1: the rank's own rows are read from x (no staging) */
    STEP(ep_permute(L, l->x, l->perm, H, 0, NULL, 0, NULL, l->x, st));
    if (host_pad) {
        /* host padding: the GEMMs are sized from counts copied to the host */
        STEP(cudaMemcpyAsync(l->h_pad, L->exp_padded, E * sizeof(int32_t), cudaMemcpyDeviceToHost,
                             st));
        STEP(cudaStreamSynchronize(st));
        int64_t rows[E], off = 0;
        for (int e = 0; e < E; e++) { /* clipped to the budget, as the permute drops */
            int64_t n = l->h_pad[e], room = l->perm_cap - off;
            rows[e] = n < room ? n : (room > 0 ? room : 0);
            off += rows[e];
        }
        ep_mlp_shape s = {E, H, F, rows};
        STEP_OK(ep_mlp_forward(l->g, s, l->perm, dW1, dW2, l->ph, l->pa, l->py, st));
    } else {
        int64_t rows[E];
        for (int e = 0; e < E; e++)
            rows[e] = l->cap;
        ep_mlp_shape s = {E, H, F, rows};
        STEP(ep_perm_to_slots(L, l->perm, l->xs, H, l->cap, st));
        STEP_OK(ep_mlp_forward(l->g, s, l->xs, dW1, dW2, l->hs, l->as, l->ys, st));
        STEP(ep_slots_to_perm(L, l->ys, l->py, H, l->cap, st));
    }
    STEP(ep_combine_partial(L, l->py, l->partial, H, 1, st));
    STEP(ep_combine_reduce(L, l->partial, out, H, NULL, 0, NULL, st));
    return NULL;
}

static void forward_or_die(layer *l, int host_pad, ep_bf16 *out, cudaStream_t st) {
    cudaError_t e = cudaSuccess;
    const char *bad = forward(l, host_pad, out, &e, st);
    if (bad) REF_DIE("%s: eager forward: %s: %s", l->name, bad, cudaGetErrorString(e));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

static void capture(layer *l, ep_bf16 *out, cudaStream_t st) {
    cudaError_t e = cudaSuccess;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    const char *bad = forward(l, 0, out, &e, st);
    cudaError_t ee = cudaStreamEndCapture(st, &l->graph);
    if (bad) REF_DIE("%s: capture: %s: %s", l->name, bad, cudaGetErrorString(e));
    if (ee != cudaSuccess) REF_DIE("%s: cudaStreamEndCapture: %s", l->name, cudaGetErrorString(ee));
    size_t nodes = 0;
    CUDA_CHECK(cudaGraphGetNodes(l->graph, NULL, &nodes));
    CUDA_CHECK(cudaGraphInstantiate(&l->exec, l->graph, 0));
    printf("%s: captured %zu graph nodes (budget %lld rows, %lld slot rows per expert)\n", l->name,
           nodes, (long long)l->perm_cap, (long long)l->cap);
}

static void down_bf(float *h, const ep_bf16 *d, size_t n, ep_bf16 *raw) {
    CUDA_CHECK(cudaMemcpy(raw, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        h[i] = bf2f(raw[i]);
}
static void totals(layer *l, int32_t t[3]) {
    CUDA_CHECK(cudaMemcpy(t, l->L.totals, 3 * sizeof(int32_t), cudaMemcpyDeviceToHost));
}

/* Fresh inputs into the captured input buffers; host copies kept for the CPU reference. */
static void new_inputs(layer *l, float *lg, float *x) {
    ep_bf16 *xb = malloc((size_t)T * H * 2);
    for (size_t i = 0; i < (size_t)T * E; i++)
        lg[i] = 3 * urand();
    for (size_t i = 0; i < (size_t)T * H; i++) {
        xb[i] = f2bf(urand());
        x[i] = bf2f(xb[i]);
    }
    up(l->logits, lg, (size_t)T * E * 4);
    up(l->x, xb, (size_t)T * H * 2);
    free(xb);
}

/* out = sum_j prob_j * MLP_{e_j}(x), float. */
static void cpu_forward(const float *lg, const float *x, float *out) {
    int32_t idx[T * K];
    float prob[T * K], h[2 * F], a[F], y[H];
    ep_router_params p = {T, E, K, 0, 0, 0};
    ref_router(lg, NULL, p, idx, prob);
    memset(out, 0, sizeof(float) * T * H);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K; j++) {
            int e = idx[t * K + j];
            ref_mlp_fwd(1, H, F, x + (size_t)t * H, hW1 + (size_t)e * H * 2 * F,
                        hW2 + (size_t)e * F * H, h, a, y);
            for (int i = 0; i < H; i++)
                out[(size_t)t * H + i] += prob[t * K + j] * y[i];
        }
}

/* Replay vs eager: bitwise count, max abs diff, rel err; fails past a bf16 tolerance. */
static void compare(const char *what, const ep_bf16 *a, const ep_bf16 *b, size_t n) {
    size_t differ = 0, first = n;
    float fa = 0, fb = 0, maxabs = 0;
    float *xa = malloc(n * 4), *xb = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        xa[i] = bf2f(a[i]);
        xb[i] = bf2f(b[i]);
        if (a[i] != b[i]) {
            if (!differ++) first = i, fa = xa[i], fb = xb[i];
            float d = fabsf(xa[i] - xb[i]);
            if (!(d <= maxabs)) maxabs = d; /* NaN sticks */
        }
    }
    double err = rel_err(xa, xb, n);
    if (differ)
        printf("NOTE %s: %zu of %zu values not bitwise equal (first [%zu]: %g vs %g), max abs "
               "%.3e, rel err %.3e\n",
               what, differ, n, first, fa, fb, maxabs, err);
    EXPECT(err < 1e-2, "%s: rel err %.3e, %zu values differ, max abs %.3e", what, err, differ,
           maxabs);
    free(xa), free(xb);
}

/* Eager then replay on the same fresh inputs; checks as in the header comment. */
static void replay_round(layer *l, int round, ep_bf16 *d_eager, ep_bf16 *d_graph, int expect_ovf,
                         cudaStream_t st) {
    const size_t n = (size_t)T * H;
    float *lg = malloc((size_t)T * E * 4), *x = malloc(n * 4), *ref = malloc(n * 4),
          *ge = malloc(n * 4);
    ep_bf16 *re = malloc(n * 2), *rg = malloc(n * 2);
    new_inputs(l, lg, x);
    CUDA_CHECK(cudaMemsetAsync(d_eager, 0xff, n * 2, st));
    poison(l, st);
    forward_or_die(l, 0, d_eager, st);
    int32_t te[3], tg[3];
    totals(l, te);
    down_bf(ge, d_eager, n, re);
    poison(l, st);
    CUDA_CHECK(cudaMemsetAsync(d_graph, 0xff, n * 2, st));
    CUDA_CHECK(cudaGraphLaunch(l->exec, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    totals(l, tg);
    CUDA_CHECK(cudaMemcpy(rg, d_graph, n * 2, cudaMemcpyDeviceToHost));
    char what[96];
    snprintf(what, sizeof what, "%s replay %d vs eager", l->name, round);
    compare(what, rg, re, n);
    EXPECT(te[1] == tg[1] && te[2] == tg[2],
           "%s replay %d: totals (permuted rows, overflow) eager (%d, %d), replay (%d, %d)",
           l->name, round, te[1], te[2], tg[1], tg[2]);
    EXPECT(tg[2] == expect_ovf, "%s replay %d: overflow flag %d, expected %d (%d permuted rows)",
           l->name, round, tg[2], expect_ovf, tg[1]);
    if (!expect_ovf) {
        cpu_forward(lg, x, ref);
        double err = rel_err(ge, ref, n);
        EXPECT(err < 3e-2, "%s round %d: eager forward vs CPU rel err %.3e", l->name, round, err);
    }
    free(lg), free(x), free(ref), free(ge), free(re), free(rg);
}

/* Host padding: runs eagerly and agrees with device padding, but its capture must fail. */
static void test_host_padding(layer *l, ep_bf16 *d_dev, ep_bf16 *d_host, cudaStream_t st) {
    const size_t n = (size_t)T * H;
    float *lg = malloc((size_t)T * E * 4), *x = malloc(n * 4);
    ep_bf16 *rd = malloc(n * 2), *rh = malloc(n * 2);
    new_inputs(l, lg, x);
    forward_or_die(l, 0, d_dev, st);
    CUDA_CHECK(cudaMemsetAsync(d_host, 0xff, n * 2, st));
    forward_or_die(l, 1, d_host, st);
    CUDA_CHECK(cudaMemcpy(rd, d_dev, n * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(rh, d_host, n * 2, cudaMemcpyDeviceToHost));
    compare("host padding (eager) vs device padding (eager)", rh, rd, n);

    cudaError_t e = cudaSuccess;
    cudaGraph_t g = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    const char *bad = forward(l, 1, d_host, &e, st);
    cudaError_t ee = cudaStreamEndCapture(st, &g);
    cudaError_t last = cudaGetLastError(); /* clear the (non-sticky) capture error */
    EXPECT(bad || ee != cudaSuccess,
           "host padding was captured without an error: the test cannot tell a capturable layer "
           "from one that is not");
    if (bad || ee != cudaSuccess)
        printf("host padding: capture fails as it must: %s -> %s; end capture -> %s\n",
               bad ? bad : "(every call accepted)", cudaGetErrorString(e), cudaGetErrorString(ee));
    (void)last;
    if (g) cudaGraphDestroy(g);
    enum cudaStreamCaptureStatus cs;
    CUDA_CHECK(cudaStreamIsCapturing(st, &cs));
    EXPECT(cs == cudaStreamCaptureStatusNone, "stream still capturing after the failed capture");
    free(lg), free(x), free(rd), free(rh);
}

int main(void) {
    gpu_count_or_skip(1);
    uint64_t seed = (uint64_t)time(NULL);
    ep_rng_seed(&rng, seed);
    printf("test_graph: seed %llu\n", (unsigned long long)seed);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (size_t i = 0; i < sizeof hW1 / sizeof *hW1; i++)
        hW1[i] = bf2f(f2bf(0.2f * urand()));
    for (size_t i = 0; i < sizeof hW2 / sizeof *hW2; i++)
        hW2[i] = bf2f(f2bf(0.2f * urand()));
    ep_bf16 *b1 = malloc(sizeof hW1 / 2), *b2 = malloc(sizeof hW2 / 2);
    for (size_t i = 0; i < sizeof hW1 / sizeof *hW1; i++)
        b1[i] = f2bf(hW1[i]);
    for (size_t i = 0; i < sizeof hW2 / sizeof *hW2; i++)
        b2[i] = f2bf(hW2[i]);
    dW1 = dalloc(sizeof hW1 / 2);
    dW2 = dalloc(sizeof hW2 / 2);
    up(dW1, b1, sizeof hW1 / 2);
    up(dW2, b2, sizeof hW2 / 2);
    free(b1), free(b2);
    ep_bf16 *out_e = dalloc((size_t)T * H * 2), *out_g = dalloc((size_t)T * H * 2);

    /* The budget: 624 rows, 8 under the layout's generic worst case (T*K + E*(PAD-1) = 632) and
     * exactly the worst case here: the T*K = 512 selections all land on this rank, so the pad gaps
     * sum to a multiple of PAD below E*(PAD-1), at most 112. Slots: 128 rows per expert, twice the
     * mean count (64, sd ~7). */
    layer tight, small_budget, small_cap;
    layer_create(&tight, "budget", (int64_t)T * K + E * (PAD - 1) - 8, 128);
    layer_create(&small_budget, "overflowing budget", 200, 128); /* < T*K: always overflows */
    layer_create(&small_cap, "overflowing slots", 0, 16);        /* 16 < any expert's count */
    layer *ls[] = {&tight, &small_budget, &small_cap};
    int ovf[] = {0, 1, 1};
    for (int i = 0; i < 3; i++) {
        float *lg = malloc((size_t)T * E * 4), *x = malloc((size_t)T * H * 4);
        new_inputs(ls[i], lg, x);
        forward_or_die(ls[i], 0, out_e, st); /* warm-up: cuBLAS and kernels loaded, not captured */
        capture(ls[i], out_g, st);
        free(lg), free(x);
        for (int r = 0; r < (i ? 2 : REPLAYS); r++)
            replay_round(ls[i], r, out_e, out_g, ovf[i], st);
    }
    test_host_padding(&tight, out_e, out_g, st);
    replay_round(&tight, REPLAYS, out_e, out_g, 0, st); /* the graph still replays afterwards */

    for (int i = 0; i < 3; i++)
        layer_destroy(ls[i]);
    cudaFree(out_e), cudaFree(out_g), cudaFree(dW1), cudaFree(dW2);
    CUDA_CHECK(cudaStreamDestroy(st));
    printf("test_graph: %s (%d failures)\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
