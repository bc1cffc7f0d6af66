// model_gguf.c — a GGUF file → struct model, by general.architecture (owns: each family's keys
// and tensor names as llama.cpp writes them; not: parsing the file, which gguf.c does).
// Families: llama and mistral (Q/K rows permuted to adjacent pairs by the converter), qwen2
// (q/k/v biases), qwen3 (per-head q/k norms), gemma2 and gemma3 (norms stored as 1 + w, post-norms,
// GeGLU, embedding scale, soft-caps, sliding-window pattern, Gemma 3's local RoPE base), phi3
// (fused attn_qkv and gate+up in ffn_up), mixture-of-experts layers (llama with expert_count:
// Mixtral; qwen3moe) as ffn_gate_inp and 3-D ffn_{gate,up,down}_exps, gpt-oss (llama.cpp's "gpt-oss":
// biases, attention sinks, MXFP4 experts repacked to octet's nibble order, YaRN as the model defines
// it); all but llama/mistral rotate halves (NEOX). Every key is read strictly
// (a key of the wrong type is an error naming it) and every tensor of the file must be used.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/check.h"
#include "../base/half.h"
#include "gguf.h"
#include "model.h"
#include "tokenizer.h"

struct gguf_family {
    const char *name;
    bool neox, qkv_bias, qk_norm, gemma, phi3;
    int swa_period;  // sliding layers: l % period != period - 1 (gemma3: 6), gemma2: even layers (2)
};

static const struct gguf_family gguf_families[] = {
    {"llama", false, false, false, false, false, 0}, {"mistral", false, false, false, false, false, 0},
    {"qwen2", true, true, false, false, false, 0},    {"qwen3", true, false, true, false, false, 0},
    {"gemma2", true, false, false, true, false, 2},   {"gemma3", true, false, true, true, false, 6},
    {"phi3", true, false, false, false, true, 0},     {"qwen3moe", true, false, true, false, false, 0},
    {"gpt-oss", true, false, false, false, false, 2},
};

static bool is_gptoss(const struct gguf_family *f) { return !strcmp(f->name, "gpt-oss"); }

// One load: the model and the tensors taken so far.
struct gguf_load {
    struct model *m;
    const char *arch, *path;
    const struct tensor_info **used;
    int n_used;
};

static void weight_from_tensor(struct weight *w, const struct tensor_info *t) {
    w->dtype = t->dtype;
    w->cols = t->ne[0];
    w->rows = t->n_dims >= 2 ? t->ne[1] : 1;
    if (t->n_dims > 2) w->rows *= t->ne[2] * t->ne[3];
    w->data = t->data;
}

static void take(struct gguf_load *L, const struct tensor_info *t) {
    for (int i = 0; i < L->n_used; i++)
        if (L->used[i] == t) return;
    L->used[L->n_used++] = t;
}

static int gguf_weight(struct gguf_load *L, struct weight *w, const char *name, bool required) {
    const struct tensor_info *t = gguf_find_tensor(L->m->gguf, name);
    if (!t) return required ? err_set(OCT_EINVAL, "gguf %s: missing tensor '%s'", L->path, name) : OCT_OK;
    take(L, t);
    weight_from_tensor(w, t);
    return OCT_OK;
}

static int layer_tensor(struct gguf_load *L, struct weight *w, int l, const char *suffix, bool required) {
    char tn[96];
    snprintf(tn, sizeof tn, "blk.%d.%s", l, suffix);
    return gguf_weight(L, w, tn, required);
}

static int int_key(struct gguf_load *L, const char *suffix, int64_t *out, bool required, int64_t def) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    if (!gguf_has_key(L->m->gguf, key)) {
        if (required) return err_set(OCT_EINVAL, "gguf %s: missing key '%s'", L->path, key);
        *out = def;
        return OCT_OK;
    }
    if (gguf_get_int(L->m->gguf, key, out) < 0) return err_wrap(OCT_EINVAL, "gguf %s: ", L->path);
    if (*out < 0 || *out > (1 << 30))
        return err_set(OCT_EINVAL, "gguf %s: key '%s' = %lld out of range", L->path, key, (long long)*out);
    return OCT_OK;
}

