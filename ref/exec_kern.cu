/* exec_kern: generic read+write kernel and row softmax of the schedule executor (exec_kern.h). */
#include <cuda_bf16.h>

#include "exec_kern.h"

/* Copies n16 16-byte words from src to dst in passes over the buffers' `words` words. */
__global__ void mem_rw_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, size_t words,
                              size_t n16) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t base = 0; base < n16; base += words) {
        size_t lim = n16 - base < words ? n16 - base : words;
        for (size_t j = tid; j < lim; j += stride) {
            uint4 v = src[j];
            v.x ^= 1u; /* touch the data so the copy cannot be elided */
            dst[j] = v;
        }
    }
}

extern "C" cudaError_t exec_mem_rw(const void *src, void *dst, size_t buf_bytes, double bytes,
                                   cudaStream_t st) {
    size_t words = buf_bytes / 16;
    size_t n16 = (size_t)(bytes / 2 / 16); /* half read, half written */
    if (n16 == 0 || words == 0) return cudaSuccess;
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    size_t want = (n16 + 255) / 256;
    size_t cap = (size_t)sms * 8;
    unsigned blocks = (unsigned)(want < cap ? want : cap);
    mem_rw_kernel<<<blocks, 256, 0, st>>>((const uint4 *)src, (uint4 *)dst, words, n16);
    return cudaGetLastError();
}

__global__ void softmax_kernel(__nv_bfloat16 *s, int cols) {
    __nv_bfloat16 *row = s + (size_t)blockIdx.x * cols;
    __shared__ float red[32];
    float mx = -3.0e38f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        mx = fmaxf(mx, __bfloat162float(row[c]));
    for (int o = 16; o; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
    __syncthreads();
    mx = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
        mx = fmaxf(mx, red[w]);
    __syncthreads();
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        sum += __expf(__bfloat162float(row[c]) - mx);
    for (int o = 16; o; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sum;
    __syncthreads();
    sum = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++)
        sum += red[w];
    float inv = 1.f / sum;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        row[c] = __float2bfloat16(__expf(__bfloat162float(row[c]) - mx) * inv);
}

extern "C" cudaError_t exec_softmax(uint16_t *s, int64_t rows, int cols, cudaStream_t st) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff) return cudaErrorInvalidValue;
    softmax_kernel<<<(unsigned)rows, 256, 0, st>>>((__nv_bfloat16 *)s, cols);
    return cudaGetLastError();
}

__device__ __forceinline__ uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void delay_kernel(uint64_t ns) {
    uint64_t t0 = global_ns();
    while (global_ns() - t0 < ns)
        __nanosleep(1000);
}

extern "C" cudaError_t exec_delay(double us, cudaStream_t st) {
    if (!(us > 0)) return cudaSuccess;
    delay_kernel<<<1, 1, 0, st>>>((uint64_t)(us * 1e3));
    return cudaGetLastError();
}
