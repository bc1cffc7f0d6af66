// sweep.h — state shared by sweep.c (flags, running configurations) and sweep_report.c
// (prompts, fits, tables, JSON, charts). Internal to `octet bench sweep`.
// Invariant: all configurations see the same prompts (built once, on the first server).
#ifndef OCTET_SWEEP_H
#define OCTET_SWEEP_H

#include <stdbool.h>

#include "bench_load.h"
#include "fit.h"

#define SWEEP_MAX_CONFIGS 16
#define SWEEP_MAX_FLAGS 64
#define SWEEP_MAX_LENS 64

struct sweep_config {
    char name[160];                    // label in tables and charts
    char *flags[SWEEP_MAX_FLAGS];      // extra `octet serve` argv words (owned)
    int n_flags;
};

struct sweep_args {
    const char *model, *base_url, *serve_args, *output_dir, *tokenizer, *api_key;
    struct sweep_config configs[SWEEP_MAX_CONFIGS];
    int n_configs;
    int lens[SWEEP_MAX_LENS], n_lens;  // explicit --input-lens, else filled by sweep_prepare
    int min_len, max_len, output_len, per_len, logprobs;
    bool throughput, quiet;
    int num_prompts, input_len, max_conc;   // --throughput
    double range_ratio, rate;
    unsigned long long seed;
    double startup_timeout_s, request_timeout_s;
};

struct sweep_data {
    bool ready;
    struct bench_request warmup;
    struct bench_request *reqs;        // [n_reqs] in send order
    int n_reqs;
};

struct sweep_result {
    bool ran;
    char error[1024];
    char served_model[512];
    int max_model_len;
    struct bench_outcome *out;         // [n_out], one per request
    int n_out;
    double duration_s;
    struct bench_metrics m;
    // single-request sweep: points of successful requests and their fits
    double *x_ttft, *ttft_ms, *x_itl, *itl_ms;
    int n_ttft, n_itl;
    struct fit_line itl;
    struct fit_quad ttft;
    bool itl_ok, ttft_ok;
};

const char *sweep_flags_str(const struct sweep_config *c);  // space-joined flags
// Builds the length grid and the prompts once (later calls return at once).
int sweep_prepare(struct sweep_args *a, struct sweep_data *d, int max_model_len, const char *served_model);
void sweep_fit(struct sweep_result *r);
// A request's mean ITL for the fits (ms), NAN if it has fewer than 2 output tokens.
double sweep_mean_itl_ms(const struct bench_outcome *o);
// Tables on stdout; sweep.json / throughput.json, itl.png, ttft.png in output_dir.
int sweep_report(const struct sweep_args *a, const struct sweep_data *d, struct sweep_result *res);
void sweep_result_free(struct sweep_result *r);
void sweep_data_free(struct sweep_data *d);

#endif
