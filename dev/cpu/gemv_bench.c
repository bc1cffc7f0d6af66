// gemv_bench.c — the CPU backend's decode matmul alone: one token against a ring of F16/BF16/F32/
// Q8_0/Q4_0/Q4_K/Q5_K/Q6_K or e4m3 (a scale per row; e4m3b: 128x128 blocks) weights (rows x cols each, 1 GiB in all by default, so every byte comes from memory as in a
// model's decode), and reports weight GB/s read (the block types: x quantized to 8 bits, then integer dot
// products, cpu_qdot.c). Every weight goes through the backend's weight_upload, so Q4_K decode reads the
// groups of 8 rows it repacks there (cpu_kq8.c, 1184 bytes for each 1152 of the file's), and Q6_K decode its
// groups of 8 (cpu_kq6x8.c, as many bytes as the file's); GB/s counts the file's bytes. Prints a table line
// and JSON.
//   make && cc -O2 -march=native -pthread dev/cpu/gemv_bench.c build/liboctet.a -lm -o build/gemv_bench
//   build/gemv_bench [f16|bf16|f32|q8_0|q4_0|q4_k|q5_k|q6_k|e4m3|e4m3b] [rows=8192] [cols=2048] [threads=2] [passes=5] [MiB=1024]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *ty = argc > 1 ? argv[1] : "f16";
    int rows = argc > 2 ? atoi(argv[2]) : 8192, cols = argc > 3 ? atoi(argv[3]) : 2048;
    int threads = argc > 4 ? atoi(argv[4]) : 2, passes = argc > 5 ? atoi(argv[5]) : 5;
    size_t mib = argc > 6 ? (size_t)atol(argv[6]) : 1024;
    enum dtype dt = !strcmp(ty, "bf16") ? DT_BF16 : !strcmp(ty, "f32") ? DT_F32 : !strcmp(ty, "q8_0") ? DT_Q8_0
                  : !strcmp(ty, "q4_0") ? DT_Q4_0 : !strcmp(ty, "q4_k") ? DT_Q4_K : !strcmp(ty, "q5_k") ? DT_Q5_K
                  : !strcmp(ty, "q6_k") ? DT_Q6_K : !strncmp(ty, "e4m3", 4) ? DT_E4M3 : DT_F16;
    if (rows < 1 || cols < 1 || threads < 1 || passes < 1) { fprintf(stderr, "gemv_bench: bad arguments\n"); return 1; }
    size_t wbytes = (size_t)rows * dtype_row_bytes(dt, cols);
    if (!wbytes) { fprintf(stderr, "gemv_bench: %d columns are not whole blocks of %s\n", cols, ty); return 1; }
    int nw = (int)((mib << 20) / wbytes);
    if (nw < 1) nw = 1;
    struct backend *b = backend_cpu_create(threads);
    struct weight *w = calloc((size_t)nw, sizeof *w);
    float *x = malloc((size_t)cols * 4), *out = malloc((size_t)rows * 4);
    if (!b || !w || !x || !out) { fprintf(stderr, "gemv_bench: no memory\n"); return 1; }
    for (int c = 0; c < cols; c++) x[c] = (float)(c % 7) * 0.1f;
    float *ones = malloc(((size_t)rows + 127) / 128 * (((size_t)cols + 127) / 128) * 4 + (size_t)rows * 4);
    for (size_t i = 0; ones && i < (size_t)rows + ((size_t)rows + 127) / 128 * (((size_t)cols + 127) / 128); i++)
        ones[i] = 1.0f;
    for (int k = 0; k < nw; k++) {
        uint16_t *d = malloc(wbytes);
        if (!d) { fprintf(stderr, "gemv_bench: no memory for weight %d\n", k); return 1; }
        // 2^-3..2^-2: finite in f16 and bf16; for the block types, every scale is such a number too
        for (size_t i = 0; i < wbytes / 2; i++) d[i] = (uint16_t)(0x3000 + ((i * 2654435761u) >> 12 & 0x3ff));
        w[k] = (struct weight){dt, rows, cols, d, NULL, {0}};
        if (dt == DT_E4M3) {  // (the same bytes read as e4m3 pairs: 0x30-0x33 and 0x00-0xff, finite but 0x7f / 0xff)
            for (size_t i = 0; i < wbytes; i++) ((uint8_t *)d)[i] &= 0xFE;
            w[k].fp8 = (struct weight_fp8){.wscale = ty[4] == 'b' ? WSCALE_BLOCK : WSCALE_CHANNEL, .block = 128,
                                           .scale = ones, .ascale = ASCALE_DYNAMIC_TOKEN};
        }
        b->ops->weight_upload(b, &w[k]);
    }
    for (int k = 0; k < nw; k++) b->ops->matmul(b, out, x, &w[k], 1);  // warm-up
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        double t0 = now();
        for (int k = 0; k < nw; k++) b->ops->matmul(b, out, x, &w[k], 1);
        b->ops->sync(b);
        double s = now() - t0;
        if (s < best) best = s;
    }
    double gbs = (double)wbytes * nw / best / 1e9;
    printf("%s %dx%d  %d weights (%.0f MiB)  threads %d  best of %d: %.2f ms/pass  %.1f GB/s of weights  (out[0] %g)\n",
           ty, rows, cols, nw, (double)wbytes * nw / 1048576.0, threads, passes, best * 1e3, gbs, out[0]);
    printf("{\"dtype\": \"%s\", \"rows\": %d, \"cols\": %d, \"threads\": %d, \"gbs\": %.2f}\n", ty, rows, cols, threads, gbs);
    return 0;
}
