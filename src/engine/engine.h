// engine.h — the serving engine: many requests, one engine thread, continuous batching
// with chunked prefill, prefix caching and preemption (owns: the engine thread, the runner
// resources (backend, forward buffers, KV pages and pool), and every request's lifetime inside
// the engine; not: HTTP, JSON or text — callers get token ids). The policy of which request runs
// when is scheduler.h's; each step's batch is built by batch.h.
// Thread model: engine_submit / req_* / engine_stats_get are safe from any thread; all KV and
// scheduling state is touched only by the engine thread. A request's events flow through its
// own queue; aborting (client gone) frees its blocks at the next step.
#ifndef OCTET_ENGINE_H
#define OCTET_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../model/kv_cache.h"
#include "sampler.h"

struct model;

struct engine_options {
    struct kv_options kv;
    char device[8];                 // cpu | cuda | auto ("" = auto)
    int n_threads;                  // CPU backend threads (0 = all cores)
    int max_model_len;              // 0 = model max_pos
    int max_num_batched_tokens;     // tokens per step (default 2048)
    int max_num_seqs;               // running requests (default 64)
    bool enable_chunked_prefill;    // default true
    bool enable_prefix_caching;     // default true
    long long kv_cache_memory_bytes;// 0 = the backend's default (CPU: RAM/4; GPU: see below)
    double gpu_memory_utilization;  // GPU: share of the card octet may use in all (default 0.9)
    int num_kv_blocks;              // >0 overrides the memory budget (tests)
    enum attn_fp8_math fp8_math;
    int fp8_accum;                  // --fp8-attention-accumulation (struct attn_params.fp8_accum)
    bool batch_invariant;           // --batch-invariant (struct backend.batch_invariant)
    bool enforce_eager;             // --enforce-eager (struct backend.enforce_eager)
    int sample_threads;             // threads sampling a step's sequences (0 = 1 on the CPU backend,
                                    // whose pool is busy with the forward pass; else up to 8)
    int async_scheduling;           // greedy decode steps launched before the previous one is read
                                    // back (engine.c): ENGINE_ASYNC_AUTO (default) where the backend
                                    // runs a step while the host goes on (CUDA); ENGINE_ASYNC_ALWAYS
                                    // also where it runs it in place (the CPU: tests); ENGINE_ASYNC_OFF
};

enum { ENGINE_ASYNC_OFF = 0, ENGINE_ASYNC_AUTO = 1, ENGINE_ASYNC_ALWAYS = 2 };

void engine_options_default(struct engine_options *o);

#define ENGINE_MAX_TOP_LOGPROBS 20

struct reply_spec;  // (reply_grammar.h)

struct gen_request {
    const int32_t *prompt;          // [n_prompt] token ids (copied by submit)
    int n_prompt;
    int max_tokens;                 // > 0
    struct sampling_params sp;
    bool ignore_eos;
    int top_logprobs;               // -1: no logprobs; 0..20: sampled + this many alternatives
    const int32_t *stop_ids;        // [n_stop_ids] tokens that also end the output with "stop" (copied by
    int n_stop_ids;                 // submit); with sp.min_tokens, they and EOS are masked until then
    const struct reply_spec *reply; // a constrained reply (JSON mode, calls; copied by submit), NULL: free text:
                                    // every draw keeps the output a beginning the spec allows, and it ends (EOS
                                    // or a stop id) only where it is whole (reply_mask.h)
};

enum gen_event_kind { GEN_TOKEN = 0, GEN_FINISHED, GEN_ERROR };

struct gen_event {
    enum gen_event_kind kind;
    int32_t token;                  // GEN_TOKEN: the sampled id
    float logprob;                  // GEN_TOKEN with logprobs
    int n_top;
    int32_t top_ids[ENGINE_MAX_TOP_LOGPROBS];
    float top_logprobs[ENGINE_MAX_TOP_LOGPROBS];
    // GEN_FINISHED: why ("stop" = EOS, "length" = max_tokens or context, "abort")
    const char *finish_reason;
    int n_prompt, n_generated, n_cached_prompt; // usage (n_cached_prompt: prefix-cache hits)
    char error[256];                // GEN_ERROR: message
};

