// cuda_step.cu — the end of a CUDA step: CUDA graphs of decode steps (the first step of a shape runs
// eagerly, the second is captured, later ones replay it; none under --enforce-eager), the logits
// (all of them to the host, or each row's greedy id without waiting: cuda_greedy.cuh), and the step
// timing that `make CUDA=1 STEP_TIMING=1` compiles in.
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cuda_common.cuh"
#include "cuda_greedy.cuh"

// Decides how this step runs: eagerly, captured into a graph, or replayed from one.
void cuda_graph_step_begin(struct cuda_backend *c, const struct batch *bt) {
    c->capturing = c->replaying = c->fixed_plan = false;
    c->cur = nullptr;
    bool decode = c->cb.max_q == 1 && bt->n_tokens == bt->n_seqs && bt->n_logits == bt->n_seqs;
    if (!c->graphs_on || c->base.enforce_eager || !decode || c->error) return;
    c->fixed_plan = true;
    struct decode_graph *g = nullptr;
    for (int i = 0; i < c->n_graphs; i++)
        if (c->graphs[i].n_seqs == bt->n_seqs && c->graphs[i].max_blocks == bt->max_blocks_per_seq) g = &c->graphs[i];
    if (!g) {
        if (c->n_graphs == 64) return;  // enough shapes: the rest run eagerly
        g = &c->graphs[c->n_graphs++];
        g->n_seqs = bt->n_seqs;
        g->max_blocks = bt->max_blocks_per_seq;
        g->state = 0;
        g->meta_gen = c->meta_gen;
        g->exec = nullptr;
    }
    if (g->meta_gen != c->meta_gen) {  // the metadata moved: re-warm and re-capture
        if (g->exec) cudaGraphExecDestroy(g->exec);
        g->exec = nullptr;
        g->state = 0;
        g->meta_gen = c->meta_gen;
    }
    c->cur = g;
    if (g->state == 0) { g->state = 1; return; }  // eager warm-up: allocations and uploads happen now
    if (g->state == 2) { c->replaying = true; return; }
    if (!cuda_fail(c, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "begin graph capture"))
        c->capturing = true;
}

#ifdef CUDA_STEP_TIMING
// Step timing (instrumentation): where a replayed decode step's wall time goes — the graph on the
// GPU, the logits' copy to the host, and the GPU's idle time since the previous step's copy, split by
// host clocks into the time outside the backend (the caller's sampling and scheduling) and inside it
// before the graph launch (batch_begin's upload, the forward pass's walk); printed when the backend
// is destroyed (cuda_step_timing_report).
double cuda_host_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void step_timing_done(struct cuda_backend *c) {  // after the step's copy completed
    float g = 0, cp = 0, idle = 0;
    if (cudaEventElapsedTime(&g, c->tev[0], c->tev[1]) != cudaSuccess ||
        cudaEventElapsedTime(&cp, c->tev[1], c->tev[2]) != cudaSuccess)
        return;
    c->t_graph += g;
    c->t_copy += cp;
    c->t_n++;
    float up = 0;
    // (only after a replayed step: a gap across a prefill or a captured step is not a decode gap)
    if (c->t_n > 1 && c->h_ret > 0 && cudaEventElapsedTime(&idle, c->tev[3], c->tev[0]) == cudaSuccess) {
        c->t_idle += idle;
        c->t_idle_n++;
        if (cudaEventElapsedTime(&up, c->tev[4], c->tev[0]) == cudaSuccess) c->t_upload += up;
    }
    cudaEvent_t t = c->tev[3];  // this step's copy event is the next step's "previous"
    c->tev[3] = c->tev[2];
    c->tev[2] = t;
}

void cuda_step_timing_report(struct cuda_backend *c) {
    if (c->t_n)
        fprintf(
            stderr,
            "cuda step timing: %d replayed decode steps: graph %.3f ms, logits copy %.3f ms, GPU idle before a step "
            "%.3f ms (of which from the metadata upload's start to the graph's %.3f ms) (means)\n",
            c->t_n, c->t_graph / c->t_n, c->t_copy / c->t_n, c->t_idle_n ? c->t_idle / c->t_idle_n : 0.0,
            c->t_idle_n ? c->t_upload / c->t_idle_n : 0.0);
    if (c->h_n)
        fprintf(
            stderr,
            "cuda step timing: host between steps: %.3f ms outside the backend (sampling, engine), %.3f ms in it "
            "before the graph launch (metadata upload, forward walk); in cudaGraphLaunch %.3f ms, waiting for the step "
            "%.3f ms (means of %d)\n",
            1e3 * c->h_outside / c->h_n, 1e3 * c->h_inside / c->h_n, 1e3 * c->h_launch / c->t_n,
            1e3 * c->h_sync / c->t_n, c->h_n);
    for (int i = 0; i < 5; i++) if (c->tev[i]) cudaEventDestroy(c->tev[i]);
}
#endif

