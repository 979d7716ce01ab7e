// rows: what happens to one token's row, done by one warp. Shared by the single-GPU kernels
// (permute.cu) and the NVLink kernels (nvl.cu), so both backends compute the same function.
#pragma once
#include "kcommon.cuh"

namespace epk {

// Staging row r (= roff[s][me] + didx) -> every local expert's permuted row of token (s,t),
// optionally scaled by the router probability. self_x non-NULL: this rank's own tokens (s == me)
// are read from self_x[t] instead (the NVLink dispatch does not copy them into staging).
__device__ __forceinline__ void permute_token(const ep_layout &L, int s, int t,
                                              const ep_bf16 *stage, ep_bf16 *perm, int n16,
                                              int lane, bool scale, const ep_bf16 *self_x) {
    const size_t g = (size_t)s * L.max_tokens + t;
    const int di = L.didx[g * L.ep + L.me];
    if (di < 0) return;
    // Indexed by compile-time slots only, so the arrays stay in registers.
    int rows[EP_MAX_TOPK];
    float w[EP_MAX_TOPK];
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++) {
        rows[j] = j < L.topk ? L.epos[g * L.topk + j] : -1;
        w[j] = rows[j] >= 0 ? L.topk_prob[g * L.topk + j] : 0.f;
    }
    const int4 *src = s == L.me && self_x ? reinterpret_cast<const int4 *>(self_x) + (size_t)t * n16
                                          : reinterpret_cast<const int4 *>(stage) +
                                                (size_t)(L.roff[s * L.ep + L.me] + di) * n16;
    int4 *dst = reinterpret_cast<int4 *>(perm);
    // 4 loads in flight per lane before the (up to k) stores of each.
    for (int i0 = lane; i0 < n16; i0 += 128) {
        int4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (i0 + 32 * u < n16) v[u] = ld_flagged(src + i0 + 32 * u);
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int i = i0 + 32 * u;
            if (i >= n16) break;
            float f[8];
            if (scale) bf16x8_to_f32(v[u], f);
#pragma unroll
            for (int k = 0; k < EP_MAX_TOPK; k++) {
                if (rows[k] < 0) continue;
                if (scale) {
                    float o[8];
#pragma unroll
                    for (int q = 0; q < 8; q++)
                        o[q] = f[q] * w[k];
                    dst[(size_t)rows[k] * n16 + i] = f32_to_bf16x8(o);
                } else {
                    dst[(size_t)rows[k] * n16 + i] = v[u];
                }
            }
        }
    }
}

// Sum over token (s,t)'s local experts of (prob *) expert output -> one bf16 row at dst, the
// 16-byte columns [c0, c1) of it (c1 < 0: to the end; a few tokens are split in column ranges
// over many warps, so that each warp has few dependent loads). Returns false if the token has no
// row at this rank.
__device__ __forceinline__ bool combine_token(const ep_layout &L, int s, int t,
                                              const ep_bf16 *expout, int4 *dst, int n16, int lane,
                                              bool weighted, int c0 = 0, int c1 = -1) {
    if (c1 < 0 || c1 > n16) c1 = n16;
    const size_t g = (size_t)s * L.max_tokens + t;
    if (L.didx[g * L.ep + L.me] < 0) return false;
    // The token's local rows, compacted in slot order (the sum's order is the slot order, as
    // before). Indexed by compile-time slots only, so the arrays stay in registers.
    int rows[EP_MAX_TOPK];
    float w[EP_MAX_TOPK];
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++) {
        rows[j] = -1;
        w[j] = 0.f;
    }
    int n = 0;
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++) {
        const int r = j < L.topk ? L.epos[g * L.topk + j] : -1;
        if (r < 0) continue;
        const float p = weighted ? L.topk_prob[g * L.topk + j] : 1.f;
#pragma unroll
        for (int o = 0; o <= j; o++)
            if (o == n) {
                rows[o] = r;
                w[o] = p;
            }
        n++;
    }
    // Slots past n read row rows[0] with weight 0 (an L2 hit), so the 4 loads of a group carry
    // no branch and all issue before the first use (a branch per slot serialised them).
    const int any = n > 0 ? rows[0] : 0;
