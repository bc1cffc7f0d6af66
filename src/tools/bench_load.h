// bench_load.h — the load generator shared by `bench serve` and `bench sweep` (owns:
// arrivals (Poisson or all at once), the concurrency cap, per-request outcomes, vLLM's
// metrics, its printed result block and its JSON keys; not: flag parsing or prompt text).
// Invariant: every request yields one outcome; a failed one keeps its error and counts in
// `failed`, with output_len 0 and ttft 0 as vLLM records it.
#ifndef OCTET_BENCH_LOAD_H
#define OCTET_BENCH_LOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

struct bench_request {
    char *prompt;      // UTF-8 text (owned by the caller)
    int prompt_len;    // tokens the prompt encodes to (as the client's tokenizer counts)
    int output_len;    // max_tokens
};

struct bench_load_options {
    const char *url;        // base URL + endpoint
    const char *model;      // sent as "model"
    const char *api_key;    // or NULL
    bool chat;              // /v1/chat/completions body (messages) instead of prompt
    int max_concurrency;    // 0 = no cap
    double request_rate;    // requests/s (Poisson arrivals); INFINITY = all at once
    unsigned long long seed;
    bool ignore_eos;
    int logprobs;           // > 0: ask for logprobs (also makes servers that skip text-less tokens send a
                            // chunk per token)
    double timeout_s;       // per request, 0 = none
    const char *progress_label;  // NULL = no progress output
    const double *progress_cost; // [n] relative cost of each request for the progress ETA, or NULL (equal)
    double progress_later;       // cost, in those units, of the work queued after this run (its total ETA)
};

struct bench_outcome {
    bool ok;
    char error[512];
    int input_len, output_len;  // usage counts when the server sent them
    double ttft_s, latency_s;   // from send to first token chunk / last event
    double *itl_s;              // [n_itl] gaps between token chunks
    int n_itl;
    char *text;                 // generated text
};

struct bench_stats { double mean, median, std, p99; };

struct bench_metrics {
    int completed, failed;
    long total_input, total_output;
    double duration_s;
    double request_throughput, output_throughput, total_token_throughput;
    struct bench_stats ttft_ms, tpot_ms, itl_ms, e2el_ms;
};

// Sends reqs[0..n) and fills out[0..n); *duration_s is first send → last completion.
// Returns <0 only when the client itself cannot run (not for failed requests).
int bench_load_run(const struct bench_load_options *o, const struct bench_request *reqs, int n,
                   struct bench_outcome *out, double *duration_s);
void bench_outcomes_free(struct bench_outcome *out, int n);

// Mean, median, population std and p99 (linear interpolation, as numpy) of v[0..n), in the
// input's units times `scale`; all zero when n == 0.
struct bench_stats bench_stats_of(const double *v, int n, double scale);

void bench_metrics_compute(const struct bench_outcome *out, int n, double duration_s, struct bench_metrics *m);
// vLLM's "Serving Benchmark Result" block.
void bench_metrics_print(FILE *f, const struct bench_metrics *m, int max_concurrency, double request_rate);
// The result object with vLLM's key names (date, backend, model_id, …, ttfts, itls, errors).
json_t *bench_result_json(const struct bench_load_options *o, const struct bench_metrics *m,
                          const struct bench_outcome *out, int n);

struct prompt_gen;

// vLLM's random dataset: lengths uniform in [L·(1-r), L·(1+r)] (inputs and outputs).
struct bench_random_spec {
    int n, input_len, output_len;
    double range_ratio;
    unsigned long long seed;
};
// Fills reqs[0..sp->n) with prompts from g; free with bench_requests_free.
int bench_random_requests(struct prompt_gen *g, const struct bench_random_spec *sp, struct bench_request *reqs);
void bench_requests_free(struct bench_request *reqs, int n);

// GET base_url/v1/models: if model is "" (cap > 0), copies the first model's id into it;
// *max_model_len gets the reported max_model_len or 0 (either pointer may be NULL).
int bench_discover(const char *base_url, const char *api_key, char *model, size_t cap, int *max_model_len);

struct tokenizer;
// The tokenizer that sizes prompts (bench_serve.c): explicit_path if given (error if it
// cannot load), else `model` if loadable, else the byte-level stand-in with a warning.
int bench_pick_tokenizer(const char *explicit_path, const char *model, struct tokenizer **tok);

#endif
