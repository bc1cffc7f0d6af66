// load_test.c — load and fault test for `octet serve` over real HTTP (libcurl multi).
// Phase 1: each distinct greedy request served alone (the reference). Phase 2: --clients
// concurrent streams (distinct requests repeated) — no failures, every output identical to
// its reference. Phase 3: --disconnect clients that hang up mid-stream. After phases 2 and
// 3 the KV pool must be back to full (octet_kv_blocks_free == octet_kv_blocks) and
// the server healthy: after phase 3 it waits (inotify, no polling) for the server's log
// (--server-log, its stderr) to hold one "request ... aborted" line per hang-up; the server
// writes that line once the engine has released the request. Prints figures as JSON and a
// final "N passed, N failed" line.
// Build: cc -std=c11 -D_GNU_SOURCE -O2 load_test.c -o load_test -lcurl -ljansson
#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

static int n_pass, n_fail;
#define CHECK(cond, ...) do { if (cond) n_pass++; else { n_fail++; fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); } } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct xfer {
    CURL *h;
    char *body;         // request JSON
    char *buf;          // response bytes
    size_t n, cap;
    size_t hangup_after; // 0 = read to the end; else abort once this many bytes arrived
    double t0, t_first; // start, first content chunk
    long status;
    CURLcode rc;
    int distinct;       // which distinct request
};

static size_t on_data(char *p, size_t sz, size_t nm, void *u) {
    struct xfer *x = u;
    size_t k = sz * nm;
    if (x->n + k + 1 > x->cap) {
        x->cap = (x->n + k + 1) * 2;
        x->buf = realloc(x->buf, x->cap);
    }
    memcpy(x->buf + x->n, p, k);
    x->n += k;
    x->buf[x->n] = 0;
    if (!x->t_first && strstr(x->buf, "\"text\":\"") && !strstr(x->buf, "\"text\":\"\"")) x->t_first = now_s();
    if (x->hangup_after && x->n >= x->hangup_after) return 0;  // hang up: curl closes the socket
    return k;
}

static const char *url_base, *model;
static struct curl_slist *headers;

static void xfer_setup(struct xfer *x, const char *path, const char *body) {
    char url[512];
    snprintf(url, sizeof url, "%s%s", url_base, path);
    x->h = curl_easy_init();
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    if (body) {
        x->body = strdup(body);
        curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, headers);
    }
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    x->t0 = now_s();
}

static void xfer_free(struct xfer *x) {
    if (x->h) curl_easy_cleanup(x->h);
    free(x->body);
    free(x->buf);
    memset(x, 0, sizeof *x);
}

// Runs n transfers concurrently to completion.
static void run_all(struct xfer *xs, int n) {
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    for (int i = 0; i < n; i++) curl_multi_add_handle(m, xs[i].h);
    int running = n;
    while (running) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
            if (msg->msg == CURLMSG_DONE) {
                struct xfer *x;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                x->rc = msg->data.result;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &x->status);
            }
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    for (int i = 0; i < n; i++) curl_multi_remove_handle(m, xs[i].h);
    curl_multi_cleanup(m);
}

// Parses an SSE completion stream: concatenated text, finish reason, [DONE] seen.
// Returns malloc'd text or NULL if the framing is wrong.
static char *sse_text(const char *buf, char *finish, size_t fcap, int *n_chunks) {
    size_t cap = 256, n = 0;
    char *out = calloc(1, cap);
    bool done = false;
    *n_chunks = 0;
    finish[0] = 0;
    const char *p = buf;
    while (*p) {
        const char *e = strstr(p, "\n\n");
        if (!e || strncmp(p, "data: ", 6) || done) { free(out); return NULL; }
        if (!strncmp(p + 6, "[DONE]", 6)) { done = true; p = e + 2; continue; }
        json_t *j = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
        json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
        if (!j || !c0) { json_decref(j); free(out); return NULL; }
        const char *t = json_string_value(json_object_get(c0, "text"));
        const char *f = json_string_value(json_object_get(c0, "finish_reason"));
        if (t) {
            size_t k = strlen(t);
            if (n + k + 1 > cap) { cap = (n + k + 1) * 2; out = realloc(out, cap); }
            memcpy(out + n, t, k + 1);
            n += k;
        }
        if (f) snprintf(finish, fcap, "%s", f);
        (*n_chunks)++;
        json_decref(j);
        p = e + 2;
    }
    if (!done) { free(out); return NULL; }
    return out;
}

