// act_codes.cu — times the kernels that produce an FP8-weight prefill's activation codes at Llama-3.1-8B's
// shapes (dim 4096, ffn 14336; n = 2048 and 8192 tokens), beside the bf16-weight path's kernels for the same
// step, and the forms that skip the bf16 activation an FP8 product never reads:
//   silu_mul        the bf16 path's SwiGLU (k_ew8 with ew_act_mul: 8 elements a thread over the tensor)
//   act_fp8         k_act_mul_fp8 (cuda_fp8w_act.cuh) given act: act stored in bf16, re-read for the codes
//   act_fp8_smem    k_act_mul_fp8 without act (the prefill FFN's form): the row kept in shared memory
//                   (256 threads a row, as production launches it; _tN: N threads)
//   act_fp8_regs    the same values kept in registers instead (NK runs of 8 a thread)
//   rmsnorm         the bf16 path's norm (k_rmsnorm)
//   rmsnorm_fp8     k_rmsnorm_fp8: the codes from the values in registers, xn not stored
//   rmsnorm_fp8_warp a warp a row (8 rows a CTA), summing in the CTA form's order (so the same bits)
// Before timing, every form's codes and scales are compared bit for bit (the program fails on a difference)
// with act_fp8's / rmsnorm_fp8's, and those with the separate passes' (silu_mul or rms_row, then
// k_fp8w_quant) and with a float64 CPU reference (the codes' NMSE against the exact
// activation: e4m3's rounding, about 1e-3). test_cuda_ops checks the production kernels against the CPU
// backend. Per launch: µs (median of reps intervals of BURST launches, inputs rotated through two copies so
// that they come from HBM) and GB/s of the bytes it must move.
// Build: make CUDA=1 gpu-tests (build-cuda/gpu/act_codes); run: build-cuda/gpu/act_codes [reps]
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
#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
}
typedef __nv_bfloat16 bf16;
#include "lab_util.cuh"
#include "../../src/backend/cuda/cuda_fp8w.cuh"
#include "../../src/backend/cuda/cuda_fp8w_act.cuh"
#include "../../src/backend/cuda/cuda_kv_store.cuh"
#include "../../src/backend/cuda/cuda_elementwise.cuh"

#define COPIES 2

// ---------------------------------------------------------------- the forms under test
// the row in registers: thread t's runs t + k·blockDim.x for k < NK (cols / 8 <= NK · blockDim.x)
template <int ACT, int NK> __global__ void k_act_fp8_regs(const bf16 *g, const bf16 *u, int cols, int n, fp8w_dsts q) {
    const size_t base = (size_t)blockIdx.x * cols;
    const uint4 *gr = (const uint4 *)(g + base), *ur = (const uint4 *)(u + base);
    const int runs = cols / 8;
    uint4 gv[NK], uv[NK], kept[NK];
    int idx[NK];
#pragma unroll
    for (int k = 0; k < NK; k++) {
        idx[k] = threadIdx.x + k * blockDim.x;
        if (idx[k] < runs) { gv[k] = gr[idx[k]]; uv[k] = ur[idx[k]]; }
    }
    float m = 0;
#pragma unroll
    for (int k = 0; k < NK; k++)
        if (idx[k] < runs) kept[k] = act_mul8<ACT>(gv[k], uv[k], m);
    __shared__ float red[32];
    fp8w_quant_kept<NK>(kept, idx, runs, cols, blockIdx.x, n, q, fp8w_cta_max(m, red));
}

// One run's values, as rms_store computes them.
__device__ __forceinline__ uint4 rms_run(const uint4 &x, const uint4 &w, float r) {
    uint4 ov;
    const __nv_bfloat162 *xp = (const __nv_bfloat162 *)&x, *wp = (const __nv_bfloat162 *)&w;
    __nv_bfloat162 *op = (__nv_bfloat162 *)&ov;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const float2 a = __bfloat1622float2(xp[e]), g = __bfloat1622float2(wp[e]);
        op[e] = __floats2bfloat162_rn(a.x * r * g.x, a.y * r * g.y);
    }
    return ov;
}

