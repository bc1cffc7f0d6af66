// test_calibrate.c — KV scale calibration (src/tools/calib_scales.c, stats_util.c): flag
// parsing, histogram quantiles, the scales file round trip through --kv-scales, and the
// claim that calibration helps where scale 1.0 hurts: stories260K with its V (or K) pushed
// far outside e4m3's range by an exactly-compensated power-of-two weight rescaling.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/base/check.h"
#include "../../src/base/fp8.h"
#include "../../src/engine/sampler.h"
#include "../../src/model/model.h"
#include "../../src/model/tokenizer.h"
#include "../../src/tools/calib_scales.h"
#include "../test.h"

#define MODEL SHARED_MODEL("stories260K.gguf")
#define TEXT "tests/data/heldout.txt"
#define CTX 256
#define N_TOK 512

TEST(parse_flags) {
    enum calib_granularity g;
    struct calib_method m;
    CHECK_OK(calib_parse_granularity("head", &g));
    CHECK_EQ_INT(g, CALIB_HEAD);
    CHECK(calib_parse_granularity("channel", &g) < 0 && strstr(err_msg(), "--granularity") && strstr(err_msg(), "channel"));
    CHECK_OK(calib_parse_method("max", &m));
    CHECK(!m.percentile);
    CHECK_OK(calib_parse_method("percentile:99.9", &m));
    CHECK(m.percentile && fabs(m.pct - 99.9) < 1e-12);
    CHECK(calib_parse_method("percentile:101", &m) < 0 && strstr(err_msg(), "--method"));
    CHECK(calib_parse_method("percentile:", &m) < 0);
    CHECK(calib_parse_method("mean", &m) < 0 && strstr(err_msg(), "'mean'"));
}

TEST(hist_quantiles) {
    static struct stats_hist h;
    memset(&h, 0, sizeof h);
    float x[10000];
    for (int i = 0; i < 10000; i++) x[i] = (i % 2 ? -1.0f : 1.0f) * (float)(i + 1);
    stats_hist_add(&h, x, 10000);
    CHECK_EQ_INT(h.n, 10000);
    CHECK_NEAR(h.max_abs, 10000, 0);
    CHECK_NEAR(stats_hist_quantile(&h, 1.0), 10000, 0);
    CHECK_NEAR(stats_hist_quantile(&h, 0.5) / 5000, 1, 0.03);
    CHECK_NEAR(stats_hist_quantile(&h, 0.999) / 9990, 1, 0.03);
    CHECK(stats_hist_quantile(&h, 0.9999) <= 10000);
    float z[4] = {0, 0, 0, 8};
    memset(&h, 0, sizeof h);
    stats_hist_add(&h, z, 4);
    CHECK_NEAR(stats_hist_quantile(&h, 0.5), 0, 0);
    CHECK_NEAR(stats_hist_quantile(&h, 0.9), 8, 0.2);
}

static int32_t *load_tokens(struct model *m, int *n) {
    size_t len;
    char *text = stats_read_file("--file", TEXT, &len);
    int32_t *ids = NULL;
    if (!text || tokenizer_encode(m->tok, text, len, true, false, &ids, n) < 0) { free(text); return NULL; }
    free(text);
    if (*n > N_TOK) *n = N_TOK;
    return ids;
}

// Calibrates m on ids; returns 0 and fills sc.
static int calibrate(struct model *m, int32_t *ids, int n, enum calib_granularity g, const char *method, struct calib_scales *sc) {
    struct runner_options ro;
    runner_options_default(&ro);
    ro.max_ctx = CTX;
    struct runner r;
    struct calib_stats st;
    struct calib_method meth;
    TRY(calib_parse_method(method, &meth));
    TRY(runner_init(&r, m, &ro));
    int rc = calib_stats_init(&st, &m->cfg);
    if (rc == OCT_OK) rc = calib_collect(&r, ids, n, CTX, &st);
    if (rc == OCT_OK) rc = calib_scales_compute(&st, g, meth, FP8_E4M3_MAX, sc);
    calib_stats_free(&st);
    runner_free(&r);
    return rc;
}

