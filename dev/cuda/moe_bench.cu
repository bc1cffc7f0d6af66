// moe_bench.cu — times the grouped expert GEMM of the CUDA moe_ffn (k_moe_gemm, src/backend/cuda/cuda_moe.cuh)
// at Qwen3-30B-A3B's (bf16, 128 experts, top 8), Mixtral-8x7B's (bf16, 8 experts, top 2) and gpt-oss-20b's
// (MXFP4, 32 experts, top 4) shapes for n = 1, 8, 64 and 2048 tokens: the gate/up launch (with SiLU) and the
// down launch, each as the op runs them (tiles of 8·NB grouped rows, NB from n as cuda_moe.cu picks it), on
// random routings rotated so that the chosen experts come from HBM. Per launch: µs, the GB/s of the chosen
// experts' weight bytes (the traffic a decode step cannot avoid) beside the device-to-device copy rate, and
// TFLOP/s. At n = 2048 (NB = 8) both forms run: k_moe_gemm, and the shared-memory tiled k_moe_gemm_tc
// (cuda_moe_tc.cuh) that cuda_moe.cu launches for such tiles ("tc" rows). Before timing, sampled h values
// (gate/up) are checked against a float64 product of the same weights (max relative error), k_moe_gemm_tc's h
// and y against k_moe_gemm's bit for bit (the program fails on a difference), and first of all the MXFP4
// widening (moe_mx_widen of the stored word moe_mx_rot_word) against its definition (moe_e2m1_pair, byte by
// byte) on every 32-bit code word, in both forms and at the scale bytes 0, 127 and 128. The weights are random
// stored words (the reference reads the codes they hold); "gpt-oss-20b-wide" runs the same shape in the wide
// MXFP4 form (MOE_W_MXFP4_WIDE, for scales past 2^1), whose weights here are the plain form's.
// Prints a table, then one JSON object per line.
// Build: make CUDA=1 gpu-tests (build-cuda/gpu/moe_bench); run: build-cuda/gpu/moe_bench [reps [model [n]]], where
// model (a shape's name, or "all") and n keep only those rows, so that a profiler can be pointed at one launch
// (ncu --kernel-name-base demangled names them k_moe_gemm<(int)3, (int)1, (bool)1> and so on).
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
#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
}
typedef __nv_bfloat16 bf16;
#include "lab_util.cuh"
#include "../../src/backend/cuda/cuda_fp8w.cuh"
#include "../../src/backend/cuda/cuda_moe.cuh"
#include "../../src/backend/cuda/cuda_moe_tc.cuh"

#define ROUTINGS 8  // routings rotated through the timed launches

// Random weight bytes on the device: bf16 uniform in ±amp, or MXFP4 random codes under scale 2^(s - 127).
__global__ void k_fill(uint8_t *p, size_t n, uint64_t seed, int mode, float amp, int mx_scale_from) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 29;
        if (mode == 0 && i % 2 == 0 && i + 1 < n) {
            const bf16 v = __float2bfloat16(((float)(h >> 40) / (1 << 24) * 2 - 1) * amp);
            memcpy(p + i, &v, 2);
        } else if (mode == 1) {
            p[i] = i >= (size_t)mx_scale_from ? (uint8_t)(122 + (h & 3)) : (uint8_t)h;
        }
    }
}

static int nb_for(int n, int E, int K) {  // cuda_moe.cu's moe_nb
    const long per = ((long)n * K + E - 1) / E;
    return per <= 4 ? 1 : per <= 8 ? 2 : per <= 16 ? 4 : 8;
}

