// cuda_backend.cu — the CUDA backend's table, its creation and destruction: device memory, BF16
// weights (converted at upload), the batch metadata upload, the elementwise ops (get_rows, rmsnorm,
// rope, silu_mul, add, gather_rows, bias_add, act_mul, scale; kernels in cuda_elementwise.cuh) and
// struct cuda_tuning's defaults. The products and the sublayer ops live in cuda_gemm.cu, graphs and
// the logits in cuda_step.cu, the cache write in cuda_kv_write.cu, attention in cuda_attention.cu,
// the mixture-of-experts FFN (and the MXFP4 upload) in cuda_moe.cu.
// Activations are BF16; math inside kernels is f32 (RoPE angles in f64, as the CPU computes them, so
// long positions agree).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_fp8w.cuh"

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
static void cu_free(struct backend *b, void *p) {
    struct cuda_backend *c = cb_of(b);
    if (c->fp8_codes.x == p) c->fp8_codes.x = nullptr;  // (an allocation at the same address is another tensor)
    cudaFree(p);
}
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

// w->dev = a new device copy of the host staging buffer h (bytes long), which this frees; OCT_ENOMEM naming
// the failure otherwise (the packed weight layouts' uploads: fp8 here, MXFP4 in cuda_moe.cu).
int cuda_upload_staged(struct cuda_backend *c, struct weight *w, void *h, size_t bytes) {
    void *d = nullptr;
    bool bad = cuda_fail(c, cudaMalloc(&d, bytes), "cudaMalloc(weight)");
    if (!bad) bad = cuda_fail(c, cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "upload weight");
    free(h);
    if (bad) {
        if (d) cudaFree(d);
        return err_set(OCT_ENOMEM, "cuda: %s", c->msg);
    }
    w->dev = d;
    return OCT_OK;
}

// An fp8_e4m3 weight in cuda_fp8w.cuh's device layout: rows padded to 16 bytes, then the scales (a
// tensor's one repeated per row; 128×128 blocks with their rows padded to 4).
static int fp8w_upload(struct cuda_backend *c, struct weight *w) {
    if (w->fp8.wscale == WSCALE_BLOCK && w->fp8.block != FP8W_BLOCK)
        return err_set(OCT_EUNSUP, "fp8 weights: %d×%d scale blocks are not supported by the cuda backend (128×128)",
                       w->fp8.block, w->fp8.block);
    if (w->cols > (1 << 20) || w->rows > (1 << 30))
        return err_set(OCT_EUNSUP, "fp8 weights: a [%lld x %lld] weight is too large for the cuda backend",
                       (long long)w->rows, (long long)w->cols);
    const int64_t kp = fp8w_pitch(w->cols);
    const size_t off = fp8w_scale_off(w->rows, w->cols), ns = fp8w_scale_count(w), bytes = off + ns * sizeof(float);
    uint8_t *h = (uint8_t *)calloc(bytes, 1);
    if (!h) return err_set(OCT_ENOMEM, "cuda: out of host memory staging an fp8 weight");
    for (int64_t r = 0; r < w->rows; r++)
        memcpy(h + (size_t)r * kp, (const uint8_t *)w->data + (size_t)r * w->cols, (size_t)w->cols);
    float *s = (float *)(h + off);
    if (w->fp8.wscale == WSCALE_BLOCK) {
        const int64_t nkb = fp8w_kblocks(w->cols), kbp = fp8w_kblocks_padded(w->cols);
        const int64_t nrb = (w->rows + FP8W_BLOCK - 1) / FP8W_BLOCK;
        for (int64_t rb = 0; rb < nrb; rb++)
            for (int64_t kb = 0; kb < kbp; kb++) s[rb * kbp + kb] = kb < nkb ? w->fp8.scale[rb * nkb + kb] : 1.0f;
    } else {
        for (int64_t r = 0; r < w->rows; r++) s[r] = w->fp8.scale[w->fp8.wscale == WSCALE_CHANNEL ? r : 0];
    }
    return cuda_upload_staged(c, w, h, bytes);
}

