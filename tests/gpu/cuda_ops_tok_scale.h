// cuda_ops_tok_scale.h — test_cuda_ops.c's checks of per-token-head FP8 KV scales
// (--kv-cache-dtype fp8_per_token_head, docs/kv_format.md) on the CUDA backend against the CPU
// backend: kv_write's codes and row scales byte for byte (pages first filled with 0x5A: unwritten rows
// hold codes of 20 and scales of 1.5e16, finite as every page byte is — docs/kv_format.md — but far
// off any real row, so a kernel that gives an unwritten row any weight fails), attention of every kernel that takes
// such layers (decode at G 1..8, head_dim 64/128/256, blocks 16/64, windows, K offsets, soft-capping;
// chunked prefill against a cached prefix in every FP8 accumulation mode; --batch-invariant), the
// table entry each shape takes, --batch-invariant's prefill-vs-decode identity, the fused attn_in's
// RoPE + cache write, and a range case (K and V 1000× larger than usual) where the per-tensor scale
// saturates and the per-row scales do not.
// Included by test_cuda_ops.c after cuda_ops_fp8_prefill.h (accs, acc_names, WGMMA_BOUND,
// fp8_mma_kernel); tok_scale_attention is its one test.
#pragma once

#include "../../src/model/kv_cache.h"  // kv_layer_bytes

// One per-token-head case's settings beyond its shape.
struct tok_opts {
    int bs;                 // kv_block_tokens
    int window;             // sliding window (0: none)
    const float *k_offset;  // [n_kv][hd] K offsets or NULL
    float k_amp, v_amp, q_amp;  // amplitudes of the random K, V, q
    bool vary;              // each (token, head) row of K and V times 2^(-4..4): row scales 256× apart
    float softcap;          // attn_params.softcap
    int acc;                // attn_params.fp8_accum
    const char *expect;     // the table entry the shape must take, or NULL
    double bound;           // NMSE bound against the CPU (exact FP8 math; emulation for FP8-MMA kernels)
};

// A page allocation of the layer with its row scales after the data (kv_cache_alloc's layout),
// every byte 0x5A.
static void tok_alloc(struct backend *b, struct kv_layer *L, int n_blocks, size_t *bytes) {
    size_t at;
    *bytes = kv_layer_bytes(L, true, n_blocks, &at);
    char *ff = malloc(*bytes);
    memset(ff, 0x5A, *bytes);
    L->k = b->ops->alloc(b, *bytes);
    L->v = b->ops->alloc(b, *bytes);
    b->ops->upload(b, L->k, ff, *bytes);
    b->ops->upload(b, L->v, ff, *bytes);
    free(ff);
    L->k_tok_scale = (float *)((char *)L->k + at);
    L->v_tok_scale = (float *)((char *)L->v + at);
}

// Row r of n rows of hd values scaled by 2^((r·5 mod 9) − 4) (exact: bf16 values stay bf16).
static void tok_vary_rows(float *x, size_t n_rows, int hd, int salt) {
    for (size_t r = 0; r < n_rows; r++) {
        float f = ldexpf(1.0f, (int)((r * 5 + (size_t)salt) % 9) - 4);
        for (int i = 0; i < hd; i++) x[r * hd + i] *= f;
    }
}

// Compares the GPU's and the CPU's K or V allocation: codes and scales separately, naming the first
// differing row.
static void tok_compare_pages(const char *label, const char *what, const struct kv_layer *Lc, const struct kv_layer *Lg,
                              bool is_v, size_t bytes) {
    size_t at = (size_t)((const char *)(is_v ? Lc->v_tok_scale : Lc->k_tok_scale) - (const char *)(is_v ? Lc->v : Lc->k));
    const char *pc = is_v ? Lc->v : Lc->k;
    char *pg = malloc(bytes);
    gpu->ops->download(gpu, pg, is_v ? Lg->v : Lg->k, bytes);
    size_t n_codes = 0, n_sc = 0, first_c = SIZE_MAX, first_s = SIZE_MAX;
    for (size_t i = 0; i < at; i++)
        if (pg[i] != pc[i]) { n_codes++; if (first_c == SIZE_MAX) first_c = i; }
    for (size_t i = at; i < bytes; i++)
        if (pg[i] != pc[i]) { n_sc++; if (first_s == SIZE_MAX) first_s = i; }
    char name[200], detail[200];
    const int hd = Lc->head_dim, bs = Lc->kv_block_tokens, nkv = Lc->n_kv_heads;
    snprintf(name, sizeof name, "tok kv_write %s codes identical, bytes differing (%s)", what, label);
    if (n_codes) {
        size_t row = first_c / hd;
        snprintf(detail, sizeof detail, "first at block %zu head %zu row %zu dim %zu: gpu 0x%02x cpu 0x%02x", row / bs / nkv,
                 row / bs % nkv, row % bs, first_c % hd, (unsigned char)pg[first_c], (unsigned char)pc[first_c]);
        fprintf(stderr, "  %s: %s\n", name, detail);
    }
    record(name, (double)n_codes, 0, n_codes ? detail : NULL);
    snprintf(name, sizeof name, "tok kv_write %s row scales identical, bytes differing (%s)", what, label);
    if (n_sc) {
        size_t row = (first_s - at) / 4;
        float g, c;
        memcpy(&g, pg + at + row * 4, 4);
        memcpy(&c, pc + at + row * 4, 4);
        snprintf(detail, sizeof detail, "first at block %zu head %zu row %zu: gpu %.9g cpu %.9g", row / bs / nkv, row / bs % nkv,
                 row % bs, g, c);
        fprintf(stderr, "  %s: %s\n", name, detail);
    }
    record(name, (double)n_sc, 0, n_sc ? detail : NULL);
    free(pg);
}

