// calib_choose.c — picks, per layer and per K/V, the calibrated scales whose FP8 rounding
// changes the attention output least on the calibration text. The sample's K and V are rounded
// as kv_write stores them (RNE((x − offset) / scale) through the bit-exact codec of fp8.h, then
// widened: e · scale + offset) and attended in f32 (causal, grouped query heads, the model's
// softmax scale, soft cap and sliding window) against the same attention of the exact K and V.
#include "calib_choose.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../base/fp8.h"
#include "../model/kv_cache.h"
#include "../model/model.h"

#define SAMPLE_CAP 512
#define SAMPLE_WORK 8.6e9  // T² · n_heads · head_dim · n_layers bound of one pass over every layer's sample

// out[T][nh*hd] = softmax(q kᵀ · scale) v, causal, over a T-token sequence of layer l.
static void attend(const struct model_config *c, int l, int T, const float *q, const float *k, const float *v,
                   float *out, float *p /* [T] */) {
    int nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim, grp = nh / nkv;
    float scale = c->attn_scale > 0 ? c->attn_scale : 1.0f / sqrtf((float)hd);
    int win = c->layer_sliding[l] && c->sliding_window > 0 ? c->sliding_window : 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            const float *qr = q + ((size_t)t * nh + h) * hd;
            int g = h / grp, lo = win && t - win + 1 > 0 ? t - win + 1 : 0;
            float m = -INFINITY, sum = 0;
            for (int j = lo; j <= t; j++) {
                const float *kr = k + ((size_t)j * nkv + g) * hd;
                float s = 0;
                for (int d = 0; d < hd; d++) s += qr[d] * kr[d];
                s *= scale;
                if (c->attn_softcap > 0) s = c->attn_softcap * tanhf(s / c->attn_softcap);
                p[j] = s;
                m = s > m ? s : m;
            }
            float *o = out + ((size_t)t * nh + h) * hd;
            memset(o, 0, (size_t)hd * sizeof(float));
            for (int j = lo; j <= t; j++) {
                float e = expf(p[j] - m);
                sum += e;
                const float *vr = v + ((size_t)j * nkv + g) * hd;
                for (int d = 0; d < hd; d++) o[d] += e * vr[d];
            }
            for (int d = 0; d < hd; d++) o[d] /= sum;
        }
}

// dst = the stored-and-widened src ([T][nkv][hd]) under scale[nkv] and offsets off[nkv][hd] (or NULL).
static void round_trip(float *dst, const float *src, int T, int nkv, int hd, const float *scale, const float *off,
                       bool e5m2) {
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nkv; h++)
            for (int d = 0; d < hd; d++) {
                size_t i = ((size_t)t * nkv + h) * hd + d;
                float o = off ? off[(size_t)h * hd + d] : 0.0f, x = (src[i] - o) / scale[h];
                float e = e5m2 ? fp8_e5m2_to_f32(fp8_e5m2_from_f32(x)) : fp8_e4m3_to_f32(fp8_e4m3_from_f32(x));
                dst[i] = e * scale[h] + o;
            }
}

static double rel_err(const float *x, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

// Adds the six statistic candidates (tensor|head × max|p99.9|p99.99) of st as it stands.
static int add_stat_cands(struct calib_choice *ch, const struct calib_stats *st, float fp8_max, bool off) {
    static const char *const meth[] = {"max", "percentile:99.9", "percentile:99.99"};
    static const char *const short_name[] = {"max", "p99.9", "p99.99"};
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < 3; i++) {
            struct calib_cand *c = &ch->cand[ch->n_cand];
            struct calib_method m;
            TRY(calib_parse_method(meth[i], &m));
            TRY(calib_scales_compute(st, g ? CALIB_HEAD : CALIB_TENSOR, m, fp8_max, &c->sc));
            snprintf(c->name, sizeof c->name, "%s %s%s", g ? "head" : "tensor", short_name[i], off ? " +off" : "");
            c->off = off;
            ch->n_cand++;
        }
    return OCT_OK;
}

// Adds "1.0" (or "1.0 +off"): a copy of candidate `like` with every K and V scale 1.
static int add_unit_cand(struct calib_choice *ch, const struct calib_stats *st, float fp8_max, bool off) {
    struct calib_cand *c = &ch->cand[ch->n_cand];
    TRY(calib_scales_compute(st, CALIB_TENSOR, (struct calib_method){0}, fp8_max, &c->sc));
    for (size_t i = 0; i < (size_t)st->n_layers * st->n_kv_heads; i++) c->sc.k[i] = c->sc.v[i] = 1.0f;
    snprintf(c->name, sizeof c->name, "1.0%s", off ? " +off" : "");
    c->off = off;
    ch->n_cand++;
    return OCT_OK;
}