static int cu_weight_upload(struct backend *b, struct weight *w) {
    struct cuda_backend *c = cb_of(b);
    if (w->dtype == DT_E4M3 && w->fp8.scale && w->rows > 1) return fp8w_upload(c, w);
    if (w->dtype == DT_MXFP4) return cuda_mxfp4_upload(c, w);  // (experts: packed, cuda_moe.cu)
    if (w->dtype != DT_F32 && w->dtype != DT_F16 && w->dtype != DT_BF16)  // (the GGUF block types: CPU only)
        return err_set(OCT_EUNSUP, "weights of dtype %s are not supported by the cuda backend (f32, f16, bf16, "
                       "fp8_e4m3 matrices with scales, mxfp4; GGUF block types run with --device cpu)",
                       dtype_name(w->dtype));
    size_t n = (size_t)(w->rows * w->cols);
    bf16 *d = nullptr;
    if (cuda_fail(c, cudaMalloc((void **)&d, n * sizeof(bf16)), "cudaMalloc(weight)"))
        return err_set(OCT_ENOMEM, "cuda: %s", c->msg);
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
static void cu_weight_release(struct backend *b, struct weight *w) {
    if (w->dev) cudaFree(w->dev);
    w->dev = nullptr;
    w->dev_flags = 0;
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
    c->fp8_codes.x = nullptr;
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
#ifdef CUDA_STEP_TIMING
    c->h_begin = cuda_host_now();
#endif
    // Two staging halves, one a step: a half is rewritten once the copy from it two steps ago is
    // done, so a step can be queued while the one before it runs (asynchronous scheduling).
    for (int k = 0; k < 2 && !c->meta_ev[1]; k++)
        if (cuda_fail(c, cudaEventCreateWithFlags(&c->meta_ev[k], cudaEventDisableTiming), "cudaEventCreate"))
            return err_set(c->error, "%s", c->msg);
    c->meta_half ^= 1;
    if (cuda_fail(c, cudaEventSynchronize(c->meta_ev[c->meta_half]), "stream")) return err_set(c->error, "%s", c->msg);
    int32_t *h = c->h_meta + (size_t)c->meta_half * c->meta_cap, *d = c->d_meta;
    struct cuda_batch *m = &c->cb;
    size_t o = 0;
#define PUT(field, src, count)                      \
    do {                                            \
        m->field = d + o;                           \
        if (count) memcpy(h + o, (src), (count)*4); \
        o += (count);                               \
    } while (0)
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
#ifdef CUDA_STEP_TIMING
    if (c->tev[4]) cudaEventRecord(c->tev[4], c->stream);
#endif
    if (cuda_fail(c, cudaMemcpyAsync(d, h, o * 4, cudaMemcpyHostToDevice, c->stream), "upload batch") ||
        cuda_fail(c, cudaEventRecord(c->meta_ev[c->meta_half], c->stream), "cudaEventRecord"))
        return err_set(c->error, "%s", c->msg);
    cuda_graph_step_begin(c, bt);
    return OCT_OK;
}

// ---------------------------------------------------------------- elementwise kernels

#include "cuda_elementwise.cuh"

static unsigned blocks_for(long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

static void cu_get_rows(struct backend *b, void *out, const struct weight *table, const struct batch *bt) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !bt->n_tokens) return;
    k_get_rows<<<bt->n_tokens, 256, 0, c->stream>>>((bf16 *)out, (const bf16 *)table->dev, c->cb.tok, c->d_ids,
                                                    (int)table->cols);
    CUDA_LAUNCHED(c, "get_rows");
}

static void cu_rmsnorm(struct backend *b, void *out, const void *x, const struct weight *w, int n, float eps) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    // whole warps, RMS_VEC runs a thread: 256 threads at dim 4096; 1024 from dim 16384 (past it, the strided loop)
    k_rmsnorm<<<n, rms_threads(w->cols), 0, c->stream>>>((bf16 *)out, (const bf16 *)x, (const bf16 *)w->dev,
                                                         (int)w->cols, eps);
    CUDA_LAUNCHED(c, "rmsnorm");
}

const double *cuda_rope_freqs(struct cuda_backend *c, const struct rope_table *rt) {
    const int half = rt->n_rot / 2;
    const size_t bytes = (size_t)half * sizeof(double);
    for (int i = 0; i < c->n_rope && i < CUDA_ROPE_SLOTS; i++)
        if (c->rope_half[i] == half && !memcmp(c->rope_key[i], rt->inv_freq, bytes))
            return c->d_inv_freq + (size_t)i * ROPE_MAX_PAIRS;
    const size_t all = CUDA_ROPE_SLOTS * ROPE_MAX_PAIRS * sizeof(double);
    if (!c->d_inv_freq && cuda_fail(c, cudaMalloc((void **)&c->d_inv_freq, all), "cudaMalloc")) return nullptr;
    // a new table: the next slot (past CUDA_ROPE_SLOTS tables, the oldest is replaced, which a step
    // captured with it would not see: a backend serves one model, with at most two tables)
    const int i = c->n_rope++ % CUDA_ROPE_SLOTS;
    memcpy(c->rope_key[i], rt->inv_freq, bytes);
    c->rope_half[i] = half;
    double *d = c->d_inv_freq + (size_t)i * ROPE_MAX_PAIRS;
    if (cuda_fail(c, cudaMemcpyAsync(d, c->rope_key[i], bytes, cudaMemcpyHostToDevice, c->stream), "rope table"))
        return nullptr;
    return d;
}

