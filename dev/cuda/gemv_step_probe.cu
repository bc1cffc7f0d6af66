// gemv_step_probe.cu — where a decode step's skinny GEMMs lose time between kernels
// (bench/itl_study/RESULTS.md). gemv_bench's fits put a fixed cost on every k_gemv launch beyond its
// bytes over the copy rate; this probe asks whether the first touch of a weight's pages (address
// translation) or the launch boundary is part of it. Three parts:
//  1. Dependent-load latency (one thread, a pointer chain): inside one 2 MB page (DRAM latency),
//     and across P pages of a 9 GB buffer in random order — first pass (pages never touched) and a
//     second pass on other lines of the same pages (translations cached if P fits the TLBs).
//  2. A step's GEMVs emulated: Llama-3.1-8B's 32 layers × (Q|K|V 6144, wo 4096, gate|up 28672,
//     down 4096 rows) + the output projection, every weight its own buffer (as a served model),
//     captured in one CUDA graph; milliseconds a replay for: k_gemv itself; this file's copy of its
//     loop, launched the ordinary way or as a programmatic dependent of the GEMV before it (its
//     first weights loaded before the wait; the trigger at entry or after the loop); and k_gemv over
//     one layer's weights used 32 times.
//  3. A timeline of the ordinary and the PDL replays: per kernel, the gap between the previous
//     kernel's last CTA end and its first CTA start, the first data's latency in its CTAs, its span.
// Prints a table, then one JSON object per line. Build: make CUDA=1 gpu-tests; run:
// build-cuda/gpu/gemv_step_probe [replays]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

typedef __nv_bfloat16 bf16;
#include "lab_util.cuh"
#include "../../src/backend/cuda/cuda_gemv.cuh"

#define PAGE (2u << 20)

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// ---- part 1: a pointer chain. chain[i] holds the byte offset of the next element.
__global__ void k_chain_link(unsigned char *buf, const uint64_t *offs /*[n]*/, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) *(uint64_t *)(buf + offs[i]) = offs[(i + 1) % n];
}
__global__ void k_chain_walk(const unsigned char *buf, uint64_t first, int n, unsigned long long *ns_out, uint64_t *sink) {
    uint64_t o = first;
    unsigned long long t0 = now_ns();
    for (int i = 0; i < n; i++) o = __ldcg((const unsigned long long *)(buf + o));
    unsigned long long t1 = now_ns();
    *ns_out = t1 - t0;
    *sink = o;
}
// reads the first 256 MB of f and one word of each 2 MB page of it (2048 CTAs: one page each)
__global__ void k_flush(const unsigned char *f, uint64_t *sink) {
    const uint4 *v = (const uint4 *)(f + (size_t)blockIdx.x * PAGE);
    unsigned int a = __ldcg((const unsigned int *)(f + (size_t)blockIdx.x * PAGE + 64 * 1024));
    if (blockIdx.x < 128)  // 128 x 2 MB = 256 MB streamed
        for (int i = threadIdx.x; i < (int)(PAGE / 16); i += blockDim.x) a ^= __ldcg(v + i).x;
    if (a == 0x9e3779b9u) *sink = a;
}

// ---- part 2: k_gemv's default loop (NR = 1, 8 warps, 4 runs in flight, a warp a row), launched the
// ordinary way or as a programmatic dependent of the GEMV before it (PDLM 1: trigger at entry,
// 2: trigger after the loop; both load their first 4 runs before griddepcontrol.wait), with a
// timeline (PROF: [start, first data, end] of each CTA).
template <int PDLM, bool PROF>
__global__ void __launch_bounds__(256) k_probe(float *out, const bf16 *x, const bf16 *w, int rows, int cols,
                                               unsigned long long *prof /*[ctas][3] of this kernel*/) {
    unsigned long long t_start = PROF ? now_ns() : 0;
    if (PDLM == 1) pdl_trigger();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, row = blockIdx.x * 8 + warp;
    float acc = 0;
    const bool live = row < rows;
    const uint4 *wr = (const uint4 *)(w + (size_t)(live ? row : 0) * cols), *xr = (const uint4 *)x;
    const int runs = cols / 8;
    uint4 pre[4];
    if (PDLM) {
#pragma unroll
        for (int u = 0; u < 4; u++) pre[u] = __ldcs(wr + lane + 32 * u);  // (cols >= 1024 here)
        pdl_wait();
    }
    if (live) {
        bool first = true;
        for (int i = lane; i + 32 * 3 < runs; i += 32 * 4) {
            uint4 wv[4];
#pragma unroll
            for (int u = 0; u < 4; u++) wv[u] = PDLM && first ? pre[u] : __ldcs(wr + i + 32 * u);
#pragma unroll
            for (int u = 0; u < 4; u++) gemv_dot8(acc, wv[u], __ldg(xr + i + 32 * u));
            if (PROF && first && threadIdx.x == 0 && acc != 12345.f) prof[blockIdx.x * 3 + 1] = now_ns();  // (after the data)
            first = false;
        }
        if (PDLM == 2) pdl_trigger();
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
        if (lane == 0) out[row] = acc;
    } else if (PDLM == 2) {
        pdl_trigger();
    }
    if (PROF) {
        __syncthreads();
        if (threadIdx.x == 0) {
            prof[blockIdx.x * 3 + 0] = t_start;
            prof[blockIdx.x * 3 + 2] = now_ns();
        }
    }
}

