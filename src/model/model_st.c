// model_st.c — Hugging Face directory (config.json + safetensors) → struct model.
// Q and K projection rows are permuted from HF's rotate-half order into GGUF's
// adjacent-pair order (a copy), so both formats give the same model and the same logits.
#include <stdio.h>
#include <string.h>

#include "../base/check.h"
#include "../base/half.h"
#include "model.h"
#include "safetensors.h"
#include "tokenizer.h"

static int cfg_int(const json_t *cfg, const char *key, int *out, bool required, int def, const char *path) {
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v)) {
        if (required) return err_set(OCT_EINVAL, "%s/config.json: missing key '%s'", path, key);
        *out = def;
        return OCT_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 30))
        return err_set(OCT_EINVAL, "%s/config.json: '%s' must be a non-negative integer", path, key);
    *out = (int)json_integer_value(v);
    return OCT_OK;
}

static double cfg_num(const json_t *cfg, const char *key, double def) {
    json_t *v = json_object_get(cfg, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

static int parse_rope_scaling(struct rope_config *r, const json_t *rs, const char *path, int max_pos) {
    if (!rs || json_is_null(rs)) return OCT_OK;
    if (!json_is_object(rs)) return err_set(OCT_EINVAL, "%s/config.json: rope_scaling must be an object", path);
    json_t *t = json_object_get(rs, "rope_type");
    if (!t) t = json_object_get(rs, "type");
    const char *type = json_string_value(t);
    if (!type) return err_set(OCT_EINVAL, "%s/config.json: rope_scaling needs 'rope_type'", path);
    if (!strcmp(type, "default")) return OCT_OK;
    else if (!strcmp(type, "linear")) r->scaling = ROPE_SCALING_LINEAR;
    else if (!strcmp(type, "dynamic")) r->scaling = ROPE_SCALING_DYNAMIC;
    else if (!strcmp(type, "ntk")) r->scaling = ROPE_SCALING_NTK;
    else if (!strcmp(type, "yarn")) r->scaling = ROPE_SCALING_YARN;
    else if (!strcmp(type, "llama3")) r->scaling = ROPE_SCALING_LLAMA3;
    else return err_set(OCT_EUNSUP, "%s/config.json: rope_scaling type '%s' not supported", path, type);
    r->factor = cfg_num(rs, "factor", 1.0);
    r->orig_max_pos = (int)cfg_num(rs, "original_max_position_embeddings", max_pos);
    r->low_freq_factor = cfg_num(rs, "low_freq_factor", 1.0);
    r->high_freq_factor = cfg_num(rs, "high_freq_factor", 4.0);
    r->beta_fast = cfg_num(rs, "beta_fast", 32.0);
    r->beta_slow = cfg_num(rs, "beta_slow", 1.0);
    r->attn_factor = cfg_num(rs, "attention_factor", 0.0);
    if (!(r->factor > 0)) return err_set(OCT_EINVAL, "%s/config.json: rope_scaling.factor must be positive", path);
    if (r->scaling == ROPE_SCALING_LLAMA3 && !(r->high_freq_factor > r->low_freq_factor))
        return err_set(OCT_EINVAL, "%s/config.json: rope_scaling high_freq_factor must exceed low_freq_factor", path);
    return OCT_OK;
}

static int st_weight(struct model *m, struct weight *w, const char *name, bool required) {
    const struct tensor_info *t = st_find_tensor(m->st, name);
    if (!t) return required ? err_set(OCT_EINVAL, "%s: missing tensor '%s'", st_path(m->st), name) : OCT_OK;
    if (t->n_dims > 2)
        return err_set(OCT_EINVAL, "%s: tensor '%s' has %d dims (want 1 or 2)", st_path(m->st), name, t->n_dims);
    w->dtype = t->dtype;
    w->cols = t->ne[0];
    w->rows = t->n_dims == 2 ? t->ne[1] : 1;
    w->data = t->data;
    return OCT_OK;
}

// HF row (i*hd/2 + j) of each head goes to row (2j + i).
static int permute_qk(struct model *m, struct weight *w, int n_heads, int hd) {
    if (w->rows != (int64_t)n_heads * hd)
        return err_set(OCT_EINVAL, "%s: q/k projection has %lld rows, expected %d",
                       st_path(m->st), (long long)w->rows, n_heads * hd);
    size_t row_bytes = (size_t)w->cols * dtype_size(w->dtype);
    char *dst = model_own(m, row_bytes * (size_t)w->rows);
    if (!dst) return err_set(OCT_ENOMEM, "model: out of memory permuting q/k");
    const char *src = w->data;
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < hd / 2; j++)
                memcpy(dst + ((size_t)h * hd + 2 * j + i) * row_bytes,
                       src + ((size_t)h * hd + i * hd / 2 + j) * row_bytes, row_bytes);
    w->data = dst;
    return OCT_OK;
}

static int load_scale(struct model *m, int layer, float *dst, const char *const *names, int n_names) {
    const struct model_config *c = &m->cfg;
    for (int k = 0; k < n_names; k++) {
        char tn[128];
        snprintf(tn, sizeof tn, names[k], layer);
        const struct tensor_info *t = st_find_tensor(m->st, tn);
        if (!t) continue;
        int64_t n = tensor_n_elems(t);
        if ((t->dtype != DT_F32 && t->dtype != DT_BF16 && t->dtype != DT_F16) || (n != 1 && n != c->n_kv_heads))
            return err_set(OCT_EINVAL, "%s: scale tensor '%s' must hold 1 or %d floats",
                           st_path(m->st), tn, c->n_kv_heads);
        for (int h = 0; h < c->n_kv_heads; h++) {
            float s;
            int idx = n == 1 ? 0 : h;
            if (t->dtype == DT_F32) {
                memcpy(&s, (const float *)t->data + idx, 4);
            } else {
                uint16_t u;
                memcpy(&u, (const uint16_t *)t->data + idx, 2);
                s = t->dtype == DT_BF16 ? bf16_to_f32(u) : f16_to_f32(u);
            }
            if (!(s > 0) || s > 1e30f)
                return err_set(OCT_EINVAL, "%s: scale tensor '%s' holds a non-positive value", st_path(m->st), tn);
            dst[h] = s;
        }
        return 1;
    }
    return 0;
}

int model_load_safetensors(struct model *m, const char *dir) {
    TRY(st_open(&m->st, dir));
    const json_t *cfg = st_config(m->st);
    struct model_config *c = &m->cfg;
    snprintf(c->arch, sizeof c->arch, "llama");
    json_t *archs = json_object_get(cfg, "architectures");
    const char *a0 = json_string_value(json_array_get(archs, 0));
    if (a0 && strcmp(a0, "LlamaForCausalLM") && strcmp(a0, "MistralForCausalLM"))
        return err_set(OCT_EUNSUP, "%s/config.json: architecture '%s' not supported "
                       "(LlamaForCausalLM, MistralForCausalLM)", dir, a0);
    TRY(cfg_int(cfg, "num_hidden_layers", &c->n_layers, true, 0, dir));
    TRY(cfg_int(cfg, "hidden_size", &c->dim, true, 0, dir));
    TRY(cfg_int(cfg, "num_attention_heads", &c->n_heads, true, 0, dir));
    TRY(cfg_int(cfg, "num_key_value_heads", &c->n_kv_heads, false, c->n_heads, dir));
    TRY(cfg_int(cfg, "intermediate_size", &c->ffn_dim, true, 0, dir));
    TRY(cfg_int(cfg, "max_position_embeddings", &c->max_pos, false, 2048, dir));
    if (c->n_heads <= 0) return err_set(OCT_EINVAL, "%s/config.json: num_attention_heads must be positive", dir);
    TRY(cfg_int(cfg, "head_dim", &c->head_dim, false, c->dim / c->n_heads, dir));
    TRY(cfg_int(cfg, "sliding_window", &c->sliding_window, false, 0, dir));
    if (c->n_layers > MODEL_MAX_LAYERS)
        return err_set(OCT_EUNSUP, "%s: %d layers (max %d)", dir, c->n_layers, MODEL_MAX_LAYERS);
    json_t *lt = json_object_get(cfg, "layer_types");
    for (int l = 0; l < c->n_layers; l++) {
        const char *t = json_string_value(json_array_get(lt, (size_t)l));
        c->layer_sliding[l] = c->sliding_window > 0 && (!lt || (t && !strcmp(t, "sliding_attention")));
    }
    c->norm_eps = (float)cfg_num(cfg, "rms_norm_eps", 1e-5);
    c->rope.theta = cfg_num(cfg, "rope_theta", 10000.0);
    c->rope.n_rot = c->head_dim;
    c->rope.neox = false;  // rows are permuted into adjacent-pair order below
    TRY(parse_rope_scaling(&c->rope, json_object_get(cfg, "rope_scaling"), dir, c->max_pos));
    json_t *tie = json_object_get(cfg, "tie_word_embeddings");

    TRY(st_weight(m, &m->token_embd, "model.embed_tokens.weight", true));
    TRY(st_weight(m, &m->output_norm, "model.norm.weight", true));
    TRY(st_weight(m, &m->output, "lm_head.weight", false));
    if (!m->output.data || json_is_true(tie)) { m->output = m->token_embd; c->tied_output = true; }
    c->n_vocab = (int)m->token_embd.rows;
    static const char *names[9] = {"input_layernorm",  "self_attn.q_proj", "self_attn.k_proj",
                                   "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm",
                                   "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
    static const char *const kn[] = {"model.layers.%d.self_attn.k_scale", "model.layers.%d.self_attn.k_proj.k_scale",
                                     "model.layers.%d.self_attn.kv_scale"};
    static const char *const vn[] = {"model.layers.%d.self_attn.v_scale", "model.layers.%d.self_attn.v_proj.v_scale",
                                     "model.layers.%d.self_attn.kv_scale"};
    for (int l = 0; l < c->n_layers; l++) {
        struct layer_weights *w = &m->layers[l];
        struct weight *ws[9] = {&w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo,
                                &w->ffn_norm, &w->w_gate, &w->w_up, &w->w_down};
        for (int i = 0; i < 9; i++) {
            char tn[128];
            snprintf(tn, sizeof tn, "model.layers.%d.%s.weight", l, names[i]);
            TRY(st_weight(m, ws[i], tn, true));
        }
        if (c->head_dim % 2) return err_set(OCT_EINVAL, "%s: head_dim %d must be even", dir, c->head_dim);
        TRY(permute_qk(m, &w->wq, c->n_heads, c->head_dim));
        TRY(permute_qk(m, &w->wk, c->n_kv_heads, c->head_dim));
        if (c->n_kv_heads > 0 && c->n_kv_heads <= 1024) {
            float ks[1024], vs[1024];
            int hk = load_scale(m, l, ks, kn, 3), hv = load_scale(m, l, vs, vn, 3);
            if (hk < 0 || hv < 0) return OCT_EINVAL;
            if ((hk || hv) && !m->ckpt_k_scale) {
                size_t n = (size_t)c->n_layers * c->n_kv_heads;
                m->ckpt_k_scale = model_own(m, n * sizeof(float));
                m->ckpt_v_scale = model_own(m, n * sizeof(float));
                if (!m->ckpt_k_scale || !m->ckpt_v_scale) return err_set(OCT_ENOMEM, "model: out of memory");
                for (size_t i = 0; i < n; i++) m->ckpt_k_scale[i] = m->ckpt_v_scale[i] = 1.0f;
            }
            if (hk) memcpy(m->ckpt_k_scale + l * c->n_kv_heads, ks, (size_t)c->n_kv_heads * 4);
            if (hv) memcpy(m->ckpt_v_scale + l * c->n_kv_heads, vs, (size_t)c->n_kv_heads * 4);
        }
    }
    char tp[1100];
    snprintf(tp, sizeof tp, "%s/tokenizer.json", dir);
    FILE *f = fopen(tp, "rb");
    if (f) {
        fclose(f);
        TRY(tokenizer_from_hf_json(&m->tok, tp));
    } else {
        fprintf(stderr, "octet: %s has no tokenizer.json; using the byte-level stand-in tokenizer\n", dir);
    }
    return OCT_OK;
}
