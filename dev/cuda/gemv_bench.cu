// gemv_bench.cu — times the decode GEMM (src/backend/cuda/cuda_gemv.cuh) at Llama-3.1-8B's
// shapes for n = 1, 7, 8 rows of x (one request; a loaded step's 7-8), per tuning variant (warps per CTA,
// loads in flight per lane, warps per weight row), beside a device-to-device copy of the same weight bytes
// (the bandwidth the product cannot beat). Each variant is checked first against a float64 CPU
// product on sampled rows. Prints a table, then one JSON object per line. The "w" variants are the CUDA-core
// k_gemv (which one-row decode steps run); "mma" is the tensor-core form 2-8 rows run (k_gemv_mma at its
// production size and others, and a persistent form that streams each warp's weights across tiles).
// Measured: bench/throughput/RESULTS.md (none beats k_gemv_mma's production size on the shapes that run it).
// The weights rotate over enough copies (>= 512 MB) that every launch reads them from HBM, not L2;
// a timed interval holds BURST launches back to back (as a decode step's graph runs them).
// Build: make CUDA=1 gpu-tests (build-cuda/gpu/gemv_bench); run: build-cuda/gpu/gemv_bench [reps]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

typedef __nv_bfloat16 bf16;
#include "lab_util.cuh"
#include "../../src/backend/cuda/cuda_gemv.cuh"



// The tensor-core form decode steps run (k_gemv_mma, src/backend/cuda/cuda_gemv_mma.cuh), through its launcher
static void gemv_mma_src(cudaStream_t st, float *out, const bf16 *x, const bf16 *w, int rows, int cols, int n) {
    gemv_launch(st, out, x, w, rows, cols, n);
}
// k_gemv_mma with other sizes (warps a CTA, 32-column chunks in flight a warp), one CTA a tile
template <int WARPS, int UNROLL>
static void gemv_mma_sized(cudaStream_t st, float *out, const bf16 *x, const bf16 *w, int rows, int cols, int n) {
    gemv_args a = gemv_product(nullptr, x, w, nullptr, rows, cols);
    a.out = out;
    gemv_mma_launch<GEMV_STORE, float, WARPS, UNROLL>(st, a, n, (unsigned)((rows + 15) / 16));
}

// A persistent form of k_gemv_mma's product: as many CTAs as fit the GPU, CTA b takes the 16-row tiles b,
// b + gridDim.x, ...; each warp's chunks of its tiles form one stream with LA chunks requested ahead of the
// one being multiplied (across a tile's end), so the loads never wait for a tile's reduction. The warps'
// sums meet in a double-buffered shared array (one barrier a tile) and warp 0 adds them in warp order, as
// k_gemv_mma does, so a row's result is that of k_gemv_mma with as many warps.
template <int WARPS, int LA>
__global__ void __launch_bounds__(WARPS * 32) k_gemv_mma_p(float *out, const bf16 *x, const bf16 *w, int rows,
                                                          int cols, int n) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int chunks = cols / 32, tiles = (rows + 15) / 16;
    __shared__ float part[2][WARPS][32][4];
    const uint4 zero = make_uint4(0, 0, 0, 0);
    auto load = [&](int tl, int ch, uint4 &A, uint4 &B) {
        if (tl < tiles) {
            const int r0 = min(tl * 16 + g, rows - 1), r1 = min(tl * 16 + g + 8, rows - 1);
            A = __ldcs((const uint4 *)(w + (size_t)r0 * cols) + ch * 4 + c);
            B = __ldcs((const uint4 *)(w + (size_t)r1 * cols) + ch * 4 + c);
        } else {
            A = B = zero;
        }
    };
    int pt = blockIdx.x, pc = warp;
    auto advance = [&]() {
        if (pc + WARPS < chunks) pc += WARPS;
        else { pt += gridDim.x; pc = warp; }
    };
    uint4 ra[LA + 1], rb[LA + 1];
    if (warp < chunks) {
        load(pt, pc, ra[0], rb[0]);
#pragma unroll
        for (int i = 1; i <= LA; i++) { advance(); load(pt, pc, ra[i], rb[i]); }
    }
    const uint4 *xr = (const uint4 *)(x + (size_t)(g < n ? g : 0) * cols);
    int buf = 0;
    for (int tl = blockIdx.x; tl < tiles; tl += gridDim.x) {
        float d[4] = {0, 0, 0, 0};
        for (int ch = warp; ch < chunks; ch += WARPS) {
            const uint4 xv = g < n ? __ldg(xr + ch * 4 + c) : zero;
            const uint4 A = ra[0], B = rb[0];
#pragma unroll
            for (int i = 0; i < LA; i++) { ra[i] = ra[i + 1]; rb[i] = rb[i + 1]; }
            advance();
            load(pt, pc, ra[LA], rb[LA]);
            gemv_mma_chunk(d, A, B, xv);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) part[buf][warp][lane][i] = d[i];
        __syncthreads();
        if (warp == 0) {
            float s[4] = {0, 0, 0, 0};
            for (int v = 0; v < WARPS; v++)
#pragma unroll
                for (int i = 0; i < 4; i++) s[i] += part[buf][v][lane][i];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int t = 2 * c + (i & 1), row = tl * 16 + g + (i >> 1) * 8;
                if (t < n && row < rows) out[(size_t)t * rows + row] = s[i];
            }
        }
        buf ^= 1;
    }
}
template <int WARPS, int LA>
static void gemv_mma_persistent(cudaStream_t st, float *out, const bf16 *x, const bf16 *w, int rows, int cols, int n) {
    static int cap = 0;
    if (!cap) {
        int per_sm = 0, dev = 0, sms = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_gemv_mma_p<WARPS, LA>, WARPS * 32, 0));
        CK(cudaGetDevice(&dev));
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        cap = per_sm * sms;
        fprintf(stderr, "persistent w%d la%d: %d CTAs an SM\n", WARPS, LA, per_sm);
    }
    const int tiles = (rows + 15) / 16;
    k_gemv_mma_p<WARPS, LA><<<tiles < cap ? tiles : cap, WARPS * 32, 0, st>>>(out, x, w, rows, cols, n);
}

