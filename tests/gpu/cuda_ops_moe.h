// cuda_ops_moe.h — test_cuda_ops.c's mixture-of-experts cases (owns: random stacked expert weights of every
// dtype the CUDA backend takes — bf16, f16, f32, MXFP4, fp8_e4m3 with tensor, channel and 128×128 block
// scales — and the checks of the CUDA moe_ffn against the CPU backend's, cpu_moe.c). Included by
// test_cuda_ops.c after cuda_ops_fp8w.h (make_fp8_weight).
// What must hold: the same experts chosen and the same weights (the router's logits differ by the order of
// f32 sums only), the expert products exact in f32 on both sides (bf16 inputs; e2m1 × 2^k and e4m3 values
// are exact in bf16; FP8 activation codes and scales are the CPU's), so the outputs differ by the f32 sum
// orders, the GPU's bf16 rounding of h (the activations between the products; f32 before an FP8 down
// projection) and of the output: two roundings of relative error up to 2^-9, an NMSE of about 3e-6, bound
// 2e-5. Tokens whose K-th and (K+1)-th router logits lie within 1e-3 of each other may pick different experts
// on the two backends (the logits differ by about 1e-6): they are left out of the NMSE and counted.
// Batch invariance (--batch-invariant): a token alone and inside a batch of 64 or 300 tokens give the same
// bits; the default mode too for n <= 8 (the router's skinny GEMM is then row-independent).
#ifndef OCTET_CUDA_OPS_MOE_H
#define OCTET_CUDA_OPS_MOE_H

struct moe_case {
    enum dtype dt;     // expert dtype (DT_E4M3: with ws)
    enum wscale ws;
    int E, K, dim, F;
    bool bias, rbias, norm, clamp, e5m2_gate, static_x;
};

// [rows][cols] of amplitude amp in dtype dt (bf16-representable values, so every backend holds the same).
static struct weight moe_dense(enum dtype dt, int64_t rows, int64_t cols, float amp) {
    const size_t n = (size_t)(rows * cols);
    struct weight w = {dt, rows, cols, NULL, NULL, {0}, 0};
    void *h = malloc(n * (dt == DT_F32 ? 4 : 2));
    for (size_t i = 0; i < n; i++) {
        const float v = bf16_to_f32(f32_to_bf16((2 * rng_float(&rng) - 1) * amp));
        if (dt == DT_F32) ((float *)h)[i] = v;
        else if (dt == DT_F16) ((uint16_t *)h)[i] = f32_to_f16(v);
        else ((uint16_t *)h)[i] = f32_to_bf16(v);
    }
    w.data = h;
    return w;
}

// Random e2m1 codes in 32-element blocks whose e8m0 scales put the values near amp (a few blocks 2× off).
static struct weight moe_mxfp4(int64_t rows, int64_t cols, float amp) {
    const int64_t nb = rows * cols / QK_MXFP4;
    uint8_t *h = malloc((size_t)nb * 17);
    const int e = (int)lround(log2(amp / 3.0));
    for (int64_t b = 0; b < nb; b++) {
        h[b * 17] = (uint8_t)(127 + e + (int)(rng_next(&rng) % 3) - 1);
        for (int i = 1; i < 17; i++) h[b * 17 + i] = (uint8_t)(rng_next(&rng) & 0xFF);
    }
    return (struct weight){DT_MXFP4, rows, cols, h, NULL, {0}, 0};
}

// The gate and down MXFP4 weights' values are moe_mx_gain times larger (up's are not): at 64 their e8m0 scales
// pass 128, which the CUDA backend runs in its wide form (CUDA_WFLAG_MX_WIDE), gate and up then together.
static float moe_mx_gain = 1.0f;
static struct weight moe_expert_weight(const struct moe_case *mc, int64_t rows, int64_t cols, bool gate, bool down) {
    const float amp = 3.0f / sqrtf((float)cols);
    if (mc->dt == DT_MXFP4) return moe_mxfp4(rows, cols, amp * (gate || down ? moe_mx_gain : 1.0f));
    if (mc->dt != DT_E4M3) return moe_dense(mc->dt, rows, cols, amp);
    const struct fp8w_case fc = {(int)rows, (int)cols, mc->ws, gate && mc->e5m2_gate,
                                 mc->static_x && !down ? 0.01f : 0.0f};
    return make_fp8_weight(&fc);
}
static void moe_free_weight(struct weight *w) {
    if (w->dtype == DT_E4M3) free_fp8_weight(w);
    else free((void *)w->data);
}

