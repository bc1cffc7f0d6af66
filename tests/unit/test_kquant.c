// test_kquant.c — the GGUF block types' CPU kernels (src/backend/cpu/cpu_kquant.c, cpu_qdot.c): hand-made
// Q4_K, Q5_K and Q6_K super-blocks of known values (every 6-bit scale and min packing case, negative Q6_K
// scales) through the reference dequantizer; the integer dot products against 8-bit x on every compiled
// path (AVX-512, AVX2, C) give the same bits, close to a double product of the dequantized values; the CPU
// matmul of K-quant weights equals a double-precision reference on the quantized x, decode equal to prefill.
// Two more modes serve tests/cli/test_quant_gguf.sh (the NumPy side lives there):
//   test_kquant --blocks TYPE RAW F32 X DOTS   checks the blocks in file RAW (ggml type TYPE) against the
//                                       NumPy dequantizer's float32 values in file F32, and rows of 4 blocks
//                                       times X against NumPy's qdot values in DOTS, bit for bit;
//   test_kquant --logits MODEL ID...    prints the logits of the last of the token ids as JSON;
//   test_kquant --decode-equals-prefill MODEL ID...   fails unless each position's logits from one prefill
//                                       equal those of feeding the ids one at a time, bit for bit.
// Also: a backend that refuses block-type weights at upload (as the CUDA backend does) fails
// forward_init with an error naming the tensor (blk.L.NAME) and the dtype.
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/cpu/cpu.h"
#include "../../src/backend/cpu/cpu_quant.h"
#include "../../src/base/check.h"
#include "../../src/base/half.h"
#include "../../src/engine/runner.h"
#include "../../src/model/forward.h"
#include "../../src/model/model.h"
#include "../test.h"

static uint32_t rng = 777;
static uint32_t next(void) { return rng = rng * 1664525u + 1013904223u; }
static float frand(void) { return (float)(next() >> 8) / (float)(1u << 23) - 1.0f; }  // [-1, 1)

static void put_f16(uint8_t *p, float v) {
    uint16_t h = f32_to_f16(v);
    memcpy(p, &h, 2);
}

// The 12 scale bytes of 8 6-bit scales and mins, packed by the layout in cpu_kquant.c.
static void pack_k4_scales(uint8_t *s, const int *sc, const int *m) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

static const int SC[8] = {1, 63, 17, 40, 33, 50, 7, 62}, MN[8] = {0, 5, 63, 32, 48, 1, 60, 16};

// Q4_K and Q5_K: d = 0.25, dmin = 0.125, q[i] = (7i + 3) mod 16 (or 32), so w = 0.25·sc·q − 0.125·m, exact.
static void known_k45(int q5) {
    uint8_t blk[176] = {0};
    float want[QK_K], got[QK_K];
    int qmax = q5 ? 32 : 16;
    put_f16(blk, 0.25f);
    put_f16(blk + 2, 0.125f);
    pack_k4_scales(blk + 4, SC, MN);
    uint8_t *qh = blk + 16, *qs = blk + (q5 ? 48 : 16);
    for (int i = 0; i < QK_K; i++) {
        int s = i / 32, l = i % 32, q = (7 * i + 3) % qmax;
        qs[32 * (s / 2) + l] |= (uint8_t)((q & 15) << 4 * (s % 2));
        if (q5) qh[l] |= (uint8_t)((q >> 4) << s);
        want[i] = 0.25f * (float)SC[s] * (float)q - 0.125f * (float)MN[s];
    }
    if (q5) q5_k_row_to_f32(blk, got, QK_K);
    else q4_k_row_to_f32(blk, got, QK_K);
    int bad = 0;
    for (int i = 0; i < QK_K; i++) bad += got[i] != want[i];
    CHECK_EQ_INT(bad, 0);
}

TEST(known_q4_k) { known_k45(0); }
TEST(known_q5_k) { known_k45(1); }

// Q6_K: d = 0.5, scales[g] = 16g − 128 + 3 (negative and positive), q[i] = (5i mod 64) − 32.
TEST(known_q6_k) {
    uint8_t blk[210] = {0};
    float want[QK_K], got[QK_K];
    int8_t sc[16];
    for (int g = 0; g < 16; g++) sc[g] = (int8_t)(16 * g - 128 + 3);
    memcpy(blk + 192, sc, 16);
    put_f16(blk + 208, 0.5f);
    for (int i = 0; i < QK_K; i++) {
        int h = i / 128, j = (i % 128) / 32, l = i % 32, q = (5 * i) % 64;
        blk[64 * h + 32 * (j % 2) + l] |= (uint8_t)((q & 15) << 4 * (j / 2));
        blk[128 + 32 * h + l] |= (uint8_t)((q >> 4) << 2 * j);
        want[i] = 0.5f * (float)sc[i / 16] * (float)(q - 32);
    }
    q6_k_row_to_f32(blk, got, QK_K);
    int bad = 0;
    for (int i = 0; i < QK_K; i++) bad += got[i] != want[i];
    CHECK_EQ_INT(bad, 0);
}