// A warp a row. The sum of squares is rms_row's at T threads: lane l plays threads l + 32k (k < T/32), each
// summing its runs t and t + T as rms_partial does; each played warp's butterfly, then the butterfly over
// the T/32 warp sums (zero past them), as rms_reduce — so the same r, the same values, the same codes.
// VW = T / 32 played warps (8 at dim 4096).
template <int VW>
__global__ void __launch_bounds__(256) k_rmsnorm_fp8_warp(const bf16 *x, const bf16 *w, int dim, float eps, int n,
                                                          fp8w_dsts q) {
    const int lane = threadIdx.x & 31, r = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (r >= n) return;
    constexpr int T = 32 * VW;
    const int runs = dim / 8;
    const uint4 *xr = (const uint4 *)(x + (size_t)r * dim), *wr = (const uint4 *)w;
    uint4 xv[VW][RMS_VEC];
#pragma unroll
    for (int k = 0; k < VW; k++)
#pragma unroll
        for (int u = 0; u < RMS_VEC; u++) {
            const int i = lane + 32 * k + u * T;
            if (i < runs) xv[k][u] = xr[i];
        }
    float ws[VW];
#pragma unroll
    for (int k = 0; k < VW; k++) {
        float ss = 0;
#pragma unroll
        for (int u = 0; u < RMS_VEC; u++) {
            if (lane + 32 * k + u * T >= runs) continue;
            const __nv_bfloat162 *p = (const __nv_bfloat162 *)&xv[k][u];
#pragma unroll
            for (int e = 0; e < 4; e++) { float2 f = __bfloat1622float2(p[e]); ss += f.x * f.x + f.y * f.y; }
        }
        for (int s = 16; s > 0; s >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, s);
        ws[k] = ss;
    }
    float v = 0;
#pragma unroll
    for (int k = 0; k < VW; k++) v = lane == k ? ws[k] : v;
    for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffff, v, s);
    const float rr = rsqrtf(v / dim + eps);
    // the values, once for the absmax and again for the codes (the weight row is in L1 by then): f(i, run)
    auto each_run = [&](auto f) {
#pragma unroll
        for (int k = 0; k < VW; k++)
#pragma unroll
            for (int u = 0; u < RMS_VEC; u++) {
                const int i = lane + 32 * k + u * T;
                if (i < runs) f(i, rms_run(xv[k][u], wr[i], rr));
            }
    };
    float m = 0;
    each_run([&](int, const uint4 &ov) {
        const __nv_bfloat162 *op = (const __nv_bfloat162 *)&ov;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float2 st = __bfloat1622float2(op[e]);
            m = fmaxf(m, fmaxf(fabsf(st.x), fabsf(st.y)));
        }
    });
    for (int s = 16; s > 0; s >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, s));
#pragma unroll
    for (int j = 0; j < 2; j++) {
        if (j >= q.count) break;
        const fp8w_dst &d = q.d[j];
        const float sc = fp8w_row_scale(d.a.fixed > 0 ? 0.0f : m, d.a), inv = 1.0f / sc;
        uint8_t *xq = d.xq + (size_t)r * d.kp;
        each_run([&](int i, const uint4 &ov) { *(uint2 *)(xq + 8 * i) = fp8w_encode8(ov, inv, d.a.e5m2); });
        for (int i = dim + lane; i < d.kp; i += 32) xq[i] = 0;
        if (lane == 0)
            for (int k = 0; k < d.rep; k++) d.sx[(size_t)k * n + r] = sc;
    }
}

// ---------------------------------------------------------------- set-up and checks
__global__ void k_fill(bf16 *p, size_t count, uint64_t seed, float amp) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull; z = (z ^ (z >> 27)) * 0x94D049BB133111EBull; z ^= z >> 31;
        p[i] = __float2bfloat16_rn(amp * ((float)((z >> 40) * (1.0 / (1 << 23))) - 1.0f));
    }
}

