// model_st.c — Hugging Face directory (config.json + safetensors) → struct model: each
// family's tensor names (config_hf.c reads the config), Phi-3's fused projections split into
// views, mixture-of-experts layers' experts stacked, Gemma's norms stored as w folded into 1 + w,
// gpt-oss's interleaved gate_up experts split (bf16 rows transposed, MXFP4 blocks packed with their
// exponents into DT_MXFP4 rows), and every tensor of the files accounted for (one that nothing reads is an
// error naming it). Q and K projection rows (and their biases and per-head norms) are permuted from HF's
// rotate-half order into GGUF's adjacent-pair order (a copy), so both formats give the same model and logits.
// FP8 checkpoints (config_hf_quant): each linear layer's e4m3 weight takes its scales (and static
// input_scale) from the tensors beside it; a layer in the ignore lists stays in its dtype. FP8 experts
// (one 2-D tensor per expert) are stacked with their scales.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../base/half.h"
#include "config_hf.h"
#include "model.h"
#include "safetensors.h"
#include "tokenizer.h"

// One load: the model and the tensors taken so far.
struct st_load {
    struct model *m;
    const char *pfx;                 // the language model's tensor prefix: "model." (or a multimodal one)
    const char *lm_head;             // the output head's name
    const struct tensor_info **used; // [st_n_tensors]
    int n_used;
    struct hf_quant q;               // the checkpoint's quantization_config
};

static void mark(struct st_load *L, const struct tensor_info *t) {
    for (int i = 0; i < L->n_used; i++)
        if (L->used[i] == t) return;
    L->used[L->n_used++] = t;
}

