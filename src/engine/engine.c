// engine.c — the engine thread and its step: take submitted requests, reap aborted ones, plan
// the step (scheduler.c), build its batch (batch.c), run the forward pass, sample (the step's
// sequences in parallel on GPU backends), emit events and retire finished requests; with
// asynchronous scheduling, greedy decode steps are launched one ahead of reading the previous one
// back. The counters (struct engine_stats) include a request's end before its final event is
// queued, so a caller that has read the event reads counters that already count it.
#include "engine.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/check.h"
#include "../base/threadpool.h"
#include "../model/forward.h"
#include "../model/model.h"
#include "../model/quant_fp8.h"
#include "../model/tokenizer.h"
#include "batch.h"
#include "reply_mask.h"
#include "kv_pool.h"
#include "request.h"
#include "scheduler.h"

// Counts the engine thread gathers between publications (engine thread only).
struct counts {
    long long prompt, gen, preempt, prefix_queries, prefix_hits, finished, ahead;
    struct engine_step_stats step[ENGINE_STEP_KINDS];
};

const char *const engine_step_kind_names[ENGINE_STEP_KINDS] = {"decode", "prefill", "mixed"};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

struct engine {
    struct model *m;
    struct engine_options o;
    struct backend *b;
    struct forward fw;
    struct kv_cache kv;
    struct kv_pool pool;
    struct scheduler sch;           // the waiting and running lists (engine thread only)
    struct batch_builder bb;        // the step's batch
    struct engine_memory_plan plan;
    int bs, max_blocks_per_seq;
    pthread_t thread;
    pthread_mutex_t mu;             // guards incoming, n_incoming, stop, stats
    pthread_cond_t cv;
    struct request *incoming;       // submitted, not yet seen by the engine thread
    int n_incoming;
    bool stop;
    uint64_t next_id;
    struct engine_stats stats;
    struct counts acc;              // not yet in stats
    // the turn of the engine loop under way: the tokens it runs or launches, its time in forward_* calls
    int turn_decode, turn_prefill, turn_kind;
    double turn_forward_s;
    float *logits;                  // [max_num_seqs][n_vocab]
    struct sample_job *jobs;        // [max_num_seqs] the step's sequences that sample
    int32_t *eog_ids;               // [n_eog] the vocabulary's end-of-generation ids (min_tokens masks them)
    int n_eog;
    struct reply_vocab rv;          // constrained replies' vocabulary, read at the first such request (under mu)
    struct threadpool *tp;          // samples them in parallel (NULL: one at a time)
    // asynchronous scheduling: greedy decode steps launched before the previous one is read back
    bool async;                     // o.async_scheduling, for this backend
    struct inflight {
        int n;                      // sequences (0: no step in flight)
        struct request **r;         // [max_num_seqs] (NULL: left the engine since the launch)
        int32_t *ids;               // [max_num_seqs] host_alloc: the step's greedy picks
    } fl[2];                        // fl[0] the step to read back next, fl[1] the one launched after it
};

// A sequence that samples this step: its logits row in, its token event (id, logprobs) out.
struct sample_job {
    struct request *r;
    const float *lg;
    struct gen_event ev;
    char error[128];                // the sampler's message when it failed ("": it did not)
};

void engine_options_default(struct engine_options *o) {
    memset(o, 0, sizeof *o);
    kv_options_default(&o->kv);
    o->max_num_batched_tokens = 2048;
    o->max_num_seqs = 64;
    o->enable_chunked_prefill = true;
    o->enable_prefix_caching = true;
    o->async_scheduling = ENGINE_ASYNC_AUTO;
    o->gpu_memory_utilization = 0.9;
}

// ---- counters ----

// Moves the gathered counts into the stats and snapshots the lists and the pool.
static void publish_stats(struct engine *e) {
    struct engine_stats *s = &e->stats;
    pthread_mutex_lock(&e->mu);
    s->prompt_tokens_total += e->acc.prompt;
    s->generation_tokens_total += e->acc.gen;
    s->preemptions_total += e->acc.preempt;
    s->prefix_cache_queries_total += e->acc.prefix_queries;
    s->prefix_cache_hits_total += e->acc.prefix_hits;
    s->requests_finished_total += e->acc.finished;
    s->steps_ahead_total += e->acc.ahead;
    for (int k = 0; k < ENGINE_STEP_KINDS; k++) {
        struct engine_step_stats *t = &s->step[k];
        const struct engine_step_stats *a = &e->acc.step[k];
        t->steps += a->steps;
        t->decode_tokens += a->decode_tokens;
        t->prefill_tokens += a->prefill_tokens;
        t->forward_s += a->forward_s;
        t->host_s += a->host_s;
    }
    s->n_running = e->sch.n_running;
    s->n_waiting = e->sch.n_waiting + e->n_incoming;
    s->n_blocks_total = e->pool.n_blocks;
    s->n_blocks_free = e->pool.n_free;
    // cached-but-free blocks count as free: they are reclaimable
    s->kv_cache_usage = 1.0 - (double)e->pool.n_free / e->pool.n_blocks;
    pthread_mutex_unlock(&e->mu);
    e->acc = (struct counts){0};
}

