// repack_check.h — the checks shared by the tests of the weight types the CPU backend repacks at load in
// groups of 8 rows (cpu_kq8.c: Q4_K, cpu_kq6x8.c: Q6_K, cpu_kq8_0x8.c: Q8_0): the group kernel and the
// backend's matmul of a repacked weight equal the plain kernel bit for bit, weight_release frees the copy, and
// a copy that would not fit the memory left (kq8_room) is skipped. The including test defines frand() (floats
// in [-1, 1)), next() (random 32-bit values) and the block generator it passes.
#ifndef OCTET_TEST_REPACK_CHECK_H
#define OCTET_TEST_REPACK_CHECK_H

// Writes n_blocks blocks of the test's type at p (mode 0: random; others: the test's extremes).
typedef void (*blocks_fn)(uint8_t *p, int64_t n_blocks, int mode);

// One repacked layout's functions (cpu_quant.h).
struct repack_kind {
    enum dtype dt;
    size_t (*bytes)(int64_t rows, int64_t cols);
    size_t (*group_bytes)(int64_t cols);
    void (*repack)(const uint8_t *w, size_t rb, int64_t rows, int64_t cols, uint8_t *dst);
    void (*dot_group)(const uint8_t *gp, int cols, struct qx_view x, float *r);
};

// Repacks w (rows x cols of k->dt) and returns how many of its whole groups' results against x differ in any
// bit from the plain kernel (qx_dot_rows_path four rows at a time, as the matmul calls it, on every compiled
// path); *bad_c counts those from the portable C path. Also checks the layout's sizes.
static int group_mismatches(const struct repack_kind *k, const uint8_t *w, int rows, int cols, const float *x,
                            int *bad_c) {
    size_t rb = dtype_row_bytes(k->dt, cols), kb = k->bytes(rows, cols), gb = k->group_bytes(cols);
    CHECK_EQ_INT(kb, (size_t)(rows / 8) * gb);
    CHECK_EQ_INT(gb % 64, 0);
    uint8_t *pk = aligned_alloc(64, kb ? kb : 64);
    char *qx = malloc(qx_bytes(k->dt, cols));
    qx_quantize(k->dt, x, cols, qx);
    struct qx_view v = qx_view(k->dt, qx, cols);
    k->repack(w, rb, rows, cols, pk);
    int bad = 0;
    *bad_c = 0;
    for (int g = 0; g < rows / 8; g++) {
        float got[8], want[8];
        k->dot_group(pk + (size_t)g * gb, cols, v, got);
        for (int path = QX_C; path <= QX_AVX512; path++) {
            if (!qx_has_path(path)) continue;
            for (int h = 0; h < 2; h++)
                qx_dot_rows_path(path, k->dt, w + (size_t)(8 * g + 4 * h) * rb, rb, 4, qx, cols, want + 4 * h);
            for (int i = 0; i < 8; i++) {
                bad += memcmp(&got[i], &want[i], 4) != 0;
                *bad_c += path == QX_C && memcmp(&got[i], &want[i], 4) != 0;
            }
        }
    }
    free(pk); free(qx);
    return bad;
}

// One case of the group kernel against the plain kernel: rows x cols of k->dt written by gen in weight mode
// wmode, against x random with one element at 3 (xmode 0: a block whose q reaches 127), all +1 (1) or all -1
// (2); mode names the case in a failure.
static void check_group_case(const struct repack_kind *k, blocks_fn gen, int rows, int cols, int wmode, int xmode,
                             int mode) {
    uint8_t *w = malloc((size_t)rows * dtype_row_bytes(k->dt, cols));
    float *x = malloc((size_t)cols * 4);
    gen(w, (int64_t)rows * cols / dtype_block_elems(k->dt), wmode);
    for (int i = 0; i < cols; i++) x[i] = xmode == 0 ? frand() : xmode == 1 ? 1.0f : -1.0f;
    if (xmode == 0) x[next() % cols] = 3.0f;
    int bad_c, bad = group_mismatches(k, w, rows, cols, x, &bad_c);
    CHECK_MSG(bad == 0, "[%d x %d] mode %d: %d results differ from the plain kernel (%d from C)", rows, cols, mode,
              bad, bad_c);
    free(w); free(x);
}

