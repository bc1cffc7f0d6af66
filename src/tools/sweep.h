// sweep.h — state shared by sweep.c (flags, running configurations) and sweep_report.c
// (prompts, fits, tables, JSON, charts). Internal to `octet bench sweep`.
// Invariant: all configurations see the same prompts (built once, on the first server).
#ifndef OCTET_SWEEP_H
#define OCTET_SWEEP_H

#include <stdbool.h>

#include "bench_load.h"
#include "fit.h"
#include "step_stats.h"

#define SWEEP_MAX_CONFIGS 16
#define SWEEP_MAX_FLAGS 64
#define SWEEP_MAX_LENS 64
// The default grid's longest input on a machine without a GPU: 256 → 8192 doubling keeps the
// README's main job (dummy:tiny, auto vs fp8) near a minute on 2 cores with fits over 32× in length.
#define SWEEP_CPU_MAX_LEN 8192

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
    bool cpu_grid;                     // the default grid was capped at SWEEP_CPU_MAX_LEN
    int n_cpus;                        // online cores, and the load average before any server started
    double load_start[3], load_end[3]; // (1, 5, 15 minutes; negative when /proc/loadavg is unreadable)
    double busy_cores;                 // cores in use by other work just before the sweep (-1: unknown)
    bool busy;                         // busy_cores (else load_start[0]) at or above half the cores
};

struct sweep_data {
    bool ready;
    struct bench_request warmup;
    struct bench_request *reqs;        // [n_reqs] in send order
    int n_reqs;
    double *cost;                      // [n_reqs] relative cost for the progress ETA: a model of prefill and
                                       // decode for the first configuration, its measured latencies after it
};

struct sweep_result {
    bool ran;
    char error[1024];
    char served_model[512];
    char kv_resolved[64];              // the cache dtype(s) the server reported using ("bf16"), or ""
    double itl_spread_pct;             // median over points of the spread of a request's four ITL quarters
    int max_model_len;
    struct bench_outcome *out;         // [n_out], one per request
    int n_out;
    double duration_s;
    struct bench_metrics m;
    struct step_stats steps;           // the server's steps over the measured requests (octet servers only)
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
// The relative cost of one request of `len` input and `out` output tokens: prefill grows with
// len² (attention) and len (the matrices), decode with out × (a constant + len).
double sweep_cost_model(int len, int out);
// A request's mean ITL for the fits (ms), NAN if it has fewer than 2 output tokens.
double sweep_mean_itl_ms(const struct bench_outcome *o);
// Tables on stdout; sweep.json / throughput.json, itl.png, ttft.png in output_dir.
int sweep_report(const struct sweep_args *a, const struct sweep_data *d, struct sweep_result *res);
void sweep_result_free(struct sweep_result *r);
void sweep_data_free(struct sweep_data *d);

#endif
