// gemv8_bench.cu — times the skinny FP8 GEMM of decode steps (k_gemv8, src/backend/cuda/cuda_fp8w.cuh;
// e4m3 weights with a scale per output row, tokens quantized per token in the kernel's prologue) at
// Llama-3.1-8B's shapes for n = 1 and 8 tokens — the plain product at each weight's shape and the SwiGLU
// launch with its RMSNorm prologue (gate and up, 14,336 x 4,096 each) — beside a device-to-device copy
// of the same weight bytes (the bandwidth the product cannot beat). Three launch forms of one kernel: a
// CTA a 16-row tile with shared memory for 8 tokens, the same for the tokens there are, and the
// persistent grid of cuda_gemm.cu (as many CTAs as the GPU holds). The plain product's first form is
// checked against a float64 CPU product of the same codes on sampled rows (the activation codes and
// scales computed as docs/fp8_weights.md says), and every other form must give its bits exactly.
// Launches are programmatic dependents of the one before, as in a decode step. Prints a table, then one
// JSON object per line. The weights rotate over enough copies (>= 512 MB) that every launch reads them
// from HBM; a timed interval holds BURST launches back to back.
// Build: make CUDA=1 gpu-tests (build-cuda/gpu/gemv8_bench); run: build-cuda/gpu/gemv8_bench [reps]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

extern "C" {
#include "../../src/backend/weight.h"
}
typedef __nv_bfloat16 bf16;
#include "lab_util.cuh"
#include "../../src/backend/cuda/cuda_fp8w.cuh"