// Random super-blocks of t: random bytes, with the f16 scales set to finite values 2^-9..2^-6.
static void random_blocks(enum dtype t, uint8_t *p, int64_t n_blocks) {
    size_t bb = dtype_block_bytes(t);
    for (int64_t b = 0; b < n_blocks; b++, p += bb) {
        for (size_t j = 0; j < bb; j++) p[j] = (uint8_t)next();
        if (t == DT_Q6_K) put_f16(p + 208, ldexpf(1.0f + frand() * 0.5f, -7 - (int)(next() % 3)));
        else {
            put_f16(p, ldexpf(1.0f + frand() * 0.5f, -7 - (int)(next() % 3)));
            put_f16(p + 2, ldexpf(1.0f + frand() * 0.5f, -8 - (int)(next() % 3)));
        }
    }
}

static const enum dtype KTYPES[3] = {DT_Q4_K, DT_Q5_K, DT_Q6_K};
static const enum dtype QTYPES[5] = {DT_Q8_0, DT_Q4_0, DT_Q4_K, DT_Q5_K, DT_Q6_K};

// xh[0..n) = the quantized x as numbers (d·q), in double.
static void qx_values(enum dtype t, const void *qx, int n, double *xh) {
    struct qx_view v = qx_view(t, qx, n);
    for (int i = 0; i < n; i++) xh[i] = (double)v.d[i / qx_block(t)] * v.q[i];
}

// The integer dot products (1..4 rows, every block type, odd and even block counts): x quantizes to the
// same bytes and every compiled path (AVX-512, AVX2, C) gives the C path's bits; those are the double
// product of the dequantized rows and the quantized x within f32 rounding, and the product with x itself
// within the quantization's bound (Σ |w|·d/2); the 16-element sums of q are right.
TEST(dot_paths) {
    for (int ti = 0; ti < 5; ti++)
        for (int nb = 1; nb <= 5; nb += 2) {
            enum dtype t = QTYPES[ti];
            int bs = qx_block(t), n = nb * bs;
            size_t rb = dtype_row_bytes(t, n), qb = qx_bytes(t, n);
            uint8_t *w = malloc(4 * rb);
            float *x = malloc((size_t)n * 4), *row = malloc((size_t)n * 4);
            double *xh = malloc((size_t)n * 8);
            char *qx = malloc(qb), *qp = malloc(qb);
            random_blocks(t, w, 4 * (int64_t)rb / (int64_t)dtype_block_bytes(t));
            for (int i = 0; i < n; i++) x[i] = frand() * (i < bs ? 1.0f : 3.0f);
            if (nb > 1) memset(x + bs, 0, (size_t)bs * 4);  // a block of zeros: d = 0
            memset(qx, 0, qb);
            qx_quantize_path(QX_C, t, x, n, qx);
            struct qx_view v = qx_view(t, qx, n);
            int bad_sum = 0;
            for (int g = 0; bs == QK_K && g < n / 16; g++) {
                int s = 0;
                for (int i = 0; i < 16; i++) s += v.q[16 * g + i];
                bad_sum += s != v.bsum[g];
            }
            CHECK_EQ_INT(bad_sum, 0);
            qx_values(t, qx, n, xh);
            for (int path = QX_C; path <= QX_AVX512; path++) {
                if (!qx_has_path(path)) continue;
                memset(qp, 0, qb);
                qx_quantize_path(path, t, x, n, qp);
                CHECK_MSG(memcmp(qp, qx, qb) == 0, "%s n %d: path %d quantizes x differently", dtype_name(t), n, path);
                for (int nr = 1; nr <= 4; nr++) {
                    float r[4], want[4];
                    qx_dot_rows_path(QX_C, t, w, rb, nr, qx, n, want);
                    qx_dot_rows_path(path, t, w, rb, nr, qx, n, r);
                    for (int k = 0; k < nr; k++) {
                        CHECK_MSG(memcmp(&want[k], &r[k], 4) == 0, "%s n %d rows %d path %d: row %d %.9g vs C %.9g",
                                  dtype_name(t), n, nr, path, k, r[k], want[k]);
                        if (path != QX_C) continue;
                        quant_row_to_f32(t, w + k * rb, row, n);
                        double ref = 0, mag = 0, exact = 0, bound = 0;
                        for (int i = 0; i < n; i++) {
                            ref += row[i] * xh[i];
                            mag += fabs(row[i] * xh[i]);
                            exact += (double)row[i] * x[i];
                            bound += fabs(row[i]) * v.d[i / bs] * 0.5;
                        }
                        CHECK_MSG(fabs(r[k] - ref) <= 1e-5 * mag + 1e-30, "%s n %d: %.9g vs %.9g (quantized x)",
                                  dtype_name(t), n, r[k], ref);
                        CHECK_MSG(fabs(r[k] - exact) <= bound * 1.001 + 1e-5 * mag + 1e-30, "%s n %d: %.9g vs %.9g "
                                  "(x), bound %.3g", dtype_name(t), n, r[k], exact, bound);
                    }
                }
            }
            free(w); free(x); free(row); free(xh); free(qx); free(qp);
        }
}

