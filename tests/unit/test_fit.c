// test_fit.c — least-squares fits and break-even (src/tools/fit.c) on synthetic data
// with known coefficients, including ITL-like magnitudes (slope 1e-5 ms/token).
#include <stdlib.h>

#include "../../src/base/check.h"
#include "../../src/tools/fit.h"
#include "../test.h"

static double rel(double got, double want) { return fabs(got - want) / fabs(want); }

// deterministic noise in [-amp, amp]
static double noise(unsigned *s, double amp) {
    *s = *s * 1103515245u + 12345u;
    return amp * (2.0 * ((*s >> 8) & 0xffff) / 65535.0 - 1.0);
}

TEST(line_exact) {
    double x[5] = {1, 2, 3, 4, 5}, y[5];
    for (int i = 0; i < 5; i++) y[i] = 2.5 * x[i] - 1.0;
    struct fit_line f;
    CHECK_OK(fit_line(x, y, 5, &f));
    CHECK_NEAR(f.slope, 2.5, 1e-12);
    CHECK_NEAR(f.intercept, -1.0, 1e-12);
    CHECK_NEAR(f.r2, 1.0, 1e-12);
    CHECK_EQ_INT(f.n, 5);
}

TEST(line_itl_like_noisy) {
    // the seed's H100 BF16 numbers: 4.37e-5 ms/token, 6.44 ms; lengths 256..131072
    double x[40], y[40];
    unsigned s = 7;
    for (int i = 0; i < 40; i++) {
        x[i] = 256.0 * pow(2.0, i / 4.4);
        y[i] = 4.37e-5 * x[i] + 6.44 + noise(&s, 0.002);
    }
    struct fit_line f;
    CHECK_OK(fit_line(x, y, 40, &f));
    CHECK_MSG(rel(f.slope, 4.37e-5) < 0.01, "slope %g", f.slope);
    CHECK_MSG(rel(f.intercept, 6.44) < 0.01, "intercept %g", f.intercept);
    CHECK(f.r2 > 0.99 && f.r2 <= 1.0);
}

// the slope's and intercept's standard errors, by hand: x 0..3, y 1 2 4 5 → slope 1.4, residuals ±0.1,
// ±0.3, SS_res 0.2, Sxx 5, mean(x) 1.5: se = sqrt(0.2 / 2 / 5); a line through two points has none
TEST(line_slope_se) {
    double x[4] = {0, 1, 2, 3}, y[4] = {1, 2, 4, 5}, y2[4];
    struct fit_line f, g;
    CHECK_OK(fit_line(x, y, 4, &f));
    CHECK_NEAR(f.slope, 1.4, 1e-12);
    CHECK_NEAR(f.slope_se, sqrt(0.02), 1e-12);
    CHECK_NEAR(f.intercept_se, sqrt(0.1 * (0.25 + 2.25 / 5)), 1e-12);  // SS_res / 2 · (1/n + mean(x)² / Sxx)
    for (int i = 0; i < 4; i++) y2[i] = 2 * y[i];
    CHECK_OK(fit_line(x, y2, 4, &g));
    CHECK_NEAR(fit_ratio_se(&f, &g), 0.5 * sqrt(2.0) * sqrt(0.02) / 1.4, 1e-12);  // ratio 0.5, both 10.1 % relative
    CHECK_OK(fit_line(x, y, 2, &f));
    CHECK(isnan(f.slope_se) && isnan(f.intercept_se) && isnan(fit_ratio_se(&f, &g)));
}

TEST(line_degenerate) {
    double x[3] = {5, 5, 5}, y[3] = {1, 2, 3};
    struct fit_line f;
    CHECK(fit_line(x, y, 3, &f) == OCT_EINVAL);
    CHECK(strstr(err_msg(), "distinct") != NULL);
    CHECK(fit_line(x, y, 1, &f) == OCT_EINVAL);
}

TEST(quad_exact_large_x) {
    // TTFT-like: a tiny quadratic term on lengths up to 131072
    double x[12], y[12];
    for (int i = 0; i < 12; i++) {
        x[i] = 256.0 * pow(2.0, i * 0.82);
        y[i] = 3e-7 * x[i] * x[i] + 0.05 * x[i] + 12.0;
    }
    struct fit_quad q;
    CHECK_OK(fit_quad(x, y, 12, &q));
    CHECK_MSG(rel(q.a, 3e-7) < 1e-6, "a %g", q.a);
    CHECK_MSG(rel(q.b, 0.05) < 1e-6, "b %g", q.b);
    CHECK_MSG(rel(q.c, 12.0) < 1e-4, "c %g", q.c);
    CHECK_NEAR(q.r2, 1.0, 1e-9);
}