static uint8_t e4m3(float v) { return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); }
static float e4m3_value(uint8_t c) {
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3);
    return __half2float(__half(h));
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    if (reps < 3) reps = 3;
    const int shapes[][2] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}, {14336, 4096}};
    const char *names[] = {"wq/wo", "wk/wv", "w_gate/w_up", "w_down", "output", "gate|up swiglu+norm"};
    const int SWIGLU_SHAPE = 5;
    const int ns[] = {1, 8};
    typedef void (*kern_t)(const gemv8_args);
    struct variant {
        const char *name;
        kern_t kern;
        bool smem_for_n, swiglu, persistent;
    };
    const kern_t store_k = k_gemv8<GEMV8_STORE, float, false, false, false>;
    const kern_t swiglu_k = k_gemv8<GEMV8_SWIGLU, bf16, false, false, false, true>;
    // a CTA a tile with shared memory for 8 tokens (the launch before), for the tokens there are, and the
    // persistent grid (cuda_gemm.cu's launch)
    const variant variants[] = {
        {"tiles, smem 8", store_k, false, false, false},  {"tiles, smem n", store_k, true, false, false},
        {"persistent", store_k, true, false, true},       {"tiles, smem 8", swiglu_k, false, true, false},
        {"tiles, smem n", swiglu_k, true, true, false},   {"persistent", swiglu_k, true, true, true},
    };
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<char> json;
    printf("| shape | variant | rows x cols | n | us | GB/s read | copy GB/s (r+w) | vs copy | max rel err |\n"
           "|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int rows = shapes[si][0], cols = shapes[si][1];
        const int kp = (int)fp8w_pitch(cols);
        const size_t off = fp8w_scale_off(rows, cols), wbytes = off + (size_t)rows * sizeof(float);
        int copies = (int)((512ull << 20) / wbytes) + 1;
        if (copies > 64) copies = 64;
        // the weight: a row scale amax / 448 of random values, their codes; x: random bf16 tokens
        std::vector<uint8_t> hw(wbytes, 0);
        std::vector<float> sw(rows);
        std::vector<float> rowv(cols);
        for (int r = 0; r < rows; r++) {
            float amax = 0;
            for (int c = 0; c < cols; c++) amax = std::max(amax, std::fabs(rowv[c] = urand() * 0.02f));
            sw[r] = amax > 0 ? amax / 448.0f : 1.0f;
            for (int c = 0; c < cols; c++) hw[(size_t)r * kp + c] = e4m3(rowv[c] / sw[r]);
        }
        memcpy(hw.data() + off, sw.data(), (size_t)rows * sizeof(float));
        std::vector<bf16> hx((size_t)8 * cols);
        for (auto &v : hx) v = __float2bfloat16(urand() * 3.0f);
        // the tokens' codes and scales as the kernel computes them
        std::vector<float> xq((size_t)8 * cols), sx(8);
        for (int t = 0; t < 8; t++) {
            float amax = 0;
            for (int c = 0; c < cols; c++) amax = std::max(amax, std::fabs(__bfloat162float(hx[(size_t)t * cols + c])));
            float s = amax / 448.0f;
            if (!(s > 0) || !std::isfinite(s)) s = 1.0f;
            sx[t] = s;
            const float inv = 1.0f / s;
            for (int c = 0; c < cols; c++)
                xq[(size_t)t * cols + c] = e4m3_value(e4m3(__bfloat162float(hx[(size_t)t * cols + c]) * inv));
        }
        uint8_t *dw, *dcopy;
        bf16 *dx, *dnorm;
        float *dout;
        CK(cudaMalloc(&dw, wbytes * copies));
        CK(cudaMalloc(&dcopy, wbytes));
        CK(cudaMalloc(&dx, hx.size() * sizeof(bf16)));
        CK(cudaMalloc(&dout, (size_t)8 * rows * sizeof(float)));
        for (int c = 0; c < copies; c++) CK(cudaMemcpy(dw + (size_t)c * wbytes, hw.data(), wbytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dx, hx.data(), hx.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        std::vector<bf16> hn(cols);  // the SwiGLU launch's RMSNorm weight
        for (auto &v : hn) v = __float2bfloat16(1.0f + 0.5f * urand());
        CK(cudaMalloc(&dnorm, cols * sizeof(bf16)));
        CK(cudaMemcpy(dnorm, hn.data(), cols * sizeof(bf16), cudaMemcpyHostToDevice));
        const double copy_gbs = copy_rate(st, e0, e1, dcopy, (const char *)dw, wbytes, copies, reps);
        for (int n : ns) {
            gemv8_args a = {};
            a.out = dout;
            a.x = dx;
            a.n = n;
            a.rows = rows;
            a.cols = cols;
            a.kp = kp;
            a.kbp = (int)fp8w_kblocks_padded(cols);
            a.tpc = 8;
            a.w.act.fmax = 448.0f;
            a.w2 = a.w;
            a.norm = dnorm;
            a.eps = 1e-5f;
            a.norm_threads = rms_threads(cols);
            std::vector<uint32_t> first;  // the first variant's output bits (every variant must equal them)
            for (const variant &v : variants) {
                if (v.swiglu != (si == SWIGLU_SHAPE)) continue;
                const size_t smem = gemv8_smem(kp, v.smem_for_n ? std::min(n, 8) : 8, v.swiglu);
                CK(cudaFuncSetAttribute(v.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
                int per_sm = 0;
                CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.kern, GEMV8_WARPS * 32, smem));
                const int tiles = (rows + 15) / 16, gy = (n + 7) / 8;
                a.tiles = tiles;
                const unsigned gx = v.persistent ? gemv8_ctas(tiles, gy, per_sm, sms) : (unsigned)tiles;
                auto launch = [&](const uint8_t *w, const uint8_t *w2) {
                    a.w.q = w;
                    a.w.s = (const float *)(w + off);
                    a.w2.q = w2;
                    a.w2.s = (const float *)(w2 + off);
                    cudaLaunchAttribute attr[1];
                    const cudaLaunchConfig_t cfg = pdl_config(dim3(gx, gy), dim3(GEMV8_WARPS * 32), smem, st, attr);
                    CK(cudaLaunchKernelEx(&cfg, v.kern, a));
                };
                CK(cudaMemset(dout, 0, (size_t)8 * rows * sizeof(float)));
                launch(dw, dw + wbytes);
                CK(cudaStreamSynchronize(st));
                CK(cudaGetLastError());
                // (bf16 or f32 outputs, as words)
                std::vector<uint32_t> bits(v.swiglu ? ((size_t)n * rows + 1) / 2 : (size_t)n * rows);
                CK(cudaMemcpy(bits.data(), dout, bits.size() * 4, cudaMemcpyDeviceToHost));
                double err = 0;
                if (first.empty()) {
                    first = bits;
                    if (!v.swiglu) {  // 64 sampled rows of each of the n outputs vs a float64 product of the same codes
                        const float *ho = (const float *)bits.data();
                        for (int k = 0; k < 64; k++) {
                            const int row = (int)(((uint64_t)k * 2654435761u) % rows);
                            for (int t = 0; t < n; t++) {
                                double ref = 0, mag = 0;
                                for (int c = 0; c < cols; c++) {
                                    const double p = (double)e4m3_value(hw[(size_t)row * kp + c]) * xq[(size_t)t * cols + c];
                                    ref += p;
                                    mag += std::fabs(p);
                                }
                                const double sc = (double)(sx[t] * sw[row]);
                                err = std::max(err, std::fabs(ho[(size_t)t * rows + row] - ref * sc) / (mag > 0 ? mag * sc : 1));
                            }
                        }
                    }
                } else if (bits != first) {
                    fprintf(stderr, "%s n=%d: variant %s differs from %s\n", names[si], n, v.name, variants[0].name);
                    return 1;
                }
                const int nw = v.swiglu ? 2 : 1;
                const float ms = burst_ms(st, e0, e1, reps, [&](int i) {
                    const int c0 = (i * nw) % copies;
                    launch(dw + (size_t)c0 * wbytes, dw + (size_t)((c0 + 1) % copies) * wbytes);
                });
                const double us = ms * 1e3, gbs = nw * wbytes / (us * 1e-6) / 1e9;
                printf("| %s | %s (%u CTAs) | %d x %d | %d | %.1f | %.0f | %.0f | %.2f | %.1e |\n", names[si], v.name, gx,
                       rows, cols, n, us, gbs, copy_gbs, gbs / copy_gbs, err);
                char line[512];
                int len = snprintf(line, sizeof line,
                                   "{\"shape\":\"%s\",\"variant\":\"%s\",\"rows\":%d,\"cols\":%d,\"n\":%d,\"us\":%.2f,"
                                   "\"GBps\":%.1f,\"copy_GBps\":%.1f,\"max_rel_err\":%.2e,\"reps\":%d}\n",
                                   names[si], v.name, rows, cols, n, us, gbs, copy_gbs, err, reps);
                json.insert(json.end(), line, line + len);
            }
        }
        CK(cudaFree(dw));
        CK(cudaFree(dcopy));
        CK(cudaFree(dx));
        CK(cudaFree(dnorm));
        CK(cudaFree(dout));
    }
    fwrite(json.data(), 1, json.size(), stdout);
    return 0;
}
