// cuda_backend.cu — the CUDA backend's table: device memory, BF16 weights (converted at
// upload), batch metadata upload, GEMMs through cuBLASLt (handle and workspace owned
// here, plans cached per shape; decode-sized products, n <= 8, on the skinny GEMM of
// cuda_gemv.cuh), the logits (all of them, or each row's greedy id: cuda_greedy.cuh), and the
// elementwise ops (get_rows, rmsnorm, rope, silu_mul, add, gather_rows; kernels in
// cuda_elementwise.cuh) and the fused projections (matmul_qkv, matmul_add, matmul_swiglu: one launch
// for decode steps). Activations are BF16; math inside kernels is f32 (RoPE angles in f64, as the
// CPU computes them, so long positions agree). Owns struct cuda_tuning's defaults.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_common.cuh"
#include "cuda_gemm_inv.cuh"
#include "cuda_gemv.cuh"
#include "cuda_greedy.cuh"

bool cuda_fail(struct cuda_backend *c, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return false;
    if (!c->error) {
        c->error = OCT_EIO;
        snprintf(c->msg, sizeof c->msg, "%s: %s", what, cudaGetErrorString(e));
    }
    return true;
}

static struct cuda_backend *cb_of(struct backend *b) { return (struct cuda_backend *)b; }

// ---------------------------------------------------------------- memory

static void *cu_alloc(struct backend *b, size_t bytes) {
    struct cuda_backend *c = cb_of(b);
    void *p = nullptr;
    if (cuda_fail(c, cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc")) return nullptr;
    if (cuda_fail(c, cudaMemsetAsync(p, 0, bytes, c->stream), "cudaMemset")) { cudaFree(p); return nullptr; }
    return p;
}
static void cu_free(struct backend *b, void *p) { cudaFree(p); }
static void cu_upload(struct backend *b, void *dst, const void *src, size_t n) {
    struct cuda_backend *c = cb_of(b);
    CUDA_OK(c, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream));
    CUDA_OK(c, cudaStreamSynchronize(c->stream));
}
static void cu_download(struct backend *b, void *dst, const void *src, size_t n) {
    struct cuda_backend *c = cb_of(b);
    CUDA_OK(c, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream));
    CUDA_OK(c, cudaStreamSynchronize(c->stream));
}
static void cu_download_f32(struct backend *b, float *dst, const void *src, size_t n) {
    struct cuda_backend *c = cb_of(b);
    if (n > c->stage_cap) {
        if (c->h_stage) cudaFreeHost(c->h_stage);
        c->h_stage = nullptr;
        c->stage_cap = 0;
        if (cuda_fail(c, cudaMallocHost((void **)&c->h_stage, n * sizeof(bf16)), "cudaMallocHost")) return;
        c->stage_cap = n;
    }
    CUDA_OK(c, cudaMemcpyAsync(c->h_stage, src, n * sizeof(bf16), cudaMemcpyDeviceToHost, c->stream));
    CUDA_OK(c, cudaStreamSynchronize(c->stream));
    for (size_t i = 0; i < n; i++) dst[i] = __bfloat162float(c->h_stage[i]);
}
static int cu_sync(struct backend *b) {
    struct cuda_backend *c = cb_of(b);
    cuda_fail(c, cudaStreamSynchronize(c->stream), "stream");
    if (c->error) return err_set(c->error, "%s", c->msg);
    return OCT_OK;
}

static int cu_weight_upload(struct backend *b, struct weight *w) {
    struct cuda_backend *c = cb_of(b);
    size_t n = (size_t)(w->rows * w->cols);
    bf16 *d = nullptr;
    if (cuda_fail(c, cudaMalloc((void **)&d, n * sizeof(bf16)), "cudaMalloc(weight)")) return err_set(OCT_ENOMEM, "cuda: %s", c->msg);
    if (w->dtype == DT_BF16) {  // already the device format: one copy
        if (cuda_fail(c, cudaMemcpy(d, w->data, n * sizeof(bf16), cudaMemcpyHostToDevice), "upload weight")) {
            cudaFree(d);
            return err_set(OCT_EIO, "cuda: %s", c->msg);
        }
        w->dev = d;
        return OCT_OK;
    }
    size_t chunk = 1 << 22;
    bf16 *h = (bf16 *)malloc(chunk * sizeof(bf16));
    if (!h) { cudaFree(d); return err_set(OCT_ENOMEM, "cuda: out of host memory converting a weight"); }
    const char *src = (const char *)w->data;
    bool bad = false;
    for (size_t o = 0; o < n && !bad; o += chunk) {
        size_t m = n - o < chunk ? n - o : chunk;
        for (size_t i = 0; i < m; i++) {
            float f;
            if (w->dtype == DT_F32) memcpy(&f, src + 4 * (o + i), 4);
            else {
                __half_raw hr;
                memcpy(&hr.x, src + 2 * (o + i), 2);
                f = __half2float(__half(hr));
            }
            h[i] = __float2bfloat16_rn(f);
        }
        bad = cuda_fail(c, cudaMemcpy(d + o, h, m * sizeof(bf16), cudaMemcpyHostToDevice), "upload weight");
    }
    free(h);
    if (bad) { cudaFree(d); return err_set(OCT_EIO, "cuda: %s", c->msg); }
    w->dev = d;
    return OCT_OK;
}
static void *cu_host_alloc(struct backend *b, size_t bytes) {
    void *p = nullptr;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) { cudaGetLastError(); return nullptr; }
    return p;
}
static void cu_host_free(struct backend *b, void *p) { if (p) cudaFreeHost(p); }
static void cu_weight_release(struct backend *b, struct weight *w) { if (w->dev) cudaFree(w->dev); w->dev = nullptr; }

