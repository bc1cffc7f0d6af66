// http_client.h — the benchmark's HTTP client on libcurl (owns: a multi handle running
// many streamed POSTs at once, SSE parsing, a monotonic timestamp per event, blocking GETs;
// not: what the events mean beyond the OpenAI completion fields it extracts).
// Invariant: every added stream ends exactly once in on_done, with ok=true (HTTP 200, at least
// one token chunk and the closing `data: [DONE]`) or ok=false and a message in error — failures,
// a stream cut off before [DONE] among them, are never dropped.
#ifndef OCTET_HTTP_CLIENT_H
#define OCTET_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

// Seconds on CLOCK_MONOTONIC.
double http_now_s(void);

// One streamed completion request and what came back.
struct http_stream {
    // filled by the client
    double start_s;        // when the transfer was handed to libcurl
    double *chunk_s;       // [n_chunks] arrival time of each token-bearing SSE event
    int n_chunks; size_t cap_chunks;
    double last_event_s;   // arrival of the last event with choices (incl. a text-less finish)
    int usage_prompt_tokens, usage_completion_tokens;  // -1 when the server sent no usage
    long http_status;
    bool ok, done;
    char error[512];
    char *text; size_t n_text, cap_text;  // the generated text
    // private
    void *curl, *headers;
    char *buf; size_t n_buf, cap_buf;     // the unfinished SSE line (or the error body)
    size_t sse_scan;                      // bytes of buf already known to hold no '\n'
    char *ev; size_t n_ev, cap_ev;        // the event being assembled: its data: lines, joined
    bool ev_has_data, saw_done;
    size_t sse_scanned;                   // bytes the line search has examined (linear in the stream)
    int index;             // caller's index, passed back through on_done
};

struct http_pool;
typedef void (*http_done_fn)(void *ctx, struct http_stream *s);

// A pool that runs up to any number of concurrent streams; on_done(ctx, s) is called from
// http_pool_poll when a stream finishes (successfully or not).
int http_pool_init(struct http_pool **out, http_done_fn on_done, void *ctx);
void http_pool_free(struct http_pool *p);
// Starts POSTing `body` (JSON, copied) to url; s must stay valid until on_done. api_key may
// be NULL. timeout_s bounds the whole transfer (0 = none).
int http_pool_add(struct http_pool *p, struct http_stream *s, const char *url, const char *body,
                  const char *api_key, double timeout_s);
// Drives transfers for at most timeout_ms (returns early when something finished).
int http_pool_poll(struct http_pool *p, int timeout_ms);
int http_pool_running(const struct http_pool *p);
// Feeds n bytes of an SSE body that arrived at time t to s's parser (what the transfer's write
// callback does; at_end: the stream closed, so a last line or event without its terminator counts).
void http_sse_feed(struct http_stream *s, const char *bytes, size_t n, double t, bool at_end);
// Releases the buffers a finished stream holds (the struct itself is the caller's).
void http_stream_free(struct http_stream *s);

// Blocking GET; *body is malloc'd (NUL-terminated), *status the HTTP code. Returns <0 with a
// message when the connection fails (status is then 0).
int http_get(const char *url, const char *api_key, double timeout_s, char **body, long *status);

#endif