typedef void (*launch_fn)(cudaStream_t, float *, const bf16 *, const bf16 *, int, int, int);
struct variant { const char *name; launch_fn fn; };
static const variant variants[] = {
    {"w8 u4 k1 (default)", gemv_launch_variant<float, 8, 4, 1>},
    {"w8 u8 k1", gemv_launch_variant<float, 8, 8, 1>},
    {"w4 u4 k1", gemv_launch_variant<float, 4, 4, 1>},
    {"w8 u4 k2", gemv_launch_variant<float, 8, 4, 2>},
    {"w8 u4 k4", gemv_launch_variant<float, 8, 4, 4>},
    {"w8 u8 k2", gemv_launch_variant<float, 8, 8, 2>},
    {"mma w16 u2 (k_gemv_mma)", gemv_mma_src},
    {"mma w16 u4", gemv_mma_sized<16, 4>},
    {"mma w8 u4", gemv_mma_sized<8, 4>},
    {"mma persistent w16 la2", gemv_mma_persistent<16, 2>},
    {"mma persistent w16 la4", gemv_mma_persistent<16, 4>},
    {"mma persistent w8 la4", gemv_mma_persistent<8, 4>},
    {"mma persistent w8 la6", gemv_mma_persistent<8, 6>},
};



int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    if (reps < 3) reps = 3;
    const int shapes[][2] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}};
    const char *names[] = {"wq/wo", "wk/wv", "w_gate/w_up", "w_down", "output"};
    const int ns[] = {1, 7, 8};
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<char> json;
    printf("| shape | rows x cols | n | variant | us | GB/s read | copy GB/s (r+w) | vs copy | max rel err |\n"
           "|---|---|---:|---|---:|---:|---:|---:|---:|\n");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int rows = shapes[si][0], cols = shapes[si][1];
        const size_t wn = (size_t)rows * cols, wbytes = wn * sizeof(bf16);
        int copies = (int)((512ull << 20) / wbytes) + 1;
        if (copies > 64) copies = 64;
        std::vector<bf16> hw(wn), hx((size_t)8 * cols);
        for (auto &v : hw) v = __float2bfloat16(urand());
        for (auto &v : hx) v = __float2bfloat16(urand());
        bf16 *dw, *dx, *dcopy;
        float *dout;
        CK(cudaMalloc(&dw, wbytes * copies));
        CK(cudaMalloc(&dcopy, wbytes));
        CK(cudaMalloc(&dx, hx.size() * sizeof(bf16)));
        CK(cudaMalloc(&dout, (size_t)8 * rows * sizeof(float)));
        for (int c = 0; c < copies; c++) CK(cudaMemcpy(dw + (size_t)c * wn, hw.data(), wbytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dx, hx.data(), hx.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        // the copy rate of these bytes (read + write counted, as the copy figure is quoted)
        const double copy_gbs = copy_rate(st, e0, e1, dcopy, (const char *)dw, wbytes, copies, reps);
        for (int n : ns) {
            for (const variant &v : variants) {
                // correctness: 64 sampled rows of each of the n outputs vs a float64 product
                v.fn(st, dout, dx, dw, rows, cols, n);
                CK(cudaStreamSynchronize(st));
                std::vector<float> ho((size_t)n * rows);
                CK(cudaMemcpy(ho.data(), dout, ho.size() * sizeof(float), cudaMemcpyDeviceToHost));
                double err = 0;
                for (int k = 0; k < 64; k++) {
                    int row = (int)(((uint64_t)k * 2654435761u) % rows);
                    for (int r = 0; r < n; r++) {
                        double ref = 0, mag = 0;
                        for (int c = 0; c < cols; c++) {
                            double p = (double)__bfloat162float(hw[(size_t)row * cols + c]) * __bfloat162float(hx[(size_t)r * cols + c]);
                            ref += p;
                            mag += fabs(p);
                        }
                        err = std::max(err, fabs(ho[(size_t)r * rows + row] - ref) / (mag > 0 ? mag : 1));
                    }
                }
                const float ms = burst_ms(st, e0, e1, reps, [&](int i) {
                    v.fn(st, dout, dx, dw + (size_t)(i % copies) * wn, rows, cols, n);
                });
                const double us = ms * 1e3, gbs = wbytes / (us * 1e-6) / 1e9;
                printf("| %s | %d x %d | %d | %s | %.1f | %.0f | %.0f | %.2f | %.1e |\n", names[si], rows, cols, n, v.name, us, gbs,
                       copy_gbs, gbs / copy_gbs, err);
                char line[512];
                int len = snprintf(line, sizeof line,
                                   "{\"shape\":\"%s\",\"rows\":%d,\"cols\":%d,\"n\":%d,\"variant\":\"%s\",\"us\":%.2f,\"GBps\":%.1f,"
                                   "\"copy_GBps\":%.1f,\"max_rel_err\":%.2e,\"reps\":%d}\n",
                                   names[si], rows, cols, n, v.name, us, gbs, copy_gbs, err, reps);
                json.insert(json.end(), line, line + len);
            }
        }
        CK(cudaFree(dw));
        CK(cudaFree(dcopy));
        CK(cudaFree(dx));
        CK(cudaFree(dout));
    }
    fwrite(json.data(), 1, json.size(), stdout);
    return 0;
}