// A float key: absent → def; present with a non-numeric type → an error naming it.
static int float_key(struct gguf_load *L, const char *suffix, double def, double *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    if (!gguf_has_key(L->m->gguf, key)) { *out = def; return OCT_OK; }
    if (gguf_get_float(L->m->gguf, key, out) < 0) return err_wrap(OCT_EINVAL, "gguf %s: ", L->path);
    if (!isfinite(*out)) return err_set(OCT_EINVAL, "gguf %s: key '%s' is not finite", L->path, key);
    return OCT_OK;
}

// YaRN's ramp (rope.scaling.yarn_beta_fast / _slow, defaults 32 and 1); the keys that would change the
// math otherwise (an extrapolation mix other than 1, a given attention factor, DeepSeek's log multiplier)
// are refused by name.
static int yarn_keys(struct gguf_load *L) {
    struct rope_config *r = &L->m->cfg.rope;
    TRY(float_key(L, "rope.scaling.yarn_beta_fast", 32.0, &r->beta_fast));
    TRY(float_key(L, "rope.scaling.yarn_beta_slow", 1.0, &r->beta_slow));
    static const struct { const char *key; double neutral; } fixed[] = {
        {"rope.scaling.yarn_ext_factor", 1.0}, {"rope.scaling.yarn_attn_factor", 1.0},
        {"rope.scaling.yarn_log_multiplier", 0.0}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        double v;
        TRY(float_key(L, fixed[i].key, fixed[i].neutral, &v));
        if (v != fixed[i].neutral)
            return err_set(OCT_EUNSUP, "gguf %s: %s.%s = %g is not supported (only %g)", L->path, L->arch,
                           fixed[i].key, v, fixed[i].neutral);
    }
    return OCT_OK;
}

static int rope_keys(struct gguf_load *L, const struct gguf_family *f) {
    struct model_config *c = &L->m->cfg;
    int64_t v;
    TRY(int_key(L, "rope.dimension_count", &v, false, c->head_dim));
    c->rope.n_rot = (int)v;
    TRY(float_key(L, "rope.freq_base", 10000.0, &c->rope.theta));
    c->rope.neox = f->neox;
    // gpt-oss's YaRN ramp is not rounded to whole dimensions (its reference and config.json: truncate false)
    c->rope.truncate = !is_gptoss(f);
    c->rope.beta_fast = 32;
    c->rope.beta_slow = 1;
    c->rope.low_freq_factor = 1;
    c->rope.high_freq_factor = 4;
    const char *st;
    size_t st_len;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", L->arch);
    if (gguf_get_str(L->m->gguf, key, &st, &st_len) == 0) {
        if (st_len == 6 && !memcmp(st, "linear", 6)) c->rope.scaling = ROPE_SCALING_LINEAR;
        else if (st_len == 4 && !memcmp(st, "yarn", 4)) c->rope.scaling = ROPE_SCALING_YARN;
        else if (!(st_len == 4 && !memcmp(st, "none", 4)))
            return err_set(OCT_EUNSUP, "gguf %s: rope scaling type '%.*s' not supported", L->path, (int)st_len, st);
        TRY(float_key(L, "rope.scaling.factor", 1.0, &c->rope.factor));
        TRY(int_key(L, "rope.scaling.original_context_length", &v, false, c->max_pos));
        c->rope.orig_max_pos = (int)v;
        TRY(yarn_keys(L));
        if (c->rope.scaling != ROPE_SCALING_NONE && !(c->rope.factor > 0))
            return err_set(OCT_EINVAL, "gguf %s: rope scaling factor %g must be positive", L->path, c->rope.factor);
    }
    const struct tensor_info *rf = gguf_find_tensor(L->m->gguf, "rope_freqs.weight");
    if (rf) {
        take(L, rf);
        if (rf->dtype != DT_F32 || tensor_n_elems(rf) != c->rope.n_rot / 2 || c->rope.n_rot / 2 > 256)
            return err_set(OCT_EINVAL, "gguf %s: rope_freqs.weight must be %d f32 values", L->path, c->rope.n_rot / 2);
        c->rope.n_freq_factors = c->rope.n_rot / 2;
        memcpy(c->rope.freq_factors, rf->data, (size_t)c->rope.n_freq_factors * 4);
    }
    if (gguf_find_tensor(L->m->gguf, "rope_factors_long.weight"))
        return err_set(OCT_EUNSUP, "gguf %s: LongRoPE (rope_factors_long.weight) is not supported", L->path);
    if (!strcmp(f->name, "gemma3")) {  // the sliding layers' own base (llama.cpp: 10000 unless given)
        c->local_rope = true;
        c->rope_local = c->rope;
        c->rope_local.scaling = ROPE_SCALING_NONE;
        c->rope_local.factor = 1;
        c->rope_local.n_freq_factors = 0;
        TRY(float_key(L, "rope.freq_base_swa", 10000.0, &c->rope_local.theta));
    }
    return OCT_OK;
}

