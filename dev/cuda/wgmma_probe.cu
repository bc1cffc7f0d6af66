// wgmma_probe.cu — measures how Hopper's FP8 tensor-core MMAs accumulate (issue 6's first
// step): wgmma (m64n8k32 e4m3, A in registers, B in shared memory) and mma.sync
// (m16n8k32 e4m3). Prints one JSON object per line.
//   add_onto:  D = 2^e, add a single product 1.0          -> is D exactly 2^e + 1?
//   align:     D = 0,  products 1.0 and 2^-k in one MMA    -> is D exactly 1 + 2^-k?
//   chain:     D = 0,  T MMAs each adding 1.0 (scale_d=1)  -> D vs T (and the FP32-promoted twin)
//   rounding:  D = 2^14, add one product x (0.5 .. 3)      -> rounded to nearest, or truncated?
// Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o wgmma_probe dev/cuda/wgmma_probe.cu
#include <cstdio>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>

#include "../../src/backend/cuda/cuda_wgmma_ops.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

// e4m3 byte of 2^-k (k = 0..9; 7..9 subnormal)
__device__ static inline uint8_t e4m3_pow2neg(int k) {
    if (k <= 6) return (uint8_t)((7 - k) << 3);
    return (uint8_t)(1 << (9 - k));  // subnormal: m * 2^-9
}

// column n's product in the rounding test (e4m3 bytes): 0.5 0.75 1.0 1.25 1.5 1.75 -1.5 3.0
__device__ static const uint8_t round_b[8] = {0x30, 0x34, 0x38, 0x3A, 0x3C, 0x3E, 0xBC, 0x44};

// mode 0: add_onto, 1: align, 2: chain of T (scale_d=1), 3: chain of T promoted to FP32 each MMA,
// 4: rounding (D = 2^14, column n adds round_b[n])
__global__ void k_wgmma(float *out /*[64][8]*/, int mode, int T) {
    __shared__ __align__(128) uint8_t B[8 * 32];
    int tid = threadIdx.x, w = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;
    for (int i = tid; i < 256; i += 128) {
        int n = i / 32, kb = i % 32;  // element (n, kb) at the no-swizzle core-matrix address
        uint8_t v = 0;
        if (kb == 0) v = mode == 4 ? round_b[n] : 0x38;         // 1.0
        if (kb == 1 && mode == 1) v = e4m3_pow2neg(n);          // 2^-n
        B[(kb / 16) * 128 + n * 16 + kb % 16] = v;
    }
    fence_proxy_async();
    __syncthreads();
    uint32_t a[4] = {0, 0, 0, 0};
    int rows[2] = {16 * w + g, 16 * w + g + 8};
    if (c == 0) {
        for (int h = 0; h < 2; h++) {
            uint32_t word = 0x38;  // A[r][0] = 1.0
            if (mode == 1) word |= (uint32_t)e4m3_pow2neg(rows[h] % 10) << 8;
            a[h] = word;  // a0: row g, a1: row g+8 (k 0..3)
        }
    }
    float d[4];
    for (int i = 0; i < 4; i++) {
        int r = rows[i / 2];
        d[i] = mode == 0 ? ldexpf(1.0f, r / 2) : mode == 4 ? 16384.0f : 0.0f;
    }
    uint64_t db = wgmma_desc(B, 128, 256);
    float acc[4] = {0, 0, 0, 0};
    int iters = mode >= 2 ? T : 1;
    for (int it = 0; it < iters; it++) {
        wgmma_fence();
        wgmma_rs_n8(d, a, db, mode == 3 ? 0 : (mode == 0 || mode == 4 || it > 0) ? 1 : 0);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_acc4(d);
        if (mode == 3) for (int i = 0; i < 4; i++) acc[i] += d[i];
    }
    if (mode == 3) for (int i = 0; i < 4; i++) d[i] = acc[i];
    for (int i = 0; i < 4; i++) out[rows[i / 2] * 8 + 2 * c + (i & 1)] = d[i];
}

