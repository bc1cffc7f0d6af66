// test_scheduler.c — the step planner alone (src/engine/scheduler.c): hand-built requests and a
// bare kv_pool, no model, no backend, no threads. Admission under a token budget and
// max_num_seqs, chunked prefill splitting a prompt over steps (and waiting for a whole step
// without it), preemption of the newest running request when the pool runs dry (its blocks
// returned, it back at the front of the waiting list), prefix-cache hits, a request finishing,
// and a request that can never fit.
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/engine/scheduler.h"
#include "../test.h"

#define BS 16
#define MAX_BLOCKS 64

// A waiting request with an n_prompt-token prompt: token i is base + i.
static struct request *mk(int n_prompt, int max_tokens, int base) {
    struct request *r = calloc(1, sizeof *r);
    r->cap_tokens = n_prompt + max_tokens;
    r->tokens = malloc(sizeof(int32_t) * (size_t)r->cap_tokens);
    r->blocks = malloc(sizeof(int32_t) * MAX_BLOCKS);
    for (int i = 0; i < n_prompt; i++) r->tokens[i] = base + i;
    r->n_tokens = r->n_prompt = n_prompt;
    r->max_tokens = max_tokens;
    r->n_cached_prompt = -1;
    r->top_logprobs = -1;
    return r;
}

static void rm(struct request *r) {
    free(r->tokens);
    free(r->blocks);
    free(r);
}

struct fixture {
    struct kv_pool pool;
    struct scheduler s;
};

static void setup(struct fixture *f, int n_blocks, int budget, int max_seqs, bool chunked, bool prefix) {
    CHECK_OK(kv_pool_init(&f->pool, n_blocks, BS));
    struct sched_options o = {.max_num_batched_tokens = budget, .max_num_seqs = max_seqs,
                              .enable_chunked_prefill = chunked, .enable_prefix_caching = prefix, .salt = 42};
    CHECK_OK(scheduler_init(&f->s, &o, &f->pool));
}

static void teardown(struct fixture *f) {
    scheduler_free(&f->s);
    kv_pool_free(&f->pool);
}

// What the engine does after running the plan: each request's tokens are computed; one that
// reached its end samples a token (id 7), which is appended.
static void run_plan(struct scheduler *s) {
    for (int i = 0; i < s->plan.n; i++) {
        struct request *r = s->plan.reqs[i];
        scheduler_computed(s, r, s->plan.n_tokens[i]);
        if (r->n_computed == r->n_tokens) {
            r->tokens[r->n_tokens++] = 7;
            r->n_generated++;
        }
    }
}

TEST(admission_under_budget) {
    struct fixture f;
    setup(&f, 64, 100, 8, true, false);
    struct request *a = mk(40, 8, 100), *b = mk(40, 8, 200), *c = mk(40, 8, 300);
    scheduler_add(&f.s, a);
    scheduler_add(&f.s, b);
    scheduler_add(&f.s, c);
    CHECK_EQ_INT(f.s.n_waiting, 3);
    // 40 + 40 + the last 20 of the budget, in arrival order
    CHECK_EQ_INT(scheduler_schedule(&f.s), 3);
    CHECK(f.s.plan.reqs[0] == a && f.s.plan.reqs[1] == b && f.s.plan.reqs[2] == c);
    CHECK(f.s.plan.n_tokens[0] == 40 && f.s.plan.n_tokens[1] == 40 && f.s.plan.n_tokens[2] == 20);
    CHECK_EQ_INT(f.s.plan.n_admitted, 3);
    CHECK_EQ_INT(f.s.n_running, 3);
    CHECK_EQ_INT(f.s.n_waiting, 0);
    CHECK(a->state == REQ_RUNNING && c->state == REQ_RUNNING);
    CHECK(a->n_blocks == 3 && b->n_blocks == 3 && c->n_blocks == 2);  // blocks for the planned tokens only
    CHECK_EQ_INT(f.pool.n_free, 64 - 8);
    run_plan(&f.s);
    CHECK_EQ_INT(a->n_tokens, 41);
    CHECK_EQ_INT(c->n_computed, 20);
    // running requests first: a and b decode one token each, c gets the rest of its prompt
    CHECK_EQ_INT(scheduler_schedule(&f.s), 3);
    CHECK(f.s.plan.n_tokens[0] == 1 && f.s.plan.n_tokens[1] == 1 && f.s.plan.n_tokens[2] == 20);
    CHECK_EQ_INT(f.s.plan.n_admitted, 0);
    CHECK_OK(kv_pool_check(&f.pool));
    scheduler_remove(&f.s, a); scheduler_remove(&f.s, b); scheduler_remove(&f.s, c);
    CHECK_EQ_INT(f.pool.n_free, 64);
    CHECK_EQ_INT(f.s.n_running, 0);
    rm(a); rm(b); rm(c);
    teardown(&f);
}

