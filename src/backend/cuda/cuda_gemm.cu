// cuda_gemm.cu — the CUDA backend's products: matmul (cuBLASLt, its plans cached per shape in the
// backend; decode-sized products, n <= 8, on the skinny GEMM of cuda_gemv.cuh; every product on
// the batch-invariant GEMM of cuda_gemm_inv.cuh under --batch-invariant) and the sublayer ops
// attn_in, proj_add and ffn_in, which fuse their parts into one skinny-GEMM launch for decode steps
// and otherwise compose them (backend.c) as the CPU does, with the same numbers either way.
#include <stdio.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_fp8w.cuh"
#include "cuda_fp8w_act.cuh"
#include "cuda_gemm_inv.cuh"
#include "cuda_gemv.cuh"

// ---------------------------------------------------------------- GEMM (cuBLASLt)

static void plan_release(struct gemm_plan *p) {
    if (!p->valid) return;
    cublasLtMatmulDescDestroy(p->op); cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb); cublasLtMatrixLayoutDestroy(p->ld);
    p->valid = false;
}

// The cuBLASLt plan of one product (kind: FP8_PLAN_BF16, or an FP8 weight's bits), made on first use.
// NULL when cuBLASLt has no algorithm: a bf16 product latches the error; an FP8 one returns quietly
// (and is remembered), and its caller tries the next form.
// FP8 forms: the weight's scales and the tokens' applied by cuBLASLt (outer-vector scaling for a scale
// a row, 128×128 block scaling for blocks), or FP8_PLAN_SCALAR: unscaled sums in f32, which
// k_fp8w_scale_out then multiplies by (s_x · s_w) as the CPU does.
enum { FP8_PLAN_BF16 = 0, FP8_PLAN_FP8 = 1, FP8_PLAN_BLOCK = 2, FP8_PLAN_E5M2 = 4, FP8_PLAN_SCALAR = 8 };
static int fp8_plan_kind(const struct weight *w) {
    return FP8_PLAN_FP8 | (w->fp8.wscale == WSCALE_BLOCK ? FP8_PLAN_BLOCK : 0) | (w->fp8.act_e5m2 ? FP8_PLAN_E5M2 : 0);
}
static struct gemm_plan *plan_for(struct cuda_backend *c, int64_t rows, int64_t cols, int n, cudaDataType_t out_type,
                                  int kind) {
    for (int i = 0; i < c->n_plans; i++)
        if (c->plans[i].rows == rows && c->plans[i].cols == cols && c->plans[i].n == n &&
            c->plans[i].out_type == out_type && c->plans[i].kind == kind)
            return c->plans[i].none ? nullptr : &c->plans[i];
    struct gemm_plan *p = &c->plans[c->n_plans < N_PLANS ? c->n_plans++ : (c->n_plans - 1)];
    plan_release(p);
    memset(p, 0, sizeof *p);
    p->rows = rows; p->cols = cols; p->n = n; p->out_type = out_type; p->kind = kind;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    // D[rows x n] (col-major) = W^T-as-stored · x: W is row-major [rows][cols] = col-major [cols x rows]
    const bool fp8 = kind & FP8_PLAN_FP8, blk = kind & FP8_PLAN_BLOCK, e5m2 = kind & FP8_PLAN_E5M2;
    const bool scaled = fp8 && !(kind & FP8_PLAN_SCALAR);
    const cudaDataType_t ta_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    const cudaDataType_t tb_type = !fp8 ? CUDA_R_16BF : e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    bool ok =
        cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&p->la, ta_type, cols, rows, cols) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&p->lb, tb_type, cols, n, cols) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&p->ld, out_type, rows, n, rows) == CUBLAS_STATUS_SUCCESS;
    if (ok && scaled) {  // the weight's scales per row or per 128×128 tile, the activations' per token
        int32_t ma = blk ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        int32_t mb = blk ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        const void *any = c->workspace;  // (the heuristic sees set scale pointers; each call sets its own)
        ok = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &any, sizeof any) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &any, sizeof any) ==
                 CUBLAS_STATUS_SUCCESS;
        // A layer's product (bf16 out) with a scale a row and a token accumulates in the tensor core's
        // own precision (cuBLASLt's fast accumulation, as vLLM's FP8 GEMMs): a layer's four products
        // run 13-18 % faster, for an error at least 10 times below what the e4m3 rounding of the
        // operands costs (bench/fp8_weights/RESULTS.md, dev/cuda/fp8_gemm_rate.cu). The logits (f32 out)
        // keep the promoted sums; block scaling promotes every 128 columns anyway.
        const int8_t fast = !blk && out_type == CUDA_R_16BF;
        ok = ok && cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast) ==
                       CUBLAS_STATUS_SUCCESS;
    }
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
        if (!c->error && !fp8) {
            c->error = OCT_EIO;
            snprintf(c->msg, sizeof c->msg, "cuBLASLt: no algorithm for [%lld x %lld] x %d", (long long)rows,
                     (long long)cols, n);
        }
        p->valid = true;  // (release what was made)
        plan_release(p);
        if (fp8) p->none = true;  // (remembered: the shape takes the skinny FP8 GEMM from now on)
        else c->n_plans--;
        return nullptr;
    }
    p->algo = res.algo;
    p->valid = true;
    return p;
}