struct engine;
struct req_handle;

// Builds the engine (plans memory, allocates KV pages) and starts its thread. Fails, naming
// both numbers and the flags to change, when the KV pool cannot hold one max_model_len sequence.
int engine_create(struct engine **out, struct model *m, const struct engine_options *o);
// Stops accepting, fails queued/running requests with "abort", joins the thread.
void engine_destroy(struct engine *e);

// Queues a request. Returns a handle (never NULL on success) or NULL with err_msg():
// prompt empty, prompt + max_tokens > max_model_len, bad sampling params, a stop id outside the
// vocabulary. (sp.mask_ids is the engine's: the end-of-generation ids unless ignore_eos, and
// stop_ids.) A request whose logits turn out NaN or +inf ends with GEN_ERROR.
struct req_handle *engine_submit(struct engine *e, const struct gen_request *r);
// Waits up to timeout_ms (<0: forever) for the next event. Returns 1 with *ev filled,
// 0 on timeout. After GEN_FINISHED or GEN_ERROR no more events come.
int req_next(struct req_handle *h, struct gen_event *ev, int timeout_ms);
// Asks the engine to stop this request (client went away, stop string hit). Idempotent.
void req_abort(struct req_handle *h);
// The caller is done with the handle (abort first if it may still be running).
void req_release(struct req_handle *h);

// The startup memory plan, as vLLM logs it.
struct engine_memory_plan {
    long long weight_bytes;
    long kv_bytes_per_token, kv_bytes_per_token_bf16;
    long long kv_budget_bytes;
    int n_blocks, n_blocks_bf16, kv_block_tokens;
    long long capacity_tokens, capacity_tokens_bf16;
    double max_concurrency, max_concurrency_bf16;   // at max_model_len
    int max_model_len;
};
void engine_memory_plan_get(const struct engine *e, struct engine_memory_plan *p);
// Writes the plan as a human-readable block (the per-layer dtypes included).
void engine_memory_plan_log(const struct engine *e, FILE *f);

// The engine's steps by kind: DECODE runs only sequences decoding a token, PREFILL only prompt chunks,
// MIXED both (a prompt chunk beside the decoding sequences, as chunked prefill schedules them). A step's
// wall time on the engine thread is split into the forward pass (its launch and the wait for its results)
// and the host's share (taking requests, scheduling, the batch, sampling, events); with asynchronous
// scheduling a decode step counts where it is launched, and a turn that only reads the last one back adds
// its time to DECODE without a step.
enum { ENGINE_STEP_DECODE, ENGINE_STEP_PREFILL, ENGINE_STEP_MIXED, ENGINE_STEP_KINDS };
extern const char *const engine_step_kind_names[ENGINE_STEP_KINDS];  // "decode", "prefill", "mixed"
struct engine_step_stats {
    long long steps, decode_tokens, prefill_tokens;
    double forward_s, host_s;
};

// Counters for /metrics (a consistent snapshot). A request's end is counted (its blocks free,
// it no longer running, its tokens in the totals) before its GEN_FINISHED or GEN_ERROR event is
// queued: once a caller has read the final events of all its requests, a snapshot shows them all
// ended, with no waiting.
struct engine_stats {
    int n_running, n_waiting;
    double kv_cache_usage;          // used blocks / all blocks, 0..1
    long long prompt_tokens_total, generation_tokens_total;
    long long preemptions_total, prefix_cache_queries_total, prefix_cache_hits_total; // in tokens
    long long requests_finished_total;
    long long steps_ahead_total;    // decode steps launched before the previous one was read back
    int n_blocks_total, n_blocks_free;
    struct engine_step_stats step[ENGINE_STEP_KINDS];  // since the start
};
void engine_stats_get(struct engine *e, struct engine_stats *s);

#endif