// ---- request lifetime ----

static void request_free(struct request *r) {
    sampler_free(&r->sampler);
    reply_spec_free(r->spec);
    free(r->reply);
    free(r->reply_row);
    if (r->cache) reply_cache_free(r->cache);
    free(r->cache);
    free(r->stop_ids);
    req_handle_unref(r->h);
    free(r->tokens);
    free(r->blocks);
    free(r);
}

// r leaves the engine: out of its list and the steps in flight (their rows for it are dropped),
// its blocks back to the pool, the counters published, then its final event queued.
static void retire(struct engine *e, struct request *r, const struct gen_event *ev) {
    scheduler_remove(&e->sch, r);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < e->fl[k].n; i++)
            if (e->fl[k].r[i] == r) e->fl[k].r[i] = NULL;
    e->acc.finished += ev->kind == GEN_FINISHED;
    publish_stats(e);
    req_handle_push(r->h, ev);
    request_free(r);
}

static void finish(struct engine *e, struct request *r, const char *reason) {
    struct gen_event ev = {.kind = GEN_FINISHED, .finish_reason = reason, .n_prompt = r->n_prompt,
                           .n_generated = r->n_generated, .n_cached_prompt = r->n_cached_prompt};
    retire(e, r, &ev);
}

static void fail(struct engine *e, struct request *r, const char *msg) {
    struct gen_event ev = {.kind = GEN_ERROR};
    snprintf(ev.error, sizeof ev.error, "%s", msg);
    retire(e, r, &ev);
}

// Appends r's new token, emits it, and retires r when it is done.
static void emit(struct engine *e, struct request *r, const struct gen_event *ev) {
    int id = ev->token;
    r->tokens[r->n_tokens++] = id;
    r->n_generated++;
    req_handle_push(r->h, ev);
    const char *why = NULL;
    if (!r->ignore_eos && tokenizer_is_eog(e->m->tok, id)) why = "stop";
    for (int i = 0; i < r->n_stop_ids && !why; i++)
        if (id == r->stop_ids[i]) why = "stop";
    if (!why && (r->n_generated >= r->max_tokens || r->n_tokens >= e->plan.max_model_len)) why = "length";
    if (why) finish(e, r, why);
}

// ---- sampling ----

// Samples the job's token and fills its event (with logprobs when asked; from the model's own
// logits, as vLLM's default). Touches only the request's own sampler and the read-only logits
// and sequence, so jobs run on any thread. A failed draw (NaN logits) leaves j->error set.
static void sample_job_run(const struct engine *e, struct sample_job *j) {
    struct request *r = j->r;
    const float *logits = j->lg;
    int nv = e->m->cfg.n_vocab;
    j->error[0] = 0;
    const int kept = r->reply ? reply_mask_cached(&e->rv, r->cache, r->reply, r->stop_ids, r->n_stop_ids, logits,
                                                  r->reply_row, nv) : 1;
    if (kept <= 0) {
        snprintf(j->error, sizeof j->error, "constrained reply: %s", kept < 0 ? "out of memory"
                 : "no token of the vocabulary continues it");
        return;
    }
    int id = sampler_sample_seq(&r->sampler, r->reply ? r->reply_row : logits, r->tokens, r->n_prompt,
                                r->tokens + r->n_prompt, r->n_generated);
    if (id < 0 || (r->reply && reply_advance(&e->rv, r->reply, r->stop_ids, r->n_stop_ids, id) < 0)) {
        snprintf(j->error, sizeof j->error, "sampling failed: %s", err_msg());
        return;
    }
    struct gen_event ev = {.kind = GEN_TOKEN, .token = id};
    if (r->top_logprobs >= 0) {  // one pass for the normaliser, one for the top k
        float m;
        double ls;
        logits_log_norm(logits, nv, &m, &ls);
        ev.logprob = (float)((double)logits[id] - m - ls);
        int k = r->top_logprobs < ENGINE_MAX_TOP_LOGPROBS ? r->top_logprobs : ENGINE_MAX_TOP_LOGPROBS;
        ev.n_top = logits_top_k(logits, nv, k, ev.top_ids);
        for (int t = 0; t < ev.n_top; t++) ev.top_logprobs[t] = (float)((double)logits[ev.top_ids[t]] - m - ls);
    }
    j->ev = ev;
}

static void sample_task(void *ctx, int i, int thread) {
    (void)thread;
    struct engine *e = ctx;
    sample_job_run(e, &e->jobs[i]);
}