// The sliding layers: ARCH.attention.sliding_window_pattern (a period, or one bool per layer)
// where the file has it, else the family's period.
static int swa_layers(struct gguf_load *L, const struct gguf_family *f) {
    struct model_config *c = &L->m->cfg;
    int64_t v;
    TRY(int_key(L, "attention.sliding_window", &v, false, 0));
    c->sliding_window = (int)v;
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", L->arch);
    enum gguf_type et;
    size_t n;
    int period = f->swa_period;
    if (gguf_get_arr_info(L->m->gguf, key, &et, &n) == 0) {
        const void *d;
        if (et != GGUF_BOOL || n != (size_t)c->n_layers || gguf_get_arr_data(L->m->gguf, key, &d) < 0)
            return err_set(OCT_EINVAL, "gguf %s: '%s' must hold %d bools", L->path, key, c->n_layers);
        for (int l = 0; l < c->n_layers; l++) c->layer_sliding[l] = c->sliding_window > 0 && ((const uint8_t *)d)[l];
        return OCT_OK;
    }
    if (gguf_has_key(L->m->gguf, key)) {
        TRY(int_key(L, "attention.sliding_window_pattern", &v, false, 0));
        if (v < 1) return err_set(OCT_EINVAL, "gguf %s: '%s' must be positive", L->path, key);
        period = (int)v;
    }
    for (int l = 0; l < c->n_layers; l++)
        c->layer_sliding[l] = c->sliding_window > 0 && (period == 0 || l % period != period - 1);
    return OCT_OK;
}

static int family_keys(struct gguf_load *L, const struct gguf_family *f) {
    struct model_config *c = &L->m->cfg;
    c->qk_norm = f->qk_norm;
    c->attn_bias = f->qkv_bias;
    if (f->gemma) {
        double acap, fcap;
        c->post_norms = true;
        c->act = FFN_ACT_GELU_TANH;
        // Gemma computes with sqrt(dim) cast to its bf16 weights' dtype
        c->embed_scale = bf16_to_f32(f32_to_bf16(sqrtf((float)c->dim)));
        // query_pre_attn_scalar is not in GGUF: head_dim, but dim/heads on the 27B shapes (as llama.cpp)
        bool big = (!strcmp(f->name, "gemma2") && c->n_layers == 46) ||
                   (!strcmp(f->name, "gemma3") && c->n_layers == 62);
        c->attn_scale = 1.0f / sqrtf(big ? (float)c->dim / c->n_heads : (float)c->head_dim);
        TRY(float_key(L, "attn_logit_softcapping", 0, &acap));
        TRY(float_key(L, "final_logit_softcapping", 0, &fcap));
        if (acap < 0 || fcap < 0) return err_set(OCT_EINVAL, "gguf %s: soft-capping values must be >= 0", L->path);
        c->attn_softcap = (float)acap;
        c->final_softcap = (float)fcap;
    }
    // Llama-family files may carry projection biases: their presence in layer 0 says so
    char tn[64];
    if (!f->qkv_bias && gguf_find_tensor(L->m->gguf, "blk.0.attn_q.bias")) c->attn_bias = true;
    if (gguf_find_tensor(L->m->gguf, "blk.0.attn_output.bias")) c->o_bias = true;
    snprintf(tn, sizeof tn, "blk.0.ffn_%s.bias", f->phi3 ? "down" : "gate");
    if (gguf_find_tensor(L->m->gguf, tn)) c->mlp_bias = true;
    if (f->phi3 && c->mlp_bias) return err_set(OCT_EUNSUP, "gguf %s: phi3 with FFN biases is not supported", L->path);
    return OCT_OK;
}