// The operands of one case: router, gate, up, down, router bias, b_gate, b_up, b_down.
struct moe_set { struct weight w[8]; bool on[8]; };
static void moe_set_make(struct moe_set *s, const struct moe_case *mc) {
    const int64_t E = mc->E, F = mc->F, D = mc->dim;
    memset(s, 0, sizeof *s);
    s->w[0] = moe_dense(DT_BF16, E, D, 3.0f / sqrtf((float)D));
    s->w[1] = moe_expert_weight(mc, E * F, D, true, false);
    s->w[2] = moe_expert_weight(mc, E * F, D, false, false);
    s->w[3] = moe_expert_weight(mc, E * D, F, false, true);
    for (int i = 0; i < 4; i++) s->on[i] = true;
    s->on[4] = mc->rbias;
    s->on[5] = s->on[6] = s->on[7] = mc->bias;
    const int64_t len[4] = {E, E * F, E * F, E * D};
    for (int i = 4; i < 8; i++)
        if (s->on[i]) s->w[i] = moe_dense(i == 5 ? DT_F32 : DT_BF16, 1, len[i - 4], i == 4 ? 1.0f : 0.5f);
}
static void moe_set_free(struct moe_set *s) {
    for (int i = 0; i < 8; i++)
        if (s->on[i]) moe_free_weight(&s->w[i]);
}

// out[n][dim] = moe_ffn(x) on backend b (weights: b's own copies of the set).
static float *moe_on(struct backend *b, const struct moe_set *s, const struct moe_case *mc, const float *x, int n) {
    struct weight w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = s->w[i];
        if (s->on[i]) CHECK_OK(b->ops->weight_upload(b, &w[i]));
    }
    void *dx = to_dev(b, x, (size_t)n * mc->dim), *dout = b->ops->alloc(b, (size_t)n * mc->dim * 4);
    const struct moe_ffn_args a = {dout, dx, &w[0], &w[1], &w[2], &w[3], mc->E, mc->K, mc->norm,
                                   s->on[4] ? &w[4] : NULL, s->on[5] ? &w[5] : NULL, s->on[6] ? &w[6] : NULL,
                                   s->on[7] ? &w[7] : NULL, mc->clamp ? MOE_ACT_SWIGLU_CLAMP : MOE_ACT_SILU,
                                   1.702f, 2.0f};
    b->ops->moe_ffn(b, &a, n);
    float *out = to_host(b, dout, (size_t)n * mc->dim);
    CHECK_OK(b->ops->sync(b));
    b->ops->free(b, dx);
    b->ops->free(b, dout);
    for (int i = 0; i < 8; i++)
        if (s->on[i]) b->ops->weight_release(b, &w[i]);
    return out;
}

// Whether token x's K-th and (K+1)-th router logits (float64 from the same bf16 values) are 1e-3 apart or more.
static bool moe_clear_route(const struct moe_set *s, const struct moe_case *mc, const float *x) {
    if (mc->K >= mc->E) return true;
    double l[256];
    const uint16_t *r = s->w[0].data, *rb = s->on[4] ? s->w[4].data : NULL;
    for (int e = 0; e < mc->E; e++) {
        double v = rb ? bf16_to_f32(rb[e]) : 0.0;
        for (int d = 0; d < mc->dim; d++) v += (double)bf16_to_f32(r[(size_t)e * mc->dim + d]) * x[d];
        l[e] = v;
    }
    for (int i = 0; i < mc->E; i++)  // (sort descending)
        for (int j = i + 1; j < mc->E; j++)
            if (l[j] > l[i]) { double t = l[i]; l[i] = l[j]; l[j] = t; }
    return l[mc->K - 1] - l[mc->K] >= 1e-3;
}

static const char *moe_dt_name(const struct moe_case *mc) {
    if (mc->dt != DT_E4M3) return dtype_name(mc->dt);
    return mc->ws == WSCALE_BLOCK ? "fp8 block" : mc->ws == WSCALE_CHANNEL ? "fp8 channel" : "fp8 tensor";
}

static void moe_case_run(const struct moe_case *mc, int n) {
    struct moe_set s;
    moe_set_make(&s, mc);
    float *x = rand_vec((size_t)n * mc->dim, 1.0f);
    float *ref = moe_on(cpu, &s, mc, x, n), *got = moe_on(gpu, &s, mc, x, n);
    double num = 0, den = 0;
    int skipped = 0;
    for (int t = 0; t < n; t++) {
        if (!moe_clear_route(&s, mc, x + (size_t)t * mc->dim)) { skipped++; continue; }
        for (int d = 0; d < mc->dim; d++) {
            const double a = got[(size_t)t * mc->dim + d], b = ref[(size_t)t * mc->dim + d];
            num += isfinite(a) ? (a - b) * (a - b) : INFINITY;
            den += b * b;
        }
    }
    char name[160], extra[64];
    snprintf(name, sizeof name, "moe_ffn %s E%d K%d %dx%d n=%d%s%s%s%s%s%s%s", moe_dt_name(mc), mc->E, mc->K, mc->dim,
             mc->F, n, mc->clamp ? " swiglu-clamp" : " silu", mc->bias ? " biases" : "", mc->rbias ? " router-bias" : "",
             mc->norm ? " norm" : "", mc->e5m2_gate ? " e5m2-gate" : "", mc->static_x ? " static-x" : "",
             mc->dt == DT_MXFP4 && moe_mx_gain != 1.0f ? " gate/down scales > 2" : "");
    snprintf(extra, sizeof extra, "%d of %d tokens near a routing tie left out", skipped, n);
    CHECK_MSG(skipped * 4 <= n, "%s: %s", name, extra);
    record(name, den > 0 ? num / den : num, 2e-5, extra);
    free(x); free(ref); free(got);
    moe_set_free(&s);
}

