// test_cpu_matmul.c — src/backend/cpu/cpu_matmul.c and cpu_quant.c: out = x·Wᵀ for F32/F16/BF16/
// Q8_0/Q4_0 weights against a double-precision reference on the widened weights (the block types'
// dequantizer is itself checked on hand-made blocks of known values; their x is the 8-bit quantized x
// of cpu_qdot.c), and batch invariance: a token's outputs are
// equal bit for bit whether it is multiplied alone (the decode GEMV that widens 16-bit rows in
// registers, four rows per pass) or inside a batch of 1..9 tokens (the prefill path), at any
// thread count, for row counts that are not multiples of 4 and column counts with scalar tails.
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
#include "../../src/backend/cpu/cpu_quant.h"
#include "../../src/base/half.h"
#include "../test.h"

static uint32_t rng = 12345;
static float frand(void) {  // in [-1, 1)
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

static float widen(const struct weight *w, int64_t i) {
    const uint16_t *h = w->data;
    if (dtype_block_elems(w->dtype) > 1) {  // the reference dequantizer, one row at a time
        static float row[8192];
        int64_t r = i / w->cols;
        quant_row_to_f32(w->dtype, (const char *)w->data + r * dtype_row_bytes(w->dtype, w->cols), row, w->cols);
        return row[i % w->cols];
    }
    if (w->dtype == DT_F16) return f16_to_f32(h[i]);
    if (w->dtype == DT_BF16) return bf16_to_f32(h[i]);
    return ((const float *)w->data)[i];
}

// One weight of rows x cols in dtype dt with random values; x has max_n tokens.
static int check_shape(struct backend *b, enum dtype dt, int rows, int cols, int max_n) {
    int bad = 0;
    size_t ne = (size_t)rows * cols;
    void *data = malloc(ne * 4);
    if (dtype_block_elems(dt) > 1) {  // random quants, scales 2^-8..2^-5 (f16 exponents 7..10)
        size_t bb = dtype_block_bytes(dt);
        uint8_t *p = data;
        for (size_t blk = 0; blk < ne / 32; blk++, p += bb) {
            for (size_t j = 0; j < bb; j++) p[j] = (uint8_t)(frand() * 128 + 128);
            uint16_t d = (uint16_t)(((7 + (p[0] & 3)) << 10) | (p[1] & 0x3FF));
            memcpy(p, &d, 2);
        }
    }
    float *x = malloc((size_t)max_n * cols * 4), *out1 = malloc((size_t)rows * 4);
    float *outn = malloc((size_t)max_n * rows * 4);
    for (size_t i = 0; dtype_block_elems(dt) == 1 && i < ne; i++) {
        float v = frand() * 0.5f;
        if (dt == DT_F16) ((uint16_t *)data)[i] = f32_to_f16(v);
        else if (dt == DT_BF16) ((uint16_t *)data)[i] = f32_to_bf16(v);
        else ((float *)data)[i] = v;
    }
    for (size_t i = 0; i < (size_t)max_n * cols; i++) x[i] = frand();
    struct weight w = {dt, rows, cols, data, NULL, {0}, 0};
    if (b->ops->weight_upload(b, &w) < 0) return 1;
    size_t qb = dtype_block_elems(dt) > 1 ? qx_bytes(dt, cols) : 0;
    char *qx = malloc(qb ? qb : 1);
    float *xq = malloc((size_t)cols * 4);
    for (int n = 1; n <= max_n; n++) {
        b->ops->matmul(b, outn, x, &w, n);
        if (b->ops->sync(b) != 0) return 1;
        for (int t = 0; t < n; t++) {
            b->ops->matmul(b, out1, x + (size_t)t * cols, &w, 1);
            const float *xt = x + (size_t)t * cols;
            if (qb) {  // block types multiply x quantized to 8 bits (cpu_qdot.c): the reference takes those values
                qx_quantize(dt, xt, cols, qx);
                struct qx_view v = qx_view(dt, qx, cols);
                for (int c = 0; c < cols; c++) xq[c] = v.d[c / qx_block(dt)] * (float)v.q[c];
                xt = xq;
            }
            for (int r = 0; r < rows; r++) {
                double ref = 0;
                for (int c = 0; c < cols; c++) ref += (double)xt[c] * widen(&w, (int64_t)r * cols + c);
                float got = outn[(size_t)t * rows + r];
                if (memcmp(&got, &out1[r], 4) != 0) bad++;  // batch invariance, bit for bit
                if (fabs(got - ref) > 1e-4 * (1 + sqrt((double)cols))) bad++;
            }
        }
    }
    if (bad) fprintf(stderr, "  %s rows %d cols %d: %d bad outputs\n", dtype_name(dt), rows, cols, bad);
    b->ops->weight_release(b, &w);
    free(data); free(x); free(out1); free(outn); free(qx); free(xq);
    return bad;
}

static const int shapes[][2] = {{1, 16}, {3, 7}, {4, 32}, {5, 48}, {7, 37}, {9, 64}, {33, 100}, {67, 256},
                                {130, 2048}, {18, 4099}, {6, 96}, {13, 4096}};

static void run_all(int threads) {
    struct backend *b = backend_cpu_create(threads);
    CHECK(b != NULL);
    if (!b) return;
    enum dtype dts[] = {DT_F32, DT_F16, DT_BF16, DT_Q8_0, DT_Q4_0};
    for (int d = 0; d < 5; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            if (shapes[s][1] % dtype_block_elems(dts[d])) continue;  // block types: whole blocks only
            CHECK_EQ_INT(check_shape(b, dts[d], shapes[s][0], shapes[s][1], shapes[s][0] > 100 ? 5 : 9), 0);
        }
    b->ops->destroy(b);
}

TEST(one_thread) { run_all(1); }
TEST(two_threads) { run_all(2); }
TEST(three_threads) { run_all(3); }

// A hand-made F16 and BF16 row whose dot product is exact in f32: 1, 2, 0.5, -3 ... against x = 1..n.
TEST(known_values) {
    struct backend *b = backend_cpu_create(2);
    CHECK(b != NULL);
    if (!b) return;
    enum { R = 6, C = 40 };
    uint16_t hf[R * C], hb[R * C];
    float x[C], out[R];
    double want[R] = {0};
    for (int c = 0; c < C; c++) x[c] = (float)(c + 1);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float v = (float)((r + c) % 5) - 2.0f;  // -2..2, exact in f16 and bf16
            hf[r * C + c] = f32_to_f16(v);
            hb[r * C + c] = f32_to_bf16(v);
            want[r] += v * x[c];
        }
    struct weight wf = {DT_F16, R, C, hf, NULL, {0}, 0}, wb = {DT_BF16, R, C, hb, NULL, {0}, 0};
    b->ops->weight_upload(b, &wf);
    b->ops->weight_upload(b, &wb);
    b->ops->matmul(b, out, x, &wf, 1);
    for (int r = 0; r < R; r++) CHECK_NEAR(out[r], want[r], 0);
    b->ops->matmul(b, out, x, &wb, 1);
    for (int r = 0; r < R; r++) CHECK_NEAR(out[r], want[r], 0);
    CHECK_EQ_INT(b->ops->sync(b), 0);
    b->ops->destroy(b);
}

