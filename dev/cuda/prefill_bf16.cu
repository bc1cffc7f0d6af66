// prefill_bf16.cu — the 16-bit prefill attention lab: instantiates the production kernel
// (src/backend/cuda/cuda_prefill_bf16.cuh) in the form the backend runs and in the forms it does
// not (ring depth, two or three consumers, no ping-pong), checks each against a float64 CPU loop
// over the same paged cache (varlen, a cached prefix, GQA, sliding windows, partial and odd-sized
// blocks, head_dim 64 / 128 / 256, bf16 and f16 caches; unwritten cache rows hold NaN; the output
// is poisoned first, so an unwritten row fails), then times causal prefills of one sequence at
// 4k / 16k / 64k tokens, 32 query heads, 8 KV heads, head_dim 128 and 64 (16k at head_dim 256),
// 64-token cache blocks in shuffled order. FLOPs = 4·L²·d·heads / 2.
// Each timing is the median of samples, a sample being back-to-back launches timed by CUDA events.
// Never linked into octet; src/backend/cuda/cuda_prefill_bf16.cu is what runs.
// Build: make CUDA=1 gpu-tests (build/gpu/prefill_bf16); run: build/gpu/prefill_bf16 [check|time|all]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../src/backend/cuda/cuda_attention.cuh"
#include "../../src/backend/cuda/cuda_prefill_bf16.cuh"

#define CK(x)                                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                    \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

typedef void (*kern_fn)(CUtensorMap, CUtensorMap, attn_args);
struct variant {
    const char *name;
    int hd, dt, smem, nc;  // nc: consumer warpgroups (64 query rows each)
    kern_fn k;
};
#define V(HD, DT, KS, PP, NAME) {NAME, HD, DT, bf16pf::lay<HD, KS>::SMEM, 2, k_prefill_bf16<HD, DT, KS, PP>}
#define V3(HD, DT, KS, PP, NAME)                                                                                    \
    {NAME, HD, DT, bf16pf::lay<HD, KS, false, false, 3>::SMEM, 3, k_prefill_bf16<HD, DT, KS, PP, false, false, 3>}
static const variant variants[] = {
    V(128, DT_BF16, 2, true, "hd128 bf16 ks2 pingpong (production)"),
    V(128, DT_BF16, 3, true, "hd128 bf16 ks3 pingpong"),
    V(128, DT_BF16, 2, false, "hd128 bf16 ks2 no pingpong"),
    V(128, DT_F16, 2, true, "hd128 f16 ks2 pingpong (production)"),
    V3(64, DT_BF16, 4, true, "hd64 bf16 ks4 3 consumers pingpong (production)"),
    V3(64, DT_F16, 4, true, "hd64 f16 ks4 3 consumers pingpong (production)"),
    V(64, DT_BF16, 4, true, "hd64 bf16 ks4 2 consumers pingpong"),
    V3(64, DT_BF16, 4, false, "hd64 bf16 ks4 3 consumers no pingpong"),
    V(256, DT_BF16, 2, true, "hd256 bf16 ks2 pingpong (production)"),
    V(256, DT_F16, 2, true, "hd256 f16 ks2 pingpong (production)"),
};

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float urand() { return (float)((rng_next() >> 40) * (1.0 / (1 << 23))) - 1.0f; }  // uniform in [-1, 1)

static uint16_t f2h(float f, int dt) {
    uint16_t b;
    if (dt == DT_BF16) {
        bf16 h = __float2bfloat16(f);
        memcpy(&b, &h, 2);
    } else {
        __half h = __float2half(f);
        memcpy(&b, &h, 2);
    }
    return b;
}
static float h2f(uint16_t b, int dt) {
    if (dt == DT_BF16) {
        uint32_t u = (uint32_t)b << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    __half_raw r;
    r.x = b;
    return __half2float(__half(r));
}

static cuda_tma_encode_fn encoder() {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult qr;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &qr));
    if (qr != cudaDriverEntryPointSuccess || !fn) {
        fprintf(stderr, "cuTensorMapEncodeTiled unavailable\n");
        exit(1);
    }
    return (cuda_tma_encode_fn)fn;
}

