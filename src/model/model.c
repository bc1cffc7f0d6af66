// model.c — model_load dispatch, ownership of backing storage, shape validation, and the
// GGUF → struct model mapping (llama-family keys and tensor names).
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/check.h"
#include "../base/half.h"
#include "gguf.h"
#include "safetensors.h"
#include "tokenizer.h"

void *model_own(struct model *m, size_t bytes) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 16;
        void **o = realloc(m->owned, (size_t)cap * sizeof(void *));
        if (!o) return NULL;
        m->owned = o;
        m->cap_owned = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p) m->owned[m->n_owned++] = p;
    return p;
}

void model_free(struct model *m) {
    if (!m) return;
    if (m->tok) tokenizer_free(m->tok);
    if (m->gguf) gguf_close(m->gguf);
    if (m->st) st_close(m->st);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m);
}

int model_load(struct model **out, const char *path) {
    *out = NULL;
    struct model *m = calloc(1, sizeof *m);
    if (!m) return err_set(OCT_ENOMEM, "model: out of memory");
    snprintf(m->name, sizeof m->name, "%s", path);
    int rc;
    struct stat st;
    if (strncmp(path, "dummy:", 6) == 0) rc = model_load_dummy(m, path + 6);
    else if (stat(path, &st) != 0) rc = err_set(OCT_EIO, "model %s: no such file or directory", path);
    else if (S_ISDIR(st.st_mode)) rc = model_load_safetensors(m, path);
    else rc = model_load_gguf(m, path);
    if (rc == OCT_OK) rc = model_finish(m);
    if (rc < 0) { model_free(m); return rc; }
    *out = m;
    return OCT_OK;
}

static int check_shape(const struct weight *w, const char *what, int layer, int64_t rows, int64_t cols) {
    if (!w->data) return err_set(OCT_EINVAL, "model: missing tensor %s (layer %d)", what, layer);
    if (w->rows != rows || w->cols != cols)
        return err_set(OCT_EINVAL, "model: tensor %s (layer %d) is [%lld x %lld], expected [%lld x %lld]", what, layer,
                       (long long)w->rows, (long long)w->cols, (long long)rows, (long long)cols);
    if (w->dtype != DT_F32 && w->dtype != DT_F16 && w->dtype != DT_BF16)
        return err_set(OCT_EUNSUP, "model: tensor %s (layer %d) has dtype %s (need f32, f16 or bf16)",
                       what, layer, dtype_name(w->dtype));
    return OCT_OK;
}

void layer_weight_list(struct layer_weights *w, struct weight *out[LAYER_N_WEIGHTS]) {
    struct weight *ws[LAYER_N_WEIGHTS] = {&w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo, &w->ffn_norm,
                                          &w->w_gate, &w->w_up, &w->w_down, &w->bq, &w->bk, &w->bv, &w->bo,
                                          &w->q_norm, &w->k_norm, &w->post_attn_norm, &w->post_ffn_norm,
                                          &w->b_gate, &w->b_up, &w->b_down};
    memcpy(out, ws, sizeof ws);
}

int model_norm_plus_one(struct model *m, struct weight *w) {
    if (!w->data) return OCT_OK;
    size_t n = (size_t)(w->rows * w->cols);
    float *d = model_own(m, n * sizeof(float));
    if (!d) return err_set(OCT_ENOMEM, "model: out of memory");
    if (w->dtype == DT_F32) memcpy(d, w->data, n * sizeof(float));
    else if (w->dtype == DT_BF16) bf16_row_to_f32(w->data, d, n);
    else if (w->dtype == DT_F16) f16_row_to_f32(w->data, d, n);
    else return err_set(OCT_EUNSUP, "model: norm weight of dtype %s (need f32, f16 or bf16)", dtype_name(w->dtype));
    for (size_t i = 0; i < n; i++) d[i] += 1.0f;
    w->data = d;
    w->dtype = DT_F32;
    return OCT_OK;
}

