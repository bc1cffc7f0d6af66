// engine.c — the engine thread and its step: admit, schedule (every request gets
// min(tokens wanted − tokens computed, budget); prefill chunks and decode steps are the
// same case), preempt the newest running request when blocks run out, run the batch,
// sample (the step's sequences in parallel on GPU backends), emit events, commit full blocks
// to the prefix cache, retire finished requests; with asynchronous scheduling, greedy decode
// steps are launched one ahead of reading the previous one back.
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
#include "../model/tokenizer.h"
#include "kv_pool.h"
#include "request.h"

struct engine {
    struct model *m;
    struct engine_options o;
    struct backend *b;
    struct forward fw;
    struct kv_cache kv;
    struct kv_pool pool;
    struct engine_memory_plan plan;
    int bs, max_blocks_per_seq;
    uint64_t salt;                  // prefix-hash salt: cache dtypes and scales
    pthread_t thread;
    pthread_mutex_t mu;             // guards incoming, stop, stats
    pthread_cond_t cv;
    struct request *incoming;       // submitted, not yet seen by the engine thread
    bool stop;
    uint64_t next_id;
    struct request *waiting, *running;  // engine thread only (FCFS order)
    struct engine_stats stats;
    // step scratch
    int32_t *tok, *pos, *slot, *qstart, *seq_lens, *btab, *rows;
    struct request **sched;         // [max_num_seqs] requests in this step
    int *sched_n;                   // tokens each gets
    float *logits;                  // [max_num_seqs][n_vocab]
    struct sample_job *jobs;        // [max_num_seqs] the step's sequences that sample
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

// ---- lists ----

static void list_append(struct request **head, struct request *r) {
    r->next = NULL;
    while (*head) head = &(*head)->next;
    *head = r;
}

static void list_push_front(struct request **head, struct request *r) {
    r->next = *head;
    *head = r;
}

static void list_remove(struct request **head, struct request *r) {
    while (*head && *head != r) head = &(*head)->next;
    if (*head) *head = r->next;
    r->next = NULL;
}

static int list_len(const struct request *r) {
    int n = 0;
    for (; r; r = r->next) n++;
    return n;
}

// ---- request lifetime ----

static void free_blocks(struct engine *e, struct request *r) {
    // release tail-first so the prefix's head blocks stay cached longest
    for (int i = r->n_blocks - 1; i >= 0; i--) kv_pool_unref(&e->pool, r->blocks[i]);
    r->n_blocks = 0;
    r->n_computed = 0;
    r->n_hashed = 0;
    r->last_hash = 0;
}

// A request leaving the engine leaves the steps in flight too (their rows for it are dropped).
static void inflight_drop(struct engine *e, const struct request *r) {
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < e->fl[k].n; i++)
            if (e->fl[k].r[i] == r) e->fl[k].r[i] = NULL;
}

static void request_free(struct engine *e, struct request *r) {
    inflight_drop(e, r);
    free_blocks(e, r);
    sampler_free(&r->sampler);
    req_handle_unref(r->h);
    free(r->tokens);
    free(r->blocks);
    free(r);
}

static void finish(struct engine *e, struct request *r, const char *reason) {
    struct gen_event ev = {.kind = GEN_FINISHED, .finish_reason = reason, .n_prompt = r->n_prompt,
                           .n_generated = r->n_generated, .n_cached_prompt = r->n_cached_prompt};
    req_handle_push(r->h, &ev);
    pthread_mutex_lock(&e->mu);
    e->stats.requests_finished_total++;
    pthread_mutex_unlock(&e->mu);
    request_free(e, r);
}

// ---- prefix cache ----

