// metrics.c — Prometheus text exposition of the server's metrics. Histogram buckets
// follow vLLM's defaults for the same metrics.
#include "metrics.h"

#include <string.h>

static const double ttft_le[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double itl_le[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
                                1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double e2e_le[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                                40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
static const char *const reason_names[METRICS_N_REASONS] = {"stop", "length", "abort"};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void hist_init(struct histogram *h, const double *le, int n) {
    memset(h, 0, sizeof *h);
    h->le = le;
    h->n_buckets = n;
}

static void hist_observe(struct histogram *h, double v) {
    int i = 0;
    while (i < h->n_buckets && v > h->le[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void metrics_init(struct metrics *m, const char *model_name) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    // label values escape backslash, quote and newline
    size_t k = 0;
    for (const char *p = model_name; *p && k + 3 < sizeof m->model_name; p++) {
        if (*p == '\\' || *p == '"') { m->model_name[k++] = '\\'; m->model_name[k++] = *p; }
        else if (*p == '\n') { m->model_name[k++] = '\\'; m->model_name[k++] = 'n'; }
        else m->model_name[k++] = *p;
    }
    m->model_name[k] = 0;
    hist_init(&m->ttft, ttft_le, N_OF(ttft_le));
    hist_init(&m->itl, itl_le, N_OF(itl_le));
    hist_init(&m->e2e, e2e_le, N_OF(e2e_le));
}

void metrics_free(struct metrics *m) { pthread_mutex_destroy(&m->mu); }

void metrics_observe_ttft(struct metrics *m, double s) {
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->ttft, s);
    pthread_mutex_unlock(&m->mu);
}

void metrics_observe_itl(struct metrics *m, double s) {
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->itl, s);
    pthread_mutex_unlock(&m->mu);
}

void metrics_observe_finished(struct metrics *m, double e2e, const char *reason) {
    int r = METRICS_ABORT;
    for (int i = 0; i < METRICS_N_REASONS; i++)
        if (reason && !strcmp(reason, reason_names[i])) r = i;
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->e2e, e2e);
    m->success[r]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_http(struct metrics *m, int status) {
    pthread_mutex_lock(&m->mu);
    m->http_requests_total++;
    if (status >= 400) m->http_errors_total++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_client_gone(struct metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->client_gone_total++;
    pthread_mutex_unlock(&m->mu);
}

static int head(struct text_buf *o, const char *name, const char *type, const char *help) {
    return text_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int gauge(struct text_buf *o, const struct metrics *m, const char *name, const char *help, double v) {
    if (head(o, name, "gauge", help) < 0) return -1;
    return text_buf_printf(o, "%s{model_name=\"%s\"} %.17g\n", name, m->model_name, v);
}

static int counter(struct text_buf *o, const struct metrics *m, const char *name, const char *help, long long v) {
    if (head(o, name, "counter", help) < 0) return -1;
    return text_buf_printf(o, "%s{model_name=\"%s\"} %lld\n", name, m->model_name, v);
}

static int hist(struct text_buf *o, const struct metrics *m, const char *name, const char *help,
                const struct histogram *h) {
    if (head(o, name, "histogram", help) < 0) return -1;
    long long cum = 0;
    for (int i = 0; i <= h->n_buckets; i++) {
        cum += h->counts[i];
        char le[32];
        if (i < h->n_buckets) snprintf(le, sizeof le, "%g", h->le[i]);
        else snprintf(le, sizeof le, "+Inf");
        if (text_buf_printf(o, "%s_bucket{le=\"%s\",model_name=\"%s\"} %lld\n", name, le, m->model_name, cum) < 0)
            return -1;
    }
    if (text_buf_printf(o, "%s_sum{model_name=\"%s\"} %.17g\n", name, m->model_name, h->sum) < 0) return -1;
    return text_buf_printf(o, "%s_count{model_name=\"%s\"} %lld\n", name, m->model_name, h->count);
}

// One sample of an engine-step counter: name{kind="K"[,part="P"],model_name="..."} v.
static int step_sample(struct text_buf *o, const struct metrics *m, const char *name, int kind, const char *part,
                       double v) {
    return text_buf_printf(o, "%s{kind=\"%s\"%s%s%s,model_name=\"%s\"} %.17g\n", name, engine_step_kind_names[kind],
                           part ? ",part=\"" : "", part ? part : "", part ? "\"" : "", m->model_name, v);
}

int metrics_render(struct metrics *m, const struct engine_stats *es, struct text_buf *o) {
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    rc |= gauge(o, m, "octet_num_requests_running", "Number of requests in model execution batches.", es->n_running);
    rc |= gauge(o, m, "octet_num_requests_waiting", "Number of requests waiting to be processed.", es->n_waiting);
    rc |= gauge(o, m, "octet_kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", es->kv_cache_usage);
    rc |= gauge(o, m, "octet_kv_blocks", "KV-cache blocks in the pool.", es->n_blocks_total);
    rc |= gauge(o, m, "octet_kv_blocks_free", "KV-cache blocks free or evictable (not held by a request).",
                es->n_blocks_free);
    rc |= counter(o, m, "octet_prompt_tokens_total", "Number of prefill tokens processed.", es->prompt_tokens_total);
    rc |= counter(o, m, "octet_generation_tokens_total", "Number of generation tokens processed.",
                  es->generation_tokens_total);
    rc |= counter(o, m, "octet_preemptions_total", "Cumulative number of preemptions from the engine.",
                  es->preemptions_total);
    rc |= counter(o, m, "octet_prefix_cache_queries_total", "Prefix-cache queries, in tokens.",
                  es->prefix_cache_queries_total);
    rc |= counter(o, m, "octet_prefix_cache_hits_total", "Prefix-cache hits, in tokens.", es->prefix_cache_hits_total);
    rc |= counter(o, m, "octet_engine_requests_finished_total", "Requests the engine finished (any reason).",
                  es->requests_finished_total);
    rc |= counter(o, m, "octet_steps_ahead_total",
                  "Greedy decode steps launched before the previous step was read back (asynchronous scheduling).",
                  es->steps_ahead_total);
    rc |= head(o, "octet_engine_steps_total", "counter",
               "Engine steps by kind: decode (only decoding sequences), prefill (only prompt chunks), mixed (both).");
    for (int k = 0; k < ENGINE_STEP_KINDS; k++)
        rc |= step_sample(o, m, "octet_engine_steps_total", k, NULL, (double)es->step[k].steps);
    rc |= head(o, "octet_engine_step_seconds_total", "counter",
               "The engine thread's time in steps by kind: the forward pass (launch and wait) and the host's share.");
    for (int k = 0; k < ENGINE_STEP_KINDS; k++) {
        rc |= step_sample(o, m, "octet_engine_step_seconds_total", k, "forward", es->step[k].forward_s);
        rc |= step_sample(o, m, "octet_engine_step_seconds_total", k, "host", es->step[k].host_s);
    }
    rc |= head(o, "octet_engine_step_tokens_total", "counter",
               "Tokens the steps ran by kind: decode (one a decoding sequence) and prefill (prompt chunks).");
    for (int k = 0; k < ENGINE_STEP_KINDS; k++) {
        rc |= step_sample(o, m, "octet_engine_step_tokens_total", k, "decode", (double)es->step[k].decode_tokens);
        rc |= step_sample(o, m, "octet_engine_step_tokens_total", k, "prefill", (double)es->step[k].prefill_tokens);
    }
    rc |= counter(o, m, "octet_http_requests_total", "HTTP requests answered.", m->http_requests_total);
    rc |= counter(o, m, "octet_http_errors_total", "HTTP requests answered with a 4xx or 5xx status.",
                  m->http_errors_total);
    rc |= counter(o, m, "octet_client_disconnects_total",
                  "Requests aborted because their client went away (counted once the engine released them).",
                  m->client_gone_total);
    rc |= head(o, "octet_request_success_total", "counter", "Count of successfully processed requests.");
    for (int r = 0; r < METRICS_N_REASONS; r++)
        rc |= text_buf_printf(o, "octet_request_success_total{finished_reason=\"%s\",model_name=\"%s\"} %lld\n",
                              reason_names[r], m->model_name, m->success[r]);
    rc |= hist(o, m, "octet_time_to_first_token_seconds", "Histogram of time to first token in seconds.", &m->ttft);
    rc |= hist(o, m, "octet_inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &m->itl);
    rc |= hist(o, m, "octet_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
               &m->e2e);
    pthread_mutex_unlock(&m->mu);
    return rc ? -1 : 0;
}
