// fma_peak.c — the AVX2 FMA rate a prefill product can reach on this machine: (1) the peak, 12 independent
// 8-lane FMA chains on each of T threads; (2) the loop of cpu_gemm.c's AVX2 micro kernel (4 weight rows of
// F16 widened in registers × 3 tokens of packed f32 x, one a/b half) on one core, its x streamed from a buffer
// of X KB (wrapping) and its weights one 16 KB chunk, so where x stops fitting the L2 shows; (3) that loop
// written with named accumulators. Prints a table line and JSON per measurement; the machine being shared,
// take the best of several runs.
//   cc -O2 -march=native -pthread dev/cpu/fma_peak.c -o build/fma_peak && build/fma_peak [threads=2]
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define PEAK_ITERS 200000000L

static void *peak_thread(void *p) {
    __m256 a[12];
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    const __m256 x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.999f);
    for (long it = 0; it < PEAK_ITERS; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], x, y);
    float s = 0;
    for (int i = 0; i < 12; i++) s += a[i][0];
    *(float *)p = s;
    return NULL;
}

// GFLOP/s of the micro loop over K columns (K / 16 steps of 12 FMAs), x wrapping in xfloats floats.
static double micro_loop(int K, size_t xfloats, float *sink) {
    uint16_t *w = aligned_alloc(64, (size_t)4 * K * 2);
    float *x = aligned_alloc(64, xfloats * 4);
    if (!w || !x) { fprintf(stderr, "fma_peak: no memory\n"); exit(1); }
    for (int i = 0; i < 4 * K; i++) w[i] = 0x3c00;  // 1.0 in f16
    for (size_t i = 0; i < xfloats; i++) x[i] = 1e-9f;
    const size_t group = (size_t)K * 3 / 2;  // one token group's half: 3 tokens × 8 floats a 16-column step
    long steps = 0;
    size_t xo = 0;
    __m256 s = _mm256_setzero_ps();
    double t = now();
    for (int rep = 0; rep < 20000; rep++) {
        __m256 c[12];
        for (int i = 0; i < 12; i++) c[i] = _mm256_setzero_ps();
        if (xo + group > xfloats) xo = 0;
        const float *xp = x + xo;
        for (int k = 0; k < K; k += 16) {
            const float *xk = xp + (size_t)k * 3 / 2;
            const __m256 x0 = _mm256_load_ps(xk), x1 = _mm256_load_ps(xk + 8), x2 = _mm256_load_ps(xk + 16);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                __m256 wv = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(w + (size_t)r * K + k)));
                __asm__("" : "+x"(wv));  // one load for the three FMAs
                c[3 * r] = _mm256_fmadd_ps(x0, wv, c[3 * r]);
                c[3 * r + 1] = _mm256_fmadd_ps(x1, wv, c[3 * r + 1]);
                c[3 * r + 2] = _mm256_fmadd_ps(x2, wv, c[3 * r + 2]);
            }
        }
        xo += group;
        steps += K / 16;
        for (int i = 0; i < 12; i++) s = _mm256_add_ps(s, c[i]);
    }
    t = now() - t;
    *sink += s[0];
    free(w);
    free(x);
    return steps * 12.0 * 16 / t / 1e9;
}

// micro_loop with its 12 accumulators as named variables: the same instructions in the loop (gcc 12 -O2),
// other registers and another code layout; it has run at up to 98 % of a core's peak where micro_loop ran
// at 84 %, for reasons this program does not show (the machine has no hardware counters). The same change in
// cpu_gemm.c's AVX2 micro kernel ran level with the array form there (gemm_bench f16 512 2048 2048 1 3, eight
// runs alternating: best 86.3 against 86.1 GFLOP/s), so it is not kept.
static double micro_loop_named(int K, size_t xfloats, float *sink) {
    uint16_t *w = aligned_alloc(64, (size_t)4 * K * 2);
    float *x = aligned_alloc(64, xfloats * 4);
    if (!w || !x) { fprintf(stderr, "fma_peak: no memory\n"); exit(1); }
    for (int i = 0; i < 4 * K; i++) w[i] = 0x3c00;
    for (size_t i = 0; i < xfloats; i++) x[i] = 1e-9f;
    const size_t group = (size_t)K * 3 / 2;
    long steps = 0;
    size_t xo = 0;
    __m256 s = _mm256_setzero_ps();
    double t = now();
    for (int rep = 0; rep < 20000; rep++) {
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
               c9 = c0, c10 = c0, c11 = c0;
        if (xo + group > xfloats) xo = 0;
        const float *xp = x + xo;
        for (int k = 0; k < K; k += 16) {
            const float *xk = xp + k * 3 / 2;
            const __m256 x0 = _mm256_load_ps(xk), x1 = _mm256_load_ps(xk + 8), x2 = _mm256_load_ps(xk + 16);
            __m256 wv;
#define ROW(r, a, b, c)                                                             \
    wv = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(w + (size_t)(r) * K + k))); \
    __asm__("" : "+x"(wv));                                                         \
    a = _mm256_fmadd_ps(x0, wv, a);                                                 \
    b = _mm256_fmadd_ps(x1, wv, b);                                                 \
    c = _mm256_fmadd_ps(x2, wv, c);
            ROW(0, c0, c1, c2) ROW(1, c3, c4, c5) ROW(2, c6, c7, c8) ROW(3, c9, c10, c11)
#undef ROW
        }
        xo += group;
        steps += K / 16;
        s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                                           _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)),
                                                         _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)))));
    }
    t = now() - t;
    *sink += s[0];
    free(w);
    free(x);
    return steps * 12.0 * 16 / t / 1e9;
}

int main(int argc, char **argv) {
    int T = argc > 1 ? atoi(argv[1]) : 2;
    if (T < 1 || T > 64) { fprintf(stderr, "fma_peak: threads 1..64\n"); return 1; }
    pthread_t th[64];
    float sink[64];
    double t = now();
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, peak_thread, &sink[i]);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    t = now() - t;
    const double peak = T * (double)PEAK_ITERS * 12 * 16 / t / 1e9;
    printf("FMA peak, %d threads: %.1f GFLOP/s (%.2f GHz at 32 flop/cycle/core)\n", T, peak, peak / T / 32);
    printf("{\"test\": \"peak\", \"threads\": %d, \"gflops\": %.2f}\n", T, peak);
    static const int xkb[] = {12, 128, 384, 768};
    for (int i = 0; i < 4; i++) {
        float s = 0;
        const double g = micro_loop(2048, (size_t)xkb[i] * 256, &s);
        printf("micro loop, 1 core, x stream %4d KB: %.1f GFLOP/s (%.0f %% of one core's peak)  (%g)\n", xkb[i], g,
               100 * g / (peak / T), s);
        printf("{\"test\": \"micro_loop\", \"x_kb\": %d, \"gflops\": %.2f}\n", xkb[i], g);
        const double gn = micro_loop_named(2048, (size_t)xkb[i] * 256, &s);
        printf("  the same, named accumulators:  %.1f GFLOP/s (%.0f %%)  (%g)\n", gn, 100 * gn / (peak / T), s);
        printf("{\"test\": \"micro_loop_named\", \"x_kb\": %d, \"gflops\": %.2f}\n", xkb[i], gn);
    }
    return 0;
}