// Reuses cached full blocks of the request's tokens; keeps at least one token to compute.
static void prefix_lookup(struct engine *e, struct request *r) {
    if (!e->o.enable_prefix_caching || r->n_computed > 0) return;
    int max_blocks = (r->n_tokens - 1) / e->bs;
    uint64_t parent = 0;
    int hit = 0;
    for (int i = 0; i < max_blocks; i++) {
        const int32_t *t = r->tokens + (size_t)i * e->bs;
        uint64_t h = kv_block_hash(parent, t, e->bs, e->salt);
        int id = kv_pool_lookup(&e->pool, h, parent, t);
        if (id < 0) break;
        kv_pool_ref(&e->pool, id);
        r->blocks[r->n_blocks++] = id;
        parent = h;
        hit++;
    }
    r->n_computed = hit * e->bs;
    r->n_hashed = hit;
    r->last_hash = parent;
    pthread_mutex_lock(&e->mu);
    e->stats.prefix_cache_queries_total += r->n_tokens;
    e->stats.prefix_cache_hits_total += r->n_computed;
    pthread_mutex_unlock(&e->mu);
}

// Commits the request's full, computed blocks to the prefix cache.
static void prefix_commit(struct engine *e, struct request *r) {
    if (!e->o.enable_prefix_caching) return;
    while (r->n_hashed < r->n_computed / e->bs) {
        const int32_t *t = r->tokens + (size_t)r->n_hashed * e->bs;
        uint64_t h = kv_block_hash(r->last_hash, t, e->bs, e->salt);
        kv_pool_commit(&e->pool, r->blocks[r->n_hashed], h, r->last_hash, t);
        r->last_hash = h;
        r->n_hashed++;
    }
}

// ---- scheduling ----

// Gives r blocks for n_tokens total; returns false if the pool ran dry.
static bool reserve(struct engine *e, struct request *r, int n_tokens) {
    while (r->n_blocks * e->bs < n_tokens) {
        int id = kv_pool_alloc(&e->pool);
        if (id < 0) return false;
        r->blocks[r->n_blocks++] = id;
    }
    return true;
}

static void preempt(struct engine *e, struct request *victim) {
    list_remove(&e->running, victim);
    free_blocks(e, victim);
    victim->state = REQ_WAITING;
    list_push_front(&e->waiting, victim);
    pthread_mutex_lock(&e->mu);
    e->stats.preemptions_total++;
    pthread_mutex_unlock(&e->mu);
}

static struct request *newest_running(struct engine *e) {
    struct request *r = e->running;
    while (r && r->next) r = r->next;
    return r;
}

// Fills e->sched / e->sched_n; returns the number of scheduled requests.
static int schedule(struct engine *e) {
    int budget = e->o.max_num_batched_tokens, n_sched = 0;
    for (struct request *r = e->running; r && budget > 0; r = r->next) {
        int n = r->n_tokens - r->n_computed;
        if (n > budget) n = budget;
        bool ok = true;
        while (!reserve(e, r, r->n_computed + n)) {
            struct request *victim = newest_running(e);
            preempt(e, victim);
            if (victim == r) { ok = false; break; }
        }
        if (!ok) break;  // r itself was the newest: nothing after it runs either
        e->sched[n_sched] = r;
        e->sched_n[n_sched++] = n;
        budget -= n;  // preemption only removes the list's tail, so r->next stays valid
    }
    while (e->waiting && budget > 0 && list_len(e->running) < e->o.max_num_seqs) {
        struct request *r = e->waiting;
        bool first_time = r->n_generated == 0 && r->n_cached_prompt < 0;
        prefix_lookup(e, r);
        if (first_time) r->n_cached_prompt = r->n_computed;
        int n = r->n_tokens - r->n_computed;
        if (n > budget) {
            if (!e->o.enable_chunked_prefill && n <= e->o.max_num_batched_tokens) break;  // wait for a whole step
            n = budget;
        }
        if (!reserve(e, r, r->n_computed + n)) {
            if (!e->running) {  // nothing can free blocks: the request can never fit
                list_remove(&e->waiting, r);
                struct gen_event ev = {.kind = GEN_ERROR};
                snprintf(ev.error, sizeof ev.error, "request needs more KV blocks than the cache holds (%d)", e->pool.n_blocks);
                req_handle_push(r->h, &ev);
                request_free(e, r);
                continue;
            }
            free_blocks(e, r);  // keep FCFS: retry next step with all blocks
            break;
        }
        list_remove(&e->waiting, r);
        r->state = REQ_RUNNING;
        list_append(&e->running, r);
        e->sched[n_sched] = r;
        e->sched_n[n_sched++] = n;
        budget -= n;
    }
    return n_sched;
}

