// cuda_gemm.cu — the CUDA backend's products: matmul (cuBLASLt, its plans cached per shape in the
// backend; decode-sized products, n <= 8, on the skinny GEMM of cuda_gemv.cuh; every product on
// the batch-invariant GEMM of cuda_gemm_inv.cuh under --batch-invariant) and the sublayer ops
// attn_in, proj_add and ffn_in, which fuse their parts into one skinny-GEMM launch for decode steps
// and otherwise compose them (backend.c) as the CPU does, with the same numbers either way.
#include <stdio.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_gemm_inv.cuh"
#include "cuda_gemv.cuh"

// ---------------------------------------------------------------- GEMM (cuBLASLt)

static void plan_release(struct gemm_plan *p) {
    if (!p->valid) return;
    cublasLtMatmulDescDestroy(p->op); cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb); cublasLtMatrixLayoutDestroy(p->ld);
    p->valid = false;
}

static struct gemm_plan *plan_for(struct cuda_backend *c, int64_t rows, int64_t cols, int n, cudaDataType_t out_type) {
    for (int i = 0; i < c->n_plans; i++)
        if (c->plans[i].rows == rows && c->plans[i].cols == cols && c->plans[i].n == n &&
            c->plans[i].out_type == out_type)
            return &c->plans[i];
    struct gemm_plan *p = &c->plans[c->n_plans < N_PLANS ? c->n_plans++ : (c->n_plans - 1)];
    plan_release(p);
    memset(p, 0, sizeof *p);
    p->rows = rows; p->cols = cols; p->n = n; p->out_type = out_type;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    // D[rows x n] (col-major) = W^T-as-stored · x: W is row-major [rows][cols] = col-major [cols x rows]
    bool ok =
        cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
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
         cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->la, p->lb, p->ld, p->ld, pref, 1, &res, &n_res) ==
             CUBLAS_STATUS_SUCCESS &&
         n_res > 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (!ok) {
        if (!c->error) {
            c->error = OCT_EIO;
            snprintf(c->msg, sizeof c->msg, "cuBLASLt: no algorithm for [%lld x %lld] x %d", (long long)rows,
                     (long long)cols, n);
        }
        c->n_plans--;
        return nullptr;
    }
    p->algo = res.algo;
    p->valid = true;
    return p;
}

void cuda_gemm(struct cuda_backend *c, void *out, cudaDataType_t out_type, const void *x, const struct weight *w,
               int n) {
    if (CUDA_SKIP(c) || n == 0) return;
    if (c->base.batch_invariant) {  // every n on the batch-invariant GEMM
        bool done =
            out_type == CUDA_R_32F
                ? gemm_inv_launch(c->stream, (float *)out, (const bf16 *)x, (const bf16 *)w->dev, w->rows, w->cols, n)
                : gemm_inv_launch(c->stream, (bf16 *)out, (const bf16 *)x, (const bf16 *)w->dev, w->rows, w->cols, n);
        if (done) { CUDA_LAUNCHED(c, "gemm (batch-invariant)"); return; }
        c->error = OCT_EUNSUP;
        snprintf(c->msg, sizeof c->msg,
                 "--batch-invariant: the invariant GEMM cannot take a [%lld x %lld] weight (its columns must "
                 "be a multiple of 8)",
                 (long long)w->rows, (long long)w->cols);
        return;
    }
    // skinny products (n <= 8) on the skinny GEMM (cuda_gemv.cuh), the rest on cuBLASLt
    const bool done =
        out_type == CUDA_R_32F
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
        snprintf(c->msg, sizeof c->msg, "cublasLtMatmul [%lld x %lld] x %d failed (%d)", (long long)w->rows,
                 (long long)w->cols, n, (int)st);
    }
}

void cuda_matmul(struct backend *b, void *out, const void *x, const struct weight *w, int n) {
    cuda_gemm((struct cuda_backend *)b, out, CUDA_R_16BF, x, w, n);
}

void cuda_gemm_release(struct cuda_backend *c) {
    for (int i = 0; i < c->n_plans; i++) plan_release(&c->plans[i]);
    c->n_plans = 0;
}

