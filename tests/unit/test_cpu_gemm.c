// test_cpu_gemm.c — src/backend/cpu/cpu_gemm.c, the register-blocked prefill product of F32/F16/BF16
// weights: for batches past its token tile (64) and its micro tile (6 rows × 4 tokens on AVX-512, 4 × 3
// on AVX2), columns past its 2048-column chunk and with vector steps and scalar tails, every output
// equals bit for bit the same token multiplied alone (the decode path: gemv16, or cpu_dot on the widened
// row for f32), at 1, 2 and 3 threads, and lies within f32 rounding of a double-precision product.
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
#include "../../src/base/half.h"
#include "../test.h"

static uint32_t rng = 777;
static float frand(void) {  // in [-1, 1)
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

static double widen(const struct weight *w, size_t i) {
    if (w->dtype == DT_F16) return f16_to_f32(((const uint16_t *)w->data)[i]);
    if (w->dtype == DT_BF16) return bf16_to_f32(((const uint16_t *)w->data)[i]);
    return ((const float *)w->data)[i];
}

// Mismatches of an n-token product of a rows × cols weight against its tokens alone and a double product.
static int check(struct backend *b, enum dtype dt, int rows, int cols, int n) {
    size_t ne = (size_t)rows * cols;
    void *data = malloc(ne * 4);
    for (size_t i = 0; i < ne; i++) {
        float v = frand() * 0.25f;
        if (dt == DT_F16) ((uint16_t *)data)[i] = f32_to_f16(v);
        else if (dt == DT_BF16) ((uint16_t *)data)[i] = f32_to_bf16(v);
        else ((float *)data)[i] = v;
    }
    float *x = malloc((size_t)n * cols * 4), *all = malloc((size_t)n * rows * 4), *one = malloc((size_t)rows * 4);
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = frand();
    struct weight w = {dt, rows, cols, data, NULL, {0}, 0};
    int bad = 0;
    if (b->ops->weight_upload(b, &w) < 0) return 1;
    b->ops->matmul(b, all, x, &w, n);
    for (int t = 0; t < n; t++) {
        b->ops->matmul(b, one, x + (size_t)t * cols, &w, 1);
        for (int r = 0; r < rows; r++) {
            float got = all[(size_t)t * rows + r];
            double ref = 0;
            for (int c = 0; c < cols; c++) ref += (double)x[(size_t)t * cols + c] * widen(&w, (size_t)r * cols + c);
            if (memcmp(&got, &one[r], 4) != 0) bad++;
            if (fabs(got - ref) > 1e-5 * (1 + sqrt((double)cols)) * (1 + fabs(ref))) bad++;
        }
    }
    if (b->ops->sync(b) != 0) bad++;
    if (bad) fprintf(stderr, "  %s %d x %d, %d tokens: %d bad outputs\n", dtype_name(dt), rows, cols, n, bad);
    b->ops->weight_release(b, &w);
    free(data); free(x); free(all); free(one);
    return bad;
}

static void run(int threads) {
    struct backend *b = backend_cpu_create(threads);
    CHECK(b != NULL);
    if (!b) return;
    static const int shapes[][3] = {  // rows, cols, tokens
        {5, 7, 4}, {4, 32, 6}, {17, 48, 13}, {33, 1040, 70}, {6, 2100, 150}, {13, 4099, 65}, {64, 1024, 129},
        {3, 2064, 5}};
    enum dtype dts[] = {DT_F32, DT_F16, DT_BF16};
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            CHECK_EQ_INT(check(b, dts[d], shapes[s][0], shapes[s][1], shapes[s][2]), 0);
    b->ops->destroy(b);
}

TEST(gemm_one_thread) { run(1); }
TEST(gemm_two_threads) { run(2); }
TEST(gemm_three_threads) { run(3); }

int main(void) {
    RUN(gemm_one_thread);
    RUN(gemm_two_threads);
    RUN(gemm_three_threads);
    return test_summary("cpu_gemm");
}
