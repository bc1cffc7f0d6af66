// http.c — routing and request lifecycles on libmicrohttpd (thread per connection).
// A generation ("job") is owned by its connection's thread: a whole response is produced
// inside the access handler; a stream is produced by the response's content reader and
// freed by MHD's free callback, which aborts the request if it had not finished. Every
// job is listed in server.active so that server_stop can abort what is left. A job that
// ends early (client gone, shutdown) is drained to its final event before it is freed, so
// once its "aborted" log line is out the engine has released it. Connection limits and
// timeouts: MHD's inactivity timeout is the keep-alive timeout until a job runs, then the
// stall timeout; http_guard.c bounds the time to send one request.
#include "http.h"

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/check.h"
#include "http_guard.h"
#include "metrics.h"
#include "oai_tokenize.h"

enum route { R_NONE = 0, R_COMPLETIONS, R_CHAT, R_MODELS, R_HEALTH, R_METRICS, R_TOKENIZE, R_DETOKENIZE };

struct job;

struct server {
    struct MHD_Daemon *d;
    struct engine *e;
    struct oai_context c;
    struct server_options o;
    struct metrics m;
    int port;
    long long started;
    atomic_bool stopping;
    pthread_mutex_t mu;         // guards active, n_active
    pthread_cond_t cv;          // signalled when a job leaves
    struct job *active;         // doubly linked list of jobs in flight
    int n_active;
    struct guard *g;            // request deadlines
    struct host_allow hosts;
};

// One generation in flight.
struct job {
    struct server *s;
    struct MHD_Connection *c;
    struct job *prev, *next;
    struct req_handle *h;
    struct oai_request req;
    struct oai_response resp;
    int fd;                     // the client's socket, polled for hang-up
    double t_start, t_last, t_polled;
    int n_tokens;
    bool stopped;               // a stop string/token was hit (request aborted by us)
    bool done;                  // GEN_FINISHED or GEN_ERROR seen
    bool finished_counted;
    json_t *final;              // the last chunk or whole body, once done
    char error[256];            // GEN_ERROR message
    int n_cached;
    struct text_buf sse;        // stream bytes not yet handed to MHD: sse.p[sse_off..sse.n)
    size_t sse_off;
    bool sent_done;
    bool watch_half;            // a whole (non-streamed) answer not yet begun: report a half-close
    const char *why;            // why the job ended early (for its log line)
};

// Per-connection request state (MHD's con_cls).
struct conn {
    enum route route;
    struct text_buf body;
    bool too_large, answered;
    bool close;                 // answer with Connection: close (the body's framing is in doubt)
};

void server_options_default(struct server_options *o) {
    *o = (struct server_options){.host = "127.0.0.1", .port = 8000, .api_key = NULL, .allowed_hosts = NULL,
                                 .max_body_bytes = 4u << 20, .shutdown_grace_ms = 10000,
                                 .timeout_keep_alive_s = 5, .http_timeout_s = 30,
                                 .max_connections = 1024, .max_connections_per_ip = 256};
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ---- responses ------------------------------------------------------------------------

// allow: the Allow header of a 405 (the route's method), else NULL.
static enum MHD_Result send_text_allow(struct server *s, struct MHD_Connection *c, int status, const char *ctype,
                                       const char *body, size_t n, const char *allow, bool close) {
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    if (allow) MHD_add_response_header(r, "Allow", allow);
    if (close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    metrics_count_http(&s->m, status);
    return rc;
}

static enum MHD_Result send_text(struct server *s, struct MHD_Connection *c, int status, const char *ctype,
                                 const char *body, size_t n) {
    return send_text_allow(s, c, status, ctype, body, n, NULL, false);
}

// The body of a 500 answer when the JSON error itself cannot be built.
static const char OOM_BODY[] =
    "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";

static enum MHD_Result send_json(struct server *s, struct MHD_Connection *c, int status, json_t *j) {
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!t) return send_text(s, c, 500, "application/json", OOM_BODY, sizeof OOM_BODY - 1);
    enum MHD_Result rc = send_text(s, c, status, "application/json", t, strlen(t));
    free(t);
    return rc;
}

static enum MHD_Result send_error_allow(struct server *s, struct MHD_Connection *c, const struct oai_error *e,
                                        const char *allow, bool close) {
    char *t = oai_error_body(e);
    enum MHD_Result rc = send_text_allow(s, c, e->status, "application/json", t ? t : "{}", t ? strlen(t) : 2, allow,
                                         close);
    free(t);
    return rc;
}

static enum MHD_Result send_error(struct server *s, struct MHD_Connection *c, const struct oai_error *e) {
    char *t = oai_error_body(e);
    enum MHD_Result rc = send_text(s, c, e->status, "application/json", t ? t : "{}", t ? strlen(t) : 2);
    free(t);
    return rc;
}

static enum MHD_Result fail(struct server *s, struct MHD_Connection *c, int status, const char *type,
                            const char *code, const char *msg) {
    struct oai_error e;
    oai_error_set(&e, status, type, NULL, code, "%s", msg);
    return send_error(s, c, &e);
}

// ---- jobs -----------------------------------------------------------------------------

// Sets the connection's inactivity timeout. Setting 0 first restarts MHD's clock, which
// counts from the last socket read or write: a generation may have kept this thread away
// from the socket for minutes without the client being at fault.
static void conn_timeout(struct MHD_Connection *c, int seconds) {
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)seconds);
}