// ---- asynchronous scheduling ----
// A step of greedy decodes (every running request, one token each, no logprobs) is launched
// without waiting for its ids (forward_launch_greedy). While it runs, the next one is launched
// behind it on the device — each sequence's token named as the running step's pick for its row —
// and only then is the first read back, so the GPU does not idle while the host emits tokens,
// schedules and uploads the next batch. A sequence that will stop by length is left out of the
// step ahead; one that stops on a token (EOS, not known in advance) had that step compute one
// token more for it, which is dropped (its K/V went to its own blocks, freed after, and any later
// use of them is queued after that step).

static bool plain_greedy(const struct request *r) {
    return sampler_plain_greedy(&r->sampler) && r->top_logprobs < 0 && !r->reply;
}

// Whether the planned step may be launched without waiting: all running requests, each
// decoding one greedy token.
static bool async_ok(struct engine *e, const struct sched_plan *p) {
    if (!e->async || p->n > BACKEND_FEED_ROWS || p->n != e->sch.n_running) return false;
    for (int i = 0; i < p->n; i++) {
        const struct request *r = p->reqs[i];
        if (p->n_tokens[i] != 1 || r->n_computed + 1 != r->n_tokens || !plain_greedy(r)) return false;
    }
    return true;
}

// The turn's steps, tokens and forward time into the counters, once its forward pass is done and before
// its events go out (a client that has read a request's final event reads counters that hold its steps);
// the host's share is added when the turn ends.
static void count_turn(struct engine *e) {
    const int k = !e->turn_prefill ? ENGINE_STEP_DECODE : !e->turn_decode ? ENGINE_STEP_PREFILL : ENGINE_STEP_MIXED;
    struct engine_step_stats *a = &e->acc.step[k];
    a->steps += e->turn_decode + e->turn_prefill > 0;
    a->decode_tokens += e->turn_decode;
    a->prefill_tokens += e->turn_prefill;
    a->forward_s += e->turn_forward_s;
    e->turn_kind = k;
}

// Launches the step after the one in flight (fl[0]) into fl[1]; returns its size (0: none —
// a waiting request can be admitted, a running one is not in fl[0], every sequence stops by
// length, or the pool is short: the next step is then scheduled as usual).
static int launch_ahead(struct engine *e) {
    struct inflight *cur = &e->fl[0], *nx = &e->fl[1];
    nx->n = 0;
    if (e->sch.waiting && e->sch.n_running < e->o.max_num_seqs) return 0;
    int live = 0, n = 0;
    for (int i = 0; i < cur->n; i++) live += cur->r[i] != NULL;
    if (live != e->sch.n_running) return 0;
    batch_reset(&e->bb);
    for (int i = 0; i < cur->n; i++) {
        struct request *r = cur->r[i];
        if (!r || atomic_load(&r->h->aborted)) continue;
        if (r->n_generated + 1 >= r->max_tokens || r->n_tokens + 1 >= e->plan.max_model_len) continue;  // ends now
        int p = r->n_computed + 1;  // (fl[0] computes position n_computed; its pick goes after it)
        if (!scheduler_reserve(&e->sch, r, p + 1)) return 0;
        int32_t pick = -1 - i;  // fl[0]'s pick for its row i
        batch_add(&e->bb, &pick, 1, p, r->blocks, r->n_blocks, BATCH_LOGITS_LAST);
        nx->r[n++] = r;
    }
    if (!n) return 0;
    const double t = now_s();
    const int rc = forward_launch_greedy(&e->fw, &e->kv, &e->bb.bt, nx->ids);
    e->turn_forward_s += now_s() - t;
    if (rc < 0) return rc;
    nx->n = n;
    e->acc.ahead++;
    e->turn_decode += n;
    return n;
}

// With a step in flight: launches the one after it when it can, then reads the first back and
// emits its tokens; the step launched ahead (if any) is then the one in flight.
static int step_inflight(struct engine *e) {
    struct inflight *cur = &e->fl[0];
    int n = cur->n, rc = launch_ahead(e);
    const double t_wait = now_s();
    if (rc >= 0) rc = forward_wait_ids(&e->fw, cur->ids);
    e->turn_forward_s += now_s() - t_wait;
    if (rc < 0) {
        forward_wait(&e->fw);  // (nothing queued may outlive the requests it writes for)
        e->fl[0].n = e->fl[1].n = 0;
        return rc;
    }
    count_turn(e);
    for (int i = 0; i < cur->n; i++) {
        if (!cur->r[i]) continue;
        e->acc.prompt += scheduler_computed(&e->sch, cur->r[i], 1);
        e->acc.gen++;
    }
    for (int i = 0; i < cur->n; i++) {
        struct gen_event ev = {.kind = GEN_TOKEN, .token = cur->ids[i]};
        if (cur->r[i]) emit(e, cur->r[i], &ev);  // (a request that ends leaves fl[1] too)
    }
    struct inflight t = e->fl[0];
    e->fl[0] = e->fl[1];
    e->fl[1] = t;
    e->fl[1].n = 0;
    return n;
}