static bool ends(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

// n f32 values of a scale tensor (F32, BF16 or F16) into an owned array; each finite and >= 0
// (> 0 for an input_scale).
static int scale_values(struct st_load *L, const struct tensor_info *t, int64_t n, bool positive, const float **out) {
    struct model *m = L->m;
    if ((t->dtype != DT_F32 && t->dtype != DT_BF16 && t->dtype != DT_F16) || tensor_n_elems(t) != n)
        return err_set(OCT_EINVAL, "%s: scale tensor '%s' must hold %lld f32/bf16/f16 values (has %lld %s)",
                       st_path(m->st), t->name, (long long)n, (long long)tensor_n_elems(t), dtype_name(t->dtype));
    float *d = model_own(m, (size_t)n * sizeof(float));
    if (!d) return err_set(OCT_ENOMEM, "model: out of memory");
    if (t->dtype == DT_F32) memcpy(d, t->data, (size_t)n * sizeof(float));
    else if (t->dtype == DT_BF16) bf16_row_to_f32(t->data, d, (size_t)n);
    else f16_row_to_f32(t->data, d, (size_t)n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(d[i]) || d[i] < 0 || (positive && d[i] == 0))
            return err_set(OCT_EINVAL, "%s: scale tensor '%s' holds %g at %lld (scales are finite and %s)",
                           st_path(m->st), t->name, d[i], (long long)i, positive ? "positive" : "non-negative");
    mark(L, t);
    *out = d;
    return OCT_OK;
}

// A linear layer's e4m3 weight t of `module`: its scales by the checkpoint's scheme.
static int fp8_weight(struct st_load *L, struct weight *w, const struct tensor_info *t, const char *module) {
    struct model *m = L->m;
    const struct hf_quant *q = &L->q;
    char sn[220];
    snprintf(sn, sizeof sn, "%s.%s", module, q->compressed ? "weight_scale" : "weight_scale_inv");
    const struct tensor_info *st = st_find_tensor(m->st, sn);
    if (!st && !q->compressed) st = st_find_tensor(m->st, (snprintf(sn, sizeof sn, "%s.weight_scale", module), sn));
    if (!st)
        return err_set(OCT_EINVAL, "%s: fp8 tensor '%s' has no scale tensor '%s.%s'", st_path(m->st), t->name,
                       module, q->compressed ? "weight_scale" : "weight_scale_inv");
    memset(&w->fp8, 0, sizeof w->fp8);
    w->fp8.wscale = q->wscale;
    w->fp8.block = q->block;
    w->fp8.ascale = q->ascale;
    int64_t n = weight_fp8_n_scales(w);
    if (q->wscale == WSCALE_BLOCK && (st->n_dims != 2 || st->ne[1] != (w->rows + 127) / 128 ||
                                      st->ne[0] != (w->cols + 127) / 128))
        return err_set(OCT_EINVAL, "%s: block scales '%s' must be [%lld, %lld] for a [%lld, %lld] weight",
                       st_path(m->st), sn, (long long)((w->rows + 127) / 128), (long long)((w->cols + 127) / 128),
                       (long long)w->rows, (long long)w->cols);
    TRY(scale_values(L, st, n, false, &w->fp8.scale));
    if (q->ascale == ASCALE_STATIC_TENSOR) {
        snprintf(sn, sizeof sn, "%s.input_scale", module);
        const struct tensor_info *it = st_find_tensor(m->st, sn);
        if (!it)
            return err_set(OCT_EINVAL, "%s: static activation scales, but '%s' has no '%s'", st_path(m->st),
                           t->name, sn);
        const float *is;
        TRY(scale_values(L, it, 1, true, &is));
        w->fp8.input_scale = is[0];
    }
    return OCT_OK;
}

// A linear layer's weight in an FP8 checkpoint: e4m3 with scales, or another dtype when the ignore
// lists name it (the output head may always be unquantized).
static int quant_check(struct st_load *L, struct weight *w, const struct tensor_info *t, const char *name) {
    struct model *m = L->m;
    bool fp8 = t->dtype == DT_E4M3 || t->dtype == DT_E5M2;
    bool expert_w = strstr(name, ".experts.") &&  // Mixtral's experts: w1 gate, w3 up, w2 down
                    (ends(name, ".w1.weight") || ends(name, ".w2.weight") || ends(name, ".w3.weight"));
    bool linear = ends(name, "_proj.weight") || !strcmp(name, L->lm_head) || expert_w;
    if (!fp8 && !L->q.fp8) return OCT_OK;
    if (fp8 && !linear)
        return err_set(OCT_EUNSUP, "%s: tensor '%s' is %s: only linear layers' weights may be fp8", st_path(m->st),
                       name, dtype_name(t->dtype));
    if (fp8 && !L->q.fp8)
        return err_set(OCT_EINVAL, "%s: tensor '%s' is %s but config.json has no quantization_config",
                       st_path(m->st), name, dtype_name(t->dtype));
    if (t->dtype == DT_E5M2)
        return err_set(OCT_EUNSUP, "%s: tensor '%s': fp8_e5m2 weights are not supported (e4m3)", st_path(m->st),
                       name);
    if (!linear) return OCT_OK;
    char module[200];
    snprintf(module, sizeof module, "%.*s", (int)(strlen(name) - strlen(".weight")), name);
    int ig = config_hf_quant_ignored(&L->q, module);
    if (ig < 0) return ig;
    if (fp8 && ig)
        return err_set(OCT_EINVAL, "%s: '%s' is in quantization_config's ignore list but stored in fp8_e4m3",
                       st_path(m->st), module);
    if (!fp8 && !ig && strcmp(name, L->lm_head))
        return err_set(OCT_EINVAL, "%s: '%s' is %s, but quantization_config quantizes it (it is not in an ignore "
                       "list)", st_path(m->st), module, dtype_name(t->dtype));
    return fp8 ? fp8_weight(L, w, t, module) : OCT_OK;
}

static int st_weight(struct st_load *L, struct weight *w, const char *name, bool required) {
    struct model *m = L->m;
    const struct tensor_info *t = st_find_tensor(m->st, name);
    if (!t) return required ? err_set(OCT_EINVAL, "%s: missing tensor '%s'", st_path(m->st), name) : OCT_OK;
    if (t->n_dims > 2)
        return err_set(OCT_EINVAL, "%s: tensor '%s' has %d dims (want 1 or 2)", st_path(m->st), name, t->n_dims);
    mark(L, t);
    w->dtype = t->dtype;
    w->cols = t->ne[0];
    w->rows = t->n_dims == 2 ? t->ne[1] : 1;
    if (t->n_dims == 1) w->rows = 1;
    w->data = t->data;
    return quant_check(L, w, t, name);
}

// A layer tensor by its name after "model.layers.N.".
static int layer_weight(struct st_load *L, struct weight *w, int layer, const char *suffix, bool required) {
    char tn[200];
    snprintf(tn, sizeof tn, "%slayers.%d.%s", L->pfx, layer, suffix);
    return st_weight(L, w, tn, required);
}

// Element (h*hd + i*hd/2 + j) of each head goes to (h*hd + 2j + i), for rows of row_bytes each:
// a projection's rows, or a bias's or per-head norm's single elements.
static int permute_pairs(struct model *m, struct weight *w, int n_heads, int hd, bool rows) {
    int64_t n = rows ? w->rows : w->cols;
    if (n != (int64_t)n_heads * hd)
        return err_set(OCT_EINVAL, "%s: q/k tensor has %lld %s, expected %d", st_path(m->st), (long long)n,
                       rows ? "rows" : "values", n_heads * hd);
    size_t unit = rows ? (size_t)w->cols * dtype_size(w->dtype) : dtype_size(w->dtype);
    char *dst = model_own(m, unit * (size_t)n);
    if (!dst) return err_set(OCT_ENOMEM, "model: out of memory permuting q/k");
    const char *src = w->data;
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < hd / 2; j++)
                memcpy(dst + ((size_t)h * hd + 2 * j + i) * unit, src + ((size_t)h * hd + i * hd / 2 + j) * unit,
                       unit);
    w->data = dst;
    if (rows && w->dtype == DT_E4M3 && w->fp8.wscale == WSCALE_CHANNEL) {  // the scales move with their rows
        float *sc = model_own(m, (size_t)n * sizeof(float));
        if (!sc) return err_set(OCT_ENOMEM, "model: out of memory permuting q/k");
        for (int h = 0; h < n_heads; h++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < hd / 2; j++)
                    sc[(size_t)h * hd + 2 * j + i] = w->fp8.scale[(size_t)h * hd + i * hd / 2 + j];
        w->fp8.scale = sc;
    }
    if (rows && w->dtype == DT_E4M3 && w->fp8.wscale == WSCALE_BLOCK && w->fp8.block % hd)
        return err_set(OCT_EUNSUP, "%s: q/k head_dim %d does not divide the %d-row scale blocks (rows would move "
                       "between blocks)", st_path(m->st), hd, w->fp8.block);
    return OCT_OK;
}

