// test_kquant_repack.c — the Q4_K rows the CPU backend repacks in groups of 8 at load (cpu_kq8.c): the
// group kernel gives the bits of the plain kernel (kq_dot_rows, every compiled path) for random rows, for
// the extreme values (every nibble 15, every scale and min 63, x at ±127), and for several column counts;
// the backend's decode matmul of a weight whose row count is not a multiple of 8 (repacked groups, then
// the plain rows) equals the plain weight's bit for bit, and weight_release frees the copy (ASan builds);
// a repack that would not fit the memory left is skipped, the weight decoding the same bits in place.
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
#include "../../src/backend/cpu/cpu.h"
#include "../../src/backend/cpu/cpu_quant.h"
#include "../../src/base/half.h"
#include "../test.h"

static uint32_t rng = 4242;
static uint32_t next(void) { return rng = rng * 1664525u + 1013904223u; }
static float frand(void) { return (float)(next() >> 8) / (float)(1u << 23) - 1.0f; } // [-1, 1)

static void put_f16(uint8_t *p, float v) {
    uint16_t h = f32_to_f16(v);
    memcpy(p, &h, 2);
}

// n_blocks random Q4_K super-blocks; extreme: every quant byte 0xFF and every scale / min 63.
static void q4k_blocks(uint8_t *p, int64_t n_blocks, int extreme) {
    for (int64_t b = 0; b < n_blocks; b++, p += 144) {
        for (int j = 0; j < 144; j++) p[j] = extreme ? 0xFF : (uint8_t)next();
        put_f16(p, ldexpf(1.0f + frand() * 0.5f, -7 - (int)(next() % 3)));
        put_f16(p + 2, ldexpf(1.0f + frand() * 0.5f, -8 - (int)(next() % 3)));
    }
}

static const int COLS[] = {256, 512, 768, 2048};
static const int ROWS[] = {8, 13, 24, 67};

TEST(group_kernel_equals_plain) {
    if (!kq8_built()) {
        fprintf(stderr, "  (no AVX-512 VNNI/VBMI in this build: no repack, nothing to compare)\n");
        CHECK_EQ_INT(kq8_bytes(64, 2048), 0);
        return;
    }
    for (int ci = 0; ci < 4; ci++)
        for (int ri = 0; ri < 4; ri++)
            for (int mode = 0; mode < 3; mode++) { // random; extreme weights with x at +127; with x at -127
                int cols = COLS[ci], rows = ROWS[ri];
                size_t rb = dtype_row_bytes(DT_Q4_K, cols), kb = kq8_bytes(rows, cols);
                CHECK_EQ_INT(kb, (size_t)(rows / 8) * kq8_group_bytes(cols));
                uint8_t *w = malloc((size_t)rows * rb), *pk = aligned_alloc(64, kb);
                float *x = malloc((size_t)cols * 4);
                char *qx = malloc(qx_bytes(DT_Q4_K, cols));
                q4k_blocks(w, (int64_t)rows * cols / QK_K, mode > 0);
                for (int i = 0; i < cols; i++) x[i] = mode == 0 ? frand() : mode == 1 ? 1.0f : -1.0f;
                if (mode == 0) x[next() % cols] = 3.0f; // one block with q at 127
                qx_quantize(DT_Q4_K, x, cols, qx);
                struct qx_view v = qx_view(DT_Q4_K, qx, cols);
                kq8_repack(w, rb, rows, cols, pk);
                int bad = 0, bad_path = 0;
                for (int g = 0; g < rows / 8; g++) {
                    float got[8], want[8];
                    kq8_dot_group(pk + (size_t)g * kq8_group_bytes(cols), cols, v, got);
                    for (int path = QX_C; path <= QX_AVX512; path++) {
                        if (!qx_has_path(path)) continue;
                        for (int h = 0; h < 2; h++) // four rows at a time, as the matmul calls it
                            kq_dot_rows(path, DT_Q4_K, w + (size_t)(8 * g + 4 * h) * rb, rb, 4, v, cols, want + 4 * h);
                        for (int k = 0; k < 8; k++) {
                            bad += memcmp(&got[k], &want[k], 4) != 0;
                            bad_path += path == QX_C && memcmp(&got[k], &want[k], 4) != 0;
                        }
                    }
                }
                CHECK_MSG(bad == 0, "[%d x %d] mode %d: %d results differ from the plain kernel (%d from C)", rows,
                          cols, mode, bad, bad_path);
                free(w); free(pk); free(x); free(qx);
            }
}