static void cu_rope(struct backend *b, void *x, int n_heads, int head_dim, const struct rope_table *rt,
                    const struct batch *bt) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !bt->n_tokens) return;
    int half = rt->n_rot / 2;
    const double *freqs = cuda_rope_freqs(c, rt);
    if (!freqs) return;
    long total = (long)bt->n_tokens * n_heads * half;
    const rope_dyn dyn = {c->cb.tok_seq, c->cb.seq_lens, rt->dyn_max_pos, rt->dyn_theta, rt->dyn_factor, rt->n_rot};
    k_rope<<<blocks_for(total, 256), 256, 0, c->stream>>>((bf16 *)x, c->cb.pos, freqs, bt->n_tokens, n_heads, head_dim,
                                                          half, rt->neox, rt->attn_factor, dyn);
    CUDA_LAUNCHED(c, "rope");
}

static void cu_bias_add(struct backend *b, void *x, const struct weight *bias, int n) {
    struct cuda_backend *c = cb_of(b);
    const long total = (long)n * bias->cols;
    if (CUDA_SKIP(c) || !total) return;
    k_bias_add<<<blocks_for(total, 256), 256, 0, c->stream>>>((bf16 *)x, (const bf16 *)bias->dev, (int)bias->cols,
                                                              total);
    CUDA_LAUNCHED(c, "bias_add");
}

// out = F(x, y) over n elements: 8 a thread where every pointer is 16-byte aligned and n % 8 == 0.
template <typename F>
static void ew_launch(struct cuda_backend *c, void *out, const void *x, const void *y, int64_t n) {
    bf16 *o = (bf16 *)out;
    const bf16 *xb = (const bf16 *)x, *yb = (const bf16 *)y;
    if (n % 8 == 0 && !(((uintptr_t)out | (uintptr_t)x | (uintptr_t)y) & 15))
        k_ew8<F><<<blocks_for(n / 8, 256), 256, 0, c->stream>>>(o, xb, yb, n / 8);
    else
        k_ew<F><<<blocks_for(n, 256), 256, 0, c->stream>>>(o, xb, yb, n);
}

static void cu_act_mul(struct backend *b, void *out, const void *g, const void *u, int64_t n, enum ffn_act act) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    if (act == FFN_ACT_GELU_TANH) ew_launch<ew_act_mul<FFN_ACT_GELU_TANH>>(c, out, g, u, n);
    else if (act == FFN_ACT_GELU) ew_launch<ew_act_mul<FFN_ACT_GELU>>(c, out, g, u, n);
    else ew_launch<ew_act_mul<FFN_ACT_SILU>>(c, out, g, u, n);
    CUDA_LAUNCHED(c, "act_mul");
}

static void cu_scale(struct backend *b, void *x, int64_t n, float s) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    k_scale<<<blocks_for(n, 256), 256, 0, c->stream>>>((bf16 *)x, n, s);
    CUDA_LAUNCHED(c, "scale");
}

static void cu_silu_mul(struct backend *b, void *out, const void *g, const void *u, int64_t n) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    ew_launch<ew_act_mul<FFN_ACT_SILU>>(c, out, g, u, n);
    CUDA_LAUNCHED(c, "silu_mul");
}

static void cu_add(struct backend *b, void *x, const void *y, int64_t n) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !n) return;
    ew_launch<ew_add>(c, x, x, y, n);
    CUDA_LAUNCHED(c, "add");
}

static void cu_gather_rows(struct backend *b, void *out, const void *x, int dim, const struct batch *bt) {
    struct cuda_backend *c = cb_of(b);
    if (CUDA_SKIP(c) || !bt->n_logits) return;
    k_gather<<<bt->n_logits, 256, 0, c->stream>>>((bf16 *)out, (const bf16 *)x, c->cb.rows, dim);
    CUDA_LAUNCHED(c, "gather_rows");
}

// ---------------------------------------------------------------- table

