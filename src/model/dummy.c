// dummy.c — "dummy:NAME" models (vLLM's --load-format dummy): real architecture shapes
// with seeded random bf16 weights, so benchmarks run at true sizes without a download.
// Weights are uniform with std 1/sqrt(fan_in) (activations keep unit scale through the
// RMS-normed residual stream); norms are 1; MXFP4 experts (gpt-oss) are random e2m1 codes under one
// exponent per row that gives them about that std. Deterministic: each 4096-element chunk of
// each tensor has its own seed, so the result does not depend on the thread count.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/check.h"
#include "../base/half.h"
#include "../base/rng.h"
#include "../base/threadpool.h"
#include "quant_fp8.h"
#include "model.h"

// What a preset's layers have beyond Llama's (the families' differences, as in struct model_config).
enum preset_family { FAM_LLAMA = 0, FAM_QWEN3, FAM_GEMMA3, FAM_QWEN3_MOE, FAM_MIXTRAL, FAM_GPTOSS };

struct preset {
    const char *name;
    int n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, n_vocab, max_pos;
    double theta;
    enum rope_scaling scaling;
    double factor;
    int orig_max_pos;
    int window;        // sliding window tokens (0 = none)
    int sliding_every; // layer l slides unless (l+1) % sliding_every == 0 (2: alternate)
    bool tied;
    enum preset_family family;
    int n_experts, n_experts_used; // mixture of experts: ffn_dim is each expert's (0 = a dense FFN)
};

static const struct preset presets[] = {
    {"llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, 131072, 500000, ROPE_SCALING_LLAMA3, 8, 8192, 0, 0, false,
     FAM_LLAMA, 0, 0},
    {"llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256, 131072, 500000, ROPE_SCALING_LLAMA3, 32, 8192, 0, 0, true,
     FAM_LLAMA, 0, 0},
    // gpt-oss-20b's attention (64 q / 8 kv heads, head_dim 64, 128-token windows on every
    // other layer, YaRN x32) with a dense FFN in place of the experts
    {"gpt-oss-20b-attn", 24, 2880, 64, 8, 64, 2880, 201088, 131072, 150000, ROPE_SCALING_YARN, 32, 4096, 128, 2, false,
     FAM_LLAMA, 0, 0},
    // head_dim 256 with 512-token windows on 3 of every 4 layers (Gemma-style)
    {"gemma-hd256", 24, 2560, 8, 4, 256, 10240, 32000, 131072, 10000, ROPE_SCALING_NONE, 1, 0, 512, 4, true, FAM_LLAMA,
     0, 0},
    {"tiny", 4, 256, 8, 2, 32, 768, 512, 32768, 10000, ROPE_SCALING_NONE, 1, 0, 0, 0, true, FAM_LLAMA, 0, 0},
    // a tiny model with sliding-window layers, for tests of hybrid attention
    {"tiny-swa", 4, 256, 8, 2, 32, 768, 512, 32768, 10000, ROPE_SCALING_NONE, 1, 0, 64, 2, true, FAM_LLAMA, 0, 0},
    // Qwen3-8B: per-head q/k RMSNorm
    {"qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, 40960, 1000000, ROPE_SCALING_NONE, 1, 0, 0, 0, false, FAM_QWEN3,
     0, 0},
    // Gemma 3 4B: head_dim 256, 512-token windows on 5 of every 6 layers (local RoPE base 10000), GeGLU,
    // post-norms, q/k norms, embedding scale, linear RoPE x8 on the global layers
    {"gemma-3-4b", 34, 2560, 8, 4, 256, 10240, 262208, 131072, 1000000, ROPE_SCALING_LINEAR, 8, 0, 512, 6, true,
     FAM_GEMMA3, 0, 0},
    {"llama-3.3-70b", 80, 8192, 64, 8, 128, 28672, 128256, 131072, 500000, ROPE_SCALING_LLAMA3, 8, 8192, 0, 0, false,
     FAM_LLAMA, 0, 0},
    // Qwen3-30B-A3B: q/k norms, 128 experts of 768, 8 per token (norm_topk_prob)
    {"qwen3-30b-a3b", 48, 2048, 32, 4, 128, 768, 151936, 40960, 1000000, ROPE_SCALING_NONE, 1, 0, 0, 0, false,
     FAM_QWEN3_MOE, 128, 8},
    // Mixtral 8x7B: 8 experts of 14336, 2 per token
    {"mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, 32768, 1000000, ROPE_SCALING_NONE, 1, 0, 0, 0, false,
     FAM_MIXTRAL, 8, 2},
    // a tiny mixture of experts, for tests
    {"tiny-moe", 4, 256, 8, 2, 32, 128, 512, 32768, 10000, ROPE_SCALING_NONE, 1, 0, 0, 0, true, FAM_MIXTRAL, 8, 2},
    // gpt-oss-20b: the attention above with q/k/v/o biases and sinks, 32 MXFP4 experts of 2880 (4 per
    // token, top-k then softmax, biased router and experts, the clamped SwiGLU)
    {"gpt-oss-20b", 24, 2880, 64, 8, 64, 2880, 201088, 131072, 150000, ROPE_SCALING_YARN, 32, 4096, 128, 2, false,
     FAM_GPTOSS, 32, 4},
    // the same family at a tiny size (64-token windows), for tests
    {"tiny-gpt-oss", 4, 256, 8, 2, 32, 128, 512, 32768, 150000, ROPE_SCALING_YARN, 32, 4096, 64, 2, false,
     FAM_GPTOSS, 8, 2},
};

