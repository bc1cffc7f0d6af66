// gemv8_stream.cu — how fast each way of streaming a decode-step weight through the SMs reads it, with
// no arithmetic beyond a checksum: the question behind k_gemv8 (src/backend/cuda/cuda_fp8w.cuh) reading
// the FP8 weights of a decode step's large products (down, gate|up) at 64-77 % of the copy rate where
// k_gemv reads their bf16 ones at 93-99 % (ncu, bench/fp8_weights/RESULTS.md). Three patterns over a row-major [rows][kp] byte matrix:
//   frag D, C:   k_gemv8's: 16-row tiles, a warp's 128-column chunks w, w + 8, ..., each lane 16-byte
//                runs of rows g and g + 8 (the MMA fragment's rows), D chunks a warp in flight
//                (k_gemv8 keeps 2: the one it multiplies and the next); a persistent grid of C CTAs an SM
//                (k_gemv8's registers allow 2-3; 0: as many as fit);
//   rows U:      k_gemv's: a warp a row, each lane 16-byte runs 512 bytes apart, U runs in flight;
//   bulk S x B:  a producer thread copies 16 rows x B columns of a tile per stage into shared memory
//                (cp.async.bulk, one 1-D copy a row, completing on an mbarrier) through S stages; eight
//                consumer warps read each stage and free it; a persistent grid.
// Every variant's checksum (the sum of the matrix's 32-bit words, mod 2^32) is checked against the CPU's
// before it is timed. Launches run back to back (BURST an interval, lab_util.cuh) over enough copies of
// the matrix (>= 512 MB) that each reads HBM. Prints a table, then one JSON object per line.
// Build: /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc
//        dev/cuda/gemv8_stream.cu -o gemv8_stream;  run: ./gemv8_stream [reps]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "lab_util.cuh"
#include "../../src/backend/cuda/cuda_mbar.cuh"

#define WARPS 8

__device__ __forceinline__ uint32_t words(uint4 v) { return v.x + v.y + v.z + v.w; }

__device__ __forceinline__ void add_sum(uint32_t *sum, uint32_t acc) {
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}

// ---------------------------------------------------------------- frag D

// a lane's four 16-byte runs of chunk ch of tile tl (rows g, g + 8; halves 0, 1)
__device__ __forceinline__ void frag_load(uint4 (&r)[4], const uint8_t *w, int kp, int tl, int ch, int lane) {
    const int g = lane >> 2, c4 = lane & 3;
    const uint8_t *a = w + (size_t)(tl * 16 + g) * kp + ch * 128 + c4 * 16, *b = a + (size_t)8 * kp;
    r[0] = __ldcs((const uint4 *)a);
    r[1] = __ldcs((const uint4 *)(a + 64));
    r[2] = __ldcs((const uint4 *)b);
    r[3] = __ldcs((const uint4 *)(b + 64));
}

// A warp's items are (tile blockIdx.x + (i / cpt)·gridDim.x, chunk warp + (i % cpt)·WARPS); item i + D is
// requested after item i is consumed, so D items are in flight while the warp waits.
template <int D>
__global__ void __launch_bounds__(WARPS * 32) k_frag(const uint8_t *w, int kp, int tiles, uint32_t *sum) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nch = kp / 128;
    const int cpt = (nch - warp + WARPS - 1) / WARPS;
    const int my_tiles = tiles > (int)blockIdx.x ? (tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : 0;
    const int items = cpt > 0 ? my_tiles * cpt : 0;
    auto load = [&](uint4(&r)[4], int i) {
        if (i < items) frag_load(r, w, kp, blockIdx.x + (i / cpt) * gridDim.x, warp + (i % cpt) * WARPS, lane);
    };
    uint4 ring[D][4];
#pragma unroll
    for (int d = 0; d < D; d++) load(ring[d], d);
    uint32_t acc = 0;
    for (int i0 = 0; i0 < items; i0 += D) {
#pragma unroll
        for (int d = 0; d < D; d++) {
            if (i0 + d < items) {
                acc += words(ring[d][0]) + words(ring[d][1]) + words(ring[d][2]) + words(ring[d][3]);
                load(ring[d], i0 + d + D);
            }
        }
    }
    add_sum(sum, acc);
}