// ---------------------------------------------------------------- sublayer ops
// Decode steps (n <= 8) run one skinny-GEMM launch with the rmsnorm in its prologue and the add,
// SwiGLU or RoPE and the cache write in its epilogue; other steps, --batch-invariant and shapes the
// skinny GEMM does not take compose the ops (backend.c, cuda_rope_kv_write).
static bool fused_fast(const struct cuda_backend *c, int n) { return n <= 8 && !c->base.batch_invariant; }

// The rmsnorm before Q|K|V runs inside their skinny GEMM (gemv_norm, the same bf16 values as
// k_rmsnorm's) when the row fits.
static bool fused_norm(const struct cuda_backend *c, const void *x, const struct weight *norm, int64_t cols, int n) {
    return fused_fast(c, n) && norm->cols == cols && gemv_norm_fits((const bf16 *)x, (const bf16 *)norm->dev, cols, n);
}

// Rows a warp of the fused rmsnorm + Q|K|V launch: two for up to 4 rows of x (the 8B's launch then
// fills the GPU in one wave of CTAs).
static int qkv_rows_a_warp(int n) { return n <= 4 ? 2 : 1; }

// The fused rmsnorm + Q|K|V launch (with rp: RoPE and the cache write too); false when the shapes do
// not fit it (nothing launched).
static bool qkv_norm_launch(struct cuda_backend *c, const struct attn_in_args *a, int n, const gemv_rope *rp) {
    const struct weight *wq = a->wq, *wk = a->wk, *wv = a->wv;
    if (wk->cols != wq->cols || wv->cols != wq->cols || !fused_norm(c, a->x, a->norm, wq->cols, n)) return false;
    bf16 *const outs[3] = {(bf16 *)a->q, (bf16 *)a->k, (bf16 *)a->v};
    const bf16 *const ws[3] = {(const bf16 *)wq->dev, (const bf16 *)wk->dev, (const bf16 *)wv->dev};
    const int64_t rows[3] = {wq->rows, wk->rows, wv->rows};
    const gemv_norm nrm = {(const bf16 *)a->norm->dev, a->eps, rms_threads(wq->cols)};
    const bf16 *xb = (const bf16 *)a->x;
    const bool two = qkv_rows_a_warp(n) == 2;
    if (rp)
        return two ? gemv_qkv_launch<GEMV_QKV_ROPE, 2>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm, *rp)
                   : gemv_qkv_launch<GEMV_QKV_ROPE, 1>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm, *rp);
    return two ? gemv_qkv_launch<GEMV_QKV_NORM, 2>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm)
               : gemv_qkv_launch<GEMV_QKV_NORM, 1>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm);
}

// The whole of attn_in in the skinny GEMM's launch (GEMV_QKV_ROPE); false where it does not take the
// step (nothing launched, unless an upload failed and latched its error).
static bool qkv_rope_launch(struct cuda_backend *c, const struct attn_in_args *a, int n) {
    const struct kv_layer *l = a->layer;
    const struct rope_table *rt = a->rope;
    // (a per-token-head FP8 layer's scale is the absmax of a whole head's vector, which the CTAs of this
    // launch split between them: its cache write stays k_rope_kv_write's)
    if (a->wq->rows != (int64_t)a->n_heads * l->head_dim || l->k_tok_scale ||
        !fused_norm(c, a->x, a->norm, a->wq->cols, n))
        return false;
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
    return qkv_norm_launch(c, a, n, &rp);
}

// q, k, v = rmsnorm(x) · w{q,k,v}ᵀ: the fused rmsnorm + Q|K|V launch, or k_rmsnorm then one Q|K|V
// launch, or k_rmsnorm then three GEMMs.
static void qkv(struct cuda_backend *c, const struct attn_in_args *a, int n) {
    struct backend *b = &c->base;
    if (qkv_norm_launch(c, a, n, nullptr)) {
        CUDA_LAUNCHED(c, "gemv rmsnorm + Q|K|V");
        return;
    }
    b->ops->rmsnorm(b, a->xn, a->x, a->norm, n, a->eps);
    const struct weight *wq = a->wq, *wk = a->wk, *wv = a->wv;
    bf16 *const outs[3] = {(bf16 *)a->q, (bf16 *)a->k, (bf16 *)a->v};
    const bf16 *const ws[3] = {(const bf16 *)wq->dev, (const bf16 *)wk->dev, (const bf16 *)wv->dev};
    const int64_t rows[3] = {wq->rows, wk->rows, wv->rows};
    const bool same_cols = wk->cols == wq->cols && wv->cols == wq->cols;
    if (fused_fast(c, n) && same_cols &&
        gemv_qkv_launch<GEMV_QKV>(c->stream, outs, (const bf16 *)a->xn, ws, rows, wq->cols, n)) {
        CUDA_LAUNCHED(c, "gemv Q|K|V");
        return;
    }
    cuda_matmul(b, a->q, a->xn, wq, n);
    cuda_matmul(b, a->k, a->xn, wk, n);
    cuda_matmul(b, a->v, a->xn, wv, n);
}