TEST(chunked_prefill_splits_a_prompt) {
    struct fixture f;
    setup(&f, 64, 16, 8, true, false);
    struct request *a = mk(50, 4, 100);
    scheduler_add(&f.s, a);
    int chunks[] = {16, 16, 16, 2, 1, 1};
    for (int k = 0; k < 6; k++) {
        CHECK_EQ_INT(scheduler_schedule(&f.s), 1);
        CHECK_EQ_INT(f.s.plan.n_tokens[0], chunks[k]);
        CHECK_EQ_INT(f.s.plan.n_admitted, k == 0);
        CHECK_EQ_INT(a->n_blocks, (a->n_computed + chunks[k] + BS - 1) / BS);
        run_plan(&f.s);
        CHECK_EQ_INT(a->n_generated, k < 3 ? 0 : k - 2);  // samples only once the prompt is in
    }
    scheduler_remove(&f.s, a);
    rm(a);
    teardown(&f);
    // without chunked prefill a prompt that fits a step waits for one with room for it whole
    setup(&f, 64, 64, 8, false, false);
    struct request *b = mk(40, 4, 100), *c = mk(40, 4, 200);
    scheduler_add(&f.s, b);
    scheduler_add(&f.s, c);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 1);
    CHECK(f.s.plan.reqs[0] == b && f.s.plan.n_tokens[0] == 40);
    CHECK_EQ_INT(c->n_blocks, 0);
    CHECK_EQ_INT(f.s.n_waiting, 1);
    run_plan(&f.s);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 2);
    CHECK(f.s.plan.reqs[1] == c && f.s.plan.n_tokens[0] == 1 && f.s.plan.n_tokens[1] == 40);
    scheduler_remove(&f.s, b); scheduler_remove(&f.s, c);
    rm(b); rm(c);
    teardown(&f);
}

TEST(max_num_seqs) {
    struct fixture f;
    setup(&f, 64, 512, 2, true, false);
    struct request *r[5];
    for (int i = 0; i < 5; i++) scheduler_add(&f.s, r[i] = mk(10, 4, 100 * i));
    CHECK_EQ_INT(scheduler_schedule(&f.s), 2);
    CHECK(f.s.plan.reqs[0] == r[0] && f.s.plan.reqs[1] == r[1]);
    CHECK_EQ_INT(f.s.n_running, 2);
    CHECK_EQ_INT(f.s.n_waiting, 3);
    CHECK(f.s.waiting == r[2] && r[2]->n_blocks == 0);
    run_plan(&f.s);
    // a request finishing makes room for the next in line
    scheduler_remove(&f.s, r[0]);
    CHECK_EQ_INT(f.s.n_running, 1);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 2);
    CHECK(f.s.plan.reqs[0] == r[1] && f.s.plan.reqs[1] == r[2] && f.s.plan.n_tokens[1] == 10);
    CHECK_EQ_INT(f.s.plan.n_admitted, 1);
    for (int i = 0; i < 5; i++) { scheduler_remove(&f.s, r[i]); rm(r[i]); }
    CHECK_EQ_INT(f.pool.n_free, 64);
    teardown(&f);
}

TEST(preemption_takes_the_newest) {
    struct fixture f;
    setup(&f, 5, 512, 8, true, false);  // 80 tokens of cache
    struct request *a = mk(32, 8, 100), *b = mk(32, 8, 200), *c = mk(16, 8, 300);
    scheduler_add(&f.s, a);
    scheduler_add(&f.s, b);
    scheduler_add(&f.s, c);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 3);
    CHECK_EQ_INT(f.pool.n_free, 0);
    run_plan(&f.s);  // 33, 33 and 17 tokens: each needs one more block, none is free
    // a's block comes from c (the newest); b then has only itself to preempt, and nothing after
    // it runs; b cannot come back this step (3 blocks wanted, 2 free): the waiting list is b, c
    CHECK_EQ_INT(scheduler_schedule(&f.s), 1);
    CHECK(f.s.plan.reqs[0] == a && f.s.plan.n_tokens[0] == 1);
    CHECK_EQ_INT(f.s.plan.n_preempted, 2);
    CHECK(f.s.plan.preempted[0] == c && f.s.plan.preempted[1] == b);
    CHECK_EQ_INT(f.s.plan.n_admitted, 0);
    CHECK(f.s.waiting == b && b->next == c && c->next == NULL);
    CHECK(b->state == REQ_WAITING && b->n_blocks == 0 && b->n_computed == 0 && b->n_tokens == 33);
    CHECK(c->n_blocks == 0 && c->n_computed == 0);
    CHECK_EQ_INT(a->n_blocks, 3);
    CHECK_EQ_INT(f.pool.n_free, 2);
    CHECK_EQ_INT(f.s.n_running, 1);
    CHECK_EQ_INT(f.s.n_waiting, 2);
    CHECK_OK(kv_pool_check(&f.pool));
    // a finishes: b is recomputed from scratch (its sampled token included), then c
    run_plan(&f.s);
    scheduler_remove(&f.s, a);
    CHECK_EQ_INT(f.pool.n_free, 5);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 2);
    CHECK(f.s.plan.reqs[0] == b && f.s.plan.n_tokens[0] == 33);
    CHECK(f.s.plan.reqs[1] == c && f.s.plan.n_tokens[1] == 17);
    CHECK_EQ_INT(f.s.plan.n_admitted, 2);
    CHECK_EQ_INT(f.s.plan.n_preempted, 0);
    scheduler_remove(&f.s, b); scheduler_remove(&f.s, c);
    CHECK_EQ_INT(f.pool.n_free, 5);
    rm(a); rm(b); rm(c);
    teardown(&f);
}

