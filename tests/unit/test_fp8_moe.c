// test_fp8_moe.c — the CPU moe_ffn with FP8 (e4m3) experts (docs/fp8_weights.md): stacked expert weights
// built from random e4m3 codes with per-channel and 128x128 block scales, against a float64 reference
// computed from the dequantized experts with the contract's activation quantization (each token's row,
// dynamic: s = amax / 448 in f32, codes of x · (1/s)), allowing an SwiGLU output within the f32 sums' error
// of an e4m3 rounding midpoint its neighbouring code; a token's outputs are the same bits alone, in any
// batch and in any order; block scales that would straddle two experts are refused.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
#include "../../src/base/check.h"
#include "../../src/base/fp8.h"
#include "../test.h"

enum { N = 6, D = 128, F = 256, NE = 4, K = 2, B = 128 };

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

// A random e4m3 code (never NaN: 0x7F and 0xFF).
static uint8_t rcode(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    uint8_t c = (uint8_t)(*s >> 16);
    return (c & 0x7F) == 0x7F ? c ^ 1 : c;
}

// An e4m3 [rows][cols] weight with random codes and scales (per row, or block×block tiles).
static struct weight fp8_weight(int64_t rows, int64_t cols, bool block, unsigned *s) {
    uint8_t *q = malloc((size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) q[i] = rcode(s);
    struct weight w = {DT_E4M3, rows, cols, q, q, {0}, 0};
    w.fp8.wscale = block ? WSCALE_BLOCK : WSCALE_CHANNEL;
    w.fp8.block = block ? B : 0;
    int64_t n = weight_fp8_n_scales(&w);
    float *sc = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) sc[i] = (1.0f + 0.5f * frand(s)) / 448.0f * 0.05f;
    w.fp8.scale = sc;
    return w;
}

static void free_weight(struct weight *w) {
    free((void *)w->data);
    free((void *)w->fp8.scale);
}

// Element (r, c) of an fp8 weight: e4m3 value × its scale, in double.
static double deq(const struct weight *w, int64_t r, int64_t c) {
    double v = fp8_e4m3_table[((const uint8_t *)w->data)[r * w->cols + c]];
    if (w->fp8.wscale == WSCALE_CHANNEL) return v * w->fp8.scale[r];
    int64_t nbc = (w->cols + w->fp8.block - 1) / w->fp8.block;
    return v * w->fp8.scale[(r / w->fp8.block) * nbc + c / w->fp8.block];
}

// The contract's dynamic per-token quantization of x[n] (f32 math): q[i] the fp8 values; returns s.
static float quant_row(const float *x, int n, double *q) {
    float amax = 0;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = amax / FP8_E4M3_MAX;
    if (!(s > 0)) s = 1.0f;
    const float inv = 1.0f / s;
    for (int i = 0; i < n; i++) q[i] = fp8_e4m3_table[fp8_e4m3_from_f32(x[i] * inv)];
    return s;
}

// How far an e4m3 code of v may move when v moves by a relative eps: the largest |value change|, 0 when
// v·(1 ± eps) keep v's code (a value near a rounding midpoint may round either way under f32 sums).
static double code_slack(float v, double eps) {
    const double q = fp8_e4m3_table[fp8_e4m3_from_f32(v)];
    const double lo = fp8_e4m3_table[fp8_e4m3_from_f32((float)(v * (1 - eps)))];
    const double hi = fp8_e4m3_table[fp8_e4m3_from_f32((float)(v * (1 + eps)))];
    return fmax(fabs(lo - q), fabs(hi - q));
}

// The float64 reference of token t's output row y[D], its bound Σ|terms| in tol[D], and in amb[D] what the
// SwiGLU output's codes may add: h is quantized again before the down projection, and an h within the f32
// sums' error of a rounding midpoint may take the neighbouring code (one e4m3 step, 6-12 % of that h).
static void reference(const float *x, const float *router, const struct weight *g, const struct weight *u,
                      const struct weight *dn, double *y, double *tol, double *amb) {
    double lg[NE], mx = -1e30, z = 0;
    for (int e = 0; e < NE; e++) {
        lg[e] = 0;
        for (int i = 0; i < D; i++) lg[e] += (double)x[i] * router[e * D + i];
        mx = lg[e] > mx ? lg[e] : mx;
    }
    for (int e = 0; e < NE; e++) z += exp(lg[e] - mx);
    int pick[K] = {0, -1};
    for (int e = 1; e < NE; e++) if (lg[e] > lg[pick[0]]) pick[0] = e;
    for (int e = 0; e < NE; e++) if (e != pick[0] && (pick[1] < 0 || lg[e] > lg[pick[1]])) pick[1] = e;
    static double xq[D], hq[F], eps[F], slack[F];
    static float h[F];
    const double sx = quant_row(x, D, xq);
    for (int d = 0; d < D; d++) y[d] = tol[d] = amb[d] = 0;
    for (int j = 0; j < K; j++) {
        const int e = pick[j];
        const double p = exp(lg[e] - mx) / z;
        int top = 0;  // the element that sets h's scale
        for (int f = 0; f < F; f++) {
            double gv = 0, uv = 0, gm = 0, um = 0;
            for (int i = 0; i < D; i++) {
                const double tg = xq[i] * deq(g, e * F + f, i), tu = xq[i] * deq(u, e * F + f, i);
                gv += tg, uv += tu, gm += fabs(tg), um += fabs(tu);
            }
            gv *= sx, uv *= sx, gm *= sx, um *= sx;
            h[f] = (float)(gv / (1 + exp(-gv)) * uv);
            // h's relative error from f32 products (4e-6 × Σ|terms| each; SiLU scales gate's by ≤ 1 + |g|)
            eps[f] = 4e-6 * ((1 + fabs(gv)) * gm / fmax(fabs(gv), 1e-30) + um / fmax(fabs(uv), 1e-30)) + 1e-6;
            if (fabsf(h[f]) > fabsf(h[top])) top = f;
        }
        const double sh = quant_row(h, F, hq);
        const float inv = 1.0f / (float)sh;  // quant_row's own
        for (int f = 0; f < F; f++) slack[f] = code_slack(h[f] * inv, eps[f] + eps[top]);  // (+ the scale's)
        for (int d = 0; d < D; d++) {
            double acc = 0, mag = 0, sl = 0;
            for (int f = 0; f < F; f++) {
                const double wv = deq(dn, e * D + d, f), term = hq[f] * wv;
                acc += term, mag += fabs(term), sl += slack[f] * fabs(wv);
            }
            y[d] += p * sh * acc;
            tol[d] += p * sh * mag;
            amb[d] += p * sh * sl;
        }
    }
}

