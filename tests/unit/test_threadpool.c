// test_threadpool.c — src/base/threadpool.c: every task of a run runs exactly once and
// before threadpool_run returns, on pools larger than the machine (workers that wake late,
// or are preempted mid-claim, while the caller has moved on two runs), and short runs
// alternate with long ones so that a stale claim would land inside the next run's range.
#include <stdatomic.h>
#include <stdint.h>

#include "../../src/base/threadpool.h"
#include "../test.h"

#define MAX_TASKS 64

struct ctx {
    atomic_int count[MAX_TASKS];  // times each task ran in this run
    atomic_int running;           // tasks inside fn now
    atomic_int thread_bad;        // a thread index outside [0, n_threads)
    int n_threads;
    int work;                     // spin iterations per task (widens the windows)
};

static void task(void *p, int i, int thread) {
    struct ctx *c = p;
    atomic_fetch_add(&c->running, 1);
    if (i < 0 || i >= MAX_TASKS) { atomic_fetch_add(&c->thread_bad, 1); atomic_fetch_sub(&c->running, 1); return; }
    if (thread < 0 || thread >= c->n_threads) atomic_fetch_add(&c->thread_bad, 1);
    volatile int sink = 0;
    for (int k = 0; k < c->work; k++) sink += k;
    atomic_fetch_add(&c->count[i], 1);
    atomic_fetch_sub(&c->running, 1);
}

// Runs n_runs runs alternating n_small and n_large tasks; returns the failed runs.
static int stress(int n_threads, int n_runs, int n_small, int n_large, int work) {
    struct threadpool *tp = threadpool_create(n_threads);
    if (!tp) return -1;
    static struct ctx c;
    c.n_threads = threadpool_n_threads(tp);
    c.work = work;
    int bad = 0;
    for (int run = 0; run < n_runs; run++) {
        int n = run & 1 ? n_large : n_small;
        for (int i = 0; i < MAX_TASKS; i++) atomic_store(&c.count[i], 0);
        threadpool_run(tp, n, task, &c);
        // on return: no task still running, each of [0, n) ran once, none beyond n
        int ok = atomic_load(&c.running) == 0 && atomic_load(&c.thread_bad) == 0;
        for (int i = 0; i < MAX_TASKS; i++) ok &= atomic_load(&c.count[i]) == (i < n);
        if (!ok && bad++ < 3)
            fprintf(stderr, "  run %d (%d tasks): running %d, task 0..%d counts %d %d ... %d\n", run, n,
                    atomic_load(&c.running), n - 1, atomic_load(&c.count[0]), atomic_load(&c.count[1]),
                    atomic_load(&c.count[n - 1]));
    }
    threadpool_free(tp);
    return bad;
}

TEST(sums_each_task_once) {
    struct threadpool *tp = threadpool_create(4);
    CHECK(tp != NULL);
    CHECK_EQ_INT(threadpool_n_threads(tp), 4);
    static struct ctx c;
    c.n_threads = 4;
    for (int n = 1; n <= MAX_TASKS; n += 7) {
        for (int i = 0; i < MAX_TASKS; i++) atomic_store(&c.count[i], 0);
        threadpool_run(tp, n, task, &c);
        int ran = 0, extra = 0;
        for (int i = 0; i < MAX_TASKS; i++) (i < n ? (ran += atomic_load(&c.count[i]) == 1) : (extra += atomic_load(&c.count[i])));
        CHECK_EQ_INT(ran, n);
        CHECK_EQ_INT(extra, 0);
    }
    threadpool_run(tp, 0, task, &c);  // no tasks: returns at once
    CHECK_EQ_INT(atomic_load(&c.thread_bad), 0);
    threadpool_free(tp);
}

TEST(single_thread_pool_runs_inline) {
    struct threadpool *tp = threadpool_create(1);
    CHECK(tp != NULL);
    static struct ctx c;
    c.n_threads = 1;
    threadpool_run(tp, 5, task, &c);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(atomic_load(&c.count[i]), 1);
    CHECK_EQ_INT(atomic_load(&c.thread_bad), 0);
    threadpool_free(tp);
}

// Oversubscribed: 12 workers on however few cores. A worker preempted between claiming an
// index and reading the run's size must not run a task of a later run, nor let that run
// return before all its tasks are done (a stale claim of index 2 of a 2-task run would be
// a real index of the 40-task run two generations later).
TEST(oversubscribed_short_and_long_runs) {
    CHECK_EQ_INT(stress(12, 40000, 2, 40, 0), 0);
    CHECK_EQ_INT(stress(12, 4000, 3, 48, 200), 0);
    CHECK_EQ_INT(stress(3, 20000, 2, 9, 0), 0);
}

int main(void) {
    RUN(sums_each_task_once);
    RUN(single_thread_pool_runs_inline);
    RUN(oversubscribed_short_and_long_runs);
    return test_summary("threadpool");
}