const char *const dummy_preset_names[] = {"llama-3.1-8b", "llama-3.2-1b", "gpt-oss-20b-attn", "gemma-hd256", "tiny",
                                          "tiny-swa", "qwen3-8b", "gemma-3-4b", "llama-3.3-70b", "qwen3-30b-a3b",
                                          "mixtral-8x7b", "tiny-moe", "gpt-oss-20b", "tiny-gpt-oss", NULL};

#define CHUNK 4096

struct fill_ctx { uint16_t *dst; int64_t n; uint64_t seed; float amp; bool ones; };

// The next value of a weight's stream: uniform within ±amp.
static inline float draw_value(struct rng *r, float amp) { return (2.0f * rng_float(r) - 1.0f) * amp; }

static void fill_task(void *p, int task, int thread) {
    struct fill_ctx *f = p;
    int64_t i0 = (int64_t)task * CHUNK, i1 = i0 + CHUNK < f->n ? i0 + CHUNK : f->n;
    struct rng r;
    rng_seed(&r, f->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(task + 1)));
    for (int64_t i = i0; i < i1; i++)
        f->dst[i] = f32_to_bf16(f->ones ? 1.0f : draw_value(&r, f->amp));
}

// Elements [e0, e0 + n) of fill_task's stream (not ones), as the f32 values of their bf16 codes: the draw
// a weight's rows get when they go straight to e4m3 (draw_fp8), without the bf16 copy.
static void fill_range_f32(const struct fill_ctx *f, int64_t e0, int64_t n, float *dst) {
    for (int64_t e = e0; e < e0 + n;) {
        const int64_t task = e / CHUNK, end = (task + 1) * CHUNK < e0 + n ? (task + 1) * CHUNK : e0 + n;
        struct rng r;
        rng_seed(&r, f->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(task + 1)));
        for (int64_t k = task * CHUNK; k < e; k++) rng_next(&r);  // (a row starting inside a chunk)
        for (; e < end; e++) *dst++ = bf16_to_f32(f32_to_bf16(draw_value(&r, f->amp)));
    }
}

struct draw_rows { struct fill_ctx f; int64_t cols; };

static void draw_row(void *ctx, int64_t r, float *dst) {
    const struct draw_rows *d = ctx;
    fill_range_f32(&d->f, r * d->cols, d->cols, dst);
}

