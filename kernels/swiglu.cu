// swiglu: the gated activation between the two expert GEMMs, and small fill utilities.
// h rows are [gate (F) | up (F)]; a = silu(gate) * up in fp32, stored bf16.
#include "kcommon.cuh"

namespace {

__device__ __forceinline__ float silu(float g) {
    return g / (1.f + expf(-g));
}

__global__ void swiglu_fwd_kernel(const __nv_bfloat16 *h, __nv_bfloat16 *a, int64_t rows, int F) {
    const int64_t n = rows * F;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / F, c = i % F;
        float g = __bfloat162float(h[r * 2 * F + c]), u = __bfloat162float(h[r * 2 * F + F + c]);
        a[i] = __float2bfloat16(silu(g) * u);
    }
}

// d/dg silu(g)*u = u * s * (1 + g (1 - s)), s = sigmoid(g); d/du = silu(g).
__global__ void swiglu_bwd_kernel(const __nv_bfloat16 *h, const __nv_bfloat16 *da,
                                  __nv_bfloat16 *dh, int64_t rows, int F) {
    const int64_t n = rows * F;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / F, c = i % F;
        float g = __bfloat162float(h[r * 2 * F + c]), u = __bfloat162float(h[r * 2 * F + F + c]);
        float d = __bfloat162float(da[i]);
        float s = 1.f / (1.f + expf(-g));
        dh[r * 2 * F + c] = __float2bfloat16(d * u * s * (1.f + g * (1.f - s)));
        dh[r * 2 * F + F + c] = __float2bfloat16(d * g * s);
    }
}

__device__ __forceinline__ uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__global__ void fill_random_kernel(__nv_bfloat16 *p, size_t n, uint64_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = mix(seed * 0x9e3779b97f4a7c15ULL + i);
        float u = (float)(z >> 40) * (1.f / 16777216.f); // [0,1)
        p[i] = __float2bfloat16((2.f * u - 1.f) * scale);
    }
}

__global__ void fill_u16_kernel(uint16_t *p, size_t n, uint16_t v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

int blocks_for(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (int)(b < 8192 ? (b ? b : 1) : 8192);
}

} // namespace

extern "C" cudaError_t ep_swiglu_fwd(const ep_bf16 *h, ep_bf16 *a, int64_t rows, int F,
                                     cudaStream_t st) {
    if (rows == 0) return cudaSuccess;
    swiglu_fwd_kernel<<<blocks_for(rows * F), 256, 0, st>>>(
        reinterpret_cast<const __nv_bfloat16 *>(h), reinterpret_cast<__nv_bfloat16 *>(a), rows, F);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_swiglu_bwd(const ep_bf16 *h, const ep_bf16 *da, ep_bf16 *dh, int64_t rows,
                                     int F, cudaStream_t st) {
    if (rows == 0) return cudaSuccess;
    swiglu_bwd_kernel<<<blocks_for(rows * F), 256, 0, st>>>(
        reinterpret_cast<const __nv_bfloat16 *>(h), reinterpret_cast<const __nv_bfloat16 *>(da),
        reinterpret_cast<__nv_bfloat16 *>(dh), rows, F);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_fill_random_bf16(ep_bf16 *p, size_t n, uint64_t seed, float scale,
                                           cudaStream_t st) {
    if (n == 0) return cudaSuccess;
    fill_random_kernel<<<blocks_for((int64_t)n), 256, 0, st>>>(reinterpret_cast<__nv_bfloat16 *>(p),
                                                               n, seed, scale);
    KLAUNCHED();
    return cudaSuccess;
}

extern "C" cudaError_t ep_fill_u16(ep_bf16 *p, size_t n, uint16_t v, cudaStream_t st) {
    if (n == 0) return cudaSuccess;
    fill_u16_kernel<<<blocks_for((int64_t)n), 256, 0, st>>>(p, n, v);
    KLAUNCHED();
    return cudaSuccess;
}
