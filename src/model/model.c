// model.c — model_load dispatch, ownership of backing storage and shape validation (the
// loaders: model_gguf.c, model_st.c, dummy.c).
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

void model_weights_load_info(const struct model *m, struct weights_load_info *info) {
    memset(info, 0, sizeof *info);
    if (m->gguf) weights_load_info_add(info, gguf_weights_mem(m->gguf));
    if (m->st) st_weights_info(m->st, info);
}

int model_load(struct model **out, const char *path) { return model_load_ex(out, path, NULL); }

int model_load_ex(struct model **out, const char *path, const struct model_fp8_draw *draw) {
    const struct model_load_options o = {draw, WEIGHTS_LOAD_AUTO};
    return model_load_opts(out, path, &o);
}

int model_load_opts(struct model **out, const char *path, const struct model_load_options *o) {
    *out = NULL;
    const struct model_fp8_draw *draw = o ? o->draw : NULL;
    struct model *m = calloc(1, sizeof *m);
    if (!m) return err_set(OCT_ENOMEM, "model: out of memory");
    snprintf(m->name, sizeof m->name, "%s", path);
    m->weights_load = o ? o->weights : WEIGHTS_LOAD_AUTO;
    int rc;
    struct stat st;
    if (strncmp(path, "dummy:", 6) == 0) rc = model_load_dummy(m, path + 6, draw);
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
    if (w->dtype == DT_E4M3 && rows > 1 && w->fp8.scale) return OCT_OK;  // fp8 matrices (docs/fp8_weights.md)
    if (w->dtype == DT_MXFP4_GGML)  // (model_gguf.c repacks gpt-oss's experts; no other tensor is read in it)
        return err_set(OCT_EUNSUP, "model: tensor %s (layer %d) is GGUF MXFP4, which octet reads only for the "
                       "experts of gpt-oss", what, layer);
    // the block types (GGUF Q8_0, Q4_0, K-quants) for matrices only; norms and biases stay f32/f16/bf16
    if (w->dtype != DT_F32 && w->dtype != DT_F16 && w->dtype != DT_BF16 && !(dtype_is_block(w->dtype) && rows > 1))
        return err_set(OCT_EUNSUP, "model: tensor %s (layer %d) has dtype %s (need f32, f16 or bf16%s)",
                       what, layer, dtype_name(w->dtype), rows > 1 ? ", or a GGUF block type" : "");
    return OCT_OK;
}

void layer_weight_list(struct layer_weights *w, struct weight *out[LAYER_N_WEIGHTS]) {
    struct weight *ws[LAYER_N_WEIGHTS] = {&w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo, &w->ffn_norm,
                                          &w->w_gate, &w->w_up, &w->w_down, &w->bq, &w->bk, &w->bv, &w->bo,
                                          &w->q_norm, &w->k_norm, &w->post_attn_norm, &w->post_ffn_norm,
                                          &w->b_gate, &w->b_up, &w->b_down, &w->ffn_router, &w->exp_gate,
                                          &w->exp_up, &w->exp_down, &w->ffn_router_b, &w->exp_b_gate,
                                          &w->exp_b_up, &w->exp_b_down, &w->attn_sinks};
    memcpy(out, ws, sizeof ws);
}

const char *layer_weight_name(int i) {
    static const char *names[LAYER_N_WEIGHTS] = {
        "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
        "ffn_down", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_q_norm",
        "attn_k_norm", "post_attention_norm", "post_ffw_norm", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias",
        "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_inp.bias", "ffn_gate_exps.bias",
        "ffn_up_exps.bias", "ffn_down_exps.bias", "attn_sinks"};
    return i >= 0 && i < LAYER_N_WEIGHTS ? names[i] : "?";
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
            total += (size_t)top[i]->rows * dtype_row_bytes(top[i]->dtype, top[i]->cols);
    for (int l = 0; l < c->n_layers; l++) {
        struct layer_weights *w = &m->layers[l];
        TRY(check_shape(&w->attn_norm, "attn_norm", l, 1, c->dim));
        TRY(check_shape(&w->wq, "attn_q", l, qd, c->dim));
        TRY(check_shape(&w->wk, "attn_k", l, kvd, c->dim));
        TRY(check_shape(&w->wv, "attn_v", l, kvd, c->dim));
        TRY(check_shape(&w->wo, "attn_output", l, c->dim, qd));
        TRY(check_shape(&w->ffn_norm, "ffn_norm", l, 1, c->dim));
        bool dense = c->n_experts == 0;
        int64_t E = c->n_experts;
        TRY(check_opt(&w->w_gate, dense, "ffn_gate", l, c->ffn_dim, c->dim));
        TRY(check_opt(&w->w_up, dense, "ffn_up", l, c->ffn_dim, c->dim));
        TRY(check_opt(&w->w_down, dense, "ffn_down", l, c->dim, c->ffn_dim));
        TRY(check_opt(&w->ffn_router, !dense, "ffn_gate_inp", l, E, c->dim));
        TRY(check_opt(&w->exp_gate, !dense, "ffn_gate_exps", l, E * c->ffn_dim, c->dim));
        TRY(check_opt(&w->exp_up, !dense, "ffn_up_exps", l, E * c->ffn_dim, c->dim));
        TRY(check_opt(&w->exp_down, !dense, "ffn_down_exps", l, E * c->dim, c->ffn_dim));
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
        bool eb = !dense && c->moe_bias;
        TRY(check_opt(&w->ffn_router_b, eb, "ffn_gate_inp.bias", l, 1, E));
        TRY(check_opt(&w->exp_b_gate, eb, "ffn_gate_exps.bias", l, 1, E * c->ffn_dim));
        TRY(check_opt(&w->exp_b_up, eb, "ffn_up_exps.bias", l, 1, E * c->ffn_dim));
        TRY(check_opt(&w->exp_b_down, eb, "ffn_down_exps.bias", l, 1, E * c->dim));
        TRY(check_opt(&w->attn_sinks, c->attn_sinks, "attn_sinks", l, 1, c->n_heads));
        struct weight *ws[LAYER_N_WEIGHTS];
        layer_weight_list(w, ws);
        for (int i = 0; i < LAYER_N_WEIGHTS; i++)
            if (ws[i]->data) total += (size_t)ws[i]->rows * dtype_row_bytes(ws[i]->dtype, ws[i]->cols);
    }
    m->weight_bytes = total;
    m->weight_dtype = m->layers[0].wq.dtype;
    if (m->weight_dtype == DT_E4M3) m->weight_dtype = m->token_embd.dtype;  // FP8 checkpoints: the unquantized type
    if (!m->tok) {
        TRY(tokenizer_bytes(&m->tok, c->n_vocab));
    }
    return OCT_OK;
}