template <int F, bool GU> static void go(int nb, dim3 grid, cudaStream_t st, const moe_gemm_args &a, bool tc) {
    if (tc) {  // (nb == 8) the shared-memory tiled form, as cuda_moe.cu's gemm_go launches it
        grid.x = (unsigned)((a.R + MOE_TC_ROWS - 1) / MOE_TC_ROWS);
        k_moe_gemm_tc<F, GU><<<grid, MOE_TC_WARPS * 32, moe_tc_smem(F, GU), st>>>(a);
        return;
    }
    switch (nb) {
    case 1: k_moe_gemm<F, 1, GU><<<grid, MOE_WARPS * 32, 0, st>>>(a); break;
    case 2: k_moe_gemm<F, 2, GU><<<grid, MOE_WARPS * 32, 0, st>>>(a); break;
    case 4: k_moe_gemm<F, 4, GU><<<grid, MOE_WARPS * 32, 0, st>>>(a); break;
    default: k_moe_gemm<F, 8, GU><<<grid, MOE_WARPS * 32, 0, st>>>(a); break;
    }
}

static float bf16_host(const uint8_t *p) {
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float mx_host(const uint8_t *codes, uint8_t s, int c) {
    static const float v[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    const int q = c & 1 ? codes[c / 2] >> 4 : codes[c / 2] & 15;
    return (q & 8 ? -v[q & 7] : v[q & 7]) * ldexpf(1.0f, (int)s - 127);
}

struct shape { const char *name; int fmt, E, K, dim, F; };

// The code word whose moe_mx_rot_word is w (the device holds random stored words; the reference reads these).
static uint32_t mx_unrot_word(uint32_t w) {
    uint32_t c = 0;
    for (int i = 0; i < 32; i++)  // (moe_mx_rot_word moves each bit on its own)
        if (w & moe_mx_rot_word(1u << i)) c |= 1u << i;
    return c;
}

// moe_mx_widen of moe_mx_rot_word(c) against moe_e2m1_pair times the scale, both forms, scale bytes 127 (the
// definition itself), 0 and 128 (the wide form's), on the code words [base, base + gridDim·blockDim·per); bad:
// mismatches.
__global__ void k_e2m1_check(uint64_t base, uint32_t per, unsigned long long *bad) {
    const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned n = 0;
    for (uint32_t i = 0; i < per; i++) {
        const uint32_t c = (uint32_t)(base + t * per + i), w = moe_mx_rot_word(c);
        const uint32_t def[4] = {moe_e2m1_pair(c & 0xFF), moe_e2m1_pair((c >> 8) & 0xFF),
                                 moe_e2m1_pair((c >> 16) & 0xFF), moe_e2m1_pair(c >> 24)};
        const uint4 f = moe_mx_widen<false>(w, moe_mx_scale<false>(127));
        const uint4 g = moe_mx_widen<true>(w, moe_mx_scale<true>(127));
        n += (f.x != def[0]) + (f.y != def[1]) + (f.z != def[2]) + (f.w != def[3]);
        n += (g.x != def[0]) + (g.y != def[1]) + (g.z != def[2]) + (g.w != def[3]);
        for (uint32_t sb : {0u, 128u}) {
            const uint4 a = moe_mx_widen<false>(w, moe_mx_scale<false>(sb));
            const uint4 b = moe_mx_widen<true>(w, moe_mx_scale<true>(sb));
            n += (a.x != b.x) + (a.y != b.y) + (a.z != b.z) + (a.w != b.w);
        }
    }
    if (n) atomicAdd(bad, (unsigned long long)n);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 3) reps = 3;
    const char *only_model = argc > 2 && strcmp(argv[2], "all") != 0 ? argv[2] : NULL;
    const int only_n = argc > 3 ? atoi(argv[3]) : 0;
    const shape shapes[] = {{"qwen3-30b-a3b", MOE_W_BF16, 128, 8, 2048, 768},
                            {"mixtral-8x7b", MOE_W_BF16, 8, 2, 4096, 14336},
                            {"gpt-oss-20b", MOE_W_MXFP4, 32, 4, 2880, 2880},
                            {"gpt-oss-20b-wide", MOE_W_MXFP4_WIDE, 32, 4, 2880, 2880}};
    const int ns[] = {1, 8, 64, 2048};
    bool known = !only_model, known_n = !only_n;
    for (const shape &sh : shapes) known |= only_model && strcmp(only_model, sh.name) == 0;
    for (int n : ns) known_n |= n == only_n;
    if (!known || !known_n) {
        fprintf(stderr, "moe_bench: no row for model %s, n %d (models: qwen3-30b-a3b, mixtral-8x7b, gpt-oss-20b, "
                        "gpt-oss-20b-wide, all; n: 1, 8, 64, 2048)\n", only_model ? only_model : "all", only_n);
        return 2;
    }
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    {  // every 32-bit code word, in 16 launches of 2^28
        unsigned long long *dbad, bad = 0;
        CK(cudaMalloc(&dbad, sizeof bad));
        CK(cudaMemset(dbad, 0, sizeof bad));
        for (uint64_t b = 0; b < (1ull << 32); b += 1ull << 28) k_e2m1_check<<<1 << 14, 256, 0, st>>>(b, 64, dbad);
        CK(cudaMemcpy(&bad, dbad, sizeof bad, cudaMemcpyDeviceToHost));
        CK(cudaFree(dbad));
        printf("MXFP4 widening (moe_mx_widen, both forms) on all 2^32 code words: %llu mismatched pairs\n", bad);
        if (bad) return 1;
    }
    CK(cudaFuncSetAttribute(k_moe_gemm_tc<MOE_W_BF16, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)moe_tc_smem(MOE_W_BF16, true)));
    CK(cudaFuncSetAttribute(k_moe_gemm_tc<MOE_W_BF16, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)moe_tc_smem(MOE_W_BF16, false)));
    CK(cudaFuncSetAttribute(k_moe_gemm_tc<MOE_W_MXFP4, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)moe_tc_smem(MOE_W_MXFP4, true)));
    CK(cudaFuncSetAttribute(k_moe_gemm_tc<MOE_W_MXFP4, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)moe_tc_smem(MOE_W_MXFP4, false)));
    CK(cudaFuncSetAttribute(k_moe_gemm_tc<MOE_W_MXFP4_WIDE, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)moe_tc_smem(MOE_W_MXFP4_WIDE, true)));
    CK(cudaFuncSetAttribute(k_moe_gemm_tc<MOE_W_MXFP4_WIDE, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)moe_tc_smem(MOE_W_MXFP4_WIDE, false)));
    bool bad_tc = false;
    std::vector<char> json;
    printf("| model | launch | n | NB | us | GB/s (chosen experts) | copy GB/s (r+w) | vs copy | TFLOP/s | max rel err |\n"
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const shape &sh : shapes) {
        if (only_model && strcmp(only_model, sh.name) != 0) continue;
        const int E = sh.E, K = sh.K, D = sh.dim, F = sh.F;
        const bool mx = sh.fmt == MOE_W_MXFP4 || sh.fmt == MOE_W_MXFP4_WIDE, wide = sh.fmt == MOE_W_MXFP4_WIDE;
        // the stacked weights: gate, up [E·F][D], down [E·D][F]
        const int64_t rows[3] = {(int64_t)E * F, (int64_t)E * F, (int64_t)E * D}, cols[3] = {D, D, F};
        uint8_t *dw[3];
        size_t bytes[3], soff[3];
        int64_t sp[3];
        moe_w mw[3];
        for (int i = 0; i < 3; i++) {
            soff[i] = mx ? ((size_t)rows[i] * (cols[i] / 2) + 255) / 256 * 256 : 0;
            sp[i] = (cols[i] / 32 + 3) / 4 * 4;  // (cuda_moe.cu's mx_spitch; the padding scales are random here, its
                                                 // codes zero either way)
            bytes[i] = mx ? soff[i] + (size_t)rows[i] * sp[i] : (size_t)rows[i] * cols[i] * 2;
            CK(cudaMalloc(&dw[i], bytes[i]));
            k_fill<<<1024, 256, 0, st>>>(dw[i], bytes[i], 1234 + i, mx ? 1 : 0, 3.0f / sqrtf((float)cols[i]),
                                         (int)soff[i]);
            mw[i] = {};
            mw[i].q = dw[i];
            mw[i].pitch = mx ? cols[i] / 2 : cols[i] * 2;
            mw[i].s = dw[i] + soff[i];
            mw[i].spitch = (int)sp[i];
        }
        CK(cudaGetLastError());
        const size_t expert_bytes = (bytes[0] + bytes[1] + bytes[2]) / E;  // (codes and scales)
        const size_t cbytes = 256u << 20;
        uint8_t *csrc, *cdst;
        CK(cudaMalloc(&csrc, cbytes * 2));
        CK(cudaMalloc(&cdst, cbytes));
        const double copy_gbs = copy_rate(st, e0, e1, cdst, (const char *)csrc, cbytes / 2, 4, reps);
        CK(cudaFree(csrc));
        CK(cudaFree(cdst));
        for (int n : ns) {
            if (only_n && n != only_n) continue;
            const int nk = n * K, nb = nb_for(n, E, K), bn = 8 * nb;
            const int max_tiles = nk / bn + std::min(E, nk);
            // ROUTINGS random routings (K distinct experts a token), grouped as k_moe_scan / k_moe_place do
            std::vector<int4> htiles((size_t)ROUTINGS * max_tiles);
            std::vector<int> hperm((size_t)ROUTINGS * nk), hnt(ROUTINGS), touched(ROUTINGS);
            for (int r = 0; r < ROUTINGS; r++) {
                std::vector<int> ids(nk), cnt(E, 0), off(E + 1, 0);
                for (int t = 0; t < n; t++)
                    for (int j = 0; j < K; j++) {
                        int e;
                        bool dup;
                        do {
                            e = (int)((urand() + 1) * 0.5f * E) % E;
                            dup = false;
                            for (int i = 0; i < j; i++) dup |= ids[t * K + i] == e;
                        } while (dup);
                        ids[t * K + j] = e;
                        cnt[e]++;
                    }
                int nt = 0;
                for (int e = 0; e < E; e++) {
                    off[e + 1] = off[e] + cnt[e];
                    for (int j = 0; j * bn < cnt[e]; j++)
                        htiles[(size_t)r * max_tiles + nt++] = make_int4(e, off[e] + j * bn, std::min(bn, cnt[e] - j * bn), 0);
                    touched[r] += cnt[e] > 0;
                }
                hnt[r] = nt;
                std::vector<int> cur(off.begin(), off.end() - 1);
                for (int i = 0; i < nk; i++) hperm[(size_t)r * nk + cur[ids[i]]++] = i;
            }
            int4 *dtiles;
            int *dperm, *dnt;
            float *dwts, *dy;
            bf16 *dx, *dh;
            CK(cudaMalloc(&dtiles, htiles.size() * sizeof(int4)));
            CK(cudaMalloc(&dperm, hperm.size() * sizeof(int)));
            CK(cudaMalloc(&dnt, ROUTINGS * sizeof(int)));
            CK(cudaMalloc(&dwts, (size_t)nk * sizeof(float)));
            CK(cudaMalloc(&dy, (size_t)nk * D * sizeof(float)));
            CK(cudaMalloc(&dx, (size_t)n * D * sizeof(bf16)));
            CK(cudaMalloc(&dh, (size_t)nk * F * sizeof(bf16)));
            CK(cudaMemcpy(dtiles, htiles.data(), htiles.size() * sizeof(int4), cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dperm, hperm.data(), hperm.size() * sizeof(int), cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dnt, hnt.data(), ROUTINGS * sizeof(int), cudaMemcpyHostToDevice));
            std::vector<bf16> hx((size_t)n * D);
            for (auto &v : hx) v = __float2bfloat16(urand());
            std::vector<float> hw(nk, 1.0f / K);
            CK(cudaMemcpy(dx, hx.data(), hx.size() * sizeof(bf16), cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dwts, hw.data(), hw.size() * sizeof(float), cudaMemcpyHostToDevice));
            moe_gemm_args ga = {};
            ga.w[0] = mw[0];
            ga.w[1] = mw[1];
            ga.x[0] = ga.x[1] = dx;
            ga.wts = dwts;
            ga.out = dh;
            ga.K = K;
            ga.cols = D;
            ga.R = F;
            ga.act = MOE_ACT_SILU;
            moe_gemm_args da = ga;
            da.w[0] = da.w[1] = mw[2];
            da.x[0] = da.x[1] = dh;
            da.out = dy;
            da.cols = F;
            da.R = D;
            auto launch = [&](bool gu, int r, bool tc = false) {
                moe_gemm_args a = gu ? ga : da;
                a.tiles = dtiles + (size_t)r * max_tiles;
                a.n_tiles = dnt + r;
                a.perm = dperm + (size_t)r * nk;
                const int rows_cta = 16 * moe_mt(sh.fmt, nb, gu);
                const dim3 grid((unsigned)(((gu ? F : D) + rows_cta - 1) / rows_cta), (unsigned)max_tiles);
                if (wide)
                    gu ? go<MOE_W_MXFP4_WIDE, true>(nb, grid, st, a, tc) : go<MOE_W_MXFP4_WIDE, false>(nb, grid, st, a, tc);
                else if (mx)
                    gu ? go<MOE_W_MXFP4, true>(nb, grid, st, a, tc) : go<MOE_W_MXFP4, false>(nb, grid, st, a, tc);
                else gu ? go<MOE_W_BF16, true>(nb, grid, st, a, tc) : go<MOE_W_BF16, false>(nb, grid, st, a, tc);
            };
            // correctness: 32 sampled h values of routing 0 against float64 silu(x·gate) · (x·up)
            launch(true, 0);
            CK(cudaStreamSynchronize(st));
            CK(cudaGetLastError());
            std::vector<bf16> hh((size_t)nk * F);
            CK(cudaMemcpy(hh.data(), dh, hh.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
            double err = 0;
            std::vector<uint8_t> row(mx ? D / 2 + D / 32 : (size_t)D * 2);
            for (int k = 0; k < 32; k++) {
                const int gi = (int)(((uint64_t)k * 2654435761u) % nk), f = (int)(((uint64_t)k * 40503u) % F);
                int e = 0;
                for (int i = 0; i < hnt[0]; i++) {
                    const int4 tl = htiles[i];
                    if (gi >= tl.y && gi < tl.y + tl.z) e = tl.x;
                }
                const int t = hperm[gi] / K;
                double gu[2];
                for (int w = 0; w < 2; w++) {
                    const int64_t r = (int64_t)e * F + f;
                    double s = 0;
                    if (mx) {
                        CK(cudaMemcpy(row.data(), dw[w] + r * (D / 2), D / 2, cudaMemcpyDeviceToHost));
                        for (int i = 0; i < D / 8; i++) {  // (the codes the stored words hold)
                            uint32_t wd;
                            memcpy(&wd, &row[4 * i], 4);
                            wd = mx_unrot_word(wd);
                            memcpy(&row[4 * i], &wd, 4);
                        }
                        CK(cudaMemcpy(row.data() + D / 2, dw[w] + soff[w] + r * sp[w], D / 32, cudaMemcpyDeviceToHost));
                        for (int c = 0; c < D; c++)
                            s += (double)mx_host(row.data(), row[D / 2 + c / 32], c) * __bfloat162float(hx[(size_t)t * D + c]);
                    } else {
                        CK(cudaMemcpy(row.data(), dw[w] + r * D * 2, (size_t)D * 2, cudaMemcpyDeviceToHost));
                        for (int c = 0; c < D; c++)
                            s += (double)bf16_host(&row[(size_t)c * 2]) * __bfloat162float(hx[(size_t)t * D + c]);
                    }
                    gu[w] = s;
                }
                const double ref = gu[0] / (1 + exp(-gu[0])) * gu[1], got = __bfloat162float(hh[(size_t)gi * F + f]);
                err = std::max(err, std::fabs(got - ref) / std::max(std::fabs(ref), 1e-3));
            }
            // the tiled form (n = 2048: nb = 8) against k_moe_gemm, bit for bit: h of routing 0, then y from that h
            long long tc_diff = -1;
            if (nb == 8) {
                std::vector<uint16_t> h0((size_t)nk * F), h1((size_t)nk * F);
                std::vector<float> y0((size_t)nk * D), y1((size_t)nk * D);
                launch(true, 0);
                CK(cudaMemcpy(h0.data(), dh, h0.size() * 2, cudaMemcpyDeviceToHost));
                launch(true, 0, true);
                CK(cudaMemcpy(h1.data(), dh, h1.size() * 2, cudaMemcpyDeviceToHost));
                launch(false, 0);
                CK(cudaMemcpy(y0.data(), dy, y0.size() * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemset(dy, 0xFF, y1.size() * 4));
                launch(false, 0, true);
                CK(cudaMemcpy(y1.data(), dy, y1.size() * 4, cudaMemcpyDeviceToHost));
                CK(cudaGetLastError());
                long long dh_n = 0, dy_n = 0, fh = -1, fy = -1;
                for (size_t i = 0; i < h0.size(); i++)
                    if (h0[i] != h1[i]) dh_n++, fh = fh < 0 ? (long long)i : fh;
                for (size_t i = 0; i < y0.size(); i++)
                    if (memcmp(&y0[i], &y1[i], 4) != 0) dy_n++, fy = fy < 0 ? (long long)i : fy;
                tc_diff = dh_n + dy_n;
                printf("%s n=%d: k_moe_gemm_tc against k_moe_gemm: %lld of %zu h values differ (first: row %lld of %d), "
                       "%lld of %zu y values (first: row %lld of %d)\n", sh.name, n, dh_n, h0.size(),
                       fh < 0 ? -1 : fh % F, F, dy_n, y0.size(), fy < 0 ? -1 : fy % D, D);
                if (tc_diff) bad_tc = true;
            }
            for (int tcv = 0; tcv <= (nb == 8 ? 1 : 0); tcv++)
            for (int gu = 1; gu >= 0; gu--) {
                std::vector<float> tm;
                for (int r = 0; r < reps; r++) {
                    CK(cudaEventRecord(e0, st));
                    for (int j = 0; j < BURST; j++) launch(gu, (r * BURST + j) % ROUTINGS, tcv);
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    tm.push_back(ms / BURST);
                }
                CK(cudaGetLastError());
                double mean_touched = 0;
                for (int r = 0; r < ROUTINGS; r++) mean_touched += touched[r] / (double)ROUTINGS;
                const double us = median(tm) * 1e3;
                const double wb = mean_touched * (gu ? (bytes[0] + bytes[1]) : bytes[2]) / E;
                const double gbs = wb / (us * 1e-6) / 1e9, tf = 2.0 * nk * F * D * (gu ? 2 : 1) / (us * 1e-6) / 1e12;
                const char *lname = tcv ? (gu ? "gate/up tc" : "down tc") : (gu ? "gate/up" : "down");
                char errs[16] = "-";
                if (gu) snprintf(errs, sizeof errs, "%.1e", err);
                printf("| %s | %s | %d | %d | %.1f | %.0f | %.0f | %.2f | %.1f | %s |\n", sh.name, lname, n, nb, us, gbs,
                       copy_gbs, gbs / copy_gbs, tf, errs);
                char line[512];
                const int len = snprintf(line, sizeof line,
                                         "{\"model\":\"%s\",\"launch\":\"%s\",\"n\":%d,\"nb\":%d,\"us\":%.2f,\"GBps\":%.1f,"
                                         "\"copy_GBps\":%.1f,\"TFLOPs\":%.2f,\"max_rel_err\":%.2e,\"expert_bytes\":%zu,"
                                         "\"reps\":%d}\n",
                                         sh.name, lname, n, nb, us, gbs, copy_gbs, tf, gu ? err : 0.0, expert_bytes, reps);
                json.insert(json.end(), line, line + len);
            }
            CK(cudaFree(dtiles)); CK(cudaFree(dperm)); CK(cudaFree(dnt)); CK(cudaFree(dwts));
            CK(cudaFree(dy)); CK(cudaFree(dx)); CK(cudaFree(dh));
        }
        for (int i = 0; i < 3; i++) CK(cudaFree(dw[i]));
    }
    fwrite(json.data(), 1, json.size(), stdout);
    return bad_tc ? 1 : 0;
}
