// attention_decode.cu — the decode attention lab: instantiates the production decode templates
// (src/backend/cuda/cuda_decode_t.cuh, cuda_decode_mma.cuh, cuda_combine.cuh) in the forms the
// backend runs and the forms it does not (ring depth, launch policy, heads on M or on N), checks
// each against a float64 CPU loop over the same paged cache, then times it. Never linked into
// octet; src/backend/cuda/cuda_decode.cu is what runs.
//   variant 1: transposed kernel, ring 2, DECODE_PDL + k_combine   (production: batches, many splits)
//   variant 2: transposed kernel, ring 2, DECODE_FUSED             (production: one sequence, <= 16 splits)
//   variant 3: transposed kernel, ring 3, DECODE_PDL + k_combine
//   variant 4: transposed kernel, ring 2, DECODE_PLAIN + k_combine (no early FP8 refill)
//   variant 5: heads-on-M kernel, ring 3, DECODE_PLAIN + k_combine (production: --batch-invariant)
//   variant 6: heads-on-M kernel, ring 2, DECODE_PLAIN + k_combine
// Shapes: Llama-3.1-8B's layer (32 query heads, 8 KV heads, head_dim 128), 64-token cache blocks
// in shuffled order, bf16 and e4m3 caches, B=1 L=128k, B=8 L=32k and B=1 L=1k (the fused combine's
// shape: a short context of at most DECODE_FUSED_MAX splits). Splits are planned as
// cuda_decode.cu plans them (one wave of the fused instance's residency; FP8 splits of at least 8
// blocks, struct cuda_tuning's default). A launch runs without a kernel before it, so a DECODE_PDL
// kernel's waits return at once.
// The split plan takes an optional wave divisor d (one wave of resident / d CTAs: fewer, longer
// splits); the fused variant also runs past DECODE_FUSED_MAX splits where the scratch holds them
// (marked "past max"), and each k_combine variant's combine is timed alone too ("combine us").
// Build: make CUDA=1 gpu-tests (build-cuda/gpu/attention_decode);
// run: build-cuda/gpu/attention_decode [variant [wave divisor]]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../src/backend/cuda/cuda_attention.cuh"
#include "../../src/backend/cuda/cuda_decode_mma.cuh"
#include "../../src/backend/cuda/cuda_prefill_fp8.cuh"  // (fp8pf::ex2, which the transposed kernel uses)
#include "../../src/backend/cuda/cuda_decode_t.cuh"
#include "../../src/backend/cuda/cuda_combine.cuh"

#define CK(x)                                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                    \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

constexpr int HD = 128, N_KV = 8, G = 4, N_HEADS = N_KV * G, BS = 64, LGR = 2;  // BS = 16 << LGR
constexpr int MIN_SPLIT_FP8 = 8;                                                 // cuda_tuning_default's
constexpr int REPS = 20, ITERS = 10;

typedef void (*decode_fn)(attn_args);
struct variant {
    const char *name;
    decode_fn k[2];  // bf16, e4m3 cache
    int stages;
    bool fused;      // combines in its last CTA (one sequence, 2..DECODE_FUSED_MAX splits)
};
static const variant variants[] = {
    {"decode_t ring 2 pdl + k_combine",
     {k_decode_t<HD, DT_BF16, 2, DECODE_PDL>, k_decode_t<HD, DT_E4M3, 2, DECODE_PDL>}, 2, false},
    {"decode_t ring 2 fused combine",
     {k_decode_t<HD, DT_BF16, 2, DECODE_FUSED>, k_decode_t<HD, DT_E4M3, 2, DECODE_FUSED>}, 2, true},
    {"decode_t ring 3 pdl + k_combine",
     {k_decode_t<HD, DT_BF16, 3, DECODE_PDL>, k_decode_t<HD, DT_E4M3, 3, DECODE_PDL>}, 3, false},
    {"decode_t ring 2 plain + k_combine",
     {k_decode_t<HD, DT_BF16, 2, DECODE_PLAIN>, k_decode_t<HD, DT_E4M3, 2, DECODE_PLAIN>}, 2, false},
    {"decode_mma ring 3 plain + k_combine",
     {k_decode_mma<HD, DT_BF16, 3, DECODE_PLAIN>, k_decode_mma<HD, DT_E4M3, 3, DECODE_PLAIN>}, 3, false},
    {"decode_mma ring 2 plain + k_combine",
     {k_decode_mma<HD, DT_BF16, 2, DECODE_PLAIN>, k_decode_mma<HD, DT_E4M3, 2, DECODE_PLAIN>}, 2, false},
};
constexpr int N_VARIANTS = sizeof variants / sizeof variants[0];