static int collect_candidates(struct calib_choice *ch, struct runner *r, int32_t *ids, int n_ids, int ctx,
                              float fp8_max, struct calib_stats *st) {
    TRY(calib_collect(r, ids, n_ids, ctx, st));       // raw K: the candidates without offsets
    TRY(add_unit_cand(ch, st, fp8_max, false));
    TRY(add_stat_cands(ch, st, fp8_max, false));
    if (kv_offsets_refused(&r->m->cfg)) return OCT_OK;  // (sinks or soft-capping: an offset would not cancel)
    struct calib_sample *keep = st->sample;
    st->sample = NULL;                                // the sample is the first pass's
    TRY(calib_offsets_from_mean(st));
    int rc = calib_collect(r, ids, n_ids, ctx, st);   // |K − mean|: the candidates with offsets
    st->sample = keep;
    TRY(rc);
    TRY(add_unit_cand(ch, st, fp8_max, true));
    return add_stat_cands(ch, st, fp8_max, true);
}

static int alloc_choice(struct calib_choice *ch, int L) {
    ch->n_layers = L;
    ch->err_k = malloc((size_t)L * CALIB_MAX_CAND * sizeof(double));
    ch->err_v = malloc((size_t)L * CALIB_MAX_CAND * sizeof(double));
    ch->best_k = calloc((size_t)L, sizeof(int));
    ch->best_v = calloc((size_t)L, sizeof(int));
    ch->off_layer = calloc((size_t)L, sizeof(bool));
    ch->k_name = calloc((size_t)L, sizeof(char *));
    ch->v_name = calloc((size_t)L, sizeof(char *));
    if (!ch->err_k || !ch->err_v || !ch->best_k || !ch->best_v || !ch->off_layer || !ch->k_name || !ch->v_name)
        return err_set(OCT_ENOMEM, "calibrate: out of memory");
    return OCT_OK;
}

// Measures every candidate on layer l's sample and records the choice.
static void choose_layer(struct calib_choice *ch, const struct model_config *c, const struct calib_sample *p,
                         const float *k_off, int l, bool e5m2, float *buf) {
    int T = p->n[l], nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
    size_t nq = (size_t)T * nh * hd, nk = (size_t)T * nkv * hd;
    float *ref = buf, *o = ref + nq, *kq = o + nq, *vq = kq + nk, *pr = vq + nk;
    const float *q = p->q + (size_t)l * p->cap * nh * hd;
    const float *k = p->k + (size_t)l * p->cap * nkv * hd, *v = p->v + (size_t)l * p->cap * nkv * hd;
    const float *off = k_off + (size_t)l * nkv * hd;
    attend(c, l, T, q, k, v, ref, pr);
    double *ek = ch->err_k + (size_t)l * CALIB_MAX_CAND, *ev = ch->err_v + (size_t)l * CALIB_MAX_CAND;
    int bk = 0, bv = 0;
    for (int i = 0; i < ch->n_cand; i++) {  // K, with V exact
        const struct calib_cand *cd = &ch->cand[i];
        round_trip(kq, k, T, nkv, hd, cd->sc.k + (size_t)l * nkv, cd->off ? off : NULL, e5m2);
        attend(c, l, T, q, kq, v, o, pr);
        ek[i] = rel_err(o, ref, nq);
        if (ek[i] < ek[bk]) bk = i;  // strictly smaller: 1.0 (first) keeps ties
    }
    const struct calib_cand *ck = &ch->cand[bk];
    round_trip(kq, k, T, nkv, hd, ck->sc.k + (size_t)l * nkv, ck->off ? off : NULL, e5m2);
    for (int i = 0; i < ch->n_cand; i++) {  // V, with the chosen K
        const struct calib_cand *cd = &ch->cand[i];
        if (cd->off) { ev[i] = NAN; continue; }  // offsets are K's alone
        round_trip(vq, v, T, nkv, hd, cd->sc.v + (size_t)l * nkv, NULL, e5m2);
        attend(c, l, T, q, kq, vq, o, pr);
        ev[i] = rel_err(o, ref, nq);
        if (ev[i] < ev[bv]) bv = i;
    }
    ch->best_k[l] = bk;
    ch->best_v[l] = bv;
    ch->off_layer[l] = ck->off;
    ch->k_name[l] = ck->name;
    ch->v_name[l] = ch->cand[bv].name;
}

