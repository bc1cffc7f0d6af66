// threadpool.c — workers claim task indices from one 64-bit atomic (run generation in
// the high half, next index in the low half), so a worker that wakes late can never run
// a task of a run that has already finished, and the caller never waits for a worker
// that claimed nothing: it runs whatever is left itself and waits only for tasks that
// are actually in progress. That keeps short runs cheap on an oversubscribed machine.
// Waiting is spin-then-sleep (decode steps are ~100 µs apart).
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000

struct run {
    threadpool_fn fn;
    void *ctx;
    atomic_int n_tasks;      // stored before the run is published; read by workers before they claim
    atomic_int done;
};

struct threadpool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic uint64_t next;   // (generation << 32) | next task index
    atomic_int stop;
    uint32_t gen;            // caller-side generation counter
    struct run runs[2];      // run g lives in runs[g & 1]; it is rewritten only at run g+2
};

struct worker_arg { struct threadpool *tp; int id; };

// Claims and runs tasks of generation gen until none are left or the run moved on.
// The run's size is read before the claim: a claim that succeeds proves that gen was current
// from that read to the claim (the generation only grows), so the index is one of run gen's
// tasks, and run gen cannot finish, nor runs[gen & 1] be rewritten, until this task counts
// itself done. Reading the size after the claim was wrong: a worker preempted between the two
// could read the size of run gen + 2 and run one of its tasks unclaimed, letting that run
// return while a task of it still ran.
static void do_tasks(struct threadpool *tp, uint32_t gen, int thread) {
    struct run *r = &tp->runs[gen & 1];
    for (;;) {
        uint64_t v = atomic_load(&tp->next);
        if ((uint32_t)(v >> 32) != gen) return;
        uint32_t idx = (uint32_t)v;
        if ((int)idx >= atomic_load(&r->n_tasks)) return;
        if (!atomic_compare_exchange_weak(&tp->next, &v, v + 1)) continue;
        r->fn(r->ctx, (int)idx, thread);
        atomic_fetch_add(&r->done, 1);
    }
}

static void *worker_main(void *p) {
    struct worker_arg a = *(struct worker_arg *)p;
    free(p);
    struct threadpool *tp = a.tp;
    uint32_t seen = 0;
    for (;;) {
        int spins = 0;
        while ((uint32_t)(atomic_load(&tp->next) >> 32) == seen && !atomic_load(&tp->stop)) {
            if (++spins < SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&tp->mu);
            while ((uint32_t)(atomic_load(&tp->next) >> 32) == seen && !atomic_load(&tp->stop))
                pthread_cond_wait(&tp->cv, &tp->mu);
            pthread_mutex_unlock(&tp->mu);
        }
        if (atomic_load(&tp->stop)) return NULL;
        seen = (uint32_t)(atomic_load(&tp->next) >> 32);
        do_tasks(tp, seen, a.id);
    }
}

struct threadpool *threadpool_create(int n_threads) {
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    struct threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return NULL;
    tp->n_threads = n_threads;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    tp->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!tp->threads) { free(tp); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *a = malloc(sizeof *a);
        if (!a) { tp->n_threads = i; break; }
        a->tp = tp; a->id = i;
        if (pthread_create(&tp->threads[i], NULL, worker_main, a) != 0) { free(a); tp->n_threads = i; break; }
    }
    return tp;
}

void threadpool_free(struct threadpool *tp) {
    if (!tp) return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, 1);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 1; i < tp->n_threads; i++) pthread_join(tp->threads[i], NULL);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    free(tp->threads);
    free(tp);
}

int threadpool_n_threads(const struct threadpool *tp) { return tp->n_threads; }

void threadpool_run(struct threadpool *tp, int n_tasks, threadpool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (n_tasks == 1 || tp->n_threads == 1) {
        for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
        return;
    }
    uint32_t gen = ++tp->gen;
    if (gen == 0) gen = ++tp->gen;  // 0 is the workers' initial "seen"
    struct run *r = &tp->runs[gen & 1];
    r->fn = fn;
    r->ctx = ctx;
    atomic_store(&r->n_tasks, n_tasks);
    atomic_store(&r->done, 0);
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->next, (uint64_t)gen << 32);  // publishes the run
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    do_tasks(tp, gen, 0);
    // only tasks a worker has claimed and not finished remain
    for (int spins = 0; atomic_load(&r->done) < n_tasks; spins++) {
        if (spins < 2000) cpu_relax();
        else sched_yield();
    }
}