// The table entry per-token-head prefill steps take (tok_expect): the FP8 TMA kernel at head_dim 64 and
// 128 where 64 % G == 0, else the rows scaled into bf16.
#define TOK_PREFILL_KERNEL "(the prefill kernel of the shape)"
static const char *tok_expect(const char *expect, int hd, int G) {
    if (!expect || strcmp(expect, TOK_PREFILL_KERNEL)) return expect;
    return (hd == 64 || hd == 128) && 64 % G == 0 ? "prefill_fp8_tma" : "prefill_f16_cvt";
}

// kv_write of the whole context on both backends (chunks of at most 8192 tokens), then the pages
// compared and attention of the batch's queries on both compared; the GPU output is returned in
// *gpu_out when asked (the range case compares it with more references).
static void tok_case(const char *label, int hd, int n_kv, int G, int n_seqs, const int *n_q, const int *ctx,
                     const struct tok_opts *o, float **gpu_out) {
    const int bs = o->bs;
    int max_ctx = 0, total = 0;
    for (int s = 0; s < n_seqs; s++) { max_ctx = ctx[s] > max_ctx ? ctx[s] : max_ctx; total += ctx[s]; }
    const int max_blocks = (max_ctx + bs - 1) / bs, n_blocks = max_blocks * n_seqs;
    struct tb *t = malloc(sizeof *t), *w = malloc(sizeof *w);
    make_batch(t, n_seqs, n_q, ctx, bs, max_blocks);
    struct kv_layer L[2];
    struct backend *bk[2] = {cpu, gpu};
    size_t bytes = 0;
    for (int i = 0; i < 2; i++) {
        L[i] = (struct kv_layer){.dtype = DT_E4M3, .n_kv_heads = n_kv, .head_dim = hd, .kv_block_tokens = bs,
                                 .n_blocks = n_blocks, .window = o->window};
        for (int h = 0; h < n_kv; h++) L[i].k_scale[h] = L[i].v_scale[h] = 1.0f;  // (kv_cache_plan's for such layers)
        L[i].k_offset = o->k_offset;
        tok_alloc(bk[i], &L[i], n_blocks, &bytes);
    }
    struct attn_params ap = {.n_heads = n_kv * G, .softmax_scale = 1.0f / sqrtf((float)hd), .fp8_math = ATTN_FP8_EXACT,
                             .fp8_accum = o->acc, .softcap = o->softcap};
    gpu->ops->batch_begin(gpu, &t->b);
    const char *kernel = cuda_attention_pick(gpu, &L[1], &ap, &t->b);
    if (case_forced && !kernel) {  // (a forced entry that does not take this shape)
        for (int i = 0; i < 2; i++) { bk[i]->ops->free(bk[i], L[i].k); bk[i]->ops->free(bk[i], L[i].v); }
        free(t); free(w);
        return;
    }
    count_kernel(kernel);
    char name[200], detail[160];
    const char *expect = tok_expect(o->expect, hd, G);
    if (expect && !case_forced) {
        snprintf(name, sizeof name, "tok %s takes %s", label, expect);
        snprintf(detail, sizeof detail, "picked %s", kernel ? kernel : "none");
        record(name, kernel && !strcmp(kernel, expect) ? 0.0 : 1.0, 0, detail);
    }
    float *k = rand_vec((size_t)total * n_kv * hd, o->k_amp), *v = rand_vec((size_t)total * n_kv * hd, o->v_amp);
    if (o->vary) { tok_vary_rows(k, (size_t)total * n_kv, hd, 0); tok_vary_rows(v, (size_t)total * n_kv, hd, 4); }
    const size_t nout = (size_t)t->b.n_tokens * n_kv * G * hd;
    float *q = rand_vec(nout, o->q_amp);
    CHECK_OK(kv_fill(bk, L, w, t, k, v, n_seqs, ctx, n_kv, hd, bs, max_blocks));
    tok_compare_pages(label, "K", &L[0], &L[1], false, bytes);
    tok_compare_pages(label, "V", &L[0], &L[1], true, bytes);
    // FP8-MMA kernels (Q and P in e4m3) against the CPU's emulation of them; every other kernel widens
    // the codes exactly
    const bool emu = fp8_mma_kernel(kernel);
    ap.fp8_math = emu ? ATTN_FP8_EMULATE : ATTN_FP8_EXACT;
    float *out[2];
    for (int i = 0; i < 2; i++) {
        void *dq = to_dev(bk[i], q, nout), *dout = bk[i]->ops->alloc(bk[i], nout * 4);
        bk[i]->ops->batch_begin(bk[i], &t->b);
        bk[i]->ops->attention(bk[i], dout, dq, &L[i], &ap, &t->b);
        CHECK_OK(bk[i]->ops->sync(bk[i]));
        out[i] = to_host(bk[i], dout, nout);
        bk[i]->ops->free(bk[i], dq);
        bk[i]->ops->free(bk[i], dout);
        bk[i]->ops->free(bk[i], L[i].k);
        bk[i]->ops->free(bk[i], L[i].v);
    }
    snprintf(name, sizeof name, "tok attention %s%s%s%s", label, emu ? " vs emulate" : "", case_forced ? " on " : "",
             case_forced ? case_forced : "");
    snprintf(detail, sizeof detail, "gpu_fnv1a %016llx kernel %s",
             (unsigned long long)rng_hash_bytes(out[1], nout * sizeof(float)), kernel ? kernel : "none");
    // prefill_f16_cvt stores each row times its scale as bf16 (8 significant bits) and runs P in bf16:
    // tools/ref/ref_tok_scale_nmse.py's model of that arithmetic gives NMSE 8e-6 against exact for these
    // inputs (2e-6 to 7e-5 with rows 2^-4..2^4; decode_t's model 2e-8 to 4e-8), so its bounds are three
    // times the others'
    const double bound = emu ? WGMMA_BOUND : kernel && !strcmp(kernel, "prefill_f16_cvt") ? 3 * o->bound : o->bound;
    record(name, nmse(out[1], out[0], nout), bound, detail);
    if (gpu_out) *gpu_out = out[1];
    else free(out[1]);
    free(out[0]); free(k); free(v); free(q); free(t); free(w);
}

