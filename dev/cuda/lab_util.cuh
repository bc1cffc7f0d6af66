// lab_util.cuh — what the dev/cuda timing labs share (gemv_bench.cu, gemv8_bench.cu, layer_chain.cu,
// ...): the error check, a deterministic uniform generator, a hash, the median, the device with a stream
// and two events, burst timing, graph-replay timing, and the device-to-device copy rate of a buffer (the
// bandwidth a product that reads it once cannot beat).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define BURST 10  // launches per timed interval, back to back as in a decode step (time = interval / BURST)
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static uint64_t lab_rng = 0x9E3779B97F4A7C15ull;
static inline float urand() {  // uniform in [-1, 1)
    lab_rng ^= lab_rng << 13; lab_rng ^= lab_rng >> 7; lab_rng ^= lab_rng << 17;
    return (float)((lab_rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

// A 32-bit hash of i (device or host): data a lab generates on the GPU and checks on the CPU.
__host__ __device__ static inline uint32_t hash32(uint64_t i) {
    uint64_t h = i * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

static inline float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The device a lab runs on: its multiprocessors and properties, a stream and two timing events.
struct lab_dev {
    int sms = 0;
    cudaDeviceProp prop;
    cudaStream_t st;
    cudaEvent_t e0, e1;
};
static inline lab_dev lab_open() {
    lab_dev d;
    CK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaGetDeviceProperties(&d.prop, 0));
    CK(cudaStreamCreate(&d.st));
    CK(cudaEventCreate(&d.e0));
    CK(cudaEventCreate(&d.e1));
    return d;
}

// Median milliseconds of a graph's replay: reps replays one at a time after two unrecorded ones.
static inline float graph_ms(cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, cudaGraphExec_t ge, int reps) {
    std::vector<float> t;
    for (int r = 0; r < reps + 2; r++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 2) t.push_back(ms);
    }
    return median(t);
}

// Median milliseconds a launch over reps intervals of BURST launches back to back; launch(i) issues the
// i-th launch of the run (i = 0, 1, ...: the caller rotates its buffers by it).
template <typename F>
static inline float burst_ms(cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, int reps, F launch) {
    std::vector<float> t;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, st));
        for (int j = 0; j < BURST; j++) launch(r * BURST + j);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms / BURST);
    }
    CK(cudaGetLastError());
    return median(t);
}

// GB/s of copying `bytes` (read + write counted, as the copy figure is quoted) from copies of a buffer that
// rotate through src (copies × bytes), BURST copies an interval, the median of reps intervals.
static inline double copy_rate(cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, void *dst, const char *src,
                               size_t bytes, int copies, int reps) {
    const float ms = burst_ms(st, e0, e1, reps, [&](int i) {
        CK(cudaMemcpyAsync(dst, src + (size_t)(i % copies) * bytes, bytes, cudaMemcpyDeviceToDevice, st));
    });
    return 2.0 * bytes / (ms * 1e-3) / 1e9;
}
