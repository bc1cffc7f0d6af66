// kv_cache.c — per-layer KV dtype/scales resolution and page allocation.
#include "kv_cache.h"

#include <ctype.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "model.h"

void kv_options_default(struct kv_options *o) {
    memset(o, 0, sizeof *o);
    strcpy(o->dtype, "auto");
    o->kv_block_tokens = 0;  // kv_cache_plan's default_block_tokens (the backend's)
}

int kv_dtype_parse(const char *s, enum dtype model_dtype, enum dtype *out) {
    static const struct { const char *name; int dt; } names[] = {
        {"auto", -1}, {"fp32", DT_F32}, {"float32", DT_F32}, {"fp16", DT_F16}, {"float16", DT_F16},
        {"half", DT_F16}, {"bf16", DT_BF16}, {"bfloat16", DT_BF16}, {"fp8", DT_E4M3},
        {"fp8_e4m3", DT_E4M3}, {"fp8_e5m2", DT_E5M2}, {"fp8_per_token_head", DT_E4M3},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            // auto: the weights' type, or f16 under GGUF block-type weights (as llama.cpp's default cache)
            if (names[i].dt < 0) *out = dtype_is_block(model_dtype) ? DT_F16 : model_dtype;
            else *out = (enum dtype)names[i].dt;
            return OCT_OK;
        }
    return err_set(OCT_EINVAL,
                   "--kv-cache-dtype: unknown value '%s' (choose auto, fp32, fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, "
                   "fp8_per_token_head)", s);
}

bool kv_dtype_token_scales(const char *s) { return strcmp(s, "fp8_per_token_head") == 0; }

size_t kv_layer_bytes(const struct kv_layer *l, bool tok_scales, int n_blocks, size_t *scales_at) {
    size_t data = (size_t)n_blocks * l->n_kv_heads * l->kv_block_tokens * l->head_dim * dtype_size(l->dtype);
    if (!tok_scales) { *scales_at = 0; return data; }
    *scales_at = (data + 63) / 64 * 64;
    return *scales_at + (size_t)n_blocks * l->n_kv_heads * l->kv_block_tokens * sizeof(float);
}

int kv_options_set_dtype(struct kv_options *o, const char *s) {
    enum dtype dt;
    TRY(kv_dtype_parse(s, DT_F32, &dt));
    snprintf(o->dtype, sizeof o->dtype, "%s", s);
    return OCT_OK;
}

int kv_options_set_skip(struct kv_options *o, const char *s) {
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ' && *e != ',' && *e != '\t') e++;
        size_t len = (size_t)(e - p);
        if (len == 14 && strncmp(p, "sliding_window", 14) == 0) {
            o->skip_sliding = true;
        } else {
            char *end;
            long v = strtol(p, &end, 10);
            if (end != e || v < 0 || v >= MODEL_MAX_LAYERS)
                return err_set(OCT_EINVAL,
                               "--kv-cache-dtype-skip-layers: '%.*s' is not a layer index (0..%d) or 'sliding_window'",
                               (int)len, p, MODEL_MAX_LAYERS - 1);
            o->skip[v] = true;
        }
        p = e;
    }
    return OCT_OK;
}