// ---------------------------------------------------------------- FP8 weights (cuda_fp8w.cuh)

static bool fp8w(const struct weight *w) { return w->dtype == DT_E4M3; }

// One k_gemv8 launch, a programmatic dependent of the kernel before it: the weight's tiles 16-row tiles
// (of every segment with SEG) by groups of a.tpc tokens, on as many persistent CTAs as the GPU holds.
template <gemv8_policy P, typename OUT, bool BLOCK, bool E5, bool E5_2, bool NORM = false, bool SEG = false,
          bool ROPE = false>
static void gemv8_go(struct cuda_backend *c, const gemv8_args &a0, unsigned tiles) {
    auto kern = k_gemv8<P, OUT, BLOCK, E5, E5_2, NORM, SEG, ROPE>;
    static size_t room = 0;  // (the instantiation's most dynamic shared memory: the opt-in less its static)
    if (!cuda_smem_room_of(c, kern, &room, "fp8 gemv shared memory")) return;
    gemv8_args a = a0;
    // (x̂ rows for the tokens there are: smem for 8 would hold a 14,336-column product to a CTA an SM;
    // fewer tokens a CTA where the rows and the kernel's static shared memory pass the opt-in together)
    size_t smem;
    while ((smem = gemv8_smem(a.kp, a.n < a.tpc ? a.n : a.tpc, P == GEMV8_SWIGLU)) > room && a.tpc > 1) a.tpc--;
    static size_t allowed = 0;  // (the instantiation's dynamic shared memory limit)
    if (!cuda_smem_allow(c, kern, smem, &allowed, "fp8 gemv shared memory")) return;
    static size_t occ_smem = 0;  // (the instantiation's CTAs an SM, for the shared memory last asked about)
    static int per_sm = 0;
    if (smem != occ_smem) {
        if (cuda_fail(c, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, GEMV8_WARPS * 32, smem),
                      "fp8 gemv occupancy"))
            return;
        occ_smem = smem;
    }
    a.tiles = (int)tiles;
    const int gy = (a.n + a.tpc - 1) / a.tpc;
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = pdl_config(dim3(gemv8_ctas((int)tiles, gy, per_sm, c->n_sm), (unsigned)gy),
                                              dim3(GEMV8_WARPS * 32), smem, c->stream, attr);
    cuda_fail(c, cudaLaunchKernelEx(&cfg, kern, a), "fp8 gemv");
}

static gemv8_w gemv8_weight(const struct weight *w) {
    gemv8_w g;
    g.q = (const uint8_t *)w->dev;
    g.s = (const float *)((const uint8_t *)w->dev + fp8w_scale_off(w->rows, w->cols));
    g.act = fp8w_act_of(w);
    return g;
}

// A launch's operands for n tokens of x against weights of w's columns and scheme, up to 8 tokens a CTA
// (gemv8_go lowers that to what the kernel's shared memory holds rows of x̂ for); false, with the error
// latched, when not even one token's rows fit the opt-in maximum.
static bool gemv8_prepare(struct cuda_backend *c, gemv8_args *a, const void *x, const struct weight *w, int n,
                          bool swiglu) {
    *a = gemv8_args();
    a->x = (const bf16 *)x;
    a->w = gemv8_weight(w);
    a->n = n;
    a->rows = (int)w->rows;
    a->cols = (int)w->cols;
    a->kp = (int)fp8w_pitch(w->cols);
    a->kbp = (int)fp8w_kblocks_padded(w->cols);
    a->tpc = 8;
    if (gemv8_smem(a->kp, 1, swiglu) > c->smem_optin) {
        cuda_latch(c, OCT_EUNSUP, "fp8 weights: a row of %lld columns does not fit the FP8 GEMM's shared memory",
                   (long long)w->cols);
        return false;
    }
    return true;
}