// mma.sync m16n8k32 e4m3, one warp; same modes (rows 0..15)
__global__ void k_mma(float *out /*[16][8]*/, int mode, int T) {
    int lane = threadIdx.x, g = lane / 4, c = lane % 4;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    int rows[2] = {g, g + 8};
    if (c == 0) {
        for (int h = 0; h < 2; h++) {
            uint32_t word = 0x38;
            if (mode == 1) word |= (uint32_t)e4m3_pow2neg(rows[h] % 10) << 8;
            a[h] = word;
        }
        // B fragment: b0 holds B[k = 4c..4c+3][n = g]
        b[0] = 0x38 | (mode == 1 ? (uint32_t)e4m3_pow2neg(g) << 8 : 0);
    }
    float d[4];
    for (int i = 0; i < 4; i++) d[i] = mode == 0 ? ldexpf(1.0f, rows[i / 2] / 2) : 0.0f;
    float acc[4] = {0, 0, 0, 0};
    int iters = mode >= 2 ? T : 1;
    for (int it = 0; it < iters; it++) {
        if (mode == 3 || (mode == 1) || (mode == 2 && it == 0)) for (int i = 0; i < 4; i++) d[i] = 0;
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        if (mode == 3) for (int i = 0; i < 4; i++) acc[i] += d[i];
    }
    if (mode == 3) for (int i = 0; i < 4; i++) d[i] = acc[i];
    for (int i = 0; i < 4; i++) out[rows[i / 2] * 8 + 2 * c + (i & 1)] = d[i];
}

static int run(const char *unit, int mode, int T, float *h) {
    float *d;
    CK(cudaMalloc(&d, 64 * 8 * sizeof(float)));
    CK(cudaMemset(d, 0, 64 * 8 * sizeof(float)));
    if (unit[0] == 'w') k_wgmma<<<1, 128>>>(d, mode, T);
    else k_mma<<<1, 32>>>(d, mode, T);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h, d, 64 * 8 * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    return 0;
}

int main(void) {
    static const char *units[2] = {"wgmma", "mma.sync"};
    float h[64 * 8];
    for (int u = 0; u < 2; u++) {
        int rows = u == 0 ? 64 : 16;
        // add_onto: row r has D = 2^(r/2); the first exponent where +1 is lost
        if (run(units[u], 0, 1, h)) return 1;
        int first_lost = -1;
        printf("{\"unit\":\"%s\",\"test\":\"add_onto\",\"cases\":[", units[u]);
        for (int r = 0; r < rows; r += 2) {
            double base = ldexp(1.0, r / 2), got = h[r * 8];
            printf("%s{\"e\":%d,\"added\":%.9g}", r ? "," : "", r / 2, got - base);
            if (first_lost < 0 && got - base != 1.0 && r / 2 < 24) first_lost = r / 2;
        }
        printf("],\"first_exponent_losing_1\":%d}\n", first_lost);
        // align: D[r][n] = 1 + 2^-(r%10 + n)
        if (run(units[u], 1, 1, h)) return 1;
        int worst_exact_k = 99;
        printf("{\"unit\":\"%s\",\"test\":\"align\",\"cases\":[", units[u]);
        int first = 1;
        for (int k = 0; k <= 16; k++) {
            int found = 0;
            for (int r = 0; r < rows && !found; r++)
                for (int n = 0; n < 8 && !found; n++)
                    if (r % 10 + n == k) {
                        double got = h[r * 8 + n] - 1.0, want = ldexp(1.0, -k);
                        printf("%s{\"k\":%d,\"small_kept\":%.9g,\"want\":%.9g}", first ? "" : ",", k, got, want);
                        first = 0;
                        found = 1;
                        if (got != want && k < worst_exact_k) worst_exact_k = k;
                    }
        }
        printf("],\"first_k_not_exact\":%d}\n", worst_exact_k == 99 ? -1 : worst_exact_k);
        if (u == 0) {  // rounding: nearest-even gives 0 0 0 2 2 2 -2 4, truncation 0 0 0 0 0 0 -2 2
            if (run(units[u], 4, 1, h)) return 1;
            static const float x[8] = {0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, -1.5f, 3.0f};
            printf("{\"unit\":\"%s\",\"test\":\"rounding\",\"cases\":[", units[u]);
            for (int n = 0; n < 8; n++) printf("%s{\"added\":%g,\"kept\":%g}", n ? "," : "", x[n], h[n] - 16384.0f);
            printf("]}\n");
        }
        // chains: T MMAs adding 1.0 each, in the MMA accumulator vs promoted to FP32 each time
        int Ts[4] = {1024, 16384, 65536, 262144};
        for (int i = 0; i < 4; i++) {
            float single, promoted;
            if (run(units[u], 2, Ts[i], h)) return 1;
            single = h[0];
            if (run(units[u], 3, Ts[i], h)) return 1;
            promoted = h[0];
            printf("{\"unit\":\"%s\",\"test\":\"chain\",\"T\":%d,\"single\":%.9g,\"promoted\":%.9g,\"rel_err_single\":%.3g}\n",
                   units[u], Ts[i], single, promoted, fabs(single - Ts[i]) / Ts[i]);
        }
    }
    return 0;
}