// ---- a scheduled step ----

static int step(struct engine *e) {
    int n = scheduler_schedule(&e->sch);
    const struct sched_plan *p = &e->sch.plan;
    e->acc.preempt += p->n_preempted;
    e->acc.prefix_queries += p->prefix_queries;
    e->acc.prefix_hits += p->prefix_hits;
    for (struct request *r = p->rejected, *next; r; r = next) {
        next = r->next;
        char msg[96];
        snprintf(msg, sizeof msg, "request needs more KV blocks than the cache holds (%d)", e->pool.n_blocks);
        fail(e, r, msg);
    }
    if (n == 0) return 0;
    batch_reset(&e->bb);
    int n_decode = 0, n_prefill = 0;
    for (int i = 0; i < n; i++) {
        const struct request *r = p->reqs[i];
        int k = p->n_tokens[i];
        bool ends = r->n_computed + k == r->n_tokens;  // reaches the end: samples
        batch_add(&e->bb, r->tokens + r->n_computed, k, r->n_computed, r->blocks, r->n_blocks,
                  ends ? BATCH_LOGITS_LAST : BATCH_LOGITS_NONE);
        if (k == 1 && r->n_generated > 0) n_decode++;  // (a preempted request's recompute is a prompt chunk)
        else n_prefill += k;
    }
    const bool ahead = async_ok(e, p);
    const double t = now_s();
    const int rc = ahead ? forward_launch_greedy(&e->fw, &e->kv, &e->bb.bt, e->fl[0].ids)
                         : forward_run(&e->fw, &e->kv, &e->bb.bt, e->logits);
    e->turn_forward_s += now_s() - t;
    if (rc < 0) return rc;
    e->turn_decode += n_decode;
    e->turn_prefill += n_prefill;
    count_turn(e);
    if (ahead) {  // launched; read back by step_inflight
        memcpy(e->fl[0].r, p->reqs, sizeof(struct request *) * (size_t)n);
        e->fl[0].n = n;
        return n;
    }
    int nj = 0, nv = e->m->cfg.n_vocab;
    bool heavy = false;  // a draw with temperature, penalties or logprobs (a plain greedy pick alone is cheap)
    for (int i = 0; i < n; i++) {
        struct request *r = p->reqs[i];
        e->acc.prompt += scheduler_computed(&e->sch, r, p->n_tokens[i]);
        if (r->n_computed != r->n_tokens) continue;
        e->jobs[nj] = (struct sample_job){.r = r, .lg = e->logits + (size_t)nj * nv};
        heavy |= !plain_greedy(r);
        nj++;
    }
    // a draw with temperature over a large vocabulary is costly (bench/host/RESULTS.md): in
    // parallel when several sequences draw (same draws: each has its own sampler)
    if (e->tp && nj > 1 && heavy) threadpool_run(e->tp, nj, sample_task, e);
    else for (int j = 0; j < nj; j++) sample_job_run(e, &e->jobs[j]);
    e->acc.gen += nj;
    for (int j = 0; j < nj; j++) {
        if (e->jobs[j].error[0]) fail(e, e->jobs[j].r, e->jobs[j].error);
        else emit(e, e->jobs[j].r, &e->jobs[j].ev);
    }
    return n;
}

// ---- the engine thread ----

static void reap_aborted(struct engine *e, struct request *list) {
    for (struct request *r = list, *next; r; r = next) {
        next = r->next;
        if (atomic_load(&r->h->aborted)) finish(e, r, "abort");
    }
}

static void *engine_main(void *arg) {
    struct engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && !e->incoming && !e->sch.running && !e->sch.waiting) pthread_cond_wait(&e->cv, &e->mu);
        bool stop = e->stop;
        struct request *in = e->incoming;
        e->incoming = NULL;
        e->n_incoming = 0;
        pthread_mutex_unlock(&e->mu);
        const double t0 = now_s();
        e->turn_decode = e->turn_prefill = 0;
        e->turn_forward_s = 0;
        while (in) {
            struct request *next = in->next;
            scheduler_add(&e->sch, in);
            in = next;
        }
        if (stop) break;
        reap_aborted(e, e->sch.running);
        reap_aborted(e, e->sch.waiting);
        int rc = e->fl[0].n ? step_inflight(e) : step(e);
        if (rc < 0) {  // a backend failure fails everything in flight; the engine stays up
            char msg[256];
            snprintf(msg, sizeof msg, "%s", err_msg());
            while (e->sch.running) fail(e, e->sch.running, msg);
        } else if (rc > 0) {  // (count_turn has run)
            const double host = now_s() - t0 - e->turn_forward_s;
            e->acc.step[e->turn_kind].host_s += host > 0 ? host : 0;
        }
        publish_stats(e);  // (a step with nothing running always admits or rejects a waiting request)
    }
    if (e->fl[0].n) forward_wait(&e->fw);  // (its rows are dropped: nothing reads them)
    e->fl[0].n = e->fl[1].n = 0;
    // shutdown: everything still here ends with "abort"
    while (e->sch.running) finish(e, e->sch.running, "abort");
    while (e->sch.waiting) finish(e, e->sch.waiting, "abort");
    pthread_mutex_lock(&e->mu);
    while (e->incoming) {
        struct request *r = e->incoming;
        e->incoming = r->next;
        e->n_incoming--;
        pthread_mutex_unlock(&e->mu);
        finish(e, r, "abort");
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    publish_stats(e);
    return NULL;
}