// For 4 column counts x 4 row counts (rows_list[ri] + 8 ci rows: most not whole groups) and 1..max_n tokens.
static void check_matmul_equals_plain(enum dtype dt, blocks_fn gen, int built, const int *cols_list,
                                      const int *rows_list, int max_n) {
    struct backend *b = backend_cpu_create(2);
    CHECK(b != NULL);
    if (!b) return;
    for (int ci = 0; ci < 4; ci++)
        for (int ri = 0; ri < 4; ri++) {
            int cols = cols_list[ci], rows = rows_list[ri] + 8 * ci;
            size_t rb = dtype_row_bytes(dt, cols);
            uint8_t *w = malloc((size_t)rows * rb);
            gen(w, (int64_t)rows * cols / dtype_block_elems(dt), 0);
            float *x = malloc((size_t)cols * max_n * 4), *got = malloc((size_t)rows * max_n * 4);
            float *want = malloc((size_t)rows * max_n * 4);
            for (int i = 0; i < max_n * cols; i++) x[i] = frand();
            struct weight pk = {dt, rows, cols, w, NULL, {0}, 0};
            struct weight plain = {dt, rows, cols, w, (void *)w, {0}, 0};  // read in place: not this backend's
            CHECK_EQ_INT(b->ops->weight_upload(b, &pk), 0);
            struct cpu_backend *c = (struct cpu_backend *)b;
            CHECK_MSG((cpu_kq8_of(c, &pk) != NULL) == built, "[%d x %d]: repacked %d, kernel built %d", rows, cols,
                      cpu_kq8_of(c, &pk) != NULL, built);
            CHECK(cpu_kq8_of(c, &plain) == NULL);
            for (int n = 1; n <= max_n; n++) {  // decode and the small batches that take the repacked rows
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

// A 16 x cols weight (blocks of gen's mode): with less room than one copy it is read in place and decodes the
// same bits; with room its copy (copy_bytes, when the kernel is built) is counted and released.
static void check_repack_within_room(enum dtype dt, blocks_fn gen, int mode, int cols, int built, size_t copy_bytes) {
    struct backend *b = backend_cpu_create(1);
    CHECK(b != NULL);
    if (!b) return;
    struct cpu_backend *c = (struct cpu_backend *)b;
    CHECK(c->kq8_room > 0);  // (this machine's MemAvailable is well above the headroom)
    const int rows = 16;
    const size_t rb = dtype_row_bytes(dt, cols);
    uint8_t *w = malloc((size_t)rows * rb);
    gen(w, (int64_t)rows * cols / dtype_block_elems(dt), mode);
    float *x = malloc((size_t)cols * 4), *a = malloc((size_t)rows * 4), *want = malloc((size_t)rows * 4);
    for (int i = 0; i < cols; i++) x[i] = frand();
    struct weight plain = {dt, rows, cols, w, (void *)w, {0}, 0};
    b->ops->matmul(b, want, x, &plain, 1);
    c->kq8_room = 100;  // less than one copy
    struct weight tight = {dt, rows, cols, w, NULL, {0}, 0};
    CHECK_EQ_INT(b->ops->weight_upload(b, &tight), 0);
    CHECK(tight.dev == (void *)w && c->n_kq8 == 0 && c->kq8_used == 0 && c->kq8_room == 100);
    b->ops->matmul(b, a, x, &tight, 1);
    CHECK(memcmp(a, want, (size_t)rows * 4) == 0);
    b->ops->weight_release(b, &tight);
    c->kq8_room = (size_t)1 << 30;
    struct weight roomy = {dt, rows, cols, w, NULL, {0}, 0};
    CHECK_EQ_INT(b->ops->weight_upload(b, &roomy), 0);
    if (built) {
        CHECK(c->n_kq8 == 1 && c->kq8_used == copy_bytes && c->kq8_room == ((size_t)1 << 30) - c->kq8_used);
        b->ops->matmul(b, a, x, &roomy, 1);
        CHECK(memcmp(a, want, (size_t)rows * 4) == 0);
    }
    b->ops->weight_release(b, &roomy);
    CHECK(c->n_kq8 == 0 && c->kq8_used == 0 && c->kq8_room == (size_t)1 << 30);
    CHECK_EQ_INT(b->ops->sync(b), 0);
    free(w); free(x); free(a); free(want);
    b->ops->destroy(b);
}

#endif