enum client_state { CLIENT_HERE, CLIENT_HALF_CLOSED, CLIENT_GONE };

// A peer that only shut down its sending side (FIN: POLLRDHUP) may still read; one that has
// closed its socket answers the next bytes it is sent with a reset (POLLERR/POLLHUP).
static enum client_state client_state(int fd) {
    if (fd < 0) return CLIENT_HERE;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return CLIENT_HERE;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return CLIENT_GONE;
    return p.revents & POLLRDHUP ? CLIENT_HALF_CLOSED : CLIENT_HERE;
}

static void job_unlist(struct job *j) {
    struct server *s = j->s;
    pthread_mutex_lock(&s->mu);
    if (j->prev) j->prev->next = j->next;
    else s->active = j->next;
    if (j->next) j->next->prev = j->prev;
    s->n_active--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void job_free(struct job *j) {
    if (!j) return;
    if (j->h) {
        if (!j->done) {
            // abort, then wait for the final event: the engine has then freed the request's
            // blocks and counted its end (engine_stats), so the log line below means it is gone
            req_abort(j->h);
            struct gen_event ev;
            while (req_next(j->h, &ev, -1) && ev.kind == GEN_TOKEN) {}
            j->done = true;
            metrics_observe_finished(&j->s->m, now_s() - j->t_start, "abort");
            j->finished_counted = true;
            metrics_count_client_gone(&j->s->m);
            fprintf(stderr, "octet: request %s aborted: %s after %d tokens\n", j->resp.id,
                    j->why ? j->why : "its connection closed (the client went away or stopped reading)", j->n_tokens);
        }
        job_unlist(j);  // first: server_stop aborts the listed jobs' handles under s->mu
        req_release(j->h);
    }
    if (!j->finished_counted) metrics_observe_finished(&j->s->m, now_s() - j->t_start, "abort");
    oai_response_free(&j->resp);
    oai_request_free(&j->req);
    json_decref(j->final);
    text_buf_free(&j->sse);
    free(j);
}

static void job_free_cb(void *cls) { job_free(cls); }

// Submits a parsed request. On failure answers the client and returns NULL.
static struct job *job_start(struct server *s, struct MHD_Connection *c, struct oai_request *req, bool streaming) {
    struct job *j = calloc(1, sizeof *j);
    if (!j) { oai_request_free(req); fail(s, c, 500, "server_error", NULL, "out of memory"); return NULL; }
    j->s = s;
    j->c = c;
    j->req = *req;  // the job now owns the request's buffers
    j->finished_counted = true;  // until submitted
    oai_response_init(&j->resp, &s->c, &j->req, streaming);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    j->t_start = j->t_last = now_s();
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->stopping)) {
        pthread_mutex_unlock(&s->mu);
        fail(s, c, 503, "server_error", "server_shutting_down", "the server is shutting down");
        job_free(j);
        return NULL;
    }
    j->h = engine_submit(s->e, &j->req.gen);
    if (!j->h) {
        pthread_mutex_unlock(&s->mu);
        struct oai_error e;
        oai_error_set(&e, 400, "invalid_request_error", NULL, NULL, "%s", err_msg());
        send_error(s, c, &e);
        job_free(j);
        return NULL;
    }
    j->finished_counted = false;
    j->next = s->active;
    if (s->active) s->active->prev = j;
    s->active = j;
    s->n_active++;
    pthread_mutex_unlock(&s->mu);
    conn_timeout(c, HTTP_STALL_TIMEOUT_S);
    return j;
}

