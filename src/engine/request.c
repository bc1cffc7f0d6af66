// request.c — the per-request event queue between the engine thread and its reader.
#include "request.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct req_handle *req_handle_new(void) {
    struct req_handle *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->cap = 16;
    h->events = malloc((size_t)h->cap * sizeof *h->events);
    if (!h->events) { free(h); return NULL; }
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    atomic_store(&h->refs, 2);
    return h;
}

void req_handle_push(struct req_handle *h, const struct gen_event *ev) {
    pthread_mutex_lock(&h->mu);
    if (!h->closed) {
        if (h->count == h->cap) {  // grow, unrolling the ring
            struct gen_event *n = malloc((size_t)h->cap * 2 * sizeof *n);
            if (n) {
                for (int i = 0; i < h->count; i++) n[i] = h->events[(h->head + i) % h->cap];
                free(h->events);
                h->events = n;
                h->head = 0;
                h->cap *= 2;
            }
        }
        if (h->count < h->cap) {
            h->events[(h->head + h->count) % h->cap] = *ev;
            h->count++;
        }
        if (ev->kind != GEN_TOKEN) h->closed = true;
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
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
    while (h->count == 0) {
        if (timeout_ms < 0) pthread_cond_wait(&h->cv, &h->mu);
        else if (pthread_cond_timedwait(&h->cv, &h->mu, &until) == ETIMEDOUT) break;
    }
    int got = 0;
    if (h->count > 0) {
        *ev = h->events[h->head];
        h->head = (h->head + 1) % h->cap;
        h->count--;
        got = 1;
    }
    pthread_mutex_unlock(&h->mu);
    return got;
}

void req_abort(struct req_handle *h) { atomic_store(&h->aborted, 1); }

void req_handle_unref(struct req_handle *h) {
    if (atomic_fetch_sub(&h->refs, 1) != 1) return;
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->events);
    free(h);
}

void req_release(struct req_handle *h) {
    if (h) req_handle_unref(h);
}
