// request.h — a request inside the engine and its handle, the thread-safe event queue
// the caller reads (owns: token buffer, block table, sampler, and the queue; not: the
// blocks themselves, which the pool refcounts).
// Invariant: tokens [0, n_computed) have K/V in blocks[0 .. ceil(n_computed/bs));
// n_computed <= n_tokens; n_tokens = n_prompt + n_generated.
#ifndef OCTET_REQUEST_H
#define OCTET_REQUEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "reply_grammar.h"
#include "engine.h"

// A queued GEN_TOKEN event, stored compactly: its top-logprob entries (n_top of them, none
// unless the request asked for logprobs) follow in the handle's top ring.
struct req_token {
    int32_t token;
    float logprob;
    int32_t n_top;
};
struct req_top {
    int32_t id;
    float logprob;
};

// The reader may fall this many token events behind; the next one aborts the request (its
// client has stopped reading) and it ends with finish_reason "abort".
#define REQ_QUEUE_MAX_TOKENS 8192

struct req_handle {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct req_token *tok;      // ring [tok_cap]: tok_count token events from tok_head
    int tok_head, tok_count, tok_cap;
    struct req_top *top;        // ring [top_cap]: the queued tokens' top entries, in order
    int top_head, top_count, top_cap;
    struct gen_event final;     // the final event (GEN_FINISHED / GEN_ERROR), read after every token
    bool closed;                // final is set: nothing more is queued
    bool final_read;            // the reader has taken final
    bool overflowed;            // a token did not fit (reader behind or out of memory): aborted
    atomic_int aborted;         // set by req_abort or an overflow, read by the engine thread
    atomic_int refs;            // engine + caller
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
    struct reply_spec *spec;    // a constrained reply: its spec (the names copied; NULL: free text)
    struct reply_state *reply;  // its output's state
    float *reply_row;           // [n_vocab] the step's logits masked
    struct reply_cache *cache;  // the masks of the states it met (reply_mask.h)
    int32_t *blocks;            // [max_blocks] block table
    int n_blocks;
    int n_hashed;               // leading blocks already committed to the prefix cache
    uint64_t last_hash;         // hash of block n_hashed-1 (0 if none)
    struct request *next;       // list links (waiting/running)
};

struct req_handle *req_handle_new(void);
// Queues an event; a final kind closes the queue and is never dropped. A token that finds
// REQ_QUEUE_MAX_TOKENS queued (or no memory) aborts the request with one log line. Wakes the reader.
void req_handle_push(struct req_handle *h, const struct gen_event *ev);
void req_handle_unref(struct req_handle *h);

#endif