// Waits for the job's next event, watching the client, for up to budget_s seconds (<0: no
// limit). Returns 1 with *ev; 0 if the client went away (the request is aborted); -1 if the
// client half-closed and j->watch_half is set; -2 when the budget ran out.
static int job_next(struct job *j, struct gen_event *ev, double budget_s) {
    double until = budget_s < 0 ? 0 : now_s() + budget_s;
    for (;;) {
        // events may arrive back to back for a long time: look at the socket every 20 ms
        double t = now_s();
        if (t - j->t_polled >= 0.02) {
            j->t_polled = t;
            enum client_state cs = client_state(j->fd);
            if (cs == CLIENT_GONE) { j->why = "the client went away"; req_abort(j->h); return 0; }
            if (cs == CLIENT_HALF_CLOSED && j->watch_half) return -1;
        }
        if (req_next(j->h, ev, 20)) return 1;
        if (until > 0 && now_s() >= until) return -2;
    }
}

// Applies one event. Streaming: returns the chunk to send (or NULL). Sets j->done and
// j->final (last chunk or whole body) at the end; on GEN_ERROR j->error is set instead.
static json_t *job_event(struct job *j, const struct gen_event *ev) {
    struct server *s = j->s;
    json_t *out = NULL;
    if (ev->kind == GEN_TOKEN) {
        if (j->stopped) return NULL;
        double t = now_s();
        if (j->n_tokens++ == 0) metrics_observe_ttft(&s->m, t - j->t_start);
        else metrics_observe_itl(&s->m, t - j->t_last);
        j->t_last = t;
        int rc = oai_response_token(&j->resp, ev, &out);
        if (rc == 1) { j->stopped = true; req_abort(j->h); }
        return out;
    }
    j->done = true;
    if (ev->kind == GEN_ERROR) {
        snprintf(j->error, sizeof j->error, "%s", ev->error[0] ? ev->error : "generation failed");
        metrics_observe_finished(&s->m, now_s() - j->t_start, "abort");
    } else {
        const char *reason = j->stopped ? "stop" : ev->finish_reason ? ev->finish_reason : "stop";
        j->n_cached = ev->n_cached_prompt;
        oai_response_finish(&j->resp, reason, j->n_cached, &j->final);
        metrics_observe_finished(&s->m, now_s() - j->t_start, reason);
    }
    j->finished_counted = true;
    return NULL;
}

static void sse_data(struct job *j, json_t *o) {
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!t) return;
    text_buf_append(&j->sse, "data: ", 6);
    text_buf_append(&j->sse, t, strlen(t));
    text_buf_append(&j->sse, "\n\n", 2);
    free(t);
}

// Hands MHD up to max bytes of j->sse.
static ssize_t job_emit(struct job *j, char *buf, size_t max) {
    size_t k = j->sse.n - j->sse_off < max ? j->sse.n - j->sse_off : max;
    memcpy(buf, j->sse.p + j->sse_off, k);
    j->sse_off += k;
    return (ssize_t)k;
}

// MHD content reader: blocks until the next piece of the event stream is ready.
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    struct job *j = cls;
    conn_timeout(j->c, HTTP_STALL_TIMEOUT_S);
    while (j->sse_off >= j->sse.n) {
        j->sse.n = j->sse_off = 0;
        if (j->sent_done) return MHD_CONTENT_READER_END_OF_STREAM;
        if (j->done) {
            if (j->error[0]) {
                struct oai_error e;
                oai_error_set(&e, 500, "server_error", NULL, NULL, "%s", j->error);
                char *t = oai_error_body(&e);
                if (t) { text_buf_printf(&j->sse, "data: %s\n\n", t); free(t); }
            } else {
                sse_data(j, j->final);
                j->final = NULL;
                if (j->req.include_usage) sse_data(j, oai_response_usage_chunk(&j->resp, j->n_cached));
            }
            text_buf_append(&j->sse, "data: [DONE]\n\n", 14);
            j->sent_done = true;
            continue;
        }
        struct gen_event ev;
        if (job_next(j, &ev, -1) != 1) return MHD_CONTENT_READER_END_WITH_ERROR;
        json_t *ch = job_event(j, &ev);
        if (ch) sse_data(j, ch);
    }
    return job_emit(j, buf, max);
}