static struct tok_opts tok_defaults(int bs, const char *expect) {
    return (struct tok_opts){.bs = bs, .k_amp = 3.0f, .v_amp = 2.0f, .q_amp = 1.0f, .expect = expect, .bound = 2e-5};
}

// Decode at the shapes decode_t takes (G 1, 4, 8; head_dim 64, 128, 256; 16- and 64-token blocks;
// windows; K offsets; rows whose scales differ 256×; soft-capping).
static void tok_decode_cases(void) {
    int q3[3] = {1, 1, 1}, c3[3] = {1, 777, 20000}, q2[2] = {1, 1}, c2[2] = {5000, 33}, q1[1] = {1}, c1[1] = {40000};
    static const int bss[2] = {16, 64};
    float *ko = rand_vec(8 * 256, 4.0f);
    for (int b = 0; b < 2; b++) {
        char label[160];
        struct tok_opts o = tok_defaults(bss[b], "decode_t");
        const int bs = bss[b];
        snprintf(label, sizeof label, "decode hd128 G4 B3 bs%d", bs);
        tok_case(label, 128, 8, 4, 3, q3, c3, &o, NULL);
        snprintf(label, sizeof label, "decode hd64 G8 B2 bs%d", bs);
        tok_case(label, 64, 8, 8, 2, q2, c2, &o, NULL);
        snprintf(label, sizeof label, "decode hd256 G1 B1 40k bs%d", bs);
        tok_case(label, 256, 4, 1, 1, q1, c1, &o, NULL);
        snprintf(label, sizeof label, "decode hd128 G1 B1 40k bs%d", bs);
        tok_case(label, 128, 8, 1, 1, q1, c1, &o, NULL);
        snprintf(label, sizeof label, "decode hd256 G8 B2 bs%d", bs);
        tok_case(label, 256, 2, 8, 2, q2, c2, &o, NULL);
        snprintf(label, sizeof label, "decode hd64 G3 B3 bs%d", bs);
        tok_case(label, 64, 4, 3, 3, q3, c3, &o, NULL);
        o.window = 200;
        snprintf(label, sizeof label, "decode hd64 G8 window 200 bs%d", bs);
        tok_case(label, 64, 8, 8, 2, q2, c2, &o, NULL);
        o.window = 512;
        snprintf(label, sizeof label, "decode hd256 G2 window 512 bs%d", bs);
        tok_case(label, 256, 4, 2, 2, q2, c2, &o, NULL);
        o.window = 0;
        o.k_offset = ko;
        snprintf(label, sizeof label, "decode hd128 G4 B3 K offsets bs%d", bs);
        tok_case(label, 128, 8, 4, 3, q3, c3, &o, NULL);
        snprintf(label, sizeof label, "decode hd256 G2 B2 K offsets bs%d", bs);
        tok_case(label, 256, 4, 2, 2, q2, c2, &o, NULL);
        o.k_offset = NULL;
        // row amplitudes 2^-4..2^4: the V reference scale of decode_t is raised mid-stream and small
        // rows' P·s_v/r shrinks in the f16 operand (NMSE bound 1e-4)
        o.vary = true;
        o.bound = 1e-4;
        snprintf(label, sizeof label, "decode hd128 G4 B3 rows 2^-4..2^4 bs%d", bs);
        tok_case(label, 128, 8, 4, 3, q3, c3, &o, NULL);
        snprintf(label, sizeof label, "decode hd256 G8 B2 rows 2^-4..2^4 bs%d", bs);
        tok_case(label, 256, 2, 8, 2, q2, c2, &o, NULL);
        o.vary = false;
        o.bound = 2e-5;
        o.softcap = 30.0f;
        snprintf(label, sizeof label, "decode hd128 G4 B3 softcap 30 bs%d", bs);
        tok_case(label, 128, 8, 4, 3, q3, c3, &o, NULL);
        o.softcap = 0.0f;
    }
    free(ko);
}