// Whether a launch can normalise x (cols wide, norm weight nw) in its prologue as k_rmsnorm does: the
// row fits k_rmsnorm's vector path in at most the CTA's threads.
static bool gemv8_norm_fits(const void *x, const struct weight *norm, int64_t cols) {
    const int T = rms_threads(cols);
    return norm->cols == cols && cols % 8 == 0 && cols / 8 <= (int64_t)RMS_VEC * T && T <= GEMV8_WARPS * 32 &&
           ((uintptr_t)x | (uintptr_t)norm->dev) % 16 == 0;
}

// out = f(x · wᵀ [, x · w2ᵀ]) for n tokens on the skinny FP8 GEMM (P: GEMV8_STORE into OUT, GEMV8_ADD
// into bf16 out, GEMV8_SWIGLU with w2 the up weight, whose scheme must be w's and its activations e4m3);
// with norm (SwiGLU), x is the residual stream and its RMSNorm runs in the prologue.
template <gemv8_policy P, typename OUT>
static void gemv8_launch(struct cuda_backend *c, void *out, const void *x, const struct weight *w,
                         const struct weight *w2, int n, const struct weight *norm = nullptr, float eps = 0) {
    constexpr bool SW = P == GEMV8_SWIGLU;
    gemv8_args a;
    if (!gemv8_prepare(c, &a, x, w, n, SW)) return;
    a.out = out;
    a.w2 = SW ? gemv8_weight(w2) : a.w;
    const unsigned tiles = (unsigned)((a.rows + 15) / 16);
    const bool blk = w->fp8.wscale == WSCALE_BLOCK, e5 = w->fp8.act_e5m2;
    if constexpr (SW) {
        if (norm) {
            a.norm = (const bf16 *)norm->dev;
            a.eps = eps;
            a.norm_threads = rms_threads(w->cols);
            if (blk) e5 ? gemv8_go<P, OUT, true, true, false, true>(c, a, tiles)
                        : gemv8_go<P, OUT, true, false, false, true>(c, a, tiles);
            else e5 ? gemv8_go<P, OUT, false, true, false, true>(c, a, tiles)
                    : gemv8_go<P, OUT, false, false, false, true>(c, a, tiles);
            return;
        }
    }
    if (blk) e5 ? gemv8_go<P, OUT, true, true, false>(c, a, tiles) : gemv8_go<P, OUT, true, false, false>(c, a, tiles);
    else e5 ? gemv8_go<P, OUT, false, true, false>(c, a, tiles) : gemv8_go<P, OUT, false, false, false>(c, a, tiles);
}

// q, k, v = rmsnorm(x) · w{q,k,v}ᵀ in one launch of the skinny FP8 GEMM (the norm in its prologue where
// it fits, else k_rmsnorm first), with rp RoPE and the cache write in its epilogue too: false (nothing
// launched) when the weights differ in columns, scale scheme or activation scheme, or e5m2 activations,
// or (rp) when the shapes do not fit the epilogue (gemv8_rope_fits).
static bool gemv8_qkv(struct cuda_backend *c, const struct attn_in_args *ai, int n, const gemv_rope *rp = nullptr) {
    const struct weight *w[3] = {ai->wq, ai->wk, ai->wv};
    for (int k = 0; k < 3; k++) {
        const struct weight *x = w[k];
        if (x->dtype != DT_E4M3 || x->cols != w[0]->cols || x->fp8.wscale != w[0]->fp8.wscale || x->fp8.act_e5m2 ||
            x->fp8.ascale != w[0]->fp8.ascale || x->fp8.input_scale != w[0]->fp8.input_scale)
            return false;
    }
    const int rows[3] = {(int)w[0]->rows, (int)w[1]->rows, (int)w[2]->rows};
    const bool blk = w[0]->fp8.wscale == WSCALE_BLOCK;
    if (rp && !gemv8_rope_fits(*rp, rows, blk)) return false;
    const bool norm = gemv8_norm_fits(ai->x, ai->norm, w[0]->cols);
    gemv8_args a;
    if (!gemv8_prepare(c, &a, norm ? ai->x : ai->xn, w[0], n, false)) return true;  // (latched)
    if (!norm) {
        struct backend *b = &c->base;
        b->ops->rmsnorm(b, ai->xn, ai->x, ai->norm, n, ai->eps);
    } else {
        a.norm = (const bf16 *)ai->norm->dev;
        a.eps = ai->eps;
        a.norm_threads = rms_threads(w[0]->cols);
    }
    void *const outs[3] = {ai->q, ai->k, ai->v};
    unsigned tiles = 0;
    for (int k = 0; k < 3; k++) {
        a.sw[k] = gemv8_weight(w[k]);
        a.sout[k] = outs[k];
        a.srows[k] = rows[k];
        a.cta0[k] = (int)tiles;
        tiles += (unsigned)((rows[k] + 15) / 16);
    }
    if (rp) {
        a.rp = *rp;
        if (norm) blk ? gemv8_go<GEMV8_STORE, bf16, true, false, false, true, true, true>(c, a, tiles)
                      : gemv8_go<GEMV8_STORE, bf16, false, false, false, true, true, true>(c, a, tiles);
        else blk ? gemv8_go<GEMV8_STORE, bf16, true, false, false, false, true, true>(c, a, tiles)
                 : gemv8_go<GEMV8_STORE, bf16, false, false, false, false, true, true>(c, a, tiles);
        return true;
    }
    if (norm) blk ? gemv8_go<GEMV8_STORE, bf16, true, false, false, true, true>(c, a, tiles)
                  : gemv8_go<GEMV8_STORE, bf16, false, false, false, true, true>(c, a, tiles);
    else blk ? gemv8_go<GEMV8_STORE, bf16, true, false, false, false, true>(c, a, tiles)
             : gemv8_go<GEMV8_STORE, bf16, false, false, false, false, true>(c, a, tiles);
    return true;
}

