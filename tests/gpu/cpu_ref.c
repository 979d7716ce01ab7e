/* cpu_ref: CPU references of the MoE kernels (see cpu_ref.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "cpu_ref.h"

float bf2f(ep_bf16 v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

ep_bf16 f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (isnan(f)) return 0x7fc0;
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (ep_bf16)(u >> 16);
}

static int better(float v, int e, float bv, int be) {
    return v > bv || (v == bv && e < be);
}

void ref_router(const float *logits, const float *bias, ep_router_params p, int32_t *idx,
                float *prob) {
    int E = p.num_experts;
    float *sel = malloc(sizeof(float) * E), *score = malloc(sizeof(float) * E);
    for (int t = 0; t < p.num_tokens; t++) {
        for (int e = 0; e < E; e++) {
            float l = logits[(size_t)t * E + e];
            score[e] = p.sigmoid ? 1.f / (1.f + expf(-l)) : l;
            sel[e] = score[e] + (bias ? bias[e] : 0.f);
        }
        if (p.num_groups > 1) {
            int per = E / p.num_groups, m = p.topk / p.group_topk;
            if (m < 1) m = 1;
            float gs[1024];
            int keep[1024] = {0};
            for (int g = 0; g < p.num_groups; g++) {
                float tmp[1024];
                memcpy(tmp, sel + g * per, sizeof(float) * per);
                gs[g] = 0;
                for (int r = 0; r < m; r++) {
                    int bi = -1;
                    for (int i = 0; i < per; i++)
                        if (tmp[i] != -INFINITY && (bi < 0 || tmp[i] > tmp[bi])) bi = i;
                    gs[g] += tmp[bi];
                    tmp[bi] = -INFINITY;
                }
            }
            for (int r = 0; r < p.group_topk; r++) {
                int bg = -1;
                for (int g = 0; g < p.num_groups; g++)
                    if (!keep[g] && (bg < 0 || better(gs[g], g, gs[bg], bg))) bg = g;
                keep[bg] = 1;
            }
            for (int g = 0; g < p.num_groups; g++)
                if (!keep[g])
                    for (int e = g * per; e < (g + 1) * per; e++)
                        sel[e] = -3.4028235e38f;
        }
        float ch[32], mx = -INFINITY, sum = 0;
        for (int j = 0; j < p.topk; j++) {
            int be = -1;
            for (int e = 0; e < E; e++)
                if (sel[e] != -INFINITY && (be < 0 || better(sel[e], e, sel[be], be))) be = e;
            sel[be] = -INFINITY;
            idx[(size_t)t * p.topk + j] = be;
            ch[j] = score[be];
            mx = fmaxf(mx, ch[j]);
        }
        for (int j = 0; j < p.topk; j++) {
            ch[j] = p.sigmoid ? ch[j] : expf(ch[j] - mx);
            sum += ch[j];
        }
        for (int j = 0; j < p.topk; j++)
            prob[(size_t)t * p.topk + j] = ch[j] / sum;
    }
    free(sel);
    free(score);
}

int64_t ref_layout(int ep, int me, int E, int k, int max_tokens, const int32_t *ntok,
                   const int32_t *idx, int pad, int32_t *pos, int32_t *rows_per_expert) {
    int Ep = E / ep;
    int64_t off = 0;
    for (size_t i = 0; i < (size_t)ep * max_tokens * k; i++)
        pos[i] = -1;
    for (int e = 0; e < Ep; e++) {
        int n = 0;
        for (int s = 0; s < ep; s++)
            for (int t = 0; t < ntok[s]; t++)
                for (int j = 0; j < k; j++) {
                    size_t g = ((size_t)s * max_tokens + t) * k + j;
                    if (idx[g] == me * Ep + e) pos[g] = (int32_t)(off + n++);
                }
        int padded = (n + pad - 1) / pad * pad;
        rows_per_expert[e] = padded;
        off += padded;
    }
    return off;
}

static float silu(float g) {
    return g / (1.f + expf(-g));
}

void ref_mlp_fwd(int m, int H, int F, const float *x, const float *W1, const float *W2, float *h,
                 float *a, float *y) {
    for (int r = 0; r < m; r++) {
        for (int c = 0; c < 2 * F; c++) {
            double s = 0;
            for (int i = 0; i < H; i++)
                s += (double)x[(size_t)r * H + i] * W1[(size_t)i * 2 * F + c];
            h[(size_t)r * 2 * F + c] = (float)s;
        }
        for (int c = 0; c < F; c++)
            a[(size_t)r * F + c] = silu(h[(size_t)r * 2 * F + c]) * h[(size_t)r * 2 * F + F + c];
        for (int c = 0; c < H; c++) {
            double s = 0;
            for (int i = 0; i < F; i++)
                s += (double)a[(size_t)r * F + i] * W2[(size_t)i * H + c];
            y[(size_t)r * H + c] = (float)s;
        }
    }
}

void ref_mlp_bwd(int m, int H, int F, const float *x, const float *W1, const float *W2,
                 const float *h, const float *a, const float *dy, float *dx, float *dW1,
                 float *dW2) {
    float *dh = calloc((size_t)m * 2 * F, sizeof *dh);
    for (int r = 0; r < m; r++)
        for (int c = 0; c < F; c++) {
            double da = 0;
            for (int i = 0; i < H; i++)
                da += (double)dy[(size_t)r * H + i] * W2[(size_t)c * H + i];
            float g = h[(size_t)r * 2 * F + c], u = h[(size_t)r * 2 * F + F + c];
            float s = 1.f / (1.f + expf(-g));
            dh[(size_t)r * 2 * F + c] = (float)(da * u * s * (1 + g * (1 - s)));
            dh[(size_t)r * 2 * F + F + c] = (float)(da * silu(g));
        }
    for (int r = 0; r < m; r++)
        for (int i = 0; i < H; i++) {
            double s = 0;
            for (int c = 0; c < 2 * F; c++)
                s += (double)dh[(size_t)r * 2 * F + c] * W1[(size_t)i * 2 * F + c];
            dx[(size_t)r * H + i] = (float)s;
        }
    for (int i = 0; i < F; i++)
        for (int c = 0; c < H; c++) {
            double s = 0;
            for (int r = 0; r < m; r++)
                s += (double)a[(size_t)r * F + i] * dy[(size_t)r * H + c];
            dW2[(size_t)i * H + c] = (float)s;
        }
    for (int i = 0; i < H; i++)
        for (int c = 0; c < 2 * F; c++) {
            double s = 0;
            for (int r = 0; r < m; r++)
                s += (double)x[(size_t)r * H + i] * dh[(size_t)r * 2 * F + c];
            dW1[(size_t)i * 2 * F + c] = (float)s;
        }
    free(dh);
}

double rel_err(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isinf(got[i])) return INFINITY;
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int gpu_count_or_skip(int need) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < need) {
        printf("SKIP: needs %d GPU(s), found %d\n", need, n);
        exit(77);
    }
    return n;
}
