// gemv8_chain.cu — the production FP8-weight launches of a one-token decode step (k_gemv8,
// src/backend/cuda/cuda_fp8w.cuh), chained as cuda_gemm.cu launches them, so that a whole step's products
// can be timed apart from the rest of the step (attention, output projection, sampling) and set beside
// layer_chain.cu's plain weight stream over the same bytes in the same tiles. A layer of Llama-3.1-8B
// with e4m3 weights and a scale a row:
//   Q|K|V    rmsnorm(h) · [wq; wk; wv]ᵀ, the norm in the prologue, RoPE (interleaved pairs, as octet runs
//            Llama and every Hugging Face checkpoint) and the cache write (e4m3 pages) in the epilogue
//            (GEMV8_STORE, NORM, SEG, ROPE);
//   attn     a stand-in: a 32-CTA launch, att[i] = q[i] / 2 + k[i mod 1024] (layer_chain.cu's);
//   o        h += att · woᵀ (GEMV8_ADD);
//   gate|up  act = silu(g) · u of rmsnorm(h) · [wg; wu]ᵀ, the norm in the prologue (GEMV8_SWIGLU, NORM);
//   down     h += act · wdᵀ (GEMV8_ADD).
// Every launch is a programmatic dependent of the one before, as in the engine; 32 layers (7 GB of
// weights, so HBM) in one CUDA graph, timed by replay. Forms: "engine" (the above), "neox pairs" (RoPE's
// pairs (j, j + hd / 2), as GGUF files of Qwen and others), "no rope" (Q|K|V without the RoPE epilogue),
// "no norms" (Q|K|V and gate|up read h as it is, their prologue the plain absmax and codes), "no attn"
// (o reads q). The check: each form's h after the step is bit for bit the
// h of the same launches run one at a time, ordinary launches with the device synchronised between them
// (each kernel's arithmetic against the CPU is test_cuda_ops'); every h is finite.
// Build: /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc
//        dev/cuda/gemv8_chain.cu -o gemv8_chain;  run: ./gemv8_chain [reps]
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

#define LAYERS 32
#define DIM 4096
#define KVD 1024
#define FFN 14336
#define HD 128

// a weight's codes (below 0x40 in magnitude: |v| < 2, never NaN) and its row scales
__global__ void k_fill_w(uint8_t *q, size_t bytes, float *s, int rows, float scale, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = hash32(seed + i);
        q[i] = (uint8_t)((h & 0x80) | ((h >> 8) % 0x40));
    }
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < (size_t)rows;
         r += (size_t)gridDim.x * blockDim.x)
        s[r] = scale * (1.0f + (hash32(seed + 0x5555 + r) & 255) / 256.0f);
}

// attention stand-in (layer_chain.cu's): att[i] = q[i] / 2 + k[i mod 1024]
__global__ void __launch_bounds__(128) k_attn(const bf16 *q, const bf16 *k, bf16 *att) {
    pdl_wait();
    pdl_trigger();
    const int i = blockIdx.x * 128 + threadIdx.x;
    if (i < DIM) att[i] = __float2bfloat16_rn(0.5f * __bfloat162float(q[i]) + __bfloat162float(k[i & (KVD - 1)]));
}

struct fp8_weight {
    uint8_t *q;
    int rows, cols;
    gemv8_w g() const {
        gemv8_w w;
        w.q = q;
        w.s = (const float *)(q + fp8w_scale_off(rows, cols));
        w.act.fmax = 448.0f;
        w.act.fixed = 0;
        w.act.e5m2 = 0;
        return w;
    }
};