TEST(backend_decode_equals_plain) {
    struct backend *b = backend_cpu_create(2);
    CHECK(b != NULL);
    if (!b) return;
    for (int ci = 0; ci < 4; ci++)
        for (int ri = 0; ri < 4; ri++) {
            int cols = COLS[ci], rows = ROWS[ri] + 8 * ci; // 8..91 rows, most not whole groups
            size_t rb = dtype_row_bytes(DT_Q4_K, cols);
            uint8_t *w = malloc((size_t)rows * rb);
            q4k_blocks(w, (int64_t)rows * cols / QK_K, 0);
            float *x = malloc((size_t)cols * 3 * 4), *got = malloc((size_t)rows * 3 * 4);
            float *want = malloc((size_t)rows * 3 * 4);
            for (int i = 0; i < 3 * cols; i++) x[i] = frand();
            struct weight pk = {DT_Q4_K, rows, cols, w, NULL, {0}};
            struct weight plain = {DT_Q4_K, rows, cols, w, (void *)w, {0}}; // read in place: not this backend's
            CHECK_EQ_INT(b->ops->weight_upload(b, &pk), 0);
            struct cpu_backend *c = (struct cpu_backend *)b;
            CHECK_MSG((cpu_kq8_of(c, &pk) != NULL) == kq8_built(), "[%d x %d]: repacked %d, kernel built %d", rows,
                      cols, cpu_kq8_of(c, &pk) != NULL, kq8_built());
            CHECK(cpu_kq8_of(c, &plain) == NULL);
            for (int n = 1; n <= 3; n++) { // decode and the small batches that take the repacked rows
                b->ops->matmul(b, got, x, &pk, n);
                b->ops->matmul(b, want, x, &plain, n);
                CHECK_EQ_INT(b->ops->sync(b), 0);
                int bad = 0;
                for (int i = 0; i < n * rows; i++) bad += memcmp(&got[i], &want[i], 4) != 0;
                CHECK_MSG(bad == 0, "[%d x %d] n %d: %d of %d outputs differ", rows, cols, n, bad, n * rows);
            }
            b->ops->weight_release(b, &pk);
            CHECK(pk.dev == NULL);
            CHECK_EQ_INT(c->n_kq8, 0);
            free(w); free(x); free(got); free(want);
        }
    b->ops->destroy(b);
}

// A repack that would not fit the memory left (kq8_room) is skipped: the weight is read in place, decodes the
// same bits, and the room and the bytes in use move only for the copies that were made and released.
TEST(repack_only_within_the_memory_left) {
    struct backend *b = backend_cpu_create(1);
    CHECK(b != NULL);
    if (!b) return;
    struct cpu_backend *c = (struct cpu_backend *)b;
    CHECK(c->kq8_room > 0);  // (this machine's MemAvailable is well above the headroom)
    const int rows = 16, cols = 512;
    const size_t rb = dtype_row_bytes(DT_Q4_K, cols);
    uint8_t *w = malloc((size_t)rows * rb);
    q4k_blocks(w, (int64_t)rows * cols / QK_K, 1);
    float *x = malloc((size_t)cols * 4), *a = malloc((size_t)rows * 4), *want = malloc((size_t)rows * 4);
    for (int i = 0; i < cols; i++) x[i] = frand();
    struct weight plain = {DT_Q4_K, rows, cols, w, (void *)w, {0}};
    b->ops->matmul(b, want, x, &plain, 1);
    c->kq8_room = 100;  // less than one copy
    struct weight tight = {DT_Q4_K, rows, cols, w, NULL, {0}};
    CHECK_EQ_INT(b->ops->weight_upload(b, &tight), 0);
    CHECK(tight.dev == (void *)w && c->n_kq8 == 0 && c->kq8_used == 0 && c->kq8_room == 100);
    b->ops->matmul(b, a, x, &tight, 1);
    CHECK(memcmp(a, want, (size_t)rows * 4) == 0);
    b->ops->weight_release(b, &tight);
    c->kq8_room = (size_t)1 << 30;
    struct weight roomy = {DT_Q4_K, rows, cols, w, NULL, {0}};
    CHECK_EQ_INT(b->ops->weight_upload(b, &roomy), 0);
    if (kq8_built()) {
        CHECK(c->n_kq8 == 1 && c->kq8_used > 0 && c->kq8_room == ((size_t)1 << 30) - c->kq8_used);
        b->ops->matmul(b, a, x, &roomy, 1);
        CHECK(memcmp(a, want, (size_t)rows * 4) == 0);
    }
    b->ops->weight_release(b, &roomy);
    CHECK(c->n_kq8 == 0 && c->kq8_used == 0 && c->kq8_room == (size_t)1 << 30);
    CHECK_EQ_INT(b->ops->sync(b), 0);
    free(w); free(x); free(a); free(want);
    b->ops->destroy(b);
}

int main(void) {
    RUN(group_kernel_equals_plain);
    RUN(backend_decode_equals_plain);
    RUN(repack_only_within_the_memory_left);
    return test_summary("kquant_repack");
}
