// cuda_ops_sinks.h — test_cuda_ops.c's checks of attention sinks (gpt-oss: kv_layer.sinks, one logit a
// query head that joins its softmax max and denominator and adds no value) on the CUDA backend against
// the CPU backend: every entry of the attention kernel table, forced, on the shapes it fits — decode
// (one split, several through k_combine, the fused combine), chunked prefill beside a decode row,
// windows, GQA groups of 2 to 8, head_dim 64 / 96 / 128 / 256, 16- and 64-token blocks, bf16 / e4m3 /
// e5m2 caches, soft-capped scores — with mixed sinks (query head 0's at +20, where the sink takes
// nearly all the weight, head 1's at −30, the rest in [−2, 4]) and with every head's at +20; then f16
// caches, per-token-head e4m3 layers, the FP8 prefill's accumulation modes, sinks stored as bf16 and
// f16, and sinks at −1e30 against none, which must give the same bytes. Included by test_cuda_ops.c
// after cuda_ops_tok_scale.h (tok_alloc) and cuda_ops_fp8_prefill.h (accs, acc_names);
// attention_sinks is its one test.
#pragma once

enum sink_kind {
    SINK_MIXED,     // head 0: +20, head 1: −30, the others uniform in [−2, 4]
    SINK_DOMINANT,  // every head +20 (the outputs are tiny: the sink takes nearly all the weight)
    SINK_OFF,       // every head −1e30 (as if none)
    SINK_NONE,      // kv_layer.sinks NULL
};
static const char *const sink_kind_names[4] = {"mixed sinks", "sinks +20", "sinks -1e30", "no sinks"};

// One sinks case's settings beyond its shape.
struct sink_opts {
    enum sink_kind kind;
    enum dtype sdt;  // the sinks weight's dtype (f32, bf16, f16)
    bool tok;        // an fp8_per_token_head layer (e4m3; tok_alloc's pages)
    int bs;          // kv_block_tokens
};

// The sinks weight ([1][n] of o->sdt; host data, which both backends read) of kind o->kind.
static struct weight sink_weight(int n, const struct sink_opts *o) {
    struct weight w = {o->sdt, 1, n, NULL, NULL, {0}, 0};
    float *v = malloc((size_t)n * sizeof(float));
    for (int h = 0; h < n; h++) {
        float x = -2.0f + 6.0f * rng_float(&rng);
        if (o->kind == SINK_DOMINANT || (o->kind == SINK_MIXED && h == 0)) x = 20.0f;
        if (o->kind == SINK_MIXED && h == 1) x = -30.0f;
        if (o->kind == SINK_OFF) x = -1e30f;
        v[h] = x;
    }
    if (o->sdt == DT_F32) {
        w.data = v;
        return w;
    }
    uint16_t *h16 = malloc((size_t)n * 2);
    for (int h = 0; h < n; h++) h16[h] = o->sdt == DT_BF16 ? f32_to_bf16(v[h]) : f32_to_f16(v[h]);
    free(v);
    w.data = h16;
    return w;
}