static float e4m3_value(uint8_t c) {
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3);
    return __half2float(__half(h));
}

struct codes {
    std::vector<uint8_t> q;
    std::vector<float> s;
};
static codes fetch(const uint8_t *xq, const float *sx, int n, int kp) {
    codes c;
    c.q.resize((size_t)n * kp);
    c.s.resize(n);
    CK(cudaMemcpy(c.q.data(), xq, c.q.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(c.s.data(), sx, n * sizeof(float), cudaMemcpyDeviceToHost));
    return c;
}
static void same(const char *what, const codes &a, const codes &b) {
    size_t dq = 0, ds = 0;
    for (size_t i = 0; i < a.q.size(); i++) dq += a.q[i] != b.q[i];
    for (size_t i = 0; i < a.s.size(); i++) ds += memcmp(&a.s[i], &b.s[i], 4) != 0;
    printf("check %-18s codes differing %zu of %zu, scales differing %zu\n", what, dq, a.q.size(), ds);
    if (dq || ds) { fprintf(stderr, "act_codes: %s differs from the production kernel\n", what); exit(1); }
}
// NMSE of the dequantized codes of rows [0, rows) against exact (f64 [rows][cols])
static double nmse(const codes &c, const std::vector<double> &exact, int rows, int cols, int kp) {
    double e = 0, p = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            const double v = exact[(size_t)r * cols + j], d = e4m3_value(c.q[(size_t)r * kp + j]) * (double)c.s[r] - v;
            e += d * d;
            p += v * v;
        }
    return e / p;
}
static std::vector<float> host_bf16(const bf16 *d, size_t count) {
    std::vector<bf16> h(count);
    CK(cudaMemcpy(h.data(), d, count * sizeof(bf16), cudaMemcpyDeviceToHost));
    std::vector<float> f(count);
    for (size_t i = 0; i < count; i++) f[i] = __bfloat162float(h[i]);
    return f;
}

