// http_client.c — libcurl multi-interface streaming client with SSE parsing.
// Every write callback stamps the time once; the SSE events it completes share that stamp,
// which is when the bytes reached this process (what vLLM's client measures too).
// A chunk is "token-bearing" if it has choices and either text or no finish_reason, so a
// trailing text-less finish chunk does not count as a token or add a fake ITL (unless no
// other chunk came: then it is the only time to first output there is).
#include "http_client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"

struct http_pool {
    CURLM *multi;
    http_done_fn on_done;
    void *ctx;
    int n_running;
};

double http_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_global(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return OCT_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return err_set(OCT_ENOMEM, "http client: out of memory");
    *p = q;
    *cap = c;
    return OCT_OK;
}

static void set_error(struct http_stream *s, const char *msg) {
    if (!s->error[0]) snprintf(s->error, sizeof s->error, "%s", msg);
}

// One SSE event's data (the joined data: lines).
static void on_event(struct http_stream *s, const char *data, double t) {
    if (!strcmp(data, "[DONE]")) { s->saw_done = true; return; }
    json_error_t je;
    json_t *o = json_loads(data, JSON_ALLOW_NUL, &je);
    if (!o) {
        char m[256];
        snprintf(m, sizeof m, "malformed SSE JSON: %s", je.text);
        set_error(s, m);
        return;
    }
    json_t *err = json_object_get(o, "error");
    if (err) {
        json_t *msg = json_is_object(err) ? json_object_get(err, "message") : err;
        char m[400];
        snprintf(m, sizeof m, "server error in stream: %s",
                 json_is_string(msg) ? json_string_value(msg) : "(no message)");
        set_error(s, m);
    }
    json_t *choices = json_object_get(o, "choices");
    if (json_is_array(choices) && json_array_size(choices) > 0) {
        json_t *c0 = json_array_get(choices, 0), *delta = json_object_get(c0, "delta");
        json_t *jt = json_is_object(delta) ? json_object_get(delta, "content") : json_object_get(c0, "text");
        const char *text = json_is_string(jt) ? json_string_value(jt) : "";
        bool finished = json_is_string(json_object_get(c0, "finish_reason"));
        bool token = delta ? text[0] != 0 : (text[0] != 0 || !finished);
        // a server that sends no chunk for text-less tokens may end with only the finish chunk:
        // then that chunk is the first sign of output (vLLM's client takes any chunk with choices)
        if (!token && finished && s->n_chunks == 0) token = true;
        if (token && grow((void **)&s->chunk_s, &s->cap_chunks, (size_t)s->n_chunks + 1, sizeof(double)) == OCT_OK)
            s->chunk_s[s->n_chunks++] = t;
        size_t n = strlen(text);
        if (n && grow((void **)&s->text, &s->cap_text, s->n_text + n + 1, 1) == OCT_OK) {
            memcpy(s->text + s->n_text, text, n + 1);
            s->n_text += n;
        }
        s->last_event_s = t;
    }
    json_t *usage = json_object_get(o, "usage");
    if (json_is_object(usage)) {
        json_t *p = json_object_get(usage, "prompt_tokens"), *c = json_object_get(usage, "completion_tokens");
        if (json_is_integer(p)) s->usage_prompt_tokens = (int)json_integer_value(p);
        if (json_is_integer(c)) s->usage_completion_tokens = (int)json_integer_value(c);
    }
    json_decref(o);
}

// Appends one data: line's value to the event being assembled (joined with '\n').
static void add_data(struct http_stream *s, const char *v, size_t n) {
    if (grow((void **)&s->ev, &s->cap_ev, s->n_ev + n + 2, 1) < 0) {
        set_error(s, "http client: out of memory for an SSE event");
        return;
    }
    if (s->ev_has_data) s->ev[s->n_ev++] = '\n';
    memcpy(s->ev + s->n_ev, v, n);
    s->n_ev += n;
    s->ev_has_data = true;
}

