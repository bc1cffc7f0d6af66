// layer_chain.cu — what a launch boundary costs a one-token decode step's weight stream, and whether one
// persistent launch with grid barriers between its products, each CTA requesting the next product's
// first weights before it waits, takes that cost away. The question behind the FP8-weight decode step's
// intercept (bench/fp8_weights/RESULTS.md: about 6 µs a launch beyond its bytes; k_gemv8 fills every
// slot, so a programmatic dependent cannot start loading until it ends).
//
// A layer of Llama-3.1-8B's products at one token, int8 weights (k_gemv8's bytes and access pattern:
// 16-row tiles, a warp's 128-column chunks w, w + 8, ..., a lane 16-byte runs of rows g and g + 8, two
// chunks in flight a warp), with a real dependency between them: each product's prologue reads the
// product before's output (y, int32), packs it to int8 codes in shared memory, and its rows are
// y[r] = Σ_k w[r][k] · x[k] (dp4a; exact, so order-free and checked bit for bit against the CPU). An
// attention stand-in (a 32-CTA launch: out[i] = q[i] + k[i mod 2048]) sits between Q|K|V and o.
//   chain C:  every product its own launch (a persistent grid of C CTAs an SM, the first weights
//             requested before griddepcontrol.wait, the dependent triggered at the last tile), five
//             programmatic dependent launches a layer, as the engine's decode step;
//   fused C:  o, gate|up, down and the next layer's Q|K|V in one persistent launch (C CTAs an SM), a
//             grid barrier between products; each CTA requests its next product's first chunks before
//             it arrives at the barrier; two launches a layer.
// A whole step (32 layers, 7 GB of weights, so HBM not L2) is captured in a CUDA graph and replayed;
// the figure is the median of the replays, beside the copy rate of the same bytes.
// Build: /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc
//        dev/cuda/layer_chain.cu -o layer_chain;  run: ./layer_chain [reps]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "lab_util.cuh"
#include "../../src/backend/cuda/cuda_pdl.cuh"

#define WARPS 8
#define D 2  // chunks in flight a warp (k_gemv8 keeps 3; 2 keeps the lab at 3 CTAs an SM without spills)
#define LAYERS 32
#define MAXK 14336

struct prod {
    const uint8_t *w;  // [rows][kp] int8 codes
    const int *x;      // [>= kp] the product before's output
    int *y;            // [rows]
    int rows, kp;
};

__host__ __device__ static inline int8_t code_of(int v) { return (int8_t)(v ^ (v >> 9)); }

__global__ void k_fill(uint32_t *w, size_t words, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
        w[i] = hash32(seed + i);
}

// a lane's four 16-byte runs of chunk ch of tile tl (rows g, g + 8; halves 0, 1), zeros when !ok
__device__ __forceinline__ void frag_load(uint4 (&r)[4], const prod &p, int tl, int ch, bool ok) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c4 = lane & 3;
    if (!ok) {
        r[0] = r[1] = r[2] = r[3] = make_uint4(0, 0, 0, 0);
        return;
    }
    const uint8_t *a = p.w + (size_t)(tl * 16 + g) * p.kp + ch * 128 + c4 * 16, *b = a + (size_t)8 * p.kp;
    r[0] = __ldcs((const uint4 *)a);
    r[1] = __ldcs((const uint4 *)(a + 64));
    r[2] = __ldcs((const uint4 *)b);
    r[3] = __ldcs((const uint4 *)(b + 64));
}

__device__ __forceinline__ int dot16(uint4 w, uint4 x, int acc) {
    acc = __dp4a((int)w.x, (int)x.x, acc);
    acc = __dp4a((int)w.y, (int)x.y, acc);
    acc = __dp4a((int)w.z, (int)x.z, acc);
    return __dp4a((int)w.w, (int)x.w, acc);
}

// The grid's barrier number k (1, 2, ...) on a counter zeroed before the launch: all CTAs resident.
__device__ __forceinline__ void grid_barrier(unsigned *count, unsigned k) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(count, 1u);
        const unsigned target = k * gridDim.x;
        while (*(volatile unsigned *)count < target) {
        }
        __threadfence();
    }
    __syncthreads();
}

