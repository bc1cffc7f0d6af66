// bench_sampler.c — `octet bench sampler`: the host's cost of choosing one token from a row of
// logits (greedy argmax, temperature, top-p, top-k, min-p, logprobs), which a GPU decode step
// waits for. Logits are Gaussian (σ = 3, like a language model's), --vocab wide; each case runs
// --iters draws a round and prints the median of --reps rounds in µs a draw (table, then JSON).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"
#include "../base/rng.h"
#include "../engine/sampler.h"
#include "cli.h"
#include "tools.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { CASE_DRAW, CASE_LOGPROBS };
struct sampler_case {
    const char *name;
    int kind;
    float temperature, top_p, min_p;
    int top_k;
};

// µs a draw: the median of reps rounds of iters draws. sink keeps the results live.
static double time_case(const struct sampler_case *sc, const float *lg, int n, int iters, int reps, long *sink) {
    struct sampling_params p;
    sampling_params_default(&p);
    p.temperature = sc->temperature;
    p.top_p = sc->top_p;
    p.top_k = sc->top_k;
    p.min_p = sc->min_p;
    struct sampler s;
    if (sampler_init(&s, &p, n) < 0) return NAN;
    double *t = malloc(sizeof(double) * (size_t)reps);
    int32_t ids[20];
    for (int r = 0; r < reps && t; r++) {
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            if (sc->kind == CASE_DRAW) { *sink += sampler_sample(&s, lg); continue; }
            float m;
            double ls;
            logits_log_norm(lg, n, &m, &ls);
            int k = logits_top_k(lg, n, 20, ids);
            *sink += k + (long)((double)lg[ids[0]] - m - ls);
        }
        t[r] = (now_s() - t0) / iters * 1e6;
    }
    double med = NAN;
    if (t) {
        qsort(t, (size_t)reps, sizeof(double), cmp_d);
        med = t[reps / 2];
    }
    free(t);
    sampler_free(&s);
    return med;
}

int cmd_bench_sampler(int argc, char **argv) {
    static const char *const valued[] = {"--vocab", "--iters", "--reps", "--seed", NULL};
    long vocab = 128256, iters = 20, reps = 5, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fprintf(stderr, "usage: octet bench sampler [--vocab 128256] [--iters 20] [--reps 5] [--seed 1]\n");
            return 0;
        }
        if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) goto bad;
        long *dst = !strcmp(f, "--vocab")   ? &vocab
                    : !strcmp(f, "--iters") ? &iters
                    : !strcmp(f, "--reps")  ? &reps
                                            : &seed;
        if (cli_int(f, v, 1, 1L << 24, dst) < 0) goto bad;
    }
    float *lg = malloc(sizeof(float) * (size_t)vocab);
    if (!lg) { err_set(OCT_ENOMEM, "out of memory for %ld logits", vocab); goto bad; }
    struct rng r;
    rng_seed(&r, (uint64_t)seed);
    for (long i = 0; i < vocab; i++) {  // Box-Muller
        double u1 = (rng_float(&r) + 1e-9) / (1 + 2e-9), u2 = rng_float(&r);
        lg[i] = (float)(3.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
    static const struct sampler_case cases[] = {
        {"greedy", CASE_DRAW, 0.0f, 1.0f, 0.0f, 0},
        {"temperature 0.8", CASE_DRAW, 0.8f, 1.0f, 0.0f, 0},
        {"top_p 0.95", CASE_DRAW, 0.8f, 0.95f, 0.0f, 0},
        {"top_k 50", CASE_DRAW, 0.8f, 1.0f, 0.0f, 50},
        {"min_p 0.05", CASE_DRAW, 0.8f, 1.0f, 0.05f, 0},
        {"logprobs, top 20", CASE_LOGPROBS, 0.0f, 1.0f, 0.0f, 0},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    double us[sizeof cases / sizeof cases[0]];
    long sink = 0;
    printf("%-20s %12s\n", "case", "us/draw");
    for (int c = 0; c < nc; c++) {
        us[c] = time_case(&cases[c], lg, (int)vocab, (int)iters, (int)reps, &sink);
        printf("%-20s %12.1f\n", cases[c].name, us[c]);
    }
    printf("{\"vocab\":%ld,\"iters\":%ld,\"reps\":%ld,\"us_per_draw\":{", vocab, iters, reps);
    for (int c = 0; c < nc; c++) printf("%s\"%s\":%.2f", c ? "," : "", cases[c].name, us[c]);
    printf("},\"checksum\":%ld}\n", sink);
    free(lg);
    return 0;
bad:
    return cli_usage_error();
}