// Step timing, compiled in by `make CUDA=1 STEP_TIMING=1` (instrumentation): where a replayed decode
// step's wall time goes — the graph on the GPU, the logits' copy to the host, and the GPU's idle time
// since the previous step's copy, split by host clocks into the time outside the backend (the
// caller's sampling and scheduling) and inside it before the graph launch (batch_begin's upload,
// the forward pass's walk); printed when the backend is destroyed.
static bool step_timing(void) {
#ifdef CUDA_STEP_TIMING
    return true;
#else
    return false;
#endif
}
static double host_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Decides how this step runs: eagerly, captured into a graph, or replayed from one.
static void graph_step_begin(struct cuda_backend *c, const struct batch *bt) {
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

// Which sequences' V the FP8 prefill transposes ahead of its kernel (cuda_prefill_vt.cuh): those
// with at least tune.fp8_vt_min_q query tokens (0 turns the pass off) and a context of at least
// tune.fp8_vt_min_ctx, each taking ceil(seq_len / 128) tiles. Writes the tile starts (n_seqs + 1)
// and returns the total. The pass costs a launch, which short prefills do not win back.
static int vt_plan(const struct cuda_backend *c, const struct batch *bt, int32_t *start) {
    const int min_q = c->tune.fp8_vt_min_q, min_ctx = c->tune.fp8_vt_min_ctx;
    int n = 0;
    for (int s = 0; s < bt->n_seqs; s++) {
        start[s] = n;
        const int nq = bt->query_start[s + 1] - bt->query_start[s];
        if (min_q > 0 && nq >= min_q && bt->seq_lens[s] >= min_ctx) n += (bt->seq_lens[s] + 127) / 128;
    }
    start[bt->n_seqs] = n;
    return n;
}

// Packs the batch's arrays into one pinned buffer and one copy; derives tok_seq and vt_start.
static int cu_batch_begin(struct backend *b, const struct batch *bt) {
    struct cuda_backend *c = cb_of(b);
    size_t nt = bt->n_tokens, ns = bt->n_seqs, nb = (size_t)ns * bt->max_blocks_per_seq;
    size_t need = nt * 4 + (ns + 1) + ns + nb + bt->n_logits + (ns + 1);
    if (need > c->meta_cap) {
        cudaStreamSynchronize(c->stream);  // (a step in flight may still read them)
        if (c->h_meta) cudaFreeHost(c->h_meta);
        if (c->d_meta) cudaFree(c->d_meta);
        c->h_meta = c->d_meta = nullptr;
        c->meta_cap = 0;
        size_t cap = need * 2;
        if (cuda_fail(c, cudaMallocHost((void **)&c->h_meta, 2 * cap * 4), "cudaMallocHost") ||  // (two halves)
            cuda_fail(c, cudaMalloc((void **)&c->d_meta, cap * 4), "cudaMalloc"))
            return err_set(OCT_ENOMEM, "cuda: %s", c->msg);
        c->meta_cap = cap;
        c->meta_gen++;
    }
    if (step_timing()) c->h_begin = host_now();
    // Two staging halves, one a step: a half is rewritten once the copy from it two steps ago is
    // done, so a step can be queued while the one before it runs (asynchronous scheduling).
    for (int k = 0; k < 2 && !c->meta_ev[1]; k++)
        if (cuda_fail(c, cudaEventCreateWithFlags(&c->meta_ev[k], cudaEventDisableTiming), "cudaEventCreate")) return err_set(c->error, "%s", c->msg);
    c->meta_half ^= 1;
    if (cuda_fail(c, cudaEventSynchronize(c->meta_ev[c->meta_half]), "stream")) return err_set(c->error, "%s", c->msg);
    int32_t *h = c->h_meta + (size_t)c->meta_half * c->meta_cap, *d = c->d_meta;
    struct cuda_batch *m = &c->cb;
    size_t o = 0;
#define PUT(field, src, count) do { m->field = d + o; if (count) memcpy(h + o, (src), (count) * 4); o += (count); } while (0)
    PUT(tok, bt->token_ids, nt);
    PUT(pos, bt->positions, nt);
    PUT(slot, bt->slot_mapping, nt);
    PUT(qstart, bt->query_start, ns + 1);
    PUT(seq_lens, bt->seq_lens, ns);
    PUT(btab, bt->block_tables, nb);
    PUT(rows, bt->logits_rows, (size_t)bt->n_logits);
#undef PUT
    m->tok_seq = d + o;
    m->max_ctx = 0;
    m->max_q = 0;
    for (size_t s = 0; s < ns; s++) {
        for (int t = bt->query_start[s]; t < bt->query_start[s + 1]; t++) h[o + t] = (int32_t)s;
        if (bt->seq_lens[s] > m->max_ctx) m->max_ctx = bt->seq_lens[s];
        int nq = bt->query_start[s + 1] - bt->query_start[s];
        if (nq > m->max_q) m->max_q = nq;
    }
    o += nt;
    m->vt_start = d + o;
    m->vt_tiles = vt_plan(c, bt, h + o);
    o += ns + 1;
    m->n_tokens = (int)nt;
    m->n_seqs = (int)ns;
    m->n_logits = bt->n_logits;
    m->max_blocks_per_seq = bt->max_blocks_per_seq;
    if (step_timing() && c->tev[4]) cudaEventRecord(c->tev[4], c->stream);
    if (cuda_fail(c, cudaMemcpyAsync(d, h, o * 4, cudaMemcpyHostToDevice, c->stream), "upload batch") ||
        cuda_fail(c, cudaEventRecord(c->meta_ev[c->meta_half], c->stream), "cudaEventRecord"))
        return err_set(c->error, "%s", c->msg);
    graph_step_begin(c, bt);
    return OCT_OK;
}

// ---------------------------------------------------------------- elementwise kernels

#include "cuda_elementwise.cuh"

static unsigned blocks_for(long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

static void cu_get_rows(struct backend *b, void *out, const struct weight *table, const struct batch *bt) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !bt->n_tokens) return;
    k_get_rows<<<bt->n_tokens, 256, 0, c->stream>>>((bf16 *)out, (const bf16 *)table->dev, c->cb.tok, c->d_ids, (int)table->cols);
    CUDA_LAUNCHED(c, "get_rows");
}