// Mixture of experts: ARCH.expert_count / expert_used_count (qwen3moe, gpt-oss: expert_feed_forward_length
// is the experts' size); softmax routing with the chosen weights renormalised, as llama.cpp runs these
// families (gpt-oss's softmax over the top-k logits gives the same weights; llama.cpp's gating function 3,
// the softmax of the chosen logits, is accepted for it). gpt-oss's clamped SwiGLU takes the model's alpha
// 1.702 and limit 7.0, which its GGUF does not store (llama.cpp fixes them too). Shared experts and other
// gating functions are refused by name.
static int moe_keys(struct gguf_load *L, const struct gguf_family *f) {
    struct model_config *c = &L->m->cfg;
    bool qwen = !strcmp(f->name, "qwen3moe"), gptoss = is_gptoss(f);
    int64_t v;
    TRY(int_key(L, "expert_count", &v, qwen || gptoss, 0));
    c->n_experts = (int)v;
    if (!c->n_experts) return gptoss ? err_set(OCT_EINVAL, "gguf %s: %s.expert_count is 0", L->path, L->arch) : 0;
    if (strcmp(f->name, "llama") && !qwen && !gptoss)
        return err_set(OCT_EUNSUP, "gguf %s: %s with experts is not supported", L->path, f->name);
    TRY(int_key(L, "expert_used_count", &v, true, 0));
    c->n_experts_used = (int)v;
    if (c->n_experts > 4096 || c->n_experts_used < 1 || c->n_experts_used > c->n_experts)
        return err_set(OCT_EINVAL, "gguf %s: %s.expert_used_count %d of %s.expert_count %d", L->path, L->arch,
                       c->n_experts_used, L->arch, c->n_experts);
    if (qwen || gptoss) {
        TRY(int_key(L, "expert_feed_forward_length", &v, true, 0));
        c->ffn_dim = (int)v;
    }
    TRY(int_key(L, "expert_shared_count", &v, false, 0));
    if (v) return err_set(OCT_EUNSUP, "gguf %s: %s.expert_shared_count %lld (shared experts) is not supported",
                          L->path, L->arch, (long long)v);
    TRY(int_key(L, "expert_gating_func", &v, false, 1));
    if (v != 1 && !(gptoss && v == 3))
        return err_set(OCT_EUNSUP, "gguf %s: %s.expert_gating_func %lld is not supported (only softmax%s)", L->path,
                       L->arch, (long long)v, gptoss ? ", or softmax over the top-k (3)" : "");
    c->moe_norm_topk = true;
    if (gptoss) {
        c->moe_act = MOE_ACT_SWIGLU_CLAMP;
        c->swiglu_alpha = 1.702f;
        c->swiglu_limit = 7.0f;
        c->moe_bias = c->attn_sinks = true;
    } else if (!qwen) {
        snprintf(c->arch, sizeof c->arch, "mixtral");
    }
    return OCT_OK;
}

// One ggml MXFP4 block (byte i of qs: element i in the low nibble, element i + 16 in the high) as DT_MXFP4's
// (byte i: elements 2i and 2i + 1); the exponent byte stays first.
static void mxfp4_block_from_ggml(uint8_t *dst, const uint8_t *src) {
    const uint8_t *qs = src + 1;
    dst[0] = src[0];
    for (int i = 0; i < QK_MXFP4 / 2; i++) {
        const int a = 2 * i, b = 2 * i + 1;  // (elements < 16 are low nibbles, the rest high)
        const int ea = a < 16 ? qs[a] & 15 : qs[a - 16] >> 4, eb = b < 16 ? qs[b] & 15 : qs[b - 16] >> 4;
        dst[1 + i] = (uint8_t)(ea | eb << 4);
    }
}