// ---- construction, memory plan ----

static uint64_t cache_salt(const struct kv_cache *kv) {
    uint64_t h = 0x84222325cbf29ce4ull;
    for (int l = 0; l < kv->n_layers; l++) {
        const struct kv_layer *L = &kv->layers[l];
        h = (h ^ (uint64_t)L->dtype ^ (L->k_tok_scale ? 0x100u : 0u)) * 0x100000001b3ull;
        for (int i = 0; i < L->n_kv_heads; i++) {
            uint32_t a, b;
            memcpy(&a, &L->k_scale[i], 4);
            memcpy(&b, &L->v_scale[i], 4);
            h = (h ^ a) * 0x100000001b3ull;
            h = (h ^ b) * 0x100000001b3ull;
        }
        for (int i = 0; L->k_offset && i < L->n_kv_heads * L->head_dim; i++) {
            uint32_t o;
            memcpy(&o, &L->k_offset[i], 4);
            h = (h ^ o) * 0x100000001b3ull;
        }
    }
    return h;
}

// The memory plan: the chosen cache dtype and bf16 side by side, blocks from the KV budget.
static void plan_memory(struct engine *e, int max_model_len) {
    const struct engine_options *o = &e->o;
    const struct model_config *c = &e->m->cfg;
    struct engine_memory_plan *p = &e->plan;
    p->weight_bytes = (long long)e->m->weight_bytes;
    p->kv_bytes_per_token = kv_cache_bytes_per_token(&e->kv);
    p->kv_bytes_per_token_bf16 = 2L * c->n_layers * c->n_kv_heads * c->head_dim * 2;
    // default budget: the backend's (CPU: a quarter of RAM; GPU: --gpu-memory-utilization of
    // the card minus what the weights and activations already took)
    p->kv_budget_bytes = o->kv_cache_memory_bytes > 0
                             ? o->kv_cache_memory_bytes
                             : (long long)e->b->ops->kv_budget_default(e->b, o->gpu_memory_utilization);
    p->kv_block_tokens = e->bs;
    p->max_model_len = max_model_len;
    p->n_blocks = o->num_kv_blocks > 0 ? o->num_kv_blocks
                                       : (int)(p->kv_budget_bytes / (p->kv_bytes_per_token * e->bs));
    p->n_blocks_bf16 = (int)(p->kv_budget_bytes / (p->kv_bytes_per_token_bf16 * e->bs));
    if (o->num_kv_blocks > 0) p->kv_budget_bytes = (long long)p->n_blocks * e->bs * p->kv_bytes_per_token;
    p->capacity_tokens = (long long)p->n_blocks * e->bs;
    p->capacity_tokens_bf16 = (long long)p->n_blocks_bf16 * e->bs;
    p->max_concurrency = (double)p->capacity_tokens / max_model_len;
    p->max_concurrency_bf16 = (double)p->capacity_tokens_bf16 / max_model_len;
}

// Frees what engine_create built (any part may be missing).
static void engine_free(struct engine *e) {
    if (e->b) {
        backend_host_free(e->b, e->logits);
        for (int k = 0; k < 2; k++) backend_host_free(e->b, e->fl[k].ids);
    }
    for (int k = 0; k < 2; k++) free(e->fl[k].r);
    reply_vocab_free(&e->rv);
    scheduler_free(&e->sch);
    batch_builder_free(&e->bb);
    kv_pool_free(&e->pool);
    kv_cache_free(&e->kv);
    forward_free(&e->fw);
    if (e->b) e->b->ops->destroy(e->b);
    free(e->jobs);
    free(e->eog_ids);
    threadpool_free(e->tp);
    free(e);
}