int kv_cache_plan(struct kv_cache *kv, const struct model *m, const struct kv_options *o, int default_block_tokens) {
    const struct model_config *c = &m->cfg;
    memset(kv, 0, sizeof *kv);
    if (c->n_kv_heads > KV_MAX_HEADS)
        return err_set(OCT_EUNSUP, "kv cache: %d KV heads (max %d)", c->n_kv_heads, KV_MAX_HEADS);
    if (c->n_heads / c->n_kv_heads > 64)
        return err_set(OCT_EUNSUP, "kv cache: %d query heads per KV head (max 64)", c->n_heads / c->n_kv_heads);
    const int bs = o->kv_block_tokens ? o->kv_block_tokens : default_block_tokens;
    if (bs < 1 || bs > 1024) return err_set(OCT_EINVAL, "--kv-block-tokens %d outside 1..1024", bs);
    enum dtype model_dt, chosen;  // (model_dt: what "auto" and the skipped layers store)
    TRY(kv_dtype_parse("auto", m->weight_dtype, &model_dt));
    TRY(kv_dtype_parse(o->dtype, model_dt, &chosen));
    for (int l = 0; l < MODEL_MAX_LAYERS; l++)
        if (o->skip[l] && l >= c->n_layers)
            return err_set(OCT_EINVAL, "--kv-cache-dtype-skip-layers: layer %d does not exist (model has %d)",
                           l, c->n_layers);
    kv->n_layers = c->n_layers;
    kv->kv_block_tokens = bs;
    for (int l = 0; l < c->n_layers; l++) {
        struct kv_layer *L = &kv->layers[l];
        bool sliding = c->sliding_window > 0 && c->layer_sliding[l];
        bool skip = o->skip[l] || (o->skip_sliding && sliding);
        L->dtype = skip ? model_dt : chosen;
        kv->tok_scales[l] = !skip && kv_dtype_token_scales(o->dtype);
        L->n_kv_heads = c->n_kv_heads;
        L->head_dim = c->head_dim;
        L->kv_block_tokens = bs;
        L->window = sliding ? c->sliding_window : 0;
        for (int h = 0; h < c->n_kv_heads; h++) {
            L->k_scale[h] = m->ckpt_k_scale ? m->ckpt_k_scale[l * c->n_kv_heads + h] : 1.0f;
            L->v_scale[h] = m->ckpt_v_scale ? m->ckpt_v_scale[l * c->n_kv_heads + h] : 1.0f;
        }
    }
    if (o->scales_path[0]) TRY(kv_scales_load(kv, o->scales_path));
    const char *why = kv_offsets_refused(c);
    for (int l = 0; why && l < c->n_layers; l++)
        if (kv->layers[l].k_offset) {
            int rc = err_set(OCT_EUNSUP,
                             "%s: layer %d has a k_offset, which this model cannot take: its attention %s, so the "
                             "shift q·o an offset gives all of a query's scores does not cancel; use a scales file "
                             "without \"k_offset\"", o->scales_path, l, why);
            kv_offsets_drop(kv);
            return rc;
        }
    for (int l = 0; l < c->n_layers; l++)  // dynamic scales replace static ones (K offsets still apply)
        for (int h = 0; kv->tok_scales[l] && h < c->n_kv_heads; h++)
            kv->layers[l].k_scale[h] = kv->layers[l].v_scale[h] = 1.0f;
    return OCT_OK;
}

long kv_cache_bytes_per_token(const struct kv_cache *kv) {
    long total = 0;
    for (int l = 0; l < kv->n_layers; l++) {
        const struct kv_layer *L = &kv->layers[l];
        total += 2L * L->n_kv_heads * L->head_dim * (long)dtype_size(L->dtype);
        if (kv->tok_scales[l]) total += 2L * L->n_kv_heads * (long)sizeof(float);  // one f32 per head, K and V
    }
    return total;
}

int kv_cache_alloc(struct kv_cache *kv, struct backend *b, int n_blocks) {
    for (int l = 0; l < kv->n_layers; l++)
        if (kv->tok_scales[l] && !b->ops->kv_token_scales)
            return err_set(OCT_EUNSUP, "--kv-cache-dtype fp8_per_token_head: the %s backend does not implement "
                           "per-token-head KV scales (use the cpu backend, or fp8 with static scales)", b->ops->name);
    kv->b = b;
    kv->n_blocks = n_blocks;
    kv->bytes = 0;
    for (int l = 0; l < kv->n_layers; l++) {
        struct kv_layer *L = &kv->layers[l];
        size_t at, bytes = kv_layer_bytes(L, kv->tok_scales[l], n_blocks, &at);
        L->n_blocks = n_blocks;
        L->k = b->ops->alloc(b, bytes);
        L->v = b->ops->alloc(b, bytes);
        if (!L->k || !L->v) {
            kv_cache_free(kv);
            return err_set(OCT_ENOMEM, "kv cache: cannot allocate %zu bytes for layer %d", 2 * bytes, l);
        }
        L->k_tok_scale = kv->tok_scales[l] ? (float *)((char *)L->k + at) : NULL;
        L->v_tok_scale = kv->tok_scales[l] ? (float *)((char *)L->v + at) : NULL;
        kv->bytes += 2 * bytes;
    }
    return OCT_OK;
}