static int make_weight(struct model *m, struct threadpool *tp, struct weight *w, const char *name,
                       int64_t rows, int64_t cols, bool ones) {
    w->dtype = DT_BF16;
    w->rows = rows;
    w->cols = cols;
    uint16_t *buf = model_own(m, (size_t)(rows * cols) * 2);
    if (!buf)
        return err_set(OCT_ENOMEM, "dummy: cannot allocate %lld x %lld bf16 for %s",
                       (long long)rows, (long long)cols, name);
    struct fill_ctx f = {buf, rows * cols, rng_hash_str(name), sqrtf(3.0f / (float)cols), ones};
    threadpool_run(tp, (int)((f.n + CHUNK - 1) / CHUNK), fill_task, &f);
    w->data = buf;
    return OCT_OK;
}

struct fill4_ctx { uint8_t *dst; int64_t n; uint64_t seed; uint8_t exponent; };

static void fill4_task(void *p, int task, int thread) {
    struct fill4_ctx *f = p;
    int64_t i0 = (int64_t)task * CHUNK, i1 = i0 + CHUNK < f->n ? i0 + CHUNK : f->n;
    struct rng r;
    rng_seed(&r, f->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(task + 1)));
    for (int64_t i = i0; i < i1; i++)  // rows are whole 17-byte blocks: every 17th byte is an exponent
        f->dst[i] = i % (1 + QK_MXFP4 / 2) == 0 ? f->exponent : (uint8_t)(rng_next(&r) >> 56);
}

// Random MXFP4 rows: uniform e2m1 codes (RMS 2.93) under the exponent that brings them to about 1/sqrt(cols).
static int make_mxfp4(struct model *m, struct threadpool *tp, struct weight *w, const char *name, int64_t rows,
                      int64_t cols) {
    const size_t rb = dtype_row_bytes(DT_MXFP4, cols);
    uint8_t *buf = rb ? model_own(m, (size_t)rows * rb) : NULL;
    if (!buf)
        return err_set(OCT_ENOMEM, "dummy: cannot allocate %lld x %lld mxfp4 for %s", (long long)rows,
                       (long long)cols, name);
    const int e = (int)lround(-log2(2.93 * sqrt((double)cols)));
    struct fill4_ctx f = {buf, rows * (int64_t)rb, rng_hash_str(name), (uint8_t)(127 + e)};
    threadpool_run(tp, (int)((f.n + CHUNK - 1) / CHUNK), fill4_task, &f);
    *w = (struct weight){DT_MXFP4, rows, cols, buf, NULL, {0}, 0};
    return OCT_OK;
}

static int find_preset(const char *name, const struct preset **out) {
    const struct preset *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, name)) p = &presets[i];
    if (!p) {
        char list[512] = "";
        for (int i = 0; dummy_preset_names[i]; i++) {
            strcat(list, i ? ", " : "");
            strcat(list, dummy_preset_names[i]);
        }
        return err_set(OCT_EINVAL, "dummy:%s: unknown preset (choose %s)", name, list);
    }
    *out = p;
    return OCT_OK;
}

