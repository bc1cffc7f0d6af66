// threadpool.c — workers take task indices from an atomic counter; a generation number
// announces each run. Waiting is spin-then-sleep so short, frequent runs stay cheap.
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000

struct threadpool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int generation;  // bumped for each run
    atomic_int stop;
    // the current run
    threadpool_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next_task;
    atomic_int n_active;    // workers still inside the current run
};

struct worker_arg { struct threadpool *tp; int id; };

static void do_tasks(struct threadpool *tp, int thread) {
    for (;;) {
        int i = atomic_fetch_add(&tp->next_task, 1);
        if (i >= tp->n_tasks) break;
        tp->fn(tp->ctx, i, thread);
    }
}

static void *worker_main(void *p) {
    struct worker_arg a = *(struct worker_arg *)p;
    free(p);
    struct threadpool *tp = a.tp;
    int seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load(&tp->generation) == seen && !atomic_load(&tp->stop)) {
            if (++spins < SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&tp->mu);
            while (atomic_load(&tp->generation) == seen && !atomic_load(&tp->stop))
                pthread_cond_wait(&tp->cv, &tp->mu);
            pthread_mutex_unlock(&tp->mu);
        }
        if (atomic_load(&tp->stop)) return NULL;
        seen = atomic_load(&tp->generation);
        do_tasks(tp, a.id);
        atomic_fetch_sub(&tp->n_active, 1);
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
    tp->fn = fn;
    tp->ctx = ctx;
    tp->n_tasks = n_tasks;
    atomic_store(&tp->next_task, 0);
    atomic_store(&tp->n_active, tp->n_threads - 1);
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add(&tp->generation, 1);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    do_tasks(tp, 0);
    // a worker descheduled by a busy machine must not cost us a whole time slice
    for (int spins = 0; atomic_load(&tp->n_active) > 0; spins++) {
        if (spins < 2000) cpu_relax();
        else sched_yield();
    }
}