// All logits of ids (chunks of CTX, BOS first) with the given cache; out [n][n_vocab].
static int run_logits(struct model *m, int32_t *ids, int n, const char *dtype, const char *scales, float *out) {
    struct runner_options ro;
    runner_options_default(&ro);
    ro.max_ctx = CTX;
    snprintf(ro.kv.dtype, sizeof ro.kv.dtype, "%s", dtype);
    if (scales) snprintf(ro.kv.scales_path, sizeof ro.kv.scales_path, "%s", scales);
    struct runner r;
    TRY(runner_init(&r, m, &ro));
    int rc = OCT_OK;
    for (int at = 0; at < n && rc == OCT_OK; at += CTX) {
        runner_reset(&r);
        int k = n - at < CTX ? n - at : CTX;
        int32_t saved = ids[at];
        ids[at] = tokenizer_bos(m->tok);
        rc = runner_feed(&r, ids + at, k, true, out + (size_t)at * m->cfg.n_vocab);
        ids[at] = saved;
    }
    runner_free(&r);
    return rc;
}

static double mean_kld(const float *ref, const float *x, int n, int nv) {
    double s = 0;
    for (int i = 0; i < n; i++) s += logits_kld(ref + (size_t)i * nv, x + (size_t)i * nv, nv);
    return s / n;
}

TEST(scales_file_round_trip) {
    struct model *m;
    CHECK_OK(model_load(&m, MODEL));
    if (!m) return;
    int n = 0;
    int32_t *ids = load_tokens(m, &n);
    CHECK(ids && n == N_TOK);
    char path[] = "/tmp/octet_calib_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    for (int g = 0; g < 2; g++) {
        struct calib_scales sc;
        CHECK_OK(calibrate(m, ids, n, (enum calib_granularity)g, g ? "percentile:99.9" : "max", &sc));
        int nkv = m->cfg.n_kv_heads;
        for (int l = 0; l < m->cfg.n_layers; l++) {
            if (g == CALIB_TENSOR) CHECK_NEAR(sc.k[l * nkv] * 448.0, sc.k_amax[l], 1e-4 * sc.k_amax[l]);
            for (int h = 0; h < nkv; h++) {
                CHECK(sc.k[l * nkv + h] > 0 && sc.v[l * nkv + h] > 0);
                CHECK(sc.k[l * nkv + h] * 448.0f <= sc.k_amax[l] * 1.0001f);
            }
        }
        CHECK_OK(calib_scales_write(path, &sc, m->name, g ? "percentile:99.9" : "max", n, "fp8_e4m3"));
        struct runner_options ro;
        runner_options_default(&ro);
        ro.max_ctx = CTX;
        snprintf(ro.kv.dtype, sizeof ro.kv.dtype, "fp8");
        snprintf(ro.kv.scales_path, sizeof ro.kv.scales_path, "%s", path);
        struct runner r;
        CHECK_OK(runner_init(&r, m, &ro));
        if (r.m) {
            for (int l = 0; l < m->cfg.n_layers; l++)
                for (int h = 0; h < nkv; h++) {
                    CHECK_NEAR(r.kv.layers[l].k_scale[h], sc.k[l * nkv + h], 1e-6 * sc.k[l * nkv + h]);
                    CHECK_NEAR(r.kv.layers[l].v_scale[h], sc.v[l * nkv + h], 1e-6 * sc.v[l * nkv + h]);
                }
            CHECK_OK(runner_feed(&r, ids, 64, false, NULL));
            runner_free(&r);
        }
        calib_scales_free(&sc);
    }
    unlink(path);
    free(ids);
    model_free(m);
}

