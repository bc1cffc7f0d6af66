// calib_scales.c — collects per-head |x| histograms of Q/K/V through the forward probe and
// turns them into KV scales (max-abs or a percentile, per tensor or per KV head), then
// writes the scales file that kv_scales_load reads.
#include "calib_scales.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../base/fp8.h"
#include "../model/model.h"
#include "../model/tokenizer.h"

int calib_parse_granularity(const char *s, enum calib_granularity *g) {
    if (!strcmp(s, "tensor")) *g = CALIB_TENSOR;
    else if (!strcmp(s, "head")) *g = CALIB_HEAD;
    else return err_set(OCT_EINVAL, "--granularity: unknown value '%s' (choose tensor or head)", s);
    return OCT_OK;
}

int calib_parse_method(const char *s, struct calib_method *m) {
    memset(m, 0, sizeof *m);
    if (!strcmp(s, "max")) return OCT_OK;
    if (!strncmp(s, "percentile:", 11)) {
        char *end;
        double p = strtod(s + 11, &end);
        if (end != s + 11 && !*end && p > 0 && p <= 100) {
            m->percentile = true;
            m->pct = p;
            return OCT_OK;
        }
    }
    return err_set(OCT_EINVAL, "--method: unknown value '%s' (choose max or percentile:P with 0 < P <= 100, "
                   "e.g. percentile:99.9)", s);
}

int calib_stats_init(struct calib_stats *s, const struct model_config *c) {
    memset(s, 0, sizeof *s);
    s->n_layers = c->n_layers;
    s->n_heads = c->n_heads;
    s->n_kv_heads = c->n_kv_heads;
    s->head_dim = c->head_dim;
    s->h = calloc((size_t)c->n_layers * 3 * c->n_heads, sizeof *s->h);
    s->k_sum = calloc((size_t)c->n_layers * c->n_kv_heads * c->head_dim, sizeof *s->k_sum);
    if (!s->h || !s->k_sum) {
        calib_stats_free(s);
        return err_set(OCT_ENOMEM, "calibrate: no memory for %d layers of histograms", c->n_layers);
    }
    return OCT_OK;
}

void calib_stats_free(struct calib_stats *s) {
    free(s->h);
    free(s->k_sum);
    free(s->k_off);
    memset(s, 0, sizeof *s);
}

int calib_sample_init(struct calib_sample *p, const struct calib_stats *s, int cap) {
    memset(p, 0, sizeof *p);
    size_t L = (size_t)s->n_layers, hd = (size_t)s->head_dim;
    p->cap = cap;
    p->n = calloc(L, sizeof *p->n);
    p->q = malloc(L * cap * s->n_heads * hd * sizeof(float));
    p->k = malloc(L * cap * s->n_kv_heads * hd * sizeof(float));
    p->v = malloc(L * cap * s->n_kv_heads * hd * sizeof(float));
    if (!p->n || !p->q || !p->k || !p->v) {
        calib_sample_free(p);
        return err_set(OCT_ENOMEM, "calibrate: no memory for a sample of %d tokens per layer", cap);
    }
    return OCT_OK;
}

void calib_sample_free(struct calib_sample *p) {
    free(p->n); free(p->q); free(p->k); free(p->v);
    memset(p, 0, sizeof *p);
}

// Appends the first tokens of x (one layer's Q, K or V; [n_tokens][width]) to the sample.
static void sample_add(struct calib_stats *s, int layer, enum probe_kind kind, const float *x, int n_tokens,
                       int width) {
    struct calib_sample *p = s->sample;
    int have = p->n[layer], take = p->cap - have < n_tokens ? p->cap - have : n_tokens;
    if (take <= 0) return;
    float *dst = kind == PROBE_Q ? p->q : kind == PROBE_K ? p->k : p->v;
    memcpy(dst + ((size_t)layer * p->cap + have) * width, x, (size_t)take * width * sizeof(float));
    if (kind == PROBE_V) p->n[layer] += take;  // Q, K and V of a step arrive in this order
}

struct stats_hist *calib_hist(const struct calib_stats *s, int layer, enum probe_kind kind, int head) {
    return &s->h[((size_t)layer * 3 + (size_t)kind) * s->n_heads + head];
}