// MHD content reader of a whole answer begun before the generation ended (its client
// half-closed): a space at once and after each second of waiting (JSON allows leading
// whitespace; a client that has closed its socket answers those bytes with a reset, which
// aborts the request), then the body. A generation error then arrives with status 200.
static ssize_t whole_read(void *cls, uint64_t pos, char *buf, size_t max) {
    struct job *j = cls;
    conn_timeout(j->c, HTTP_STALL_TIMEOUT_S);
    if (j->sse_off < j->sse.n) return job_emit(j, buf, max);
    if (j->sent_done) return MHD_CONTENT_READER_END_OF_STREAM;
    if (pos == 0) { buf[0] = ' '; return 1; }
    struct gen_event ev;
    while (!j->done) {
        int rc = job_next(j, &ev, 1.0);
        if (rc == 0) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (rc == -2) { buf[0] = ' '; return 1; }
        if (rc == 1) json_decref(job_event(j, &ev));
    }
    char *t = NULL;
    if (j->error[0]) {
        struct oai_error e;
        oai_error_set(&e, 500, "server_error", NULL, NULL, "%s", j->error);
        t = oai_error_body(&e);
    } else {
        t = json_dumps(j->final, JSON_COMPACT);
    }
    j->sse.n = j->sse_off = 0;
    if (!t || text_buf_append(&j->sse, t, strlen(t)) < 0) { free(t); return MHD_CONTENT_READER_END_WITH_ERROR; }
    free(t);
    j->sent_done = true;
    return job_emit(j, buf, max);
}

// The choices of a whole reply with n > 1: one job a choice (the body parsed again for each: the same request,
// its seed plus the choice's index, so seeded draws differ and repeat), run at once and read in turn so that
// none falls behind in its event queue; their bodies merged into one (choices in order, the prompt counted
// once, the completions' tokens summed).
static enum MHD_Result generate_choices(struct server *s, struct MHD_Connection *c, struct conn *cn,
                                        struct oai_request *first) {
    const int n = first->n;
    struct job *jobs[OAI_MAX_N] = {0};
    enum MHD_Result rc = MHD_YES;
    int started = 0, live = n;
    for (; started < n; started++) {
        struct oai_request req = *first;
        struct oai_error e;
        if (started && oai_parse(&s->c, first->kind, cn->body.p ? cn->body.p : "", cn->body.n, &req, &e) < 0) {
            rc = send_error(s, c, &e);
            goto out;
        }
        req.gen.sp.seed += (uint64_t)started;
        if (!(jobs[started] = job_start(s, c, &req, false))) goto out;  // (answered)
    }
    while (live) {
        for (int i = 0; i < n; i++) {
            struct gen_event ev;
            if (jobs[i]->done) continue;
            const int got = job_next(jobs[i], &ev, 0);
            if (got == 0) { rc = MHD_NO; goto out; }  // client gone: close
            if (got == 1) json_decref(job_event(jobs[i], &ev));
            live -= jobs[i]->done;
        }
    }
    conn_timeout(c, HTTP_STALL_TIMEOUT_S);
    json_t *body = jobs[0]->final, *choices = json_object_get(body, "choices"), *usage = json_object_get(body, "usage");
    long long gen = 0;
    for (int i = 0; i < n; i++) {
        if (jobs[i]->error[0]) { rc = fail(s, c, 500, "server_error", NULL, jobs[i]->error); goto out; }
        json_t *u = json_object_get(jobs[i]->final, "usage"), *ch = json_array_get(json_object_get(jobs[i]->final,
                                                                                                   "choices"), 0);
        gen += json_integer_value(json_object_get(u, "completion_tokens"));
        if (i) json_object_set_new(ch, "index", json_integer(i)), json_array_append(choices, ch);
    }
    json_object_set_new(usage, "completion_tokens", json_integer(gen));
    json_object_set_new(usage, "total_tokens", json_integer(gen + json_integer_value(json_object_get(usage,
                                                                                                    "prompt_tokens"))));
    rc = send_json(s, c, 200, body);
    jobs[0]->final = NULL;
out:  // (a parse or start that failed freed its request: every other one is its job's)
    for (int i = 0; i < n; i++) job_free(jobs[i]);
    return rc;
}