struct gemv_op { const bf16 *w; int rows, cols; };

static double mediand(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

enum { V_KGEMV, V_PLAIN, V_PDL_ENTRY, V_PDL_LATE, V_ONE_LAYER, V_PROF, V_PROF_PDL, N_VARIANTS };
static const char *vnames[] = {"k_gemv", "probe plain", "probe, PDL (trigger at entry)", "probe, PDL (trigger after the loop)",
                               "k_gemv, one layer's weights x32", "probe plain, timeline", "probe, PDL at entry, timeline"};

static void launch(int v, cudaStream_t st, float *out, const bf16 *x, const gemv_op &op, unsigned long long *prof) {
    dim3 grid((op.rows + 7) / 8), block(256);
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = pdl_config(grid, block, 0, st, attr);
    switch (v) {
    case V_KGEMV: case V_ONE_LAYER: gemv_launch_variant<float, 8, 4, 1>(st, out, x, op.w, op.rows, op.cols, 1); break;
    case V_PLAIN: k_probe<0, false><<<grid, block, 0, st>>>(out, x, op.w, op.rows, op.cols, nullptr); break;
    case V_PDL_ENTRY: CK(cudaLaunchKernelEx(&cfg, k_probe<1, false>, out, x, op.w, op.rows, op.cols, (unsigned long long *)nullptr)); break;
    case V_PDL_LATE: CK(cudaLaunchKernelEx(&cfg, k_probe<2, false>, out, x, op.w, op.rows, op.cols, (unsigned long long *)nullptr)); break;
    case V_PROF_PDL: CK(cudaLaunchKernelEx(&cfg, k_probe<1, true>, out, x, op.w, op.rows, op.cols, prof)); break;
    default: k_probe<0, true><<<grid, block, 0, st>>>(out, x, op.w, op.rows, op.cols, prof); break;
    }
}

int main(int argc, char **argv) {
    const int replays = argc > 1 ? std::max(3, atoi(argv[1])) : 20;
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    std::vector<char> json;
    auto emit = [&](const char *s) { json.insert(json.end(), s, s + strlen(s)); };
    char line[512];

    // ---- part 1. The chains are linked first (which touches their lines and pages); then 256 MB
    // are read and one line of each of 2048 other pages (4 GB) is loaded, so that the links'
    // lines leave the L2 and, where the TLBs hold fewer than 2048 pages, their translations too.
    {
        const size_t bytes = (size_t)4096 * PAGE, fbytes = (size_t)2048 * PAGE;  // 8 GB of chains, 4 GB to flush with
        unsigned char *buf, *fbuf;
        CK(cudaMalloc(&buf, bytes));
        CK(cudaMalloc(&fbuf, fbytes));
        uint64_t *doffs, *dsink;
        unsigned long long *dns;
        CK(cudaMalloc(&doffs, 3 * 4096 * sizeof(uint64_t)));
        CK(cudaMalloc(&dsink, 8));
        CK(cudaMalloc(&dns, 8));
        auto link = [&](const std::vector<uint64_t> &offs, size_t at) {
            CK(cudaMemcpy(doffs + at, offs.data(), offs.size() * 8, cudaMemcpyHostToDevice));
            k_chain_link<<<(unsigned)(offs.size() + 255) / 256, 256, 0, st>>>(buf, doffs + at, (int)offs.size());
        };
        auto flush = [&]() {
            k_flush<<<2048, 256, 0, st>>>(fbuf, dsink);
            CK(cudaStreamSynchronize(st));
        };
        auto walk = [&](const std::vector<uint64_t> &offs) {
            k_chain_walk<<<1, 1, 0, st>>>(buf, offs[0], (int)offs.size(), dns, dsink);
            unsigned long long ns;
            CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
            return (double)ns / offs.size();
        };
        printf("| chain | loads | pass | ns a load |\n|---|---:|---|---:|\n");
        std::vector<uint64_t> offs;
        for (int i = 0; i < 512; i++) offs.push_back((uint64_t)4095 * PAGE + (uint64_t)((i * 37) % 512) * 4096);
        link(offs, 0);
        flush();
        walk(std::vector<uint64_t>(offs.begin(), offs.begin() + 1));  // the page's translation
        double in_page = walk(offs);
        printf("| one 2 MB page, 4 KB apart (L2 cold, page warm) | 512 | - | %.0f |\n", in_page);
        snprintf(line, sizeof line, "{\"part\":\"chain\",\"pages\":1,\"pass\":\"in page\",\"ns\":%.1f}\n", in_page);
        emit(line);
        for (int P : {16, 64, 256, 1024, 4000}) {
            std::vector<int> perm(P);
            for (int i = 0; i < P; i++) perm[i] = i;
            uint64_t r = 0x9E3779B97F4A7C15ull + P;
            for (int i = P - 1; i > 0; i--) {
                r ^= r << 13; r ^= r >> 7; r ^= r << 17;
                std::swap(perm[i], perm[r % (i + 1)]);
            }
            std::vector<uint64_t> pass_offs[3];
            for (int pass = 0; pass < 3; pass++) {
                for (int i = 0; i < P; i++) pass_offs[pass].push_back(perm[i] * (uint64_t)PAGE + (uint64_t)(pass + 1) * 8192 + 256 * (i % 8));
                link(pass_offs[pass], (size_t)pass * 4096);
            }
            flush();
            for (int pass = 0; pass < 3; pass++) {
                double ns = walk(pass_offs[pass]);
                const char *pn = pass == 0 ? "first (after the flush)" : pass == 1 ? "second (other lines)" : "third (other lines)";
                printf("| %d pages, random order | %d | %s | %.0f |\n", P, P, pn, ns);
                snprintf(line, sizeof line, "{\"part\":\"chain\",\"pages\":%d,\"pass\":\"%s\",\"ns\":%.1f}\n", P, pn, ns);
                emit(line);
            }
        }
        CK(cudaFree(buf));
        CK(cudaFree(fbuf));
        CK(cudaFree(doffs));
        CK(cudaFree(dsink));
        CK(cudaFree(dns));
    }

    // ---- part 2
    const int L = 32, H = 4096, FF = 14336, V = 128256;
    const int shp[4][2] = {{6144, H}, {H, H}, {2 * FF, H}, {H, FF}};
    std::vector<gemv_op> ops, ops1;
    std::vector<bf16 *> bufs;
    double total_bytes = 0;
    std::vector<bf16> hx(FF);
    uint64_t rng = 1;
    for (auto &v : hx) { rng = rng * 6364136223846793005ull + 1442695040888963407ull; v = __float2bfloat16((float)((rng >> 40) & 0xffff) / 65536.f - 0.5f); }
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 4; k++) {
            bf16 *w;
            const size_t n = (size_t)shp[k][0] * shp[k][1];
            CK(cudaMalloc(&w, n * 2));
            CK(cudaMemset(w, 0x3c, n * 2));  // bf16 0x3c3c ≈ 0.0115 (values do not matter)
            bufs.push_back(w);
            ops.push_back({w, shp[k][0], shp[k][1]});
            if (l == 0) ops1.push_back({w, shp[k][0], shp[k][1]});
            total_bytes += n * 2.0;
        }
    bf16 *wout, *dx;
    CK(cudaMalloc(&wout, (size_t)V * H * 2));
    CK(cudaMemset(wout, 0x3c, (size_t)V * H * 2));
    ops.push_back({wout, V, H});
    total_bytes += (double)V * H * 2;
    for (int l = 1; l < L; l++)
        for (int k = 0; k < 4; k++) ops1.push_back(ops1[k]);
    ops1.push_back({wout, V, H});
    float *dout;
    CK(cudaMalloc(&dout, (size_t)V * sizeof(float)));
    CK(cudaMalloc(&dx, FF * 2));
    CK(cudaMemcpy(dx, hx.data(), FF * 2, cudaMemcpyHostToDevice));
    const int nk = (int)ops.size();
    unsigned long long *dprof;
    const int cmax = (V + 7) / 8;
    CK(cudaMalloc(&dprof, (size_t)nk * cmax * 3 * sizeof(unsigned long long)));

    // the probe's loop against k_gemv's on one weight: the same sums, so the same outputs
    {
        std::vector<float> a(H), b(H);
        launch(V_KGEMV, st, dout, dx, ops[1], nullptr);
        CK(cudaMemcpyAsync(a.data(), dout, H * 4, cudaMemcpyDeviceToHost, st));
        launch(V_PDL_ENTRY, st, dout, dx, ops[1], nullptr);
        CK(cudaMemcpyAsync(b.data(), dout, H * 4, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        int diff = 0;
        for (int i = 0; i < H; i++) diff += a[i] != b[i];
        printf("\nprobe vs k_gemv on wo: %d of %d outputs differ\n", diff, H);
        if (diff) return 1;
    }

    printf("\nstep emulation: %d GEMVs, %.2f GB of weights; ms a graph replay (median of %d)\n", nk, total_bytes / 1e9, replays);
    printf("| variant | ms | TB/s | us a kernel over bytes / 4.47 TB/s |\n|---|---:|---:|---:|\n");
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int v = 0; v < N_VARIANTS; v++) {
        const std::vector<gemv_op> &seq = v == V_ONE_LAYER ? ops1 : ops;
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int k = 0; k < nk; k++)
            launch(v, st, dout, dx, seq[k], dprof + (size_t)k * cmax * 3);
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        const double ms = graph_ms(st, e0, e1, ge, replays), tbs = total_bytes / (ms * 1e-3) / 1e12;
        const double over = (ms * 1e-3 - total_bytes / 4.47e12) / nk * 1e6;
        printf("| %s | %.3f | %.2f | %.2f |\n", vnames[v], ms, tbs, over);
        snprintf(line, sizeof line, "{\"part\":\"step\",\"variant\":\"%s\",\"ms\":%.4f,\"TBps\":%.3f,\"us_over_per_kernel\":%.3f,\"kernels\":%d,\"GB\":%.3f}\n",
                 vnames[v], ms, tbs, over, nk, total_bytes / 1e9);
        emit(line);
        if (v == V_PROF || v == V_PROF_PDL) {  // the last replay's timeline
            std::vector<unsigned long long> h((size_t)nk * cmax * 3);
            CK(cudaMemcpy(h.data(), dprof, h.size() * 8, cudaMemcpyDeviceToHost));
            const char *kn[5] = {"q|k|v", "wo", "gate|up", "down", "output"};
            std::vector<double> gap[5], ramp[5], span[5], tail[5];
            unsigned long long prev_end = 0;
            for (int k = 0; k < nk; k++) {
                const int ctas = (seq[k].rows + 7) / 8, kind = k == nk - 1 ? 4 : k % 4;
                const unsigned long long *p = &h[(size_t)k * cmax * 3];
                unsigned long long s0 = ~0ull, e_max = 0;
                std::vector<double> fd, ends;
                for (int c = 0; c < ctas; c++) {
                    s0 = std::min(s0, p[c * 3]);
                    e_max = std::max(e_max, p[c * 3 + 2]);
                    fd.push_back((double)(p[c * 3 + 1] - p[c * 3]));
                    ends.push_back((double)p[c * 3 + 2]);
                }
                std::sort(ends.begin(), ends.end());
                if (k > 0) gap[kind].push_back((double)s0 - (double)prev_end);
                ramp[kind].push_back(mediand(fd));
                span[kind].push_back((double)(e_max - s0));
                tail[kind].push_back(ends.back() - ends[(size_t)(ends.size() * 0.9)]);
                prev_end = e_max;
            }
            printf("\ntimeline (%s, one replay; medians over layers, ns): gap = previous kernel's last CTA end to "
                   "this kernel's first CTA start; first data = a CTA's start to its first 4 runs' arrival (median CTA); "
                   "tail = the last 10%% of CTA ends\n| kernel | gap | first data | span | tail | bytes / 4.47 TB/s |\n|---|---:|---:|---:|---:|---:|\n",
                   vnames[v]);
            for (int kind = 0; kind < 5; kind++) {
                const double ideal = (kind == 4 ? (double)V * H : (double)shp[kind][0] * shp[kind][1]) * 2 / 4.47e12 * 1e9;
                printf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f |\n", kn[kind], mediand(gap[kind]), mediand(ramp[kind]), mediand(span[kind]),
                       mediand(tail[kind]), ideal);
                snprintf(line, sizeof line, "{\"part\":\"timeline\",\"variant\":\"%s\",\"kernel\":\"%s\",\"gap_ns\":%.0f,\"first_data_ns\":%.0f,\"span_ns\":%.0f,\"tail_ns\":%.0f,\"ideal_ns\":%.0f}\n",
                         vnames[v], kn[kind], mediand(gap[kind]), mediand(ramp[kind]), mediand(span[kind]), mediand(tail[kind]), ideal);
                emit(line);
            }
        }
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }
    CK(cudaGetLastError());
    fwrite(json.data(), 1, json.size(), stdout);
    return 0;
}
