// router: scores, (group-limited) top-k and the combine probabilities. One warp per token; the
// token's E selection scores sit in shared memory. CPU reference: tests/gpu/cpu_ref.c.
#include <cfloat>
#include <climits>
#include "kcommon.cuh"

namespace {

constexpr int WARPS = 4;
constexpr float TAKEN = -INFINITY; // chosen already, never chosen again
constexpr float MASKED = -FLT_MAX; // outside the kept groups

__device__ void warp_argmax(float v, int e, float &bv, int &be) {
    bv = v;
    be = e;
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oe = __shfl_xor_sync(0xffffffffu, be, o);
        if (ov > bv || (ov == bv && oe < be)) {
            bv = ov;
            be = oe;
        }
    }
}

__global__ void router_kernel(const float *logits, const float *bias, ep_router_params p,
                              int32_t *topk_idx, float *topk_prob) {
    extern __shared__ float smem[];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t = blockIdx.x * WARPS + warp;
    if (t >= p.num_tokens) return;
    const int E = p.num_experts;
    float *sel = smem + (size_t)warp * 2 * E; // selection scores (with bias, masks)
    float *score = sel + E;                   // scores that give the probabilities
    const float *row = logits + (size_t)t * E;
    for (int e = lane; e < E; e += 32) {
        float l = row[e];
        float s = p.sigmoid ? 1.f / (1.f + expf(-l)) : l;
        score[e] = s;
        sel[e] = s + (bias ? bias[e] : 0.f);
    }
    __syncwarp();
    if (p.num_groups > 1) {
        // Group score: sum of the group's best topk/group_topk selection scores (Megatron).
        int per = E / p.num_groups, m = p.topk / p.group_topk;
        if (m < 1) m = 1;
        float gs[EP_MAX_EXPERTS / 32]; // lanes own groups g = lane + 32*i
        int ng = (p.num_groups + 31) / 32;
        for (int i = 0; i < ng; i++) {
            int g = lane + 32 * i;
            float sum = 0.f;
            if (g < p.num_groups) {
                float last = INFINITY;
                int lastidx = -1;
                for (int r = 0; r < m; r++) { // r-th best in the group, ties by lower index
                    float b = -INFINITY;
                    int bi = INT_MAX;
                    for (int e = g * per; e < (g + 1) * per; e++) {
                        float v = sel[e];
                        bool after = v < last || (v == last && e > lastidx);
                        if (after && (v > b || (v == b && e < bi))) {
                            b = v;
                            bi = e;
                        }
                    }
                    sum += b;
                    last = b;
                    lastidx = bi;
                }
            } else {
                sum = -INFINITY;
            }
            gs[i] = sum;
        }
        // Keep group_topk groups; mask the experts of the others.
        unsigned keep[EP_MAX_EXPERTS / 32 / 32 + 1] = {0};
        for (int r = 0; r < p.group_topk; r++) {
            float bv = -INFINITY;
            int bg = INT_MAX;
            for (int i = 0; i < ng; i++) {
                int g = lane + 32 * i;
                bool kept = (keep[i / 32] >> (i % 32)) & 1u;
                if (g < p.num_groups && !kept && (gs[i] > bv || (gs[i] == bv && g < bg))) {
                    bv = gs[i];
                    bg = g;
                }
            }
            float wv;
            int wg;
            warp_argmax(bv, bg, wv, wg);
            if (wg % 32 == lane) {
                int i = wg / 32;
                keep[i / 32] |= 1u << (i % 32);
            }
        }
        for (int i = 0; i < ng; i++) {
            int g = lane + 32 * i;
            bool kept = (keep[i / 32] >> (i % 32)) & 1u;
            if (g < p.num_groups && !kept)
                for (int e = g * per; e < (g + 1) * per; e++)
                    sel[e] = MASKED;
        }
        __syncwarp();
    }
    float chosen = 0.f, mx = -INFINITY, sum = 0.f;
    int my_e = -1;
    for (int j = 0; j < p.topk; j++) {
        float bv = -INFINITY;
        int be = INT_MAX;
        for (int e = lane; e < E; e += 32) {
            float v = sel[e];
            if (v != TAKEN && (v > bv || (v == bv && e < be))) {
                bv = v;
                be = e;
            }
        }
        float wv;
        int we;
        warp_argmax(bv, be, wv, we);
        __syncwarp();
        if (lane == 0) sel[we] = TAKEN;
        __syncwarp();
        float s = score[we];
        if (lane == j) {
            my_e = we;
            chosen = s;
        }
        mx = fmaxf(mx, s);
    }
    // Probabilities over the k chosen: softmax of logits, or normalised sigmoid scores.
    float w = 0.f;
    if (lane < p.topk) w = p.sigmoid ? chosen : expf(chosen - mx);
    sum = w;
#pragma unroll
    for (int o = 16; o; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane < p.topk) {
        topk_idx[(size_t)t * p.topk + lane] = my_e;
        topk_prob[(size_t)t * p.topk + lane] = w / sum;
    }
}

} // namespace

extern "C" cudaError_t ep_router(const float *logits, const float *bias, ep_router_params p,
                                 int32_t *topk_idx, float *topk_prob, cudaStream_t st) {
    if (p.num_experts < 1 || p.num_experts > EP_MAX_EXPERTS || p.topk < 1 || p.topk > 32 ||
        p.topk > EP_MAX_TOPK || p.topk > p.num_experts)
        return cudaErrorInvalidValue;
    if (p.num_groups > 1 &&
        (p.num_experts % p.num_groups || p.group_topk < 1 || p.group_topk > p.num_groups ||
         p.group_topk * (p.num_experts / p.num_groups) < p.topk))
        return cudaErrorInvalidValue;
    if (p.num_tokens == 0) return cudaSuccess;
    size_t smem = (size_t)WARPS * 2 * p.num_experts * sizeof(float);
    int blocks = (p.num_tokens + WARPS - 1) / WARPS;
    router_kernel<<<blocks, WARPS * 32, smem, st>>>(logits, bias, p, topk_idx, topk_prob);
    KLAUNCHED();
    return cudaSuccess;
}