// Hand-made blocks: Q8_0 with d = 0.5 and q[j] = j - 16; Q4_0 with d = 2 and byte j = j | (15 - j) << 4,
// so element j is 2(j - 8) and element 16 + j is 2(7 - j). Dequantized and multiplied exactly.
TEST(known_blocks) {
    uint8_t q8[2][34], q4[2][18];
    float want8[64], want4[64], got[64], x[64];
    for (int r = 0; r < 2; r++) {
        uint16_t d8 = 0x3800, d4 = 0x4000;  // 0.5 and 2.0 in f16
        memcpy(q8[r], &d8, 2);
        memcpy(q4[r], &d4, 2);
        for (int j = 0; j < 32; j++) { q8[r][2 + j] = (uint8_t)(int8_t)(j - 16 + r); want8[r * 32 + j] = 0.5f * (j - 16 + r); }
        for (int j = 0; j < 16; j++) {
            q4[r][2 + j] = (uint8_t)(j | (15 - j) << 4);
            want4[r * 32 + j] = 2.0f * (j - 8);
            want4[r * 32 + 16 + j] = 2.0f * (7 - j);
        }
    }
    q8_0_row_to_f32(q8, got, 64);
    int bad = 0;
    for (int i = 0; i < 64; i++) bad += got[i] != want8[i];
    q4_0_row_to_f32(q4, got, 64);
    for (int i = 0; i < 64; i++) bad += got[i] != want4[i];
    CHECK_EQ_INT(bad, 0);
    // the same through matmul: one row of 64 (two blocks), x = 1..64
    struct backend *b = backend_cpu_create(2);
    CHECK(b != NULL);
    if (!b) return;
    double s8 = 0, s4 = 0;
    // x = 1..64 but 127 last in each block: each block's largest is 127, so x quantizes to itself (cpu_qdot.c)
    for (int i = 0; i < 64; i++) {
        x[i] = i % 32 == 31 ? 127.0f : (float)(i + 1);
        s8 += want8[i] * x[i];
        s4 += want4[i] * x[i];
    }
    struct weight w8 = {DT_Q8_0, 1, 64, q8, NULL, {0}, 0}, w4 = {DT_Q4_0, 1, 64, q4, NULL, {0}, 0};
    b->ops->weight_upload(b, &w8);
    b->ops->weight_upload(b, &w4);
    b->ops->matmul(b, got, x, &w8, 1);
    CHECK_NEAR(got[0], s8, 0);
    b->ops->matmul(b, got, x, &w4, 1);
    CHECK_NEAR(got[0], s4, 0);
    CHECK_EQ_INT(b->ops->sync(b), 0);
    b->ops->destroy(b);
}

int main(void) {
    RUN(known_blocks);
    RUN(known_values);
    RUN(one_thread);
    RUN(two_threads);
    RUN(three_threads);
    return test_summary("cpu_matmul");
}