// One complete line (without its '\n'): a blank line dispatches the event's joined data.
static void sse_line(struct http_stream *s, const char *line, size_t len, double t) {
    if (len && line[len - 1] == '\r') len--;
    if (len == 0) {
        if (s->ev_has_data) { s->ev[s->n_ev] = 0; on_event(s, s->ev, t); }
        s->n_ev = 0;
        s->ev_has_data = false;
    } else if (len >= 5 && !strncmp(line, "data:", 5)) {
        size_t off = 5 + (len > 5 && line[5] == ' ');
        add_data(s, line + off, len - off);
    }  // ':' comments, event:, id:, retry: are ignored
}

void http_sse_feed(struct http_stream *s, const char *bytes, size_t n, double t, bool at_end) {
    if (n) {
        if (grow((void **)&s->buf, &s->cap_buf, s->n_buf + n + 1, 1) < 0) {
            set_error(s, "http client: out of memory for the SSE stream");
            return;
        }
        memcpy(s->buf + s->n_buf, bytes, n);
        s->n_buf += n;
    }
    // lines are looked for only in bytes not scanned before, so a long line arriving in many
    // writes costs its length once, not once per write
    size_t start = 0, i = s->sse_scan;
    while (i < s->n_buf) {
        char *nl = memchr(s->buf + i, '\n', s->n_buf - i);
        s->sse_scanned += (nl ? (size_t)(nl - (s->buf + i)) + 1 : s->n_buf - i);
        if (!nl) { i = s->n_buf; break; }
        size_t e = (size_t)(nl - s->buf);
        sse_line(s, s->buf + start, e - start, t);
        start = i = e + 1;
    }
    if (at_end) {
        if (start < s->n_buf) sse_line(s, s->buf + start, s->n_buf - start, t);  // a last line without '\n'
        start = s->n_buf;
        sse_line(s, "", 0, t);  // an event the stream did not close with a blank line
    }
    if (start) memmove(s->buf, s->buf + start, s->n_buf - start);  // keep the unfinished line only
    s->n_buf -= start;
    s->sse_scan = s->n_buf;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct http_stream *s = ud;
    double t = http_now_s();
    size_t n = size * nmemb;
    if (!s->http_status) curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->http_status);
    if (s->http_status != 200) {  // keep (the start of) the error body
        size_t room = s->n_buf < 4096 ? 4096 - s->n_buf : 0, k = n < room ? n : room;
        if (k && grow((void **)&s->buf, &s->cap_buf, s->n_buf + k + 1, 1) == OCT_OK) {
            memcpy(s->buf + s->n_buf, ptr, k);
            s->n_buf += k;
            s->buf[s->n_buf] = 0;
        }
        return n;
    }
    http_sse_feed(s, ptr, n, t, false);
    return n;
}

int http_pool_init(struct http_pool **out, http_done_fn on_done, void *ctx) {
    pthread_once(&curl_once, curl_global);
    struct http_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->multi = curl_multi_init())) {
        free(p);
        return err_set(OCT_ENOMEM, "http client: cannot create a curl multi handle");
    }
    p->on_done = on_done;
    p->ctx = ctx;
    *out = p;
    return OCT_OK;
}

void http_pool_free(struct http_pool *p) {
    if (!p) return;
    curl_multi_cleanup(p->multi);
    free(p);
}

void http_stream_free(struct http_stream *s) {
    if (s->curl) curl_easy_cleanup(s->curl);
    if (s->headers) curl_slist_free_all(s->headers);
    free(s->chunk_s); free(s->text); free(s->buf); free(s->ev);
    s->curl = s->headers = NULL;
    s->chunk_s = NULL; s->text = NULL; s->buf = NULL; s->ev = NULL;
    s->cap_chunks = s->cap_text = s->cap_buf = s->cap_ev = 0;
}