// One product by this CTA: its first D chunks a warp requested, then wait() (the product before has
// written p.x), the prologue, the tiles blockIdx.x, + gridDim.x, ...; trigger: let a dependent launch
// start at the last tile.
template <typename W>
__device__ __forceinline__ void run_prod(const prod &p, int8_t *xs, int *tot, W wait, bool trigger) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c4 = lane & 3;
    const int nch = p.kp / 128, tiles = p.rows / 16;
    // (pt, pc): the tile and chunk of the last item requested; the next is chunk pc + WARPS of the tile,
    // else chunk warp of the tile gridDim.x further (past the last tile: zeros, never summed)
    int pt = blockIdx.x, pc = warp;
    auto advance = [&] {
        if (pc + WARPS < nch) pc += WARPS;
        else { pt += gridDim.x; pc = warp; }
    };
    uint4 ring[D][4];
    frag_load(ring[0], p, pt, pc, pt < tiles);
#pragma unroll
    for (int d = 1; d < D; d++) {
        advance();
        frag_load(ring[d], p, pt, pc, pt < tiles);
    }
    wait();
    for (int k = threadIdx.x * 4; k < p.kp; k += blockDim.x * 4) {
        const int4 v = __ldcg((const int4 *)(p.x + k));
        char4 c = make_char4(code_of(v.x), code_of(v.y), code_of(v.z), code_of(v.w));
        *(char4 *)(xs + k) = c;
    }
    __syncthreads();
    for (int tl = blockIdx.x; tl < tiles; tl += gridDim.x) {
        if (trigger && tl + (int)gridDim.x >= tiles) pdl_trigger();
        int sa = 0, sb = 0;
        for (int ch = warp; ch < nch; ch += WARPS) {
            const uint4 x0 = *(const uint4 *)(xs + ch * 128 + c4 * 16);
            const uint4 x1 = *(const uint4 *)(xs + ch * 128 + 64 + c4 * 16);
            sa = dot16(ring[0][0], x0, sa);
            sa = dot16(ring[0][1], x1, sa);
            sb = dot16(ring[0][2], x0, sb);
            sb = dot16(ring[0][3], x1, sb);
#pragma unroll
            for (int d = 0; d + 1 < D; d++)
#pragma unroll
                for (int j = 0; j < 4; j++) ring[d][j] = ring[d + 1][j];
            advance();
            frag_load(ring[D - 1], p, pt, pc, pt < tiles);
        }
        sa += __shfl_xor_sync(0xffffffffu, sa, 1);
        sa += __shfl_xor_sync(0xffffffffu, sa, 2);
        sb += __shfl_xor_sync(0xffffffffu, sb, 1);
        sb += __shfl_xor_sync(0xffffffffu, sb, 2);
        if (c4 == 0) {
            tot[warp * 16 + g] = sa;
            tot[warp * 16 + g + 8] = sb;
        }
        __syncthreads();
        if (threadIdx.x < 16) {
            int s = 0;
            for (int w = 0; w < WARPS; w++) s += tot[w * 16 + threadIdx.x];
            p.y[tl * 16 + threadIdx.x] = s;
        }
        __syncthreads();
    }
}

// chain: one product a launch, a programmatic dependent of the launch before
__global__ void __launch_bounds__(WARPS * 32) k_one(const prod p) {
    __shared__ __align__(16) int8_t xs[MAXK];
    __shared__ int tot[WARPS * 16];
    run_prod(p, xs, tot, [] { pdl_wait(); }, true);
}

// fused: n products, grid barriers between them (count: this launch's counter, zero at its start)
struct prods {
    prod p[4];
    int n;
    unsigned *count;
};
__global__ void __launch_bounds__(WARPS * 32) k_fused(const __grid_constant__ prods ps) {
    __shared__ __align__(16) int8_t xs[MAXK];
    __shared__ int tot[WARPS * 16];
    for (int j = 0; j < ps.n; j++) {
        if (j == 0) run_prod(ps.p[0], xs, tot, [] { pdl_wait(); }, ps.n == 1);
        else run_prod(ps.p[j], xs, tot, [&] { grid_barrier(ps.count, j); }, j == ps.n - 1);
        __syncthreads();  // (xs is the next product's)
    }
}

// attention stand-in: out[i] = q[i] + k[i mod 2048], i < 4096 (q|k|v: 4096 + 1024 + 1024 rows)
__global__ void __launch_bounds__(128) k_attn(const int *qkv, int *out) {
    pdl_wait();
    pdl_trigger();
    const int i = blockIdx.x * 128 + threadIdx.x;
    if (i < 4096) out[i] = __ldcg(qkv + i) + __ldcg(qkv + 4096 + (i & 2047));
}

static void launch_pdl(const void *k, dim3 grid, dim3 block, void **args, cudaStream_t st) {
    cudaLaunchAttribute at[1];
    cudaLaunchConfig_t cfg = pdl_config(grid, block, 0, st, at);
    CK(cudaLaunchKernelExC(&cfg, k, args));
}

