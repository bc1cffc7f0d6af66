// threadpool.h — a fixed pool of worker threads for data-parallel loops (owns: the
// workers; not: the work). threadpool_run(tp, n, fn, ctx) calls fn(ctx, i, thread) for
// every i in [0, n) across the workers and the calling thread, and returns when all are
// done. Workers spin briefly between runs (decode steps are ~100 µs apart) then sleep.
// Invariant: one run at a time per pool (the engine thread owns it).
#ifndef OCTET_THREADPOOL_H
#define OCTET_THREADPOOL_H

struct threadpool;

typedef void (*threadpool_fn)(void *ctx, int task, int thread);

// n_threads counts the caller; 0 = number of online CPUs. NULL on failure.
struct threadpool *threadpool_create(int n_threads);
void threadpool_free(struct threadpool *tp);
int threadpool_n_threads(const struct threadpool *tp);
void threadpool_run(struct threadpool *tp, int n_tasks, threadpool_fn fn, void *ctx);

#endif