static void cu_rmsnorm(struct backend *b, void *out, const void *x, const struct weight *w, int n, float eps) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    // whole warps, RMS_VEC runs a thread: 256 threads at dim 4096; 1024 from dim 16384 (past it, the strided loop)
    k_rmsnorm<<<n, rms_threads(w->cols), 0, c->stream>>>((bf16 *)out, (const bf16 *)x, (const bf16 *)w->dev, (int)w->cols, eps);
    CUDA_LAUNCHED(c, "rmsnorm");
}

const double *cuda_rope_freqs(struct cuda_backend *c, const struct rope_table *rt) {
    if (c->rope_host != rt) {  // one table per model: upload once
        if (!c->d_inv_freq && cuda_fail(c, cudaMalloc((void **)&c->d_inv_freq, ROPE_MAX_PAIRS * sizeof(double)), "cudaMalloc")) return nullptr;
        if (cuda_fail(c, cudaMemcpyAsync(c->d_inv_freq, rt->inv_freq, rt->n_rot / 2 * sizeof(double), cudaMemcpyHostToDevice, c->stream),
                      "rope table"))
            return nullptr;
        c->rope_host = rt;
    }
    return c->d_inv_freq;
}

static void cu_rope(struct backend *b, void *x, int n_heads, int head_dim, const struct rope_table *rt, const struct batch *bt) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !bt->n_tokens) return;
    int half = rt->n_rot / 2;
    const double *freqs = cuda_rope_freqs(c, rt);
    if (!freqs) return;
    long total = (long)bt->n_tokens * n_heads * half;
    k_rope<<<blocks_for(total, 256), 256, 0, c->stream>>>((bf16 *)x, c->cb.pos, freqs, bt->n_tokens, n_heads, head_dim,
                                                          half, rt->neox, rt->attn_factor);
    CUDA_LAUNCHED(c, "rope");
}

static void cu_silu_mul(struct backend *b, void *out, const void *g, const void *u, int64_t n) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    k_silu_mul<<<blocks_for(n, 256), 256, 0, c->stream>>>((bf16 *)out, (const bf16 *)g, (const bf16 *)u, n);
    CUDA_LAUNCHED(c, "silu_mul");
}

static void cu_add(struct backend *b, void *x, const void *y, int64_t n) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    k_add<<<blocks_for(n, 256), 256, 0, c->stream>>>((bf16 *)x, (const bf16 *)y, n);
    CUDA_LAUNCHED(c, "add");
}

