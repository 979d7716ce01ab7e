/* exec_kern: generic read+write kernel and row softmax of the schedule executor (exec_kern.h). */
#include <cuda_bf16.h>

#include "exec_kern.h"

#define MEM_THREADS 256
#define MEM_ITEMS   16 /* at most 16-byte words per thread: a block moves <= 64 KiB and retires */

/* Copies word i of n16 16-byte words from src to dst at index i mod words (the buffers hold
 * `words` words), `items` words per thread. Short-lived blocks, so kernels of other streams find
 * free SMs while a long memory-bound op runs (a grid-stride loop would hold every SM until it
 * ends). */
__global__ void mem_rw_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, size_t words,
                              size_t n16, int items) {
    const size_t tile = (size_t)MEM_THREADS * items;
    size_t start = (size_t)blockIdx.x * tile, base = start % words;
    for (int k = 0; k < items; k++) {
        size_t off = (size_t)k * MEM_THREADS + threadIdx.x;
        if (start + off >= n16) return;
        size_t j = base + off;
        if (j >= words) j %= words;
        uint4 v = src[j];
        v.x ^= 1u; /* touch the data so the copy cannot be elided */
        dst[j] = v;
    }
}

extern "C" cudaError_t exec_mem_rw(const void *src, void *dst, size_t buf_bytes, double bytes,
                                   cudaStream_t st) {
    size_t words = buf_bytes / 16;
    size_t n16 = (size_t)(bytes / 2 / 16); /* half read, half written */
    if (n16 == 0 || words == 0) return cudaSuccess;
    /* small ops: one word per thread, as many blocks as words allow; large ones: more words
     * per thread once every SM has eight blocks' worth (132 SMs) */
    size_t fill = (size_t)132 * 8 * MEM_THREADS;
    int items = n16 / fill >= MEM_ITEMS ? MEM_ITEMS : n16 / fill < 1 ? 1 : (int)(n16 / fill);
    size_t tile = (size_t)MEM_THREADS * items, blocks = (n16 + tile - 1) / tile;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    mem_rw_kernel<<<(unsigned)blocks, MEM_THREADS, 0, st>>>((const uint4 *)src, (uint4 *)dst, words,
                                                            n16, items);
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
