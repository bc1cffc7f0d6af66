// wgmma_rate.cu — how fast Hopper's FP8 wgmma (m64n128k32 e4m3, FP32 accumulators) runs with
// each shared-memory operand layout the FP8 prefill kernels use: the no-swizzle core-matrix
// layout (8-row × 16-byte core matrices) against 128-byte swizzled rows, and A from shared
// memory (Q·Kᵀ) against A from registers (P·V). One CTA per SM, NWG warpgroups each issuing
// chains of 4 wgmmas (one 64×128×128 product, the shape of a prefill tile's Q·Kᵀ or P·V) then
// waiting, as a latency-bound tile loop does, or two chains before the wait (up to 2 warpgroups).
// Prints a table and one JSON object per line (TFLOP/s, dense FLOPs = 2·M·N·K).
// Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o wgmma_rate dev/cuda/wgmma_rate.cu
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "../../src/backend/cuda/cuda_wgmma_ops.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

__device__ __forceinline__ uint64_t desc_sw128(const void *smem) {  // K-major, 128-byte swizzle, 8-row atoms of 1024 bytes
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

// MODE: 0 A and B no-swizzle, 1 A and B swizzled, 2 A registers + B no-swizzle, 3 A registers + B swizzled.
// DEPTH: chains in flight before a wait (1: wait for each chain; 2: wait for the previous one).
template <int MODE, int DEPTH>
__global__ void __launch_bounds__(DEPTH == 1 ? 384 : 256, 1) k_rate(float *out, int iters) {
    extern __shared__ uint8_t raw[];
    uint8_t *sm = (uint8_t *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    const int wg = threadIdx.x / 128;
    uint8_t *A = sm + wg * 8192, *B = sm + 3 * 8192;  // A: 64 rows × 128 bytes per warpgroup; B: 128 rows × 128 bytes
    for (int i = threadIdx.x; i < (3 * 8192 + 16384) / 4; i += blockDim.x) ((uint32_t *)sm)[i] = 0x38383838u * ((i & 7) == 0);
    fence_proxy_async();
    __syncthreads();
    uint32_t a[4][4];
    for (int k = 0; k < 4; k++)
        for (int e = 0; e < 4; e++) a[k][e] = (threadIdx.x & 3) == 0 && e == 0 ? 0x38u : 0u;
    float d0[64], d1[64];
    for (int i = 0; i < 64; i++) d0[i] = d1[i] = 0.0f;
    auto chain = [&](float *d) {
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            if constexpr (MODE == 0) wgmma_ss_n128(d, wgmma_desc(A + kk * 256, 128, 1024), wgmma_desc(B + kk * 256, 128, 1024), 1);
            else if constexpr (MODE == 1) wgmma_ss_n128(d, desc_sw128(A + kk * 32), desc_sw128(B + kk * 32), 1);
            else if constexpr (MODE == 2) wgmma_rs_n128(d, a[kk], wgmma_desc(B + kk * 256, 128, 1024), 1);
            else wgmma_rs_n128(d, a[kk], desc_sw128(B + kk * 32), 1);
        }
        wgmma_commit();
    };
    for (int it = 0; it < iters; it++) {
        wgmma_fence();
        if constexpr (DEPTH == 1) {
            chain(d0);
            wgmma_wait<0>();
            wgmma_fence_acc64(d0);
        } else {
            chain(d0);
            chain(d1);
            wgmma_wait<0>();
            wgmma_fence_acc64(d0);
            wgmma_fence_acc64(d1);
        }
    }
    float s = 0;
    for (int i = 0; i < 64; i++) s += d0[i] + d1[i];
    if (s == 12345.0f) out[threadIdx.x] = s;  // (keeps the work)
}

template <int MODE, int DEPTH> static int run(float *out, int n_sm, int nwg, const char *name) {
    const int smem = 3 * 8192 + 16384 + 1024, iters = 4096;
    CK(cudaFuncSetAttribute(k_rate<MODE, DEPTH>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    k_rate<MODE, DEPTH><<<n_sm, 128 * nwg, smem>>>(out, 16);  // warm-up
    CK(cudaEventRecord(e0));
    k_rate<MODE, DEPTH><<<n_sm, 128 * nwg, smem>>>(out, iters);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    const double flops = 2.0 * 64 * 128 * 128 * DEPTH * (double)iters * nwg * n_sm;
    printf("| %-28s | %d | %d | %8.1f |\n", name, nwg, DEPTH, flops / (ms * 1e-3) / 1e12);
    fprintf(stderr, "{\"layout\":\"%s\",\"warpgroups\":%d,\"chains_in_flight\":%d,\"tflops\":%.1f}\n", name, nwg, DEPTH,
            flops / (ms * 1e-3) / 1e12);
    return 0;
}

int main(void) {
    int dev = 0, n_sm = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    float *out;
    CK(cudaMalloc(&out, 384 * sizeof(float)));
    printf("| A, B layouts | warpgroups/SM | chains in flight | TFLOP/s |\n|---|---|---|---|\n");
    for (int nwg = 1; nwg <= 3; nwg++) {
        if (run<0, 1>(out, n_sm, nwg, "smem no-swizzle, no-swizzle") || run<1, 1>(out, n_sm, nwg, "smem swizzled, swizzled") ||
            run<2, 1>(out, n_sm, nwg, "regs, no-swizzle") || run<3, 1>(out, n_sm, nwg, "regs, swizzled"))
            return 1;
        if (nwg < 3 && (run<0, 2>(out, n_sm, nwg, "smem no-swizzle, no-swizzle") || run<1, 2>(out, n_sm, nwg, "smem swizzled, swizzled") ||
                        run<2, 2>(out, n_sm, nwg, "regs, no-swizzle") || run<3, 2>(out, n_sm, nwg, "regs, swizzled")))
            return 1;  // (two chains in flight need 255 registers: at most 2 warpgroups)
    }
    CK(cudaFree(out));
    return 0;
}
