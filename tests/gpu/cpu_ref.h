/* cpu_ref: CPU references of the MoE kernels, in float/double, for the GPU tests. */
#ifndef CPU_REF_H
#define CPU_REF_H

#include <stdint.h>
#include "ep_kernels.h"

float bf2f(ep_bf16 v);
ep_bf16 f2bf(float f);

/* Router (same rules as kernels/router.cu). */
void ref_router(const float *logits, const float *bias, ep_router_params p, int32_t *idx,
                float *prob);

/* Permuted layout at rank `me` of ep: for every source s, token t < ntok[s], choice j with
 * a local expert, its row; pos[(s*max_tokens + t)*k + j] (-1 if not local). Returns the padded
 * row count; rows_per_expert[e] (padded) filled. */
int64_t ref_layout(int ep, int me, int E, int k, int max_tokens, const int32_t *ntok,
                   const int32_t *idx, int pad, int32_t *pos, int32_t *rows_per_expert);

/* Expert MLP of one expert on m rows (row-major, float):
 * h = x W1 [m][2F], a = silu(g)*u [m][F], y = a W2 [m][H]; and the backward. */
void ref_mlp_fwd(int m, int H, int F, const float *x, const float *W1, const float *W2, float *h,
                 float *a, float *y);
void ref_mlp_bwd(int m, int H, int F, const float *x, const float *W1, const float *W2,
                 const float *h, const float *a, const float *dy, float *dx, float *dW1,
                 float *dW2);

/* ||got - want|| / ||want|| over n values; NaN anywhere -> INFINITY. */
double rel_err(const float *got, const float *want, size_t n);

/* GPU test exit: 77 = skipped (no GPU, or fewer than `need` GPUs). */
int gpu_count_or_skip(int need);

#endif