// An optional weight: absent and not wanted, or present with the shape wanted.
static int check_opt(const struct weight *w, bool want, const char *what, int layer, int64_t rows, int64_t cols) {
    if (!want) {
        if (w->data) return err_set(OCT_EINVAL, "model: tensor %s (layer %d) is not used by this architecture",
                                    what, layer);
        return OCT_OK;
    }
    return check_shape(w, what, layer, rows, cols);
}

int model_finish(struct model *m) {
    struct model_config *c = &m->cfg;
    TRY(config_validate(c));
    int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    TRY(check_shape(&m->token_embd, "token_embd", -1, c->n_vocab, c->dim));
    TRY(check_shape(&m->output_norm, "output_norm", -1, 1, c->dim));
    TRY(check_shape(&m->output, "output", -1, c->n_vocab, c->dim));
    size_t total = 0;
    const struct weight *top[] = {&m->token_embd, &m->output_norm, &m->output};
    for (int i = 0; i < 3; i++)
        if (i < 2 || m->output.data != m->token_embd.data)
            total += (size_t)(top[i]->rows * top[i]->cols) * dtype_size(top[i]->dtype);
    for (int l = 0; l < c->n_layers; l++) {
        struct layer_weights *w = &m->layers[l];
        TRY(check_shape(&w->attn_norm, "attn_norm", l, 1, c->dim));
        TRY(check_shape(&w->wq, "attn_q", l, qd, c->dim));
        TRY(check_shape(&w->wk, "attn_k", l, kvd, c->dim));
        TRY(check_shape(&w->wv, "attn_v", l, kvd, c->dim));
        TRY(check_shape(&w->wo, "attn_output", l, c->dim, qd));
        TRY(check_shape(&w->ffn_norm, "ffn_norm", l, 1, c->dim));
        TRY(check_shape(&w->w_gate, "ffn_gate", l, c->ffn_dim, c->dim));
        TRY(check_shape(&w->w_up, "ffn_up", l, c->ffn_dim, c->dim));
        TRY(check_shape(&w->w_down, "ffn_down", l, c->dim, c->ffn_dim));
        TRY(check_opt(&w->bq, c->attn_bias, "attn_q.bias", l, 1, qd));
        TRY(check_opt(&w->bk, c->attn_bias, "attn_k.bias", l, 1, kvd));
        TRY(check_opt(&w->bv, c->attn_bias, "attn_v.bias", l, 1, kvd));
        TRY(check_opt(&w->bo, c->o_bias, "attn_output.bias", l, 1, c->dim));
        TRY(check_opt(&w->q_norm, c->qk_norm, "attn_q_norm", l, 1, c->head_dim));
        TRY(check_opt(&w->k_norm, c->qk_norm, "attn_k_norm", l, 1, c->head_dim));
        TRY(check_opt(&w->post_attn_norm, c->post_norms, "post_attention_norm", l, 1, c->dim));
        TRY(check_opt(&w->post_ffn_norm, c->post_norms, "post_ffw_norm", l, 1, c->dim));
        TRY(check_opt(&w->b_gate, c->mlp_bias, "ffn_gate.bias", l, 1, c->ffn_dim));
        TRY(check_opt(&w->b_up, c->mlp_bias, "ffn_up.bias", l, 1, c->ffn_dim));
        TRY(check_opt(&w->b_down, c->mlp_bias, "ffn_down.bias", l, 1, c->dim));
        struct weight *ws[LAYER_N_WEIGHTS];
        layer_weight_list(w, ws);
        for (int i = 0; i < LAYER_N_WEIGHTS; i++)
            if (ws[i]->data) total += (size_t)(ws[i]->rows * ws[i]->cols) * dtype_size(ws[i]->dtype);
    }
    m->weight_bytes = total;
    m->weight_dtype = m->layers[0].wq.dtype;
    if (!m->tok) {
        TRY(tokenizer_bytes(&m->tok, c->n_vocab));
    }
    return OCT_OK;
}

// ---- GGUF ----

static void weight_from_tensor(struct weight *w, const struct tensor_info *t) {
    w->dtype = t->dtype;
    w->cols = t->ne[0];
    w->rows = t->n_dims >= 2 ? t->ne[1] : 1;
    if (t->n_dims > 2) w->rows *= t->ne[2] * t->ne[3];
    w->data = t->data;
}