void calib_probe(void *ctx, int layer, enum probe_kind kind, const float *x, int n_tokens, int width) {
    struct calib_stats *s = ctx;
    if (kind > PROBE_V || layer >= s->n_layers) return;  // (the K/V cache's tensors only)
    if (s->sample) sample_add(s, layer, kind, x, n_tokens, width);
    int hd = s->head_dim, nh = width / hd;  // x is [n_tokens][nh][hd]
    if (kind == PROBE_K) {
        double *sum = s->k_sum + (size_t)layer * nh * hd;
        for (int t = 0; t < n_tokens; t++)
            for (int i = 0; i < nh * hd; i++) sum[i] += x[(size_t)t * width + i];
    }
    if (kind == PROBE_K && s->k_off) {  // histograms of K − offset, one row at a time
        const float *off = s->k_off + (size_t)layer * nh * hd;
        float row[512];  // head_dim <= 512
        for (int t = 0; t < n_tokens; t++)
            for (int h = 0; h < nh; h++) {
                for (int i = 0; i < hd; i++) row[i] = x[(size_t)t * width + h * hd + i] - off[h * hd + i];
                stats_hist_add(calib_hist(s, layer, kind, h), row, (size_t)hd);
            }
    } else {
        for (int h = 0; h < nh; h++)
            stats_hist_add_strided(calib_hist(s, layer, kind, h), x + (size_t)h * hd, n_tokens, width, hd);
    }
    if (layer == 0 && kind == PROBE_K) s->n_tokens += n_tokens;
}

int calib_collect(struct runner *r, int32_t *ids, int n_ids, int ctx, struct calib_stats *s) {
    forward_probe_fn old = r->fw.probe;
    void *old_ctx = r->fw.probe_ctx;
    r->fw.probe = calib_probe;
    r->fw.probe_ctx = s;
    int bos = tokenizer_bos(r->m->tok), rc = OCT_OK;
    for (int at = 0; at < n_ids && rc == OCT_OK; at += ctx) {
        int n = n_ids - at < ctx ? n_ids - at : ctx;
        int32_t saved = ids[at];
        if (bos >= 0) ids[at] = bos;
        runner_reset(r);
        rc = runner_feed(r, ids + at, n, false, NULL);
        ids[at] = saved;
    }
    r->fw.probe = old;
    r->fw.probe_ctx = old_ctx;
    return rc;
}

int calib_offsets_from_mean(struct calib_stats *s) {
    if (s->n_tokens == 0) return err_set(OCT_EINVAL, "calibrate: no tokens were observed");
    size_t n = (size_t)s->n_layers * s->n_kv_heads * s->head_dim;
    if (!s->k_off && !(s->k_off = malloc(n * sizeof(float)))) return err_set(OCT_ENOMEM, "calibrate: out of memory");
    for (size_t i = 0; i < n; i++) s->k_off[i] = (float)(s->k_sum[i] / (double)s->n_tokens);
    memset(s->h, 0, (size_t)s->n_layers * 3 * s->n_heads * sizeof *s->h);
    memset(s->k_sum, 0, n * sizeof *s->k_sum);
    s->n_tokens = 0;
    return OCT_OK;
}

static double stat_of(const struct stats_hist *h, struct calib_method m) {
    return m.percentile ? stats_hist_quantile(h, m.pct / 100.0) : h->max_abs;
}

static float to_scale(double stat, double fp8_max) {
    double s = stat / fp8_max;
    return (s > 1e-30 && isfinite(s)) ? (float)s : 1.0f;
}

// Scales for one (layer, kind) over nh heads into dst[nh].
static void scales_of(const struct calib_stats *s, int l, enum probe_kind kind, int nh, enum calib_granularity g,
                      struct calib_method m, double fp8_max, float *dst) {
    if (g == CALIB_HEAD) {
        for (int h = 0; h < nh; h++) dst[h] = to_scale(stat_of(calib_hist(s, l, kind, h), m), fp8_max);
        return;
    }
    struct stats_hist *all = calloc(1, sizeof *all);
    if (!all) { for (int h = 0; h < nh; h++) dst[h] = 1.0f; return; }
    for (int h = 0; h < nh; h++) stats_hist_merge(all, calib_hist(s, l, kind, h));
    float sc = to_scale(stat_of(all, m), fp8_max);
    for (int h = 0; h < nh; h++) dst[h] = sc;
    free(all);
}