// kv_write of every context position on both backends, then attention of the batch's queries with the
// sinks on both, compared (FP8-MMA kernels against the CPU's emulation of them). Returns the GPU's
// output when out_gpu is given (the −1e30-against-none check), NULL for a forced entry that does not
// fit the shape.
static bool sink_case(const char *label, enum dtype dt, int hd, int n_kv, int G, int window, int n_seqs, const int *n_q,
                      const int *ctx, const struct sink_opts *o, float **out_gpu) {
    const int bs = o->bs;
    int max_ctx = 0, total = 0;
    for (int s = 0; s < n_seqs; s++) { max_ctx = ctx[s] > max_ctx ? ctx[s] : max_ctx; total += ctx[s]; }
    const int max_blocks = (max_ctx + bs - 1) / bs, n_blocks = max_blocks * n_seqs;
    struct tb *t = malloc(sizeof *t), *w = malloc(sizeof *w);
    make_batch(t, n_seqs, n_q, ctx, bs, max_blocks);
    struct kv_layer L[2];
    struct backend *bk[2] = {cpu, gpu};
    const int n_heads = n_kv * G;
    struct weight sw = sink_weight(n_heads, o);
    size_t bytes = (size_t)n_blocks * n_kv * bs * hd * dtype_size(dt);
    for (int i = 0; i < 2; i++) {
        L[i] = (struct kv_layer){.dtype = dt, .n_kv_heads = n_kv, .head_dim = hd, .kv_block_tokens = bs,
                                 .n_blocks = n_blocks, .window = window};
        for (int h = 0; h < n_kv; h++) {
            L[i].k_scale[h] = o->tok ? 1.0f : 0.5f + 0.25f * h;
            L[i].v_scale[h] = o->tok ? 1.0f : 0.125f * (h + 1);
        }
        L[i].sinks = o->kind == SINK_NONE ? NULL : &sw;
        if (o->tok) {
            tok_alloc(bk[i], &L[i], n_blocks, &bytes);
        } else {
            L[i].k = bk[i]->ops->alloc(bk[i], bytes);
            L[i].v = bk[i]->ops->alloc(bk[i], bytes);
        }
    }
    struct attn_params ap = {n_heads, 1.0f / sqrtf((float)hd), ATTN_FP8_EXACT, case_acc, case_softcap};
    gpu->ops->batch_begin(gpu, &t->b);
    const char *kernel = cuda_attention_pick(gpu, &L[1], &ap, &t->b);
    bool ran = kernel != NULL || !case_forced;
    if (ran) {
        count_kernel(kernel);
        float *k = rand_vec((size_t)total * n_kv * hd, 3.0f), *v = rand_vec((size_t)total * n_kv * hd, 2.0f);
        const size_t nout = (size_t)t->b.n_tokens * n_heads * hd;
        float *q = rand_vec(nout, 1.0f);
        CHECK_OK(kv_fill(bk, L, w, t, k, v, n_seqs, ctx, n_kv, hd, bs, max_blocks));
        const bool emu = dt == DT_E4M3 && fp8_mma_kernel(kernel);
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
        }
        char name[240], detail[128];
        snprintf(name, sizeof name, "sinks attention %s %s %s%s%s%s%s%s", dtype_name(dt), label, sink_kind_names[o->kind],
                 o->sdt != DT_F32 ? " as " : "", o->sdt != DT_F32 ? dtype_name(o->sdt) : "", emu ? " vs emulate" : "",
                 case_forced ? " on " : "", case_forced ? case_forced : "");
        snprintf(detail, sizeof detail, "gpu_fnv1a %016llx kernel %s",
                 (unsigned long long)rng_hash_bytes(out[1], nout * sizeof(float)), kernel ? kernel : "none");
        // (prefill_f16_cvt's per-token-head rows are bf16 products: tok_case's bound for it, 3×)
        const double bound = emu ? WGMMA_BOUND : o->tok && kernel && !strcmp(kernel, "prefill_f16_cvt") ? 6e-5 : 2e-5;
        record(name, nmse(out[1], out[0], nout), bound, detail);
        free(out[0]);
        if (out_gpu) *out_gpu = out[1];
        else free(out[1]);
        free(k); free(v); free(q);
    }
    for (int i = 0; i < 2; i++) { bk[i]->ops->free(bk[i], L[i].k); bk[i]->ops->free(bk[i], L[i].v); }
    free((void *)sw.data);
    free(t); free(w);
    return ran;
}