// The FP8 scratch of the cuBLASLt products for n tokens (codes of kp bytes, rep scales each, and for
// FP8_PLAN_SCALAR the f32 sums); false with the error latched. Captured decode graphs read these
// buffers, so moving them makes the graphs stale.
static bool fp8w_scratch(struct cuda_backend *c, size_t codes, size_t scales, size_t sums) {
    if (codes <= c->xq_cap && scales <= c->sx_cap && sums <= c->acc_cap) return true;
    cudaStreamSynchronize(c->stream);  // (a step in flight may still read them)
    c->meta_gen++;
    return cuda_reserve(c, &c->d_xq, &c->xq_cap, codes > c->xq_cap ? codes * 2 : c->xq_cap) &&
           cuda_reserve(c, &c->d_sx, &c->sx_cap, scales > c->sx_cap ? scales * 2 : c->sx_cap) &&
           cuda_reserve(c, &c->d_acc, &c->acc_cap, sums > c->acc_cap ? sums * 2 : c->acc_cap);
}

// out[t][r] = sum[t][r] · (s_x[t] · s_w[r]) (FP8_PLAN_SCALAR's epilogue; the CPU's order).
template <typename OUT>
__global__ void k_fp8w_scale_out(OUT *out, const float *sum, const float *sx, const float *sw, int n, int rows) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * rows) return;
    const int t = (int)(i / rows), r = (int)(i % rows);
    const float y = sum[i] * (sx[t] * sw[r]);
    if constexpr (sizeof(OUT) == 4) out[i] = y;
    else out[i] = __float2bfloat16_rn(y);
}

// Which cuBLASLt form takes an FP8 product (the weight's own scaling first), or NULL for none.
static struct gemm_plan *fp8w_plan(struct cuda_backend *c, const struct weight *w, int64_t kp, int n,
                                   cudaDataType_t out_type) {
    const int kind = fp8_plan_kind(w);
    struct gemm_plan *p = plan_for(c, w->rows, kp, n, out_type, kind);
    if (!p && !(kind & FP8_PLAN_BLOCK)) p = plan_for(c, w->rows, kp, n, CUDA_R_32F, kind | FP8_PLAN_SCALAR);
    static int told;  // (once a process: which form its FP8 prefills take)
    if (!told++)
        fprintf(stderr, "octet: cuda: FP8-weight prefill GEMMs on %s\n",
                !p ? "the skinny FP8 GEMM (cuBLASLt has no FP8 algorithm here)"
                   : p->kind & FP8_PLAN_SCALAR ? "cuBLASLt's FP8 GEMM, scales applied after it"
                                               : "cuBLASLt's FP8 GEMM with its own scaling");
    return p;
}