int dummy_config(const char *name, struct model_config *c) {
    const struct preset *p = NULL;
    TRY(find_preset(name, &p));
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "llama");
    c->n_layers = p->n_layers; c->dim = p->dim; c->n_heads = p->n_heads; c->n_kv_heads = p->n_kv_heads;
    c->head_dim = p->head_dim; c->ffn_dim = p->ffn_dim; c->n_vocab = p->n_vocab; c->max_pos = p->max_pos;
    c->norm_eps = 1e-5f;
    c->tied_output = p->tied;
    c->rope = (struct rope_config){.scaling = p->scaling, .theta = p->theta, .factor = p->factor,
                                   .orig_max_pos = p->orig_max_pos, .low_freq_factor = 1, .high_freq_factor = 4,
                                   .beta_fast = 32, .beta_slow = 1, .truncate = true, .n_rot = p->head_dim,
                                   .neox = false};
    c->sliding_window = p->window;
    for (int l = 0; l < c->n_layers; l++) c->layer_sliding[l] = p->window > 0 && (l + 1) % p->sliding_every != 0;
    c->n_experts = p->n_experts;
    c->n_experts_used = p->n_experts_used;
    c->moe_norm_topk = p->n_experts > 0;
    if (p->family == FAM_QWEN3 || p->family == FAM_QWEN3_MOE) {
        snprintf(c->arch, sizeof c->arch, p->family == FAM_QWEN3 ? "qwen3" : "qwen3moe");
        c->qk_norm = true;
        if (p->family == FAM_QWEN3_MOE) c->norm_eps = 1e-6f;
    } else if (p->family == FAM_MIXTRAL) {
        snprintf(c->arch, sizeof c->arch, "mixtral");
    } else if (p->family == FAM_GPTOSS) {  // (GptOssConfig: YaRN without truncation, biases, sinks)
        snprintf(c->arch, sizeof c->arch, "gptoss");
        c->rope.truncate = false;
        c->attn_bias = c->o_bias = c->attn_sinks = c->moe_bias = true;
        c->moe_act = MOE_ACT_SWIGLU_CLAMP;
        c->swiglu_alpha = 1.702f;
        c->swiglu_limit = 7.0f;
    } else if (p->family == FAM_GEMMA3) {
        snprintf(c->arch, sizeof c->arch, "gemma3");
        c->qk_norm = c->post_norms = true;
        c->act = FFN_ACT_GELU_TANH;
        c->norm_eps = 1e-6f;
        c->attn_scale = 1.0f / sqrtf(256.0f);  // query_pre_attn_scalar 256
        c->embed_scale = bf16_to_f32(f32_to_bf16(sqrtf((float)c->dim)));
        c->local_rope = true;
        c->rope_local = c->rope;
        c->rope_local.scaling = ROPE_SCALING_NONE;
        c->rope_local.theta = 10000;
        c->rope_local.factor = 1;
    }
    return config_validate(c);
}

// A projection (layer l; -1 the output head): in bf16 (make_weight), or, under draw and not skipped by it,
// the same values quantized to e4m3 as they are drawn, a band of rows at a time (struct model_fp8_draw).
static int make_projection(struct model *m, struct threadpool *tp, const struct model_fp8_draw *draw,
                           struct weight *w, const char *name, int64_t rows, int64_t cols, int l) {
    if (!draw || (l < 0 ? draw->skip_lm_head : draw->skip_layer && draw->skip_layer[l]))
        return make_weight(m, tp, w, name, rows, cols, false);
    *w = (struct weight){DT_BF16, rows, cols, NULL, NULL, {0}, 0};
    struct draw_rows d = {{NULL, rows * cols, rng_hash_str(name), sqrtf(3.0f / (float)cols), false}, cols};
    return quant_fp8_rows(m, w, draw->block, draw_row, &d);
}