int calib_scales_compute(const struct calib_stats *s, enum calib_granularity g, struct calib_method m,
                         float fp8_max, struct calib_scales *out) {
    memset(out, 0, sizeof *out);
    if (s->n_tokens == 0) return err_set(OCT_EINVAL, "calibrate: no tokens were observed");
    int L = s->n_layers, nkv = s->n_kv_heads, nh = s->n_heads;
    out->n_layers = L;
    out->n_kv_heads = nkv;
    out->n_heads = nh;
    out->head_dim = s->head_dim;
    out->k_off = s->k_off;
    out->granularity = g;
    out->k = malloc((size_t)L * nkv * sizeof(float));
    out->v = malloc((size_t)L * nkv * sizeof(float));
    out->q = malloc((size_t)L * nh * sizeof(float));
    out->k_amax = malloc((size_t)L * sizeof(float));
    out->v_amax = malloc((size_t)L * sizeof(float));
    if (!out->k || !out->v || !out->q || !out->k_amax || !out->v_amax) {
        calib_scales_free(out);
        return err_set(OCT_ENOMEM, "calibrate: out of memory");
    }
    for (int l = 0; l < L; l++) {
        scales_of(s, l, PROBE_K, nkv, g, m, fp8_max, out->k + (size_t)l * nkv);
        scales_of(s, l, PROBE_V, nkv, g, m, fp8_max, out->v + (size_t)l * nkv);
        scales_of(s, l, PROBE_Q, nh, g, m, FP8_E4M3_MAX, out->q + (size_t)l * nh);
        double ka = 0, va = 0;
        for (int h = 0; h < nkv; h++) {
            ka = fmax(ka, calib_hist(s, l, PROBE_K, h)->max_abs);
            va = fmax(va, calib_hist(s, l, PROBE_V, h)->max_abs);
        }
        out->k_amax[l] = (float)ka;
        out->v_amax[l] = (float)va;
    }
    return OCT_OK;
}

void calib_scales_free(struct calib_scales *c) {
    free(c->k); free(c->v); free(c->q); free(c->k_amax); free(c->v_amax);
    memset(c, 0, sizeof *c);
}

static json_t *scale_json(const float *v, int n, enum calib_granularity g) {
    if (g == CALIB_TENSOR) return json_real(v[0]);
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

int calib_scales_write(const char *path, const struct calib_scales *c, const char *model_name,
                       const char *method, long num_tokens, const char *kv_dtype) {
    json_t *o = json_object(), *layers = json_array();
    json_object_set_new(o, "format", json_string("octet-kv-scales/1"));
    json_object_set_new(o, "granularity", json_string(c->granularity == CALIB_HEAD ? "head" : "tensor"));
    json_object_set_new(o, "method", json_string(method));
    json_object_set_new(o, "model", json_string(model_name));
    json_object_set_new(o, "num_tokens", json_integer(num_tokens));
    json_object_set_new(o, "kv_cache_dtype", json_string(kv_dtype));
    for (int l = 0; l < c->n_layers; l++) {
        json_t *e = json_object();
        json_object_set_new(e, "k_scale", scale_json(c->k + (size_t)l * c->n_kv_heads, c->n_kv_heads, c->granularity));
        json_object_set_new(e, "v_scale", scale_json(c->v + (size_t)l * c->n_kv_heads, c->n_kv_heads, c->granularity));
        json_object_set_new(e, "q_scale", scale_json(c->q + (size_t)l * c->n_heads, c->n_heads, c->granularity));
        json_object_set_new(e, "k_amax", json_real(c->k_amax[l]));
        json_object_set_new(e, "v_amax", json_real(c->v_amax[l]));
        if (c->k_choice) json_object_set_new(e, "k_choice", json_string(c->k_choice[l]));
        if (c->v_choice) json_object_set_new(e, "v_choice", json_string(c->v_choice[l]));
        if (c->k_off && (!c->k_off_layer || c->k_off_layer[l])) {
            json_t *heads = json_array();
            for (int h = 0; h < c->n_kv_heads; h++) {
                const float *o = c->k_off + ((size_t)l * c->n_kv_heads + h) * c->head_dim;
                json_t *row = json_array();
                for (int i = 0; i < c->head_dim; i++) json_array_append_new(row, json_real(o[i]));
                json_array_append_new(heads, row);
            }
            json_object_set_new(e, "k_offset", heads);
        }
        json_array_append_new(layers, e);
    }
    json_object_set_new(o, "layers", layers);
    int rc = json_dump_file(o, path, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (rc != 0) return err_set(OCT_EIO, "--output %s: cannot write", path);
    return OCT_OK;
}