// out = x · wᵀ on cuBLASLt's FP8 GEMM (plan p, fp8w_plan's form) from x's codes xq [n][kp] and scales sx
// [rep][n], with the weight's own scales.
static void fp8w_lt(struct cuda_backend *c, void *out, cudaDataType_t out_type, const struct weight *w, int n,
                    struct gemm_plan *p, const uint8_t *xq, const float *sx) {
    const bool scalar = p->kind & FP8_PLAN_SCALAR;
    if (scalar && !fp8w_scratch(c, 0, 0, (size_t)n * w->rows)) return;
    const float *sw = gemv8_weight(w).s;
    const void *sa = sw, *sb = sx;
    float alpha = 1.0f, beta = 0.0f;
    void *d = scalar ? (void *)c->d_acc : out;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (!scalar) {
        st = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(c->lt, p->op, &alpha, w->dev, p->la, xq, p->lb, &beta, d, p->ld, d, p->ld, &p->algo,
                            c->workspace, c->workspace_bytes, c->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        cuda_latch(c, OCT_EIO, "cublasLtMatmul fp8 [%lld x %lld] x %d failed (%d)", (long long)w->rows,
                   (long long)w->cols, n, (int)st);
        return;
    }
    if (scalar) {
        const size_t total = (size_t)n * w->rows;
        const unsigned blocks = (unsigned)((total + 255) / 256);
        if (out_type == CUDA_R_32F)
            k_fp8w_scale_out<<<blocks, 256, 0, c->stream>>>((float *)out, c->d_acc, sx, sw, n, (int)w->rows);
        else
            k_fp8w_scale_out<<<blocks, 256, 0, c->stream>>>((bf16 *)out, c->d_acc, sx, sw, n, (int)w->rows);
        CUDA_LAUNCHED(c, "fp8 product scales");
    }
}

// Scales a token carries for w's cuBLASLt product: one per 128 columns for block weights, else one.
static int fp8w_rep(const struct weight *w) { return w->fp8.wscale == WSCALE_BLOCK ? (int)fp8w_kblocks(w->cols) : 1; }

static bool fp8w_act_same(const fp8w_act &a, const fp8w_act &b) {
    return a.fmax == b.fmax && a.fixed == b.fixed && a.e5m2 == b.e5m2;
}

// Whether cuBLASLt takes w's FP8 product at n tokens (its plan into *p).
static bool fp8w_on_lt(struct cuda_backend *c, const struct weight *w, int n, cudaDataType_t out_type,
                       struct gemm_plan **p) {
    *p = fp8w(w) && n > 8 && !c->base.batch_invariant ? fp8w_plan(c, w, fp8w_pitch(w->cols), n, out_type) : nullptr;
    return *p != nullptr;
}

// out = x · wᵀ for an FP8 weight: cuBLASLt's FP8 GEMM for more than 8 tokens (the activations quantized
// per token by k_fp8w_quant, or already by the kernel that wrote x: c->fp8_codes; fp8w_plan's form); the
// skinny FP8 GEMM for up to 8, under --batch-invariant for every n (its results do not depend on n), and
// for shapes cuBLASLt has no algorithm for.
static void fp8w_gemm(struct cuda_backend *c, void *out, cudaDataType_t out_type, const void *x,
                      const struct weight *w, int n) {
    struct gemm_plan *p;
    if (fp8w_on_lt(c, w, n, out_type, &p)) {
        const int64_t kp = fp8w_pitch(w->cols);
        const int rep = fp8w_rep(w);
        const auto m = c->fp8_codes;
        c->fp8_codes.x = nullptr;  // (read once)
        if (m.x == x && m.w == w && m.n == n) {
            fp8w_lt(c, out, out_type, w, n, p, c->d_xq, c->d_sx);
            return;
        }
        if (!fp8w_scratch(c, (size_t)n * kp, (size_t)rep * n, 0)) return;
        k_fp8w_quant<<<n, 256, 0, c->stream>>>(c->d_xq, c->d_sx, (const bf16 *)x, n, (int)w->cols, (int)kp,
                                               fp8w_act_of(w), rep);
        CUDA_LAUNCHED(c, "fp8 activation quantization");
        fp8w_lt(c, out, out_type, w, n, p, c->d_xq, c->d_sx);
        return;
    }
    if (out_type == CUDA_R_32F) gemv8_launch<GEMV8_STORE, float>(c, out, x, w, nullptr, n);
    else gemv8_launch<GEMV8_STORE, bf16>(c, out, x, w, nullptr, n);
}

// The FP8 products of k weights that read one activation of n tokens, quantized by the kernel that writes
// it: every weight on cuBLASLt with the activation's columns, at most two activation schemes among them
// (slot 0 at the scratch's start, slot 1 after it). False where that does not hold (nothing reserved).
struct fp8w_readers {
    fp8w_dsts q;
    int slot[3];
    struct gemm_plan *plan[3];
};
static bool fp8w_readers_of(struct cuda_backend *c, const struct weight *const *ws, int k, int n,
                            fp8w_readers *r) {
    const int64_t cols = ws[0]->cols, kp = fp8w_pitch(cols);
    int max_rep = 1;
    r->q.count = 0;
    for (int i = 0; i < k; i++) {
        const struct weight *w = ws[i];
        if (w->cols != cols || !fp8w_on_lt(c, w, n, CUDA_R_16BF, &r->plan[i])) return false;
        const fp8w_act a = fp8w_act_of(w);
        const int rep = fp8w_rep(w);
        max_rep = rep > max_rep ? rep : max_rep;
        int s = 0;
        while (s < r->q.count && !(fp8w_act_same(r->q.d[s].a, a) && r->q.d[s].rep == rep)) s++;
        if (s == 2) return false;
        if (s == r->q.count) r->q.d[r->q.count++] = {nullptr, nullptr, a, (int)kp, rep};
        r->slot[i] = s;
    }
    // slot 1 starts 256 bytes aligned, as cuBLASLt wants its operands and scale vectors
    const size_t codes = ((size_t)n * kp + 255) / 256 * 256, scales = ((size_t)max_rep * n + 63) / 64 * 64;
    if (!fp8w_scratch(c, 2 * codes, 2 * scales, 0)) return false;
    for (int s = 0; s < r->q.count; s++) {
        r->q.d[s].xq = c->d_xq + (size_t)s * codes;
        r->q.d[s].sx = c->d_sx + (size_t)s * scales;
    }
    return true;
}

// xn = rmsnorm(x) with its codes for the readers' products in the same launch (k_rmsnorm_fp8).
static void fp8w_norm_launch(struct cuda_backend *c, void *xn, const void *x, const struct weight *norm, float eps,
                             int n, const fp8w_readers &r) {
    k_rmsnorm_fp8<<<n, rms_threads(norm->cols), 0, c->stream>>>((bf16 *)xn, (const bf16 *)x,
                                                                 (const bf16 *)norm->dev, (int)norm->cols, eps, n,
                                                                 r.q);
    CUDA_LAUNCHED(c, "rmsnorm + fp8 activation codes");
}

void cuda_gemm(struct cuda_backend *c, void *out, cudaDataType_t out_type, const void *x, const struct weight *w,
               int n) {
    if (CUDA_SKIP(c) || n == 0) return;
    if (fp8w(w)) {
        fp8w_gemm(c, out, out_type, x, w, n);
        return;
    }
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
    struct gemm_plan *p = plan_for(c, w->rows, w->cols, n, out_type, FP8_PLAN_BF16);
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

// The fused rmsnorm + Q|K|V launch (with rp: RoPE and the cache write too); false when the shapes do
// not fit it (nothing launched).
static bool qkv_norm_launch(struct cuda_backend *c, const struct attn_in_args *a, int n, const gemv_rope *rp) {
    const struct weight *wq = a->wq, *wk = a->wk, *wv = a->wv;
    if (fp8w(wq) || fp8w(wk) || fp8w(wv)) return false;  // (bf16 launches)
    if (wk->cols != wq->cols || wv->cols != wq->cols || !fused_norm(c, a->x, a->norm, wq->cols, n)) return false;
    bf16 *const outs[3] = {(bf16 *)a->q, (bf16 *)a->k, (bf16 *)a->v};
    const bf16 *const ws[3] = {(const bf16 *)wq->dev, (const bf16 *)wk->dev, (const bf16 *)wv->dev};
    const int64_t rows[3] = {wq->rows, wk->rows, wv->rows};
    const gemv_norm nrm = {(const bf16 *)a->norm->dev, a->eps, rms_threads(wq->cols)};
    const bf16 *xb = (const bf16 *)a->x;
    if (rp) return gemv_qkv_launch<GEMV_QKV_ROPE>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm, *rp);
    return gemv_qkv_launch<GEMV_QKV_NORM>(c->stream, outs, xb, ws, rows, wq->cols, n, nrm);
}

// The whole of attn_in in the skinny GEMM's launch (GEMV_QKV_ROPE); false where it does not take the
// step (nothing launched, unless an upload failed and latched its error). A per-token-head FP8 layer's
// row scale is the absmax of a whole head's vector, which the CTAs of this launch split between them:
// for such a layer the launch ropes Q and K and leaves the cache to k_kv_write_tok (the caller's).
static bool qkv_rope_launch(struct cuda_backend *c, const struct attn_in_args *a, int n) {
    const struct kv_layer *l = a->layer;
    const struct rope_table *rt = a->rope;
    // (FP8 weights: the skinny FP8 GEMM's Q|K|V launch, for decode-sized steps)
    const bool f8 = fp8w(a->wq);
    if (a->wq->rows != (int64_t)a->n_heads * l->head_dim ||
        !(f8 ? n <= 8 : fused_norm(c, a->x, a->norm, a->wq->cols, n)))
        return false;
    const float *sc = cuda_layer_scales(c, l), *ko = cuda_layer_offsets(c, l);
    const double *freqs = cuda_rope_freqs(c, rt);
    if (!sc || !freqs || (l->k_offset && !ko)) return false;
    gemv_rope rp;
    rp.pos = c->cb.pos;
    rp.slot = c->cb.slot;
    rp.inv_freq = freqs;
    rp.kc = l->k_tok_scale ? nullptr : l->k;
    rp.vc = l->k_tok_scale ? nullptr : l->v;
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
    return f8 ? gemv8_qkv(c, a, n, &rp) : qkv_norm_launch(c, a, n, &rp);
}

// q, k, v = rmsnorm(x) · w{q,k,v}ᵀ: the fused rmsnorm + Q|K|V launch, or k_rmsnorm then one Q|K|V
// launch, or k_rmsnorm then three GEMMs.
static void qkv(struct cuda_backend *c, const struct attn_in_args *a, int n) {
    struct backend *b = &c->base;
    if (fp8w(a->wq) && (n <= 8 || c->base.batch_invariant) && gemv8_qkv(c, a, n)) return;
    if (qkv_norm_launch(c, a, n, nullptr)) {
        CUDA_LAUNCHED(c, "gemv rmsnorm + Q|K|V");
        return;
    }
    const struct weight *const qkv_w[3] = {a->wq, a->wk, a->wv};
    fp8w_readers rd;
    if (fp8w(a->wq) && fp8w_readers_of(c, qkv_w, 3, n, &rd)) {  // FP8 prefill: xn's codes from the norm
        fp8w_norm_launch(c, a->xn, a->x, a->norm, a->eps, n, rd);
        void *const outs[3] = {a->q, a->k, a->v};
        for (int i = 0; i < 3; i++)
            fp8w_lt(c, outs[i], CUDA_R_16BF, qkv_w[i], n, rd.plan[i], rd.q.d[rd.slot[i]].xq, rd.q.d[rd.slot[i]].sx);
        return;
    }
    b->ops->rmsnorm(b, a->xn, a->x, a->norm, n, a->eps);
    const struct weight *wq = a->wq, *wk = a->wk, *wv = a->wv;
    bf16 *const outs[3] = {(bf16 *)a->q, (bf16 *)a->k, (bf16 *)a->v};
    const bf16 *const ws[3] = {(const bf16 *)wq->dev, (const bf16 *)wk->dev, (const bf16 *)wv->dev};
    const int64_t rows[3] = {wq->rows, wk->rows, wv->rows};
    const bool same_cols = wk->cols == wq->cols && wv->cols == wq->cols;
    if (fused_fast(c, n) && same_cols && !fp8w(wq) && !fp8w(wk) && !fp8w(wv) &&
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
    c->fp8_codes.x = nullptr;
    if (CUDA_SKIP(c) || !n) return;
    if (a->rope->dyn_max_pos > 0) {  // dynamic NTK: the frequencies per sequence, which only k_rope computes
        backend_attn_in(b, a, bt);
        return;
    }
    if (qkv_rope_launch(c, a, n)) {
        // (per-token-head layers: the roped K and V rows with their scales, k_kv_write_tok)
        if (!CUDA_LAUNCHED(c, "gemv rmsnorm + Q|K|V + RoPE + kv_write") && a->layer->k_tok_scale)
            cuda_kv_write(b, a->layer, a->k, a->v, bt);
        return;
    }
    qkv(c, a, n);
    cuda_rope_kv_write(c, a->q, a->k, a->v, a->n_heads, a->rope, a->layer, bt);
}

void cuda_proj_add(struct backend *b, void *x, void *scratch, const void *in, const struct weight *w, int n) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    if (CUDA_SKIP(c) || !n) return;
    if (fp8w(w)) {  // the skinny FP8 GEMM adds into x itself (for every n under --batch-invariant)
        if (n <= 8 || c->base.batch_invariant) gemv8_launch<GEMV8_ADD, bf16>(c, x, in, w, nullptr, n);
        else backend_proj_add(b, x, scratch, in, w, n);
        return;
    }
    const gemv_args ga = gemv_product((bf16 *)x, (const bf16 *)in, (const bf16 *)w->dev, nullptr, w->rows, w->cols);
    if (fused_fast(c, n) && gemv_fused_launch<GEMV_ADD>(c->stream, ga, n)) {
        CUDA_LAUNCHED(c, "gemv + residual add");
        return;
    }
    backend_proj_add(b, x, scratch, in, w, n);
}

// FP8 prefill of the SwiGLU FFN's input on cuBLASLt: xn and its codes for gate and up in one launch,
// the two products, then act = silu(gate) ⊙ up with its codes for the down projection (a->w_down, when
// cuBLASLt takes it) in one launch, left in c->fp8_codes for the product that reads act next. False
// (nothing launched) where the products do not all run on cuBLASLt.
static bool fp8w_ffn_lt(struct cuda_backend *c, const struct ffn_in_args *a, int n) {
    const struct weight *const gu[2] = {a->w_gate, a->w_up}, *wd = a->w_down;
    const int64_t F = a->w_up->rows;
    if (a->w_gate->rows != F) return false;
    struct gemm_plan *pd = nullptr;
    const bool down = wd && wd->cols == F && fp8w_on_lt(c, wd, n, CUDA_R_16BF, &pd);
    const int64_t kpd = down ? fp8w_pitch(F) : 0;
    const int repd = down ? fp8w_rep(wd) : 0;
    // (all the scratch reserved before the launches: growing it later would move codes still to be read)
    if (down && !fp8w_scratch(c, (size_t)n * kpd, (size_t)repd * n, 0)) return false;
    fp8w_readers rd;
    if (!fp8w_readers_of(c, gu, 2, n, &rd)) return false;
    fp8w_norm_launch(c, a->xn, a->x, a->norm, a->eps, n, rd);
    fp8w_lt(c, a->gate, CUDA_R_16BF, a->w_gate, n, rd.plan[0], rd.q.d[rd.slot[0]].xq, rd.q.d[rd.slot[0]].sx);
    fp8w_lt(c, a->act, CUDA_R_16BF, a->w_up, n, rd.plan[1], rd.q.d[rd.slot[1]].xq, rd.q.d[rd.slot[1]].sx);
    if (!down) {
        c->base.ops->silu_mul(&c->base, a->act, a->gate, a->act, (int64_t)n * F);
        return true;
    }
    const fp8w_act ad = fp8w_act_of(wd);
    fp8w_dsts q = {};
    q.d[0] = {c->d_xq, c->d_sx, ad, (int)kpd, repd};
    q.count = 1;
    // act's row in shared memory, act itself unwritten (only the down projection reads it, from its codes),
    // where the row fits; else act written and re-read
    const size_t row = (size_t)F * sizeof(bf16);
    static size_t room = 0;  // (the most dynamic shared memory k_act_mul_fp8 can opt in to)
    if (!cuda_smem_room_of(c, k_act_mul_fp8<FFN_ACT_SILU>, &room, "silu_mul + fp8 codes shared memory")) return true;
    const bool on_chip = F % 8 == 0 && !(((uintptr_t)a->gate | (uintptr_t)a->act) & 15) && row <= room;
    static size_t allowed = 0;
    if (on_chip &&
        !cuda_smem_allow(c, k_act_mul_fp8<FFN_ACT_SILU>, row, &allowed, "silu_mul + fp8 codes shared memory"))
        return true;
    k_act_mul_fp8<FFN_ACT_SILU><<<n, 256, on_chip ? row : 0, c->stream>>>(
        on_chip ? nullptr : (bf16 *)a->act, (const bf16 *)a->gate, (const bf16 *)a->act, (int)F, n, q);
    CUDA_LAUNCHED(c, "silu_mul + fp8 activation codes");
    c->fp8_codes = {a->act, wd, n};
    return true;
}

// The rmsnorm scaled onto the SwiGLU launch's sums (GEMV_SWIGLU_DEFER; no shared memory, so every
// n <= 8), or k_rmsnorm then the SwiGLU launch; the composition where the probe wants the gate's
// pre-activation or the step is not a decode step.
void cuda_ffn_in(struct backend *b, const struct ffn_in_args *a, int n) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    if (CUDA_SKIP(c) || !n) return;
    const struct weight *wg = a->w_gate, *wu = a->w_up;
    c->fp8_codes.x = nullptr;
    if (!a->keep_gate && fp8w(wg) && fp8w_ffn_lt(c, a, n)) return;
    if (fp8w(wg) || fp8w(wu)) {  // k_rmsnorm, then SwiGLU on the skinny FP8 GEMM where both weights take it
        const bool pair = fp8w(wg) && fp8w(wu) && wg->rows == wu->rows && wg->cols == wu->cols &&
                          wg->fp8.wscale == wu->fp8.wscale && !wu->fp8.act_e5m2;
        if (a->keep_gate || !pair || !(n <= 8 || c->base.batch_invariant)) {
            backend_ffn_in(b, a, n);
            return;
        }
        if (gemv8_norm_fits(a->x, a->norm, wg->cols)) {
            gemv8_launch<GEMV8_SWIGLU, bf16>(c, a->act, a->x, wg, wu, n, a->norm, a->eps);
            return;
        }
        b->ops->rmsnorm(b, a->xn, a->x, a->norm, n, a->eps);
        gemv8_launch<GEMV8_SWIGLU, bf16>(c, a->act, a->xn, wg, wu, n);
        return;
    }
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