static int gguf_weight(struct model *m, struct weight *w, const char *name, bool required) {
    const struct tensor_info *t = gguf_find_tensor(m->gguf, name);
    if (!t) return required ? err_set(OCT_EINVAL, "gguf %s: missing tensor '%s'", gguf_path(m->gguf), name) : OCT_OK;
    weight_from_tensor(w, t);
    return OCT_OK;
}

static int gguf_int_key(struct model *m, const char *arch, const char *suffix, int64_t *out, bool required,
                        int64_t def) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!gguf_has_key(m->gguf, key)) {
        if (required) return err_set(OCT_EINVAL, "gguf %s: missing key '%s'", gguf_path(m->gguf), key);
        *out = def;
        return OCT_OK;
    }
    if (gguf_get_int(m->gguf, key, out) < 0) return err_wrap(OCT_EINVAL, "gguf %s: ", gguf_path(m->gguf));
    if (*out < 0 || *out > (1 << 30))
        return err_set(OCT_EINVAL, "gguf %s: key '%s' = %lld out of range", gguf_path(m->gguf), key, (long long)*out);
    return OCT_OK;
}

static double gguf_float_key(struct model *m, const char *arch, const char *suffix, double def) {
    char key[160];
    double v;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_get_float(m->gguf, key, &v) == 0 ? v : def;
}