struct layer {
    fp8_weight wq, wk, wv, wo, wg, wu, wd;
};

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 3) reps = 3;
    const lab_dev dev = lab_open();
    const int sms = dev.sms;
    const cudaDeviceProp &prop = dev.prop;
    cudaStream_t st = dev.st;
    cudaEvent_t e0 = dev.e0, e1 = dev.e1;

    // weights
    std::vector<layer> L(LAYERS);
    double step_bytes = 0;
    uint64_t seed = 1;
    auto make = [&](int rows, int cols) {
        fp8_weight w;
        w.rows = rows;
        w.cols = cols;
        const size_t off = fp8w_scale_off(rows, cols), bytes = off + (size_t)rows * sizeof(float);
        CK(cudaMalloc(&w.q, bytes));
        k_fill_w<<<4 * sms, 256, 0, st>>>(w.q, (size_t)rows * fp8w_pitch(cols), (float *)(w.q + off), rows,
                                          1.0f / (float)std::sqrt((double)cols), seed++ * 0x100000000ull);
        CK(cudaGetLastError());
        step_bytes += (double)rows * fp8w_pitch(cols);
        return w;
    };
    for (layer &l : L) {
        l.wq = make(DIM, DIM);
        l.wk = make(KVD, DIM);
        l.wv = make(KVD, DIM);
        l.wo = make(DIM, DIM);
        l.wg = make(FFN, DIM);
        l.wu = make(FFN, DIM);
        l.wd = make(DIM, FFN);
    }
    // activations, norm weights, RoPE's tables and one page of e4m3 cache a layer
    bf16 *h, *q, *k, *v, *att, *act, *nrm;
    CK(cudaMalloc(&h, DIM * sizeof(bf16)));
    CK(cudaMalloc(&q, DIM * sizeof(bf16)));
    CK(cudaMalloc(&k, KVD * sizeof(bf16)));
    CK(cudaMalloc(&v, KVD * sizeof(bf16)));
    CK(cudaMalloc(&att, DIM * sizeof(bf16)));
    CK(cudaMalloc(&act, FFN * sizeof(bf16)));
    CK(cudaMalloc(&nrm, DIM * sizeof(bf16)));
    std::vector<bf16> h0(DIM), hn(DIM);
    for (int i = 0; i < DIM; i++) {
        h0[i] = __float2bfloat16(urand());
        hn[i] = __float2bfloat16(1.0f + 0.25f * urand());
    }
    CK(cudaMemcpy(nrm, hn.data(), DIM * sizeof(bf16), cudaMemcpyHostToDevice));
    int32_t *pos, *slot;
    double *inv_freq;
    float *kvs;
    uint8_t *pages;
    CK(cudaMalloc(&pos, sizeof(int32_t)));
    CK(cudaMalloc(&slot, sizeof(int32_t)));
    CK(cudaMalloc(&inv_freq, HD / 2 * sizeof(double)));
    CK(cudaMalloc(&kvs, 8 * sizeof(float)));
    const size_t page = (size_t)64 * 8 * HD;  // a block of 64 tokens, e4m3
    CK(cudaMalloc(&pages, 2 * page * LAYERS));
    {
        const int32_t p0 = 100, s0 = 5;
        std::vector<double> f(HD / 2);
        for (int j = 0; j < HD / 2; j++) f[j] = std::pow(500000.0, -2.0 * j / HD);
        const std::vector<float> ones(8, 1.0f);
        CK(cudaMemcpy(pos, &p0, sizeof p0, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(slot, &s0, sizeof s0, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(inv_freq, f.data(), f.size() * sizeof(double), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(kvs, ones.data(), 8 * sizeof(float), cudaMemcpyHostToDevice));
    }
    CK(cudaStreamSynchronize(st));

    // one k_gemv8 launch (cuda_gemm.cu's gemv8_go at n = 1): a persistent grid, a programmatic dependent
    bool pdl = true;
    auto go = [&](auto kern, bool swiglu, gemv8_args a, unsigned tiles) {
        const size_t smem = gemv8_smem(a.kp, 1, swiglu);
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, GEMV8_WARPS * 32, smem));
        a.tiles = (int)tiles;
        cudaLaunchAttribute attr[1];
        cudaLaunchConfig_t cfg = pdl_config(dim3(gemv8_ctas((int)tiles, 1, per_sm, sms), 1), dim3(GEMV8_WARPS * 32),
                                            smem, st, attr);
        if (!pdl) cfg.numAttrs = 0;
        CK(cudaLaunchKernelEx(&cfg, kern, a));
        if (!pdl) CK(cudaStreamSynchronize(st));
    };
    auto base = [&](const bf16 *x, const fp8_weight &w) {
        gemv8_args a = {};
        a.x = x;
        a.w = w.g();
        a.w2 = a.w;
        a.n = 1;
        a.rows = w.rows;
        a.cols = w.cols;
        a.kp = (int)fp8w_pitch(w.cols);
        a.kbp = (int)fp8w_kblocks_padded(w.cols);
        a.tpc = 8;
        return a;
    };
    struct form { const char *name; bool rope, norm, attn, neox; };
    const form forms[] = {{"engine", true, true, true, false}, {"neox pairs", true, true, true, true},
                          {"no rope", false, true, true, false}, {"no norms", true, false, true, false},
                          {"no attn", true, true, false, false}};
    auto step = [&](const form &f) {
        for (int li = 0; li < LAYERS; li++) {
            const layer &l = L[li];
            gemv8_args a = base(h, l.wq);
            if (f.norm) {
                a.norm = nrm;
                a.eps = 1e-5f;
                a.norm_threads = rms_threads(DIM);
            }
            const fp8_weight *w3[3] = {&l.wq, &l.wk, &l.wv};
            void *outs[3] = {q, k, v};
            unsigned tiles = 0;
            for (int s = 0; s < 3; s++) {
                a.sw[s] = w3[s]->g();
                a.sout[s] = outs[s];
                a.srows[s] = w3[s]->rows;
                a.cta0[s] = (int)tiles;
                tiles += (unsigned)(w3[s]->rows / 16);
            }
            if (f.rope) {
                gemv_rope &rp = a.rp;
                rp.pos = pos;
                rp.slot = slot;
                rp.inv_freq = inv_freq;
                rp.kc = pages + 2 * page * li;
                rp.vc = pages + 2 * page * li + page;
                rp.ks = rp.vs = kvs;
                rp.hd = HD;
                rp.half = HD / 2;
                rp.neox = f.neox;
                rp.n_kv = 8;
                rp.bs = 64;
                rp.dt = DT_E4M3;
                const int rows3[3] = {DIM, KVD, KVD};
                if (!gemv8_rope_fits(rp, rows3, false)) { fprintf(stderr, "rope does not fit\n"); exit(1); }
                if (f.norm) go(k_gemv8<GEMV8_STORE, bf16, false, false, false, true, true, true>, false, a, tiles);
                else go(k_gemv8<GEMV8_STORE, bf16, false, false, false, false, true, true>, false, a, tiles);
            } else {
                if (f.norm) go(k_gemv8<GEMV8_STORE, bf16, false, false, false, true, true>, false, a, tiles);
                else go(k_gemv8<GEMV8_STORE, bf16, false, false, false, false, true>, false, a, tiles);
            }
            if (f.attn) {
                cudaLaunchAttribute at[1];
                cudaLaunchConfig_t cfg = pdl_config(dim3(DIM / 128), dim3(128), 0, st, at);
                if (!pdl) cfg.numAttrs = 0;
                CK(cudaLaunchKernelEx(&cfg, k_attn, (const bf16 *)q, (const bf16 *)k, att));
                if (!pdl) CK(cudaStreamSynchronize(st));
            }
            a = base(f.attn ? att : q, l.wo);
            a.out = h;
            go(k_gemv8<GEMV8_ADD, bf16, false, false, false>, false, a, DIM / 16);
            a = base(h, l.wg);
            a.w2 = l.wu.g();
            a.out = act;
            if (f.norm) {
                a.norm = nrm;
                a.eps = 1e-5f;
                a.norm_threads = rms_threads(DIM);
                go(k_gemv8<GEMV8_SWIGLU, bf16, false, false, false, true>, true, a, FFN / 16);
            } else {
                go(k_gemv8<GEMV8_SWIGLU, bf16, false, false, false>, true, a, FFN / 16);
            }
            a = base(act, l.wd);
            a.out = h;
            go(k_gemv8<GEMV8_ADD, bf16, false, false, false>, false, a, DIM / 16);
        }
    };

    uint8_t *src, *dst;  // the copy rate: 256 MB at a time from four copies
    CK(cudaMalloc(&src, 1ull << 30));
    CK(cudaMalloc(&dst, 256ull << 20));
    CK(cudaMemset(src, 1, 1ull << 30));
    const double copy_gbs = copy_rate(st, e0, e1, dst, (const char *)src, 256ull << 20, 4, reps);
    printf("%s, %d SMs; %d layers, %.2f GB of e4m3 weights; copy rate %.0f GB/s (read + write), so %.3f ms at the "
           "copy rate\n\n",
           prop.name, sms, LAYERS, step_bytes / 1e9, copy_gbs, step_bytes / (copy_gbs * 1e9) * 1e3);
    printf("| form | launches a step | check | ms a step | µs a layer | weights GB/s | ÷ copy rate |\n"
           "|---|---:|---|---:|---:|---:|---:|\n");
    std::vector<char> json;
    bool ok = true;
    for (const form &f : forms) {
        // the reference: ordinary launches, synchronised one at a time
        pdl = false;
        CK(cudaMemcpy(h, h0.data(), DIM * sizeof(bf16), cudaMemcpyHostToDevice));
        step(f);
        std::vector<bf16> want(DIM), got(DIM);
        CK(cudaMemcpy(want.data(), h, DIM * sizeof(bf16), cudaMemcpyDeviceToHost));
        // the chain as a graph
        pdl = true;
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
        step(f);
        CK(cudaStreamEndCapture(st, &g));
        cudaGraphExec_t ge;
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphDestroy(g));
        CK(cudaMemcpy(h, h0.data(), DIM * sizeof(bf16), cudaMemcpyHostToDevice));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(got.data(), h, DIM * sizeof(bf16), cudaMemcpyDeviceToHost));
        int bad = 0, nonfinite = 0;
        for (int i = 0; i < DIM; i++) {
            bad += memcmp(&want[i], &got[i], sizeof(bf16)) != 0;
            nonfinite += !std::isfinite(__bfloat162float(got[i]));
        }
        const bool pass = bad == 0 && nonfinite == 0;
        ok = ok && pass;
        const float ms = graph_ms(st, e0, e1, ge, reps);
        CK(cudaGraphExecDestroy(ge));
        const int launches = LAYERS * (f.attn ? 5 : 4);
        const double gbs = step_bytes / (ms * 1e-3) / 1e9;
        char check[64];
        snprintf(check, sizeof check, pass ? "same bits" : "%d differ, %d not finite: FAILED", bad, nonfinite);
        printf("| %s | %d | %s | %.3f | %.2f | %.0f | %.3f |\n", f.name, launches, check, ms, ms * 1e3 / LAYERS, gbs,
               gbs / copy_gbs);
        char line[256];
        snprintf(line, sizeof line,
                 "{\"form\":\"%s\",\"launches\":%d,\"check\":%s,\"ms\":%.4f,\"GBps\":%.1f,\"copy_GBps\":%.1f}\n",
                 f.name, launches, pass ? "true" : "false", ms, gbs, copy_gbs);
        json.insert(json.end(), line, line + strlen(line));
    }
    json.push_back(0);
    printf("\n%s", json.data());
    return ok ? 0 : 1;
}
