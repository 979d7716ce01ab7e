// expert: cuBLAS GEMMs of the expert MLP (see ep_expert.h for shapes and modes).
#include <cstdlib>
#include <vector>
#include <cublas_v2.h>
#include "ep_expert.h"
#include "kcommon.cuh"

#define GCHECK_CUDA(call)                                                                          \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "ep_expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
                    cudaGetErrorString(e_));                                                       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define GCHECK_BLAS(call)                                                                          \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "ep_expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
                    cublasGetStatusString(s_));                                                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

constexpr int NSTREAMS = 4;

struct ep_gemm {
    cublasHandle_t h;
    ep_gemm_mode mode;
    int max_groups;
    void **d_ptrs; // [3][max_groups] device pointer arrays of the grouped call
    cudaStream_t streams[NSTREAMS];
    cudaEvent_t fork, join[NSTREAMS];
    void *workspace[NSTREAMS + 1];
};

namespace {

constexpr size_t WORKSPACE = 32u << 20;

// Row-major C[M][N] = op(A) op(B) as column-major C^T = op(B)^T op(A)^T.
struct ColMajor {
    cublasOperation_t opa, opb;
    int m, n, k, lda, ldb, ldc;
};
ColMajor colmajor(int transA, int transB, int64_t M, int64_t N, int64_t K) {
    ColMajor c;
    c.opa = transB ? CUBLAS_OP_T : CUBLAS_OP_N; // first operand is B
    c.opb = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    c.m = (int)N;
    c.n = (int)M;
    c.k = (int)K;
    c.lda = transB ? (int)K : (int)N;
    c.ldb = transA ? (int)M : (int)K;
    c.ldc = (int)N;
    return c;
}

int one_gemm(cublasHandle_t h, int transA, int transB, int64_t M, int64_t N, int64_t K,
             const ep_bf16 *A, const ep_bf16 *B, ep_bf16 *C, float beta, cudaStream_t st) {
    if (M == 0 || N == 0) return 0;
    if (K == 0 && beta == 0.f) { // BLAS leaves C * beta; make the zero explicit
        GCHECK_CUDA(cudaMemsetAsync(C, 0, (size_t)M * N * 2, st));
        return 0;
    }
    ColMajor c = colmajor(transA, transB, M, N, K);
    float alpha = 1.f;
    GCHECK_BLAS(cublasSetStream(h, st));
    GCHECK_BLAS(cublasGemmEx(h, c.opa, c.opb, c.m, c.n, c.k, &alpha, B, CUDA_R_16BF, c.lda, A,
                             CUDA_R_16BF, c.ldb, &beta, C, CUDA_R_16BF, c.ldc, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
    return 0;
}

} // namespace

extern "C" ep_gemm *ep_gemm_create(ep_gemm_mode mode, int max_groups) {
    ep_gemm *g = static_cast<ep_gemm *>(calloc(1, sizeof(ep_gemm)));
    if (!g) return nullptr;
    g->mode = mode;
    g->max_groups = max_groups;
    bool ok = cublasCreate(&g->h) == CUBLAS_STATUS_SUCCESS &&
              cudaMalloc(&g->d_ptrs, 3 * (size_t)max_groups * sizeof(void *)) == cudaSuccess &&
              cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming) == cudaSuccess;
    for (int i = 0; ok && i < NSTREAMS; i++)
        ok = cudaStreamCreateWithFlags(&g->streams[i], cudaStreamNonBlocking) == cudaSuccess &&
             cudaEventCreateWithFlags(&g->join[i], cudaEventDisableTiming) == cudaSuccess;
    for (int i = 0; ok && i <= NSTREAMS; i++) // a workspace per stream keeps them independent
        ok = cudaMalloc(&g->workspace[i], WORKSPACE) == cudaSuccess;
    if (!ok) {
        fprintf(stderr, "ep_expert: cannot create the cuBLAS handle, streams or buffers\n");
        ep_gemm_destroy(g);
        return nullptr;
    }
    return g;
}

extern "C" void ep_gemm_destroy(ep_gemm *g) {
    if (!g) return;
    if (g->h) cublasDestroy(g->h);
    cudaFree(g->d_ptrs);
    for (int i = 0; i < NSTREAMS; i++) {
        if (g->streams[i]) cudaStreamDestroy(g->streams[i]);
        if (g->join[i]) cudaEventDestroy(g->join[i]);
    }
    for (int i = 0; i <= NSTREAMS; i++)
        cudaFree(g->workspace[i]);
    if (g->fork) cudaEventDestroy(g->fork);
    free(g);
}

extern "C" void ep_gemm_set_mode(ep_gemm *g, ep_gemm_mode mode) {
    g->mode = mode;
}

extern "C" const char *ep_gemm_mode_name(ep_gemm_mode mode) {
    switch (mode) {
    case EP_GEMM_GROUPED:
        return "grouped";
    case EP_GEMM_STREAMS:
        return "streams";
    case EP_GEMM_LOOP:
        return "loop";
    }
    return "?";
}

extern "C" int ep_gemm_rm(ep_gemm *g, int transA, int transB, int64_t M, int64_t N, int64_t K,
                          const ep_bf16 *A, const ep_bf16 *B, ep_bf16 *C, float beta,
                          cudaStream_t st) {
    GCHECK_BLAS(cublasSetWorkspace(g->h, g->workspace[NSTREAMS], WORKSPACE));
    return one_gemm(g->h, transA, transB, M, N, K, A, B, C, beta, st);
}

extern "C" int ep_gemm_group(ep_gemm *g, int n, int transA, int transB, const int64_t *M,
                             const int64_t *N, const int64_t *K, const ep_bf16 *const *A,
                             const ep_bf16 *const *B, ep_bf16 *const *C, float beta,
                             cudaStream_t st) {
    if (n > g->max_groups) {
        fprintf(stderr, "ep_expert: %d groups, at most %d\n", n, g->max_groups);
        return 1;
    }
    if (g->mode == EP_GEMM_LOOP) {
        GCHECK_BLAS(cublasSetWorkspace(g->h, g->workspace[NSTREAMS], WORKSPACE));
        for (int i = 0; i < n; i++)
            if (one_gemm(g->h, transA, transB, M[i], N[i], K[i], A[i], B[i], C[i], beta, st))
                return 1;
        return 0;
    }
    if (g->mode == EP_GEMM_STREAMS) {
        GCHECK_CUDA(cudaEventRecord(g->fork, st));
        for (int s = 0; s < NSTREAMS; s++)
            GCHECK_CUDA(cudaStreamWaitEvent(g->streams[s], g->fork, 0));
        for (int i = 0; i < n; i++) {
            int s = i % NSTREAMS;
            GCHECK_BLAS(cublasSetWorkspace(g->h, g->workspace[s], WORKSPACE));
            if (one_gemm(g->h, transA, transB, M[i], N[i], K[i], A[i], B[i], C[i], beta,
                         g->streams[s]))
                return 1;
        }
        for (int s = 0; s < NSTREAMS; s++) {
            GCHECK_CUDA(cudaEventRecord(g->join[s], g->streams[s]));
            GCHECK_CUDA(cudaStreamWaitEvent(st, g->join[s], 0));
        }
        return 0;
    }
    // Grouped: one group per expert (group_size 1), pointer arrays copied to the device.
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> m, nn, k, lda, ldb, ldc, gs;
    std::vector<float> alpha, bet;
    std::vector<const void *> pa, pb;
    std::vector<void *> pc;
    GCHECK_BLAS(cublasSetWorkspace(g->h, g->workspace[NSTREAMS], WORKSPACE));
    for (int i = 0; i < n; i++) {
        if (M[i] == 0 || N[i] == 0) continue;
        if (K[i] == 0) {
            if (one_gemm(g->h, transA, transB, M[i], N[i], 0, A[i], B[i], C[i], beta, st)) return 1;
            continue;
        }
        ColMajor c = colmajor(transA, transB, M[i], N[i], K[i]);
        ta.push_back(c.opa);
        tb.push_back(c.opb);
        m.push_back(c.m);
        nn.push_back(c.n);
        k.push_back(c.k);
        lda.push_back(c.lda);
        ldb.push_back(c.ldb);
        ldc.push_back(c.ldc);
        gs.push_back(1);
        alpha.push_back(1.f);
        bet.push_back(beta);
        pa.push_back(B[i]);
        pb.push_back(A[i]);
        pc.push_back(C[i]);
    }
    int cnt = (int)m.size();
    if (cnt == 0) return 0;
    std::vector<void *> ptrs(3 * (size_t)cnt);
    for (int i = 0; i < cnt; i++) {
        ptrs[i] = const_cast<void *>(pa[i]);
        ptrs[cnt + i] = const_cast<void *>(pb[i]);
        ptrs[2 * cnt + i] = pc[i];
    }
    // Pageable source: the copy is complete when the call returns, so `ptrs` may go away.
    GCHECK_CUDA(cudaMemcpyAsync(g->d_ptrs, ptrs.data(), ptrs.size() * sizeof(void *),
                                cudaMemcpyHostToDevice, st));
    void **d = g->d_ptrs;
    GCHECK_BLAS(cublasSetStream(g->h, st));
    GCHECK_BLAS(cublasGemmGroupedBatchedEx(
        g->h, ta.data(), tb.data(), m.data(), nn.data(), k.data(), alpha.data(),
        (const void *const *)d, CUDA_R_16BF, lda.data(), (const void *const *)(d + cnt),
        CUDA_R_16BF, ldb.data(), bet.data(), d + 2 * cnt, CUDA_R_16BF, ldc.data(), cnt, gs.data(),
        CUBLAS_COMPUTE_32F));
    return 0;
}

namespace {
struct Groups {
    std::vector<int64_t> M, N, K;
    std::vector<const ep_bf16 *> A, B;
    std::vector<ep_bf16 *> C;
};
} // namespace

// Row blocks of the permuted buffers: expert e starts at sum of rows[<e].
extern "C" int ep_mlp_forward(ep_gemm *g, ep_mlp_shape s, const ep_bf16 *x, const ep_bf16 *W1,
                              const ep_bf16 *W2, ep_bf16 *h, ep_bf16 *a, ep_bf16 *y,
                              cudaStream_t st) {
    Groups f1, f2;
    int64_t off = 0, total = 0;
    for (int e = 0; e < s.ne; e++) {
        int64_t m = s.rows[e];
        f1.M.push_back(m), f1.N.push_back(2 * s.F), f1.K.push_back(s.H);
        f1.A.push_back(x + off * s.H), f1.B.push_back(W1 + (size_t)e * s.H * 2 * s.F);
        f1.C.push_back(h + off * 2 * s.F);
        f2.M.push_back(m), f2.N.push_back(s.H), f2.K.push_back(s.F);
        f2.A.push_back(a + off * s.F), f2.B.push_back(W2 + (size_t)e * s.F * s.H);
        f2.C.push_back(y + off * s.H);
        off += m;
    }
    total = off;
    if (ep_gemm_group(g, s.ne, 0, 0, f1.M.data(), f1.N.data(), f1.K.data(), f1.A.data(),
                      f1.B.data(), f1.C.data(), 0.f, st))
        return 1;
    GCHECK_CUDA(ep_swiglu_fwd(h, a, total, s.F, st));
    return ep_gemm_group(g, s.ne, 0, 0, f2.M.data(), f2.N.data(), f2.K.data(), f2.A.data(),
                         f2.B.data(), f2.C.data(), 0.f, st);
}

extern "C" int ep_mlp_dgrad(ep_gemm *g, ep_mlp_shape s, const ep_bf16 *dy, const ep_bf16 *h,
                            const ep_bf16 *W1, const ep_bf16 *W2, ep_bf16 *da, ep_bf16 *dh,
                            ep_bf16 *dx, cudaStream_t st) {
    Groups g2, g1;
    int64_t off = 0;
    for (int e = 0; e < s.ne; e++) {
        int64_t m = s.rows[e];
        g2.M.push_back(m), g2.N.push_back(s.F), g2.K.push_back(s.H); // da = dy W2^T
        g2.A.push_back(dy + off * s.H), g2.B.push_back(W2 + (size_t)e * s.F * s.H);
        g2.C.push_back(da + off * s.F);
        g1.M.push_back(m), g1.N.push_back(s.H), g1.K.push_back(2 * s.F); // dx = dh W1^T
        g1.A.push_back(dh + off * 2 * s.F), g1.B.push_back(W1 + (size_t)e * s.H * 2 * s.F);
        g1.C.push_back(dx + off * s.H);
        off += m;
    }
    if (ep_gemm_group(g, s.ne, 0, 1, g2.M.data(), g2.N.data(), g2.K.data(), g2.A.data(),
                      g2.B.data(), g2.C.data(), 0.f, st))
        return 1;
    GCHECK_CUDA(ep_swiglu_bwd(h, da, dh, off, s.F, st));
    return ep_gemm_group(g, s.ne, 0, 1, g1.M.data(), g1.N.data(), g1.K.data(), g1.A.data(),
                         g1.B.data(), g1.C.data(), 0.f, st);
}

extern "C" int ep_mlp_wgrad(ep_gemm *g, ep_mlp_shape s, const ep_bf16 *x, const ep_bf16 *a,
                            const ep_bf16 *dy, const ep_bf16 *dh, ep_bf16 *dW1, ep_bf16 *dW2,
                            cudaStream_t st) {
    Groups w2, w1;
    int64_t off = 0;
    for (int e = 0; e < s.ne; e++) {
        int64_t m = s.rows[e];
        w2.M.push_back(s.F), w2.N.push_back(s.H), w2.K.push_back(m); // dW2 = a^T dy
        w2.A.push_back(a + off * s.F), w2.B.push_back(dy + off * s.H);
        w2.C.push_back(dW2 + (size_t)e * s.F * s.H);
        w1.M.push_back(s.H), w1.N.push_back(2 * s.F), w1.K.push_back(m); // dW1 = x^T dh
        w1.A.push_back(x + off * s.H), w1.B.push_back(dh + off * 2 * s.F);
        w1.C.push_back(dW1 + (size_t)e * s.H * 2 * s.F);
        off += m;
    }
    if (ep_gemm_group(g, s.ne, 1, 0, w2.M.data(), w2.N.data(), w2.K.data(), w2.A.data(),
                      w2.B.data(), w2.C.data(), 0.f, st))
        return 1;
    return ep_gemm_group(g, s.ne, 1, 0, w1.M.data(), w1.N.data(), w1.K.data(), w1.A.data(),
                         w1.B.data(), w1.C.data(), 0.f, st);
}