static void cu_gather_rows(struct backend *b, void *out, const void *x, int dim, const struct batch *bt) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !bt->n_logits) return;
    k_gather<<<bt->n_logits, 256, 0, c->stream>>>((bf16 *)out, (const bf16 *)x, c->cb.rows, dim);
    CUDA_LAUNCHED(c, "gather_rows");
}

// ---------------------------------------------------------------- GEMM (cuBLASLt)

static void plan_release(struct gemm_plan *p) {
    if (!p->valid) return;
    cublasLtMatmulDescDestroy(p->op); cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb); cublasLtMatrixLayoutDestroy(p->ld);
    p->valid = false;
}

static struct gemm_plan *plan_for(struct cuda_backend *c, int64_t rows, int64_t cols, int n, cudaDataType_t out_type) {
    for (int i = 0; i < c->n_plans; i++)
        if (c->plans[i].rows == rows && c->plans[i].cols == cols && c->plans[i].n == n && c->plans[i].out_type == out_type) return &c->plans[i];
    struct gemm_plan *p = &c->plans[c->n_plans < N_PLANS ? c->n_plans++ : (c->n_plans - 1)];
    plan_release(p);
    memset(p, 0, sizeof *p);
    p->rows = rows; p->cols = cols; p->n = n; p->out_type = out_type;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    // D[rows x n] (col-major) = W^T-as-stored · x: W is row-major [rows][cols] = col-major [cols x rows]
    bool ok = cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, cols, rows, cols) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, cols, n, cols) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p->ld, out_type, rows, n, rows) == CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t res;
    int n_res = 0;
    ok = ok && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c->workspace_bytes,
                                              sizeof c->workspace_bytes) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->la, p->lb, p->ld, p->ld, pref, 1, &res, &n_res) == CUBLAS_STATUS_SUCCESS &&
         n_res > 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (!ok) {
        if (!c->error) { c->error = OCT_EIO; snprintf(c->msg, sizeof c->msg, "cuBLASLt: no algorithm for [%lld x %lld] x %d", (long long)rows, (long long)cols, n); }
        c->n_plans--;
        return nullptr;
    }
    p->algo = res.algo;
    p->valid = true;
    return p;
}

static void gemm(struct cuda_backend *c, void *out, cudaDataType_t out_type, const void *x, const struct weight *w, int n) {
    if (CUDA_SKIP(c) || n == 0) return;
    if (cuda_identity_mode(c)) {  // every n on the batch-invariant GEMM
        bool done = out_type == CUDA_R_32F
                        ? gemm_inv_launch(c->stream, (float *)out, (const bf16 *)x, (const bf16 *)w->dev, w->rows, w->cols, n)
                        : gemm_inv_launch(c->stream, (bf16 *)out, (const bf16 *)x, (const bf16 *)w->dev, w->rows, w->cols, n);
        if (done) { CUDA_LAUNCHED(c, "gemm (batch-invariant)"); return; }
        c->error = OCT_EUNSUP;
        snprintf(c->msg, sizeof c->msg, "--batch-invariant: the invariant GEMM cannot take a [%lld x %lld] weight (its columns must "
                 "be a multiple of 8)", (long long)w->rows, (long long)w->cols);
        return;
    }
    // skinny products (n <= 8) on the skinny GEMM (cuda_gemv.cuh), the rest on cuBLASLt
    const bool done = out_type == CUDA_R_32F
                          ? gemv_launch(c->stream, (float *)out, (const bf16 *)x, (const bf16 *)w->dev, w->rows, w->cols, n)
                          : gemv_launch(c->stream, (bf16 *)out, (const bf16 *)x, (const bf16 *)w->dev, w->rows, w->cols, n);
    if (done) { CUDA_LAUNCHED(c, "gemv"); return; }
    struct gemm_plan *p = plan_for(c, w->rows, w->cols, n, out_type);
    if (!p) return;
    float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st = cublasLtMatmul(c->lt, p->op, &alpha, w->dev, p->la, x, p->lb, &beta, out, p->ld, out, p->ld,
                                       &p->algo, c->workspace, c->workspace_bytes, c->stream);
    if (st != CUBLAS_STATUS_SUCCESS && !c->error) {
        c->error = OCT_EIO;
        snprintf(c->msg, sizeof c->msg, "cublasLtMatmul [%lld x %lld] x %d failed (%d)", (long long)w->rows, (long long)w->cols, n, (int)st);
    }
}

static void cu_matmul(struct backend *b, void *out, const void *x, const struct weight *w, int n) {
    gemm(cb_of(b), out, CUDA_R_16BF, x, w, n);
}

// ---------------------------------------------------------------- fused projections
// Decode steps (n <= 8) run one skinny-GEMM launch with the add or SwiGLU in its epilogue; other
// steps, the batch-invariant mode and shapes the skinny GEMM does not take compose the unfused ops.
static bool fused_fast(struct cuda_backend *c, int n) { return n <= 8 && !cuda_identity_mode(c); }