int model_load_dummy(struct model *m, const char *name, const struct model_fp8_draw *draw) {
    const struct preset *p = NULL;
    TRY(find_preset(name, &p));
    TRY(dummy_config(name, &m->cfg));
    struct model_config *c = &m->cfg;

    struct threadpool *tp = threadpool_create(0);
    if (!tp) return err_set(OCT_ENOMEM, "dummy: cannot start threads");
    int rc = make_weight(m, tp, &m->token_embd, "token_embd", c->n_vocab, c->dim, false);
    if (rc == OCT_OK) rc = make_weight(m, tp, &m->output_norm, "output_norm", 1, c->dim, true);
    if (rc == OCT_OK) {
        if (p->tied) m->output = m->token_embd;
        else rc = make_projection(m, tp, draw, &m->output, "output", c->n_vocab, c->dim, -1);
    }
    int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    for (int l = 0; l < c->n_layers && rc == OCT_OK; l++) {
        struct layer_weights *w = &m->layers[l];
        struct { struct weight *w; const char *n; int64_t r, c; bool ones; } spec[13] = {
            {&w->attn_norm, "attn_norm", 1, c->dim, true}, {&w->wq, "attn_q", qd, c->dim, false},
            {&w->wk, "attn_k", kvd, c->dim, false}, {&w->wv, "attn_v", kvd, c->dim, false},
            {&w->wo, "attn_output", c->dim, qd, false}, {&w->ffn_norm, "ffn_norm", 1, c->dim, true},
            {&w->w_gate, "ffn_gate", c->ffn_dim, c->dim, false}, {&w->w_up, "ffn_up", c->ffn_dim, c->dim, false},
            {&w->w_down, "ffn_down", c->dim, c->ffn_dim, false},
            {&w->q_norm, "attn_q_norm", 1, c->head_dim, true}, {&w->k_norm, "attn_k_norm", 1, c->head_dim, true},
            {&w->post_attn_norm, "post_attention_norm", 1, c->dim, true},
            {&w->post_ffn_norm, "post_ffw_norm", 1, c->dim, true}};
        for (int i = 0; i < 13 && rc == OCT_OK; i++) {
            if (i >= 6 && i < 9 && c->n_experts) continue;  // the experts below instead
            if (i >= 9 && i < 11 && !c->qk_norm) continue;
            if (i >= 11 && !c->post_norms) continue;
            char tn[64];
            snprintf(tn, sizeof tn, "blk.%d.%s", l, spec[i].n);
            if (i >= 1 && i <= 8 && i != 5) rc = make_projection(m, tp, draw, spec[i].w, tn, spec[i].r, spec[i].c, l);
            else rc = make_weight(m, tp, spec[i].w, tn, spec[i].r, spec[i].c, spec[i].ones);
        }
        int64_t E = c->n_experts, F = c->ffn_dim, D = c->dim;
        struct { struct weight *w; const char *n; int64_t r, c; } moe[4] = {
            {&w->ffn_router, "ffn_gate_inp", E, D}, {&w->exp_gate, "ffn_gate_exps", E * F, D},
            {&w->exp_up, "ffn_up_exps", E * F, D}, {&w->exp_down, "ffn_down_exps", E * D, F}};
        for (int i = 0; i < 4 && rc == OCT_OK && E; i++) {
            char tn[64];
            snprintf(tn, sizeof tn, "blk.%d.%s", l, moe[i].n);
            if (i > 0 && p->family == FAM_GPTOSS) rc = make_mxfp4(m, tp, moe[i].w, tn, moe[i].r, moe[i].c);
            else rc = make_weight(m, tp, moe[i].w, tn, moe[i].r, moe[i].c, false);
        }
        // gpt-oss: q/k/v/o, router and expert biases, attention sinks (1 x n: uniform within ±sqrt(3/n))
        struct { struct weight *w; const char *n; int64_t c; bool on; } vec[9] = {
            {&w->bq, "attn_q.bias", qd, c->attn_bias}, {&w->bk, "attn_k.bias", kvd, c->attn_bias},
            {&w->bv, "attn_v.bias", kvd, c->attn_bias}, {&w->bo, "attn_output.bias", D, c->o_bias},
            {&w->ffn_router_b, "ffn_gate_inp.bias", E, c->moe_bias},
            {&w->exp_b_gate, "ffn_gate_exps.bias", E * F, c->moe_bias},
            {&w->exp_b_up, "ffn_up_exps.bias", E * F, c->moe_bias},
            {&w->exp_b_down, "ffn_down_exps.bias", E * D, c->moe_bias},
            {&w->attn_sinks, "attn_sinks", c->n_heads, c->attn_sinks}};
        for (int i = 0; i < 9 && rc == OCT_OK; i++) {
            if (!vec[i].on) continue;
            char tn[64];
            snprintf(tn, sizeof tn, "blk.%d.%s", l, vec[i].n);
            rc = make_weight(m, tp, vec[i].w, tn, 1, vec[i].c, false);
        }
    }
    threadpool_free(tp);
    return rc;
}