void kv_cache_free(struct kv_cache *kv) {
    kv_offsets_drop(kv);
    if (!kv->b) return;
    for (int l = 0; l < kv->n_layers; l++) {
        if (kv->layers[l].k) kv->b->ops->free(kv->b, kv->layers[l].k);
        if (kv->layers[l].v) kv->b->ops->free(kv->b, kv->layers[l].v);
        kv->layers[l].k = kv->layers[l].v = NULL;
        kv->layers[l].k_tok_scale = kv->layers[l].v_tok_scale = NULL;
    }
    kv->b = NULL;
}

#define KV_SCALE_MAX 1e30  // a scale's largest value: dequantized e5m2 maxima (57344 x) stay finite in float

// A scale is a positive float that neither underflows (0 or subnormal: x / scale overflows)
// nor overflows float; the error names the file, the layer's key and the value.
static int check_scale(double s, const char *path, int layer, const char *key, int head) {
    if (s >= FLT_MIN && s <= KV_SCALE_MAX) return OCT_OK;
    char at[16] = "";
    if (head >= 0) snprintf(at, sizeof at, "[%d]", head);
    const char *why = !(s > 0) ? "is not positive" : s < FLT_MIN ? "underflows float"
                      : s > FLT_MAX ? "overflows float" : "is too large (dequantized values overflow float)";
    return err_set(OCT_EINVAL, "%s: layer %d %s%s = %.9g %s (a scale must lie in %g..%g)", path, layer, key, at, s,
                   why, (double)FLT_MIN, KV_SCALE_MAX);
}

// Reads one scale array ("k_scale": number or [n_kv_heads] numbers) into dst.
static int read_scales(json_t *v, const char *path, int layer, const char *key, int n_heads, float *dst) {
    if (json_is_number(v)) {
        double s = json_number_value(v);
        TRY(check_scale(s, path, layer, key, -1));
        for (int h = 0; h < n_heads; h++) dst[h] = (float)s;
        return OCT_OK;
    }
    if (!json_is_array(v)) return err_set(OCT_EINVAL, "%s: layer %d %s must be a number or an array", path, layer, key);
    size_t n = json_array_size(v);
    if (n != 1 && n != (size_t)n_heads)
        return err_set(OCT_EINVAL, "%s: layer %d %s has %zu values (want 1 or %d KV heads)",
                       path, layer, key, n, n_heads);
    for (int h = 0; h < n_heads; h++) {
        json_t *e = json_array_get(v, n == 1 ? 0 : (size_t)h);
        double s = json_number_value(e);
        if (!json_is_number(e))
            return err_set(OCT_EINVAL, "%s: layer %d %s[%d] must be a number", path, layer, key, h);
        TRY(check_scale(s, path, layer, key, h));
        dst[h] = (float)s;
    }
    return OCT_OK;
}

