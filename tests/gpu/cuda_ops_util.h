// cuda_ops_util.h — test_cuda_ops.c's helpers (owns: the two backends, the JSON report and its
// record(), random bf16-representable inputs, uploads and downloads, NMSE, test weights, batches of
// sequences, and filling both backends' caches). Included by test_cuda_ops.c only. (Split out to keep
// that file under 800 lines.)
#ifndef OCTET_CUDA_OPS_UTIL_H
#define OCTET_CUDA_OPS_UTIL_H

static struct backend *cpu, *gpu;
static json_t *report;
static struct rng rng;

static void record(const char *name, double nmse, double bound, const char *extra) {
    json_t *o = json_pack("{s:s,s:f,s:f,s:b}", "check", name, "nmse", nmse, "bound", bound, "ok", nmse <= bound);
    if (extra) json_object_set_new(o, "detail", json_string(extra));
    json_array_append_new(report, o);
    CHECK_MSG(nmse <= bound, "%s: NMSE %.3g > %.3g", name, nmse, bound);
    fprintf(stderr, "  %-52s NMSE %.3g (bound %.0e)\n", name, nmse, bound);
}

// n random bf16-representable floats in (-amp, amp)
static float *rand_vec(size_t n, float amp) {
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = bf16_to_f32(f32_to_bf16((2 * rng_float(&rng) - 1) * amp));
    return v;
}

// Uploads f32 host values as the backend's activation dtype.
static void *to_dev(struct backend *b, const float *x, size_t n) {
    void *d = b->ops->alloc(b, n * dtype_size(b->ops->act_dtype));
    if (b->ops->act_dtype == DT_F32) b->ops->upload(b, d, x, n * 4);
    else {
        uint16_t *h = malloc(n * 2);
        for (size_t i = 0; i < n; i++) h[i] = f32_to_bf16(x[i]);
        b->ops->upload(b, d, h, n * 2);
        free(h);
    }
    return d;
}
static float *to_host(struct backend *b, const void *d, size_t n) {
    float *h = malloc(n * sizeof(float));
    b->ops->download_f32(b, h, d, n);
    return h;
}
static double nmse(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        num += (double)(a[i] - ref[i]) * (a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static struct weight make_weight(int64_t rows, int64_t cols, float amp) {
    struct weight w = {DT_BF16, rows, cols, NULL, NULL, {0}, 0};
    uint16_t *h = malloc((size_t)(rows * cols) * 2);
    for (int64_t i = 0; i < rows * cols; i++) h[i] = f32_to_bf16((2 * rng_float(&rng) - 1) * amp);
    w.data = h;
    return w;
}

// batch of one or more sequences with given query counts and context lengths
struct tb {
    struct batch b;
    int32_t tok[8192], pos[8192], slot[8192], qs[9], sl[8], btab[8 * 1024], rows[8];
};
static void make_batch(struct tb *t, int n_seqs, const int *n_q, const int *ctx, int bs, int max_blocks) {
    int nt = 0;
    for (int s = 0; s < n_seqs; s++) {
        t->qs[s] = nt;
        for (int i = 0; i < max_blocks; i++) t->btab[s * max_blocks + i] = (s * max_blocks + i) * 7 % (n_seqs * max_blocks);
        for (int i = 0; i < n_q[s]; i++, nt++) {
            int p = ctx[s] - n_q[s] + i;
            t->tok[nt] = (int32_t)(rng_next(&rng) % 500);
            t->pos[nt] = p;
            t->slot[nt] = t->btab[s * max_blocks + p / bs] * bs + p % bs;
        }
        t->sl[s] = ctx[s];
        t->rows[s] = nt - 1;
    }
    t->qs[n_seqs] = nt;
    t->b = (struct batch){.n_tokens = nt, .token_ids = t->tok, .positions = t->pos, .slot_mapping = t->slot, .n_seqs = n_seqs,
                          .query_start = t->qs, .seq_lens = t->sl, .block_tables = t->btab, .max_blocks_per_seq = max_blocks,
                          .n_logits = n_seqs, .logits_rows = t->rows};
}

// Writes each sequence's K and V rows (k, v: [sum of ctx][n_kv][hd], sequence after sequence) into both
// backends' layers (bk[i] into L[i]) at t's block tables, in kv_write batches of at most 8192 tokens (w:
// scratch batch). Returns the first sync error, or 0.
static int kv_fill(struct backend *const bk[2], struct kv_layer L[2], struct tb *w, const struct tb *t, const float *k,
                   const float *v, int n_seqs, const int *ctx, int n_kv, int hd, int bs, int max_blocks) {
    int err = 0;
    for (int s = 0, off = 0; s < n_seqs; off += ctx[s], s++)
        for (int p0 = 0; p0 < ctx[s]; p0 += 8192) {
            int m = ctx[s] - p0 < 8192 ? ctx[s] - p0 : 8192, one_q[1] = {m}, one_ctx[1] = {p0 + m};
            make_batch(w, 1, one_q, one_ctx, bs, max_blocks);
            for (int i = 0; i < max_blocks; i++) w->btab[i] = t->btab[s * max_blocks + i];
            for (int i = 0; i < m; i++) w->slot[i] = w->btab[(p0 + i) / bs] * bs + (p0 + i) % bs;
            for (int i = 0; i < 2; i++) {
                void *dk = to_dev(bk[i], k + (size_t)(off + p0) * n_kv * hd, (size_t)m * n_kv * hd);
                void *dv = to_dev(bk[i], v + (size_t)(off + p0) * n_kv * hd, (size_t)m * n_kv * hd);
                bk[i]->ops->batch_begin(bk[i], &w->b);
                bk[i]->ops->kv_write(bk[i], &L[i], dk, dv, &w->b);
                int e = bk[i]->ops->sync(bk[i]);
                if (e && !err) err = e;
                bk[i]->ops->free(bk[i], dk);
                bk[i]->ops->free(bk[i], dv);
            }
        }
    return err;
}

#endif
