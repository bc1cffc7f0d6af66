// cuda_rmsnorm.cuh — the arithmetic of one RMSNorm row in 16-byte runs, shared by k_rmsnorm
// (cuda_backend.cu), k_rmsnorm_fp8 (cuda_fp8w_act.cuh; both through rms_row) and the skinny GEMM's
// normalising prologue (cuda_gemv.cuh, NORM), so all produce the same bf16 values bit for bit. A row
// of dim (% 8 == 0, 16-byte aligned) is normalised by T threads (a multiple of 32, rms_threads below),
// thread t holding runs t and t + T.
#pragma once

#include <cuda_bf16.h>
#include <stdint.h>

#define RMS_VEC 2  // 16-byte runs of x (and of the weight) a thread keeps in registers

// T for a row of dim: whole warps, RMS_VEC runs a thread (256 at dim 4096), at most 1024.
static inline int rms_threads(long dim) {
    const long runs = dim / 8, t = runs / RMS_VEC >= 1024 ? 1024 : (runs / RMS_VEC + 31) / 32 * 32;
    return t < 32 ? 32 : (int)t;
}

// Loads this thread's runs of x and of w (threads >= T hold none) and returns its sum of squares.
__device__ __forceinline__ float rms_partial(const bf16 *xr, const bf16 *w, int runs, int T, uint4 (&xv)[RMS_VEC],
                                             uint4 (&wv)[RMS_VEC]) {
    float ss = 0;
    if ((int)threadIdx.x >= T) return ss;
#pragma unroll
    for (int u = 0; u < RMS_VEC; u++) {
        const int i = threadIdx.x + u * T;
        if (i < runs) { xv[u] = ((const uint4 *)xr)[i]; wv[u] = ((const uint4 *)w)[i]; }
    }
#pragma unroll
    for (int u = 0; u < RMS_VEC; u++) {
        if ((int)threadIdx.x + u * T >= runs) continue;
        const __nv_bfloat162 *p = (const __nv_bfloat162 *)&xv[u];
#pragma unroll
        for (int e = 0; e < 4; e++) { float2 f = __bfloat1622float2(p[e]); ss += f.x * f.x + f.y * f.y; }
    }
    return ss;
}

// The row's sum over the first T threads' partial sums (every thread of the CTA calls it; red:
// 32 shared floats, free again when it returns).
__device__ __forceinline__ float rms_reduce(float ss, int T, float *red) {
    for (int s = 16; s > 0; s >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, s);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = (int)threadIdx.x < (T + 31) / 32 ? red[threadIdx.x] : 0;
        for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffff, v, s);
        if (threadIdx.x == 0) red[0] = v;
    }
    __syncthreads();
    const float total = red[0];
    __syncthreads();  // (red is reused by the next row)
    return total;
}

// o = x · r ⊙ w for this thread's runs (threads >= T store nothing; o NULL: the values are only kept);
// amax (if given) takes the largest |value| computed, kept (if given) the runs computed.
__device__ __forceinline__ void rms_store(bf16 *o, const uint4 (&xv)[RMS_VEC], const uint4 (&wv)[RMS_VEC], float r,
                                          int runs, int T, float *amax = nullptr, uint4 *kept = nullptr) {
    if ((int)threadIdx.x >= T) return;
#pragma unroll
    for (int u = 0; u < RMS_VEC; u++) {
        const int i = threadIdx.x + u * T;
        if (i >= runs) continue;
        const __nv_bfloat162 *xp = (const __nv_bfloat162 *)&xv[u], *wp = (const __nv_bfloat162 *)&wv[u];
        uint4 ov;
        __nv_bfloat162 *op = (__nv_bfloat162 *)&ov;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float2 a = __bfloat1622float2(xp[e]), g = __bfloat1622float2(wp[e]);
            op[e] = __floats2bfloat162_rn(a.x * r * g.x, a.y * r * g.y);
            if (amax) {
                const float2 st = __bfloat1622float2(op[e]);
                *amax = fmaxf(*amax, fmaxf(fabsf(st.x), fabsf(st.y)));
            }
        }
        if (o) ((uint4 *)o)[i] = ov;
        if (kept) kept[u] = ov;
    }
}

// o = rmsnorm(xr) ⊙ w for the CTA's row of dim (o may be xr: a thread writes only what it read). Rows
// of 16-byte runs (dim % 8 == 0, aligned, dim <= 16 · blockDim.x) keep each thread's runs of x and of w
// in registers, so a row costs one memory latency, not one per loop trip; other shapes take the strided
// loop. red: 32 shared floats, free again when it returns. amax (if given) takes the largest |value| this
// thread computed; kept (if given, RMS_VEC runs) the runs it computed, thread t's runs t and t + T, when
// the row took the 16-byte path (the return value). That path stores o only where store is set (an FP8
// product's codes need the values, not xn: k_rmsnorm_fp8); the strided loop always stores it.
__device__ __forceinline__ bool rms_row(bf16 *o, const bf16 *xr, const bf16 *w, int dim, float eps, float *red,
                                        float *amax = nullptr, uint4 *kept = nullptr, bool store = true) {
    const int runs = dim / 8, T = blockDim.x;
    const bool vec = (dim & 7) == 0 && runs <= RMS_VEC * T && !(((uintptr_t)xr | (uintptr_t)o | (uintptr_t)w) & 15);
    float ss = 0;
    uint4 xv[RMS_VEC], wv[RMS_VEC];
    if (vec) ss = rms_partial(xr, w, runs, T, xv, wv);
    else
        for (int i = threadIdx.x; i < dim; i += blockDim.x) { float v = __bfloat162float(xr[i]); ss += v * v; }
    const float r = rsqrtf(rms_reduce(ss, T, red) / dim + eps);
    if (vec) rms_store(store ? o : nullptr, xv, wv, r, runs, T, amax, kept);
    else
        for (int i = threadIdx.x; i < dim; i += blockDim.x) {
            o[i] = __float2bfloat16_rn(__bfloat162float(xr[i]) * r * __bfloat162float(w[i]));
            if (amax) *amax = fmaxf(*amax, fabsf(__bfloat162float(o[i])));
        }
    return vec;
}
