// request.c — the per-request event queue between the engine thread and its reader.
// Token events are stored compactly (12 bytes, plus 8 per top-logprob entry when the request
// asked for them); the final event is stored once in the handle and can never be dropped.
// A reader that falls REQ_QUEUE_MAX_TOKENS behind (a client that stops reading) aborts its
// request instead of growing the queue without limit.
#include "request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct req_handle *req_handle_new(void) {
    struct req_handle *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    atomic_store(&h->refs, 2);
    return h;
}

// Makes room for `need` more items in a ring of `item`-byte items (head, count, cap), unrolling
// it into a larger array. Returns false if that would pass `max` items or memory runs out.
static bool ring_room(void **p, int *head, int count, int *cap, size_t item, int need, int max) {
    if (count + need <= *cap) return true;
    if (count + need > max) return false;
    int ncap = *cap ? *cap : 16;
    while (ncap < count + need) ncap *= 2;
    if (ncap > max) ncap = max;
    char *n = malloc((size_t)ncap * item);
    if (!n) return false;
    const char *o = *p;
    for (int i = 0; i < count; i++) memcpy(n + (size_t)i * item, o + (size_t)((*head + i) % *cap) * item, item);
    free(*p);
    *p = n;
    *head = 0;
    *cap = ncap;
    return true;
}

// Queues a token; false (nothing queued) if it does not fit.
static bool push_token(struct req_handle *h, const struct gen_event *ev) {
    int n_top = ev->n_top > 0 ? ev->n_top : 0;
    if (n_top > ENGINE_MAX_TOP_LOGPROBS) n_top = ENGINE_MAX_TOP_LOGPROBS;
    if (!ring_room((void **)&h->tok, &h->tok_head, h->tok_count, &h->tok_cap, sizeof *h->tok, 1,
                   REQ_QUEUE_MAX_TOKENS))
        return false;
    if (!ring_room((void **)&h->top, &h->top_head, h->top_count, &h->top_cap, sizeof *h->top, n_top,
                   REQ_QUEUE_MAX_TOKENS * ENGINE_MAX_TOP_LOGPROBS))
        return false;
    h->tok[(h->tok_head + h->tok_count++) % h->tok_cap] =
        (struct req_token){.token = ev->token, .logprob = ev->logprob, .n_top = n_top};
    for (int i = 0; i < n_top; i++)
        h->top[(h->top_head + h->top_count++) % h->top_cap] =
            (struct req_top){.id = ev->top_ids[i], .logprob = ev->top_logprobs[i]};
    return true;
}

void req_handle_push(struct req_handle *h, const struct gen_event *ev) {
    pthread_mutex_lock(&h->mu);
    if (!h->closed) {
        if (ev->kind != GEN_TOKEN) {
            h->final = *ev;
            h->closed = true;
        } else if (!h->overflowed && !push_token(h, ev)) {
            h->overflowed = true;
            atomic_store(&h->aborted, 1);
            if (h->tok_count >= REQ_QUEUE_MAX_TOKENS)
                fprintf(stderr, "octet: request aborted: its reader is %d tokens behind (a client that stopped "
                                "reading); it ends with finish_reason \"abort\"\n", h->tok_count);
            else
                fprintf(stderr, "octet: request aborted: out of memory queueing its tokens\n");
        }
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

// Takes the next event under h->mu. Returns 1, or 0 if none is queued.
static int take(struct req_handle *h, struct gen_event *ev) {
    if (h->tok_count > 0) {
        struct req_token t = h->tok[h->tok_head];
        h->tok_head = (h->tok_head + 1) % h->tok_cap;
        h->tok_count--;
        ev->kind = GEN_TOKEN;
        ev->token = t.token;
        ev->logprob = t.logprob;
        ev->n_top = t.n_top;
        for (int i = 0; i < t.n_top; i++) {
            struct req_top e = h->top[h->top_head];
            h->top_head = (h->top_head + 1) % h->top_cap;
            h->top_count--;
            ev->top_ids[i] = e.id;
            ev->top_logprobs[i] = e.logprob;
        }
        ev->finish_reason = NULL;
        ev->n_prompt = ev->n_generated = ev->n_cached_prompt = 0;
        ev->error[0] = 0;
        return 1;
    }
    if (h->closed && !h->final_read) {
        *ev = h->final;
        h->final_read = true;
        return 1;
    }
    return 0;
}

int req_next(struct req_handle *h, struct gen_event *ev, int timeout_ms) {
    struct timespec until;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    }
    pthread_mutex_lock(&h->mu);
    int got;
    while (!(got = take(h, ev))) {
        if (timeout_ms < 0) pthread_cond_wait(&h->cv, &h->mu);
        else if (pthread_cond_timedwait(&h->cv, &h->mu, &until) == ETIMEDOUT) { got = take(h, ev); break; }
    }
    pthread_mutex_unlock(&h->mu);
    return got;
}

void req_abort(struct req_handle *h) { atomic_store(&h->aborted, 1); }

void req_handle_unref(struct req_handle *h) {
    if (atomic_fetch_sub(&h->refs, 1) != 1) return;
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->tok);
    free(h->top);
    free(h);
}

void req_release(struct req_handle *h) {
    if (h) req_handle_unref(h);
}