// Allocates the step's buffers, the scheduler and the sampling threads.
static int engine_buffers(struct engine *e) {
    const struct engine_options *o = &e->o;
    int T = o->max_num_batched_tokens, S = o->max_num_seqs;
    struct sched_options so = {.max_num_batched_tokens = T, .max_num_seqs = S,
                               .enable_chunked_prefill = o->enable_chunked_prefill,
                               .enable_prefix_caching = o->enable_prefix_caching, .salt = cache_salt(&e->kv)};
    TRY(scheduler_init(&e->sch, &so, &e->pool));
    TRY(batch_builder_init(&e->bb, T, S, e->max_blocks_per_seq, e->bs));
    // (pinned on a GPU: the copy is one DMA)
    e->logits = backend_host_alloc(e->b, sizeof(float) * (size_t)S * e->m->cfg.n_vocab);
    e->jobs = malloc(sizeof(struct sample_job) * S);
    bool ok = e->logits && e->jobs;
    for (int k = 0; k < 2; k++) {
        e->fl[k].r = malloc(sizeof(struct request *) * S);
        e->fl[k].ids = backend_host_alloc(e->b, sizeof(int32_t) * (size_t)S);
        ok = ok && e->fl[k].r && e->fl[k].ids;
    }
    if (!ok) return err_set(OCT_ENOMEM, "engine: out of memory for step buffers");
    int st = o->sample_threads > 0 ? o->sample_threads : strcmp(e->b->ops->name, "cpu") ? 8 : 1;
    if (st > S) st = S;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (o->sample_threads <= 0 && cores > 0 && st > cores) st = (int)cores;
    if (st > 1) e->tp = threadpool_create(st);  // (NULL: samples one at a time)
    int nv = e->m->cfg.n_vocab;
    for (int id = 0; id < nv; id++) e->n_eog += tokenizer_is_eog(e->m->tok, id);
    if (e->n_eog && !(e->eog_ids = malloc(sizeof(int32_t) * (size_t)e->n_eog)))
        return err_set(OCT_ENOMEM, "engine: out of memory");
    for (int id = 0, k = 0; id < nv; id++)
        if (tokenizer_is_eog(e->m->tok, id)) e->eog_ids[k++] = id;
    return OCT_OK;
}

int engine_create(struct engine **out, struct model *m, const struct engine_options *o) {
    *out = NULL;
    struct engine *e = calloc(1, sizeof *e);
    if (!e) return err_set(OCT_ENOMEM, "engine: out of memory");
    e->m = m;
    e->o = *o;
    const struct model_config *c = &m->cfg;
    if (e->o.max_num_seqs <= 0) e->o.max_num_seqs = 64;
    if (e->o.max_num_batched_tokens <= 0) e->o.max_num_batched_tokens = 2048;
    int mml = o->max_model_len > 0 ? o->max_model_len : c->max_pos;
    if (mml > c->max_pos)
        fprintf(stderr, "octet: warning: --max-model-len %d exceeds the model's %d\n", mml, c->max_pos);
    if (!e->o.enable_chunked_prefill && e->o.max_num_batched_tokens < mml) {
        fprintf(stderr, "octet: without chunked prefill, --max-num-batched-tokens is raised to max-model-len %d\n",
                mml);
        e->o.max_num_batched_tokens = mml;
    }
    if (e->o.max_num_seqs > e->o.max_num_batched_tokens) e->o.max_num_seqs = e->o.max_num_batched_tokens;
    e->b = backend_create(o->device, o->n_threads);
    if (!e->b) { free(e); return OCT_EINVAL; }
    int rc = kv_cache_plan(&e->kv, m, &o->kv, e->b->ops->kv_block_tokens);
    if (rc < 0) { e->b->ops->destroy(e->b); free(e); return rc; }
    e->bs = e->kv.kv_block_tokens;
    e->max_blocks_per_seq = (mml + e->bs - 1) / e->bs;
    e->b->batch_invariant = o->batch_invariant;
    e->b->enforce_eager = o->enforce_eager;
    rc = forward_init(&e->fw, m, e->b, e->o.max_num_batched_tokens, e->o.max_num_seqs);
    e->fw.fp8_math = o->fp8_math;
    e->fw.fp8_accum = o->fp8_accum;
    plan_memory(e, mml);
    struct engine_memory_plan *p = &e->plan;
    if (rc == OCT_OK && p->n_blocks < 1)
        rc = err_set(OCT_ENOMEM, "engine: a KV budget of %lld bytes holds no block of %d tokens", p->kv_budget_bytes,
                     e->bs);
    if (rc == OCT_OK && p->n_blocks < e->max_blocks_per_seq)  // (vLLM refuses to start here too)
        rc = err_set(OCT_EINVAL,
                     "engine: one sequence of max_model_len %d tokens needs %d KV blocks of %d tokens (%.1f MiB), "
                     "but the KV cache holds %d blocks (%lld tokens, %.1f MiB); raise --kv-cache-memory, "
                     "--gpu-memory-utilization or --num-kv-blocks, or lower --max-model-len to at most %lld",
                     mml, e->max_blocks_per_seq, e->bs,
                     (double)e->max_blocks_per_seq * e->bs * p->kv_bytes_per_token / 1048576.0, p->n_blocks,
                     p->capacity_tokens, (double)p->capacity_tokens * p->kv_bytes_per_token / 1048576.0,
                     p->capacity_tokens);
    if (rc == OCT_OK) rc = kv_cache_alloc(&e->kv, e->b, p->n_blocks);
    if (rc == OCT_OK) rc = kv_pool_init(&e->pool, p->n_blocks, e->bs);
    if (rc == OCT_OK) rc = engine_buffers(e);
    // (a backend that runs steps in place — no wait_ids — would only deliver each token a step later)
    e->async = e->b->ops->logits_argmax && (o->async_scheduling == ENGINE_ASYNC_ALWAYS ||
                                            (o->async_scheduling == ENGINE_ASYNC_AUTO && e->b->ops->wait_ids));
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (rc == OCT_OK) publish_stats(e);
    if (rc == OCT_OK && pthread_create(&e->thread, NULL, engine_main, e) != 0)
        rc = err_set(OCT_ENOMEM, "engine: cannot start its thread");
    if (rc < 0) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
        engine_free(e);
        return rc;
    }
    *out = e;
    return OCT_OK;
}