// Chunked prefill (queries after a cached prefix, beside a decode row) at head_dim 64, 128 and 256,
// windows and K offsets, in each FP8 accumulation mode (the kernel's own; kernels that widen FP8
// exactly ignore the mode); the stories260K shape; then --batch-invariant.
static void tok_prefill_cases(void) {
    int qa[2] = {300, 1}, ca[2] = {500, 900}, qb[2] = {200, 77}, cb[2] = {4096, 3000}, qc[1] = {700}, cc[1] = {700};
    float *ko = rand_vec(8 * 256, 4.0f);
    for (int a = 0; a < 3; a++) {
        char label[160];
        for (int b = 0; b < 2; b++) {
            const int bs = b ? 64 : 16;
            struct tok_opts o = tok_defaults(bs, TOK_PREFILL_KERNEL);
            o.acc = accs[a];
            snprintf(label, sizeof label, "prefill+decode hd128 G4 bs%d %s", bs, acc_names[a]);
            tok_case(label, 128, 8, 4, 2, qa, ca, &o, NULL);
            snprintf(label, sizeof label, "chunked prefill hd128 G4 L4096 bs%d %s", bs, acc_names[a]);
            tok_case(label, 128, 8, 4, 2, qb, cb, &o, NULL);
            snprintf(label, sizeof label, "chunked prefill hd256 G2 L4096 bs%d %s", bs, acc_names[a]);
            tok_case(label, 256, 4, 2, 2, qb, cb, &o, NULL);
            snprintf(label, sizeof label, "prefill hd64 G8 700 bs%d %s", bs, acc_names[a]);
            tok_case(label, 64, 8, 8, 1, qc, cc, &o, NULL);
            o.window = 1000;
            snprintf(label, sizeof label, "chunked prefill hd128 G1 window 1000 bs%d %s", bs, acc_names[a]);
            tok_case(label, 128, 4, 1, 2, qb, cb, &o, NULL);
            o.window = 0;
            o.k_offset = ko;
            snprintf(label, sizeof label, "chunked prefill hd128 G4 K offsets bs%d %s", bs, acc_names[a]);
            tok_case(label, 128, 8, 4, 2, qb, cb, &o, NULL);
            snprintf(label, sizeof label, "prefill+decode hd256 G2 K offsets bs%d %s", bs, acc_names[a]);
            tok_case(label, 256, 4, 2, 2, qa, ca, &o, NULL);
            o.k_offset = NULL;
            o.vary = true;
            o.bound = 1e-4;
            snprintf(label, sizeof label, "chunked prefill hd128 G4 rows 2^-4..2^4 bs%d %s", bs, acc_names[a]);
            tok_case(label, 128, 8, 4, 2, qb, cb, &o, NULL);
        }
    }
    // group sizes the prefill tiles pad (G 3) and decode steps decode_t does not take (G 16)
    {
        struct tok_opts o = tok_defaults(64, TOK_PREFILL_KERNEL);
        int q1[2] = {1, 1}, c1[2] = {3000, 33};
        tok_case("prefill+decode hd128 G3 bs64", 128, 4, 3, 2, qa, ca, &o, NULL);
        tok_case("decode hd128 G16 bs64", 128, 2, 16, 2, q1, c1, &o, NULL);
    }
    // blocks TMA cannot box (24 tokens: neither divides nor is divided by a 128-key tile) and that are
    // not 16·2^k tokens: the SIMT prefill, for decode too
    int qd[2] = {1, 1}, cd[2] = {3000, 33};
    struct tok_opts o = tok_defaults(24, "prefill_simt");
    tok_case("prefill+decode hd128 G4 bs24", 128, 8, 4, 2, qa, ca, &o, NULL);
    tok_case("chunked prefill hd256 G2 bs24", 256, 4, 2, 2, qb, cb, &o, NULL);
    tok_case("decode hd64 G8 bs24", 64, 8, 8, 2, qd, cd, &o, NULL);
    o.window = 300;
    o.k_offset = ko;
    tok_case("prefill+decode hd128 G4 window 300 K offsets bs24", 128, 8, 4, 2, qa, ca, &o, NULL);
    o.window = 0;
    o.k_offset = NULL;
    int q5[2] = {40, 1}, c5[2] = {100, 300};
    o = tok_defaults(16, "generic");
    tok_case("stories260K shape hd8 G2", 8, 4, 2, 2, q5, c5, &o, NULL);
    o.k_offset = ko;
    tok_case("stories260K shape hd8 G2 K offsets", 8, 4, 2, 2, q5, c5, &o, NULL);
    o.k_offset = NULL;
    o.softcap = 50.0f;
    o.expect = TOK_PREFILL_KERNEL;
    tok_case("prefill+decode hd128 G4 softcap 50", 128, 8, 4, 2, qa, ca, &o, NULL);
    o.softcap = 0.0f;
    // --batch-invariant: every row through decode_invariant's per-token-head form (head_dim 64, 128),
    // the generic kernel for head_dim 256
    const bool inv = gpu->batch_invariant;
    gpu->batch_invariant = true;
    o.expect = "decode_invariant";
    tok_case("batch-invariant decode hd128 G4", 128, 8, 4, 2, qd, cd, &o, NULL);
    tok_case("batch-invariant prefill+decode hd128 G4", 128, 8, 4, 2, qa, ca, &o, NULL);
    o.window = 200;
    tok_case("batch-invariant prefill+decode hd64 G8 window 200", 64, 8, 8, 2, qa, ca, &o, NULL);
    o.window = 0;
    o.expect = "generic";
    tok_case("batch-invariant prefill+decode hd256 G2", 256, 4, 2, 2, qa, ca, &o, NULL);
    gpu->batch_invariant = inv;
    free(ko);
}

