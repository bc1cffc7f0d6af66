// test_http_queue.c — src/engine/request.c, the event queue between the engine and an HTTP
// connection: token events are stored compactly (no top-logprob entries unless sent, no error
// text), a reader that stops reading makes the request abort once REQ_QUEUE_MAX_TOKENS are
// queued instead of growing without limit, the final event is never dropped (not after an
// overflow either) and carries its error text, and events arrive in order across threads.
#include <pthread.h>

#include "../../src/engine/request.h"
#include "../test.h"

static struct gen_event token_ev(int id, int n_top) {
    struct gen_event ev = {.kind = GEN_TOKEN, .token = id, .logprob = -0.5f * (float)(id % 7), .n_top = n_top};
    for (int i = 0; i < n_top; i++) {
        ev.top_ids[i] = id * 100 + i;
        ev.top_logprobs[i] = -(float)i;
    }
    return ev;
}

// Bytes the queue holds for its token events.
static size_t queue_bytes(const struct req_handle *h) {
    return (size_t)h->tok_cap * sizeof *h->tok + (size_t)h->top_cap * sizeof *h->top;
}

TEST(compact_storage) {
    struct req_handle *h = req_handle_new();
    struct gen_event ev = token_ev(0, 0);
    for (int i = 0; i < 1000; i++) { ev.token = i; req_handle_push(h, &ev); }
    // a full gen_event is over 400 bytes; a plain token must cost at most 32 (ring doubling included)
    CHECK_MSG(queue_bytes(h) <= 1000 * 32, "%zu bytes for 1000 plain tokens", queue_bytes(h));
    CHECK_EQ_INT(h->top_cap, 0);
    CHECK(!atomic_load(&h->aborted));
    req_handle_unref(h);
    req_handle_unref(h);
}

TEST(order_and_top_logprobs) {
    struct req_handle *h = req_handle_new();
    for (int i = 0; i < 100; i++) {
        struct gen_event ev = token_ev(i, i % 4);
        req_handle_push(h, &ev);
    }
    struct gen_event fin = {.kind = GEN_FINISHED, .finish_reason = "length", .n_prompt = 3, .n_generated = 100};
    req_handle_push(h, &fin);
    struct gen_event ev;
    int bad = 0;
    for (int i = 0; i < 100; i++) {
        if (!req_next(h, &ev, 0) || ev.kind != GEN_TOKEN || ev.token != i || ev.n_top != i % 4 ||
            ev.logprob != -0.5f * (float)(i % 7)) { bad++; continue; }
        for (int t = 0; t < ev.n_top; t++) bad += ev.top_ids[t] != i * 100 + t || ev.top_logprobs[t] != -(float)t;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(req_next(h, &ev, 0) && ev.kind == GEN_FINISHED && !strcmp(ev.finish_reason, "length") && ev.n_generated == 100);
    CHECK(!req_next(h, &ev, 0));  // nothing after the final event
    req_handle_unref(h);
    req_handle_unref(h);
}

TEST(reader_behind_aborts_and_final_is_kept) {
    struct req_handle *h = req_handle_new();
    struct gen_event ev = token_ev(1, ENGINE_MAX_TOP_LOGPROBS);
    for (int i = 0; i < REQ_QUEUE_MAX_TOKENS; i++) req_handle_push(h, &ev);
    CHECK(!atomic_load(&h->aborted));
    for (int i = 0; i < 1000; i++) req_handle_push(h, &ev);  // the client still is not reading
    CHECK(atomic_load(&h->aborted));
    CHECK_EQ_INT(h->tok_count, REQ_QUEUE_MAX_TOKENS);
    size_t cap_bytes = (size_t)REQ_QUEUE_MAX_TOKENS * (sizeof(struct req_token) +
                                                       ENGINE_MAX_TOP_LOGPROBS * sizeof(struct req_top));
    CHECK_MSG(queue_bytes(h) <= cap_bytes, "%zu bytes queued, bound %zu", queue_bytes(h), cap_bytes);
    struct gen_event fin = {.kind = GEN_FINISHED, .finish_reason = "abort"};
    req_handle_push(h, &fin);  // the engine reaps the aborted request: its final event must arrive
    int n = 0;
    while (req_next(h, &ev, 0) && ev.kind == GEN_TOKEN) n++;
    CHECK_EQ_INT(n, REQ_QUEUE_MAX_TOKENS);
    CHECK(ev.kind == GEN_FINISHED && !strcmp(ev.finish_reason, "abort"));
    req_handle_unref(h);
    req_handle_unref(h);
}

TEST(error_text_on_the_final_event) {
    struct req_handle *h = req_handle_new();
    struct gen_event ev = token_ev(5, 0);
    req_handle_push(h, &ev);
    struct gen_event err = {.kind = GEN_ERROR};
    snprintf(err.error, sizeof err.error, "backend failed: device lost");
    req_handle_push(h, &err);
    req_handle_push(h, &ev);  // after a final event nothing is queued
    CHECK(req_next(h, &ev, 0) && ev.kind == GEN_TOKEN && ev.error[0] == 0);
    CHECK(req_next(h, &ev, 0) && ev.kind == GEN_ERROR && !strcmp(ev.error, "backend failed: device lost"));
    CHECK(!req_next(h, &ev, 0));
    req_handle_unref(h);
    req_handle_unref(h);
}

#define N_THREADED 5000  // below the cap: the reader may lag by any amount without an abort

static void *producer(void *p) {
    struct req_handle *h = p;
    for (int i = 0; i < N_THREADED; i++) {
        struct gen_event ev = token_ev(i, i % 3);
        req_handle_push(h, &ev);
    }
    struct gen_event fin = {.kind = GEN_FINISHED, .finish_reason = "stop"};
    req_handle_push(h, &fin);
    req_handle_unref(h);
    return NULL;
}

TEST(threaded_order) {
    struct req_handle *h = req_handle_new();
    pthread_t t;
    pthread_create(&t, NULL, producer, h);
    struct gen_event ev;
    int n = 0, bad = 0;
    for (;;) {
        if (!req_next(h, &ev, -1)) { bad++; break; }
        if (ev.kind != GEN_TOKEN) break;
        bad += ev.token != n || ev.n_top != n % 3;
        n++;
    }
    pthread_join(t, NULL);
    CHECK_EQ_INT(n, N_THREADED);
    CHECK_EQ_INT(bad, 0);
    CHECK(ev.kind == GEN_FINISHED && !atomic_load(&h->aborted));
    req_handle_unref(h);
}

int main(void) {
    RUN(compact_storage);
    RUN(order_and_top_logprobs);
    RUN(reader_behind_aborts_and_final_is_kept);
    RUN(error_text_on_the_final_event);
    RUN(threaded_order);
    return test_summary("http_queue");
}