// Hand-made: x whose blocks have amax 127 quantizes to itself (d = 1), so a Q8_0 row times it is exact.
TEST(known_q8_0_dot) {
    uint8_t w[2 * 34];
    float x[64], r;
    double want = 0;
    for (int b = 0; b < 2; b++) {
        put_f16(w + 34 * b, 0.25f * (float)(b + 1));
        for (int j = 0; j < 32; j++) {
            int q = (int)(next() % 255) - 127;
            w[34 * b + 2 + j] = (uint8_t)(int8_t)q;
            x[32 * b + j] = j == 5 ? -127.0f : (float)((int)(next() % 255) - 127);
            want += 0.25 * (b + 1) * q * x[32 * b + j];
        }
    }
    char qx[512];
    CHECK(qx_bytes(DT_Q8_0, 64) <= sizeof qx);
    qx_quantize(DT_Q8_0, x, 64, qx);
    qx_dot_rows(DT_Q8_0, w, 0, 1, qx, 64, &r);
    CHECK_NEAR(r, want, 0);
}

// The CPU matmul on K-quant weights: each token's outputs equal a double reference on the dequantized
// weights and the quantized x, and are the same bits whether the token is decoded alone (n < 4) or in a
// prefill batch.
TEST(matmul) {
    static const int shapes[][2] = {{1, 256}, {5, 512}, {67, 768}, {130, 2048}};
    struct backend *b = backend_cpu_create(2);
    CHECK(b != NULL);
    if (!b) return;
    for (int ti = 0; ti < 3; ti++)
        for (int s = 0; s < 4; s++) {
            enum dtype t = KTYPES[ti];
            int rows = shapes[s][0], cols = shapes[s][1], N = 6;
            size_t rb = dtype_row_bytes(t, cols);
            uint8_t *data = malloc((size_t)rows * rb);
            random_blocks(t, data, (int64_t)rows * cols / QK_K);
            float *x = malloc((size_t)N * cols * 4), *one = malloc((size_t)rows * 4), *all = malloc((size_t)N * rows * 4);
            float *deq = malloc((size_t)cols * 4);
            double *xh = malloc((size_t)cols * 8);
            char *qx = malloc(qx_bytes(t, cols));
            for (int i = 0; i < N * cols; i++) x[i] = frand();
            struct weight w = {t, rows, cols, data, NULL, {0}, 0};
            b->ops->weight_upload(b, &w);
            b->ops->matmul(b, all, x, &w, N);
            int bad = 0, inv = 0;
            for (int tk = 0; tk < N; tk++) {
                b->ops->matmul(b, one, x + (size_t)tk * cols, &w, 1);
                qx_quantize(t, x + (size_t)tk * cols, cols, qx);
                qx_values(t, qx, cols, xh);
                for (int r = 0; r < rows; r++) {
                    quant_row_to_f32(t, data + r * rb, deq, cols);
                    double ref = 0, mag = 0;
                    for (int c = 0; c < cols; c++) {
                        ref += xh[c] * deq[c];
                        mag += fabs(xh[c] * deq[c]);
                    }
                    inv += memcmp(&one[r], &all[(size_t)tk * rows + r], 4) != 0;
                    bad += fabs(one[r] - ref) > 1e-5 * mag + 1e-30;
                }
            }
            CHECK_EQ_INT(b->ops->sync(b), 0);
            CHECK_MSG(bad == 0 && inv == 0, "%s [%d x %d]: %d outputs off the reference, %d differ decode vs prefill",
                      dtype_name(t), rows, cols, bad, inv);
            b->ops->weight_release(b, &w);
            free(data); free(x); free(one); free(all); free(deq); free(xh); free(qx);
        }
    b->ops->destroy(b);
}