// The rmsnorm before Q|K|V and before SwiGLU runs inside their skinny GEMM (gemv_norm, the same bf16
// values as k_rmsnorm's) when the row fits.
static bool fused_norm(struct cuda_backend *c, const void *x, const struct weight *norm, int64_t cols, int n) {
    return fused_fast(c, n) && norm->cols == cols && gemv_norm_fits((const bf16 *)x, (const bf16 *)norm->dev, cols, n);
}

// Rows a warp of the fused rmsnorm + Q|K|V launch: two for up to 4 rows of x (the 8B's launch: 384
// CTAs of 60-80 registers in one wave, not 768 of 54 over 528 slots).
static int qkv_rows_a_warp(int n) { return n <= 4 ? 2 : 1; }

// The fused rmsnorm + Q|K|V launch; false when the shapes do not fit it (nothing launched).
static bool qkv_norm_launch(struct cuda_backend *c, void *q, void *k, void *v, const void *x, const struct weight *norm, float eps,
                            const struct weight *wq, const struct weight *wk, const struct weight *wv, int n, const gemv_rope *rp) {
    if (wk->cols != wq->cols || wv->cols != wq->cols || !fused_norm(c, x, norm, wq->cols, n)) return false;
    bf16 *const outs[3] = {(bf16 *)q, (bf16 *)k, (bf16 *)v};
    const bf16 *const ws[3] = {(const bf16 *)wq->dev, (const bf16 *)wk->dev, (const bf16 *)wv->dev};
    const int64_t rows[3] = {wq->rows, wk->rows, wv->rows};
    const gemv_norm nrm = {(const bf16 *)norm->dev, eps, rms_threads(wq->cols)};
    const bf16 *xb = (const bf16 *)x;
    const bool two = qkv_rows_a_warp(n) == 2;  // (rp: RoPE and the cache write too)
    if (rp)
        return two ? gemv_qkv_launch<true, 2, true>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm, *rp)
                   : gemv_qkv_launch<true, 1, true>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm, *rp);
    return two ? gemv_qkv_launch<true, 2>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm)
               : gemv_qkv_launch<true>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm);
}

static void cu_matmul_qkv(struct backend *b, void *q, void *k, void *v, void *xn, const void *x, const struct weight *norm, float eps,
                          const struct weight *wq, const struct weight *wk, const struct weight *wv, int n) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    if (qkv_norm_launch(c, q, k, v, x, norm, eps, wq, wk, wv, n, nullptr)) {
        CUDA_LAUNCHED(c, "gemv rmsnorm + Q|K|V");
        return;
    }
    cu_rmsnorm(b, xn, x, norm, n, eps);
    x = xn;
    bf16 *const outs[3] = {(bf16 *)q, (bf16 *)k, (bf16 *)v};
    const bf16 *const ws[3] = {(const bf16 *)wq->dev, (const bf16 *)wk->dev, (const bf16 *)wv->dev};
    const int64_t rows[3] = {wq->rows, wk->rows, wv->rows};
    const bool same_cols = wk->cols == wq->cols && wv->cols == wq->cols;
    if (fused_fast(c, n) && same_cols && gemv_qkv_launch<false>(c->stream, outs, (const bf16 *)x, ws, rows, wq->cols, n)) {
        CUDA_LAUNCHED(c, "gemv Q|K|V");
        return;
    }
    cu_matmul(b, q, x, wq, n);
    cu_matmul(b, k, x, wk, n);
    cu_matmul(b, v, x, wv, n);
}

// matmul_qkv, then RoPE and the cache write in the same launch (gemv_rope, cuda_gemv.cuh); false
// where it does not take the step (the forward pass composes the ops).
static bool cu_matmul_qkv_rope(struct backend *b, void *q, void *k, void *v, void *xn, const void *x, const struct weight *norm,
                               float eps, const struct weight *wq, const struct weight *wk, const struct weight *wv, int n_heads,
                               const struct rope_table *rt, struct kv_layer *l, const struct batch *bt) {
    struct cuda_backend *c = cb_of(b);
    const int n = bt->n_tokens;
    (void)xn;
    if (CUDA_SKIP(c) || !n || wq->rows != (int64_t)n_heads * l->head_dim || !fused_norm(c, x, norm, wq->cols, n)) return false;
    const float *sc = cuda_layer_scales(c, l), *ko = cuda_layer_offsets(c, l);
    const double *freqs = cuda_rope_freqs(c, rt);
    if (!sc || !freqs || (l->k_offset && !ko)) return false;
    gemv_rope rp;
    rp.pos = c->cb.pos;
    rp.slot = c->cb.slot;
    rp.inv_freq = freqs;
    rp.kc = l->k;
    rp.vc = l->v;
    rp.ks = sc;
    rp.vs = sc + KV_MAX_HEADS;
    rp.ko = ko;
    rp.hd = l->head_dim;
    rp.half = rt->n_rot / 2;
    rp.neox = rt->neox;
    rp.n_kv = l->n_kv_heads;
    rp.bs = l->kv_block_tokens;
    rp.dt = (int)l->dtype;
    rp.attn_factor = rt->attn_factor;
    if (!qkv_norm_launch(c, q, k, v, x, norm, eps, wq, wk, wv, n, &rp)) return false;
    CUDA_LAUNCHED(c, "gemv rmsnorm + Q|K|V + RoPE + kv_write");
    return true;
}