// Reads one layer's "k_offset" ([head_dim] numbers for every head, or [n_kv_heads] such
// arrays) into dst[n_heads][hd].
static int read_offsets(json_t *v, const char *path, int layer, int n_heads, int hd, float *dst) {
    if (!json_is_array(v) || json_array_size(v) == 0)
        return err_set(OCT_EINVAL, "%s: layer %d k_offset must be an array of %d numbers or of %d such arrays",
                       path, layer, hd, n_heads);
    bool nested = json_is_array(json_array_get(v, 0));
    size_t n = json_array_size(v);
    if (nested ? n != (size_t)n_heads : n != (size_t)hd)
        return err_set(OCT_EINVAL, "%s: layer %d k_offset has %zu entries (want %d numbers, or %d arrays of %d)",
                       path, layer, n, hd, n_heads, hd);
    for (int h = 0; h < n_heads; h++) {
        json_t *row = nested ? json_array_get(v, (size_t)h) : v;
        if (!json_is_array(row) || json_array_size(row) != (size_t)hd)
            return err_set(OCT_EINVAL, "%s: layer %d k_offset[%d] must be an array of %d numbers", path, layer, h, hd);
        for (int i = 0; i < hd; i++) {
            json_t *e = json_array_get(row, (size_t)i);
            double x = json_number_value(e);
            if (!json_is_number(e) || !isfinite(x) || fabs(x) > 1e30)
                return err_set(OCT_EINVAL, "%s: layer %d k_offset[%d][%d] must be a finite number", path, layer, h, i);
            dst[(size_t)h * hd + i] = (float)x;
        }
    }
    return OCT_OK;
}

const char *kv_offsets_refused(const struct model_config *c) {
    if (c->attn_sinks) return "has sinks, a logit in each softmax that no key's offset shifts";
    if (c->attn_softcap > 0) return "soft-caps its scores with a tanh, which a shift does not pass through";
    return NULL;
}

void kv_offsets_drop(struct kv_cache *kv) {
    free(kv->k_offsets);
    kv->k_offsets = NULL;
    for (int l = 0; l < kv->n_layers; l++) kv->layers[l].k_offset = NULL;
}

int kv_scales_load(struct kv_cache *kv, const char *path) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return err_set(OCT_EINVAL, "--kv-scales %s: %s (line %d)", path, je.text, je.line);
    int rc = OCT_OK;
    json_t *layers = json_object_get(root, "layers");
    if (!json_is_array(layers)) { rc = err_set(OCT_EINVAL, "%s: missing \"layers\" array", path); goto out; }
    if (json_array_size(layers) != (size_t)kv->n_layers) {
        rc = err_set(OCT_EINVAL, "%s: %zu layers, model has %d", path, json_array_size(layers), kv->n_layers);
        goto out;
    }
    for (int l = 0; l < kv->n_layers && rc == OCT_OK; l++) {
        json_t *e = json_array_get(layers, (size_t)l);
        json_t *k = json_object_get(e, "k_scale"), *v = json_object_get(e, "v_scale");
        if (!k || !v) { rc = err_set(OCT_EINVAL, "%s: layer %d needs k_scale and v_scale", path, l); break; }
        rc = read_scales(k, path, l, "k_scale", kv->layers[l].n_kv_heads, kv->layers[l].k_scale);
        if (rc == OCT_OK) rc = read_scales(v, path, l, "v_scale", kv->layers[l].n_kv_heads, kv->layers[l].v_scale);
        json_t *o = json_object_get(e, "k_offset");
        if (rc != OCT_OK || !o) continue;
        struct kv_layer *L = &kv->layers[l];
        size_t per_layer = (size_t)L->n_kv_heads * L->head_dim;
        if (!kv->k_offsets && !(kv->k_offsets = calloc((size_t)kv->n_layers * per_layer, sizeof(float)))) {
            rc = err_set(OCT_ENOMEM, "%s: no memory for K offsets", path);
            break;
        }
        float *dst = kv->k_offsets + (size_t)l * per_layer;
        rc = read_offsets(o, path, l, L->n_kv_heads, L->head_dim, dst);
        if (rc == OCT_OK && (L->dtype == DT_E4M3 || L->dtype == DT_E5M2)) L->k_offset = dst;  // FP8 layers only
    }
out:
    json_decref(root);
    if (rc != OCT_OK) kv_offsets_drop(kv);
    return rc;
}