static int refuse_blocks(struct backend *b, struct weight *w) {
    if (dtype_is_block(w->dtype))
        return err_set(OCT_EUNSUP, "weights of dtype %s are not supported", dtype_name(w->dtype));
    w->dev = (void *)w->data;
    return OCT_OK;
}

// dummy:tiny with layer 1's ffn_down replaced by Q6_K blocks, on the CPU table with that upload.
TEST(upload_refusal_names_tensor) {
    struct model *m = NULL;
    CHECK_OK(model_load(&m, "dummy:tiny"));
    struct backend *b = backend_cpu_create(1);
    if (!m || !b) return;
    struct weight *wd = &m->layers[1].w_down;
    size_t rb = dtype_row_bytes(DT_Q6_K, wd->cols);
    CHECK(rb > 0);
    uint8_t *blocks = calloc((size_t)wd->rows, rb ? rb : 1);
    wd->dtype = DT_Q6_K;
    wd->data = blocks;
    struct backend_ops ops = *b->ops;
    ops.weight_upload = refuse_blocks;
    const struct backend_ops *cpu_ops = b->ops;
    b->ops = &ops;
    struct forward f;
    int rc = forward_init(&f, m, b, 16, 1);
    CHECK(rc == OCT_EUNSUP);
    CHECK_MSG(strstr(err_msg(), "tensor blk.1.ffn_down") && strstr(err_msg(), "q6_k"), "%s", err_msg());
    if (rc == OCT_OK) forward_free(&f);
    b->ops = cpu_ops;
    b->ops->destroy(b);
    model_free(m);
    free(blocks);
}

static void *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(len > 0 ? (size_t)len : 1);
    *n = p && fread(p, 1, (size_t)len, f) == (size_t)len ? (size_t)len : 0;
    fclose(f);
    return p;
}

// --blocks TYPE RAW F32 X DOTS: each block of RAW dequantizes to F32's values, bit for bit, and each run of 4
// blocks as a row times X (4 blocks' worth of floats) gives DOTS' value (NumPy's qdot), bit for bit, on every
// compiled path.
static int check_blocks(const char *type, const char *raw_path, const char *f32_path, const char *x_path,
                        const char *dots_path) {
    static const struct { const char *name; enum dtype t; } types[] = {
        {"q8_0", DT_Q8_0}, {"q4_0", DT_Q4_0}, {"q4_k", DT_Q4_K}, {"q5_k", DT_Q5_K}, {"q6_k", DT_Q6_K}};
    enum dtype t = DT_COUNT;
    for (int i = 0; i < 5; i++) if (!strcmp(type, types[i].name)) t = types[i].t;
    size_t nr = 0, nf = 0, nx = 0, nd = 0;
    uint8_t *raw = read_all(raw_path, &nr);
    float *want = read_all(f32_path, &nf), *x = read_all(x_path, &nx), *dots = read_all(dots_path, &nd);
    size_t be = (size_t)dtype_block_elems(t), bb = dtype_block_bytes(t);
    int ok = t != DT_COUNT && raw && want && x && dots && nr && nr % bb == 0 && nf == nr / bb * be * 4 &&
             nx == 4 * be * 4 && nd == nr / bb / 4 * 4;
    CHECK_MSG(ok, "%s: %s (%zu bytes), %s (%zu), %s (%zu), %s (%zu)", type, raw_path, nr, f32_path, nf, x_path, nx,
              dots_path, nd);
    if (!ok) return test_summary("kquant_blocks");
    size_t n_blocks = nr / bb, bad = 0, bad_dot = 0;
    float got[QK_K];
    char *qx = malloc(qx_bytes(t, (int)(4 * be)));
    for (size_t b = 0; b < n_blocks; b++) {
        quant_row_to_f32(t, raw + b * bb, got, (int64_t)be);
        bad += memcmp(got, want + b * be, be * 4) != 0;
    }
    for (int path = QX_C; path <= QX_AVX512; path++) {
        if (!qx_has_path(path)) continue;
        qx_quantize_path(path, t, x, (int)(4 * be), qx);
        for (size_t b = 0; b + 4 <= n_blocks; b += 4) {  // rows of 4 blocks
            float r;
            qx_dot_rows_path(path, t, raw + b * bb, 0, 1, qx, (int)(4 * be), &r);
            bad_dot += memcmp(&r, &dots[b / 4], 4) != 0;
        }
    }
    CHECK_MSG(bad == 0, "%s: %zu of %zu blocks differ from NumPy's values", type, bad, n_blocks);
    CHECK_MSG(bad_dot == 0, "%s: %zu rows' integer dot products differ from NumPy's qdot", type, bad_dot);
    free(raw); free(want); free(x); free(dots); free(qx);
    return test_summary("kquant_blocks");
}