// ---------------------------------------------------------------- rows U

template <int U>
__global__ void __launch_bounds__(WARPS * 32) k_rows(const uint8_t *w, int rows, int kp, uint32_t *sum) {
    const int row = blockIdx.x * WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    uint32_t acc = 0;
    if (row < rows) {
        const uint4 *p = (const uint4 *)(w + (size_t)row * kp);
        const int runs = kp / 16;
        for (int k0 = lane; k0 < runs; k0 += 32 * U) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++) v[u] = k0 + u * 32 < runs ? __ldcs(p + k0 + u * 32) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int u = 0; u < U; u++) acc += words(v[u]);
        }
    }
    add_sum(sum, acc);
}

// ---------------------------------------------------------------- bulk S x B

using namespace tmah;

// Items: (tile, column segment of B) in the order blockIdx.x, + gridDim.x, ...; warp WARPS's lane 0 produces.
template <int S, int B>
__global__ void __launch_bounds__((WARPS + 1) * 32) k_bulk(const uint8_t *w, int kp, int tiles, uint32_t *sum) {
    extern __shared__ __align__(128) uint8_t ring[]; // [S][16][B]
    __shared__ __align__(8) uint64_t full[S], empty[S];
    const int warp = threadIdx.x >> 5, segs = kp / B, total = tiles * segs;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    int n = 0; // this CTA's items
    for (int it = blockIdx.x; it < total; it += gridDim.x) n++;
    if (warp == WARPS) {
        if ((threadIdx.x & 31) == 0)
            for (int i = 0; i < n; i++) {
                const int s = i % S, it = blockIdx.x + i * gridDim.x, tl = it / segs, sg = it % segs;
                mbar_wait(&empty[s], ((i / S) & 1) ^ 1);
                mbar_expect_tx(&full[s], 16 * B);
                for (int r = 0; r < 16; r++)
                    bulk_load(ring + ((size_t)s * 16 + r) * B, w + (size_t)(tl * 16 + r) * kp + (size_t)sg * B, B,
                              &full[s]);
            }
        return;
    }
    uint32_t acc = 0;
    for (int i = 0; i < n; i++) {
        const int s = i % S;
        mbar_wait(&full[s], (i / S) & 1);
        const uint4 *st = (const uint4 *)(ring + (size_t)s * 16 * B);
#pragma unroll
        for (int j = 0; j < 16 * B / 16 / (WARPS * 32); j++) acc += words(st[threadIdx.x + j * WARPS * 32]);
        __syncwarp();
        if ((threadIdx.x & 31) == 0) mbar_arrive(&empty[s]);
    }
    add_sum(sum, acc);
}

// ---------------------------------------------------------------- driver

struct variant {
    const char *name;
    void (*launch)(const uint8_t *w, int rows, int kp, uint32_t *sum, int grid, cudaStream_t st);
    const void *kern; // for the occupancy query (persistent forms); nullptr: a CTA per WARPS rows
    int threads;
    size_t smem;
    int seg; // bulk: columns a stage (items are (tile, segment)); 0: items are tiles
    int cap; // persistent forms: CTAs an SM at most (k_gemv8's registers allow 2-3); 0: what fits
};

template <int D> static void launch_frag(const uint8_t *w, int rows, int kp, uint32_t *sum, int grid, cudaStream_t st) {
    k_frag<D><<<grid, WARPS * 32, 0, st>>>(w, kp, rows / 16, sum);
}
template <int U> static void launch_rows(const uint8_t *w, int rows, int kp, uint32_t *sum, int, cudaStream_t st) {
    k_rows<U><<<(rows + WARPS - 1) / WARPS, WARPS * 32, 0, st>>>(w, rows, kp, sum);
}
template <int S, int B>
static void launch_bulk(const uint8_t *w, int rows, int kp, uint32_t *sum, int grid, cudaStream_t st) {
    k_bulk<S, B><<<grid, (WARPS + 1) * 32, (size_t)S * 16 * B, st>>>(w, kp, rows / 16, sum);
}