void engine_destroy(struct engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    engine_free(e);
}

// ---- the caller's side ----

// Checks a request against the engine's limits; 0 or an err_set code.
static int validate(const struct engine *e, const struct gen_request *g) {
    int mml = e->plan.max_model_len;
    if (g->n_prompt <= 0) return err_set(OCT_EINVAL, "the prompt is empty");
    if (g->max_tokens <= 0) return err_set(OCT_EINVAL, "max_tokens must be at least 1 (got %d)", g->max_tokens);
    if (g->n_prompt + (long)g->max_tokens > mml)
        return err_set(OCT_EINVAL,
                       "this model's maximum context length is %d tokens; the request has %d prompt tokens and "
                       "max_tokens %d",
                       mml, g->n_prompt, g->max_tokens);
    for (int i = 0; i < g->n_prompt; i++)
        if (g->prompt[i] < 0 || g->prompt[i] >= e->m->cfg.n_vocab)
            return err_set(OCT_EINVAL, "prompt token %d is outside the vocabulary", g->prompt[i]);
    if (g->top_logprobs > ENGINE_MAX_TOP_LOGPROBS)
        return err_set(OCT_EINVAL, "top_logprobs %d exceeds %d", g->top_logprobs, ENGINE_MAX_TOP_LOGPROBS);
    if (g->n_stop_ids < 0 || (g->n_stop_ids && !g->stop_ids)) return err_set(OCT_EINVAL, "stop ids without a list");
    for (int i = 0; i < g->n_stop_ids; i++)
        if (g->stop_ids[i] < 0 || g->stop_ids[i] >= e->m->cfg.n_vocab)
            return err_set(OCT_EINVAL, "stop token %d is outside the vocabulary", g->stop_ids[i]);
    return OCT_OK;
}

// The ids min_tokens holds back: the end-of-generation ids (unless ignore_eos), then the stop ids
// (malloc'd into *out; NULL when there are none). Returns how many, or -1 out of memory.
static int mask_ids(const struct engine *e, const struct gen_request *g, int32_t **out) {
    int n = (g->ignore_eos ? 0 : e->n_eog) + g->n_stop_ids;
    *out = NULL;
    if (!n || g->sp.min_tokens <= 0) return 0;
    if (!(*out = malloc(sizeof(int32_t) * (size_t)n))) return -1;
    int k = 0;
    for (int i = 0; !g->ignore_eos && i < e->n_eog; i++) (*out)[k++] = e->eog_ids[i];
    for (int i = 0; i < g->n_stop_ids; i++) (*out)[k++] = g->stop_ids[i];
    return k;
}