static void cu_matmul_add(struct backend *b, void *x, void *scratch, const void *in, const struct weight *w, int n) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    if (fused_fast(c, n) && gemv_fused_launch<GEMV_ADD>(c->stream, (bf16 *)x, (const bf16 *)in, (const bf16 *)w->dev, nullptr,
                                                        w->rows, w->cols, n)) {
        CUDA_LAUNCHED(c, "gemv + residual add");
        return;
    }
    cu_matmul(b, scratch, in, w, n);
    cu_add(b, x, scratch, (int64_t)n * w->rows);
}

static void cu_matmul_swiglu(struct backend *b, void *gate, void *up, void *xn, const void *x, const struct weight *norm, float eps,
                             const struct weight *wg, const struct weight *wu, int n) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    const bool same = wg->rows == wu->rows && wg->cols == wu->cols;
    // The rmsnorm scaled onto the sums (cuda_gemv.cuh DEFER; no shared memory, so every n <= 8), or,
    // where that does not fit, normalised in the GEMM's prologue.
    if (same && fused_fast(c, n) && norm->cols == wg->cols &&
        (uintptr_t)norm->dev % 16 == 0) {  // (the launch checks the rest)
        const gemv_norm nrm = {(const bf16 *)norm->dev, eps, 0};
        if (gemv_fused_launch<GEMV_SWIGLU, false, true>(c->stream, (bf16 *)gate, (const bf16 *)x, (const bf16 *)wg->dev,
                                                        (const bf16 *)wu->dev, wg->rows, wg->cols, n, gemv_segs(), 0, nrm)) {
            CUDA_LAUNCHED(c, "gemv SwiGLU (deferred rmsnorm)");
            return;
        }
    }
    if (same && fused_norm(c, x, norm, wg->cols, n)) {
        const gemv_norm nrm = {(const bf16 *)norm->dev, eps, rms_threads(wg->cols)};
        if (gemv_fused_launch<GEMV_SWIGLU, true>(c->stream, (bf16 *)gate, (const bf16 *)x, (const bf16 *)wg->dev, (const bf16 *)wu->dev,
                                                 wg->rows, wg->cols, n, gemv_segs(), 0, nrm)) {
            CUDA_LAUNCHED(c, "gemv rmsnorm + SwiGLU");
            return;
        }
    }
    cu_rmsnorm(b, xn, x, norm, n, eps);
    x = xn;
    if (fused_fast(c, n) && same &&
        gemv_fused_launch<GEMV_SWIGLU>(c->stream, (bf16 *)gate, (const bf16 *)x, (const bf16 *)wg->dev, (const bf16 *)wu->dev,
                                       wg->rows, wg->cols, n)) {
        CUDA_LAUNCHED(c, "gemv SwiGLU");
        return;
    }
    cu_matmul(b, gate, x, wg, n);
    cu_matmul(b, up, x, wu, n);
    cu_silu_mul(b, gate, gate, up, (int64_t)n * wg->rows);
}