// Of a [E][R][cols] expert tensor t (ne = {cols, R, E}), rows r0 .. r0 + n of every expert as a
// [E·n][cols] weight: t itself where that is all of it and its dtype is one octet computes with, else an
// owned copy (ggml MXFP4 repacked to DT_MXFP4).
static int expert_rows(struct gguf_load *L, struct weight *w, const struct tensor_info *t, int64_t E, int64_t R,
                       int64_t r0, int64_t n) {
    if (t->n_dims != 3 || t->ne[1] != R || t->ne[2] != E)
        return err_set(OCT_EINVAL, "gguf %s: tensor '%s' must be [%lld, %lld, cols] (it has %d dims, %lld x %lld)",
                       L->path, t->name, (long long)E, (long long)R, t->n_dims, (long long)t->ne[2],
                       (long long)t->ne[1]);
    weight_from_tensor(w, t);
    const bool ggml = t->dtype == DT_MXFP4_GGML;
    if (!ggml && r0 == 0 && n == R) return OCT_OK;
    const size_t rb = dtype_row_bytes(t->dtype, t->ne[0]);
    uint8_t *d = model_own(L->m, (size_t)(E * n) * rb);
    if (!d) return err_set(OCT_ENOMEM, "model: out of memory reordering the experts of '%s'", t->name);
    for (int64_t e = 0; e < E; e++) {
        const uint8_t *src = (const uint8_t *)t->data + (size_t)(e * R + r0) * rb;
        uint8_t *dst = d + (size_t)(e * n) * rb;
        if (!ggml) { memcpy(dst, src, (size_t)n * rb); continue; }
        for (size_t b = 0; b < (size_t)n * rb; b += 1 + QK_MXFP4 / 2) mxfp4_block_from_ggml(dst + b, src + b);
    }
    *w = (struct weight){ggml ? DT_MXFP4 : t->dtype, E * n, t->ne[0], d, NULL, {0}, 0};
    return OCT_OK;
}

// Of a [E][R] expert bias t (ne = {R, E}), elements r0 .. r0 + n of every expert as one [1][E·n] row.
static int expert_bias(struct gguf_load *L, struct weight *w, const struct tensor_info *t, int64_t E, int64_t R,
                       int64_t r0, int64_t n) {
    if (t->n_dims != 2 || t->ne[0] != R || t->ne[1] != E || !dtype_size(t->dtype))
        return err_set(OCT_EINVAL, "gguf %s: tensor '%s' must be [%lld, %lld] of a float type", L->path, t->name,
                       (long long)E, (long long)R);
    const size_t es = dtype_size(t->dtype);
    *w = (struct weight){t->dtype, 1, E * n, t->data, NULL, {0}, 0};
    if (r0 == 0 && n == R) return OCT_OK;
    char *d = model_own(L->m, (size_t)(E * n) * es);
    if (!d) return err_set(OCT_ENOMEM, "model: out of memory splitting '%s'", t->name);
    for (int64_t e = 0; e < E; e++) memcpy(d + (size_t)(e * n) * es, (const char *)t->data + (e * R + r0) * es, n * es);
    w->data = d;
    return OCT_OK;
}

// Of blk.l.NAME.weight ([E][R][cols]) and blk.l.NAME.bias ([E][R]): rows r0 .. r0 + n of every expert into w
// and the same entries of the bias into b (expert_rows, expert_bias).
static int expert_part(struct gguf_load *L, int l, const char *name, struct weight *w, struct weight *b, int64_t R,
                       int64_t r0, int64_t n) {
    const int64_t E = L->m->cfg.n_experts;
    const struct tensor_info *t[2];
    for (int k = 0; k < 2; k++) {
        char tn[96];
        snprintf(tn, sizeof tn, "blk.%d.%s.%s", l, name, k ? "bias" : "weight");
        if (!(t[k] = gguf_find_tensor(L->m->gguf, tn)))
            return err_set(OCT_EINVAL, "gguf %s: missing tensor '%s'", L->path, tn);
        take(L, t[k]);
    }
    TRY(expert_rows(L, w, t[0], E, R, r0, n));
    return expert_bias(L, b, t[1], E, R, r0, n);
}