static int setup_easy(CURL *c, const char *url, const char *api_key, double timeout_s, struct curl_slist **h) {
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    if (timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    if (api_key) {
        char a[512];
        snprintf(a, sizeof a, "Authorization: Bearer %s", api_key);
        *h = curl_slist_append(*h, a);
    }
    return OCT_OK;
}

int http_pool_add(struct http_pool *p, struct http_stream *s, const char *url, const char *body,
                  const char *api_key, double timeout_s) {
    int index = s->index;
    memset(s, 0, sizeof *s);
    s->index = index;
    s->usage_prompt_tokens = s->usage_completion_tokens = -1;
    CURL *c = curl_easy_init();
    if (!c) return err_set(OCT_ENOMEM, "http client: curl_easy_init failed");
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: text/event-stream");
    setup_easy(c, url, api_key, timeout_s, &h);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_COPYPOSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_PRIVATE, s);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    s->curl = c;
    s->headers = h;
    s->start_s = http_now_s();
    if (curl_multi_add_handle(p->multi, c) != CURLM_OK) {
        http_stream_free(s);
        return err_set(OCT_EIO, "http client: cannot add a transfer for %s", url);
    }
    p->n_running++;
    return OCT_OK;
}

static void finish(struct http_pool *p, struct http_stream *s, CURLcode res) {
    double t = http_now_s();
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->http_status);
    if (res != CURLE_OK) {
        char m[300];
        snprintf(m, sizeof m, "transfer failed: %s", curl_easy_strerror(res));
        set_error(s, m);
    } else if (s->http_status != 200) {
        char m[512];
        snprintf(m, sizeof m, "HTTP %ld: %.400s", s->http_status, s->buf ? s->buf : "");
        for (char *q = m; *q; q++) if (*q == '\n' || *q == '\r') *q = ' ';
        set_error(s, m);
    } else {
        http_sse_feed(s, NULL, 0, t, true);
        if (s->n_chunks == 0) set_error(s, "never received a token chunk (no TTFT)");
        else if (!s->saw_done) {
            char m[160];
            snprintf(m, sizeof m, "the stream ended without 'data: [DONE]' after %d token chunks (cut off)",
                     s->n_chunks);
            set_error(s, m);
        }
    }
    s->ok = !s->error[0];
    s->done = true;
    curl_multi_remove_handle(p->multi, s->curl);
    curl_easy_cleanup(s->curl);
    curl_slist_free_all(s->headers);
    s->curl = s->headers = NULL;
    p->n_running--;
    if (p->on_done) p->on_done(p->ctx, s);
}

int http_pool_poll(struct http_pool *p, int timeout_ms) {
    int still = 0;
    CURLMcode mc = curl_multi_perform(p->multi, &still);
    if (mc == CURLM_OK && still && timeout_ms > 0) {
        mc = curl_multi_poll(p->multi, NULL, 0, timeout_ms, NULL);
        if (mc == CURLM_OK) mc = curl_multi_perform(p->multi, &still);
    }
    if (mc != CURLM_OK) return err_set(OCT_EIO, "http client: %s", curl_multi_strerror(mc));
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(p->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        struct http_stream *s = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
        finish(p, s, msg->data.result);
    }
    return OCT_OK;
}

int http_pool_running(const struct http_pool *p) { return p->n_running; }

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct http_stream *s = ud;
    size_t n = size * nmemb;
    if (grow((void **)&s->buf, &s->cap_buf, s->n_buf + n + 1, 1) < 0) return 0;
    memcpy(s->buf + s->n_buf, ptr, n);
    s->n_buf += n;
    s->buf[s->n_buf] = 0;
    return n;
}

int http_get(const char *url, const char *api_key, double timeout_s, char **body, long *status) {
    pthread_once(&curl_once, curl_global);
    *body = NULL;
    *status = 0;
    struct http_stream s = {0};
    CURL *c = curl_easy_init();
    if (!c) return err_set(OCT_ENOMEM, "http client: curl_easy_init failed");
    struct curl_slist *h = NULL;
    setup_easy(c, url, api_key, timeout_s, &h);
    if (h) curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    CURLcode res = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    if (res != CURLE_OK) {
        free(s.buf);
        *status = 0;
        return err_set(OCT_EIO, "GET %s: %s", url, curl_easy_strerror(res));
    }
    *body = s.buf ? s.buf : calloc(1, 1);
    return OCT_OK;
}