// One step: sequences (n_q query tokens at the end of ctx cached ones), a paged cache of shuffled
// blocks, q, on host and device.
struct problem {
    int hd, dt, n_kv, G, bs, window, n_seqs, n_tokens, max_blocks, n_blocks, max_q;
    std::vector<int> nq, ctx;
    std::vector<uint16_t> hk, hv;  // [n_blocks][n_kv][bs][hd]
    std::vector<bf16> hq;          // [n_tokens][n_heads][hd]
    std::vector<int32_t> qstart, pos, btab, tok_seq, seq_lens;
    void *dk = nullptr, *dv = nullptr;
    bf16 *dq = nullptr, *dout = nullptr;
    int32_t *dqstart, *dpos, *dbtab, *dtokseq, *dseqlens;
};

static void make_problem(problem &p, int hd, int dt, int n_kv, int G, int bs, int window, std::vector<int> nq,
                         std::vector<int> ctx) {
    p.hd = hd, p.dt = dt, p.n_kv = n_kv, p.G = G, p.bs = bs, p.window = window, p.nq = nq, p.ctx = ctx;
    p.n_seqs = (int)nq.size();
    int max_ctx = 0;
    p.n_tokens = 0, p.max_q = 0;
    p.qstart.assign(1, 0);
    for (int s = 0; s < p.n_seqs; s++) {
        max_ctx = std::max(max_ctx, ctx[s]);
        p.max_q = std::max(p.max_q, nq[s]);
        for (int i = 0; i < nq[s]; i++) p.pos.push_back(ctx[s] - nq[s] + i), p.tok_seq.push_back(s);
        p.n_tokens += nq[s];
        p.qstart.push_back(p.n_tokens);
        p.seq_lens.push_back(ctx[s]);
    }
    p.max_blocks = (max_ctx + bs - 1) / bs;
    p.n_blocks = p.max_blocks * p.n_seqs;
    const size_t n_el = (size_t)p.n_blocks * n_kv * bs * hd;
    p.hk.resize(n_el);
    p.hv.resize(n_el);
    // (blocks' unwritten rows hold NaN, as an unwritten cache may: the kernel must not let them through)
    const uint16_t nan = dt == DT_BF16 ? 0x7fc0 : 0x7e00;
    for (size_t i = 0; i < n_el; i++) p.hk[i] = f2h(2.0f * urand(), dt), p.hv[i] = f2h(urand(), dt);
    std::vector<int32_t> perm(p.n_blocks);
    for (int i = 0; i < p.n_blocks; i++) perm[i] = i;
    for (int i = p.n_blocks - 1; i > 0; i--) std::swap(perm[i], perm[rng_next() % (uint64_t)(i + 1)]);
    p.btab = perm;
    for (int s = 0; s < p.n_seqs; s++)
        for (int t = ctx[s]; t < p.max_blocks * bs; t++)
            for (int g = 0; g < n_kv; g++)
                for (int i = 0; i < hd; i++) {
                    const size_t e = (((size_t)p.btab[s * p.max_blocks + t / bs] * n_kv + g) * bs + t % bs) * hd + i;
                    p.hk[e] = nan, p.hv[e] = nan;
                }
    p.hq.resize((size_t)p.n_tokens * n_kv * G * hd);
    for (auto &x : p.hq) x = __float2bfloat16(urand());
    CK(cudaMalloc(&p.dk, n_el * 2));
    CK(cudaMalloc(&p.dv, n_el * 2));
    CK(cudaMemcpy(p.dk, p.hk.data(), n_el * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(p.dv, p.hv.data(), n_el * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&p.dq, p.hq.size() * 2));
    CK(cudaMemcpy(p.dq, p.hq.data(), p.hq.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&p.dout, p.hq.size() * 2));
    auto up = [](int32_t **d, const std::vector<int32_t> &h) {
        CK(cudaMalloc(d, h.size() * 4 + 4));
        CK(cudaMemcpy(*d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    };
    up(&p.dqstart, p.qstart), up(&p.dpos, p.pos), up(&p.dbtab, p.btab), up(&p.dtokseq, p.tok_seq);
    up(&p.dseqlens, p.seq_lens);
}

static void free_problem(problem &p) {
    cudaFree(p.dk), cudaFree(p.dv), cudaFree(p.dq), cudaFree(p.dout), cudaFree(p.dqstart), cudaFree(p.dpos);
    cudaFree(p.dbtab), cudaFree(p.dtokseq), cudaFree(p.dseqlens);
}

static void launch(const variant &v, const problem &p, cuda_tma_encode_fn enc, cudaStream_t st) {
    const int bn = v.hd == 256 ? 64 : 128, rows = std::min(p.bs, bn);
    CUtensorMap km, vm;
    if (bf16pf_map(enc, &km, p.dk, p.hd, p.bs, p.n_kv, p.n_blocks, rows) != CUDA_SUCCESS ||
        bf16pf_map(enc, &vm, p.dv, p.hd, p.bs, p.n_kv, p.n_blocks, rows) != CUDA_SUCCESS) {
        fprintf(stderr, "tensor map encode failed\n");
        exit(1);
    }
    attn_args a = {};
    a.out = p.dout, a.q = p.dq, a.kc = p.dk, a.vc = p.dv, a.qstart = p.dqstart, a.seq_lens = p.dseqlens;
    a.pos = p.dpos, a.tok_seq = p.dtokseq, a.btab = p.dbtab, a.max_blocks = p.max_blocks, a.n_kv = p.n_kv;
    a.G = p.G, a.bs = p.bs, a.window = p.window, a.scale = 1.0f / sqrtf((float)p.hd), a.rows_box = rows;
    const int qt = 64 * v.nc / p.G;
    const dim3 grid(p.n_seqs, (p.max_q + qt - 1) / qt, p.n_kv);
    v.k<<<grid, 128 * (v.nc + 1), v.smem, st>>>(km, vm, a);
}

// NMSE of the rows `rows` (token indices; empty: all) against float64 attention; every row's every
// element (of all tokens) must be finite (the output was poisoned with NaN).
static double check(const problem &p, std::vector<int> rows, int *bad) {
    const int n_heads = p.n_kv * p.G, hd = p.hd;
    std::vector<bf16> out(p.hq.size());
    CK(cudaMemcpy(out.data(), p.dout, out.size() * 2, cudaMemcpyDeviceToHost));
    *bad = 0;
    for (auto x : out) *bad += !std::isfinite(__bfloat162float(x));
    if (rows.empty())
        for (int t = 0; t < p.n_tokens; t++) rows.push_back(t);
    double num = 0, den = 0;
    std::vector<double> sc, o(hd);
    for (int t : rows) {
        const int s = p.tok_seq[t], ps = p.pos[t], lo = p.window > 0 ? std::max(0, ps - p.window + 1) : 0;
        for (int h = 0; h < n_heads; h++) {
            const int g = h / p.G;
            const bf16 *qr = &p.hq[((size_t)t * n_heads + h) * hd];
            sc.assign(ps + 1, -INFINITY);
            double mx = -INFINITY;
            for (int k = lo; k <= ps; k++) {
                const size_t b = (((size_t)p.btab[s * p.max_blocks + k / p.bs] * p.n_kv + g) * p.bs + k % p.bs) * hd;
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)__bfloat162float(qr[i]) * h2f(p.hk[b + i], p.dt);
                sc[k] = d / sqrt((double)hd);
                mx = std::max(mx, sc[k]);
            }
            std::fill(o.begin(), o.end(), 0.0);
            double l = 0;
            for (int k = lo; k <= ps; k++) {
                const size_t b = (((size_t)p.btab[s * p.max_blocks + k / p.bs] * p.n_kv + g) * p.bs + k % p.bs) * hd;
                const double w = exp(sc[k] - mx);
                l += w;
                for (int i = 0; i < hd; i++) o[i] += w * h2f(p.hv[b + i], p.dt);
            }
            for (int i = 0; i < hd; i++) {
                const double r = o[i] / l, x = __bfloat162float(out[((size_t)t * n_heads + h) * hd + i]);
                num += (x - r) * (x - r);
                den += r * r;
            }
        }
    }
    return num / den;
}

struct shape {
    const char *name;
    int hd, dt, n_kv, G, bs, window;
    std::vector<int> nq, ctx;
};

static int run_checks(cuda_tma_encode_fn enc, cudaStream_t st) {
    const shape shapes[] = {
        {"prefill 700, G4, bs64", 128, DT_BF16, 2, 4, 64, 0, {700}, {700}},
        {"chunk 300 of 1000 + decode row of 900, G4", 128, DT_BF16, 2, 4, 64, 0, {300, 1}, {1000, 900}},
        {"varlen 3 seqs, G8, window 200", 128, DT_BF16, 1, 8, 64, 200, {129, 517, 64}, {129, 700, 64}},
        {"prefill 333, G3, bs16", 128, DT_BF16, 2, 3, 16, 0, {333}, {333}},
        {"prefill 600, G1, bs256", 128, DT_BF16, 2, 1, 256, 0, {600}, {600}},
        {"prefill 500, G4, f16", 128, DT_F16, 2, 4, 64, 0, {500}, {500}},
        {"prefill 500 + chunk, hd64 G8 window 128", 64, DT_BF16, 2, 8, 64, 128, {500, 200}, {500, 450}},
        {"prefill 500, hd64 f16 G4", 64, DT_F16, 2, 4, 32, 0, {500}, {500}},
        {"prefill 400 + chunk, hd256 G2", 256, DT_BF16, 2, 2, 64, 0, {400, 100}, {400, 300}},
        {"prefill 300, hd256 f16 G4 window 100", 256, DT_F16, 1, 4, 64, 100, {300}, {300}},
    };
    int fails = 0;
    printf("| variant | shape | NMSE | non-finite |\n|---|---|---:|---:|\n");
    for (const auto &v : variants)
        for (const auto &sh : shapes) {
            if (sh.hd != v.hd || sh.dt != v.dt) continue;
            problem p;
            make_problem(p, sh.hd, sh.dt, sh.n_kv, sh.G, sh.bs, sh.window, sh.nq, sh.ctx);
            CK(cudaMemset(p.dout, 0xff, p.hq.size() * 2));
            launch(v, p, enc, st);
            CK(cudaGetLastError());
            CK(cudaStreamSynchronize(st));
            int bad;
            const double e = check(p, {}, &bad);
            const bool ok = e < 2e-5 && bad == 0;
            fails += !ok;
            printf("| %s | %s | %.2e | %d |%s\n", v.name, sh.name, e, bad, ok ? "" : " FAIL");
            free_problem(p);
        }
    return fails;
}

static void run_times(cuda_tma_encode_fn enc, cudaStream_t st) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    struct tshape { int hd, L; };
    const tshape ts[] = {{128, 4096}, {128, 16384}, {128, 65536}, {64, 4096}, {64, 16384}, {64, 65536}, {256, 16384}};
    printf("\n| variant | L | head_dim | ms | TFLOP/s | sampled NMSE |\n|---|---:|---:|---:|---:|---:|\n");
    std::vector<char> json;
    for (const auto &t : ts)
        for (const auto &v : variants) {
            if (v.hd != t.hd || v.dt != DT_BF16) continue;
            if (t.hd != 128 && !strstr(v.name, "production") && !strstr(v.name, "consumers")) continue;
            problem p;
            make_problem(p, t.hd, DT_BF16, 8, 4, 64, 0, {t.L}, {t.L});
            CK(cudaMemset(p.dout, 0xff, p.hq.size() * 2));
            launch(v, p, enc, st);
            CK(cudaGetLastError());
            CK(cudaStreamSynchronize(st));
            int bad;
            std::vector<int> rows;
            for (int i = 0; i < 24; i++) rows.push_back((int)(rng_next() % (uint64_t)t.L));
            rows.push_back(t.L - 1);
            const double e = check(p, rows, &bad);
            const double flops = 4.0 * t.L * (double)t.L * t.hd * 32 / 2;
            const int inner = t.L <= 4096 ? 20 : t.L <= 16384 ? 4 : 1, samples = t.L <= 16384 ? 15 : 5;
            std::vector<float> ms;
            for (int s = 0; s < samples + 1; s++) {
                CK(cudaEventRecord(e0, st));
                for (int i = 0; i < inner; i++) launch(v, p, enc, st);
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                float x;
                CK(cudaEventElapsedTime(&x, e0, e1));
                if (s) ms.push_back(x / inner);  // (the first sample warms up)
            }
            std::sort(ms.begin(), ms.end());
            const float med = ms[ms.size() / 2];
            printf("| %s | %d | %d | %.3f | %.0f | %.1e%s |\n", v.name, t.L, t.hd, med, flops / med / 1e9, e,
                   bad || e > 2e-5 ? " FAIL" : "");
            char line[256];
            snprintf(line, sizeof line,
                     "{\"variant\": \"%s\", \"L\": %d, \"head_dim\": %d, \"ms\": %.4f, \"tflops\": %.1f}\n", v.name,
                     t.L, t.hd, med, flops / med / 1e9);
            json.insert(json.end(), line, line + strlen(line));
            free_problem(p);
        }
    json.push_back(0);
    printf("\n%s", json.data());
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    for (const auto &v : variants) CK(cudaFuncSetAttribute(v.k, cudaFuncAttributeMaxDynamicSharedMemorySize, v.smem));
    const cuda_tma_encode_fn enc = encoder();
    int fails = 0;
    if (strcmp(what, "time")) fails = run_checks(enc, st);
    if (strcmp(what, "check")) run_times(enc, st);
    printf("\n%d check(s) failed\n", fails);
    return fails != 0;
}