static void report(const char *name, int n, float ms, double bytes, double copy) {
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("%-18s n=%-5d %9.1f us  %7.0f GB/s  (%.2f of copy)\n", name, n, ms * 1e3, gbs, gbs / copy);
    printf("{\"lab\":\"act_codes\",\"form\":\"%s\",\"n\":%d,\"us\":%.2f,\"gbs\":%.1f,\"copy_gbs\":%.1f}\n", name, n,
           ms * 1e3, gbs, copy);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 20;
    const int D = 4096, F = 14336, CHECK_ROWS = 64;
    const float eps = 1e-5f;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s\n", prop.name);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int ns[2] = {2048, 8192};
    const int nmax = 8192;
    const size_t gu = (size_t)nmax * F, xd = (size_t)nmax * D;
    bf16 *g, *u, *act, *x, *xn, *wn;
    CK(cudaMalloc(&g, COPIES * gu * sizeof(bf16)));
    CK(cudaMalloc(&u, COPIES * gu * sizeof(bf16)));
    CK(cudaMalloc(&act, gu * sizeof(bf16)));
    CK(cudaMalloc(&x, COPIES * xd * sizeof(bf16)));
    CK(cudaMalloc(&xn, xd * sizeof(bf16)));
    CK(cudaMalloc(&wn, D * sizeof(bf16)));
    k_fill<<<1024, 256>>>(g, COPIES * gu, 1, 4.0f);
    k_fill<<<1024, 256>>>(u, COPIES * gu, 2, 2.0f);
    k_fill<<<1024, 256>>>(x, COPIES * xd, 3, 1.0f);
    k_fill<<<8, 256>>>(wn, D, 4, 1.5f);
    uint8_t *xq;
    float *sx;
    CK(cudaMalloc(&xq, gu));
    CK(cudaMalloc(&sx, nmax * sizeof(float)));
    CK(cudaDeviceSynchronize());
    // the copy rate of the largest buffer, the ceiling of every form
    const double copy = copy_rate(st, e0, e1, act, (const char *)g, gu * sizeof(bf16), 1, 5);
    printf("copy rate %.0f GB/s (read + write)\n", copy);
    fp8w_act a = {448.0f, 0.0f, 0};
    auto dsts = [&](int kp) {
        fp8w_dsts q = {};
        q.d[0] = {xq, sx, a, kp, 1};
        q.count = 1;
        return q;
    };
    const int smem = F * 2;
    CK(cudaFuncSetAttribute(k_act_mul_fp8<FFN_ACT_SILU>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    for (int n : ns) {
        const fp8w_dsts qf = dsts(F), qd = dsts(D);
        // --- checks (first copy)
        k_act_mul_fp8<FFN_ACT_SILU><<<n, 256, 0, st>>>(act, g, u, F, n, qf);
        CK(cudaStreamSynchronize(st));
        const codes ref = fetch(xq, sx, n, F);
        {
            std::vector<float> hg = host_bf16(g, (size_t)CHECK_ROWS * F), hu = host_bf16(u, (size_t)CHECK_ROWS * F);
            std::vector<double> ex((size_t)CHECK_ROWS * F);
            for (size_t i = 0; i < ex.size(); i++) ex[i] = hg[i] / (1.0 + exp(-(double)hg[i])) * hu[i];
            printf("check act_fp8         NMSE against float64 %.3e (n=%d, %d rows)\n", nmse(ref, ex, CHECK_ROWS, F, F),
                   n, CHECK_ROWS);
        }
        CK(cudaMemset(xq, 0xff, (size_t)n * F));
        k_act_mul_fp8<FFN_ACT_SILU><<<n, 256, smem, st>>>(nullptr, g, u, F, n, qf);
        CK(cudaStreamSynchronize(st));
        same("act_fp8_smem", ref, fetch(xq, sx, n, F));
        CK(cudaMemset(xq, 0xff, (size_t)n * F));
        k_act_fp8_regs<FFN_ACT_SILU, 8><<<n, 224, 0, st>>>(g, u, F, n, qf);
        CK(cudaStreamSynchronize(st));
        same("act_fp8_regs8", ref, fetch(xq, sx, n, F));
        CK(cudaMemset(xq, 0xff, (size_t)n * F));
        k_act_fp8_regs<FFN_ACT_SILU, 4><<<n, 448, 0, st>>>(g, u, F, n, qf);
        CK(cudaStreamSynchronize(st));
        same("act_fp8_regs4", ref, fetch(xq, sx, n, F));

        const int T = rms_threads(D);
        k_rmsnorm_fp8<<<n, T, 0, st>>>(xn, x, wn, D, eps, n, qd);
        CK(cudaStreamSynchronize(st));
        const codes rref = fetch(xq, sx, n, D);
        {
            std::vector<float> hx = host_bf16(x, (size_t)CHECK_ROWS * D), hw = host_bf16(wn, D);
            std::vector<double> ex((size_t)CHECK_ROWS * D);
            for (int r = 0; r < CHECK_ROWS; r++) {
                double ss = 0;
                for (int j = 0; j < D; j++) ss += (double)hx[(size_t)r * D + j] * hx[(size_t)r * D + j];
                const double rr = 1.0 / sqrt(ss / D + eps);
                for (int j = 0; j < D; j++) ex[(size_t)r * D + j] = hx[(size_t)r * D + j] * rr * hw[j];
            }
            printf("check rmsnorm_fp8     NMSE against float64 %.3e (n=%d, %d rows)\n",
                   nmse(rref, ex, CHECK_ROWS, D, D), n, CHECK_ROWS);
        }
        CK(cudaMemset(xq, 0xff, (size_t)n * D));
        k_rmsnorm<<<n, T, 0, st>>>(xn, x, wn, D, eps);
        k_fp8w_quant<<<n, 256, 0, st>>>(xq, sx, xn, n, D, D, a, 1);
        CK(cudaStreamSynchronize(st));
        same("rmsnorm+fp8w_quant", rref, fetch(xq, sx, n, D));
        CK(cudaMemset(xq, 0xff, (size_t)n * F));
        k_ew8<ew_act_mul<FFN_ACT_SILU>><<<(unsigned)(((long)n * F / 8 + 255) / 256), 256, 0, st>>>(act, g, u, (long)n * F / 8);
        k_fp8w_quant<<<n, 256, 0, st>>>(xq, sx, act, n, F, F, a, 1);
        CK(cudaStreamSynchronize(st));
        same("silu_mul+fp8w_quant", ref, fetch(xq, sx, n, F));
        if (T != 256) { fprintf(stderr, "act_codes: the warp form plays 8 warps (T = 256), not %d\n", T); exit(1); }
        CK(cudaMemset(xq, 0xff, (size_t)n * D));
        k_rmsnorm_fp8_warp<8><<<(n + 7) / 8, 256, 0, st>>>(x, wn, D, eps, n, qd);
        CK(cudaStreamSynchronize(st));
        same("rmsnorm_fp8_warp", rref, fetch(xq, sx, n, D));

        // --- timing (inputs rotated through the copies)
        const double bg = 2.0 * n * F * 2, ba = (double)n * F * 2, bq = (double)n * F;
        auto G = [&](int i) { return g + (size_t)(i % COPIES) * gu; };
        auto U = [&](int i) { return u + (size_t)(i % COPIES) * gu; };
        auto X = [&](int i) { return x + (size_t)(i % COPIES) * xd; };
        auto timed = [&](const char *name, double bytes, auto launch) {
            report(name, n, burst_ms(st, e0, e1, reps, launch), bytes, copy);
        };
        const long n8 = (long)n * F / 8;
        const unsigned g8 = (unsigned)((n8 + 255) / 256);
        timed("silu_mul", bg + ba, [&](int i) { k_ew8<ew_act_mul<FFN_ACT_SILU>><<<g8, 256, 0, st>>>(act, G(i), U(i), n8); });
        timed("act_fp8", bg + bq,
              [&](int i) { k_act_mul_fp8<FFN_ACT_SILU><<<n, 256, 0, st>>>(act, G(i), U(i), F, n, qf); });
        for (int th : {256, 128, 512, 1024}) {
            char nm[32];
            snprintf(nm, sizeof nm, th == 256 ? "act_fp8_smem" : "act_fp8_smem_t%d", th);
            timed(nm, bg + bq,
                  [&](int i) { k_act_mul_fp8<FFN_ACT_SILU><<<n, th, smem, st>>>(nullptr, G(i), U(i), F, n, qf); });
        }
        timed("act_fp8_regs8", bg + bq,
              [&](int i) { k_act_fp8_regs<FFN_ACT_SILU, 8><<<n, 224, 0, st>>>(G(i), U(i), F, n, qf); });
        timed("act_fp8_regs4", bg + bq,
              [&](int i) { k_act_fp8_regs<FFN_ACT_SILU, 4><<<n, 448, 0, st>>>(G(i), U(i), F, n, qf); });
        const double bx = (double)n * D * 2, bxq = (double)n * D;
        timed("rmsnorm", 2 * bx, [&](int i) { k_rmsnorm<<<n, T, 0, st>>>(xn, X(i), wn, D, eps); });
        timed("rmsnorm_fp8", bx + bxq, [&](int i) { k_rmsnorm_fp8<<<n, T, 0, st>>>(xn, X(i), wn, D, eps, n, qd); });
        timed("rmsnorm_fp8_warp", bx + bxq,
              [&](int i) { k_rmsnorm_fp8_warp<8><<<(n + 7) / 8, 256, 0, st>>>(X(i), wn, D, eps, n, qd); });
    }
    CK(cudaGetLastError());
    return 0;
}
