// blas_bench.c — the prefill product through OpenBLAS beside octet's own (cpu_gemm.c), in one process
// on the same data: out[n][rows] = x[n][cols] · Wᵀ for F16 weights, three ways in turn:
//   octet   the backend's matmul on the F16 weight (what `build/octet` runs);
//   sgemm   cblas_sgemm on a copy of the weight widened to f32 once, outside the timing (twice the
//           weight memory: the best OpenBLAS can do here);
//   sgemm+w the same with the widening of the weight inside the timing (what an engine keeping F16
//           weights would pay on every product).
// Checks that sgemm's result is within 1e-4 relative of octet's, then prints a table line per way and JSON.
// Debian's libopenblas-dev (not a dependency of octet: this lab program only):
//   make && cc -O2 -march=native -pthread -I/usr/include/x86_64-linux-gnu/openblas-pthread
//       dev/cpu/blas_bench.c build/liboctet.a -lopenblas -lm -o build/blas_bench
//   build/blas_bench [tokens=512] [rows=2048] [cols=2048] [threads=2] [passes=5]
// Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) takes its Haswell (AVX2) kernels on an AVX-512 AMD CPU it does
// not know; OPENBLAS_CORETYPE=SkylakeX (or Cooperlake) in the environment selects its AVX-512 ones.
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
#include "../../src/base/half.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 512, rows = argc > 2 ? atoi(argv[2]) : 2048;
    int cols = argc > 3 ? atoi(argv[3]) : 2048, threads = argc > 4 ? atoi(argv[4]) : 2;
    int passes = argc > 5 ? atoi(argv[5]) : 5;
    if (n < 1 || rows < 1 || cols < 1 || threads < 1 || passes < 1) {
        fprintf(stderr, "blas_bench: bad arguments\n");
        return 1;
    }
    openblas_set_num_threads(threads);
    size_t ne = (size_t)rows * cols;
    struct backend *b = backend_cpu_create(threads);
    uint16_t *d = malloc(ne * 2);
    float *wf = malloc(ne * 4), *x = malloc((size_t)n * cols * 4);
    float *o1 = malloc((size_t)n * rows * 4), *o2 = malloc((size_t)n * rows * 4);
    if (!b || !d || !wf || !x || !o1 || !o2) { fprintf(stderr, "blas_bench: no memory\n"); return 1; }
    for (size_t i = 0; i < ne; i++) d[i] = (uint16_t)(0x3000 + ((i * 2654435761u) >> 12 & 0x3ff));
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = (float)(i % 7) * 0.1f;
    struct weight w = {DT_F16, rows, cols, d, NULL, {0}};
    b->ops->weight_upload(b, &w);
    f16_row_to_f32(d, wf, ne);
    // warm-up and the check
    b->ops->matmul(b, o1, x, &w, n);
    b->ops->sync(b);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, x, cols, wf, cols, 0.0f, o2, rows);
    double worst = 0;
    for (size_t i = 0; i < (size_t)n * rows; i++) {
        double e = fabs((double)o1[i] - o2[i]) / (fabs((double)o1[i]) + 1e-6);
        if (e > worst) worst = e;
    }
    if (worst > 1e-4) { fprintf(stderr, "blas_bench: sgemm differs from octet by %.3g relative\n", worst); return 1; }
    const char *name[3] = {"octet", "sgemm", "sgemm+w"};
    double best[3] = {1e30, 1e30, 1e30};
    // each way's passes together, after a pause: OpenBLAS's threads and octet's workers spin a while
    // after a call, which would slow the other's next call
    for (int k = 0; k < 3; k++) {
        nanosleep(&(struct timespec){0, 200000000}, NULL);
        for (int p = 0; p < passes; p++) {
            double t0 = now();
            if (k == 0) {
                b->ops->matmul(b, o1, x, &w, n);
                b->ops->sync(b);
            } else {
                if (k == 2) f16_row_to_f32(d, wf, ne);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, x, cols, wf, cols, 0.0f,
                            o2, rows);
            }
            double s = now() - t0;
            if (s < best[k]) best[k] = s;
        }
    }
    double flop = 2.0 * n * rows * cols;
    printf("OpenBLAS: %s (core %s)\n", openblas_get_config(), openblas_get_corename());
    for (int k = 0; k < 3; k++)
        printf("%-8s %d tokens x %dx%d  threads %d  best of %d: %.2f ms  %.1f GFLOP/s\n", name[k], n, rows, cols,
               threads, passes, best[k] * 1e3, flop / best[k] / 1e9);
    printf("{\"tokens\": %d, \"rows\": %d, \"cols\": %d, \"threads\": %d, \"octet_gflops\": %.2f, "
           "\"sgemm_gflops\": %.2f, \"sgemm_widen_gflops\": %.2f, \"max_rel_diff\": %.3g, \"openblas_core\": \"%s\"}\n",
           n, rows, cols, threads, flop / best[0] / 1e9, flop / best[1] / 1e9, flop / best[2] / 1e9, worst,
           openblas_get_corename());
    return 0;
}
