// membw.c — measures the machine's read bandwidth the way a decode GEMV reads weights: T threads
// each stream their own contiguous slice of one large buffer (bigger than every cache) with
// vector loads, summing it so the loads cannot be dropped. Prints a table line and JSON.
//   cc -O2 -march=native -pthread dev/cpu/membw.c -o build/membw && build/membw [MiB=1024] [threads=2] [reps=10]
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

struct job { const char *p; size_t n; double sum; };

static void *reader(void *arg) {
    struct job *j = arg;
    size_t i = 0;
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 256 <= j->n; i += 256) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps((const float *)(j->p + i)));
        a1 = _mm512_add_ps(a1, _mm512_load_ps((const float *)(j->p + i + 64)));
        a2 = _mm512_add_ps(a2, _mm512_load_ps((const float *)(j->p + i + 128)));
        a3 = _mm512_add_ps(a3, _mm512_load_ps((const float *)(j->p + i + 192)));
    }
    j->sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#else
    uint64_t s = 0;
    for (; i + 8 <= j->n; i += 8) { uint64_t v; memcpy(&v, j->p + i, 8); s += v; }
    j->sum = (double)s;
#endif
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    int nt = argc > 2 ? atoi(argv[2]) : 2, reps = argc > 3 ? atoi(argv[3]) : 10;
    if (mib < 1 || nt < 1 || nt > 64 || reps < 1) { fprintf(stderr, "membw: bad arguments\n"); return 1; }
    size_t bytes = mib << 20;
    char *buf = aligned_alloc(4096, bytes);
    if (!buf) { fprintf(stderr, "membw: no memory for %zu MiB\n", mib); return 1; }
    for (size_t i = 0; i < bytes; i += 4) { float f = (float)(i & 1023) * 1e-3f; memcpy(buf + i, &f, 4); }
    size_t slice = bytes / (size_t)nt / 256 * 256;
    double best = 0, total = 0, chk = 0;
    for (int r = 0; r < reps; r++) {
        pthread_t th[64];
        struct job jb[64];
        double t0 = now();
        for (int k = 0; k < nt; k++) {
            jb[k] = (struct job){buf + (size_t)k * slice, slice, 0};
            pthread_create(&th[k], NULL, reader, &jb[k]);
        }
        for (int k = 0; k < nt; k++) { pthread_join(th[k], NULL); chk += jb[k].sum; }
        double gbs = (double)slice * nt / (now() - t0) / 1e9;
        total += gbs;
        if (gbs > best) best = gbs;
    }
    printf("threads %d  buffer %zu MiB  reps %d  read GB/s: best %.1f  mean %.1f  (checksum %g)\n", nt, mib, reps,
           best, total / reps, chk);
    printf("{\"threads\": %d, \"mib\": %zu, \"reps\": %d, \"best_gbs\": %.2f, \"mean_gbs\": %.2f}\n", nt, mib, reps, best,
           total / reps);
    free(buf);
    return 0;
}