// The step's logits into d_logits, f32 [n][w.rows]: the captured graph replayed, or the GEMM
// queued (and a capture ended and its graph run). *timed: step timing's events were recorded.
static bool logits_issue(struct cuda_backend *c, const void *x, const struct weight *w, int n, bool *timed) {
    size_t need = (size_t)n * w->rows;
    *timed = false;
    if (c->replaying) {
        c->replaying = false;
#ifdef CUDA_STEP_TIMING
        if (!c->tev[0])
            for (int i = 0; i < 5; i++) cudaEventCreate(&c->tev[i]);
        *timed = c->tev[0] && cudaEventRecord(c->tev[0], c->stream) == cudaSuccess;
        const double h0 = *timed ? cuda_host_now() : 0;
        if (*timed && c->h_ret > 0) {
            c->h_outside += c->h_begin - c->h_ret;
            c->h_inside += h0 - c->h_begin;
            c->h_n++;
        }
#endif
        cuda_fail(c, cudaGraphLaunch(c->cur->exec, c->stream), "graph launch");
#ifdef CUDA_STEP_TIMING
        if (*timed) c->h_launch += cuda_host_now() - h0;
        if (*timed) cudaEventRecord(c->tev[1], c->stream);
#endif
    } else {
        if (!c->capturing && (c->error || !cuda_reserve(c, &c->d_logits, &c->logits_cap, need))) return false;
        if (!c->error) cuda_gemm(c, c->d_logits, CUDA_R_32F, x, w, n);  // f32 logits: no bf16 rounding of near-ties
    }
    if (c->capturing) {  // the step's ops are recorded: instantiate, then run it
        c->capturing = false;
        cudaGraph_t g = nullptr;
        cudaError_t e = cudaStreamEndCapture(c->stream, &g);
        if (e == cudaSuccess && !c->error) e = cudaGraphInstantiate(&c->cur->exec, g, 0);
        if (g) cudaGraphDestroy(g);
        if (e != cudaSuccess || c->error) {  // graphs off from now on; the error (if any) stays latched
            c->graphs_on = false;
            cudaGetLastError();
            if (!c->error) cuda_fail(c, e, "graph capture");
            return false;
        }
        c->cur->state = 2;
        cuda_fail(c, cudaGraphLaunch(c->cur->exec, c->stream), "graph launch");
    }
    return !c->error;
}

void cuda_logits(struct backend *b, float *host_out, const void *x, const struct weight *w, int n) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    size_t need = (size_t)n * w->rows;
    bool timed;
    if (!logits_issue(c, x, w, n, &timed)) return;
    CUDA_OK(c, cudaMemcpyAsync(host_out, c->d_logits, need * sizeof(float), cudaMemcpyDeviceToHost, c->stream));
#ifdef CUDA_STEP_TIMING
    if (timed) cudaEventRecord(c->tev[2], c->stream);
    const double hs = timed ? cuda_host_now() : 0;
    if (CUDA_OK(c, cudaStreamSynchronize(c->stream)) && timed) step_timing_done(c);
    c->h_ret = timed ? cuda_host_now() : 0;
    if (timed) c->h_sync += c->h_ret - hs;
#else
    CUDA_OK(c, cudaStreamSynchronize(c->stream));
#endif
}

void cuda_logits_argmax(struct backend *b, int32_t *host_ids, const void *x, const struct weight *w, int n) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    bool timed;
    if (n > BACKEND_FEED_ROWS && !c->error) {
        c->error = OCT_EINVAL;
        snprintf(c->msg, sizeof c->msg, "greedy ids for %d rows (at most %d)", n, BACKEND_FEED_ROWS);
    }
    if (logits_issue(c, x, w, n, &timed)) greedy_ids_launch(c, host_ids, c->d_logits, (int)w->rows, n);
}

// Waits for the copy of the greedy ids into host_ids (not for steps queued after it).
int cuda_wait_ids(struct backend *b, const int32_t *host_ids) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    for (int j = 1; j <= 2; j++) {  // the latest call first
        const int k = (c->ids_next + j) & 1;
        if (c->ids_host[k] == host_ids) {
            cuda_fail(c, cudaEventSynchronize(c->ids_ev[k]), "greedy ids");
            return c->error ? err_set(c->error, "%s", c->msg) : OCT_OK;
        }
    }
    return b->ops->sync(b);
}