// result = per-head arrays of each layer's chosen K and V scales (Q: per head max, for reference).
static int assemble(struct calib_choice *ch, const struct calib_stats *st) {
    struct calib_scales *res = &ch->result;
    int head_max = 4;  // "head max" (see add_stat_cands' order)
    TRY(calib_scales_compute(st, CALIB_HEAD, (struct calib_method){0}, 1.0f, res));
    int nkv = st->n_kv_heads, nh = st->n_heads;
    for (int l = 0; l < st->n_layers; l++) {
        memcpy(res->k + (size_t)l * nkv, ch->cand[ch->best_k[l]].sc.k + (size_t)l * nkv, nkv * sizeof(float));
        memcpy(res->v + (size_t)l * nkv, ch->cand[ch->best_v[l]].sc.v + (size_t)l * nkv, nkv * sizeof(float));
        memcpy(res->q + (size_t)l * nh, ch->cand[head_max].sc.q + (size_t)l * nh, nh * sizeof(float));
        res->k_amax[l] = ch->cand[0].sc.k_amax[l];  // raw |K|, not |K − offset|
        res->v_amax[l] = ch->cand[0].sc.v_amax[l];
    }
    res->k_off = st->k_off;
    res->k_off_layer = ch->off_layer;
    res->k_choice = ch->k_name;
    res->v_choice = ch->v_name;
    return OCT_OK;
}

int calib_choose(struct calib_choice *ch, struct runner *r, int32_t *ids, int n_ids, int ctx, enum dtype dt,
                 struct calib_stats *st) {
    memset(ch, 0, sizeof *ch);
    const struct model_config *c = &r->m->cfg;
    struct calib_sample sample;
    int cap = ctx < SAMPLE_CAP ? ctx : SAMPLE_CAP;  // shorter for large models: each candidate costs a pass
    int fit = (int)sqrt(SAMPLE_WORK / ((double)c->n_heads * c->head_dim * c->n_layers));
    if (fit < cap) cap = fit < 16 ? 16 : fit;
    if (cap > ctx) cap = ctx;
    TRY(calib_sample_init(&sample, st, cap));
    st->sample = &sample;
    float *buf = NULL;
    int rc = alloc_choice(ch, c->n_layers);
    if (rc == OCT_OK) rc = collect_candidates(ch, r, ids, n_ids, ctx, stats_fp8_max(dt), st);
    st->sample = NULL;
    size_t nq = (size_t)cap * c->n_heads * c->head_dim, nk = (size_t)cap * c->n_kv_heads * c->head_dim;
    if (rc == OCT_OK && !(buf = malloc((2 * nq + 2 * nk + (size_t)cap) * sizeof(float))))
        rc = err_set(OCT_ENOMEM, "calibrate: out of memory");
    for (int l = 0; rc == OCT_OK && l < c->n_layers; l++)
        choose_layer(ch, c, &sample, st->k_off, l, dt == DT_E5M2, buf);
    ch->sample_tokens = sample.n[0];
    if (rc == OCT_OK) rc = assemble(ch, st);
    free(buf);
    calib_sample_free(&sample);
    return rc;
}

void calib_choice_print(const struct calib_choice *ch, FILE *f) {
    fprintf(f, "Relative squared error of each layer's attention output over %d calibration tokens "
               "(* = kept; V rows use the kept K):\n\n| layer | |", ch->sample_tokens);
    for (int i = 0; i < ch->n_cand; i++) fprintf(f, " %s |", ch->cand[i].name);
    fprintf(f, " kept |\n|---:|---|");
    for (int i = 0; i < ch->n_cand; i++) fprintf(f, "---:|");
    fprintf(f, "---|\n");
    for (int l = 0; l < ch->n_layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            const double *e = (kv ? ch->err_v : ch->err_k) + (size_t)l * CALIB_MAX_CAND;
            int best = kv ? ch->best_v[l] : ch->best_k[l];
            fprintf(f, "| %d | %s |", l, kv ? "V" : "K");
            for (int i = 0; i < ch->n_cand; i++) {
                if (isnan(e[i])) fprintf(f, " - |");
                else fprintf(f, " %.3g%s |", e[i], i == best ? "*" : "");
            }
            fprintf(f, " %s |\n", ch->cand[best].name);
        }
}

void calib_choice_free(struct calib_choice *ch) {
    for (int i = 0; i < ch->n_cand; i++) calib_scales_free(&ch->cand[i].sc);
    calib_scales_free(&ch->result);
    free(ch->err_k); free(ch->err_v); free(ch->best_k); free(ch->best_v);
    free(ch->off_layer); free(ch->k_name); free(ch->v_name);
    memset(ch, 0, sizeof *ch);
}