static size_t ring_bytes(int stages, int di) { return (size_t)4 * stages * 2 * 16 * HD * (di == 0 ? 2 : 1); }

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float urand() { return (float)((rng_next() >> 40) * (1.0 / (1 << 23))) - 1.0f; }  // uniform in [-1, 1)

// One shape's cache, queries and the CPU reference output, on host and device.
struct problem {
    int n_seqs, ctx, di, max_blocks, n_splits = 1, min_split = 0;
    std::vector<uint8_t> hk, hv;  // [n_blocks][N_KV][BS][HD] elements of the cache type
    std::vector<bf16> hq;         // [n_seqs][N_HEADS][HD]
    std::vector<int32_t> btab;    // [n_seqs][max_blocks]
    std::vector<double> ref;      // [n_seqs][N_HEADS][HD]
    float kscale[N_KV], vscale[N_KV];
    void *dk = nullptr, *dv = nullptr;
    bf16 *dq = nullptr, *dout = nullptr;
    int32_t *dqstart = nullptr, *dseq = nullptr, *dbtab = nullptr;
    float *dscales = nullptr, *dpart = nullptr;
    int *darrive = nullptr;
};

static float elem(const problem &p, const std::vector<uint8_t> &c, size_t i) {
    if (p.di == 0) {
        uint16_t b;
        memcpy(&b, &c[2 * i], 2);
        uint32_t u = (uint32_t)b << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    __nv_fp8_e4m3 e;
    memcpy(&e, &c[i], 1);
    return (float)e;
}

static void make_problem(problem &p, int n_seqs, int ctx, int di) {
    p.n_seqs = n_seqs;
    p.ctx = ctx;
    p.di = di;
    p.max_blocks = (ctx + BS - 1) / BS;
    const int n_blocks = n_seqs * p.max_blocks, es = di == 0 ? 2 : 1;
    const size_t n_el = (size_t)n_blocks * N_KV * BS * HD;
    p.hk.resize(n_el * es);
    p.hv.resize(n_el * es);
    for (size_t i = 0; i < n_el; i++) {
        const float k = 2.0f * urand(), v = urand();
        if (di == 0) {
            bf16 bk = __float2bfloat16(k), bv = __float2bfloat16(v);
            memcpy(&p.hk[2 * i], &bk, 2);
            memcpy(&p.hv[2 * i], &bv, 2);
        } else {
            __nv_fp8_e4m3 ek(k * 100.0f), ev(v * 100.0f);
            memcpy(&p.hk[i], &ek, 1);
            memcpy(&p.hv[i], &ev, 1);
        }
    }
    for (int h = 0; h < N_KV; h++) {
        p.kscale[h] = di == 0 ? 1.0f : 0.02f + 0.001f * h;
        p.vscale[h] = di == 0 ? 1.0f : 0.01f + 0.001f * h;
    }
    p.hq.resize((size_t)n_seqs * N_HEADS * HD);
    for (auto &x : p.hq) x = __float2bfloat16(urand());
    std::vector<int32_t> perm(n_blocks);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) std::swap(perm[i], perm[rng_next() % (uint64_t)(i + 1)]);
    p.btab = perm;  // sequence s owns btab[s·max_blocks ..]
    // the reference: softmax(q·kᵀ·scale·kscale)·v·vscale in float64, a KV head's G query heads at once
    const double scale = 1.0 / sqrt((double)HD);
    p.ref.assign((size_t)n_seqs * N_HEADS * HD, 0.0);
    std::vector<double> sc((size_t)G * ctx);
    double row[HD], qf[G][HD];
    for (int s = 0; s < n_seqs; s++)
        for (int g = 0; g < N_KV; g++) {
            for (int h = 0; h < G; h++)
                for (int i = 0; i < HD; i++)
                    qf[h][i] = __bfloat162float(p.hq[((size_t)s * N_HEADS + g * G + h) * HD + i]);
            double mx[G], l[G] = {};
            for (int h = 0; h < G; h++) mx[h] = -INFINITY;
            for (int t = 0; t < ctx; t++) {
                const size_t base = (((size_t)p.btab[s * p.max_blocks + t / BS] * N_KV + g) * BS + t % BS) * HD;
                for (int i = 0; i < HD; i++) row[i] = elem(p, p.hk, base + i);
                for (int h = 0; h < G; h++) {
                    double d = 0;
                    for (int i = 0; i < HD; i++) d += qf[h][i] * row[i];
                    sc[(size_t)h * ctx + t] = d * scale * p.kscale[g];
                    mx[h] = std::max(mx[h], sc[(size_t)h * ctx + t]);
                }
            }
            double *o = &p.ref[((size_t)s * N_HEADS + g * G) * HD];  // the G heads' rows, one after another
            for (int t = 0; t < ctx; t++) {
                const size_t base = (((size_t)p.btab[s * p.max_blocks + t / BS] * N_KV + g) * BS + t % BS) * HD;
                for (int i = 0; i < HD; i++) row[i] = elem(p, p.hv, base + i);
                for (int h = 0; h < G; h++) {
                    const double w = exp(sc[(size_t)h * ctx + t] - mx[h]);
                    l[h] += w;
                    for (int i = 0; i < HD; i++) o[h * HD + i] += w * row[i];
                }
            }
            for (int h = 0; h < G; h++)
                for (int i = 0; i < HD; i++) o[h * HD + i] *= p.vscale[g] / l[h];
        }
    CK(cudaMalloc(&p.dk, p.hk.size()));
    CK(cudaMalloc(&p.dv, p.hv.size()));
    CK(cudaMemcpy(p.dk, p.hk.data(), p.hk.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(p.dv, p.hv.data(), p.hv.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&p.dq, p.hq.size() * sizeof(bf16)));
    CK(cudaMemcpy(p.dq, p.hq.data(), p.hq.size() * sizeof(bf16), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&p.dout, p.hq.size() * sizeof(bf16)));
    std::vector<int32_t> qs(n_seqs), sl(n_seqs, ctx);
    for (int s = 0; s < n_seqs; s++) qs[s] = s;
    CK(cudaMalloc(&p.dqstart, n_seqs * sizeof(int32_t)));
    CK(cudaMalloc(&p.dseq, n_seqs * sizeof(int32_t)));
    CK(cudaMalloc(&p.dbtab, p.btab.size() * sizeof(int32_t)));
    CK(cudaMemcpy(p.dqstart, qs.data(), n_seqs * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(p.dseq, sl.data(), n_seqs * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(p.dbtab, p.btab.data(), p.btab.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    std::vector<float> scales(2 * KV_MAX_HEADS, 1.0f);
    for (int h = 0; h < N_KV; h++) scales[h] = p.kscale[h], scales[KV_MAX_HEADS + h] = p.vscale[h];
    CK(cudaMalloc(&p.dscales, scales.size() * sizeof(float)));
    CK(cudaMemcpy(p.dscales, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&p.darrive, n_seqs * N_KV * sizeof(int)));
    CK(cudaMemset(p.darrive, 0, n_seqs * N_KV * sizeof(int)));
}

static void free_problem(problem &p) {
    cudaFree(p.dk), cudaFree(p.dv), cudaFree(p.dq), cudaFree(p.dout), cudaFree(p.dqstart), cudaFree(p.dseq);
    cudaFree(p.dbtab), cudaFree(p.dscales), cudaFree(p.dpart), cudaFree(p.darrive);
}

// The split plan of cuda_decode.cu (plan_splits, outside a captured step): one wave of `resident`
// CTAs, at least 4 blocks a split; FP8 splits of at least MIN_SPLIT_FP8 blocks.
static void plan(problem &p, int resident) {
    const int nb_max = (p.ctx + 15) / 16, ctas = p.n_seqs * N_KV;
    int n = resident / ctas;
    n = std::min(n, (nb_max + 3) / 4);
    n = std::max(n, 1);
    const int per = (nb_max + n - 1) / n;
    p.n_splits = (nb_max + per - 1) / per;
    p.min_split = p.di == 0 ? 0 : MIN_SPLIT_FP8;
    cudaFree(p.dpart);
    CK(cudaMalloc(&p.dpart, (size_t)p.n_seqs * N_HEADS * p.n_splits * (HD + 2) * sizeof(float)));
}

static bool fused_fits(const problem &p) {
    return p.n_seqs == 1 && p.n_splits > 1 && 2 * G * p.n_splits + G <= 32 * HD;
}

// k_combine of a problem's partials, as launch_combine sizes it.
static void run_combine(const problem &p, cudaStream_t st) {
    const int lanes = HD / 2;
    const int rows = std::min((p.n_splits + COMBINE_SPLITS - 1) / COMBINE_SPLITS, 512 / lanes);
    const size_t smem = ((size_t)rows * HD + 2 * (size_t)rows) * sizeof(float);
    k_combine<<<dim3(p.n_seqs, N_HEADS), rows * lanes, smem, st>>>(p.dout, p.dpart, p.dqstart, N_HEADS, HD, p.n_splits);
}

// One launch of a variant (and its k_combine).
static void run(const variant &v, const problem &p, cudaStream_t st, bool combine = true) {
    attn_args a = {};
    a.out = p.dout;
    a.q = p.dq;
    a.kc = p.dk;
    a.vc = p.dv;
    a.qstart = p.dqstart;
    a.seq_lens = p.dseq;
    a.btab = p.dbtab;
    a.scales = p.dscales;
    a.max_blocks = p.max_blocks;
    a.n_kv = N_KV;
    a.G = G;
    a.bs = BS;
    a.lgr = LGR;
    a.scale = 1.0f / sqrtf((float)HD);
    a.part = p.dpart;
    a.n_splits = p.n_splits;
    a.min_split = p.min_split;
    a.arrive = v.fused ? p.darrive : nullptr;
    const dim3 grid(p.n_seqs, N_KV, p.n_splits);
    v.k[p.di]<<<grid, 128, ring_bytes(v.stages, p.di), st>>>(a);
    if (v.fused || p.n_splits == 1 || !combine) return;
    run_combine(p, st);
}

// Median µs of a launch sequence over REPS bursts of ITERS.
template <typename F> static float time_us(cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, F launch) {
    std::vector<float> ts;
    for (int r = 0; r < REPS; r++) {
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < ITERS; i++) launch();
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts.push_back(ms * 1000.0f / ITERS);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

static double nmse(const problem &p) {
    std::vector<bf16> out(p.ref.size());
    CK(cudaMemcpy(out.data(), p.dout, out.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < out.size(); i++) {
        const double d = (double)__bfloat162float(out[i]) - p.ref[i];
        num += d * d;
        den += p.ref[i] * p.ref[i];
    }
    return den > 0 ? num / den : num;
}

int main(int argc, char **argv) {
    const int only = argc > 1 ? atoi(argv[1]) : 0, wave_div = argc > 2 ? atoi(argv[2]) : 1;
    if (only < 0 || only > N_VARIANTS || wave_div < 1) {
        fprintf(stderr, "usage: %s [variant 1..%d (0: all) [wave divisor >= 1]]\n", argv[0], N_VARIANTS);
        return 2;
    }
    int dev = 0, n_sm = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    for (const variant &v : variants)
        for (int di = 0; di < 2; di++)
            CK(cudaFuncSetAttribute(v.k[di], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)ring_bytes(v.stages, di)));
    // the residency the production plan assumes: the fused ring-2 instance's
    int resident[2];
    for (int di = 0; di < 2; di++) {
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident[di], variants[1].k[di], 128, ring_bytes(2, di)));
        resident[di] = std::max(std::max(resident[di], 1) * n_sm / wave_div, 1);
    }
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int shapes[][2] = {{1, 131072}, {8, 32768}, {1, 1024}};
    const char *dts[2] = {"bf16", "e4m3"};
    int failed = 0;
    printf("wave divisor %d (resident CTAs: bf16 %d, e4m3 %d)\n", wave_div, resident[0], resident[1]);
    printf("| variant | cache | B | L | splits | NMSE | us | KV GB/s | decode alone us | combine us |\n"
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto &sh : shapes)
        for (int di = 0; di < 2; di++) {
            problem p;
            make_problem(p, sh[0], sh[1], di);
            plan(p, resident[di]);
            const double kv_bytes = 2.0 * p.n_seqs * N_KV * (double)p.ctx * HD * (di == 0 ? 2 : 1);
            for (int vi = 0; vi < N_VARIANTS; vi++) {
                const variant &v = variants[vi];
                if (only && only != vi + 1) continue;
                if (v.fused && !fused_fits(p)) {
                    printf("| %d %s | %s | %d | %d | %d | (does not fit: more than %d splits or batched) | | |\n",
                           vi + 1, v.name, dts[di], p.n_seqs, p.ctx, p.n_splits, DECODE_FUSED_MAX);
                    continue;
                }
                CK(cudaMemset(p.dout, 0, p.hq.size() * sizeof(bf16)));
                run(v, p, st);
                CK(cudaStreamSynchronize(st));
                CK(cudaGetLastError());
                const double err = nmse(p);
                const bool ok = err <= 2e-5;
                failed += !ok;
                const float us = time_us(st, e0, e1, [&] { run(v, p, st); });
                char alone[64] = "", comb[64] = "";
                if (!v.fused && p.n_splits > 1) {
                    snprintf(alone, sizeof alone, "%.1f", time_us(st, e0, e1, [&] { run(v, p, st, false); }));
                    snprintf(comb, sizeof comb, "%.1f", time_us(st, e0, e1, [&] { run_combine(p, st); }));
                }
                const bool past = v.fused && p.n_splits > DECODE_FUSED_MAX;
                printf("| %d %s%s | %s | %d | %d | %d | %.2e%s | %.1f | %.0f | %s | %s |\n", vi + 1, v.name,
                       past ? " (past max)" : "", dts[di], p.n_seqs, p.ctx, p.n_splits, err, ok ? "" : " FAIL", us,
                       kv_bytes / (us * 1e-6) / 1e9, alone, comb);
            }
            free_problem(p);
        }
    printf("%s\n", failed ? "FAILED" : "all variants match the CPU reference");
    return failed ? 1 : 0;
}