// Every expert dtype at n = 1, 3, 17, 64, 300 tokens, the other parameters varied across the runs; then 128
// experts.
static void moe_vs_cpu(void) {
    const struct moe_case base[] = {
        {DT_BF16, WSCALE_TENSOR, 8, 2, 256, 128, false, false, true, false, false, false},
        {DT_F16, WSCALE_TENSOR, 32, 4, 256, 96, true, true, false, true, false, false},
        {DT_F32, WSCALE_TENSOR, 8, 1, 160, 64, false, true, true, false, false, false},
        {DT_MXFP4, WSCALE_TENSOR, 32, 4, 352, 96, true, true, true, true, false, false},
        {DT_E4M3, WSCALE_CHANNEL, 8, 2, 256, 160, false, false, true, false, false, false},
        {DT_E4M3, WSCALE_BLOCK, 32, 4, 256, 128, true, true, true, true, false, false},
        {DT_E4M3, WSCALE_TENSOR, 8, 2, 224, 96, false, false, false, false, true, true},
    };
    const int ns[5] = {1, 3, 17, 64, 300};
    for (size_t c = 0; c < sizeof base / sizeof base[0]; c++)
        for (int i = 0; i < 5; i++) {
            struct moe_case mc = base[c];
            // vary K, the activation and the options with n, within what each case's E allows
            const int ks[3] = {1, 2, 4};
            mc.K = ks[(i + c) % 3] <= mc.E ? ks[(i + c) % 3] : mc.K;
            if (i % 2) mc.norm = !mc.norm;
            if (i == 3) mc.clamp = !mc.clamp;
            if (i == 4) mc.rbias = !mc.rbias;
            moe_case_run(&mc, ns[i]);
        }
    // MXFP4 gate and down weights with scales past 2^1 (the wide form): one-token tiles and the tiled form
    moe_mx_gain = 64.0f;
    for (int i = 0; i < 3; i++) moe_case_run(&base[3], (const int[]){1, 17, 300}[i]);
    moe_mx_gain = 1.0f;
    // Qwen3-30B-A3B's routing (128 experts, top 8): one routing CTA at 17 tokens, three launches at 300
    const struct moe_case q = {DT_BF16, WSCALE_TENSOR, 128, 8, 256, 64, false, false, true, false, false, false};
    moe_case_run(&q, 17);
    moe_case_run(&q, 300);
}

// Runs of nsmall tokens alone vs inside a batch of nbig: equal bit for bit. By default the router's logits
// come from the skinny GEMM, whose rows are the same sums for 2 to 8 tokens (one token takes its CUDA-core
// form, which sums in another order), so the default mode compares 2 tokens inside 8; --batch-invariant
// compares single tokens inside batches of any size.
static void moe_invariant_case(const struct moe_case *mc, int nsmall, int nbig) {
    struct moe_set s;
    moe_set_make(&s, mc);
    float *x = rand_vec((size_t)nbig * mc->dim, 1.0f);
    float *big = moe_on(gpu, &s, mc, x, nbig);
    const int picks[3] = {0, nbig / 3, nbig - nsmall};
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        float *few = moe_on(gpu, &s, mc, x + (size_t)picks[k] * mc->dim, nsmall);
        for (int d = 0; d < nsmall * mc->dim; d++)
            worst = fmax(worst, fabs((double)few[d] - big[(size_t)picks[k] * mc->dim + d]));
        free(few);
    }
    char name[128];
    snprintf(name, sizeof name, "moe_ffn %s E%d K%d: n=%d vs inside n=%d%s, max |diff|", moe_dt_name(mc), mc->E,
             mc->K, nsmall, nbig, gpu->batch_invariant ? " (batch-invariant)" : "");
    record(name, worst, 0, NULL);
    free(x); free(big);
    moe_set_free(&s);
}

static void moe_batch_invariant(void) {
    const struct moe_case cs[3] = {
        {DT_BF16, WSCALE_TENSOR, 8, 4, 256, 128, true, true, true, false, false, false},
        {DT_MXFP4, WSCALE_TENSOR, 8, 2, 256, 128, true, true, true, true, false, false},
        {DT_E4M3, WSCALE_BLOCK, 8, 2, 256, 128, false, false, true, false, false, false},
    };
    for (int i = 0; i < 3; i++) moe_invariant_case(&cs[i], 2, 8);  // (default mode: the router's skinny GEMM)
    gpu->batch_invariant = true;
    for (int i = 0; i < 3; i++) {
        moe_invariant_case(&cs[i], 1, 64);
        moe_invariant_case(&cs[i], 1, 300);
    }
    gpu->batch_invariant = false;
}

TEST(moe_ffn) {
    moe_vs_cpu();
    moe_batch_invariant();
}

#endif