static void cu_destroy(struct backend *b) {
    struct cuda_backend *c = cb_of(b);
    cudaStreamSynchronize(c->stream);
#ifdef CUDA_STEP_TIMING
    cuda_step_timing_report(c);
#endif
    cuda_gemm_release(c);
    cuda_kv_release(c);
    cuda_moe_release(c);
    cuda_attention_release(c);
    for (int i = 0; i < c->n_graphs; i++) if (c->graphs[i].exec) cudaGraphExecDestroy(c->graphs[i].exec);
    if (c->lt) cublasLtDestroy(c->lt);
    cudaFree(c->workspace);
    cudaFree(c->d_meta);
    cudaFree(c->d_inv_freq);
    cudaFree(c->d_part);
    cudaFree(c->d_xq);
    cudaFree(c->d_sx);
    cudaFree(c->d_acc);
    cudaFree(c->d_vt);
    cudaFree(c->d_logits);
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
    // 64: the FP8 TMA prefill copies a box per block (16-token blocks cost it a quarter of its rate),
    // and the decode kernels read a block as 16-token runs at the same speed
    .kv_block_tokens = 64,
    .kv_token_scales = true,   // (fp8_per_token_head: cuda_kv_write.cu, the TOKSCALE kernels of cuda_attention.cu)
    .fp8_weights = true,       // (cuda_fp8w.cuh)
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
    .matmul = cuda_matmul,
    .rope = cu_rope,
    .kv_write = cuda_kv_write,
    .attention = cuda_attention,
    .silu_mul = cu_silu_mul,
    .add = cu_add,
    .gather_rows = cu_gather_rows,
    .attn_in = cuda_attn_in,
    .proj_add = cuda_proj_add,
    .ffn_in = cuda_ffn_in,
    .logits = cuda_logits,
    .logits_argmax = cuda_logits_argmax,
    .wait_ids = cuda_wait_ids,
    .kv_budget_default = cu_kv_budget_default,
    .bias_add = cu_bias_add,
    .act_mul = cu_act_mul,
    .scale = cu_scale,
    .moe_ffn = cuda_moe_ffn,   // (cuda_moe.cu)
    .attn_softcap = true,
    .rope_dynamic = true,
    .attn_sinks = true,
};

extern "C" bool backend_cuda_available(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

extern "C" struct backend *backend_cuda_create(int device_index) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= device_index) {
        err_set(OCT_EUNSUP, "cuda: no usable GPU (%s)",
                e != cudaSuccess ? cudaGetErrorString(e) : "device index out of range");
        return nullptr;
    }
    struct cuda_backend *c = (struct cuda_backend *)calloc(1, sizeof *c);
    if (!c) { err_set(OCT_ENOMEM, "cuda: out of memory"); return nullptr; }
    c->base.ops = &cuda_ops;
    c->device = device_index;
    c->workspace_bytes = 32u << 20;
    cudaDeviceProp prop;
    bool bad =
        cuda_fail(c, cudaSetDevice(device_index), "cudaSetDevice") ||
        cuda_fail(c, cudaGetDeviceProperties(&prop, device_index), "cudaGetDeviceProperties") ||
        cuda_fail(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
        cuda_fail(c, cudaMalloc(&c->workspace, c->workspace_bytes), "cudaMalloc(workspace)") ||
        // (before any step: a captured get_rows keeps the pointer to the greedy picks)
        cuda_fail(c, cudaMalloc((void **)&c->d_ids, BACKEND_FEED_ROWS * sizeof(int32_t)), "cudaMalloc") ||
        cuda_fail(c, cudaMalloc((void **)&c->d_keys, BACKEND_FEED_ROWS * sizeof(unsigned long long)), "cudaMalloc") ||
        cuda_fail(c, cudaMemset(c->d_keys, 0, BACKEND_FEED_ROWS * sizeof(unsigned long long)), "cudaMemset") ||
        cuda_fail(c, cudaEventCreateWithFlags(&c->ids_ev[0], cudaEventDisableTiming), "cudaEventCreate") ||
        cuda_fail(c, cudaEventCreateWithFlags(&c->ids_ev[1], cudaEventDisableTiming), "cudaEventCreate");
    if (!bad && cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS) {
        bad = true;
        snprintf(c->msg, sizeof c->msg, "cublasLtCreate failed");
    }
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
extern "C" void cuda_tuning_get(const struct backend *b, struct cuda_tuning *out) {
    *out = ((const struct cuda_backend *)b)->tune;
}
extern "C" void cuda_tuning_set(struct backend *b, const struct cuda_tuning *t) {
    ((struct cuda_backend *)b)->tune = *t;
}
