// gemv_bench.cu — times the decode GEMM (src/backend/cuda/cuda_gemv.cuh) at Llama-3.1-8B's
// shapes for n = 1, 4, 8 rows of x, per tuning variant (warps per CTA, loads in flight per
// lane, warps per weight row), beside a device-to-device copy of the same weight bytes (the bandwidth the
// product cannot beat). Each variant is checked first against a float64 CPU
// product on sampled rows. Prints a table, then one JSON object per line. The "w" variants are the CUDA-core
// k_gemv (which decode steps ran before k_gemv_mma); "mma" is the tensor-core form they run now.
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
};



int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    if (reps < 3) reps = 3;
    const int shapes[][2] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}};
    const char *names[] = {"wq/wo", "wk/wv", "w_gate/w_up", "w_down", "output"};
    const int ns[] = {1, 4, 8};
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
