// metrics.h — the server's Prometheus metrics (owns: latency histograms and per-reason
// success counters observed by the HTTP side; not: engine counters, which are read from
// engine_stats_get at scrape time). Text exposition format 0.0.4. Every name is octet_*
// and matches [a-zA-Z_][a-zA-Z0-9_]* (no ':', which Prometheus keeps for recording rules);
// where vLLM has the metric the rest of the name is vLLM's (vllm:num_requests_running is
// octet_num_requests_running). Every series carries model_name="...".
// Thread-safe: observations and rendering take one mutex.
#ifndef OCTET_METRICS_H
#define OCTET_METRICS_H

#include <pthread.h>

#include "../engine/engine.h"
#include "text_output.h"

#define METRICS_MAX_BUCKETS 24

struct histogram {
    int n_buckets;
    const double *le;                           // [n_buckets] upper bounds (+Inf implicit)
    long long counts[METRICS_MAX_BUCKETS + 1];  // per bucket (not cumulative), last = +Inf
    double sum;
    long long count;
};

enum metrics_reason { METRICS_STOP = 0, METRICS_LENGTH, METRICS_ABORT, METRICS_N_REASONS };

struct metrics {
    pthread_mutex_t mu;
    char model_name[256];   // already escaped for a label value
    struct histogram ttft, itl, e2e;
    long long success[METRICS_N_REASONS];
    long long http_requests_total, http_errors_total;
    long long client_gone_total;    // requests aborted because their client went away
};

void metrics_init(struct metrics *m, const char *model_name);
void metrics_free(struct metrics *m);
void metrics_observe_ttft(struct metrics *m, double seconds);
void metrics_observe_itl(struct metrics *m, double seconds);
// A request ended: its end-to-end latency and finish reason ("stop", "length", "abort").
void metrics_observe_finished(struct metrics *m, double e2e_seconds, const char *finish_reason);
void metrics_count_http(struct metrics *m, int status);
// A request was aborted because its client went away (counted once the engine released it).
void metrics_count_client_gone(struct metrics *m);
// Appends the whole exposition (engine counters from *es) to out. Returns 0 or <0 (oom).
int metrics_render(struct metrics *m, const struct engine_stats *es, struct text_buf *out);

#endif