// The products, RoPE and the cache write in one launch where it takes the step; otherwise the
// products (qkv), then RoPE on Q and K and the cache write in one launch (cuda_kv_write.cu); with
// dynamic NTK, backend.c's composition.
void cuda_attn_in(struct backend *b, const struct attn_in_args *a, const struct batch *bt) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    const int n = bt->n_tokens;
    if (CUDA_SKIP(c) || !n) return;
    if (a->rope->dyn_max_pos > 0) {  // dynamic NTK: the frequencies per sequence, which only k_rope computes
        backend_attn_in(b, a, bt);
        return;
    }
    if (qkv_rope_launch(c, a, n)) {
        CUDA_LAUNCHED(c, "gemv rmsnorm + Q|K|V + RoPE + kv_write");
        return;
    }
    qkv(c, a, n);
    cuda_rope_kv_write(c, a->q, a->k, a->v, a->n_heads, a->rope, a->layer, bt);
}

void cuda_proj_add(struct backend *b, void *x, void *scratch, const void *in, const struct weight *w, int n) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    if (CUDA_SKIP(c) || !n) return;
    const gemv_args ga = gemv_product((bf16 *)x, (const bf16 *)in, (const bf16 *)w->dev, nullptr, w->rows, w->cols);
    if (fused_fast(c, n) && gemv_fused_launch<GEMV_ADD>(c->stream, ga, n)) {
        CUDA_LAUNCHED(c, "gemv + residual add");
        return;
    }
    backend_proj_add(b, x, scratch, in, w, n);
}

// The rmsnorm scaled onto the SwiGLU launch's sums (GEMV_SWIGLU_DEFER; no shared memory, so every
// n <= 8), or k_rmsnorm then the SwiGLU launch; the composition where the probe wants the gate's
// pre-activation or the step is not a decode step.
void cuda_ffn_in(struct backend *b, const struct ffn_in_args *a, int n) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    if (CUDA_SKIP(c) || !n) return;
    const struct weight *wg = a->w_gate, *wu = a->w_up;
    if (a->keep_gate || !fused_fast(c, n) || wg->rows != wu->rows || wg->cols != wu->cols) {
        backend_ffn_in(b, a, n);
        return;
    }
    if (a->norm->cols == wg->cols && (uintptr_t)a->norm->dev % 16 == 0) {  // (the launch checks the rest)
        gemv_args ga = gemv_product((bf16 *)a->act, (const bf16 *)a->x, (const bf16 *)wg->dev, (const bf16 *)wu->dev,
                                    wg->rows, wg->cols);
        ga.nrm = {(const bf16 *)a->norm->dev, a->eps, 0};
        if (gemv_fused_launch<GEMV_SWIGLU_DEFER>(c->stream, ga, n)) {
            CUDA_LAUNCHED(c, "gemv SwiGLU (deferred rmsnorm)");
            return;
        }
    }
    b->ops->rmsnorm(b, a->xn, a->x, a->norm, n, a->eps);
    const gemv_args ga = gemv_product((bf16 *)a->act, (const bf16 *)a->xn, (const bf16 *)wg->dev, (const bf16 *)wu->dev,
                                      wg->rows, wg->cols);
    if (gemv_fused_launch<GEMV_SWIGLU>(c->stream, ga, n)) {
        CUDA_LAUNCHED(c, "gemv SwiGLU");
        return;
    }
    cuda_matmul(b, a->gate, a->xn, wg, n);
    cuda_matmul(b, a->act, a->xn, wu, n);
    b->ops->silu_mul(b, a->act, a->gate, a->act, (int64_t)n * wu->rows);
}
