// kcommon: device helpers shared by the kernels: checks, bf16 vectors, row copies, system-scope
// flags and spin-waits with timeouts. Internal to kernels/.
#pragma once
#include <cstdio>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include "ep_kernels.h"

#define KCHECK(call)                                                                               \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "ep_kernels: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorString(e_));                                                       \
            return e_;                                                                             \
        }                                                                                          \
    } while (0)
// Every launch is followed by this: launch-configuration errors surface at the call site.
#define KLAUNCHED() KCHECK(cudaGetLastError())

namespace epk {

__device__ __forceinline__ void bf16x8_to_f32(const int4 &v, float f[8]) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 p = __bfloat1622float2(h[i]);
        f[2 * i] = p.x;
        f[2 * i + 1] = p.y;
    }
}
__device__ __forceinline__ int4 f32_to_bf16x8(const float f[8]) {
    int4 v;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++)
        h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return v;
}

// Streaming loads: rows are read once, keep them out of L1.
__device__ __forceinline__ int4 ld_nc(const int4 *p) {
    int4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// For memory that a peer writes while this kernel runs (staging, combine receive): coherent,
// ordered after the acquire of the chunk flag; .nc would be outside the memory model.
__device__ __forceinline__ int4 ld_flagged(const int4 *p) {
    int4 v;
    asm volatile("ld.global.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

// A warp copies one row of n16 16-byte words, 4 loads in flight per lane before the stores.
__device__ __forceinline__ void warp_copy_row(int4 *dst, const int4 *src, int n16, int lane) {
    int i = lane;
    for (; i + 96 < n16; i += 128) {
        int4 a = ld_nc(src + i), b = ld_nc(src + i + 32), c = ld_nc(src + i + 64),
             d = ld_nc(src + i + 96);
        dst[i] = a;
        dst[i + 32] = b;
        dst[i + 64] = c;
        dst[i + 96] = d;
    }
    for (; i < n16; i += 32)
        dst[i] = ld_nc(src + i);
}

// The same for rows written earlier in the same kernel (ordered by an acquire): coherent loads.
__device__ __forceinline__ void warp_copy_row_coherent(int4 *dst, const int4 *src, int n16,
                                                       int lane) {
    int i = lane;
    for (; i + 96 < n16; i += 128) {
        int4 a = ld_flagged(src + i), b = ld_flagged(src + i + 32), c = ld_flagged(src + i + 64),
             d = ld_flagged(src + i + 96);
        dst[i] = a;
        dst[i + 32] = b;
        dst[i + 64] = c;
        dst[i + 96] = d;
    }
    for (; i < n16; i += 32)
        dst[i] = ld_flagged(src + i);
}

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_sys(uint32_t *p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Waits until *flag >= target (wrap-safe). On timeout raises *err and returns false, and the first
// waiter to time out prints who waited for whom and what it saw (the NVLink kernels wait warp by
// warp: thousands of waiters time out together); also gives up once another waiter raised *err.
__device__ __forceinline__ bool wait_flag(const uint32_t *flag, uint32_t target,
                                          uint64_t timeout_ns, int rank, int peer, const char *what,
                                          int index, int *err) {
    uint64_t t0 = 0;
    for (uint32_t spins = 0;; spins++) {
        uint32_t v = ld_acquire_sys(flag);
        if ((int32_t)(v - target) >= 0) return true;
        if ((spins & 1023u) == 0) {
            uint64_t now = globaltimer();
            if (t0 == 0) t0 = now;
            if (*(volatile int *)err) return false;
            if (now - t0 > timeout_ns) {
                if (atomicExch(err, 1) == 0)
                    printf(
                        "epref: rank %d: timeout waiting for peer %d: %s[%d] = %u, expected %u\n",
                        rank, peer, what, index, v, target);
                return false;
            }
        }
    }
}

} // namespace epk
