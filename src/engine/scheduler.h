// scheduler.h — which requests run each step, with how many tokens (owns: the waiting and
// running lists, every request's blocks and the prefix-cache bookkeeping in the pool; not: the
// model, the backend, threads or events). The engine thread is its only caller; tests drive it
// with hand-built requests and a bare kv_pool.
// Policy (vLLM v1's, as nano-vllm draws it): running requests first, in admission order, each
// given min(tokens wanted − tokens computed, budget left); then waiting requests in FCFS order
// while budget and max_num_seqs allow, each after a prefix-cache lookup. Prefill chunks and
// decode steps are the same case. When blocks run out, the newest running request is preempted
// (its blocks freed, back to the front of the waiting list, recomputed from scratch later).
#ifndef OCTET_SCHEDULER_H
#define OCTET_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "kv_pool.h"
#include "request.h"

struct sched_options {
    int max_num_batched_tokens;     // tokens per step
    int max_num_seqs;               // running requests
    bool enable_chunked_prefill;    // off: a prompt waits for a step that fits it whole
    bool enable_prefix_caching;
    uint64_t salt;                  // prefix-hash salt (the cache's dtypes and scales)
};

// One step's plan. reqs[0 .. n) run this step, in batch order, computing n_tokens[i] tokens
// each from their n_computed on; the last n_admitted of them left the waiting list this step.
struct sched_plan {
    int n, n_admitted;
    struct request **reqs;          // [max_num_seqs]
    int *n_tokens;                  // [max_num_seqs]
    int n_preempted;
    struct request **preempted;     // [max_num_seqs] this step's victims, in preemption order
    struct request *rejected;       // list (via ->next): need more blocks than the pool holds;
                                    // out of both lists, blocks freed: the caller fails them
    long long prefix_queries, prefix_hits;  // tokens looked up / found in the prefix cache
};

struct scheduler {
    struct sched_options o;
    struct kv_pool *pool;
    int bs;                         // tokens per block (the pool's)
    struct request *waiting, *running;  // FCFS order
    int n_waiting, n_running;
    struct sched_plan plan;
};

int scheduler_init(struct scheduler *s, const struct sched_options *o, struct kv_pool *pool);
void scheduler_free(struct scheduler *s);

// Appends a new request to the waiting list.
void scheduler_add(struct scheduler *s, struct request *r);
// Takes r out of whichever list holds it and frees its blocks (finished, aborted or failed).
void scheduler_remove(struct scheduler *s, struct request *r);

// Plans the next step into s->plan (moving requests between the lists and giving them blocks
// for the planned tokens); returns s->plan.n. With none running and some waiting, the plan
// admits one or rejects every waiting request: an engine loop over it never spins idle.
int scheduler_schedule(struct scheduler *s);

// r's next n tokens have K/V in its blocks: advances n_computed and commits the full blocks to
// the prefix cache. Returns how many of the n were prompt tokens.
int scheduler_computed(struct scheduler *s, struct request *r, int n);

// Gives r blocks for n_tokens in all; false when the pool ran dry (the blocks it got stay r's).
bool scheduler_reserve(struct scheduler *s, struct request *r, int n_tokens);

#endif
