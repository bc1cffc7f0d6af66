// request.h — a request inside the engine and its handle, the thread-safe event queue
// the caller reads (owns: token buffer, block table, sampler, and the queue; not: the
// blocks themselves, which the pool refcounts).
// Invariant: tokens [0, n_computed) have K/V in blocks[0 .. ceil(n_computed/bs));
// n_computed <= n_tokens; n_tokens = n_prompt + n_generated.
#ifndef OCTET_REQUEST_H
#define OCTET_REQUEST_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine.h"

struct req_handle {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct gen_event *events;   // ring buffer [cap]
    int head, count, cap;
    atomic_int aborted;         // set by req_abort, read by the engine thread
    atomic_int refs;            // engine + caller
    bool closed;                // a final event was queued
};

enum req_state { REQ_WAITING, REQ_RUNNING };

struct request {
    uint64_t id;
    struct req_handle *h;
    enum req_state state;
    int32_t *tokens;            // [cap_tokens] prompt then generated ids
    int n_tokens, n_prompt, n_generated, max_tokens, cap_tokens;
    int n_computed;
    int n_cached_prompt;        // prompt tokens served from the prefix cache (first admission)
    bool ignore_eos;
    int top_logprobs;
    int32_t *stop_ids;          // [n_stop_ids] tokens that end the output with "stop" (besides EOS)
    int n_stop_ids;
    struct sampler sampler;
    int32_t *blocks;            // [max_blocks] block table
    int n_blocks;
    int n_hashed;               // leading blocks already committed to the prefix cache
    uint64_t last_hash;         // hash of block n_hashed-1 (0 if none)
    struct request *next;       // list links (waiting/running)
};

struct req_handle *req_handle_new(void);
// Queues an event; a final kind closes the queue. Wakes the reader.
void req_handle_push(struct req_handle *h, const struct gen_event *ev);
void req_handle_unref(struct req_handle *h);

#endif