static enum MHD_Result generate(struct server *s, struct MHD_Connection *c, struct conn *cn) {
    struct oai_request req;
    struct oai_error e;
    enum oai_kind kind = cn->route == R_CHAT ? OAI_CHAT : OAI_COMPLETION;
    if (oai_parse(&s->c, kind, cn->body.p ? cn->body.p : "", cn->body.n, &req, &e) < 0) return send_error(s, c, &e);
    if (req.n > 1) return generate_choices(s, c, cn, &req);
    struct job *j = job_start(s, c, &req, req.stream);
    if (!j) return MHD_YES;
    if (j->req.stream) {
        sse_data(j, oai_response_first_chunk(&j->resp));
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, j, job_free_cb);
        if (!r) { job_free(j); return MHD_NO; }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);  // MHD keeps its reference; job_free_cb runs when it is done
        metrics_count_http(&s->m, 200);
        return rc;
    }
    struct gen_event ev;
    j->watch_half = true;
    while (!j->done) {
        int got = job_next(j, &ev, -1);
        if (got == 0) { job_free(j); return MHD_NO; }  // client gone: close
        if (got < 0) {  // half-closed: answer now, as a body that ends when the generation does
            j->watch_half = false;
            struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, whole_read, j,
                                                                       job_free_cb);
            if (!r) { job_free(j); return MHD_NO; }
            MHD_add_response_header(r, "Content-Type", "application/json");
            enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
            MHD_destroy_response(r);
            metrics_count_http(&s->m, 200);
            return rc;
        }
        json_decref(job_event(j, &ev));
    }
    conn_timeout(c, HTTP_STALL_TIMEOUT_S);
    enum MHD_Result rc;
    if (j->error[0]) rc = fail(s, c, 500, "server_error", NULL, j->error);
    else { rc = send_json(s, c, 200, j->final); j->final = NULL; }
    job_free(j);
    return rc;
}

// ---- routing --------------------------------------------------------------------------

static enum route route_of(const char *url, const char **method_wanted) {
    static const struct { const char *path, *method; enum route r; } routes[] = {
        {"/v1/completions", "POST", R_COMPLETIONS}, {"/v1/chat/completions", "POST", R_CHAT},
        {"/v1/models", "GET", R_MODELS}, {"/health", "GET", R_HEALTH}, {"/metrics", "GET", R_METRICS},
        {"/tokenize", "POST", R_TOKENIZE}, {"/detokenize", "POST", R_DETOKENIZE},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) { *method_wanted = routes[i].method; return routes[i].r; }
    return R_NONE;
}

static bool authorized(struct server *s, struct MHD_Connection *c) {
    if (!s->o.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    // compare in time independent of where the first difference is
    size_t n = strlen(h), m = strlen(s->o.api_key);
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)h[i] ^ (unsigned char)s->o.api_key[i < m ? i : 0];
    return !diff;
}

struct length_headers { int n_length, n_te; const char *first; bool conflict; };

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    struct length_headers *l = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) l->n_te++;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) return MHD_YES;
    if (l->n_length++ == 0) l->first = value;
    else if (strcmp(l->first, value ? value : "")) l->conflict = true;
    return MHD_YES;
}

// Whether a Content-Type value is application/json (parameters such as charset allowed).
static bool is_json_type(const char *v) {
    if (!v) return false;
    while (*v == ' ' || *v == '\t') v++;
    if (strncasecmp(v, "application/json", 16)) return false;
    v += 16;
    while (*v == ' ' || *v == '\t') v++;
    return *v == 0 || *v == ';';
}