TEST(quad_noisy) {
    double x[30], y[30];
    unsigned s = 99;
    for (int i = 0; i < 30; i++) {
        x[i] = 100.0 * (i + 1);
        y[i] = 2e-4 * x[i] * x[i] + 0.3 * x[i] + 50.0;
        y[i] *= 1.0 + noise(&s, 0.001);
    }
    struct fit_quad q;
    CHECK_OK(fit_quad(x, y, 30, &q));
    CHECK_MSG(rel(q.a, 2e-4) < 0.01, "a %g", q.a);
    CHECK_MSG(rel(q.b, 0.3) < 0.01, "b %g", q.b);
    CHECK(q.r2 > 0.999);
    double x2[2] = {1, 2}, y2[2] = {1, 2};
    CHECK(fit_quad(x2, y2, 2, &q) == OCT_EINVAL);
}

TEST(r2_values) {
    double y[4] = {1, 2, 3, 4}, good[4] = {1, 2, 3, 4}, mean[4] = {2.5, 2.5, 2.5, 2.5};
    CHECK_NEAR(fit_r2(y, good, 4), 1.0, 1e-12);
    CHECK_NEAR(fit_r2(y, mean, 4), 0.0, 1e-12);
    double c[3] = {2, 2, 2};
    CHECK_NEAR(fit_r2(c, c, 3), 1.0, 1e-12);
}

TEST(break_even_crossing) {
    // the seed's H100 Llama-3.1-8B: BF16 4.37e-5/6.44, FP8 2.37e-5/6.58 → ≈7000 tokens
    struct fit_line bf16 = {.slope = 4.37e-5, .intercept = 6.44, .r2 = 1, .n = 10}, fp8 = {.slope = 2.37e-5, .intercept = 6.58, .r2 = 1, .n = 10};
    struct fit_break b = fit_break_even(&bf16, &fp8);
    CHECK_EQ_INT(b.kind, FIT_BREAK_AT);
    CHECK_NEAR(b.x, 0.14 / 2.0e-5, 1e-6);
    char buf[32];
    CHECK(!strcmp(fit_break_str(b, buf, sizeof buf), "7000"));
    // the reverse comparison: bf16 vs fp8 as base grows faster → never
    b = fit_break_even(&fp8, &bf16);
    CHECK_EQ_INT(b.kind, FIT_BREAK_NEVER);
    CHECK(!strcmp(fit_break_str(b, buf, sizeof buf), "never"));
}

TEST(break_even_not_crossing) {
    // other below base everywhere and growing slower: always
    struct fit_line base = {.slope = 2.0, .intercept = 10.0, .r2 = 1, .n = 5}, other = {.slope = 1.0, .intercept = 5.0, .r2 = 1, .n = 5};
    CHECK_EQ_INT(fit_break_even(&base, &other).kind, FIT_BREAK_ALWAYS);
    char buf[32];
    CHECK(!strcmp(fit_break_str(fit_break_even(&base, &other), buf, sizeof buf), "always"));
    // other above base everywhere and growing faster: never
    CHECK_EQ_INT(fit_break_even(&other, &base).kind, FIT_BREAK_NEVER);
    // lines cross at negative x: other faster for all x >= 0
    struct fit_line o2 = {.slope = 1.0, .intercept = 9.0, .r2 = 1, .n = 5}, b2 = {.slope = 2.0, .intercept = 8.0, .r2 = 1, .n = 5};  // cross at x = 1
    CHECK_EQ_INT(fit_break_even(&b2, &o2).kind, FIT_BREAK_AT);
    struct fit_line o3 = {.slope = 1.0, .intercept = 7.0, .r2 = 1, .n = 5};                          // cross at x = -1
    CHECK_EQ_INT(fit_break_even(&b2, &o3).kind, FIT_BREAK_ALWAYS);
}

TEST(break_even_parallel) {
    struct fit_line base = {.slope = 1e-5, .intercept = 6.0, .r2 = 1, .n = 5}, lower = {.slope = 1e-5, .intercept = 5.9, .r2 = 1, .n = 5}, higher = {.slope = 1e-5, .intercept = 6.1, .r2 = 1, .n = 5};
    CHECK_EQ_INT(fit_break_even(&base, &lower).kind, FIT_BREAK_ALWAYS);
    CHECK_EQ_INT(fit_break_even(&base, &higher).kind, FIT_BREAK_NEVER);
    CHECK_EQ_INT(fit_break_even(&base, &base).kind, FIT_BREAK_ALWAYS);
    struct fit_line flat0 = {.slope = 0, .intercept = 1, .r2 = 1, .n = 2}, flat1 = {.slope = 0, .intercept = 2, .r2 = 1, .n = 2};
    CHECK_EQ_INT(fit_break_even(&flat0, &flat1).kind, FIT_BREAK_NEVER);
}

int main(void) {
    RUN(line_exact);
    RUN(line_itl_like_noisy);
    RUN(line_slope_se);
    RUN(line_degenerate);
    RUN(quad_exact_large_x);
    RUN(quad_noisy);
    RUN(r2_values);
    RUN(break_even_crossing);
    RUN(break_even_not_crossing);
    RUN(break_even_parallel);
    return test_summary("fit");
}
