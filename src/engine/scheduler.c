// scheduler.c — the step plan: admission under a token budget and max_num_seqs, chunked
// prefill, preemption of the newest running request when blocks run out, and the prefix cache's
// lookups (on admission) and commits (as blocks fill). Blocks are released tail-first so that a
// prefix's head blocks stay cached longest.
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "../base/check.h"

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

static bool list_remove(struct request **head, struct request *r) {
    while (*head && *head != r) head = &(*head)->next;
    bool found = *head != NULL;
    if (found) *head = r->next;
    r->next = NULL;
    return found;
}

int scheduler_init(struct scheduler *s, const struct sched_options *o, struct kv_pool *pool) {
    memset(s, 0, sizeof *s);
    s->o = *o;
    s->pool = pool;
    s->bs = pool->kv_block_tokens;
    size_t n = (size_t)(o->max_num_seqs > 0 ? o->max_num_seqs : 1);
    s->plan.reqs = malloc(n * sizeof *s->plan.reqs);
    s->plan.n_tokens = malloc(n * sizeof *s->plan.n_tokens);
    s->plan.preempted = malloc(n * sizeof *s->plan.preempted);
    if (!s->plan.reqs || !s->plan.n_tokens || !s->plan.preempted) {
        scheduler_free(s);
        return err_set(OCT_ENOMEM, "scheduler: out of memory");
    }
    return OCT_OK;
}

void scheduler_free(struct scheduler *s) {
    free(s->plan.reqs);
    free(s->plan.n_tokens);
    free(s->plan.preempted);
    memset(s, 0, sizeof *s);
}

// ---- blocks ----

static void free_blocks(struct scheduler *s, struct request *r) {
    for (int i = r->n_blocks - 1; i >= 0; i--) kv_pool_unref(s->pool, r->blocks[i]);
    r->n_blocks = 0;
    r->n_computed = 0;
    r->n_hashed = 0;
    r->last_hash = 0;
}

bool scheduler_reserve(struct scheduler *s, struct request *r, int n_tokens) {
    while (r->n_blocks * s->bs < n_tokens) {
        int id = kv_pool_alloc(s->pool);
        if (id < 0) return false;
        r->blocks[r->n_blocks++] = id;
    }
    return true;
}

// ---- prefix cache ----

// Reuses cached full blocks of the request's tokens; keeps at least one token to compute.
static void prefix_lookup(struct scheduler *s, struct request *r) {
    if (!s->o.enable_prefix_caching || r->n_computed > 0) return;
    int max_blocks = (r->n_tokens - 1) / s->bs, hit = 0;
    uint64_t parent = 0;
    for (int i = 0; i < max_blocks; i++) {
        const int32_t *t = r->tokens + (size_t)i * s->bs;
        uint64_t h = kv_block_hash(parent, t, s->bs, s->o.salt);
        int id = kv_pool_lookup(s->pool, h, parent, t);
        if (id < 0) break;
        kv_pool_ref(s->pool, id);
        r->blocks[r->n_blocks++] = id;
        parent = h;
        hit++;
    }
    r->n_computed = hit * s->bs;
    r->n_hashed = hit;
    r->last_hash = parent;
    s->plan.prefix_queries += r->n_tokens;
    s->plan.prefix_hits += r->n_computed;
}

// Commits the request's full, computed blocks to the prefix cache.
static void prefix_commit(struct scheduler *s, struct request *r) {
    if (!s->o.enable_prefix_caching) return;
    while (r->n_hashed < r->n_computed / s->bs) {
        const int32_t *t = r->tokens + (size_t)r->n_hashed * s->bs;
        uint64_t h = kv_block_hash(r->last_hash, t, s->bs, s->o.salt);
        kv_pool_commit(s->pool, r->blocks[r->n_hashed], h, r->last_hash, t);
        r->last_hash = h;
        r->n_hashed++;
    }
}

int scheduler_computed(struct scheduler *s, struct request *r, int n) {
    int before = r->n_computed;
    r->n_computed += n;
    prefix_commit(s, r);
    if (before >= r->n_prompt) return 0;
    return (r->n_computed < r->n_prompt ? r->n_computed : r->n_prompt) - before;
}

// ---- lists ----

void scheduler_add(struct scheduler *s, struct request *r) {
    r->state = REQ_WAITING;
    list_append(&s->waiting, r);
    s->n_waiting++;
}

void scheduler_remove(struct scheduler *s, struct request *r) {
    if (list_remove(r->state == REQ_RUNNING ? &s->running : &s->waiting, r)) {
        if (r->state == REQ_RUNNING) s->n_running--;
        else s->n_waiting--;
    }
    free_blocks(s, r);
}

// ---- the plan ----

static void preempt(struct scheduler *s, struct request *victim) {
    list_remove(&s->running, victim);
    s->n_running--;
    free_blocks(s, victim);
    victim->state = REQ_WAITING;
    list_push_front(&s->waiting, victim);
    s->n_waiting++;
    s->plan.preempted[s->plan.n_preempted++] = victim;
}

static struct request *newest_running(struct scheduler *s) {
    struct request *r = s->running;
    while (r && r->next) r = r->next;
    return r;
}

static void plan_add(struct sched_plan *p, struct request *r, int n) {
    p->reqs[p->n] = r;
    p->n_tokens[p->n++] = n;
}

int scheduler_schedule(struct scheduler *s) {
    struct sched_plan *p = &s->plan;
    p->n = p->n_admitted = p->n_preempted = 0;
    p->rejected = NULL;
    p->prefix_queries = p->prefix_hits = 0;
    int budget = s->o.max_num_batched_tokens;
    for (struct request *r = s->running; r && budget > 0; r = r->next) {
        int n = r->n_tokens - r->n_computed;
        if (n > budget) n = budget;
        bool ok = true;
        while (!scheduler_reserve(s, r, r->n_computed + n)) {
            struct request *victim = newest_running(s);
            preempt(s, victim);
            if (victim == r) { ok = false; break; }
        }
        if (!ok) break;  // r itself was the newest: nothing after it runs either
        plan_add(p, r, n);
        budget -= n;  // preemption only removes the list's tail, so r->next stays valid
    }
    struct request **rejected_tail = &p->rejected;
    while (s->waiting && budget > 0 && s->n_running < s->o.max_num_seqs) {
        struct request *r = s->waiting;
        bool first_time = r->n_generated == 0 && r->n_cached_prompt < 0;
        prefix_lookup(s, r);
        if (first_time) r->n_cached_prompt = r->n_computed;
        int n = r->n_tokens - r->n_computed;
        if (n > budget) {
            // without chunked prefill, a prompt that fits a whole step waits for one
            if (!s->o.enable_chunked_prefill && n <= s->o.max_num_batched_tokens) break;
            n = budget;
        }
        if (!scheduler_reserve(s, r, r->n_computed + n)) {
            if (!s->running) {  // nothing can free blocks: the request can never fit
                scheduler_remove(s, r);
                *rejected_tail = r;
                rejected_tail = &r->next;
                continue;
            }
            free_blocks(s, r);  // keep FCFS: retry next step with all blocks
            break;
        }
        list_remove(&s->waiting, r);
        s->n_waiting--;
        r->state = REQ_RUNNING;
        list_append(&s->running, r);
        s->n_running++;
        plan_add(p, r, n);
        p->n_admitted++;
        budget -= n;
    }
    return p->n;
}