// A gpt-oss layer's router (ffn_gate_inp .weight / .bias) and experts, with their biases: ffn_gate_exps and
// ffn_up_exps, or both in ffn_gate_up_exps (llama.cpp's --fuse-gate-up-exps: an expert's gate rows, then its
// up rows), and ffn_down_exps. MXFP4 experts are repacked, bf16/f16/f32 ones read in place.
static int load_experts_gptoss(struct gguf_load *L, int l) {
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    struct layer_weights *w = &m->layers[l];
    const int64_t F = c->ffn_dim, D = c->dim;
    TRY(layer_tensor(L, &w->ffn_router, l, "ffn_gate_inp.weight", true));
    TRY(layer_tensor(L, &w->ffn_router_b, l, "ffn_gate_inp.bias", true));
    char tn[96];
    snprintf(tn, sizeof tn, "blk.%d.ffn_gate_up_exps.weight", l);
    if (gguf_find_tensor(m->gguf, tn)) {
        TRY(expert_part(L, l, "ffn_gate_up_exps", &w->exp_gate, &w->exp_b_gate, 2 * F, 0, F));
        TRY(expert_part(L, l, "ffn_gate_up_exps", &w->exp_up, &w->exp_b_up, 2 * F, F, F));
    } else {
        TRY(expert_part(L, l, "ffn_gate_exps", &w->exp_gate, &w->exp_b_gate, F, 0, F));
        TRY(expert_part(L, l, "ffn_up_exps", &w->exp_up, &w->exp_b_up, F, 0, F));
    }
    TRY(expert_part(L, l, "ffn_down_exps", &w->exp_down, &w->exp_b_down, D, 0, D));
    return layer_tensor(L, &w->attn_sinks, l, "attn_sinks.weight", true);
}

static int load_layer(struct gguf_load *L, const struct gguf_family *f, int l) {
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    struct layer_weights *w = &m->layers[l];
    TRY(layer_tensor(L, &w->attn_norm, l, "attn_norm.weight", true));
    TRY(layer_tensor(L, &w->wo, l, "attn_output.weight", true));
    // (gpt-oss's norm before the experts is llama.cpp's post_attention_norm, after HF's name)
    TRY(layer_tensor(L, &w->ffn_norm, l, is_gptoss(f) ? "post_attention_norm.weight" : "ffn_norm.weight", true));
    if (is_gptoss(f)) {
        TRY(load_experts_gptoss(L, l));
    } else if (c->n_experts) {
        TRY(layer_tensor(L, &w->ffn_router, l, "ffn_gate_inp.weight", true));
        TRY(layer_tensor(L, &w->exp_gate, l, "ffn_gate_exps.weight", true));
        TRY(layer_tensor(L, &w->exp_up, l, "ffn_up_exps.weight", true));
        TRY(layer_tensor(L, &w->exp_down, l, "ffn_down_exps.weight", true));
    } else {
        TRY(layer_tensor(L, &w->w_down, l, "ffn_down.weight", true));
    }
    if (f->phi3) {
        struct weight qkv = {0}, gu = {0};
        TRY(layer_tensor(L, &qkv, l, "attn_qkv.weight", true));
        TRY(layer_tensor(L, &gu, l, "ffn_up.weight", true));
        int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
        if (qkv.rows != qd + 2 * kvd || gu.rows != 2 * (int64_t)c->ffn_dim)
            return err_set(OCT_EINVAL, "gguf %s: layer %d: attn_qkv has %lld rows (want %lld), ffn_up %lld (want %d)",
                           L->path, l, (long long)qkv.rows, (long long)(qd + 2 * kvd), (long long)gu.rows,
                           2 * c->ffn_dim);
        size_t rb = dtype_row_bytes(qkv.dtype, qkv.cols), gb = dtype_row_bytes(gu.dtype, gu.cols);
        w->wq = qkv, w->wq.rows = qd;
        w->wk = qkv, w->wk.rows = kvd, w->wk.data = (const char *)qkv.data + qd * rb;
        w->wv = qkv, w->wv.rows = kvd, w->wv.data = (const char *)qkv.data + (qd + kvd) * rb;
        w->w_gate = gu, w->w_gate.rows = c->ffn_dim;
        w->w_up = gu, w->w_up.rows = c->ffn_dim, w->w_up.data = (const char *)gu.data + (size_t)c->ffn_dim * gb;
    } else {
        TRY(layer_tensor(L, &w->wq, l, "attn_q.weight", true));
        TRY(layer_tensor(L, &w->wk, l, "attn_k.weight", true));
        TRY(layer_tensor(L, &w->wv, l, "attn_v.weight", true));
        if (!c->n_experts) {
            TRY(layer_tensor(L, &w->w_gate, l, "ffn_gate.weight", true));
            TRY(layer_tensor(L, &w->w_up, l, "ffn_up.weight", true));
        }
    }
    if (c->attn_bias) {
        TRY(layer_tensor(L, &w->bq, l, "attn_q.bias", true));
        TRY(layer_tensor(L, &w->bk, l, "attn_k.bias", true));
        TRY(layer_tensor(L, &w->bv, l, "attn_v.bias", true));
    }
    if (c->o_bias) TRY(layer_tensor(L, &w->bo, l, "attn_output.bias", true));
    if (c->mlp_bias) {
        TRY(layer_tensor(L, &w->b_gate, l, "ffn_gate.bias", true));
        TRY(layer_tensor(L, &w->b_up, l, "ffn_up.bias", true));
        TRY(layer_tensor(L, &w->b_down, l, "ffn_down.bias", true));
    }
    if (c->qk_norm) {
        TRY(layer_tensor(L, &w->q_norm, l, "attn_q_norm.weight", true));
        TRY(layer_tensor(L, &w->k_norm, l, "attn_k_norm.weight", true));
    }
    if (c->post_norms) {  // (llama.cpp's converter stores Gemma's norms as 1 + w already)
        TRY(layer_tensor(L, &w->post_attn_norm, l, "post_attention_norm.weight", true));
        TRY(layer_tensor(L, &w->post_ffn_norm, l, "post_ffw_norm.weight", true));
    }
    return OCT_OK;
}