// --logits MODEL ID...: the last token's logits (CPU, fp32 cache) as one JSON array.
static int print_logits(const char *path, int n, char **ids) {
    struct model *m = NULL;
    if (model_load(&m, path) < 0) { fprintf(stderr, "%s\n", err_msg()); return 1; }
    struct runner_options o;
    runner_options_default(&o);
    snprintf(o.device, sizeof o.device, "cpu");
    snprintf(o.kv.dtype, sizeof o.kv.dtype, "fp32");
    o.max_ctx = 256;
    struct runner r;
    if (runner_init(&r, m, &o) < 0) { fprintf(stderr, "%s\n", err_msg()); model_free(m); return 1; }
    int32_t tok[256];
    for (int i = 0; i < n && i < 256; i++) tok[i] = atoi(ids[i]);
    float *lg = malloc((size_t)m->cfg.n_vocab * 4);
    int rc = runner_feed(&r, tok, n < 256 ? n : 256, false, lg);
    if (rc < 0) fprintf(stderr, "%s\n", err_msg());
    else {
        printf("[");
        for (int v = 0; v < m->cfg.n_vocab; v++) printf("%s%.9g", v ? "," : "", lg[v]);
        printf("]\n");
    }
    free(lg);
    runner_free(&r);
    model_free(m);
    return rc < 0;
}

// --decode-equals-prefill MODEL ID...: the ids' logits at every position from one prefill equal, bit for bit,
// those of feeding the ids one at a time (decode), CPU with an fp32 cache; prints the count of positions.
static int decode_equals_prefill(const char *path, int n, char **ids) {
    struct model *m = NULL;
    if (model_load(&m, path) < 0) { fprintf(stderr, "%s\n", err_msg()); return 1; }
    struct runner_options o;
    runner_options_default(&o);
    snprintf(o.device, sizeof o.device, "cpu");
    snprintf(o.kv.dtype, sizeof o.kv.dtype, "fp32");
    o.max_ctx = 256;
    struct runner r;
    if (runner_init(&r, m, &o) < 0) { fprintf(stderr, "%s\n", err_msg()); model_free(m); return 1; }
    n = n < 256 ? n : 256;
    size_t V = (size_t)m->cfg.n_vocab;
    int32_t tok[256];
    for (int i = 0; i < n; i++) tok[i] = atoi(ids[i]);
    float *all = malloc((size_t)n * V * 4), *one = malloc(V * 4);
    int rc = runner_feed(&r, tok, n, true, all), differ = 0;
    runner_reset(&r);
    for (int i = 0; rc >= 0 && i < n; i++) {
        rc = runner_feed(&r, tok + i, 1, false, one);
        differ += rc >= 0 && memcmp(one, all + (size_t)i * V, V * 4) != 0;
    }
    if (rc < 0) fprintf(stderr, "%s\n", err_msg());
    else printf("decode == prefill: %d of %d positions differ\n", differ, n);
    free(all); free(one);
    runner_free(&r);
    model_free(m);
    return rc < 0 || differ;
}

int main(int argc, char **argv) {
    if (argc == 7 && !strcmp(argv[1], "--blocks")) return check_blocks(argv[2], argv[3], argv[4], argv[5], argv[6]);
    if (argc >= 4 && !strcmp(argv[1], "--logits")) return print_logits(argv[2], argc - 3, argv + 3);
    if (argc >= 4 && !strcmp(argv[1], "--decode-equals-prefill")) return decode_equals_prefill(argv[2], argc - 3, argv + 3);
    RUN(known_q4_k);
    RUN(known_q5_k);
    RUN(known_q6_k);
    RUN(dot_paths);
    RUN(known_q8_0_dot);
    RUN(matmul);
    RUN(upload_refusal_names_tensor);
    return test_summary("kquant");
}
