// bench_load.c — arrivals, the concurrency cap and vLLM's metrics over one run.
// One thread drives libcurl's multi handle; arrivals are precomputed (exponential gaps
// for a finite rate, like vLLM's burstiness=1 gamma), and a request that has arrived
// waits for a free slot when --max-concurrency is reached; its clock starts when sent.
#include "bench_load.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"
#include "../base/rng.h"
#include "http_client.h"
#include "prompts.h"
#include "progress.h"

struct run_ctx {
    struct bench_outcome *out;
    int n_done;
    double last_done_s;
};

static void on_done(void *ctx, struct http_stream *s) {
    struct run_ctx *r = ctx;
    struct bench_outcome *o = &r->out[s->index];
    o->ok = s->ok;
    snprintf(o->error, sizeof o->error, "%s", s->error);
    if (s->ok) {
        o->ttft_s = s->chunk_s[0] - s->start_s;
        o->latency_s = s->last_event_s - s->start_s;
        o->n_itl = s->n_chunks - 1;
        o->itl_s = malloc((size_t)(o->n_itl > 0 ? o->n_itl : 1) * sizeof(double));
        for (int i = 0; o->itl_s && i < o->n_itl; i++) o->itl_s[i] = s->chunk_s[i + 1] - s->chunk_s[i];
        if (!o->itl_s) o->n_itl = 0;
        o->output_len = s->usage_completion_tokens >= 0 ? s->usage_completion_tokens : s->n_chunks;
        if (s->usage_prompt_tokens >= 0) o->input_len = s->usage_prompt_tokens;
        o->text = s->text;
        s->text = NULL;
    }
    http_stream_free(s);
    r->n_done++;
    r->last_done_s = http_now_s();
}

static char *request_body(const struct bench_load_options *o, const struct bench_request *q) {
    json_t *b = json_object();
    json_object_set_new(b, "model", json_string(o->model));
    if (o->chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("user"));
        json_object_set_new(m, "content", json_string(q->prompt));
        json_t *msgs = json_array();
        json_array_append_new(msgs, m);
        json_object_set_new(b, "messages", msgs);
        json_object_set_new(b, "max_completion_tokens", json_integer(q->output_len));
    } else {
        json_object_set_new(b, "prompt", json_string(q->prompt));
    }
    json_object_set_new(b, "max_tokens", json_integer(q->output_len));
    json_object_set_new(b, "temperature", json_real(0.0));
    json_object_set_new(b, "stream", json_true());
    json_t *so = json_object();
    json_object_set_new(so, "include_usage", json_true());
    json_object_set_new(b, "stream_options", so);
    if (o->ignore_eos) json_object_set_new(b, "ignore_eos", json_true());
    if (o->logprobs > 0) {
        if (o->chat) {
            json_object_set_new(b, "logprobs", json_true());
            json_object_set_new(b, "top_logprobs", json_integer(o->logprobs));
        } else {
            json_object_set_new(b, "logprobs", json_integer(o->logprobs));
        }
    }
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