// Checks of a POST's headers; returns true with *e set when the request is refused.
static bool refuse_post(struct server *s, struct MHD_Connection *c, struct conn *cn, struct oai_error *e) {
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!is_json_type(ct)) {
        oai_error_set(e, 415, "invalid_request_error", NULL, "unsupported_media_type",
                      "Content-Type must be application/json (got %s%.100s%s)", ct ? "'" : "", ct ? ct : "none",
                      ct ? "'" : "");
        return true;
    }
    struct length_headers l = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_length, &l);
    if (l.conflict || (l.n_length && l.n_te)) {
        oai_error_set(e, 400, "invalid_request_error", NULL, "bad_request",
                      l.conflict ? "conflicting Content-Length headers" : "both Content-Length and Transfer-Encoding");
        cn->close = true;
        return true;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!cl || strtoull(cl, NULL, 10) <= s->o.max_body_bytes) return false;
    // Too large. A client waiting for "100 Continue" has sent nothing yet: answer now. Any
    // other is sending the body already: read and drop it, then answer (closing on a client
    // still sending would reset the connection and lose the answer).
    const char *ex = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    if (!ex || strcasecmp(ex, "100-continue")) { cn->too_large = true; return false; }
    oai_error_set(e, 413, "invalid_request_error", NULL, "request_too_large",
                  "the request body is larger than the limit of %zu bytes (--max-body-bytes)", s->o.max_body_bytes);
    return true;
}

// First call for a request: everything decidable from the headers alone.
static enum MHD_Result first_call(struct server *s, struct MHD_Connection *c, struct conn *cn, const char *url,
                                  const char *method) {
    const char *want = NULL;
    cn->route = route_of(url, &want);
    bool head_ok = cn->route == R_MODELS || cn->route == R_HEALTH || cn->route == R_METRICS;  // (HEAD as GET)
    bool keyed = !strncmp(url, "/v1/", 4) || cn->route == R_TOKENIZE || cn->route == R_DETOKENIZE;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    struct oai_error e;
    if (!host_allowed(&s->hosts, host)) {
        oai_error_set(&e, 403, "invalid_request_error", NULL, "host_not_allowed",
                      "Host '%.200s' is not allowed (start the server with --allowed-hosts NAME to answer it)", host);
    } else if (cn->route == R_NONE) {
        oai_error_set(&e, 404, "invalid_request_error", NULL, "not_found", "no route for %s %s", method, url);
    } else if (strcmp(method, want) && !(head_ok && !strcmp(method, "HEAD"))) {
        oai_error_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed", "%s %s is not allowed (use %s)",
                      method, url, want);
    } else if (keyed && !authorized(s, c)) {
        oai_error_set(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                      "missing or incorrect API key (send 'Authorization: Bearer KEY')");
    } else if (atomic_load(&s->stopping)) {
        oai_error_set(&e, 503, "server_error", NULL, "server_shutting_down", "the server is shutting down");
    } else if (strcmp(method, "POST") || !refuse_post(s, c, cn, &e)) {
        return MHD_YES;
    }
    cn->answered = true;
    return send_error_allow(s, c, &e, e.status == 405 ? want : NULL, cn->close);
}