#define FRAG(D, CAP) \
    { "frag " #D ", " #CAP " an SM", launch_frag<D>, (const void *)k_frag<D>, WARPS * 32, 0, 0, CAP }
#define ROWS(U) \
    { "rows " #U, launch_rows<U>, nullptr, WARPS * 32, 0, 0, 0 }
#define BULK(S, B) \
    { "bulk " #S " x " #B, launch_bulk<S, B>, (const void *)k_bulk<S, B>, (WARPS + 1) * 32, (size_t)(S)*16 * (B), B, 0 }

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 3) reps = 3;
    // Llama-3.1-8B's decode products: wq / wo, Q|K|V, gate|up (one launch reads both), down
    const int shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
    const char *names[] = {"wq/wo", "q|k|v", "gate|up", "down"};
    const variant variants[] = {FRAG(2, 2), FRAG(2, 3), FRAG(4, 2),    FRAG(2, 0),    FRAG(4, 0),
                                ROWS(4),    ROWS(8),    BULK(4, 1024), BULK(8, 1024), BULK(4, 2048)};
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (const variant &v : variants)
        if (v.smem > 48 * 1024)
            CK(cudaFuncSetAttribute(v.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)v.smem));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    uint32_t *dsum;
    CK(cudaMalloc(&dsum, sizeof(uint32_t)));
    std::vector<char> json;
    printf("| shape | variant | MB | CTAs | us | GB/s read | copy GB/s (r+w) | vs copy "
           "|\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int rows = shapes[si][0], kp = shapes[si][1];
        const size_t bytes = (size_t)rows * kp;
        int copies = (int)((512ull << 20) / bytes) + 1;
        std::vector<uint32_t> h(bytes / 4);
        uint32_t want = 0;
        for (auto &x : h) {
            urand();
            x = (uint32_t)(lab_rng >> 32);
            want += x;
        }
        uint8_t *dw, *dcopy;
        CK(cudaMalloc(&dw, bytes * copies));
        CK(cudaMalloc(&dcopy, bytes));
        for (int c = 0; c < copies; c++)
            CK(cudaMemcpy(dw + (size_t)c * bytes, h.data(), bytes, cudaMemcpyHostToDevice));
        const double copy_gbs = copy_rate(st, e0, e1, dcopy, (const char *)dw, bytes, copies, reps);
        for (const variant &v : variants) {
            int grid = 0;
            if (v.kern) {
                int per = 0;
                CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, v.kern, v.threads, v.smem));
                if (v.cap && per > v.cap) per = v.cap;
                const int items = rows / 16 * (v.seg ? kp / v.seg : 1);
                grid = per * sms < items ? per * sms : items;
            } else {
                grid = (rows + WARPS - 1) / WARPS;
            }
            CK(cudaMemset(dsum, 0, sizeof(uint32_t)));
            v.launch(dw, rows, kp, dsum, grid, st);
            uint32_t got = 0;
            CK(cudaMemcpy(&got, dsum, sizeof got, cudaMemcpyDeviceToHost));
            if (got != want) {
                printf("| %s | %s | checksum %08x, CPU %08x: FAILED |\n", names[si], v.name, got, want);
                continue;
            }
            const float ms = burst_ms(st, e0, e1, reps, [&](int i) {
                v.launch(dw + (size_t)(i % copies) * bytes, rows, kp, dsum, grid, st);
            });
            const double gbs = bytes / (ms * 1e-3) / 1e9;
            printf("| %s | %s | %.1f | %d | %.1f | %.0f | %.0f | %.2f |\n", names[si], v.name, bytes / 1e6, grid,
                   ms * 1e3, gbs, copy_gbs, gbs / copy_gbs);
            char line[256];
            snprintf(line, sizeof line,
                     "{\"shape\":\"%s\",\"variant\":\"%s\",\"bytes\":%zu,\"ctas\":%d,\"us\":%.2f,\"GBps\":%.1f,\"copy_"
                     "GBps\":%.1f}\n",
                     names[si], v.name, bytes, grid, ms * 1e3, gbs, copy_gbs);
            json.insert(json.end(), line, line + strlen(line));
        }
        CK(cudaFree(dw));
        CK(cudaFree(dcopy));
    }
    json.push_back(0);
    printf("\n%s", json.data());
    return 0;
}