// K and V 1000× larger than usual (q 1000× smaller, so the scores are as usual): per-row scales keep
// the GPU's decode and prefill within the e4m3 rounding of the exact attention over an f32 cache
// (CPU), while a per-tensor e4m3 cache at scale 1.0 saturates at ±448 and is far off.
static void tok_range_case(const char *label, int hd, int n_kv, int G, int n_seqs, const int *n_q, const int *ctx,
                           const char *expect) {
    const int bs = 16;
    struct tok_opts o = tok_defaults(bs, expect);
    o.k_amp = 3000.0f;
    o.v_amp = 2000.0f;
    o.q_amp = 1e-3f;
    o.bound = 2e-5;
    // the same inputs for the f32 reference: rng state saved and restored
    const struct rng saved = rng;
    float *g_out = NULL;
    tok_case(label, hd, n_kv, G, n_seqs, n_q, ctx, &o, &g_out);
    const struct rng after = rng;
    int max_ctx = 0, total = 0;
    for (int s = 0; s < n_seqs; s++) { max_ctx = ctx[s] > max_ctx ? ctx[s] : max_ctx; total += ctx[s]; }
    const int max_blocks = (max_ctx + bs - 1) / bs, n_blocks = max_blocks * n_seqs;
    double err[2] = {0, 0};  // [0]: f32 cache vs per-row e4m3 on the GPU; [1]: vs per-tensor e4m3 (scale 1) on the CPU
    float *ref = NULL;
    for (int pass = 0; pass < 2; pass++) {
        rng = saved;
        struct tb *t = malloc(sizeof *t), *w = malloc(sizeof *w);
        make_batch(t, n_seqs, n_q, ctx, bs, max_blocks);
        float *k = rand_vec((size_t)total * n_kv * hd, o.k_amp), *v = rand_vec((size_t)total * n_kv * hd, o.v_amp);
        const size_t nout = (size_t)t->b.n_tokens * n_kv * G * hd;
        float *q = rand_vec(nout, o.q_amp);
        const enum dtype dt = pass ? DT_E4M3 : DT_F32;
        struct kv_layer L = {.dtype = dt, .n_kv_heads = n_kv, .head_dim = hd, .kv_block_tokens = bs, .n_blocks = n_blocks};
        for (int h = 0; h < n_kv; h++) L.k_scale[h] = L.v_scale[h] = 1.0f;
        const size_t bytes = (size_t)n_blocks * n_kv * bs * hd * dtype_size(dt);
        L.k = cpu->ops->alloc(cpu, bytes);
        L.v = cpu->ops->alloc(cpu, bytes);
        int off = 0;
        for (int s = 0; s < n_seqs; s++) {
            int m = ctx[s], one_q[1] = {m}, one_ctx[1] = {m};
            make_batch(w, 1, one_q, one_ctx, bs, max_blocks);
            for (int i = 0; i < max_blocks; i++) w->btab[i] = t->btab[s * max_blocks + i];
            for (int i = 0; i < m; i++) w->slot[i] = w->btab[i / bs] * bs + i % bs;
            cpu->ops->batch_begin(cpu, &w->b);
            cpu->ops->kv_write(cpu, &L, k + (size_t)off * n_kv * hd, v + (size_t)off * n_kv * hd, &w->b);
            off += m;
        }
        const struct attn_params ap = {.n_heads = n_kv * G, .softmax_scale = 1.0f / sqrtf((float)hd)};
        float *out = malloc(nout * sizeof(float));
        cpu->ops->batch_begin(cpu, &t->b);
        cpu->ops->attention(cpu, out, q, &L, &ap, &t->b);
        CHECK_OK(cpu->ops->sync(cpu));
        if (!pass) { ref = out; err[0] = nmse(g_out, ref, nout); }
        else { err[1] = nmse(out, ref, nout); free(out); }
        cpu->ops->free(cpu, L.k); cpu->ops->free(cpu, L.v);
        free(k); free(v); free(q); free(t); free(w);
    }
    rng = after;
    char name[200];
    snprintf(name, sizeof name, "tok range %s: gpu per-row e4m3 vs f32 cache", label);
    record(name, err[0], 5e-3, NULL);  // (e4m3's 3 mantissa bits: about 1e-3)
    snprintf(name, sizeof name, "tok range %s: per-tensor e4m3 (scale 1) is off, 1/NMSE vs f32", label);
    record(name, err[1] > 0 ? 1.0 / err[1] : INFINITY, 10.0, NULL);  // (saturated: NMSE > 0.1)
    free(ref);
    free(g_out);
}