static void step_timing_done(struct cuda_backend *c) {  // after the step's copy completed
    float g = 0, cp = 0, idle = 0;
    if (cudaEventElapsedTime(&g, c->tev[0], c->tev[1]) != cudaSuccess || cudaEventElapsedTime(&cp, c->tev[1], c->tev[2]) != cudaSuccess)
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

// The step's logits into d_logits, f32 [n][w.rows]: the captured graph replayed, or the GEMM
// queued (and a capture ended and its graph run). *timed: step timing's events were recorded.
static bool logits_issue(struct cuda_backend *c, const void *x, const struct weight *w, int n, bool *timed) {
    size_t need = (size_t)n * w->rows;
    *timed = false;
    if (c->replaying) {
        c->replaying = false;
        if (step_timing() && !c->tev[0])
            for (int i = 0; i < 5; i++) cudaEventCreate(&c->tev[i]);
        *timed = step_timing() && c->tev[0] && cudaEventRecord(c->tev[0], c->stream) == cudaSuccess;
        double h0 = *timed ? host_now() : 0;
        if (*timed && c->h_ret > 0) {
            c->h_outside += c->h_begin - c->h_ret;
            c->h_inside += h0 - c->h_begin;
            c->h_n++;
        }
        cuda_fail(c, cudaGraphLaunch(c->cur->exec, c->stream), "graph launch");
        if (*timed) c->h_launch += host_now() - h0;
        if (*timed) cudaEventRecord(c->tev[1], c->stream);
    } else {
        if (!c->capturing && (c->error || !cuda_reserve(c, &c->d_logits, &c->logits_cap, need))) return false;
        if (!c->error) gemm(c, c->d_logits, CUDA_R_32F, x, w, n);  // f32 logits: no bf16 rounding of near-ties
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

static void cu_logits(struct backend *b, float *host_out, const void *x, const struct weight *w, int n) {
    struct cuda_backend *c = cb_of(b);
    size_t need = (size_t)n * w->rows;
    bool timed;
    if (!logits_issue(c, x, w, n, &timed)) return;
    CUDA_OK(c, cudaMemcpyAsync(host_out, c->d_logits, need * sizeof(float), cudaMemcpyDeviceToHost, c->stream));
    if (timed) cudaEventRecord(c->tev[2], c->stream);
    const double hs = timed ? host_now() : 0;
    if (CUDA_OK(c, cudaStreamSynchronize(c->stream)) && timed) step_timing_done(c);
    if (step_timing()) c->h_ret = timed ? host_now() : 0;
    if (timed) c->h_sync += c->h_ret - hs;
}

static void cu_logits_argmax(struct backend *b, int32_t *host_ids, const void *x, const struct weight *w, int n) {
    struct cuda_backend *c = cb_of(b);
    bool timed;
    if (n > BACKEND_FEED_ROWS && !c->error) {
        c->error = OCT_EINVAL;
        snprintf(c->msg, sizeof c->msg, "greedy ids for %d rows (at most %d)", n, BACKEND_FEED_ROWS);
    }
    if (logits_issue(c, x, w, n, &timed)) greedy_ids_launch(c, host_ids, c->d_logits, (int)w->rows, n);
}

// Waits for the copy of the greedy ids into host_ids (not for steps queued after it).
static int cu_wait_ids(struct backend *b, const int32_t *host_ids) {
    struct cuda_backend *c = cb_of(b);
    for (int j = 1; j <= 2; j++) {  // the latest call first
        const int k = (c->ids_next + j) & 1;
        if (c->ids_host[k] == host_ids) {
            cuda_fail(c, cudaEventSynchronize(c->ids_ev[k]), "greedy ids");
            return c->error ? err_set(c->error, "%s", c->msg) : OCT_OK;
        }
    }
    return cu_sync(b);
}

// ---------------------------------------------------------------- table

static void cu_destroy(struct backend *b) {
    struct cuda_backend *c = cb_of(b);
    cudaStreamSynchronize(c->stream);
    if (c->t_n)
        fprintf(stderr, "cuda step timing: %d replayed decode steps: graph %.3f ms, logits copy %.3f ms, GPU idle before a step %.3f ms "
                "(of which from the metadata upload's start to the graph's %.3f ms) (means)\n",
                c->t_n, c->t_graph / c->t_n, c->t_copy / c->t_n, c->t_idle_n ? c->t_idle / c->t_idle_n : 0.0,
                c->t_idle_n ? c->t_upload / c->t_idle_n : 0.0);
    if (c->h_n)
        fprintf(stderr, "cuda step timing: host between steps: %.3f ms outside the backend (sampling, engine), %.3f ms in it before the "
                "graph launch (metadata upload, forward walk); in cudaGraphLaunch %.3f ms, waiting for the step %.3f ms (means of %d)\n",
                1e3 * c->h_outside / c->h_n, 1e3 * c->h_inside / c->h_n, 1e3 * c->h_launch / c->t_n, 1e3 * c->h_sync / c->t_n, c->h_n);
    for (int i = 0; i < 5; i++) if (c->tev[i]) cudaEventDestroy(c->tev[i]);
    for (int i = 0; i < c->n_plans; i++) plan_release(&c->plans[i]);
    c->n_plans = 0;
    for (int i = 0; i < c->n_graphs; i++) if (c->graphs[i].exec) cudaGraphExecDestroy(c->graphs[i].exec);
    if (c->lt) cublasLtDestroy(c->lt);
    cudaFree(c->workspace); cudaFree(c->d_meta); cudaFree(c->d_inv_freq); cudaFree(c->d_part); cudaFree(c->d_vt); cudaFree(c->d_logits);
    cudaFree(c->d_pseudo); cudaFree(c->d_arrive); cudaFree(c->d_ids); cudaFree(c->d_keys);
    for (int i = 0; i < 2; i++) {
        if (c->ids_ev[i]) cudaEventDestroy(c->ids_ev[i]);
        if (c->meta_ev[i]) cudaEventDestroy(c->meta_ev[i]);
    }
    if (c->h_meta) cudaFreeHost(c->h_meta);
    if (c->h_stage) cudaFreeHost(c->h_stage);
    cudaStreamDestroy(c->stream);
    free(c);
}

static size_t cu_kv_budget_default(struct backend *b, double util) {
    struct cuda_backend *c = cb_of(b);
    size_t free_b = 0, total = 0;
    if (cuda_fail(c, cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo")) return 0;
    double reserve = (1.0 - util) * (double)total + 512.0 * (1 << 20);  // + room for cuBLAS and scratch
    return (double)free_b > reserve ? (size_t)((double)free_b - reserve) : 0;
}

static const struct backend_ops cuda_ops = {
    .name = "cuda",
    .destroy = cu_destroy,
    .act_dtype = DT_BF16,
    // 64: the FP8 TMA prefill copies a box per block (≈ 250 cycles each, so 16-token blocks cost it a
    // quarter of its rate), and the decode kernels read a block as 16-token runs at the same speed
    .kv_block_tokens = 64,
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .download_f32 = cu_download_f32,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .sync = cu_sync,
    .weight_upload = cu_weight_upload,
    .weight_release = cu_weight_release,
    .batch_begin = cu_batch_begin,
    .get_rows = cu_get_rows,
    .rmsnorm = cu_rmsnorm,
    .matmul = cu_matmul,
    .rope = cu_rope,
    .kv_write = cuda_kv_write,
    .attention = cuda_attention,
    .silu_mul = cu_silu_mul,
    .add = cu_add,
    .gather_rows = cu_gather_rows,
    .matmul_qkv = cu_matmul_qkv,
    .matmul_add = cu_matmul_add,
    .matmul_swiglu = cu_matmul_swiglu,
    .rope_kv_write = cuda_rope_kv_write,
    .matmul_qkv_rope = cu_matmul_qkv_rope,
    .logits = cu_logits,
    .logits_argmax = cu_logits_argmax,
    .wait_ids = cu_wait_ids,
    .kv_budget_default = cu_kv_budget_default,
};

extern "C" bool backend_cuda_available(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

extern "C" struct backend *backend_cuda_create(int device_index) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= device_index) {
        err_set(OCT_EUNSUP, "cuda: no usable GPU (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "device index out of range");
        return nullptr;
    }
    struct cuda_backend *c = (struct cuda_backend *)calloc(1, sizeof *c);
    if (!c) { err_set(OCT_ENOMEM, "cuda: out of memory"); return nullptr; }
    c->base.ops = &cuda_ops;
    c->device = device_index;
    c->workspace_bytes = 32u << 20;
    cudaDeviceProp prop;
    bool bad = cuda_fail(c, cudaSetDevice(device_index), "cudaSetDevice") ||
               cuda_fail(c, cudaGetDeviceProperties(&prop, device_index), "cudaGetDeviceProperties") ||
               cuda_fail(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
               cuda_fail(c, cudaMalloc(&c->workspace, c->workspace_bytes), "cudaMalloc(workspace)") ||
               // (before any step: a captured get_rows keeps the pointer to the greedy picks)
               cuda_fail(c, cudaMalloc((void **)&c->d_ids, BACKEND_FEED_ROWS * sizeof(int32_t)), "cudaMalloc") ||
               cuda_fail(c, cudaMalloc((void **)&c->d_keys, BACKEND_FEED_ROWS * sizeof(unsigned long long)), "cudaMalloc") ||
               cuda_fail(c, cudaMemset(c->d_keys, 0, BACKEND_FEED_ROWS * sizeof(unsigned long long)), "cudaMemset") ||
               cuda_fail(c, cudaEventCreateWithFlags(&c->ids_ev[0], cudaEventDisableTiming), "cudaEventCreate") ||
               cuda_fail(c, cudaEventCreateWithFlags(&c->ids_ev[1], cudaEventDisableTiming), "cudaEventCreate");
    if (!bad && cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS) { bad = true; snprintf(c->msg, sizeof c->msg, "cublasLtCreate failed"); }
    if (bad) {
        err_set(OCT_EIO, "cuda: %s", c->msg);
        free(c);
        return nullptr;
    }
    c->n_sm = prop.multiProcessorCount;
    c->smem_optin = prop.sharedMemPerBlockOptin;
    c->graphs_on = true;
    c->tune = cuda_tuning_default();
    if (!cuda_attention_init(c)) {
        err_set(OCT_EIO, "cuda: %s", c->msg);
        cudaStreamDestroy(c->stream);
        free(c);
        return nullptr;
    }
    return &c->base;
}

extern "C" struct cuda_tuning cuda_tuning_default(void) {
    struct cuda_tuning t = {};
    t.fp8_vt_min_q = 2048;
    t.fp8_vt_min_ctx = 8192;
    t.decode_min_split_fp8 = 8;
    t.decode_min_split_bf16 = 0;
    t.attn_kernel = NULL;
    return t;
}
extern "C" void cuda_tuning_get(const struct backend *b, struct cuda_tuning *out) { *out = ((const struct cuda_backend *)b)->tune; }
extern "C" void cuda_tuning_set(struct backend *b, const struct cuda_tuning *t) { ((struct cuda_backend *)b)->tune = *t;
}
