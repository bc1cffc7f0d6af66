// gemm_bench.c — the CPU backend's prefill matmul alone: n tokens against one rows x cols weight of
// F16/BF16/F32 or a GGUF block type (in L3 or memory, as in a model's prefill), reporting GFLOP/s by wall time and by the
// process's CPU time (the second stays meaningful on a machine shared with other jobs: it counts only
// the time this program ran). Prints a table line and JSON.
//   make && cc -O2 -march=native -pthread dev/cpu/gemm_bench.c build/liboctet.a -lm -o build/gemm_bench
//   build/gemm_bench [f16|bf16|f32|q8_0|q4_0|q4_k|q5_k|q6_k] [tokens=512] [rows=8192] [cols=2048] [threads=2] [passes=5]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"

static double clk(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *ty = argc > 1 ? argv[1] : "f16";
    int n = argc > 2 ? atoi(argv[2]) : 512, rows = argc > 3 ? atoi(argv[3]) : 8192;
    int cols = argc > 4 ? atoi(argv[4]) : 2048, threads = argc > 5 ? atoi(argv[5]) : 2;
    int passes = argc > 6 ? atoi(argv[6]) : 5;
    enum dtype dt = !strcmp(ty, "bf16") ? DT_BF16 : !strcmp(ty, "f32") ? DT_F32 : !strcmp(ty, "q8_0") ? DT_Q8_0
                  : !strcmp(ty, "q4_0") ? DT_Q4_0 : !strcmp(ty, "q4_k") ? DT_Q4_K : !strcmp(ty, "q5_k") ? DT_Q5_K
                  : !strcmp(ty, "q6_k") ? DT_Q6_K : DT_F16;
    if (n < 1 || rows < 1 || cols < 1 || threads < 1 || passes < 1) {
        fprintf(stderr, "gemm_bench: bad arguments\n");
        return 1;
    }
    const size_t wbytes = (size_t)rows * dtype_row_bytes(dt, cols);
    if (!wbytes) { fprintf(stderr, "gemm_bench: %d columns are not whole blocks of %s\n", cols, ty); return 1; }
    struct backend *b = backend_cpu_create(threads);
    uint16_t *d = malloc(wbytes);
    float *x = malloc((size_t)n * cols * 4), *out = malloc((size_t)n * rows * 4);
    if (!b || !d || !x || !out) { fprintf(stderr, "gemm_bench: no memory\n"); return 1; }
    // 2^-3..2^-2 in f16 / bf16 bit patterns (for f32, the same bits pairwise: finite values; for the block types,
    // every scale is such a number too)
    for (size_t i = 0; i < wbytes / 2; i++) d[i] = (uint16_t)(0x3000 + ((i * 2654435761u) >> 12 & 0x3ff));
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = (float)(i % 7) * 0.1f;
    struct weight w = {dt, rows, cols, d, NULL, {0}};
    b->ops->weight_upload(b, &w);
    b->ops->matmul(b, out, x, &w, n);  // warm-up
    b->ops->sync(b);
    double best = 1e30, best_cpu = 1e30;
    for (int p = 0; p < passes; p++) {
        double t0 = clk(CLOCK_MONOTONIC), c0 = clk(CLOCK_PROCESS_CPUTIME_ID);
        b->ops->matmul(b, out, x, &w, n);
        b->ops->sync(b);
        double s = clk(CLOCK_MONOTONIC) - t0, cs = clk(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (s < best) best = s;
        if (cs < best_cpu) best_cpu = cs;
    }
    double flop = 2.0 * n * rows * cols;
    printf("%s %d tokens x %dx%d  threads %d  best of %d: %.2f ms  %.1f GFLOP/s wall  %.1f GFLOP/s per CPU-second"
           "  (out[0] %g)\n", ty, n, rows, cols, threads, passes, best * 1e3, flop / best / 1e9, flop / best_cpu / 1e9,
           out[0]);
    printf("{\"dtype\": \"%s\", \"tokens\": %d, \"rows\": %d, \"cols\": %d, \"threads\": %d, \"gflops_wall\": %.2f, "
           "\"gflops_cpu\": %.2f}\n", ty, n, rows, cols, threads, flop / best / 1e9, flop / best_cpu / 1e9);
    return 0;
}