#pragma unroll
    for (int j = 0; j < EP_MAX_TOPK; j++)
        if (rows[j] < 0) rows[j] = any;
    const int4 *src = reinterpret_cast<const int4 *>(expout);
    // Two columns per lane and 4 rows per group: 8 loads in flight before the first use.
    for (int i = c0 + lane; i < c1; i += 64) {
        const bool two = i + 32 < c1;
        float a0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, a1[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
        for (int k0 = 0; k0 < EP_MAX_TOPK; k0 += 4) {
            if (k0 >= n) break; // n is the same in every lane
            int4 v[4], u[4];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                v[k] = ld_nc(src + (size_t)rows[k0 + k] * n16 + i);
                u[k] = two ? ld_nc(src + (size_t)rows[k0 + k] * n16 + i + 32) : v[k];
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float f[8], h[8];
                bf16x8_to_f32(v[k], f);
                bf16x8_to_f32(u[k], h);
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    a0[q] += w[k0 + k] * f[q];
                    a1[q] += w[k0 + k] * h[q];
                }
            }
        }
        dst[i] = f32_to_bf16x8(a0);
        if (two) dst[i + 32] = f32_to_bf16x8(a1);
    }
    return true;
}

// out[t] = sum over destination ranks d of recv[coff[me][d] + didx[me][t][d]]; zeros if the
// token went nowhere. Columns [c0, c1) only (c1 < 0: to the end), as in combine_token.
__device__ __forceinline__ void reduce_token(const ep_layout &L, int t, const ep_bf16 *recv,
                                             ep_bf16 *out, int n16, int lane, int c0 = 0,
                                             int c1 = -1) {
    if (c1 < 0 || c1 > n16) c1 = n16;
    const size_t g = (size_t)L.me * L.max_tokens + t;
    int rows[EP_MAX_RANKS];
#pragma unroll
    for (int d = 0; d < EP_MAX_RANKS; d++) {
        int di = d < L.ep ? L.didx[g * L.ep + d] : -1;
        rows[d] = di >= 0 ? L.coff[L.me * L.ep + d] + di : -1;
    }
    int any = -1;
#pragma unroll
    for (int d = 0; d < EP_MAX_RANKS; d++)
        if (any < 0 && rows[d] >= 0) any = rows[d];
    float wd[EP_MAX_RANKS];
#pragma unroll
    for (int d = 0; d < EP_MAX_RANKS; d++) {
        wd[d] = rows[d] >= 0 ? 1.f : 0.f;
        if (rows[d] < 0) rows[d] = any < 0 ? 0 : any;
    }
    const int4 *src = reinterpret_cast<const int4 *>(recv);
    int4 *dst = reinterpret_cast<int4 *>(out) + (size_t)t * n16;
    for (int i = c0 + lane; i < c1; i += 32) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (any >= 0) {
            int4 v[EP_MAX_RANKS];
#pragma unroll
            for (int d = 0; d < EP_MAX_RANKS; d++)
                if (d < L.ep) v[d] = ld_flagged(src + (size_t)rows[d] * n16 + i);
#pragma unroll
            for (int d = 0; d < EP_MAX_RANKS; d++) {
                if (d >= L.ep) break;
                float f[8];
                bf16x8_to_f32(v[d], f);
#pragma unroll
                for (int q = 0; q < 8; q++)
                    acc[q] += wd[d] * f[q];
            }
        }
        dst[i] = f32_to_bf16x8(acc);
    }
}

// Zeroes the pad gap rows [exp_off[e] + count, exp_off[e] + padded) below the budget; the
// gap rows are spread over `nworkers` warps. The lanes read 32 experts' bounds at once, so a
// warp's walk over the experts is Ep / 32 steps, not Ep dependent loads (which cost more than
// the permute itself at small batches, gaps or not).
__device__ __forceinline__ void zero_gaps(const ep_layout &L, ep_bf16 *perm, int n16, int worker,
                                          int nworkers, int lane) {
    const int Ep = L.experts_per_rank;
    int4 z = make_int4(0, 0, 0, 0);
    int4 *dst = reinterpret_cast<int4 *>(perm);
    for (int e0 = 0; e0 < Ep; e0 += 32) {
        const int e = e0 + lane;
        int64_t a = 0, b = 0;
        if (e < Ep) {
            a = (int64_t)L.exp_off[e] + L.exp_count[e];
            b = (int64_t)L.exp_off[e + 1];
            if (b > L.perm_cap) b = L.perm_cap;
        }
        for (unsigned has = __ballot_sync(0xffffffffu, b > a); has; has &= has - 1) {
            const int j = __ffs(has) - 1;
            const int64_t aj = __shfl_sync(0xffffffffu, a, j), bj = __shfl_sync(0xffffffffu, b, j);
            for (int64_t r = aj + worker; r < bj; r += nworkers)
                for (int i = lane; i < n16; i += 32)
                    dst[(size_t)r * n16 + i] = z;
        }
    }
}

} // namespace epk