struct req_handle *engine_submit(struct engine *e, const struct gen_request *g) {
    if (validate(e, g) < 0) return NULL;
    struct request *r = calloc(1, sizeof *r);
    if (!r) { err_set(OCT_ENOMEM, "out of memory"); return NULL; }
    r->cap_tokens = g->n_prompt + g->max_tokens;
    r->tokens = malloc(sizeof(int32_t) * (size_t)r->cap_tokens);
    r->blocks = malloc(sizeof(int32_t) * (size_t)e->max_blocks_per_seq);
    r->h = req_handle_new();
    if (g->n_stop_ids && (r->stop_ids = malloc(sizeof(int32_t) * (size_t)g->n_stop_ids))) {
        memcpy(r->stop_ids, g->stop_ids, sizeof(int32_t) * (size_t)g->n_stop_ids);
        r->n_stop_ids = g->n_stop_ids;
    }
    struct sampling_params sp = g->sp;
    int32_t *mask = NULL;
    sp.n_mask = mask_ids(e, g, &mask);
    sp.mask_ids = mask;
    err_set(OCT_OK, "%s", "");
    bool ok = r->tokens && r->blocks && r->h && r->n_stop_ids == g->n_stop_ids && sp.n_mask >= 0;
    ok = ok && sampler_init(&r->sampler, &sp, e->m->cfg.n_vocab) == 0;
    if (ok && g->reply) {  // (the vocabulary is read once; the engine thread reads it after this request)
        pthread_mutex_lock(&e->mu);
        ok = e->rv.n_vocab || reply_vocab_build(&e->rv, e->m->tok) == 0;
        pthread_mutex_unlock(&e->mu);
        r->spec = ok ? reply_spec_copy(g->reply) : NULL;
        r->reply = r->spec ? malloc(sizeof *r->reply) : NULL;
        r->reply_row = r->reply ? malloc(sizeof(float) * (size_t)e->m->cfg.n_vocab) : NULL;
        r->cache = r->reply_row ? calloc(1, sizeof *r->cache) : NULL;
        if ((ok = r->cache != NULL)) reply_state_init(r->reply, r->spec);
    }
    free(mask);
    if (!ok) {
        if (r->h) { req_handle_unref(r->h); req_handle_unref(r->h); }
        sampler_free(&r->sampler);
        reply_spec_free(r->spec); free(r->reply); free(r->reply_row); free(r->cache);
        free(r->stop_ids); free(r->tokens); free(r->blocks); free(r);
        if (!err_msg()[0]) err_set(OCT_ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(r->tokens, g->prompt, sizeof(int32_t) * (size_t)g->n_prompt);
    r->n_tokens = r->n_prompt = g->n_prompt;
    r->max_tokens = g->max_tokens;
    r->ignore_eos = g->ignore_eos;
    r->top_logprobs = g->top_logprobs;
    r->n_cached_prompt = -1;
    struct req_handle *h = r->h;
    pthread_mutex_lock(&e->mu);
    r->id = e->next_id++;
    if (e->stop) {
        pthread_mutex_unlock(&e->mu);
        err_set(OCT_EINVAL, "the engine is shutting down");
        req_handle_unref(h);
        request_free(r);
        return NULL;
    }
    r->next = NULL;
    struct request **tail = &e->incoming;
    while (*tail) tail = &(*tail)->next;
    *tail = r;
    e->n_incoming++;
    e->stats.n_waiting++;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return h;
}

void engine_memory_plan_get(const struct engine *e, struct engine_memory_plan *p) { *p = e->plan; }

void engine_stats_get(struct engine *e, struct engine_stats *s) {
    pthread_mutex_lock(&e->mu);
    *s = e->stats;
    pthread_mutex_unlock(&e->mu);
}

void engine_memory_plan_log(const struct engine *e, FILE *f) {
    const struct engine_memory_plan *p = &e->plan;
    const struct model_config *c = &e->m->cfg;
    char by_dtype[160];  // "fp8_e4m3 7.6 MiB, bf16 1.0 MiB": the bytes of each weight dtype
    fprintf(f, "octet: model %s: %d layers, %d/%d heads, head_dim %d, weights %.1f MiB (%s)\n", e->m->name,
            c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, p->weight_bytes / 1048576.0,
            model_weight_dtypes_label(e->m, by_dtype, sizeof by_dtype));
    fprintf(f, "octet: KV cache dtype per layer:");
    for (int l = 0; l < e->kv.n_layers; l++)
        fprintf(f, " %s%s", dtype_name(e->kv.layers[l].dtype), e->kv.layers[l].window ? "(swa)" : "");
    fprintf(f, "\n");
    for (int sliding = 0; sliding < 2; sliding++) {  // KV bytes per token of each layer type
        int n = 0, window = 0;
        long bytes = 0;
        for (int l = 0; l < e->kv.n_layers; l++) {
            const struct kv_layer *k = &e->kv.layers[l];
            if ((k->window > 0) != sliding) continue;
            n++;
            bytes += 2L * k->n_kv_heads * k->head_dim * (long)dtype_size(k->dtype);
            window = k->window;
        }
        if (n && sliding)
            fprintf(f, "octet: KV per token: %d sliding-window layers (%d tokens): %ld bytes (%ld a layer)\n", n,
                    window, bytes, bytes / n);
        else if (n)
            fprintf(f, "octet: KV per token: %d full-attention layers: %ld bytes (%ld a layer)\n", n, bytes, bytes / n);
    }
    fprintf(f, "octet: KV budget %.2f GiB, blocks of %d tokens, max_model_len %d\n", p->kv_budget_bytes / 1073741824.0,
            p->kv_block_tokens, p->max_model_len);
    fprintf(f, "octet: %-10s %14s %14s %12s %16s\n", "kv dtype", "bytes/token", "tokens", "blocks", "max concurrency");
    fprintf(f, "octet: %-10s %14ld %14lld %12d %15.2fx\n", e->o.kv.dtype, p->kv_bytes_per_token, p->capacity_tokens,
            p->n_blocks, p->max_concurrency);
    fprintf(f, "octet: %-10s %14ld %14lld %12d %15.2fx\n", "bf16", p->kv_bytes_per_token_bf16,
            p->capacity_tokens_bf16, p->n_blocks_bf16, p->max_concurrency_bf16);
}