static void check_scheme(bool block) {
    unsigned s = block ? 11 : 5;
    static float router[NE * D], xn[N * D], out[N * D], one[D], perm_x[N * D], perm_out[N * D];
    for (int i = 0; i < NE * D; i++) router[i] = frand(&s);
    for (int i = 0; i < N * D; i++) xn[i] = frand(&s) * (1 + (i / D));  // tokens of different ranges
    struct weight wg = fp8_weight(NE * F, D, block, &s), wu = fp8_weight(NE * F, D, block, &s);
    struct weight wd = fp8_weight(NE * D, F, block, &s);
    struct weight wr = {DT_F32, NE, D, router, router, {0}, 0};
    struct backend *b = backend_cpu_create(2);
    struct moe_ffn_args a = {.out = out, .xn = xn, .router = &wr, .gate = &wg, .up = &wu, .down = &wd,
                             .n_experts = NE, .n_used = K, .norm_topk = false};
    b->ops->moe_ffn(b, &a, N);
    CHECK_OK(b->ops->sync(b));
    double worst = 0;
    for (int t = 0; t < N; t++) {
        static double y[D], tol[D], amb[D];
        reference(xn + t * D, router, &wg, &wu, &wd, y, tol, amb);
        for (int d = 0; d < D; d++) {
            double r = fmax(fabs(out[t * D + d] - y[d]) - amb[d], 0) / (tol[d] > 0 ? tol[d] : 1);
            worst = r > worst ? r : worst;
        }
    }
    if (getenv("TEST_VERBOSE")) fprintf(stderr, "worst %g\n", worst);
    // f32 sums against float64: the contract's 4e-6 × Σ|terms| per product, times two products in a row
    CHECK_MSG(worst < 1e-5, "%s: moe_ffn differs from the float64 reference by %g × Σ|terms|",
              block ? "blocks" : "channel", worst);
    // the same bits for a token alone and in the batch reversed
    for (int t = 0; t < N; t++) {
        struct moe_ffn_args a1 = a;
        a1.xn = xn + t * D, a1.out = one;
        b->ops->moe_ffn(b, &a1, 1);
        CHECK_OK(b->ops->sync(b));
        CHECK_MSG(!memcmp(one, out + t * D, sizeof one), "%s: token %d alone differs from its batch",
                  block ? "blocks" : "channel", t);
        memcpy(perm_x + (N - 1 - t) * D, xn + t * D, D * sizeof(float));
    }
    struct moe_ffn_args ap = a;
    ap.xn = perm_x, ap.out = perm_out;
    b->ops->moe_ffn(b, &ap, N);
    CHECK_OK(b->ops->sync(b));
    for (int t = 0; t < N; t++)
        CHECK_MSG(!memcmp(perm_out + (N - 1 - t) * D, out + t * D, D * sizeof(float)),
                  "%s: token %d differs in the reversed batch", block ? "blocks" : "channel", t);
    b->ops->destroy(b);
    free_weight(&wg), free_weight(&wu), free_weight(&wd);
}

TEST(fp8_experts_channel_match_float64) { check_scheme(false); }
TEST(fp8_experts_blocks_match_float64) { check_scheme(true); }

// 128x128 tiles over experts of 64 rows would straddle two experts: refused, naming the shapes.
TEST(fp8_expert_blocks_straddling_experts_are_refused) {
    enum { E = 4, FF = 64, DD = 128 };
    unsigned s = 3;
    static float router[E * DD], xn[DD], out[DD];
    for (int i = 0; i < E * DD; i++) router[i] = frand(&s);
    for (int i = 0; i < DD; i++) xn[i] = frand(&s);
    struct weight wg = fp8_weight(E * FF, DD, true, &s), wu = fp8_weight(E * FF, DD, true, &s);
    struct weight wd = fp8_weight(E * DD, FF, true, &s);
    struct weight wr = {DT_F32, E, DD, router, router, {0}, 0};
    struct backend *b = backend_cpu_create(1);
    const struct moe_ffn_args a = {.out = out, .xn = xn, .router = &wr, .gate = &wg, .up = &wu, .down = &wd,
                                   .n_experts = E, .n_used = 2};
    b->ops->moe_ffn(b, &a, 1);
    int rc = b->ops->sync(b);
    CHECK(rc == OCT_EUNSUP);
    CHECK_MSG(strstr(err_msg(), "64 rows each") && strstr(err_msg(), "128x128"), "message: %s", err_msg());
    b->ops->destroy(b);
    free_weight(&wg), free_weight(&wu), free_weight(&wd);
}

int main(void) {
    RUN(fp8_experts_channel_match_float64);
    RUN(fp8_experts_blocks_match_float64);
    RUN(fp8_expert_blocks_straddling_experts_are_refused);
    return test_summary("fp8_moe");
}
