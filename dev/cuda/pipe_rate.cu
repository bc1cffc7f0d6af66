// pipe_rate.cu — how many lanes a cycle an SM issues of the instructions the FP8 prefill's
// softmax is made of: MUFU.EX2 (ex2.approx.ftz.f32), F2FP (cvt.rn.satfinite.e4m3x2.f32, two floats
// to two e4m3) and FFMA, alone and mixed as the softmax mixes them (two ex2 per conversion; one
// ex2 per two FFMA). A mix that runs at the MUFU's own rate shares no pipe with it. Also the packed
// exponentials (ex2.approx.f16x2, ex2.approx.ftz.bf16x2: two values an instruction), counted in
// values, so that a packed MUFU would show twice the f32 rate. One CTA per SM, W warps, 16
// independent values a thread, clock64 around the loop.
// Prints a table and one JSON object per line.
// Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o pipe_rate dev/cuda/pipe_rate.cu
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

#define NV 16  // independent values a thread
__device__ __forceinline__ float ex2(float x) { float y; asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ uint32_t cvt2(float a, float b) {
    uint16_t r;
    asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(a), "f"(b));
    return r;
}

__device__ __forceinline__ uint32_t ex2h2(uint32_t x) { uint32_t y; asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x)); return y; }
__device__ __forceinline__ uint32_t ex2b2(uint32_t x) { uint32_t y; asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x)); return y; }
__device__ __forceinline__ uint32_t subh2(uint32_t x) { uint32_t y; asm volatile("sub.f16x2 %0, %1, %2;" : "=r"(y) : "r"(x), "r"(0x3E003E00u)); return y; }    // − 1.5
__device__ __forceinline__ uint32_t subb2(uint32_t x) { uint32_t y; asm volatile("sub.bf16x2 %0, %1, %2;" : "=r"(y) : "r"(x), "r"(0x3FC03FC0u)); return y; }  // − 1.5

// MODE: 0 ex2 (+ FADD), 1 cvt (+ IADD, FADD), 2 FFMA, 3 two ex2 : one cvt, 4 ex2 + two FFMA,
// 5 ex2 f16x2 (+ HADD2), 6 ex2 bf16x2 (+ HADD2)
template <int MODE> __global__ void k_rate(float *out, long long *cyc, int iters) {
    float v[NV];
    uint32_t acc = 0, hv[NV / 2];
    for (int i = 0; i < NV; i++) v[i] = (threadIdx.x + i) * 1e-3f - 3.0f;
    for (int i = 0; i < NV / 2; i++) hv[i] = (MODE == 5 ? 0xBC00BC00u : 0xBF80BF80u) ^ ((threadIdx.x + i) & 7);  // ≈ −1
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < NV; i++) {
            if (MODE == 0) v[i] = ex2(v[i]) - 1.5f;
            if (MODE == 1) { acc += cvt2(v[i], v[(i + 1) % NV]); v[i] += 1e-7f; }
            if (MODE == 2) v[i] = fmaf(v[i], 0.999f, 1e-3f);
            if (MODE == 3) { v[i] = ex2(v[i]) - 1.5f; if (i & 1) acc += cvt2(v[i], v[i - 1]); }
            if (MODE == 4) { v[i] = ex2(v[i]) - 1.5f; v[i] = fmaf(v[i], 0.999f, 1e-3f); v[i] = fmaf(v[i], 0.999f, 1e-3f); }
            if (MODE == 5 && i < NV / 2) hv[i] = subh2(ex2h2(hv[i]));
            if (MODE == 6 && i < NV / 2) hv[i] = subb2(ex2b2(hv[i]));
        }
    }
    const long long t1 = clock64();
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < NV; i++) s += v[i];
    for (int i = 0; i < NV / 2; i++) acc += hv[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s + (float)acc;  // (keeps every value live)
    if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}

int main() {
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    float *out;
    long long *cyc, h[1024];
    CK(cudaMalloc(&out, (size_t)nsm * 1024 * sizeof(float)));
    CK(cudaMalloc(&cyc, (size_t)nsm * sizeof(long long)));
    void (*kern[7])(float *, long long *, int) = {k_rate<0>, k_rate<1>, k_rate<2>, k_rate<3>, k_rate<4>, k_rate<5>, k_rate<6>};
    const char *names[7] = {"ex2 (+fadd)",  "cvt e4m3x2 (+iadd,fadd)", "ffma", "2 ex2 : 1 cvt", "ex2 + 2 ffma",
                            "ex2 f16x2 (+hsub2; values)", "ex2 bf16x2 (+hsub2; values)"};
    const int iters = 4096;
    printf("| warps/SM | instructions | cycles a value-step a SM | lanes/clk/SM |\n|---:|---|---:|---:|\n");
    for (int warps = 4; warps <= 16; warps *= 2)
        for (int m = 0; m < 7; m++) {
            kern[m]<<<nsm, warps * 32>>>(out, cyc, 16);  // (warm-up)
            CK(cudaDeviceSynchronize());
            kern[m]<<<nsm, warps * 32>>>(out, cyc, iters);
            CK(cudaMemcpy(h, cyc, (size_t)nsm * sizeof(long long), cudaMemcpyDeviceToHost));
            double c = 0;
            for (int i = 0; i < nsm; i++) c += (double)h[i];
            c /= nsm;
            const double steps = (double)iters * NV * warps;  // warp-wide value-steps a SM
            printf("| %d | %s | %.2f | %.1f |\n", warps, names[m], c / steps, steps * 32 / c);
            printf("{\"warps\":%d,\"mix\":\"%s\",\"cycles_per_step\":%.3f,\"lanes_per_clk\":%.2f}\n", warps, names[m], c / steps,
                    steps * 32 / c);
        }
    return 0;
}
