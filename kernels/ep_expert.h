/* ep_expert: the expert MLP's GEMMs through cuBLAS (bf16 in/out, fp32 accumulate), row-major.
 *
 * defines: ep_gemm (a cuBLAS handle plus the streams and pointer arrays of grouped calls),
 * ep_gemm_rm (one row-major GEMM), ep_gemm_group (one GEMM per expert, three ways), and the expert
 * MLP forward, dgrad and wgrad on the permuted (expert-grouped) rows.
 * Row-major: C[M][N] = op(A) op(B), A stored [M][K] (or [K][M] if transA), B [K][N] (or [N][K]).
 * Grouping modes: EP_GEMM_GROUPED (one call of cublasGemmGroupedBatchedEx), EP_GEMM_STREAMS (one
 * cublasGemmEx per expert over 4 streams), EP_GEMM_LOOP (one cublasGemmEx per expert on the
 * caller's stream). Which wins (docs/performance.md, "Expert GEMMs", 2 x H200, 128 local experts):
 * from 2048 tokens per rank the per-expert calls beat the grouped call 1.5-2.6x (loop 664 vs 260
 * TFLOP/s at 16384, 94% of one large GEMM); below 1024 the grouped call is ahead (up to 1.4x) but
 * all modes are far from peak there. EP_GEMM_DEFAULT is the loop: it wins at training sizes, keeps
 * every GEMM in the caller's stream order (what the EP-overlap streams rely on) and is the mode a
 * CUDA graph captures as is (the grouped call copies its pointer arrays from pageable memory).
 * NOTES: functions return 0, or non-zero after printing the failing call to stderr.
 */
#ifndef EP_EXPERT_H
#define EP_EXPERT_H

#include <stdint.h>
#include <cuda_runtime_api.h>
#include "ep_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { EP_GEMM_GROUPED, EP_GEMM_STREAMS, EP_GEMM_LOOP } ep_gemm_mode;
#define EP_GEMM_DEFAULT EP_GEMM_LOOP /* the mode to create with unless a mode is under test */
typedef struct ep_gemm ep_gemm;

ep_gemm *ep_gemm_create(ep_gemm_mode mode, int max_groups);
void ep_gemm_destroy(ep_gemm *g);
void ep_gemm_set_mode(ep_gemm *g, ep_gemm_mode mode);
const char *ep_gemm_mode_name(ep_gemm_mode mode);

/* C = alpha op(A) op(B) + beta C, row-major, on st. */
int ep_gemm_rm(ep_gemm *g, int transA, int transB, int64_t M, int64_t N, int64_t K,
               const ep_bf16 *A, const ep_bf16 *B, ep_bf16 *C, float beta, cudaStream_t st);

/* n GEMMs of the same transposes, shapes per group (host arrays); groups with M or N of 0 are
 * skipped; K == 0 writes beta*C (zeros for beta 0). */
int ep_gemm_group(ep_gemm *g, int n, int transA, int transB, const int64_t *M, const int64_t *N,
                  const int64_t *K, const ep_bf16 *const *A, const ep_bf16 *const *B,
                  ep_bf16 *const *C, float beta, cudaStream_t st);

/* Expert MLP with SwiGLU over `ne` local experts. rows[e] = padded rows of expert e (host, from
 * ep_layout's exp_padded); x, h, a, y are row blocks in permuted order; W1 [ne][H][2F],
 * W2 [ne][F][H].
 *   forward: h = x W1, a = swiglu(h), y = a W2
 *   dgrad:   da = dy W2^T, dh = swiglu'(h) da, dx = dh W1^T
 *   wgrad:   dW2 = a^T dy, dW1 = x^T dh       (separate, so it can be delayed) */
typedef struct {
    int ne, H, F;
    const int64_t *rows; /* host [ne] */
} ep_mlp_shape;
int ep_mlp_forward(ep_gemm *g, ep_mlp_shape s, const ep_bf16 *x, const ep_bf16 *W1,
                   const ep_bf16 *W2, ep_bf16 *h, ep_bf16 *a, ep_bf16 *y, cudaStream_t st);
int ep_mlp_dgrad(ep_gemm *g, ep_mlp_shape s, const ep_bf16 *dy, const ep_bf16 *h, const ep_bf16 *W1,
                 const ep_bf16 *W2, ep_bf16 *da, ep_bf16 *dh, ep_bf16 *dx, cudaStream_t st);
int ep_mlp_wgrad(ep_gemm *g, ep_mlp_shape s, const ep_bf16 *x, const ep_bf16 *a, const ep_bf16 *dy,
                 const ep_bf16 *dh, ep_bf16 *dW1, ep_bf16 *dW2, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