// octet's convention for checkpoint KV scales: blk.N.attn_k_scale / attn_v_scale.
static int layer_kv_scales(struct gguf_load *L, int l) {
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    char kn[96], vn[96];
    snprintf(kn, sizeof kn, "blk.%d.attn_k_scale", l);
    snprintf(vn, sizeof vn, "blk.%d.attn_v_scale", l);
    const struct tensor_info *ks = gguf_find_tensor(m->gguf, kn), *vs = gguf_find_tensor(m->gguf, vn);
    if (!ks && !vs) return OCT_OK;
    if (!m->ckpt_k_scale) {
        m->ckpt_k_scale = model_own(m, (size_t)c->n_layers * c->n_kv_heads * sizeof(float));
        m->ckpt_v_scale = model_own(m, (size_t)c->n_layers * c->n_kv_heads * sizeof(float));
        if (!m->ckpt_k_scale || !m->ckpt_v_scale) return err_set(OCT_ENOMEM, "model: out of memory");
        for (int i = 0; i < c->n_layers * c->n_kv_heads; i++) m->ckpt_k_scale[i] = m->ckpt_v_scale[i] = 1.0f;
    }
    const struct tensor_info *ts[2] = {ks, vs};
    float *dst[2] = {m->ckpt_k_scale + l * c->n_kv_heads, m->ckpt_v_scale + l * c->n_kv_heads};
    for (int j = 0; j < 2; j++) {
        if (!ts[j]) continue;
        take(L, ts[j]);
        int64_t n = tensor_n_elems(ts[j]);
        if (ts[j]->dtype != DT_F32 || (n != 1 && n != c->n_kv_heads))
            return err_set(OCT_EINVAL, "gguf %s: tensor %s must be f32 with 1 or %d values", L->path, ts[j]->name,
                           c->n_kv_heads);
        for (int h = 0; h < c->n_kv_heads; h++) {
            float s;
            memcpy(&s, (const float *)ts[j]->data + (n == 1 ? 0 : h), 4);
            if (!(s > 0) || s > 1e30f)
                return err_set(OCT_EINVAL, "gguf %s: tensor %s has a non-positive scale", L->path, ts[j]->name);
            dst[j][h] = s;
        }
    }
    return OCT_OK;
}

