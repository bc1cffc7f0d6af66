// cuda_decode_prof.cuh — kernel lab (OCTET_DECODE_PROF=1): a timeline of one decode launch, included
// by cuda_attention.cu. The PROF instances of the transposed decode kernel (cuda_decode_t.cuh)
// stamp the global timer at four points of every CTA — entry, the first block's bytes in shared
// memory (warp 0), the end of the 4 warps' loops, the end of the merge and store — with the SM
// it ran on; the host then prints where a launch's time goes: how spread the CTAs' starts and
// ends are (the tail of a one-wave grid), how long the first bytes take (the ramp), and, from
// stream events, the split combine and the launch gaps beside the kernel. The default instances
// are untouched (PROF is a template parameter), and a PROF launch synchronises the stream, so
// its printout describes a launch alone, not back-to-back ones.
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define DPROF_SLOTS 5  // [start, first bytes, loops done, stored, smid] a CTA

__device__ unsigned long long *g_decode_prof;  // [CTAs][DPROF_SLOTS], CTA = (s, g, split) linear

__device__ __forceinline__ unsigned long long dprof_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void dprof_mark(int slot) {
    const size_t cta = ((size_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned long long v;
    if (slot == 4) {
        unsigned int sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        v = sm;
    } else {
        v = dprof_now();
    }
    g_decode_prof[cta * DPROF_SLOTS + slot] = v;
}

static int dprof_cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// quantile q of the n sorted values v
static double dprof_q(const double *v, int n, double q) { return v[(int)(q * (n - 1) + 0.5)]; }

struct decode_prof {
    bool on = false;
    unsigned long long *buf = nullptr;  // device [cap][DPROF_SLOTS]
    size_t cap = 0;
    cudaEvent_t ev[3] = {};
};

// Before the decode launch: a buffer for n CTAs, the first event.
static bool dprof_begin(struct cuda_backend *c, decode_prof *p, size_t n) {
    if (!p->ev[0]) {
        for (int i = 0; i < 3; i++)
            if (cuda_fail(c, cudaEventCreate(&p->ev[i]), "cudaEventCreate (decode prof)")) return false;
    }
    if (n > p->cap) {
        if (p->buf) cudaFree(p->buf);
        p->buf = nullptr;
        if (cuda_fail(c, cudaMalloc((void **)&p->buf, n * DPROF_SLOTS * sizeof *p->buf), "cudaMalloc (decode prof)") ||
            cuda_fail(c, cudaMemcpyToSymbol(g_decode_prof, &p->buf, sizeof p->buf), "decode prof symbol"))
            return false;
        p->cap = n;
    }
    return !cuda_fail(c, cudaMemsetAsync(p->buf, 0, n * DPROF_SLOTS * sizeof *p->buf, c->stream), "decode prof reset") &&
           !cuda_fail(c, cudaEventRecord(p->ev[0], c->stream), "decode prof event");
}

// After the decode kernel (i = 1) and after the combine (i = 2; the same point when none ran).
static void dprof_event(struct cuda_backend *c, decode_prof *p, int i) { cuda_fail(c, cudaEventRecord(p->ev[i], c->stream), "decode prof event"); }

// After both: waits for them and prints one line (µs; times from the first CTA's start);
// OCTET_DECODE_PROF_DUMP=FILE also writes each CTA as cta,smid,start,first bytes (from its start),loops done,stored.
static void dprof_report(struct cuda_backend *c, decode_prof *p, size_t n, double bytes) {
    unsigned long long *h = (unsigned long long *)malloc(n * DPROF_SLOTS * sizeof *h);
    double *v = (double *)malloc(n * 4 * sizeof *v);
    if (!h || !v || cuda_fail(c, cudaStreamSynchronize(c->stream), "decode prof sync") ||
        cuda_fail(c, cudaMemcpy(h, p->buf, n * DPROF_SLOTS * sizeof *h, cudaMemcpyDeviceToHost), "decode prof copy")) {
        free(h);
        free(v);
        return;
    }
    const char *dump = getenv("OCTET_DECODE_PROF_DUMP");  // a CSV of this launch's CTAs (overwritten by the next)
    FILE *df = dump && *dump ? fopen(dump, "w") : nullptr;
    unsigned long long t0 = ~0ull, tend = 0;
    size_t busy = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned long long *r = h + i * DPROF_SLOTS;
        if (!r[3]) continue;  // an empty split (it left before its loop)
        if (r[0] < t0) t0 = r[0];
        if (r[3] > tend) tend = r[3];
        busy++;
    }
    double *st = v, *fb = v + n, *lp = v + 2 * n, *dur = v + 3 * n;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned long long *r = h + i * DPROF_SLOTS;
        if (!r[3]) continue;
        st[k] = (r[0] - t0) * 1e-3;
        fb[k] = r[1] ? (r[1] - r[0]) * 1e-3 : 0.0;
        lp[k] = (r[2] - t0) * 1e-3;
        dur[k] = (r[2] - r[0]) * 1e-3;
        if (df) fprintf(df, "%zu,%llu,%.3f,%.3f,%.3f,%.3f\n", i, r[4], st[k], fb[k], lp[k], (r[3] - t0) * 1e-3);
        k++;
    }
    if (df) fclose(df);
    qsort(st, k, sizeof *st, dprof_cmp);
    qsort(fb, k, sizeof *fb, dprof_cmp);
    qsort(lp, k, sizeof *lp, dprof_cmp);
    qsort(dur, k, sizeof *dur, dprof_cmp);
    float e01 = 0, e12 = 0;
    cudaEventElapsedTime(&e01, p->ev[0], p->ev[1]);
    cudaEventElapsedTime(&e12, p->ev[1], p->ev[2]);
    const double span = (tend - t0) * 1e-3;
    if (k > 0)
        fprintf(stderr,
                "decode prof: ctas %d busy of %zu; span %.2f us (%.0f GB/s); starts p50 %.2f max %.2f; first bytes p50 %.2f "
                "max %.2f; loops done min %.2f p10 %.2f p50 %.2f p90 %.2f max %.2f; loop time min %.2f p50 %.2f max %.2f; "
                "events: kernel %.2f us, combine + gaps %.2f us\n",
                k, n, span, bytes / (span * 1e3), dprof_q(st, k, 0.5), st[k - 1], dprof_q(fb, k, 0.5), fb[k - 1], lp[0],
                dprof_q(lp, k, 0.1), dprof_q(lp, k, 0.5), dprof_q(lp, k, 0.9), lp[k - 1], dur[0], dprof_q(dur, k, 0.5), dur[k - 1],
                e01 * 1e3, e12 * 1e3);
    free(h);
    free(v);
}