// Rows [r0, r0+n) of a fused projection as a view.
// (fp8: per-channel scales from r0 on; block scales from r0's band, r0 a multiple of the block, which the
// caller checks).
static struct weight rows_of(const struct weight *w, int64_t r0, int64_t n) {
    struct weight v = *w;
    v.rows = n;
    v.data = (const char *)w->data + (size_t)(r0 * w->cols) * dtype_size(w->dtype);
    if (w->dtype == DT_E4M3 && w->fp8.wscale == WSCALE_CHANNEL) v.fp8.scale = w->fp8.scale + r0;
    if (w->dtype == DT_E4M3 && w->fp8.wscale == WSCALE_BLOCK)
        v.fp8.scale = w->fp8.scale + (r0 / w->fp8.block) * ((w->cols + w->fp8.block - 1) / w->fp8.block);
    return v;
}

static int load_scale(struct st_load *L, int layer, float *dst, const char *const *names, int n_names) {
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    for (int k = 0; k < n_names; k++) {
        char tn[128];
        snprintf(tn, sizeof tn, names[k], layer);
        const struct tensor_info *t = st_find_tensor(m->st, tn);
        if (!t) continue;
        mark(L, t);
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

// Checkpoint KV scales of layer l (compressed-tensors / llm-compressor names), if any.
static int layer_kv_scales(struct st_load *L, int l) {
    static const char *const kn[] = {"model.layers.%d.self_attn.k_scale", "model.layers.%d.self_attn.k_proj.k_scale",
                                     "model.layers.%d.self_attn.kv_scale"};
    static const char *const vn[] = {"model.layers.%d.self_attn.v_scale", "model.layers.%d.self_attn.v_proj.v_scale",
                                     "model.layers.%d.self_attn.kv_scale"};
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    if (c->n_kv_heads <= 0 || c->n_kv_heads > 1024) return OCT_OK;
    float ks[1024], vs[1024];
    int hk = load_scale(L, l, ks, kn, 3), hv = load_scale(L, l, vs, vn, 3);
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
    return OCT_OK;
}

// Expert e's fp8 scales into the stacked weight st ([E·rows][cols], one's shape [rows][cols]): per-tensor
// and per-channel experts become a scale per stacked row (the same products: docs/fp8_weights.md); 128x128
// block grids are stacked by rows, which needs each expert's rows and columns in whole blocks. Static
// activation scales must be one for all experts (the stacked weight has one).
static int stack_fp8_scales(struct st_load *L, struct weight *st, const struct weight *one, int64_t e, int64_t E,
                            int l, const char *name) {
    struct model *m = L->m;
    const int64_t rows = one->rows;
    if (e == 0) {
        if (one->fp8.wscale == WSCALE_BLOCK && (rows % one->fp8.block || one->cols % one->fp8.block))
            return err_set(OCT_EUNSUP, "%s: layer %d: fp8 expert '%s' is [%lld x %lld]: stacking experts' %dx%d block "
                           "scales needs both sizes to be multiples of %d", st_path(m->st), l, name, (long long)rows,
                           (long long)one->cols, one->fp8.block, one->fp8.block, one->fp8.block);
        if (one->fp8.wscale != WSCALE_BLOCK) st->fp8.wscale = WSCALE_CHANNEL;
        const int64_t per = one->fp8.wscale == WSCALE_BLOCK ? weight_fp8_n_scales(one) : rows;
        st->fp8.scale = model_own(m, (size_t)(E * per) * sizeof(float));
        if (!st->fp8.scale) return err_set(OCT_ENOMEM, "model: out of memory stacking expert scales");
    }
    if (one->fp8.ascale == ASCALE_STATIC_TENSOR && one->fp8.input_scale != st->fp8.input_scale)
        return err_set(OCT_EUNSUP, "%s: layer %d: expert '%s' has input_scale %g, expert 0 %g (static activation "
                       "scales must be one for all experts)", st_path(m->st), l, name, one->fp8.input_scale,
                       st->fp8.input_scale);
    float *dst = (float *)st->fp8.scale;
    if (one->fp8.wscale == WSCALE_TENSOR)
        for (int64_t r = 0; r < rows; r++) dst[e * rows + r] = one->fp8.scale[0];
    else {
        const int64_t n = weight_fp8_n_scales(one);
        memcpy(dst + e * n, one->fp8.scale, (size_t)n * sizeof(float));
    }
    return OCT_OK;
}

// A mixture-of-experts layer's router and experts, stacked into exp_gate, exp_up [E*F][D] and exp_down
// [E*D][F]: from transformers 5's 3-D experts.gate_up_proj [E][2F][D] and experts.down_proj [E][D][F]
// (down a view, gate and up copies), or from one 2-D tensor per expert (copies) under Mixtral's names
// (w1 gate, w3 up, w2 down) or Qwen3-MoE's (gate_proj, up_proj, down_proj). The block is `mlp` or
// Mixtral's older `block_sparse_moe`.
static int load_experts(struct st_load *L, int l) {
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    struct layer_weights *w = &m->layers[l];
    const int64_t E = c->n_experts, F = c->ffn_dim, D = c->dim;
    char tn[200], sfx[96];
    const char *blk = "mlp";
    snprintf(tn, sizeof tn, "%slayers.%d.block_sparse_moe.gate.weight", L->pfx, l);
    if (st_find_tensor(m->st, tn)) blk = "block_sparse_moe";
    snprintf(sfx, sizeof sfx, "%s.gate.weight", blk);
    TRY(layer_weight(L, &w->ffn_router, l, sfx, true));
    snprintf(tn, sizeof tn, "%slayers.%d.%s.experts.gate_up_proj", L->pfx, l, blk);
    const struct tensor_info *gu = st_find_tensor(m->st, tn);
    if (gu) {
        snprintf(tn, sizeof tn, "%slayers.%d.%s.experts.down_proj", L->pfx, l, blk);
        const struct tensor_info *dn = st_find_tensor(m->st, tn);
        if (!dn) return err_set(OCT_EINVAL, "%s: missing tensor '%s'", st_path(m->st), tn);
        if (gu->n_dims != 3 || gu->ne[2] != E || gu->ne[1] != 2 * F || gu->ne[0] != D || dn->n_dims != 3 ||
            dn->ne[2] != E || dn->ne[1] != D || dn->ne[0] != F || gu->dtype != dn->dtype)
            return err_set(OCT_EINVAL, "%s: layer %d: experts gate_up_proj / down_proj are not [%lld][%lld][%lld] / "
                           "[%lld][%lld][%lld] of one dtype", st_path(m->st), l, (long long)E, (long long)(2 * F),
                           (long long)D, (long long)E, (long long)D, (long long)F);
        if (gu->dtype == DT_E4M3 || dn->dtype == DT_E4M3 || gu->dtype == DT_E5M2 || dn->dtype == DT_E5M2)
            return err_set(OCT_EUNSUP, "%s: layer %d: fp8 experts in 3-D experts.gate_up_proj / down_proj tensors are "
                           "not supported (one 2-D tensor per expert, as FP8 checkpoints store them, is)",
                           st_path(m->st), l);
        mark(L, gu);
        mark(L, dn);
        size_t es = dtype_size(gu->dtype), half = (size_t)(F * D) * es;
        char *g = model_own(m, (size_t)E * half), *u = model_own(m, (size_t)E * half);
        if (!g || !u) return err_set(OCT_ENOMEM, "model: out of memory stacking experts");
        for (int64_t e = 0; e < E; e++) {
            memcpy(g + e * half, (const char *)gu->data + 2 * e * half, half);
            memcpy(u + e * half, (const char *)gu->data + (2 * e + 1) * half, half);
        }
        struct weight st = {gu->dtype, E * F, D, g, NULL, {0}, 0};
        w->exp_gate = st;
        st.data = u;
        w->exp_up = st;
        struct weight dw = {dn->dtype, E * D, F, dn->data, NULL, {0}, 0};
        w->exp_down = dw;
        return OCT_OK;
    }
    bool mixtral = !strcmp(blk, "block_sparse_moe") || !strcmp(c->arch, "mixtral");
    static const char *const names[2][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};
    struct weight *dst[3] = {&w->exp_gate, &w->exp_up, &w->exp_down};
    for (int k = 0; k < 3; k++) {
        const int64_t rows = k < 2 ? F : D, cols = k < 2 ? D : F;
        char *buf = NULL;
        size_t bytes = 0;
        for (int64_t e = 0; e < E; e++) {
            struct weight one = {0};
            snprintf(sfx, sizeof sfx, "%s.experts.%lld.%s.weight", blk, (long long)e, names[mixtral][k]);
            TRY(layer_weight(L, &one, l, sfx, true));
            if (one.rows != rows || one.cols != cols || (e > 0 && one.dtype != dst[k]->dtype))
                return err_set(OCT_EINVAL, "%s: layer %d: expert tensor '%s' is [%lld x %lld] (want [%lld x %lld], "
                               "the dtype of expert 0)", st_path(m->st), l, sfx, (long long)one.rows,
                               (long long)one.cols, (long long)rows, (long long)cols);
            if (!buf) {
                bytes = (size_t)(rows * cols) * dtype_size(one.dtype);
                buf = model_own(m, bytes * (size_t)E);
                if (!buf) return err_set(OCT_ENOMEM, "model: out of memory stacking experts");
                *dst[k] = one;
                dst[k]->rows = E * rows;
                dst[k]->data = buf;
            }
            memcpy(buf + (size_t)e * bytes, one.data, bytes);
            if (one.dtype == DT_E4M3) TRY(stack_fp8_scales(L, dst[k], &one, e, E, l, sfx));
        }
    }
    return OCT_OK;
}

// ---- gpt-oss (GptOssForCausalLM) ----

static bool is_float(enum dtype d) { return d == DT_F32 || d == DT_BF16 || d == DT_F16; }

// Element i of a float tensor as f32.
static float elem_f32(const struct tensor_info *t, int64_t i) {
    if (t->dtype == DT_F32) {
        float f;
        memcpy(&f, (const char *)t->data + i * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)t->data + i * 2, 2);
    return t->dtype == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// A layer tensor "model.layers.N.<suffix>" of the given rank and shape (ne order), or an error naming it.
static int gptoss_tensor(struct st_load *L, int l, const char *suffix, int rank, const int64_t *ne, bool want_u8,
                         const struct tensor_info **out) {
    struct model *m = L->m;
    char tn[200];
    snprintf(tn, sizeof tn, "%slayers.%d.%s", L->pfx, l, suffix);
    const struct tensor_info *t = st_find_tensor(m->st, tn);
    if (!t) return err_set(OCT_EINVAL, "%s: missing tensor '%s'", st_path(m->st), tn);
    bool ok = t->n_dims == rank && (want_u8 ? t->dtype == DT_U8 : is_float(t->dtype));
    for (int k = 0; k < rank && ok; k++) ok = t->ne[k] == ne[k];
    if (!ok) {
        char want[96] = "", has[96] = "";
        for (int k = rank - 1; k >= 0; k--)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", k == rank - 1 ? "" : ", ",
                     (long long)ne[k]);
        for (int k = t->n_dims - 1; k >= 0; k--)
            snprintf(has + strlen(has), sizeof has - strlen(has), "%s%lld", k == t->n_dims - 1 ? "" : ", ",
                     (long long)t->ne[k]);
        return err_set(OCT_EINVAL, "%s: tensor '%s' must be [%s] of %s (it is [%s] of %s)", st_path(m->st), tn,
                       want, want_u8 ? "u8" : "f32/bf16/f16", has, dtype_name(t->dtype));
    }
    mark(L, t);
    *out = t;
    return OCT_OK;
}

// An owned f32 [1][n] weight: element i is t's element off + i·stride0 (i < n0), repeated in groups of n0
// every group0 elements (de-interleaving gate_up_proj_bias: n0 = F values at stride 2 per expert).
static int bias_f32(struct model *m, struct weight *w, const struct tensor_info *t, int64_t groups, int64_t n0,
                    int64_t group0, int64_t off, int64_t stride0) {
    float *d = model_own(m, (size_t)(groups * n0) * sizeof(float));
    if (!d) return err_set(OCT_ENOMEM, "model: out of memory for expert biases");
    for (int64_t g = 0; g < groups; g++)
        for (int64_t i = 0; i < n0; i++) d[g * n0 + i] = elem_f32(t, g * group0 + off + i * stride0);
    *w = (struct weight){DT_F32, 1, groups * n0, d, NULL, {0}, 0};
    return OCT_OK;
}

// MXFP4 rows from HF's blocks [E][R][in/32][16] and scales [E][R][in/32] into DT_MXFP4 rows (each 32-element
// block: its exponent byte, then its 16 bytes): output row e·n_rows + i takes source row r0 + i·step of expert e.
static int pack_mxfp4(struct model *m, struct weight *w, const struct tensor_info *blk, const struct tensor_info *sc,
                      int64_t E, int64_t R, int64_t in, int64_t n_rows, int64_t r0, int64_t step) {
    const int64_t G = in / QK_MXFP4;
    const size_t rb = dtype_row_bytes(DT_MXFP4, in);
    uint8_t *d = model_own(m, (size_t)(E * n_rows) * rb);
    if (!d) return err_set(OCT_ENOMEM, "model: out of memory packing mxfp4 experts");
    const uint8_t *b = blk->data, *s = sc->data;
    for (int64_t e = 0; e < E; e++)
        for (int64_t i = 0; i < n_rows; i++) {
            const int64_t src = e * R + r0 + i * step;
            uint8_t *o = d + (size_t)(e * n_rows + i) * rb;
            for (int64_t g = 0; g < G; g++) {
                o[g * 17] = s[src * G + g];
                memcpy(o + g * 17 + 1, b + (size_t)(src * G + g) * 16, 16);
            }
        }
    *w = (struct weight){DT_MXFP4, E * n_rows, in, d, NULL, {0}, 0};
    return OCT_OK;
}

// Rows of a [E][in][out] float tensor (x · W, transformers' GptOssExperts layout) as [E·n_rows][in] rows:
// output row e·n_rows + i is column r0 + i·step of expert e (a transposed copy in the tensor's dtype).
static int transpose_experts(struct model *m, struct weight *w, const struct tensor_info *t, int64_t E, int64_t in,
                             int64_t out, int64_t n_rows, int64_t r0, int64_t step) {
    const size_t es = dtype_size(t->dtype);
    char *d = model_own(m, (size_t)(E * n_rows * in) * es);
    if (!d) return err_set(OCT_ENOMEM, "model: out of memory reordering experts");
    const char *src = t->data;
    for (int64_t e = 0; e < E; e++)
        for (int64_t i = 0; i < n_rows; i++)
            for (int64_t k = 0; k < in; k++)
                memcpy(d + (size_t)((e * n_rows + i) * in + k) * es,
                       src + (size_t)((e * in + k) * out + r0 + i * step) * es, es);
    *w = (struct weight){t->dtype, E * n_rows, in, d, NULL, {0}, 0};
    return OCT_OK;
}

// A gpt-oss layer's router (mlp.router.weight [E][D], .bias [E]) and experts: gate_up_proj [E][D][2F] with
// the gate in the even and up in the odd columns, gate_up_proj_bias [E][2F] (the same interleave),
// down_proj [E][F][D], down_proj_bias [E][D]; or, quantized (quant_method mxfp4), gate_up_proj_blocks /
// _scales over the 2F output rows (even: gate) and down_proj_blocks / _scales over the D rows, kept packed.
static int load_experts_gptoss(struct st_load *L, int l) {
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    struct layer_weights *w = &m->layers[l];
    const int64_t E = c->n_experts, F = c->ffn_dim, D = c->dim;
    TRY(layer_weight(L, &w->ffn_router, l, "mlp.router.weight", true));
    const struct tensor_info *rb, *gub, *db;
    TRY(gptoss_tensor(L, l, "mlp.router.bias", 1, (const int64_t[]){E}, false, &rb));
    TRY(bias_f32(m, &w->ffn_router_b, rb, 1, E, 0, 0, 1));
    TRY(gptoss_tensor(L, l, "mlp.experts.gate_up_proj_bias", 2, (const int64_t[]){2 * F, E}, false, &gub));
    TRY(bias_f32(m, &w->exp_b_gate, gub, E, F, 2 * F, 0, 2));
    TRY(bias_f32(m, &w->exp_b_up, gub, E, F, 2 * F, 1, 2));
    TRY(gptoss_tensor(L, l, "mlp.experts.down_proj_bias", 2, (const int64_t[]){D, E}, false, &db));
    TRY(bias_f32(m, &w->exp_b_down, db, 1, E * D, 0, 0, 1));
    char tn[200];
    snprintf(tn, sizeof tn, "%slayers.%d.mlp.experts.gate_up_proj_blocks", L->pfx, l);
    if (st_find_tensor(m->st, tn)) {
        if (!L->q.mxfp4)
            return err_set(OCT_EINVAL, "%s: '%s' is mxfp4 but config.json has no quantization_config with "
                           "quant_method mxfp4", st_path(m->st), tn);
        if (D % QK_MXFP4 || F % QK_MXFP4)
            return err_set(OCT_EINVAL, "%s: mxfp4 experts need hidden_size %lld and intermediate_size %lld to be "
                           "multiples of 32", st_path(m->st), (long long)D, (long long)F);
        const struct tensor_info *gb, *gs, *dnb, *dns;
        TRY(gptoss_tensor(L, l, "mlp.experts.gate_up_proj_blocks", 4, (const int64_t[]){16, D / 32, 2 * F, E}, true,
                          &gb));
        TRY(gptoss_tensor(L, l, "mlp.experts.gate_up_proj_scales", 3, (const int64_t[]){D / 32, 2 * F, E}, true, &gs));
        TRY(gptoss_tensor(L, l, "mlp.experts.down_proj_blocks", 4, (const int64_t[]){16, F / 32, D, E}, true, &dnb));
        TRY(gptoss_tensor(L, l, "mlp.experts.down_proj_scales", 3, (const int64_t[]){F / 32, D, E}, true, &dns));
        TRY(pack_mxfp4(m, &w->exp_gate, gb, gs, E, 2 * F, D, F, 0, 2));
        TRY(pack_mxfp4(m, &w->exp_up, gb, gs, E, 2 * F, D, F, 1, 2));
        return pack_mxfp4(m, &w->exp_down, dnb, dns, E, D, F, D, 0, 1);
    }
    const struct tensor_info *gu, *dn;
    TRY(gptoss_tensor(L, l, "mlp.experts.gate_up_proj", 3, (const int64_t[]){2 * F, D, E}, false, &gu));
    TRY(gptoss_tensor(L, l, "mlp.experts.down_proj", 3, (const int64_t[]){D, F, E}, false, &dn));
    TRY(transpose_experts(m, &w->exp_gate, gu, E, D, 2 * F, F, 0, 2));
    TRY(transpose_experts(m, &w->exp_up, gu, E, D, 2 * F, F, 1, 2));
    return transpose_experts(m, &w->exp_down, dn, E, F, D, D, 0, 1);
}

// One layer's tensors under the family's names.
static int load_layer(struct st_load *L, int l) {
    struct model *m = L->m;
    const struct model_config *c = &m->cfg;
    struct layer_weights *w = &m->layers[l];
    bool gemma = !strncmp(c->arch, "gemma", 5), phi3 = !strcmp(c->arch, "phi3");
    TRY(layer_weight(L, &w->attn_norm, l, "input_layernorm.weight", true));
    if (phi3) {
        struct weight qkv = {0}, gu = {0};
        TRY(layer_weight(L, &qkv, l, "self_attn.qkv_proj.weight", true));
        TRY(layer_weight(L, &gu, l, "mlp.gate_up_proj.weight", true));
        int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
        if (qkv.rows != qd + 2 * kvd || gu.rows != 2 * (int64_t)c->ffn_dim)
            return err_set(OCT_EINVAL, "%s: layer %d: qkv_proj has %lld rows (want %lld), gate_up_proj %lld (want %d)",
                           st_path(m->st), l, (long long)qkv.rows, (long long)(qd + 2 * kvd), (long long)gu.rows,
                           2 * c->ffn_dim);
        if ((qkv.dtype == DT_E4M3 && qkv.fp8.wscale == WSCALE_BLOCK && (qd % 128 || kvd % 128)) ||
            (gu.dtype == DT_E4M3 && gu.fp8.wscale == WSCALE_BLOCK && c->ffn_dim % 128))
            return err_set(OCT_EUNSUP, "%s: layer %d: fused projections whose parts are not whole 128-row blocks "
                           "cannot split 128x128 block scales", st_path(m->st), l);
        w->wq = rows_of(&qkv, 0, qd);
        w->wk = rows_of(&qkv, qd, kvd);
        w->wv = rows_of(&qkv, qd + kvd, kvd);
        w->w_gate = rows_of(&gu, 0, c->ffn_dim);
        w->w_up = rows_of(&gu, c->ffn_dim, c->ffn_dim);
    } else {
        TRY(layer_weight(L, &w->wq, l, "self_attn.q_proj.weight", true));
        TRY(layer_weight(L, &w->wk, l, "self_attn.k_proj.weight", true));
        TRY(layer_weight(L, &w->wv, l, "self_attn.v_proj.weight", true));
        if (!c->n_experts) {
            TRY(layer_weight(L, &w->w_gate, l, "mlp.gate_proj.weight", true));
            TRY(layer_weight(L, &w->w_up, l, "mlp.up_proj.weight", true));
        }
    }
    TRY(layer_weight(L, &w->wo, l, "self_attn.o_proj.weight", true));
    if (c->n_experts) TRY(!strcmp(c->arch, "gptoss") ? load_experts_gptoss(L, l) : load_experts(L, l));
    else TRY(layer_weight(L, &w->w_down, l, "mlp.down_proj.weight", true));
    if (c->attn_sinks) TRY(layer_weight(L, &w->attn_sinks, l, "self_attn.sinks", true));
    if (gemma) {
        TRY(layer_weight(L, &w->post_attn_norm, l, "post_attention_layernorm.weight", true));
        TRY(layer_weight(L, &w->ffn_norm, l, "pre_feedforward_layernorm.weight", true));
        TRY(layer_weight(L, &w->post_ffn_norm, l, "post_feedforward_layernorm.weight", true));
    } else {
        TRY(layer_weight(L, &w->ffn_norm, l, "post_attention_layernorm.weight", true));
    }
    if (c->attn_bias) {
        TRY(layer_weight(L, &w->bq, l, "self_attn.q_proj.bias", true));
        TRY(layer_weight(L, &w->bk, l, "self_attn.k_proj.bias", true));
        TRY(layer_weight(L, &w->bv, l, "self_attn.v_proj.bias", true));
    }
    if (c->o_bias) TRY(layer_weight(L, &w->bo, l, "self_attn.o_proj.bias", true));
    if (c->mlp_bias) {
        TRY(layer_weight(L, &w->b_gate, l, "mlp.gate_proj.bias", true));
        TRY(layer_weight(L, &w->b_up, l, "mlp.up_proj.bias", true));
        TRY(layer_weight(L, &w->b_down, l, "mlp.down_proj.bias", true));
    }
    if (c->qk_norm) {
        TRY(layer_weight(L, &w->q_norm, l, "self_attn.q_norm.weight", true));
        TRY(layer_weight(L, &w->k_norm, l, "self_attn.k_norm.weight", true));
        TRY(permute_pairs(m, &w->q_norm, 1, c->head_dim, false));
        TRY(permute_pairs(m, &w->k_norm, 1, c->head_dim, false));
    }
    if (gemma) {
        struct weight *norms[] = {&w->attn_norm, &w->post_attn_norm, &w->ffn_norm, &w->post_ffn_norm,
                                  &w->q_norm, &w->k_norm};
        for (int i = 0; i < 6; i++) TRY(model_norm_plus_one(m, norms[i]));
    }
    TRY(permute_pairs(m, &w->wq, c->n_heads, c->head_dim, true));
    TRY(permute_pairs(m, &w->wk, c->n_kv_heads, c->head_dim, true));
    if (w->bq.data) TRY(permute_pairs(m, &w->bq, c->n_heads, c->head_dim, false));
    if (w->bk.data) TRY(permute_pairs(m, &w->bk, c->n_kv_heads, c->head_dim, false));
    return layer_kv_scales(L, l);
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

// Every tensor of the files must have been taken; rotary tables some exporters store are skipped,
// and so are a multimodal checkpoint's vision tensors (octet serves its text model).
static int check_all_used(struct st_load *L) {
    const struct st_dir *st = L->m->st;
    int n_vision = 0;
    for (int i = 0; i < st_n_tensors(st); i++) {
        const struct tensor_info *t = st_tensor(st, i);
        bool used = false;
        for (int k = 0; k < L->n_used && !used; k++) used = L->used[k] == t;
        if (used) continue;
        if (strcmp(L->pfx, "model.") &&
            (starts(t->name, "vision_tower.") || starts(t->name, "multi_modal_projector.") ||
             starts(t->name, "model.vision_tower.") || starts(t->name, "model.multi_modal_projector."))) {
            n_vision++;
            continue;
        }
        size_t n = strlen(t->name);
        if (n >= 8 && !strcmp(t->name + n - 8, "inv_freq")) {
            fprintf(stderr, "octet: %s: ignoring tensor '%s' (RoPE tables are computed)\n", st_path(st), t->name);
            continue;
        }
        if (ends(t->name, "input_scale") || ends(t->name, "weight_scale") || ends(t->name, "weight_scale_inv"))
            return err_set(OCT_EINVAL, "%s: tensor '%s' is not used by the quantization_config's scheme (%s)",
                           st_path(st), t->name, !L->q.fp8 ? "there is none" : L->q.ascale == ASCALE_DYNAMIC_TOKEN
                           ? "dynamic activations have no input_scale" : "its layer is not fp8");
        return err_set(OCT_EINVAL, "%s: tensor '%s' is not used by %s (a different architecture or variant?)",
                       st_path(st), t->name, L->m->cfg.arch);
    }
    if (n_vision)
        fprintf(stderr, "octet: %s: serving the text model; %d vision tensors (vision_tower, multi_modal_projector) "
                "are not loaded\n", st_path(st), n_vision);
    return OCT_OK;
}

int model_load_safetensors(struct model *m, const char *dir) {
    TRY(st_open_load(&m->st, dir, m->weights_load));
    const json_t *cfg = st_config(m->st);
    struct model_config *c = &m->cfg;
    char where[1100];
    snprintf(where, sizeof where, "%s/config.json", dir);
    TRY(config_from_hf(c, cfg, where));
    struct st_load L = {m, "model.", "lm_head.weight",
                        model_own(m, (size_t)(st_n_tensors(m->st) + 1) * sizeof(void *)), 0, {0}};
    if (!L.used) return err_set(OCT_ENOMEM, "model: out of memory");
    TRY(config_hf_quant(&L.q, cfg, where));
    if (c->head_dim % 2) return err_set(OCT_EINVAL, "%s: head_dim %d must be even", dir, c->head_dim);
    // a multimodal checkpoint's language model: transformers 5's names, or the older ones
    if (st_find_tensor(m->st, "model.language_model.embed_tokens.weight")) L.pfx = "model.language_model.";
    else if (st_find_tensor(m->st, "language_model.model.embed_tokens.weight"))
        L.pfx = "language_model.model.", L.lm_head = "language_model.lm_head.weight";

    char tn[200];
    snprintf(tn, sizeof tn, "%sembed_tokens.weight", L.pfx);
    TRY(st_weight(&L, &m->token_embd, tn, true));
    snprintf(tn, sizeof tn, "%snorm.weight", L.pfx);
    TRY(st_weight(&L, &m->output_norm, tn, true));
    if (c->tied_output) {
        struct weight extra = {0};
        TRY(st_weight(&L, &extra, L.lm_head, false));
        if (extra.data)
            fprintf(stderr, "octet: %s: ignoring lm_head.weight (tie_word_embeddings: the head is the embedding)\n",
                    dir);
        m->output = m->token_embd;
    } else {
        TRY(st_weight(&L, &m->output, L.lm_head, false));
        if (!m->output.data)
            return err_set(OCT_EINVAL, "%s: tie_word_embeddings is false but there is no %s", dir, L.lm_head);
    }
    c->n_vocab = (int)m->token_embd.rows;
    json_t *tc = json_object_get(cfg, "text_config"), *vs = json_object_get(tc ? tc : cfg, "vocab_size");
    if (json_is_integer(vs) && json_integer_value(vs) != c->n_vocab)
        return err_set(OCT_EINVAL, "%s: vocab_size %lld but model.embed_tokens.weight has %d rows", where,
                       (long long)json_integer_value(vs), c->n_vocab);
    if (c->embed_scale > 0) {  // transformers multiplies by the scale cast to the weights' dtype
        if (m->token_embd.dtype == DT_BF16) c->embed_scale = bf16_to_f32(f32_to_bf16(c->embed_scale));
        else if (m->token_embd.dtype == DT_F16) c->embed_scale = f16_to_f32(f32_to_f16(c->embed_scale));
    }
    if (!strncmp(c->arch, "gemma", 5)) TRY(model_norm_plus_one(m, &m->output_norm));
    for (int l = 0; l < c->n_layers; l++) TRY(load_layer(&L, l));
    TRY(check_all_used(&L));
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