// Reads one sample "NAME{...} VALUE" from /metrics (-1 if missing).
static double metric(const char *name) {
    struct xfer x = {0};
    xfer_setup(&x, "/metrics", NULL);
    x.rc = curl_easy_perform(x.h);
    double v = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s{", name);
    const char *p = x.buf ? strstr(x.buf, key) : NULL;
    if (p && (p = strchr(p + 1, '}'))) v = strtod(p + 1, NULL);
    xfer_free(&x);
    return v;
}

// Whether the engine is idle with its whole KV pool free (from one /metrics snapshot).
static bool pool_full(void) {
    double tot = metric("octet_kv_blocks"), fr = metric("octet_kv_blocks_free");
    return tot > 0 && fr == tot && metric("octet_num_requests_running") == 0 && metric("octet_num_requests_waiting") == 0;
}

// Lines of the file at path, from byte offset `from`, that contain needle.
static int count_lines(const char *path, long from, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    fseek(f, from, SEEK_SET);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

// Blocks until the file at path holds `want` lines containing needle after offset `from`: it
// sleeps on inotify until the file changes and counts again. Returns seconds taken, or -1
// (with the count in *got) if timeout_s passes first.
static double wait_log_lines(const char *path, long from, const char *needle, int want, double timeout_s, int *got) {
    double t0 = now_s();
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0 || inotify_add_watch(fd, path, IN_MODIFY) < 0) { *got = -1; if (fd >= 0) close(fd); return -1; }
    double r = -1;
    for (;;) {
        *got = count_lines(path, from, needle);
        if (*got >= want) { r = now_s() - t0; break; }
        double left = timeout_s - (now_s() - t0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
        char buf[4096];
        if (read(fd, buf, sizeof buf) < 0) break;
    }
    close(fd);
    return r;
}

static char *request_body(int d, int max_tokens, bool ignore_eos) {
    static const char *subjects[] = {"Once upon a time", "Tom had a red ball", "Lily went to the park",
                                     "The cat was hungry", "One day, a little bird", "Sam and his mom",
                                     "There was a big tree", "The sun was shining"};
    char prompt[512];
    // distinct requests share prefixes in pairs (prefix-cache hits under load)
    snprintf(prompt, sizeof prompt, "%s. %s", subjects[(d / 2) % 8], d % 2 ? "She smiled" : "He ran");
    if (d >= 16) snprintf(prompt + strlen(prompt), sizeof prompt - strlen(prompt), " %d times", d);
    json_t *b = json_pack("{s:s,s:s,s:i,s:f,s:b,s:b}", "model", model, "prompt", prompt, "max_tokens", max_tokens,
                          "temperature", 0.0, "stream", 1, "ignore_eos", ignore_eos);
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int n_clients = 64, n_distinct = 16, max_tokens = 48, n_disconnect = 100;
    const char *server_log = NULL;
    url_base = "http://127.0.0.1:8000";
    model = "model";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--url")) url_base = argv[i + 1];
        else if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--clients")) n_clients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--distinct")) n_distinct = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-tokens")) max_tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--disconnect")) n_disconnect = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--server-log")) server_log = argv[i + 1];
        else { fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
    }
    if (n_distinct > n_clients) n_distinct = n_clients;
    if (n_disconnect > 0 && !server_log) { fprintf(stderr, "--disconnect needs --server-log (the server's stderr)\n"); return 2; }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    headers = curl_slist_append(NULL, "Content-Type: application/json");

    // Phase 1: references, one request at a time (ignore_eos so every output is max_tokens long)
    char **ref = calloc((size_t)n_distinct, sizeof *ref);
    double t_ref = now_s();
    for (int d = 0; d < n_distinct; d++) {
        struct xfer x = {0};
        char *b = request_body(d, max_tokens, true);
        xfer_setup(&x, "/v1/completions", b);
        free(b);
        run_all(&x, 1);
        char fin[32];
        int nc;
        ref[d] = x.status == 200 ? sse_text(x.buf ? x.buf : "", fin, sizeof fin, &nc) : NULL;
        CHECK(ref[d] && !strcmp(fin, "length"), "reference %d: status %ld, body %.300s", d, x.status, x.buf ? x.buf : "");
        xfer_free(&x);
    }
    t_ref = now_s() - t_ref;
    double pre0 = metric("octet_preemptions_total");

    // Phase 2: all clients at once
    struct xfer *xs = calloc((size_t)n_clients, sizeof *xs);
    for (int i = 0; i < n_clients; i++) {
        xs[i].distinct = i % n_distinct;
        char *b = request_body(xs[i].distinct, max_tokens, true);
        xfer_setup(&xs[i], "/v1/completions", b);
        free(b);
    }
    double t2 = now_s();
    run_all(xs, n_clients);
    double wall = now_s() - t2;
    int n_failed = 0, n_mismatch = 0;
    double *ttft = calloc((size_t)n_clients, sizeof *ttft);
    for (int i = 0; i < n_clients; i++) {
        char fin[32];
        int nc;
        char *t = xs[i].rc == CURLE_OK && xs[i].status == 200 ? sse_text(xs[i].buf ? xs[i].buf : "", fin, sizeof fin, &nc) : NULL;
        if (!t) { n_failed++; fprintf(stderr, "client %d: curl %d status %ld body %.200s\n", i, xs[i].rc, xs[i].status, xs[i].buf ? xs[i].buf : ""); }
        else if (!ref[xs[i].distinct] || strcmp(t, ref[xs[i].distinct])) {
            n_mismatch++;
            fprintf(stderr, "client %d (request %d) differs:\n  alone: %s\n  load:  %s\n", i, xs[i].distinct,
                    ref[xs[i].distinct] ? ref[xs[i].distinct] : "(none)", t);
        }
        ttft[i] = xs[i].t_first ? xs[i].t_first - xs[i].t0 : wall;
        free(t);
        xfer_free(&xs[i]);
    }
    qsort(ttft, (size_t)n_clients, sizeof *ttft, cmp_double);
    CHECK(n_failed == 0, "%d of %d concurrent requests failed", n_failed, n_clients);
    CHECK(n_mismatch == 0, "%d of %d outputs differ from the request served alone", n_mismatch, n_clients);
    double preempt = metric("octet_preemptions_total") - pre0;
    // every stream has ended, so every request has left the engine with its blocks
    CHECK(pool_full(), "KV pool not back to full after the concurrent phase (free %g of %g, running %g, waiting %g)",
          metric("octet_kv_blocks_free"), metric("octet_kv_blocks"), metric("octet_num_requests_running"),
          metric("octet_num_requests_waiting"));

    // Phase 3: clients that hang up mid-stream (after a few chunks, at staggered points)
    struct xfer *ds = calloc((size_t)(n_disconnect > 0 ? n_disconnect : 1), sizeof *ds);
    for (int i = 0; i < n_disconnect; i++) {
        char *b = request_body(i % n_distinct, 400, true);
        xfer_setup(&ds[i], "/v1/completions", b);
        free(b);
        ds[i].hangup_after = 300 + (size_t)(i % 10) * 200;
    }
    long log_from = n_disconnect > 0 ? file_size(server_log) : 0;
    double t3 = now_s();
    run_all(ds, n_disconnect);
    double wall3 = now_s() - t3;
    int n_hung = 0;
    for (int i = 0; i < n_disconnect; i++) { n_hung += ds[i].rc == CURLE_WRITE_ERROR; xfer_free(&ds[i]); }
    CHECK(n_hung == n_disconnect, "only %d of %d clients hung up mid-stream (the rest finished first)", n_hung, n_disconnect);
    // every hang-up is logged once the engine has released its request (timeout: a failure bound only)
    int n_logged = 0;
    double full3 = n_disconnect > 0 ? wait_log_lines(server_log, log_from, " aborted: ", n_disconnect, 120, &n_logged) : 0;
    CHECK(full3 >= 0, "%d of %d hang-ups logged as aborted requests", n_logged, n_disconnect);
    CHECK(pool_full(), "KV pool not back to full after %d disconnects (free %g of %g, running %g, waiting %g)",
          n_disconnect, metric("octet_kv_blocks_free"), metric("octet_kv_blocks"), metric("octet_num_requests_running"),
          metric("octet_num_requests_waiting"));
    CHECK(metric("octet_client_disconnects_total") == n_disconnect, "octet_client_disconnects_total %g, want %d",
          metric("octet_client_disconnects_total"), n_disconnect);

    // still healthy and still right
    struct xfer h = {0};
    xfer_setup(&h, "/health", NULL);
    run_all(&h, 1);
    CHECK(h.status == 200, "health after disconnects: %ld", h.status);
    xfer_free(&h);
    struct xfer y = {0};
    char *b = request_body(0, max_tokens, true);
    xfer_setup(&y, "/v1/completions", b);
    free(b);
    run_all(&y, 1);
    char fin[32];
    int nc;
    char *t = y.status == 200 ? sse_text(y.buf ? y.buf : "", fin, sizeof fin, &nc) : NULL;
    CHECK(t && ref[0] && !strcmp(t, ref[0]), "request after the disconnects differs from its reference");
    free(t);
    xfer_free(&y);

    printf("{\"clients\":%d,\"distinct\":%d,\"max_tokens\":%d,\"reference_s\":%.3f,\"concurrent_wall_s\":%.3f,"
           "\"tokens_per_s\":%.1f,\"ttft_p50_s\":%.3f,\"ttft_p99_s\":%.3f,\"failed\":%d,\"mismatched\":%d,"
           "\"preemptions\":%.0f,\"disconnect_clients\":%d,\"disconnect_wall_s\":%.3f,"
           "\"pool_full_after_disconnect_s\":%.3f}\n",
           n_clients, n_distinct, max_tokens, t_ref, wall, n_clients * max_tokens / wall, ttft[n_clients / 2],
           ttft[n_clients - 1 - n_clients / 100], n_failed, n_mismatch, preempt, n_disconnect, wall3, full3);
    for (int d = 0; d < n_distinct; d++) free(ref[d]);
    free(ref); free(xs); free(ds); free(ttft);
    curl_slist_free_all(headers);
    curl_global_cleanup();
    printf("load_test: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