static struct guard_conn *conn_guard(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    struct server *s = cls;
    struct conn *cn = *con_cls;
    if (!cn) {
        if (!(cn = calloc(1, sizeof *cn))) return MHD_NO;
        *con_cls = cn;
        return first_call(s, c, cn, url, method);
    }
    if (*upload_size) {
        if (!cn->answered && !cn->too_large) {
            if (cn->body.n + *upload_size > s->o.max_body_bytes) { cn->too_large = true; text_buf_free(&cn->body); }
            else if (text_buf_append(&cn->body, upload, *upload_size) < 0) return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cn->answered) return MHD_YES;
    cn->answered = true;
    guard_disarm(s->g, conn_guard(c));  // the request is in: no deadline while it is answered
    if (cn->too_large)
        return fail(s, c, 413, "invalid_request_error", "request_too_large",
                    "the request body is larger than the limit (--max-body-bytes)");
    switch (cn->route) {
    case R_HEALTH:
        if (atomic_load(&s->stopping)) return fail(s, c, 503, "server_error", "server_shutting_down", "shutting down");
        return send_text(s, c, 200, "application/json", "{\"status\":\"ok\"}", 15);
    case R_MODELS: {
        struct oai_context mc = s->c;
        mc.model_path = mc.served_name;  // the model's file path is not disclosed
        return send_json(s, c, 200, oai_models(&mc, s->started));
    }
    case R_METRICS: {
        struct engine_stats es;
        struct text_buf t = {0};
        engine_stats_get(s->e, &es);
        if (metrics_render(&s->m, &es, &t) < 0) {
            text_buf_free(&t);
            return fail(s, c, 500, "server_error", NULL, "out of memory");
        }
        enum MHD_Result rc = send_text(s, c, 200, "text/plain; version=0.0.4; charset=utf-8", t.p, t.n);
        text_buf_free(&t);
        return rc;
    }
    case R_TOKENIZE:
    case R_DETOKENIZE: {
        json_t *o;
        struct oai_error e;
        const char *b = cn->body.p ? cn->body.p : "";
        if ((cn->route == R_TOKENIZE ? oai_tokenize : oai_detokenize)(&s->c, b, cn->body.n, &o, &e) < 0)
            return send_error(s, c, &e);
        return send_json(s, c, 200, o);
    }
    default:
        return generate(s, c, cn);
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    struct server *s = cls;
    struct conn *cn = *con_cls;
    if (!cn) return;
    text_buf_free(&cn->body);
    free(cn);
    *con_cls = NULL;
    // the connection may carry another request: idle again, and a new deadline
    conn_timeout(c, s->o.timeout_keep_alive_s);
    guard_arm(s->g, conn_guard(c));
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    struct server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? guard_open(s->g, ci->connect_fd) : NULL;
    } else {
        guard_close(s->g, *socket_context);
        *socket_context = NULL;
    }
}

// ---- lifecycle ------------------------------------------------------------------------

int server_start(struct server **out, struct engine *e, const struct oai_context *c, const struct server_options *o) {
    *out = NULL;
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    if (o->api_key && !*o->api_key) return err_set(OCT_EINVAL, "--api-key is empty (an empty key would let anyone in)");
    struct host_allow hosts;
    TRY(host_allow_init(&hosts, o->allowed_hosts, o->host));
    int g = getaddrinfo(o->host, port, &hints, &ai);
    if (g) return err_set(OCT_EINVAL, "--host %s: %s", o->host, gai_strerror(g));
    struct server *s = calloc(1, sizeof *s);
    if (!s) { freeaddrinfo(ai); return err_set(OCT_ENOMEM, "out of memory"); }
    if (guard_create(&s->g, o->http_timeout_s) < 0) { freeaddrinfo(ai); free(s); return OCT_EIO; }
    s->e = e;
    s->c = *c;
    s->o = *o;
    s->hosts = hosts;
    s->started = (long long)time(NULL);
    metrics_init(&s->m, c->served_name);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    // The inactivity timeout is the keep-alive one until a job runs (conn_timeout); at the
    // connection limit new connections wait in the backlog; past the per-address limit they are closed.
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_keep_alive_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_connections_per_ip,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024),
                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        guard_destroy(s->g);
        metrics_free(&s->m);
        free(s);
        return err_set(OCT_EIO, "cannot listen on %s:%d (address in use or not available)", o->host, o->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    *out = s;
    return OCT_OK;
}

int server_port(const struct server *s) { return s->port; }

// Waits until no job is in flight or the deadline passes; returns the jobs left.
static int wait_idle(struct server *s, double deadline_s) {
    pthread_mutex_lock(&s->mu);
    while (s->n_active > 0 && now_s() < deadline_s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    int n = s->n_active;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void server_stop(struct server *s) {
    if (!s) return;
    atomic_store(&s->stopping, true);
    MHD_socket ls = MHD_quiesce_daemon(s->d);
    if (ls != MHD_INVALID_SOCKET) close(ls);
    int left = wait_idle(s, now_s() + s->o.shutdown_grace_ms / 1000.0);
    if (left > 0) {
        fprintf(stderr, "octet: aborting %d request(s) still in flight\n", left);
        pthread_mutex_lock(&s->mu);
        for (struct job *j = s->active; j; j = j->next) req_abort(j->h);
        pthread_mutex_unlock(&s->mu);
        wait_idle(s, now_s() + 5.0);
    }
    MHD_stop_daemon(s->d);
    guard_destroy(s->g);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    metrics_free(&s->m);
    free(s);
}