int bench_load_run(const struct bench_load_options *o, const struct bench_request *reqs, int n,
                   struct bench_outcome *out, double *duration_s) {
    memset(out, 0, (size_t)n * sizeof *out);
    for (int i = 0; i < n; i++) out[i].input_len = reqs[i].prompt_len;
    struct http_stream *st = calloc((size_t)(n > 0 ? n : 1), sizeof *st);
    double *arrive = calloc((size_t)(n > 0 ? n : 1), sizeof *arrive);
    struct run_ctx ctx = {.out = out};
    struct http_pool *pool = NULL;
    int rc = OCT_OK;
    if (!st || !arrive) { rc = err_set(OCT_ENOMEM, "bench: out of memory"); goto done; }
    if ((rc = http_pool_init(&pool, on_done, &ctx)) < 0) goto done;
    struct rng g;
    rng_seed(&g, o->seed ^ 0x5eedULL);
    for (int i = 1; i < n; i++)
        arrive[i] = arrive[i - 1] + (isfinite(o->request_rate) ? -log(1.0 - rng_double(&g)) / o->request_rate : 0);
    struct progress pr;
    progress_start(&pr, o->progress_label ? o->progress_label : "", n, !o->progress_label);
    progress_set_costs(&pr, o->progress_cost, o->progress_later);
    double t0 = http_now_s();
    int next = 0;
    while (ctx.n_done < n) {
        double now = http_now_s() - t0;
        while (next < n && arrive[next] <= now &&
               (o->max_concurrency <= 0 || http_pool_running(pool) < o->max_concurrency)) {
            char *body = request_body(o, &reqs[next]);
            st[next].index = next;
            int arc = body ? http_pool_add(pool, &st[next], o->url, body, o->api_key, o->timeout_s)
                           : err_set(OCT_ENOMEM, "bench: cannot build a request body");
            free(body);
            if (o->max_concurrency == 1) {  // one at a time: say which
                char what[64];
                snprintf(what, sizeof what, "input %d", reqs[next].prompt_len);
                progress_running(&pr, what);
            }
            if (arc < 0) {  // count it as failed, never drop it
                snprintf(out[next].error, sizeof out[next].error, "%s", err_msg());
                ctx.n_done++;
            }
            next++;
        }
        int wait_ms = 50;
        if (next < n && (o->max_concurrency <= 0 || http_pool_running(pool) < o->max_concurrency)) {
            double gap_ms = (arrive[next] - now) * 1000.0;
            wait_ms = gap_ms < 1 ? 1 : gap_ms < 50 ? (int)gap_ms : 50;
        }
        if (http_pool_running(pool) > 0) {
            if ((rc = http_pool_poll(pool, wait_ms)) < 0) break;
        } else if (next < n) {
            struct timespec ts = {0, (long)wait_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
        progress_update(&pr, ctx.n_done);
    }
    progress_end(&pr);
    *duration_s = (ctx.last_done_s > t0 ? ctx.last_done_s : http_now_s()) - t0;
done:
    if (pool) {
        for (int i = 0; i < n; i++) if (st && st[i].curl) http_stream_free(&st[i]);
        http_pool_free(pool);
    }
    free(st);
    free(arrive);
    return rc;
}

void bench_outcomes_free(struct bench_outcome *out, int n) {
    for (int i = 0; out && i < n; i++) {
        free(out[i].itl_s);
        free(out[i].text);
        out[i].itl_s = NULL;
        out[i].text = NULL;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct bench_stats bench_stats_of(const double *v, int n, double scale) {
    struct bench_stats s = {0};
    if (n <= 0) return s;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return s;
    double sum = 0;
    for (int i = 0; i < n; i++) { t[i] = v[i] * scale; sum += t[i]; }
    s.mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (t[i] - s.mean) * (t[i] - s.mean);
    s.std = sqrt(ss / n);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double pos = 0.5 * (n - 1), pos99 = 0.99 * (n - 1);
    int lo = (int)pos, lo99 = (int)pos99;
    s.median = t[lo] + (pos - lo) * (t[lo + (lo + 1 < n)] - t[lo]);
    s.p99 = t[lo99] + (pos99 - lo99) * (t[lo99 + (lo99 + 1 < n)] - t[lo99]);
    free(t);
    return s;
}

void bench_metrics_compute(const struct bench_outcome *out, int n, double duration_s, struct bench_metrics *m) {
    memset(m, 0, sizeof *m);
    long n_itl = 0;
    for (int i = 0; i < n; i++) n_itl += out[i].ok ? out[i].n_itl : 0;
    double *ttft = calloc((size_t)n + 1, sizeof(double)), *tpot = calloc((size_t)n + 1, sizeof(double));
    double *e2el = calloc((size_t)n + 1, sizeof(double)), *itl = calloc((size_t)n_itl + 1, sizeof(double));
    int n_ok = 0, n_tpot = 0;
    long k = 0;
    for (int i = 0; i < n; i++) {
        if (!out[i].ok) { m->failed++; continue; }
        m->total_input += out[i].input_len;
        m->total_output += out[i].output_len;
        if (ttft) ttft[n_ok] = out[i].ttft_s;
        if (e2el) e2el[n_ok] = out[i].latency_s;
        n_ok++;
        if (out[i].output_len > 1 && tpot)
            tpot[n_tpot++] = (out[i].latency_s - out[i].ttft_s) / (out[i].output_len - 1);
        for (int j = 0; itl && j < out[i].n_itl; j++) itl[k++] = out[i].itl_s[j];
    }
    m->completed = n_ok;
    m->duration_s = duration_s;
    double d = duration_s > 0 ? duration_s : 1e-9;
    m->request_throughput = n_ok / d;
    m->output_throughput = m->total_output / d;
    m->total_token_throughput = (m->total_input + m->total_output) / d;
    if (ttft) m->ttft_ms = bench_stats_of(ttft, n_ok, 1000.0);
    if (tpot) m->tpot_ms = bench_stats_of(tpot, n_tpot, 1000.0);
    if (itl) m->itl_ms = bench_stats_of(itl, (int)k, 1000.0);
    if (e2el) m->e2el_ms = bench_stats_of(e2el, n_ok, 1000.0);
    free(ttft); free(tpot); free(e2el); free(itl);
}

// Python's "{s:{c}^{n}}".format(...): centred, the odd pad char on the right.
static void header(FILE *f, const char *s, char c) {
    int n = 50, len = (int)strlen(s), pad = n - len > 0 ? n - len : 0, left = pad / 2;
    for (int i = 0; i < left; i++) fputc(c, f);
    fputs(s, f);
    for (int i = 0; i < pad - left; i++) fputc(c, f);
    fputc('\n', f);
}

static void row_i(FILE *f, const char *k, long v) { fprintf(f, "%-40s %-10ld\n", k, v); }
static void row_f(FILE *f, const char *k, double v) { fprintf(f, "%-40s %-10.2f\n", k, v); }

static void stat_rows(FILE *f, const char *title, const char *name, const struct bench_stats *s) {
    char k[64];
    header(f, title, '-');
    snprintf(k, sizeof k, "Mean %s (ms):", name); row_f(f, k, s->mean);
    snprintf(k, sizeof k, "Median %s (ms):", name); row_f(f, k, s->median);
    snprintf(k, sizeof k, "P99 %s (ms):", name); row_f(f, k, s->p99);
}

void bench_metrics_print(FILE *f, const struct bench_metrics *m, int max_concurrency, double request_rate) {
    header(f, " Serving Benchmark Result ", '=');
    row_i(f, "Successful requests:", m->completed);
    row_i(f, "Failed requests:", m->failed);
    if (max_concurrency > 0) row_i(f, "Maximum request concurrency:", max_concurrency);
    if (isfinite(request_rate)) row_f(f, "Request rate configured (RPS):", request_rate);
    row_f(f, "Benchmark duration (s):", m->duration_s);
    row_i(f, "Total input tokens:", m->total_input);
    row_i(f, "Total generated tokens:", m->total_output);
    row_f(f, "Request throughput (req/s):", m->request_throughput);
    row_f(f, "Output token throughput (tok/s):", m->output_throughput);
    row_f(f, "Total Token throughput (tok/s):", m->total_token_throughput);
    stat_rows(f, "Time to First Token", "TTFT", &m->ttft_ms);
    stat_rows(f, "Time per Output Token (excl. 1st token)", "TPOT", &m->tpot_ms);
    stat_rows(f, "Inter-token Latency", "ITL", &m->itl_ms);
    stat_rows(f, "End-to-end Latency", "E2EL", &m->e2el_ms);
    header(f, "", '=');
}

// A JSON string even when s is not valid UTF-8 (an error body cut mid-character).
static json_t *json_str_safe(const char *s) {
    json_t *j = json_string(s);
    if (j) return j;
    char *t = strdup(s);
    if (!t) return json_string("(unprintable)");
    for (char *q = t; *q; q++) if ((unsigned char)*q >= 0x80) *q = '?';
    j = json_string(t);
    free(t);
    return j;
}

static void set_stats(json_t *o, const char *name, const struct bench_stats *s) {
    char k[64];
    snprintf(k, sizeof k, "mean_%s_ms", name); json_object_set_new(o, k, json_real(s->mean));
    snprintf(k, sizeof k, "median_%s_ms", name); json_object_set_new(o, k, json_real(s->median));
    snprintf(k, sizeof k, "std_%s_ms", name); json_object_set_new(o, k, json_real(s->std));
    snprintf(k, sizeof k, "p99_%s_ms", name); json_object_set_new(o, k, json_real(s->p99));
}

json_t *bench_result_json(const struct bench_load_options *o, const struct bench_metrics *m,
                          const struct bench_outcome *out, int n) {
    json_t *r = json_object();
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y%m%d-%H%M%S", localtime(&now));
    json_object_set_new(r, "date", json_string(date));
    json_object_set_new(r, "backend", json_string(o->chat ? "openai-chat" : "openai"));
    json_object_set_new(r, "model_id", json_str_safe(o->model));
    json_object_set_new(r, "num_prompts", json_integer(n));
    json_object_set_new(r, "request_rate", isfinite(o->request_rate) ? json_real(o->request_rate) : json_string("inf"));
    json_object_set_new(r, "burstiness", json_real(1.0));
    json_object_set_new(r, "max_concurrency", o->max_concurrency > 0 ? json_integer(o->max_concurrency) : json_null());
    json_object_set_new(r, "duration", json_real(m->duration_s));
    json_object_set_new(r, "completed", json_integer(m->completed));
    json_object_set_new(r, "failed", json_integer(m->failed));
    json_object_set_new(r, "total_input_tokens", json_integer(m->total_input));
    json_object_set_new(r, "total_output_tokens", json_integer(m->total_output));
    json_object_set_new(r, "request_throughput", json_real(m->request_throughput));
    json_object_set_new(r, "output_throughput", json_real(m->output_throughput));
    json_object_set_new(r, "total_token_throughput", json_real(m->total_token_throughput));
    set_stats(r, "ttft", &m->ttft_ms);
    set_stats(r, "tpot", &m->tpot_ms);
    set_stats(r, "itl", &m->itl_ms);
    set_stats(r, "e2el", &m->e2el_ms);
    json_t *in = json_array(), *outl = json_array(), *tt = json_array(), *itls = json_array(), *err = json_array(),
           *txt = json_array();
    for (int i = 0; i < n; i++) {
        json_array_append_new(in, json_integer(out[i].input_len));
        json_array_append_new(outl, json_integer(out[i].ok ? out[i].output_len : 0));
        json_array_append_new(tt, json_real(out[i].ok ? out[i].ttft_s : 0.0));
        json_t *l = json_array();
        for (int j = 0; out[i].ok && j < out[i].n_itl; j++) json_array_append_new(l, json_real(out[i].itl_s[j]));
        json_array_append_new(itls, l);
        json_array_append_new(err, json_str_safe(out[i].ok ? "" : out[i].error));
        const char *text = out[i].text;
        json_array_append_new(txt, text ? json_stringn_nocheck(text, strlen(text)) : json_string(""));
    }
    json_object_set_new(r, "input_lens", in);
    json_object_set_new(r, "output_lens", outl);
    json_object_set_new(r, "ttfts", tt);
    json_object_set_new(r, "itls", itls);
    json_object_set_new(r, "generated_texts", txt);
    json_object_set_new(r, "errors", err);
    return r;
}

int bench_random_requests(struct prompt_gen *g, const struct bench_random_spec *sp, struct bench_request *reqs) {
    struct rng r;
    rng_seed(&r, sp->seed);
    double lo = 1 - sp->range_ratio, hi = 1 + sp->range_ratio;
    int in_lo = (int)floor(sp->input_len * lo), in_hi = (int)ceil(sp->input_len * hi);
    int out_lo = (int)floor(sp->output_len * lo), out_hi = (int)ceil(sp->output_len * hi);
    if (in_lo < 1) in_lo = 1;
    if (out_lo < 1) out_lo = 1;
    memset(reqs, 0, (size_t)sp->n * sizeof *reqs);
    for (int i = 0; i < sp->n; i++) {
        int in = in_lo + (int)(rng_next(&r) % (uint64_t)(in_hi - in_lo + 1));
        reqs[i].output_len = out_lo + (int)(rng_next(&r) % (uint64_t)(out_hi - out_lo + 1));
        int rc = prompt_gen_make(g, in, &reqs[i].prompt, &reqs[i].prompt_len);
        if (rc < 0) { bench_requests_free(reqs, i); return rc; }
    }
    return OCT_OK;
}

void bench_requests_free(struct bench_request *reqs, int n) {
    for (int i = 0; reqs && i < n; i++) { free(reqs[i].prompt); reqs[i].prompt = NULL; }
}

int bench_discover(const char *base_url, const char *api_key, char *model, size_t cap, int *max_model_len) {
    char url[1024], *body = NULL;
    long status = 0;
    snprintf(url, sizeof url, "%s/v1/models", base_url);
    TRY(http_get(url, api_key, 30, &body, &status));
    json_t *o = status == 200 ? json_loads(body, 0, NULL) : NULL;
    json_t *d0 = json_array_get(json_object_get(o, "data"), 0);
    const char *id = json_string_value(json_object_get(d0, "id"));
    json_t *ml = json_object_get(d0, "max_model_len");
    int rc = OCT_OK;
    if (!id) rc = err_set(OCT_EIO, "GET %s: HTTP %ld, no model listed", url, status);
    else {
        if (model && !model[0]) snprintf(model, cap, "%s", id);
        if (max_model_len) *max_model_len = json_is_integer(ml) ? (int)json_integer_value(ml) : 0;
    }
    json_decref(o);
    free(body);
    return rc;
}