// Multiplies weight w by f (a power of two, so the product is exact) in an owned copy.
static void scale_weight(struct model *m, struct weight *w, float f) {
    size_t n = (size_t)(w->rows * w->cols);
    float *dst = model_own(m, n * sizeof(float));
    const float *src = w->data;
    for (size_t i = 0; i < n; i++) dst[i] = src[i] * f;
    w->data = dst;
}

// One scenario: V scaled by sv and K by sk (compensated in wo and wq): the fp32 model is
// unchanged, FP8 at scale 1.0 breaks, calibrated FP8 is as good as on the original model.
static void check_rescaled(float sk, float sv, double base_kld, int32_t *ids, int n, const float *ref) {
    struct model *m;
    CHECK_OK(model_load(&m, MODEL));
    if (!m) return;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        struct layer_weights *w = &m->layers[l];
        CHECK_EQ_INT(w->wv.dtype, DT_F32);
        scale_weight(m, &w->wv, sv);
        scale_weight(m, &w->wo, 1.0f / sv);
        scale_weight(m, &w->wk, sk);
        scale_weight(m, &w->wq, 1.0f / sk);
    }
    int nv = m->cfg.n_vocab;
    float *x = malloc((size_t)n * nv * sizeof(float));
    CHECK_OK(run_logits(m, ids, n, "fp32", NULL, x));
    double d32 = mean_kld(ref, x, n, nv);
    CHECK_MSG(d32 < 1e-9, "fp32 rescaled model differs: KLD %g", d32);
    CHECK_OK(run_logits(m, ids, n, "fp8", NULL, x));
    double d1 = mean_kld(ref, x, n, nv);
    struct calib_scales sc;
    char path[] = "/tmp/octet_calib_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK_OK(calibrate(m, ids, n, CALIB_TENSOR, "max", &sc));
    CHECK_OK(calib_scales_write(path, &sc, "rescaled", "max", n, "fp8_e4m3"));
    CHECK_OK(run_logits(m, ids, n, "fp8", path, x));
    double dc = mean_kld(ref, x, n, nv);
    fprintf(stderr, "  K x%g, V x%g: KLD fp8 scale 1.0 = %.4f, calibrated = %.4f (original model fp8: %.4f)\n", sk, sv, d1,
            dc, base_kld);
    CHECK_MSG(d1 > 0.2 && d1 > 10 * base_kld, "scale 1.0 should hurt: KLD %g", d1);
    CHECK_MSG(dc < 1.5 * base_kld + 0.005, "calibrated KLD %g vs original %g", dc, base_kld);
    calib_scales_free(&sc);
    unlink(path);
    free(x);
    model_free(m);
}

TEST(calibration_helps_where_scale_one_hurts) {
    struct model *m;
    CHECK_OK(model_load(&m, MODEL));
    if (!m) return;
    int n = 0, nv = m->cfg.n_vocab;
    int32_t *ids = load_tokens(m, &n);
    float *ref = malloc((size_t)n * nv * sizeof(float)), *x = malloc((size_t)n * nv * sizeof(float));
    CHECK_OK(run_logits(m, ids, n, "fp32", NULL, ref));
    CHECK_OK(run_logits(m, ids, n, "fp8", NULL, x));
    double base = mean_kld(ref, x, n, nv);
    CHECK(base < 0.05);
    check_rescaled(1.0f, 0x1p-12f, base, ids, n, ref);  // V ~1e-3: e4m3 subnormals / zero
    check_rescaled(0x1p-10f, 1.0f, base, ids, n, ref);  // K ~0.02: flushed, scores collapse
    check_rescaled(0x1p6f, 0x1p10f, base, ids, n, ref); // K ~1800, V ~4000: saturation
    free(ref); free(x); free(ids);
    model_free(m);
}

int main(void) {
    RUN(parse_flags);
    RUN(hist_quantiles);
    RUN(scales_file_round_trip);
    RUN(calibration_helps_where_scale_one_hurts);
    return test_summary("calibrate");
}