// attn_in on a per-token-head layer (the Q|K|V GEMM, then RoPE and k_kv_write_tok: the fused decode
// epilogue does not take such layers): its pages, codes and row scales, equal byte for byte those
// of kv_write on the GPU and on the CPU given the roped K and the V that attn_in leaves in its
// outputs; every written row has a finite positive scale. n decode tokens or a 37-token chunk.
static void tok_attn_in_case(int n, bool offsets) {
    const int dim = 1024, hd = 128, nh = 32, nkv = 8, bs = 16, mb = 64, qd = nh * hd, kd = nkv * hd;
    struct tb *t = malloc(sizeof *t);
    int nq[8], ctx[8];
    const int n_seqs = n <= 8 ? n : 1;
    for (int s = 0; s < n_seqs; s++) { nq[s] = n <= 8 ? 1 : n; ctx[s] = 300 + 97 * s + nq[s]; }
    make_batch(t, n_seqs, nq, ctx, bs, mb);
    struct rope_config rc = {.theta = 500000, .n_rot = hd, .neox = true, .scaling = ROPE_SCALING_LLAMA3, .factor = 8,
                             .orig_max_pos = 8192, .low_freq_factor = 1, .high_freq_factor = 4};
    struct rope_table rt;
    rope_table_init(&rt, &rc);
    struct weight w[4] = {make_weight(qd, dim, 0.05f), make_weight(kd, dim, 0.05f), make_weight(kd, dim, 0.05f),
                          make_weight(1, dim, 1.0f)};
    for (int k = 0; k < 4; k++) CHECK_OK(gpu->ops->weight_upload(gpu, &w[k]));
    float *x = rand_vec((size_t)n * dim, 2.0f), *ko = offsets ? rand_vec((size_t)kd, 1.0f) : NULL;
    struct kv_layer L[3];  // 0: attn_in's (GPU); 1: kv_write on the GPU; 2: kv_write on the CPU
    struct backend *bk[3] = {gpu, gpu, cpu};
    size_t bytes = 0;
    for (int i = 0; i < 3; i++) {
        L[i] = (struct kv_layer){.dtype = DT_E4M3, .n_kv_heads = nkv, .head_dim = hd, .kv_block_tokens = bs,
                                 .n_blocks = mb * n_seqs};
        for (int h = 0; h < nkv; h++) L[i].k_scale[h] = L[i].v_scale[h] = 1.0f;
        L[i].k_offset = ko;
        tok_alloc(bk[i], &L[i], mb * n_seqs, &bytes);
    }
    CHECK_OK(gpu->ops->batch_begin(gpu, &t->b));
    void *dx = to_dev(gpu, x, (size_t)n * dim), *xn = gpu->ops->alloc(gpu, (size_t)n * dim * 4), *d[3];
    const int wd[3] = {qd, kd, kd};
    for (int k = 0; k < 3; k++) d[k] = gpu->ops->alloc(gpu, (size_t)n * wd[k] * 4);
    const struct attn_in_args a = {d[0], d[1], d[2], xn, dx, &w[3], &w[0], &w[1], &w[2], 1e-5f, nh, &rt, &L[0]};
    gpu->ops->attn_in(gpu, &a, &t->b);
    gpu->ops->kv_write(gpu, &L[1], d[1], d[2], &t->b);  // (d[1]: K after RoPE)
    float *kr = to_host(gpu, d[1], (size_t)n * kd), *vr = to_host(gpu, d[2], (size_t)n * kd);
    CHECK_OK(gpu->ops->sync(gpu));
    cpu->ops->batch_begin(cpu, &t->b);
    cpu->ops->kv_write(cpu, &L[2], kr, vr, &t->b);
    char *pages[3][2];
    for (int i = 0; i < 3; i++)
        for (int kv = 0; kv < 2; kv++) {
            pages[i][kv] = malloc(bytes);
            if (bk[i] == gpu) gpu->ops->download(gpu, pages[i][kv], kv ? L[i].v : L[i].k, bytes);
            else memcpy(pages[i][kv], kv ? L[i].v : L[i].k, bytes);
        }
    CHECK_OK(gpu->ops->sync(gpu));
    int diff_gpu = 0, diff_cpu = 0;
    for (int kv = 0; kv < 2; kv++) {
        diff_gpu += memcmp(pages[0][kv], pages[1][kv], bytes) != 0;
        diff_cpu += memcmp(pages[0][kv], pages[2][kv], bytes) != 0;
    }
    size_t at;
    kv_layer_bytes(&L[0], true, mb * n_seqs, &at);
    int bad = 0;
    for (int tk = 0; tk < t->b.n_tokens; tk++)
        for (int h = 0; h < nkv; h++) {
            const int slot = t->slot[tk];
            const size_t row = ((size_t)(slot / bs) * nkv + h) * bs + slot % bs;
            float sk, sv;
            memcpy(&sk, pages[0][0] + at + row * 4, 4);
            memcpy(&sv, pages[0][1] + at + row * 4, 4);
            bad += !(sk > 0 && isfinite(sk)) || !(sv > 0 && isfinite(sv));
        }
    char name[160];
    const char *what = offsets ? ", K offsets" : "";
    snprintf(name, sizeof name, "tok attn_in pages = kv_write's on the GPU (n=%d%s): K/V differing", n, what);
    record(name, diff_gpu, 0, NULL);
    snprintf(name, sizeof name, "tok attn_in pages = kv_write's on the CPU (n=%d%s): K/V differing", n, what);
    record(name, diff_cpu, 0, NULL);
    snprintf(name, sizeof name, "tok attn_in rows stored with a scale (n=%d%s): rows without", n, what);
    record(name, bad, 0, NULL);
    for (int i = 0; i < 3; i++) {
        free(pages[i][0]); free(pages[i][1]);
        bk[i]->ops->free(bk[i], L[i].k); bk[i]->ops->free(bk[i], L[i].v);
    }
    for (int k = 0; k < 3; k++) gpu->ops->free(gpu, d[k]);
    gpu->ops->free(gpu, dx); gpu->ops->free(gpu, xn);
    for (int k = 0; k < 4; k++) { gpu->ops->weight_release(gpu, &w[k]); free((void *)w[k].data); }
    free(x); free(ko); free(kr); free(vr); free(t);
}