// ---- one step ----

// Samples the job's token and fills its event (with logprobs when asked). Touches only the
// request's own sampler and the read-only logits, so jobs run on any thread.
static void sample_job_run(const struct engine *e, struct sample_job *j) {
    struct request *r = j->r;
    const float *logits = j->lg;
    int id = sampler_sample(&r->sampler, logits);
    struct gen_event ev = {.kind = GEN_TOKEN, .token = id};
    int nv = e->m->cfg.n_vocab;
    if (r->top_logprobs >= 0) {  // one pass for the normaliser, one for the top k (was k + 1 and k·vocab·k/2)
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

// r's n scheduled tokens are computed: count the prompt's share, commit full blocks.
static void computed(struct engine *e, struct request *r, int n, long long *prompt) {
    int before = r->n_computed;
    r->n_computed += n;
    if (before < r->n_prompt) *prompt += (r->n_computed < r->n_prompt ? r->n_computed : r->n_prompt) - before;
    prefix_commit(e, r);
}

// Appends r's new token, emits it, and retires r when it is done.
static void emit(struct engine *e, struct request *r, const struct gen_event *ev) {
    int id = ev->token;
    r->tokens[r->n_tokens++] = id;
    r->n_generated++;
    req_handle_push(r->h, ev);
    const char *why = NULL;
    if (!r->ignore_eos && tokenizer_is_eog(e->m->tok, id)) why = "stop";
    else if (r->n_generated >= r->max_tokens || r->n_tokens >= e->plan.max_model_len) why = "length";
    if (why) {
        list_remove(&e->running, r);
        finish(e, r, why);
    }
}

static void count_tokens(struct engine *e, long long prompt, long long gen) {
    pthread_mutex_lock(&e->mu);
    e->stats.prompt_tokens_total += prompt;
    e->stats.generation_tokens_total += gen;
    pthread_mutex_unlock(&e->mu);
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

static bool plain_greedy(const struct request *r) { return r->sampler.p.temperature == 0 && r->top_logprobs < 0; }

// The step arrays' entry i: r decodes token tok at position p.
static void put_decode(struct engine *e, int i, const struct request *r, int32_t tok, int p) {
    e->qstart[i] = i;
    e->tok[i] = tok;
    e->pos[i] = p;
    e->slot[i] = r->blocks[p / e->bs] * e->bs + p % e->bs;
    e->seq_lens[i] = p + 1;
    memcpy(e->btab + (size_t)i * e->max_blocks_per_seq, r->blocks, (size_t)r->n_blocks * sizeof(int32_t));
    e->rows[i] = i;
}

// Whether the scheduled step may be launched without waiting: all running requests, each
// decoding one greedy token.
static bool async_ok(struct engine *e, int n_sched) {
    if (!e->async || n_sched > BACKEND_FEED_ROWS || n_sched != list_len(e->running)) return false;
    for (int i = 0; i < n_sched; i++) {
        const struct request *r = e->sched[i];
        if (e->sched_n[i] != 1 || r->n_computed + 1 != r->n_tokens || !plain_greedy(r)) return false;
    }
    return true;
}

// Launches the step after the one in flight (fl[0]) into fl[1]; returns its size (0: none —
// a waiting request can be admitted, a running one is not in fl[0], every sequence stops by
// length, or the pool is short: the next step is then scheduled as usual).
static int launch_ahead(struct engine *e) {
    struct inflight *cur = &e->fl[0], *nx = &e->fl[1];
    nx->n = 0;
    if (e->waiting && list_len(e->running) < e->o.max_num_seqs) return 0;
    int live = 0, n = 0;
    for (int i = 0; i < cur->n; i++) live += cur->r[i] != NULL;
    if (live != list_len(e->running)) return 0;
    for (int i = 0; i < cur->n; i++) {
        struct request *r = cur->r[i];
        if (!r || atomic_load(&r->h->aborted)) continue;
        if (r->n_generated + 1 >= r->max_tokens || r->n_tokens + 1 >= e->plan.max_model_len) continue;  // ends at this pick
        int p = r->n_computed + 1;  // (fl[0] computes position n_computed; its pick goes after it)
        if (!reserve(e, r, p + 1)) return 0;
        put_decode(e, n, r, -1 - i, p);
        nx->r[n++] = r;
    }
    if (!n) return 0;
    e->qstart[n] = n;
    struct batch bt = {.n_tokens = n, .token_ids = e->tok, .positions = e->pos, .slot_mapping = e->slot, .n_seqs = n,
                       .query_start = e->qstart, .seq_lens = e->seq_lens, .block_tables = e->btab,
                       .max_blocks_per_seq = e->max_blocks_per_seq, .n_logits = n, .logits_rows = e->rows};
    TRY(forward_launch_greedy(&e->fw, &e->kv, &bt, nx->ids));
    nx->n = n;
    pthread_mutex_lock(&e->mu);
    e->stats.steps_ahead_total++;
    pthread_mutex_unlock(&e->mu);
    return n;
}

// With a step in flight: launches the one after it when it can, then reads the first back and
// emits its tokens; the step launched ahead (if any) is then the one in flight.
static int step_inflight(struct engine *e) {
    int n = e->fl[0].n, rc = launch_ahead(e);
    if (rc >= 0) rc = forward_wait_ids(&e->fw, e->fl[0].ids);
    if (rc < 0) {
        forward_wait(&e->fw);  // (nothing queued may outlive the requests it writes for)
        e->fl[0].n = e->fl[1].n = 0;
        return rc;
    }
    long long prompt = 0, gen = 0;
    for (int i = 0; i < e->fl[0].n; i++) {
        struct request *r = e->fl[0].r[i];
        if (!r) continue;
        computed(e, r, 1, &prompt);
        struct gen_event ev = {.kind = GEN_TOKEN, .token = e->fl[0].ids[i]};
        emit(e, r, &ev);  // (a request that ends leaves fl[1] too)
        gen++;
    }
    count_tokens(e, prompt, gen);
    struct inflight t = e->fl[0];
    e->fl[0] = e->fl[1];
    e->fl[1] = t;
    e->fl[1].n = 0;
    return n;
}

// ---- a scheduled step ----

static int step(struct engine *e) {
    int n_sched = schedule(e);
    if (n_sched == 0) return 0;
    int nt = 0, nl = 0;
    for (int i = 0; i < n_sched; i++) {
        struct request *r = e->sched[i];
        e->qstart[i] = nt;
        for (int j = 0; j < e->sched_n[i]; j++, nt++) {
            int p = r->n_computed + j;
            e->tok[nt] = r->tokens[p];
            e->pos[nt] = p;
            e->slot[nt] = r->blocks[p / e->bs] * e->bs + p % e->bs;
        }
        e->seq_lens[i] = r->n_computed + e->sched_n[i];
        memcpy(e->btab + (size_t)i * e->max_blocks_per_seq, r->blocks, (size_t)r->n_blocks * sizeof(int32_t));
        if (e->seq_lens[i] == r->n_tokens) e->rows[nl++] = nt - 1;  // reaches the end: sample
    }
    e->qstart[n_sched] = nt;
    struct batch bt = {.n_tokens = nt, .token_ids = e->tok, .positions = e->pos, .slot_mapping = e->slot,
                       .n_seqs = n_sched, .query_start = e->qstart, .seq_lens = e->seq_lens, .block_tables = e->btab,
                       .max_blocks_per_seq = e->max_blocks_per_seq, .n_logits = nl, .logits_rows = e->rows};
    if (async_ok(e, n_sched)) {  // launched; read back by step_inflight
        TRY(forward_launch_greedy(&e->fw, &e->kv, &bt, e->fl[0].ids));
        memcpy(e->fl[0].r, e->sched, sizeof(struct request *) * (size_t)n_sched);
        e->fl[0].n = n_sched;
        return n_sched;
    }
    int rc = forward_run(&e->fw, &e->kv, &bt, e->logits);
    if (rc < 0) return rc;
    int nj = 0, nv = e->m->cfg.n_vocab;
    long long gen = 0, prompt = 0;
    bool heavy = false;  // a draw with temperature or logprobs (greedy alone takes ~20 us)
    for (int i = 0; i < n_sched; i++) {
        struct request *r = e->sched[i];
        computed(e, r, e->sched_n[i], &prompt);
        if (r->n_computed != r->n_tokens) continue;
        e->jobs[nj] = (struct sample_job){.r = r, .lg = e->logits + (size_t)nj * nv};
        heavy |= r->sampler.p.temperature > 0 || r->top_logprobs >= 0;
        nj++;
    }
    // sampling over a 128k vocabulary costs ~1 ms a sequence with temperature: in parallel when
    // several sequences draw (same draws: each has its own sampler)
    if (e->tp && nj > 1 && heavy) threadpool_run(e->tp, nj, sample_task, e);
    else for (int j = 0; j < nj; j++) sample_job_run(e, &e->jobs[j]);
    for (int j = 0; j < nj; j++, gen++) emit(e, e->jobs[j].r, &e->jobs[j].ev);
    count_tokens(e, prompt, gen);
    return n_sched;
}

static void reap_aborted(struct engine *e, struct request **list) {
    for (struct request *r = *list, *next; r; r = next) {
        next = r->next;
        if (atomic_load(&r->h->aborted)) {
            list_remove(list, r);
            finish(e, r, "abort");
        }
    }
}

static void publish_stats(struct engine *e) {
    pthread_mutex_lock(&e->mu);
    e->stats.n_running = list_len(e->running);
    e->stats.n_waiting = list_len(e->waiting);
    for (struct request *r = e->incoming; r; r = r->next) e->stats.n_waiting++;
    e->stats.n_blocks_total = e->pool.n_blocks;
    e->stats.n_blocks_free = e->pool.n_free;
    // cached-but-free blocks count as free: they are reclaimable
    e->stats.kv_cache_usage = 1.0 - (double)e->pool.n_free / e->pool.n_blocks;
    pthread_mutex_unlock(&e->mu);
}

static void *engine_main(void *arg) {
    struct engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && !e->incoming && !e->running && !e->waiting) pthread_cond_wait(&e->cv, &e->mu);
        bool stop = e->stop;
        struct request *in = e->incoming;
        e->incoming = NULL;
        pthread_mutex_unlock(&e->mu);
        while (in) {
            struct request *next = in->next;
            list_append(&e->waiting, in);
            in = next;
        }
        if (stop) break;
        reap_aborted(e, &e->running);
        reap_aborted(e, &e->waiting);
        int rc = e->fl[0].n ? step_inflight(e) : step(e);
        if (rc < 0) {  // a backend failure fails everything in flight; the engine stays up
            while (e->running) { struct request *r = e->running; list_remove(&e->running, r); struct gen_event ev = {.kind = GEN_ERROR}; snprintf(ev.error, sizeof ev.error, "%s", err_msg()); req_handle_push(r->h, &ev); request_free(e, r); }
        }
        publish_stats(e);
        if (rc == 0 && e->waiting && !e->running) usleep(1000);
    }
    if (e->fl[0].n) forward_wait(&e->fw);  // (its rows are dropped: nothing reads them)
    e->fl[0].n = e->fl[1].n = 0;
    // shutdown: everything still here ends with "abort"
    while (e->running) { struct request *r = e->running; list_remove(&e->running, r); finish(e, r, "abort"); }
    while (e->waiting) { struct request *r = e->waiting; list_remove(&e->waiting, r); finish(e, r, "abort"); }
    pthread_mutex_lock(&e->mu);
    while (e->incoming) { struct request *r = e->incoming; e->incoming = r->next; pthread_mutex_unlock(&e->mu); finish(e, r, "abort"); pthread_mutex_lock(&e->mu); }
    pthread_mutex_unlock(&e->mu);
    publish_stats(e);
    return NULL;
}

// ---- construction, memory plan ----

static uint64_t cache_salt(const struct kv_cache *kv) {
    uint64_t h = 0x84222325cbf29ce4ull;
    for (int l = 0; l < kv->n_layers; l++) {
        const struct kv_layer *L = &kv->layers[l];
        h = (h ^ (uint64_t)L->dtype) * 0x100000001b3ull;
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

int engine_create(struct engine **out, struct model *m, const struct engine_options *o) {
    *out = NULL;
    struct engine *e = calloc(1, sizeof *e);
    if (!e) return err_set(OCT_ENOMEM, "engine: out of memory");
    e->m = m;
    e->o = *o;
    int rc = OCT_OK;
    const struct model_config *c = &m->cfg;
    if (e->o.max_num_seqs <= 0) e->o.max_num_seqs = 64;
    if (e->o.max_num_batched_tokens <= 0) e->o.max_num_batched_tokens = 2048;
    int mml = o->max_model_len > 0 ? o->max_model_len : c->max_pos;
    if (mml > c->max_pos) fprintf(stderr, "octet: warning: --max-model-len %d exceeds the model's %d\n", mml, c->max_pos);
    if (!e->o.enable_chunked_prefill && e->o.max_num_batched_tokens < mml) {
        fprintf(stderr, "octet: without chunked prefill, --max-num-batched-tokens is raised to max-model-len %d\n", mml);
        e->o.max_num_batched_tokens = mml;
    }
    if (e->o.max_num_seqs > e->o.max_num_batched_tokens) e->o.max_num_seqs = e->o.max_num_batched_tokens;
    e->b = backend_create(o->device, o->n_threads);
    if (!e->b) { free(e); return OCT_EINVAL; }
    if ((rc = kv_cache_plan(&e->kv, m, &o->kv, e->b->ops->kv_block_tokens)) < 0) { e->b->ops->destroy(e->b); free(e); return rc; }
    e->bs = e->kv.kv_block_tokens;
    e->max_blocks_per_seq = (mml + e->bs - 1) / e->bs;
    e->salt = cache_salt(&e->kv);
    e->b->batch_invariant = o->batch_invariant;
    e->b->enforce_eager = o->enforce_eager;
    int T = e->o.max_num_batched_tokens, S = e->o.max_num_seqs;
    rc = forward_init(&e->fw, m, e->b, T, S);
    e->fw.fp8_math = o->fp8_math;
    e->fw.fp8_accum = o->fp8_accum;
    struct engine_memory_plan *p = &e->plan;
    // memory plan (chosen dtype and bf16 side by side)
    p->weight_bytes = (long long)m->weight_bytes;
    p->kv_bytes_per_token = kv_cache_bytes_per_token(&e->kv);
    p->kv_bytes_per_token_bf16 = 2L * c->n_layers * c->n_kv_heads * c->head_dim * 2;
    // default budget: the backend's (CPU: a quarter of RAM; GPU: --gpu-memory-utilization of
    // the card minus what the weights and activations already took)
    p->kv_budget_bytes = o->kv_cache_memory_bytes > 0 ? o->kv_cache_memory_bytes
                                                      : (long long)e->b->ops->kv_budget_default(e->b, o->gpu_memory_utilization);
    p->kv_block_tokens = e->bs;
    p->max_model_len = mml;
    p->n_blocks = o->num_kv_blocks > 0 ? o->num_kv_blocks : (int)(p->kv_budget_bytes / (p->kv_bytes_per_token * e->bs));
    p->n_blocks_bf16 = (int)(p->kv_budget_bytes / (p->kv_bytes_per_token_bf16 * e->bs));
    if (o->num_kv_blocks > 0) p->kv_budget_bytes = (long long)p->n_blocks * e->bs * p->kv_bytes_per_token;
    p->capacity_tokens = (long long)p->n_blocks * e->bs;
    p->capacity_tokens_bf16 = (long long)p->n_blocks_bf16 * e->bs;
    p->max_concurrency = (double)p->capacity_tokens / mml;
    p->max_concurrency_bf16 = (double)p->capacity_tokens_bf16 / mml;
    if (rc == OCT_OK && p->n_blocks < 1)
        rc = err_set(OCT_ENOMEM, "engine: a KV budget of %lld bytes holds no block of %d tokens", p->kv_budget_bytes, e->bs);
    if (rc == OCT_OK) rc = kv_cache_alloc(&e->kv, e->b, p->n_blocks);
    if (rc == OCT_OK) rc = kv_pool_init(&e->pool, p->n_blocks, e->bs);
    e->tok = malloc(sizeof(int32_t) * T); e->pos = malloc(sizeof(int32_t) * T); e->slot = malloc(sizeof(int32_t) * T);
    e->rows = malloc(sizeof(int32_t) * S); e->qstart = malloc(sizeof(int32_t) * (S + 1)); e->seq_lens = malloc(sizeof(int32_t) * S);
    e->btab = malloc(sizeof(int32_t) * (size_t)S * e->max_blocks_per_seq);
    e->sched = malloc(sizeof(struct request *) * S); e->sched_n = malloc(sizeof(int) * S);
    e->logits = backend_host_alloc(e->b, sizeof(float) * (size_t)S * c->n_vocab);  // (pinned on a GPU: the copy is one DMA)
    e->jobs = malloc(sizeof(struct sample_job) * S);
    bool fl_ok = true;
    for (int k = 0; k < 2; k++) {
        e->fl[k].r = malloc(sizeof(struct request *) * S);
        e->fl[k].ids = backend_host_alloc(e->b, sizeof(int32_t) * (size_t)S);
        fl_ok = fl_ok && e->fl[k].r && e->fl[k].ids;
    }
    // (a backend that runs steps in place — no wait_ids — would only deliver each token a step later)
    e->async = e->b->ops->logits_argmax &&
               (o->async_scheduling == ENGINE_ASYNC_ALWAYS || (o->async_scheduling == ENGINE_ASYNC_AUTO && e->b->ops->wait_ids));
    if (rc == OCT_OK && (!e->tok || !e->pos || !e->slot || !e->rows || !e->qstart || !e->seq_lens || !e->btab || !e->sched || !e->sched_n || !e->logits || !e->jobs || !fl_ok))
        rc = err_set(OCT_ENOMEM, "engine: out of memory for step buffers");
    int st = o->sample_threads > 0 ? o->sample_threads : strcmp(e->b->ops->name, "cpu") ? 8 : 1;
    if (st > S) st = S;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (o->sample_threads <= 0 && cores > 0 && st > cores) st = (int)cores;
    if (rc == OCT_OK && st > 1) e->tp = threadpool_create(st);  // (NULL: samples one at a time)
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (rc == OCT_OK && pthread_create(&e->thread, NULL, engine_main, e) != 0) rc = err_set(OCT_ENOMEM, "engine: cannot start its thread");
    if (rc < 0) {
        backend_host_free(e->b, e->logits);
        for (int k = 0; k < 2; k++) { backend_host_free(e->b, e->fl[k].ids); free(e->fl[k].r); }
        kv_pool_free(&e->pool); kv_cache_free(&e->kv); forward_free(&e->fw); e->b->ops->destroy(e->b);
        free(e->tok); free(e->pos); free(e->slot); free(e->rows); free(e->qstart); free(e->seq_lens); free(e->btab);
        free(e->sched); free(e->sched_n); free(e->jobs);
        threadpool_free(e->tp);
        free(e);
        return rc;
    }
    publish_stats(e);
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
    backend_host_free(e->b, e->logits);
    for (int k = 0; k < 2; k++) { backend_host_free(e->b, e->fl[k].ids); free(e->fl[k].r); }
    kv_pool_free(&e->pool);
    kv_cache_free(&e->kv);
    forward_free(&e->fw);
    e->b->ops->destroy(e->b);
    free(e->tok); free(e->pos); free(e->slot); free(e->rows); free(e->qstart); free(e->seq_lens); free(e->btab);
    free(e->sched); free(e->sched_n); free(e->jobs);
    threadpool_free(e->tp);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

struct req_handle *engine_submit(struct engine *e, const struct gen_request *g) {
    int mml = e->plan.max_model_len;
    if (g->n_prompt <= 0) { err_set(OCT_EINVAL, "the prompt is empty"); return NULL; }
    if (g->max_tokens <= 0) { err_set(OCT_EINVAL, "max_tokens must be at least 1 (got %d)", g->max_tokens); return NULL; }
    if (g->n_prompt + (long)g->max_tokens > mml) {
        err_set(OCT_EINVAL, "this model's maximum context length is %d tokens; the request has %d prompt tokens and max_tokens %d",
                mml, g->n_prompt, g->max_tokens);
        return NULL;
    }
    for (int i = 0; i < g->n_prompt; i++)
        if (g->prompt[i] < 0 || g->prompt[i] >= e->m->cfg.n_vocab) { err_set(OCT_EINVAL, "prompt token %d is outside the vocabulary", g->prompt[i]); return NULL; }
    if (g->top_logprobs > ENGINE_MAX_TOP_LOGPROBS) { err_set(OCT_EINVAL, "top_logprobs %d exceeds %d", g->top_logprobs, ENGINE_MAX_TOP_LOGPROBS); return NULL; }
    struct request *r = calloc(1, sizeof *r);
    if (!r) { err_set(OCT_ENOMEM, "out of memory"); return NULL; }
    r->cap_tokens = g->n_prompt + g->max_tokens;
    r->tokens = malloc(sizeof(int32_t) * (size_t)r->cap_tokens);
    r->blocks = malloc(sizeof(int32_t) * (size_t)e->max_blocks_per_seq);
    r->h = req_handle_new();
    if (!r->tokens || !r->blocks || !r->h || sampler_init(&r->sampler, &g->sp, e->m->cfg.n_vocab) < 0) {
        if (r->h) { req_handle_unref(r->h); req_handle_unref(r->h); }
        sampler_free(&r->sampler);
        free(r->tokens); free(r->blocks); free(r);
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
        request_free(e, r);
        return NULL;
    }
    r->next = NULL;
    struct request **tail = &e->incoming;
    while (*tail) tail = &(*tail)->next;
    *tail = r;
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
    fprintf(f, "octet: model %s: %d layers, %d/%d heads, head_dim %d, weights %.1f MiB (%s)\n", e->m->name, c->n_layers,
            c->n_heads, c->n_kv_heads, c->head_dim, p->weight_bytes / 1048576.0, dtype_name(e->m->weight_dtype));
    fprintf(f, "octet: KV cache dtype per layer:");
    for (int l = 0; l < e->kv.n_layers; l++) fprintf(f, " %s%s", dtype_name(e->kv.layers[l].dtype), e->kv.layers[l].window ? "(swa)" : "");
    fprintf(f, "\n");
    fprintf(f, "octet: KV budget %.2f GiB, blocks of %d tokens, max_model_len %d\n", p->kv_budget_bytes / 1073741824.0, p->kv_block_tokens, p->max_model_len);
    fprintf(f, "octet: %-10s %14s %14s %12s %16s\n", "kv dtype", "bytes/token", "tokens", "blocks", "max concurrency");
    fprintf(f, "octet: %-10s %14ld %14lld %12d %15.2fx\n", e->o.kv.dtype, p->kv_bytes_per_token, p->capacity_tokens, p->n_blocks, p->max_concurrency);
    fprintf(f, "octet: %-10s %14ld %14lld %12d %15.2fx\n", "bf16", p->kv_bytes_per_token_bf16, p->capacity_tokens_bf16, p->n_blocks_bf16, p->max_concurrency_bf16);
}
