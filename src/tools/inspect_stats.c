// inspect_stats.c — accumulates, per layer and activation kind, what FP8 storage would do
// to the values the forward probe sees: where they sit relative to the format's range
// (histograms in scale units), how many saturate or fall into subnormals / zero, and the
// relative L2 round-trip error. Values are never kept, only histograms and sums.
#include "inspect_stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../base/fp8.h"
#include "../model/kv_cache.h"

int inspect_stats_init(struct inspect_stats *s, const struct model_config *c, enum dtype dt,
                       const struct kv_cache *kv) {
    memset(s, 0, sizeof *s);
    s->n_layers = c->n_layers;
    s->n_heads = c->n_heads;
    s->n_kv_heads = c->n_kv_heads;
    s->head_dim = c->head_dim;
    s->dt = dt;
    s->kv = kv;
    s->acc = calloc((size_t)c->n_layers * INSPECT_KINDS, sizeof *s->acc);
    if (!s->acc) return err_set(OCT_ENOMEM, "inspect: no memory for %d layers of histograms", c->n_layers);
    for (int i = 0; i < c->n_layers * INSPECT_KINDS; i++) { s->acc[i].scale_min = INFINITY; s->acc[i].scale_max = 0; }
    return OCT_OK;
}

void inspect_stats_free(struct inspect_stats *s) {
    free(s->acc);
    memset(s, 0, sizeof *s);
}

struct inspect_acc *inspect_acc_of(const struct inspect_stats *s, int layer, enum probe_kind kind) {
    return &s->acc[(size_t)layer * INSPECT_KINDS + (size_t)kind];
}

// One run of n values sharing a scale.
static void add_run(struct inspect_acc *a, enum dtype dt, const float *x, int n, float scale) {
    float fsat = stats_fp8_sat_threshold(dt), fmin = stats_fp8_min_normal(dt);
    float buf[256];
    for (int i0 = 0; i0 < n; i0 += 256) {
        int m = n - i0 < 256 ? n - i0 : 256;
        stats_hist_add(&a->real, x + i0, (size_t)m);
        for (int i = 0; i < m; i++) buf[i] = x[i0 + i] / scale;
        stats_hist_add(&a->scaled, buf, (size_t)m);
        for (int i = 0; i < m; i++) {
            float v = x[i0 + i], u = fabsf(buf[i]);
            float rt = dt == DT_E4M3 ? fp8_e4m3_to_f32(fp8_e4m3_from_f32(buf[i]))
                                     : fp8_e5m2_to_f32(fp8_e5m2_from_f32(buf[i]));
            a->n_sat += u >= fsat;
            a->n_sub += v != 0 && u < fmin;
            a->n_flush += v != 0 && rt == 0;
            double e = (double)v - (double)rt * scale;
            a->sq_err += e * e;
            a->sq += (double)v * v;
            buf[i] = rt;
        }
        stats_hist_add(&a->rounded, buf, (size_t)m);
    }
    if (scale < a->scale_min) a->scale_min = scale;
    if (scale > a->scale_max) a->scale_max = scale;
}

// The dynamic scale of one row: amax / 448, or 1.0 where that is 0 or subnormal (as kv_write).
static float row_scale(const float *x, int n) {
    float amax = 0;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = amax / FP8_E4M3_MAX;
    return s >= FLT_MIN && s <= FLT_MAX ? s : 1.0f;
}

void inspect_probe(void *ctx, int layer, enum probe_kind kind, const float *x, int n_tokens, int width) {
    struct inspect_stats *s = ctx;
    if (layer >= s->n_layers || kind >= INSPECT_KINDS) return;
    struct inspect_acc *a = inspect_acc_of(s, layer, kind);
    int hd = s->head_dim;
    for (int t = 0; t < n_tokens; t++) {
        const float *row = x + (size_t)t * width;
        if (kind == PROBE_GATE) { add_run(a, s->dt, row, width, 1.0f); continue; }
        for (int h = 0; h < width / hd; h++) {
            const float *xh = row + (size_t)h * hd;
            float scale;
            if (kind == PROBE_Q) {  // dynamic per-(token, head) scale of the FP8 attention path
                add_run(a, DT_E4M3, xh, hd, row_scale(xh, hd));
                continue;
            }
            const struct kv_layer *L = &s->kv->layers[layer];
            scale = kind == PROBE_K ? L->k_scale[h] : L->v_scale[h];
            // what an FP8 layer with the scales file's K offsets stores (the observed cache itself
            // may be unquantized, so take the offsets from the file, not from the layer)
            float centred[512];  // head_dim <= 512
            if (kind == PROBE_K && s->kv->k_offsets) {
                const float *o = s->kv->k_offsets + ((size_t)layer * L->n_kv_heads + h) * hd;
                for (int i = 0; i < hd; i++) centred[i] = xh[i] - o[i];
                xh = centred;
            }
            if (s->token_scales) scale = row_scale(xh, hd);  // fp8_per_token_head: the row's own
            add_run(a, s->dt, xh, hd, scale);
        }
    }
}