int model_load_gguf(struct model *m, const char *path) {
    TRY(gguf_open_load(&m->gguf, path, m->weights_load));
    struct model_config *c = &m->cfg;
    const char *arch_s;
    size_t arch_len;
    if (gguf_get_str(m->gguf, "general.architecture", &arch_s, &arch_len) < 0)
        return err_set(OCT_EINVAL, "gguf %s: missing key 'general.architecture'", path);
    char arch[32];
    snprintf(arch, sizeof arch, "%.*s", (int)(arch_len < 31 ? arch_len : 31), arch_s);
    const struct gguf_family *f = NULL;
    for (size_t i = 0; i < sizeof gguf_families / sizeof gguf_families[0]; i++)
        if (!strcmp(gguf_families[i].name, arch)) f = &gguf_families[i];
    if (!f)
        return err_set(OCT_EUNSUP, "gguf %s: architecture '%s' is not supported "
                       "(llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3, qwen3moe, gpt-oss)", path, arch);
    snprintf(c->arch, sizeof c->arch, "%s", !strcmp(arch, "mistral") ? "llama" : is_gptoss(f) ? "gptoss" : arch);
    struct gguf_load L = {m, arch, path, model_own(m, (size_t)(gguf_n_tensors(m->gguf) + 1) * sizeof(void *)), 0};
    if (!L.used) return err_set(OCT_ENOMEM, "model: out of memory");
    int64_t v;
    TRY(int_key(&L, "block_count", &v, true, 0)); c->n_layers = (int)v;
    TRY(int_key(&L, "embedding_length", &v, true, 0)); c->dim = (int)v;
    TRY(int_key(&L, "attention.head_count", &v, true, 0)); c->n_heads = (int)v;
    TRY(int_key(&L, "attention.head_count_kv", &v, false, c->n_heads)); c->n_kv_heads = (int)v;
    TRY(int_key(&L, "feed_forward_length", &v, !is_gptoss(f), 0)); c->ffn_dim = (int)v;
    TRY(int_key(&L, "context_length", &v, false, 2048)); c->max_pos = (int)v;
    if (c->n_heads <= 0) return err_set(OCT_EINVAL, "gguf %s: attention.head_count must be positive", path);
    TRY(int_key(&L, "attention.key_length", &v, false, c->dim / c->n_heads)); c->head_dim = (int)v;
    if (c->n_layers > MODEL_MAX_LAYERS)
        return err_set(OCT_EUNSUP, "gguf %s: %d layers (max %d)", path, c->n_layers, MODEL_MAX_LAYERS);
    double eps;
    TRY(float_key(&L, "attention.layer_norm_rms_epsilon", 1e-5, &eps));
    c->norm_eps = (float)eps;
    TRY(rope_keys(&L, f));
    TRY(swa_layers(&L, f));
    TRY(family_keys(&L, f));
    TRY(moe_keys(&L, f));

    TRY(gguf_weight(&L, &m->token_embd, "token_embd.weight", true));
    TRY(gguf_weight(&L, &m->output_norm, "output_norm.weight", true));
    TRY(gguf_weight(&L, &m->output, "output.weight", false));
    if (!m->output.data) { m->output = m->token_embd; c->tied_output = true; }
    c->n_vocab = (int)m->token_embd.rows;
    for (int l = 0; l < c->n_layers; l++) {
        TRY(load_layer(&L, f, l));
        TRY(layer_kv_scales(&L, l));
    }
    for (int i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const struct tensor_info *t = gguf_tensor(m->gguf, i);
        bool used = false;
        for (int k = 0; k < L.n_used && !used; k++) used = L.used[k] == t;
        if (!used)
            return err_set(OCT_EINVAL, "gguf %s: tensor '%s' is not used by %s (a different variant?)", path, t->name,
                           arch);
    }
    // no tokenizer (the key absent, or llama.cpp's "none" / "no_vocab" for vocabulary-free files): the byte stand-in
    const char *tm = NULL;
    size_t tm_len = 0;
    if (!gguf_has_key(m->gguf, "tokenizer.ggml.model")) return OCT_OK;
    if (gguf_get_str(m->gguf, "tokenizer.ggml.model", &tm, &tm_len) == 0 &&
        ((tm_len == 4 && !memcmp(tm, "none", 4)) || (tm_len == 8 && !memcmp(tm, "no_vocab", 8))))
        return OCT_OK;
    return tokenizer_from_gguf(&m->tok, m->gguf);
}