// the CPU's products, in the same integer arithmetic
static void cpu_prod(const std::vector<uint32_t> &w32, int rows, int kp, const std::vector<int> &x,
                     std::vector<int> &y) {
    std::vector<int8_t> c(kp);
    for (int k = 0; k < kp; k++) c[k] = code_of(x[k]);
    y.assign(rows, 0);
    const int8_t *w = (const int8_t *)w32.data();
    for (int r = 0; r < rows; r++) {
        int s = 0;
        for (int k = 0; k < kp; k++) s += (int)w[(size_t)r * kp + k] * c[k];
        y[r] = s;
    }
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 3) reps = 3;
    enum { QKV, O, GU, DOWN, NP };
    const int rows[NP] = {6144, 4096, 28672, 4096}, kps[NP] = {4096, 4096, 4096, 14336};
    const lab_dev dev = lab_open();
    const int sms = dev.sms;
    const cudaDeviceProp &prop = dev.prop;
    cudaStream_t st = dev.st;
    cudaEvent_t e0 = dev.e0, e1 = dev.e1;

    // weights: layer l, product j at w[l][j]; outputs: y[l][j] and the attention's a[l]
    size_t layer_bytes = 0;
    for (int j = 0; j < NP; j++) layer_bytes += (size_t)rows[j] * kps[j];
    uint8_t *wbase;
    CK(cudaMalloc(&wbase, layer_bytes * LAYERS));
    k_fill<<<4 * sms, 256, 0, st>>>((uint32_t *)wbase, layer_bytes * LAYERS / 4, 12345);
    CK(cudaGetLastError());
    int *ybase, *x0;
    const size_t ystride = 32768;
    CK(cudaMalloc(&ybase, sizeof(int) * ystride * (NP + 1) * (LAYERS + 1)));
    CK(cudaMalloc(&x0, sizeof(int) * MAXK));
    std::vector<int> hx0(MAXK);
    for (int k = 0; k < MAXK; k++) hx0[k] = (int)hash32(999 + k) >> 20;
    CK(cudaMemcpy(x0, hx0.data(), sizeof(int) * MAXK, cudaMemcpyHostToDevice));
    unsigned *counts;
    CK(cudaMalloc(&counts, sizeof(unsigned) * (LAYERS + 1)));
    auto W = [&](int l, int j) {
        size_t off = layer_bytes * l;
        for (int i = 0; i < j; i++) off += (size_t)rows[i] * kps[i];
        return wbase + off;
    };
    auto Y = [&](int l, int j) { return ybase + ystride * ((size_t)l * (NP + 1) + j); };  // j = NP: attention
    // layer l's products: Q|K|V reads the step input (l = 0) or layer l - 1's down output
    auto P = [&](int l, int j) {
        prod p;
        p.w = W(l, j);
        p.rows = rows[j];
        p.kp = kps[j];
        p.y = Y(l, j);
        p.x = j == QKV ? (l == 0 ? x0 : Y(l - 1, DOWN)) : j == O ? Y(l, NP) : Y(l, j - 1);
        return p;
    };

    int per_max = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_max, k_fused, WARPS * 32, 0));
    int per_one = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_one, k_one, WARPS * 32, 0));
    printf("%s, %d SMs; CTAs an SM that fit: chain %d, fused %d\n", prop.name, sms, per_one, per_max);

    // one step as a graph: fused = false: 5 launches a layer; true: Q|K|V alone, then attention + fused
    auto capture = [&](bool fused, int cap, int layers) {
        const int per = cap < per_max ? cap : per_max;
        const int grid_all = per * sms;
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        CK(cudaMemsetAsync(counts, 0, sizeof(unsigned) * (LAYERS + 1), st));
        auto one = [&](prod p) {
            const int tiles = p.rows / 16;
            void *args[] = {&p};
            launch_pdl((const void *)k_one, dim3(tiles < grid_all ? tiles : grid_all), dim3(WARPS * 32), args, st);
        };
        one(P(0, QKV));
        for (int l = 0; l < layers; l++) {
            const int *q = Y(l, QKV);
            int *a = Y(l, NP);
            void *aargs[] = {&q, &a};
            launch_pdl((const void *)k_attn, dim3(32), dim3(128), aargs, st);
            if (!fused) {
                one(P(l, O));
                one(P(l, GU));
                one(P(l, DOWN));
                if (l + 1 < layers) one(P(l + 1, QKV));
            } else {
                prods ps;
                ps.p[0] = P(l, O);
                ps.p[1] = P(l, GU);
                ps.p[2] = P(l, DOWN);
                ps.n = 3;
                if (l + 1 < layers) ps.p[ps.n++] = P(l + 1, QKV);
                ps.count = counts + l;
                void *args[] = {&ps};
                launch_pdl((const void *)k_fused, dim3(grid_all), dim3(WARPS * 32), args, st);
            }
        }
        CK(cudaStreamEndCapture(st, &g));
        cudaGraphExec_t ge;
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphDestroy(g));
        return ge;
    };

    // the check: two layers on the CPU, and every form's last output against it
    const int CL = 2;
    std::vector<int> want;  // layer CL - 1's down output
    {
        std::vector<int> x = hx0, y, att;
        for (int l = 0; l < CL; l++) {
            for (int j = 0; j < NP; j++) {
                if (j == O) {
                    att.assign(4096, 0);
                    for (int i = 0; i < 4096; i++) att[i] = y[i] + y[4096 + (i & 2047)];
                    x = att;
                }
                const size_t n = (size_t)rows[j] * kps[j];
                std::vector<uint32_t> w32(n / 4);
                const size_t word0 = (size_t)(W(l, j) - wbase) / 4;
                for (size_t i = 0; i < n / 4; i++) w32[i] = hash32(12345 + word0 + i);
                cpu_prod(w32, rows[j], kps[j], x, y);
                x = y;
            }
        }
        want = y;
    }
    struct form { const char *name; bool fused; int cap; };
    const form forms[] = {{"chain 3", false, 3}, {"fused 3", true, 3}, {"chain 2", false, 2}, {"fused 2", true, 2}};
    bool ok = true;
    for (const form &f : forms) {
        cudaGraphExec_t ge = capture(f.fused, f.cap, CL);
        CK(cudaMemset(ybase, 0, sizeof(int) * ystride * (NP + 1) * (LAYERS + 1)));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaStreamSynchronize(st));
        std::vector<int> got(4096);
        CK(cudaMemcpy(got.data(), Y(CL - 1, DOWN), sizeof(int) * 4096, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < 4096; i++) bad += got[i] != want[i];
        printf("check, %s, %d layers: %d of 4096 outputs differ from the CPU's\n", f.name, CL, bad);
        ok = ok && bad == 0;
        CK(cudaGraphExecDestroy(ge));
    }
    if (!ok) {
        printf("FAILED\n");
        return 1;
    }

    // the copy rate of a step's bytes (read + write counted, as quoted), 1 GB at a time
    uint8_t *dst;
    const size_t cb = 1ull << 30;
    CK(cudaMalloc(&dst, cb));
    const double copy_gbs = copy_rate(st, e0, e1, dst, (const char *)wbase, cb, 6, reps);
    const double step_bytes = (double)layer_bytes * LAYERS;
    printf("\nstep: %d layers, %.2f GB of weights; copy rate %.0f GB/s (read + write), so %.3f ms at the copy rate\n\n",
           LAYERS, step_bytes / 1e9, copy_gbs, step_bytes / (copy_gbs * 1e9) * 1e3);
    printf("| form | CTAs an SM | launches a step | ms a step | µs a layer | weights GB/s | ÷ copy rate |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
    std::vector<char> json;
    std::vector<int> ref(4096);
    for (const form &f : forms) {
        cudaGraphExec_t ge = capture(f.fused, f.cap, LAYERS);
        const float ms = graph_ms(st, e0, e1, ge, reps);
        std::vector<int> got(4096);
        CK(cudaMemcpy(got.data(), Y(LAYERS - 1, DOWN), sizeof(int) * 4096, cudaMemcpyDeviceToHost));
        if (&f == &forms[0]) ref = got;
        const bool same = got == ref;
        const int per = f.cap < per_max ? f.cap : per_max;
        const int launches = f.fused ? 1 + 2 * LAYERS : 1 + 5 * LAYERS - 1;
        const double gbs = step_bytes / (ms * 1e-3) / 1e9;
        printf("| %s%s | %d | %d | %.3f | %.2f | %.0f | %.3f |\n", f.name, same ? "" : " (OUTPUT DIFFERS)", per,
               launches, ms, ms * 1e3 / LAYERS, gbs, gbs / copy_gbs);
        char line[256];
        snprintf(line, sizeof line,
                 "{\"form\":\"%s\",\"ctas_per_sm\":%d,\"launches\":%d,\"ms\":%.4f,\"GBps\":%.1f,\"copy_GBps\":%.1f,"
                 "\"same_output\":%s}\n",
                 f.name, per, launches, ms, gbs, copy_gbs, same ? "true" : "false");
        json.insert(json.end(), line, line + strlen(line));
        CK(cudaGraphExecDestroy(ge));
    }
    json.push_back(0);
    printf("\n%s", json.data());
    return 0;
}