// --batch-invariant with a per-token-head layer: attention of a 700-row prefill equals, bit for bit,
// that of 1-row decode steps at positions 0, 15, 16, 300 and 699 over the same cache (head_dim 128, G4).
static void tok_identity_case(void) {
    const int hd = 128, n_kv = 8, G = 4, bs = 16, ctx = 700, max_blocks = (ctx + bs - 1) / bs;
    const bool inv = gpu->batch_invariant;
    gpu->batch_invariant = true;
    struct tb *t = malloc(sizeof *t);
    int nq[1] = {ctx}, cx[1] = {ctx};
    make_batch(t, 1, nq, cx, bs, max_blocks);
    struct kv_layer L = {.dtype = DT_E4M3, .n_kv_heads = n_kv, .head_dim = hd, .kv_block_tokens = bs, .n_blocks = max_blocks};
    for (int h = 0; h < n_kv; h++) L.k_scale[h] = L.v_scale[h] = 1.0f;
    size_t bytes;
    tok_alloc(gpu, &L, max_blocks, &bytes);
    const size_t row = (size_t)n_kv * G * hd;
    float *k = rand_vec((size_t)ctx * n_kv * hd, 3.0f), *v = rand_vec((size_t)ctx * n_kv * hd, 2.0f), *q = rand_vec(ctx * row, 1.0f);
    tok_vary_rows(v, (size_t)ctx * n_kv, hd, 4);  // (V's reference scale rises along the sequence)
    void *dk = to_dev(gpu, k, (size_t)ctx * n_kv * hd), *dv = to_dev(gpu, v, (size_t)ctx * n_kv * hd);
    void *dq = to_dev(gpu, q, ctx * row), *dout = gpu->ops->alloc(gpu, ctx * row * 4), *d1 = gpu->ops->alloc(gpu, row * 4);
    const struct attn_params ap = {.n_heads = n_kv * G, .softmax_scale = 1.0f / sqrtf((float)hd)};
    gpu->ops->batch_begin(gpu, &t->b);
    gpu->ops->kv_write(gpu, &L, dk, dv, &t->b);
    const char *kernel = cuda_attention_pick(gpu, &L, &ap, &t->b);
    gpu->ops->attention(gpu, dout, dq, &L, &ap, &t->b);
    float *pre = to_host(gpu, dout, ctx * row);
    const int at[5] = {0, 15, 16, 300, ctx - 1};
    double worst = 0;
    for (int i = 0; i < 5; i++) {
        struct tb *u = malloc(sizeof *u);
        int one[1] = {1}, c1[1] = {at[i] + 1};
        make_batch(u, 1, one, c1, bs, max_blocks);  // (the same block table)
        void *dq1 = to_dev(gpu, q + (size_t)at[i] * row, row);
        gpu->ops->batch_begin(gpu, &u->b);
        gpu->ops->attention(gpu, d1, dq1, &L, &ap, &u->b);
        float *dec = to_host(gpu, d1, row);
        for (size_t j = 0; j < row; j++) worst = fmax(worst, fabs((double)dec[j] - pre[(size_t)at[i] * row + j]));
        free(dec);
        gpu->ops->free(gpu, dq1);
        free(u);
    }
    CHECK_OK(gpu->ops->sync(gpu));
    char detail[96];
    snprintf(detail, sizeof detail, "kernel %s", kernel ? kernel : "none");
    record("tok prefill vs decode rows (identity mode, per-token-head), max |diff|", worst, 0, detail);
    gpu->ops->free(gpu, dk); gpu->ops->free(gpu, dv); gpu->ops->free(gpu, dq); gpu->ops->free(gpu, dout);
    gpu->ops->free(gpu, d1); gpu->ops->free(gpu, L.k); gpu->ops->free(gpu, L.v);
    free(k); free(v); free(q); free(pre); free(t);
    gpu->batch_invariant = inv;
}