// The table's shapes (attention_table's, fewer) with sinks of one kind, each cache type, on the entry
// forced now (case_forced) or the one the table picks.
static void sink_table_shapes(const struct sink_opts *base, bool all) {
    const enum dtype dts[3] = {DT_BF16, DT_E4M3, DT_E5M2};
    for (int d = 0; d < 3; d++) {
        struct sink_opts o = *base;
        int q1[3] = {1, 1, 1}, c1[3] = {1, 777, 5000}, q4[2] = {300, 1}, c4[2] = {500, 900}, c7[1] = {700};
        o.bs = 16;
        sink_case("decode hd128 G4 B3", dts[d], 128, 8, 4, 0, 3, q1, c1, &o, NULL);
        o.bs = 64;
        sink_case("prefill+decode hd128 G4 bs64", dts[d], 128, 8, 4, 0, 2, q4, c4, &o, NULL);
        if (!all) continue;
        o.bs = 16;
        // one sequence of a few splits: decode_t combines them in its last CTA (the fused combine)
        sink_case("decode hd128 G4 B1 700", dts[d], 128, 8, 4, 0, 1, q1, c7, &o, NULL);
        sink_case("decode hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q1, c4, &o, NULL);
        sink_case("decode hd256 G2", dts[d], 256, 4, 2, 0, 1, q1, c1 + 2, &o, NULL);
        sink_case("prefill+decode hd128 G4", dts[d], 128, 8, 4, 0, 2, q4, c4, &o, NULL);
        sink_case("prefill hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q4, c4, &o, NULL);
        sink_case("prefill hd256 G2", dts[d], 256, 4, 2, 0, 2, q4, c4, &o, NULL);
        sink_case("prefill hd96 G4", dts[d], 96, 2, 4, 0, 2, q4, c4, &o, NULL);
        o.bs = 64;
        sink_case("decode hd128 G4 B3 bs64", dts[d], 128, 8, 4, 0, 3, q1, c1, &o, NULL);
    }
}

// Per-token-head e4m3 layers with mixed sinks (decode, chunked prefill, a window, head_dim 256).
static void sink_tok_shapes(void) {
    struct sink_opts o = {SINK_MIXED, DT_F32, true, 16};
    int q1[3] = {1, 1, 1}, c1[3] = {1, 777, 5000}, q4[2] = {300, 1}, c4[2] = {500, 900};
    sink_case("tok decode hd128 G4 B3", DT_E4M3, 128, 8, 4, 0, 3, q1, c1, &o, NULL);
    sink_case("tok decode hd256 G2 window 512", DT_E4M3, 256, 4, 2, 512, 1, q1, c1 + 2, &o, NULL);
    o.bs = 64;
    sink_case("tok prefill+decode hd128 G4 bs64", DT_E4M3, 128, 8, 4, 0, 2, q4, c4, &o, NULL);
    sink_case("tok prefill hd64 G8 window 128 bs64", DT_E4M3, 64, 8, 8, 128, 2, q4, c4, &o, NULL);
}

// sinks at −1e30 and none on the same inputs (the random state saved and restored): the same bytes.
static void sink_off_vs_none(const char *label, enum dtype dt, int hd, int n_kv, int G, int window, int n_seqs,
                             const int *n_q, const int *ctx, bool tok, int bs) {
    struct sink_opts off = {SINK_OFF, DT_F32, tok, bs}, none = {SINK_NONE, DT_F32, tok, bs};
    float *a = NULL, *b = NULL;
    const struct rng saved = rng;
    const bool ran = sink_case(label, dt, hd, n_kv, G, window, n_seqs, n_q, ctx, &off, &a);
    rng = saved;
    sink_case(label, dt, hd, n_kv, G, window, n_seqs, n_q, ctx, &none, &b);
    if (ran && a && b) {
        size_t n = 0;
        for (int s = 0; s < n_seqs; s++) n += (size_t)n_q[s];
        n *= (size_t)n_kv * G * hd;
        char name[200];
        snprintf(name, sizeof name, "sinks -1e30 == no sinks, bytes differing: %s %s%s%s", dtype_name(dt), label,
                 case_forced ? " on " : "", case_forced ? case_forced : "");
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&a[i], &b[i], sizeof(float)) != 0;
        record(name, (double)diff, 0, NULL);
    }
    free(a);
    free(b);
}

TEST(attention_sinks) {
    struct cuda_tuning saved, t;
    cuda_tuning_get(gpu, &saved);
    memset(kernel_cases, 0, sizeof kernel_cases);
    const int n_entries = cuda_attention_kernel_count() < MAX_KERNELS ? cuda_attention_kernel_count() : MAX_KERNELS;
    int q1[3] = {1, 1, 1}, c1[3] = {1, 777, 5000}, q4[2] = {300, 1}, c4[2] = {500, 900};
    for (int e = 0; e < n_entries; e++) {
        t = saved;
        t.attn_kernel = case_forced = cuda_attention_kernel_name(e);
        cuda_tuning_set(gpu, &t);
        struct sink_opts mixed = {SINK_MIXED, DT_F32, false, 16}, dom = {SINK_DOMINANT, DT_F32, false, 16};
        sink_table_shapes(&mixed, true);
        sink_table_shapes(&dom, false);
        case_softcap = 1.0f;  // soft-capped scores (the sink is not capped)
        sink_table_shapes(&mixed, false);
        case_softcap = 0.0f;
        sink_tok_shapes();
        const enum dtype dts[3] = {DT_BF16, DT_E4M3, DT_E5M2};
        for (int d = 0; d < 3; d++) {
            sink_off_vs_none("decode hd128 G4 B3", dts[d], 128, 8, 4, 0, 3, q1, c1, false, 16);
            sink_off_vs_none("prefill+decode hd128 G4 window 128 bs64", dts[d], 128, 8, 4, 128, 2, q4, c4, false, 64);
        }
        sink_off_vs_none("tok prefill+decode hd128 G4 bs64", DT_E4M3, 128, 8, 4, 0, 2, q4, c4, true, 64);
    }
    cuda_tuning_set(gpu, &saved);
    case_forced = NULL;
    // the entries the table picks: f16 caches, the FP8 prefill's accumulation modes, sinks as bf16 / f16
    struct sink_opts o = {SINK_MIXED, DT_F32, false, 64};
    sink_case("f16 prefill+decode hd128 G4 bs64", DT_F16, 128, 8, 4, 0, 2, q4, c4, &o, NULL);
    sink_case("f16 prefill+decode hd256 G2 bs64", DT_F16, 256, 4, 2, 0, 2, q4, c4, &o, NULL);
    for (int a = 0; a < 3; a++) {
        char label[96];
        case_acc = accs[a];
        snprintf(label, sizeof label, "prefill+decode hd128 G4 bs64, %s", acc_names[a]);
        sink_case(label, DT_E4M3, 128, 8, 4, 0, 2, q4, c4, &o, NULL);
        snprintf(label, sizeof label, "prefill+decode hd256 G2 bs64, %s", acc_names[a]);
        sink_case(label, DT_E4M3, 256, 4, 2, 0, 2, q4, c4, &o, NULL);
        snprintf(label, sizeof label, "prefill hd64 G8 window 128 bs64, %s", acc_names[a]);
        sink_case(label, DT_E4M3, 64, 8, 8, 128, 2, q4, c4, &o, NULL);
    }
    case_acc = 0;
    o.sdt = DT_BF16;
    sink_case("decode hd128 G4 B3", DT_BF16, 128, 8, 4, 0, 3, q1, c1, &o, NULL);
    sink_case("prefill+decode hd128 G4", DT_E4M3, 128, 8, 4, 0, 2, q4, c4, &o, NULL);
    o.sdt = DT_F16;
    sink_case("decode hd64 G8 window 128", DT_E5M2, 64, 8, 8, 128, 2, q1, c4, &o, NULL);
    sink_case("prefill+decode hd128 G4", DT_BF16, 128, 8, 4, 0, 2, q4, c4, &o, NULL);
    // --batch-invariant: its entry (decode_invariant) is the one the table picks
    gpu->batch_invariant = true;
    o.sdt = DT_F32;
    o.bs = 16;
    sink_case("batch-invariant decode hd128 G4 B3", DT_BF16, 128, 8, 4, 0, 3, q1, c1, &o, NULL);
    sink_case("batch-invariant prefill+decode hd64 G8 window 128", DT_E4M3, 64, 8, 8, 128, 2, q4, c4, &o, NULL);
    gpu->batch_invariant = false;
    for (int e = 0; e < n_entries; e++) {
        char name[128];
        snprintf(name, sizeof name, "attention sinks: %s checked on a shape it fits (cases: %d)",
                 cuda_attention_kernel_name(e), kernel_cases[e]);
        record(name, kernel_cases[e] > 0 ? 0.0 : 1.0, 0, NULL);
    }
}