TEST(prefix_cache_hits) {
    struct fixture f;
    setup(&f, 16, 512, 8, true, true);
    struct request *a = mk(40, 4, 100);
    scheduler_add(&f.s, a);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 1);
    CHECK(f.s.plan.prefix_queries == 40 && f.s.plan.prefix_hits == 0);
    CHECK_EQ_INT(a->n_cached_prompt, 0);
    run_plan(&f.s);  // blocks 0 and 1 are full: committed
    CHECK_EQ_INT(a->n_hashed, 2);
    int a0 = a->blocks[0], a1 = a->blocks[1];
    // b shares a's first 32 tokens (2 blocks), then differs; a is still running: shared blocks
    struct request *b = mk(45, 4, 100);
    b->tokens[35] = 9;
    scheduler_add(&f.s, b);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 2);
    CHECK(f.s.plan.reqs[1] == b && f.s.plan.n_tokens[1] == 45 - 32);
    CHECK(f.s.plan.prefix_queries == 45 && f.s.plan.prefix_hits == 32);
    CHECK(b->n_computed == 32 && b->n_cached_prompt == 32 && b->n_hashed == 2);
    CHECK(b->blocks[0] == a0 && b->blocks[1] == a1 && b->n_blocks == 3);
    CHECK_EQ_INT(f.pool.refcount[a0], 2);
    run_plan(&f.s);
    scheduler_remove(&f.s, a);
    scheduler_remove(&f.s, b);
    CHECK_EQ_INT(f.pool.n_free, 16);
    // the blocks stay cached after both ended; a prompt of exactly those 32 tokens reuses one
    // block: the last token is always computed (it yields the logits)
    struct request *c = mk(32, 4, 100);
    scheduler_add(&f.s, c);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 1);
    CHECK(f.s.plan.prefix_hits == 16 && f.s.plan.n_tokens[0] == 16 && c->blocks[0] == a0);
    // without prefix caching nothing is looked up
    scheduler_remove(&f.s, c);
    rm(a); rm(b); rm(c);
    teardown(&f);
    setup(&f, 16, 512, 8, true, false);
    struct request *d = mk(40, 4, 100);
    scheduler_add(&f.s, d);
    scheduler_schedule(&f.s);
    run_plan(&f.s);
    scheduler_remove(&f.s, d);
    struct request *e = mk(40, 4, 100);
    scheduler_add(&f.s, e);
    CHECK_EQ_INT(scheduler_schedule(&f.s), 1);
    CHECK(f.s.plan.prefix_queries == 0 && f.s.plan.prefix_hits == 0 && f.s.plan.n_tokens[0] == 40);
    scheduler_remove(&f.s, e);
    rm(d); rm(e);
    teardown(&f);
}

TEST(too_big_is_rejected) {
    struct fixture f;
    setup(&f, 2, 512, 8, true, false);  // 32 tokens of cache
    struct request *a = mk(40, 4, 100), *b = mk(20, 4, 200);
    scheduler_add(&f.s, a);
    scheduler_add(&f.s, b);
    // a can never fit (nothing runs that could free blocks): out of the lists, blocks returned;
    // b behind it is admitted in the same step
    CHECK_EQ_INT(scheduler_schedule(&f.s), 1);
    CHECK(f.s.plan.rejected == a && a->next == NULL && a->n_blocks == 0);
    CHECK(f.s.plan.reqs[0] == b && f.s.plan.n_tokens[0] == 20);
    CHECK_EQ_INT(f.s.n_waiting, 0);
    CHECK_EQ_INT(f.pool.n_free, 0);
    scheduler_remove(&f.s, b);
    CHECK_EQ_INT(f.pool.n_free, 2);
    CHECK_OK(kv_pool_check(&f.pool));
    rm(a); rm(b);
    teardown(&f);
}

int main(void) {
    RUN(admission_under_budget);
    RUN(chunked_prefill_splits_a_prompt);
    RUN(max_num_seqs);
    RUN(preemption_takes_the_newest);
    RUN(prefix_cache_hits);
    RUN(too_big_is_rejected);
    return test_summary("scheduler");
}