int model_load_gguf(struct model *m, const char *path) {
    TRY(gguf_open(&m->gguf, path));
    struct model_config *c = &m->cfg;
    const char *arch_s;
    size_t arch_len;
    if (gguf_get_str(m->gguf, "general.architecture", &arch_s, &arch_len) < 0)
        return err_set(OCT_EINVAL, "gguf %s: missing key 'general.architecture'", path);
    char arch[32];
    snprintf(arch, sizeof arch, "%.*s", (int)(arch_len < 31 ? arch_len : 31), arch_s);
    if (strcmp(arch, "llama") != 0 && strcmp(arch, "mistral") != 0)
        return err_set(OCT_EUNSUP, "gguf %s: architecture '%s' is not supported (llama, mistral)", path, arch);
    snprintf(c->arch, sizeof c->arch, "llama");
    int64_t v;
    TRY(gguf_int_key(m, arch, "block_count", &v, true, 0)); c->n_layers = (int)v;
    TRY(gguf_int_key(m, arch, "embedding_length", &v, true, 0)); c->dim = (int)v;
    TRY(gguf_int_key(m, arch, "attention.head_count", &v, true, 0)); c->n_heads = (int)v;
    TRY(gguf_int_key(m, arch, "attention.head_count_kv", &v, false, c->n_heads)); c->n_kv_heads = (int)v;
    TRY(gguf_int_key(m, arch, "feed_forward_length", &v, true, 0)); c->ffn_dim = (int)v;
    TRY(gguf_int_key(m, arch, "context_length", &v, false, 2048)); c->max_pos = (int)v;
    if (c->n_heads <= 0) return err_set(OCT_EINVAL, "gguf %s: attention.head_count must be positive", path);
    TRY(gguf_int_key(m, arch, "attention.key_length", &v, false, c->dim / c->n_heads)); c->head_dim = (int)v;
    TRY(gguf_int_key(m, arch, "rope.dimension_count", &v, false, c->head_dim)); c->rope.n_rot = (int)v;
    TRY(gguf_int_key(m, arch, "attention.sliding_window", &v, false, 0)); c->sliding_window = (int)v;
    c->norm_eps = (float)gguf_float_key(m, arch, "attention.layer_norm_rms_epsilon", 1e-5);
    c->rope.theta = gguf_float_key(m, arch, "rope.freq_base", 10000.0);
    c->rope.neox = false;  // GGUF llama: adjacent pairs
    const char *st;
    size_t st_len;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (gguf_get_str(m->gguf, key, &st, &st_len) == 0) {
        if (st_len == 6 && !memcmp(st, "linear", 6)) c->rope.scaling = ROPE_SCALING_LINEAR;
        else if (st_len == 4 && !memcmp(st, "yarn", 4)) c->rope.scaling = ROPE_SCALING_YARN;
        else if (!(st_len == 4 && !memcmp(st, "none", 4)))
            return err_set(OCT_EUNSUP, "gguf %s: rope scaling type '%.*s' not supported", path, (int)st_len, st);
        c->rope.factor = gguf_float_key(m, arch, "rope.scaling.factor", 1.0);
        TRY(gguf_int_key(m, arch, "rope.scaling.original_context_length", &v, false, c->max_pos));
        c->rope.orig_max_pos = (int)v;
        c->rope.beta_fast = 32; c->rope.beta_slow = 1; c->rope.truncate = true;
    }
    for (int l = 0; l < MODEL_MAX_LAYERS; l++) c->layer_sliding[l] = c->sliding_window > 0;

    TRY(gguf_weight(m, &m->token_embd, "token_embd.weight", true));
    TRY(gguf_weight(m, &m->output_norm, "output_norm.weight", true));
    TRY(gguf_weight(m, &m->output, "output.weight", false));
    if (!m->output.data) { m->output = m->token_embd; c->tied_output = true; }
    c->n_vocab = (int)m->token_embd.rows;
    const struct tensor_info *rf = gguf_find_tensor(m->gguf, "rope_freqs.weight");
    if (rf) {
        if (rf->dtype != DT_F32 || tensor_n_elems(rf) != c->rope.n_rot / 2 || c->rope.n_rot / 2 > 256)
            return err_set(OCT_EINVAL, "gguf %s: rope_freqs.weight must be %d f32 values", path, c->rope.n_rot / 2);
        c->rope.n_freq_factors = c->rope.n_rot / 2;
        memcpy(c->rope.freq_factors, rf->data, (size_t)c->rope.n_freq_factors * 4);
    }
    if (c->n_layers > MODEL_MAX_LAYERS)
        return err_set(OCT_EUNSUP, "gguf %s: %d layers (max %d)", path, c->n_layers, MODEL_MAX_LAYERS);
    static const char *names[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                   "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    for (int l = 0; l < c->n_layers; l++) {
        struct layer_weights *w = &m->layers[l];
        struct weight *ws[9] = {&w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo,
                                &w->ffn_norm, &w->w_gate, &w->w_up, &w->w_down};
        for (int i = 0; i < 9; i++) {
            char tn[96];
            snprintf(tn, sizeof tn, "blk.%d.%s.weight", l, names[i]);
            TRY(gguf_weight(m, ws[i], tn, true));
        }
        // octet's convention for checkpoint KV scales: blk.N.attn_k_scale / attn_v_scale
        char kn[96], vn[96];
        snprintf(kn, sizeof kn, "blk.%d.attn_k_scale", l);
        snprintf(vn, sizeof vn, "blk.%d.attn_v_scale", l);
        const struct tensor_info *ks = gguf_find_tensor(m->gguf, kn), *vs = gguf_find_tensor(m->gguf, vn);
        if (ks || vs) {
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
                int64_t n = tensor_n_elems(ts[j]);
                if (ts[j]->dtype != DT_F32 || (n != 1 && n != c->n_kv_heads))
                    return err_set(OCT_EINVAL, "gguf %s: tensor %s must be f32 with 1 or %d values",
                                   path, ts[j]->name, c->n_kv_heads);
                for (int h = 0; h < c->n_kv_heads; h++) {
                    float s;
                    memcpy(&s, (const float *)ts[j]->data + (n == 1 ? 0 : h), 4);
                    if (!(s > 0) || s > 1e30f)
                        return err_set(OCT_EINVAL, "gguf %s: tensor %s has a non-positive scale", path, ts[j]->name);
                    dst[j][h] = s;
                }
            }
        }
    }
    if (!gguf_has_key(m->gguf, "tokenizer.ggml.model")) return OCT_OK;  // byte stand-in
    return tokenizer_from_gguf(&m->tok, m->gguf);
}