// Every entry of the table that takes per-token-head layers, forced (struct cuda_tuning.attn_kernel)
// on the shapes it fits.
static void tok_table_cases(void) {
    struct cuda_tuning saved, t;
    cuda_tuning_get(gpu, &saved);
    for (int e = 0; e < cuda_attention_kernel_count(); e++) {
        t = saved;
        t.attn_kernel = case_forced = cuda_attention_kernel_name(e);
        cuda_tuning_set(gpu, &t);
        int q3[3] = {1, 1, 1}, c3[3] = {1, 777, 5000}, q2[2] = {300, 1}, c2[2] = {500, 900}, q1[1] = {1}, c1[1] = {700};
        for (int b = 0; b < 2; b++) {
            struct tok_opts o = tok_defaults(b ? 64 : 16, NULL);
            char label[160];
            snprintf(label, sizeof label, "table decode hd128 G4 B3 bs%d", o.bs);
            tok_case(label, 128, 8, 4, 3, q3, c3, &o, NULL);
            snprintf(label, sizeof label, "table decode hd128 G4 B1 700 bs%d", o.bs);
            tok_case(label, 128, 8, 4, 1, q1, c1, &o, NULL);
            snprintf(label, sizeof label, "table prefill+decode hd128 G4 bs%d", o.bs);
            tok_case(label, 128, 8, 4, 2, q2, c2, &o, NULL);
            snprintf(label, sizeof label, "table prefill+decode hd256 G2 bs%d", o.bs);
            tok_case(label, 256, 4, 2, 2, q2, c2, &o, NULL);
            o.window = 128;
            snprintf(label, sizeof label, "table prefill+decode hd64 G8 window 128 bs%d", o.bs);
            tok_case(label, 64, 8, 8, 2, q2, c2, &o, NULL);
            o.window = 0;
            o.softcap = 30.0f;
            snprintf(label, sizeof label, "table prefill+decode hd128 G4 softcap 30 bs%d", o.bs);
            tok_case(label, 128, 8, 4, 2, q2, c2, &o, NULL);
        }
    }
    cuda_tuning_set(gpu, &saved);
    case_forced = NULL;
}

TEST(tok_scale_attention) {
    tok_decode_cases();
    tok_prefill_cases();
    tok_table_cases();
    tok_identity_case();
    int q1[2] = {1, 1}, c1[2] = {3000, 700}, q2[2] = {300, 1}, c2[2] = {2000, 700};
    tok_range_case("decode hd128 G4 B2 K,V x1000", 128, 8, 4, 2, q1, c1, "decode_t");
    tok_range_case("decode hd256 G2 B2 K,V x1000", 256, 4, 2, 2, q1, c1, "decode_t");
    tok_range_case("prefill+decode hd128 G4 K,V x1000", 128, 8, 4, 2, q2, c2, TOK_PREFILL_KERNEL);
    tok_attn_in_case(1, false);
    tok_attn_in_case(4, true);
    tok_attn_in_case(37, true);
}
