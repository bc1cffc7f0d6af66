// test_fp8_weights.c — the CPU FP8-weight matmul (src/backend/cpu/cpu_fp8w.c) against an independent
// NumPy model (tests/golden/fp8_weights.json, made by tools/ref/ref_fp8_weights.py): for per-tensor,
// per-channel and 128×128-block weight scales, dynamic per-token and static per-tensor activation
// scales, and e4m3 or e5m2 activations, the activation codes and scales match bit for bit and the
// outputs to f32 rounding; a token's outputs do not depend on its batch or the thread count (the
// decode path's rows widened in registers equal the prefill path's, bit for bit); a weight
// without its scales is an error, not a silent result.
#include <jansson.h>
#include <math.h>
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/cpu/cpu_fp8w.h"
#include "../../src/backend/weight.h"
#include "../../src/base/check.h"
#include "../../src/base/fp8.h"
#include "../test.h"

static json_t *golden;

static void unhex(const char *s, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(s + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

static float *floats(json_t *a) {
    float *f = malloc(json_array_size(a) * sizeof(float) + 4);
    for (size_t i = 0; i < json_array_size(a); i++) f[i] = (float)json_number_value(json_array_get(a, i));
    return f;
}

static struct weight case_weight(json_t *c, const uint8_t *codes, int R, int C, int B, float **scale) {
    struct weight w = {DT_E4M3, R, C, codes, NULL, {0}, 0};
    const char *ws = json_string_value(json_object_get(c, "wscale"));
    w.fp8.wscale = !strcmp(ws, "tensor") ? WSCALE_TENSOR : !strcmp(ws, "channel") ? WSCALE_CHANNEL : WSCALE_BLOCK;
    w.fp8.block = B;
    *scale = floats(json_object_get(c, "scale"));
    w.fp8.scale = *scale;
    w.fp8.ascale = !strcmp(json_string_value(json_object_get(c, "ascale")), "static") ? ASCALE_STATIC_TENSOR
                                                                                       : ASCALE_DYNAMIC_TOKEN;
    w.fp8.input_scale = (float)json_number_value(json_object_get(c, "input_scale"));
    w.fp8.act_e5m2 = !strcmp(json_string_value(json_object_get(c, "act_dtype")), "e5m2");
    return w;
}

TEST(quant_rows_match_reference) {
    int R = (int)json_integer_value(json_object_get(golden, "rows"));
    int C = (int)json_integer_value(json_object_get(golden, "cols")), N = (int)json_integer_value(json_object_get(golden, "n"));
    float *x = floats(json_object_get(golden, "x")), *xq = malloc((size_t)C * 4);
    uint8_t *want = malloc((size_t)N * C);
    json_t *cases = json_object_get(golden, "cases");
    for (size_t k = 0; k < json_array_size(cases); k++) {
        json_t *c = json_array_get(cases, k);
        float *scale;
        struct weight w = case_weight(c, NULL, R, C, 128, &scale);
        unhex(json_string_value(json_object_get(c, "xq_codes")), want, (size_t)N * C);
        const float *tab = w.fp8.act_e5m2 ? fp8_e5m2_table : fp8_e4m3_table;
        int bad = 0;
        for (int t = 0; t < N; t++) {
            float s = fp8w_quant_row(x + (size_t)t * C, C, &w.fp8, xq);
            float ws = (float)json_number_value(json_array_get(json_object_get(c, "x_scale"), (size_t)t));
            CHECK_MSG(s == ws, "%s token %d: scale %.9g vs %.9g", json_string_value(json_object_get(c, "name")), t, s,
                      ws);
            for (int i = 0; i < C; i++) bad += memcmp(&xq[i], &tab[want[(size_t)t * C + i]], 4) != 0;
        }
        CHECK_MSG(bad == 0, "%s: %d activation codes differ", json_string_value(json_object_get(c, "name")), bad);
        free(scale);
    }
    free(x); free(xq); free(want);
}

static void run_cases(int threads) {
    struct backend *b = backend_cpu_create(threads);
    int R = (int)json_integer_value(json_object_get(golden, "rows"));
    int C = (int)json_integer_value(json_object_get(golden, "cols")), N = (int)json_integer_value(json_object_get(golden, "n"));
    int B = (int)json_integer_value(json_object_get(golden, "block"));
    float *x = floats(json_object_get(golden, "x")), *out = malloc((size_t)N * R * 4), *one = malloc((size_t)R * 4);
    uint8_t *codes = malloc((size_t)R * C);
    unhex(json_string_value(json_object_get(golden, "w_codes")), codes, (size_t)R * C);
    json_t *cases = json_object_get(golden, "cases");
    for (size_t k = 0; k < json_array_size(cases); k++) {
        json_t *c = json_array_get(cases, k);
        const char *name = json_string_value(json_object_get(c, "name"));
        float *scale;
        struct weight w = case_weight(c, codes, R, C, B, &scale);
        CHECK(b->ops->weight_upload(b, &w) == 0);
        b->ops->matmul(b, out, x, &w, N);
        CHECK_OK(b->ops->sync(b));
        json_t *want = json_object_get(c, "out"), *wabs = json_object_get(c, "out_abs");
        int bad = 0, noninv = 0;
        for (int i = 0; i < N * R; i++) {
            double ref = json_number_value(json_array_get(want, (size_t)i));
            double tol = 4e-6 * json_number_value(json_array_get(wabs, (size_t)i)) + 1e-30;
            if (!(fabs(out[i] - ref) <= tol)) {
                if (bad++ < 3) fprintf(stderr, "  %s [%d]: %.9g vs %.9g (tol %g)\n", name, i, out[i], ref, tol);
            }
        }
        CHECK_MSG(bad == 0, "%s: %d of %d outputs off the reference", name, bad, N * R);
        for (int t = 0; t < N; t++) {  // alone (decode) equals inside the batch, bit for bit
            b->ops->matmul(b, one, x + (size_t)t * C, &w, 1);
            noninv += memcmp(one, out + (size_t)t * R, (size_t)R * 4) != 0;
        }
        CHECK_MSG(noninv == 0, "%s: %d tokens differ alone vs batched", name, noninv);
        free(scale);
    }
    free(x); free(out); free(one); free(codes);
    b->ops->destroy(b);
}

TEST(matmul_matches_reference_1_thread) { run_cases(1); }
TEST(matmul_matches_reference_3_threads) { run_cases(3); }

// The activations' rounding (vectorised on AVX-512) gives what the reference codec's table gives, bit for
// bit (NaN as NaN): every 61st float bit pattern of both signs, every pattern within 2^16 of the
// boundaries (e4m3's subnormals, 2^-6, 448, inf), and the ties of every exponent and both parities
// with their neighbours, at a static scale of 1 (so x · 1/s is x).
TEST(activation_rounding_equals_the_codec) {
    enum { L = 4096 };
    float *x = malloc(sizeof(float) * L), *xq = malloc(sizeof(float) * L);
    struct weight_fp8 f = {.wscale = WSCALE_TENSOR, .ascale = ASCALE_STATIC_TENSOR, .input_scale = 1.0f};
    const uint32_t edges[] = {0x3B000000u, 0x3B800000u, 0x3C800000u, 0x43E00000u, 0x43E80000u, 0x7F800000u};
    long bad = 0, checked = 0;
    for (int phase = 0; phase < 3; phase++) {
        const uint64_t n_edge = 2 * sizeof edges / sizeof edges[0] * 65536 * 2;
        uint64_t u = 0, end = phase == 0 ? (1ull << 32) : phase == 1 ? n_edge : 2 * 256 * 8 * 3;
        while (u < end) {
            int m = 0;
            for (; m < L && u < end; m++, u += phase == 0 ? 61 : 1) {
                uint32_t b;
                if (phase == 0) b = (uint32_t)u;
                else if (phase == 2) {  // sign, exponent, 3 kept bits, the rest 0x7FFFF / 0x80000 / 0x80001
                    const uint32_t rest = 0x7FFFFu + (uint32_t)(u % 3), kept = (uint32_t)(u / 3 % 8);
                    b = (uint32_t)(u / 3 / 8 / 256) << 31 | (uint32_t)(u / 3 / 8 % 256) << 23 | kept << 20 | rest;
                } else {  // edge e, sign, offset -65536 .. 65535
                    const uint64_t per = 2 * 65536;
                    const uint32_t e = edges[(u / per) % (sizeof edges / sizeof edges[0])];
                    const uint32_t sg = (uint32_t)(u / (per * (sizeof edges / sizeof edges[0]))) << 31;
                    b = sg | ((e + (uint32_t)(u % per) - 65536u) & 0x7FFFFFFFu);
                }
                memcpy(&x[m], &b, 4);
            }
            bad += fp8w_quant_row(x, m, &f, xq) != 1.0f;
            for (int i = 0; i < m; i++) {
                const float want = fp8_e4m3_table[fp8_e4m3_from_f32(x[i])];
                bad += isnan(want) ? !isnan(xq[i]) : memcmp(&want, &xq[i], 4) != 0;
            }
            checked += m;
        }
    }
    CHECK_MSG(bad == 0 && checked > 70000000, "%ld of %ld roundings differ from the codec", bad, checked);
    free(x); free(xq);
}

// Fewer than 4 tokens take the rows widened in registers (cpu_fp8w.c's gemv8), more the rows widened through
// fp8_e4m3_table once for all tokens: the same bits either way, over every finite code (subnormals, -0),
// 4-row groups and single rows, the 32-, 16-, 8- and 1-element steps of a row (318 columns), every scale
// layout, e4m3 and e5m2 activations. A weight holding a NaN code is refused at upload, naming its row.
TEST(decode_rows_equal_the_widened_rows) {
    enum { R = 14, C = 318, N = 5 };
    uint8_t *codes = malloc((size_t)R * C);
    float x[N * C], out[N * R], one[2 * R], scale[R];
    for (int r = 0; r < R; r++) {
        scale[r] = 0.5f + (float)r / 16;
        for (int k = 0; k < C; k++) {
            uint8_t v = (uint8_t)((r * 37 + k * 11) % 256);
            codes[r * C + k] = (v & 0x7F) == 0x7F ? v ^ 1 : v;
        }
    }
    for (int i = 0; i < N * C; i++) x[i] = (float)((i * 7919) % 4001) / 1000.0f - 2.0f;
    x[7] = 1e-6f;  // (a token whose small values quantize to subnormal codes beside its largest)
    struct backend *b = backend_cpu_create(2);
    for (int ws = WSCALE_TENSOR; ws <= WSCALE_BLOCK; ws++)
        for (int e5 = 0; e5 < 2; e5++) {
            struct weight w = {DT_E4M3, R, C, codes, NULL, {0}, 0};
            w.fp8 = (struct weight_fp8){.wscale = (enum wscale)ws, .block = 128, .scale = scale,
                                        .ascale = ASCALE_DYNAMIC_TOKEN, .act_e5m2 = e5};
            CHECK(b->ops->weight_upload(b, &w) == 0);
            b->ops->matmul(b, out, x, &w, N);
            int bad = 0;
            for (int t = 0; t + 2 <= N; t += 2) {
                b->ops->matmul(b, one, x + (size_t)t * C, &w, 2);
                CHECK_OK(b->ops->sync(b));
                for (int u = 0; u < 2 * R; u++) bad += memcmp(&one[u], &out[t * R + u], sizeof(float)) != 0;
            }
            CHECK_MSG(bad == 0, "wscale %d, e5m2 %d: %d outputs differ between the two widenings", ws, e5, bad);
        }
    codes[11 * C + 200] = 0xFF;  // a NaN code
    struct weight w = {DT_E4M3, R, C, codes, NULL, {0}, 0};
    w.fp8 = (struct weight_fp8){.wscale = WSCALE_CHANNEL, .scale = scale, .ascale = ASCALE_DYNAMIC_TOKEN};
    CHECK(b->ops->weight_upload(b, &w) < 0 && strstr(err_msg(), "NaN code (row 11)"));
    b->ops->destroy(b);
    free(codes);
}

// Block scales over several block rows and column tiles, and per-channel scales: 64×64 blocks of a
// 150×300 weight (the last tile 44 columns, the last block row 22 rows), and 40×40 blocks of a 150×310 one
// (tiles that split the widening's 16- and 32-column steps, a 16-column step and a scalar tail after the
// last 32). Prefill of 9 tokens (cpu_gemm.c, block weights widened to f32 with their scales, per-channel
// codes to bf16 once for the tile's token groups, rows split between threads) equals each token alone
// (the register-widened rows), bit for bit; and a block weight's outputs are s_x·Σ x̂·ŵ·s_w to f32
// rounding (4e-6 of the sum of the terms' magnitudes, computed in double).
TEST(block_prefill_equals_decode) {
    enum { R = 150, CMAX = 310, N = 9 };
    const int shapes[2][2] = {{64, 300}, {40, 310}};  // (block, cols)
    uint8_t *codes = malloc((size_t)R * CMAX);
    float *x = malloc(sizeof(float) * N * CMAX), *xq = malloc(sizeof(float) * CMAX),
          *out = malloc(sizeof(float) * N * R), one[R], scale[R];  // (R >= the blocks' count)
    for (int i = 0; i < R; i++) scale[i] = 0.25f + (float)(i % 40) / 8;
    struct backend *b = backend_cpu_create(2);
    for (int sh = 0; sh < 2; sh++) {
        const int B = shapes[sh][0], C = shapes[sh][1], nbc = (C + B - 1) / B;
        for (int i = 0; i < R * C; i++) {
            uint8_t v = (uint8_t)((i * 53 + i / C) % 256);
            codes[i] = (v & 0x7F) == 0x7F ? v ^ 1 : v;
        }
        for (int i = 0; i < N * C; i++) x[i] = (float)((i * 104729) % 3001) / 700.0f - 2.1f;
        for (int ws = WSCALE_CHANNEL; ws <= WSCALE_BLOCK; ws++) {  // (per channel: whole rows, the same tokens)
            struct weight w = {DT_E4M3, R, C, codes, NULL, {0}, 0};
            w.fp8 = (struct weight_fp8){.wscale = (enum wscale)ws, .block = B, .scale = scale,
                                        .ascale = ASCALE_DYNAMIC_TOKEN};
            CHECK(b->ops->weight_upload(b, &w) == 0);
            b->ops->matmul(b, out, x, &w, N);
            int bad = 0, off = 0;
            for (int t = 0; t < N; t++) {
                b->ops->matmul(b, one, x + (size_t)t * C, &w, 1);
                CHECK_OK(b->ops->sync(b));
                for (int r = 0; r < R; r++) bad += memcmp(&one[r], &out[t * R + r], sizeof(float)) != 0;
                if (ws != WSCALE_BLOCK) continue;
                const double sx = fp8w_quant_row(x + (size_t)t * C, C, &w.fp8, xq);
                for (int r = 0; r < R; r++) {
                    double ref = 0, mag = 0;
                    for (int i = 0; i < C; i++) {
                        const double term = sx * xq[i] * fp8_e4m3_table[codes[(size_t)r * C + i]] *
                                            scale[(r / B) * nbc + i / B];
                        ref += term, mag += fabs(term);
                    }
                    off += !(fabs(out[t * R + r] - ref) <= 4e-6 * mag + 1e-30);
                }
            }
            CHECK_MSG(bad == 0, "block %d, wscale %d: %d of %d outputs differ between prefill and decode", B, ws, bad,
                      N * R);
            CHECK_MSG(off == 0, "block %d: %d of %d outputs off s_x·Σ x̂·ŵ·s_w", B, off, N * R);
        }
    }
    b->ops->destroy(b);
    free(codes); free(x); free(xq); free(out);
}

TEST(missing_scales_are_an_error) {
    struct backend *b = backend_cpu_create(1);
    uint8_t codes[16] = {0x38};
    float x[16] = {1}, out[1];
    struct weight w = {DT_E4M3, 1, 16, codes, NULL, {0}, 0};
    b->ops->weight_upload(b, &w);
    b->ops->matmul(b, out, x, &w, 1);
    CHECK(b->ops->sync(b) < 0);
    CHECK(strstr(err_msg(), "without its scales") != NULL);
    float one = 1;
    w.fp8.scale = &one;
    w.fp8.ascale = ASCALE_STATIC_TENSOR;  // static with no input_scale
    b->ops->matmul(b, out, x, &w, 1);
    CHECK(b->ops->sync(b) < 0);
    w.fp8.input_scale = 1;
    b->ops->matmul(b, out, x, &w, 1);
    CHECK_OK(b->ops->sync(b));
    CHECK(out[0] == 1.0f);  // 1 · e4m3(0x38) = 1 · 1.0
    b->ops->destroy(b);
}

int main(void) {
    json_error_t je;
    golden = json_load_file("tests/golden/fp8_weights.json", 0, &je);
    if (!golden) { fprintf(stderr, "cannot read tests/golden/fp8_weights.json: %s\n", je.text); return 1; }
    RUN(quant_rows_match_reference);
    RUN(activation_rounding_equals_the_codec);
    RUN(matmul_matches_reference_1_thread);
    RUN(matmul_matches_reference_3_threads);
    RUN(decode_rows_equal_the_widened_rows);
    RUN(block_prefill_equals_decode);
    RUN(missing_scales_are_an_error);
    json_decref(golden);
    return test_summary("fp8_weights");
}
