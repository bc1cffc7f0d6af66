// test_quant_fp8.c — src/model/quant_fp8.c: at-load e4m3 quantization per output channel and in
// 128×128 blocks (scales amax / 448, every element within e4m3's rounding of the original, all-zero
// groups at scale 1, a NaN or inf refused), the --quantization-skip-layers parser, the weight bytes by dtype, and the backend
// capability: a backend whose table lacks fp8_weights refuses an FP8 model at forward_init, naming it.
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/base/check.h"
#include "../../src/base/fp8.h"
#include "../../src/model/forward.h"
#include "../../src/model/quant_fp8.h"
#include "../test.h"

static uint32_t rng = 44;
static float frand(void) {  // in [-1, 1)
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

// Every element of the quantized w within half an e4m3 step (2^-4 relative, or the subnormal step) of src.
static int check_round_trip(const struct weight *w, const float *src) {
    int bad = 0;
    const uint8_t *q = w->data;
    int64_t nbc = (w->cols + 127) / 128;
    for (int64_t r = 0; r < w->rows; r++)
        for (int64_t c = 0; c < w->cols; c++) {
            float s = w->fp8.wscale == WSCALE_BLOCK ? w->fp8.scale[(r / 128) * nbc + c / 128] : w->fp8.scale[r];
            float v = fp8_e4m3_table[q[r * w->cols + c]] * s, x = src[r * w->cols + c];
            bad += !(fabsf(v - x) <= fabsf(x) / 16 + s * 0x1p-10f);
        }
    return bad;
}

TEST(per_channel_and_block) {
    struct model *m = calloc(1, sizeof *m);
    const int R = 200, C = 300;
    float *src = malloc((size_t)R * C * 4);
    for (int i = 0; i < R * C; i++) src[i] = frand() * (1 + (i % 7));
    for (int c = 0; c < C; c++) src[5 * C + c] = 0;  // an all-zero row
    for (int block = 0; block <= 128; block += 128) {
        struct weight w = {DT_F32, R, C, src, NULL, {0}, 0};
        CHECK_OK(quant_fp8_weight(m, &w, block));
        CHECK_EQ_INT(w.dtype, DT_E4M3);
        CHECK_EQ_INT(w.fp8.wscale, block ? WSCALE_BLOCK : WSCALE_CHANNEL);
        CHECK_EQ_INT(weight_fp8_n_scales(&w), block ? 2 * 3 : R);
        CHECK_EQ_INT(check_round_trip(&w, src), 0);
        float amax = 0;  // row 0 / block (0, 0): scale = amax / 448
        for (int r = 0; r < (block ? 128 : 1); r++)
            for (int c = 0; c < (block ? 128 : C); c++) amax = fmaxf(amax, fabsf(src[r * C + c]));
        CHECK(w.fp8.scale[0] == amax / 448.0f);
        if (!block) {
            CHECK(w.fp8.scale[5] == 1.0f);
            CHECK(((const uint8_t *)w.data)[5 * C + 7] == 0);
        }
    }
    for (int block = 0; block <= 128; block += 128) {  // a NaN or an inf anywhere is refused, naming its band
        for (int k = 0; k < 2; k++) {
            src[137 * C + 250] = k ? INFINITY : NAN;
            struct weight w = {DT_F32, R, C, src, NULL, {0}, 0};
            CHECK(quant_fp8_weight(m, &w, block) == OCT_EINVAL && strstr(err_msg(), "non-finite") &&
                  strstr(err_msg(), block ? "row 128" : "row 137"));
            CHECK_EQ_INT(w.dtype, DT_F32);
        }
        src[137 * C + 250] = 1;
    }
    struct weight q8 = {DT_Q8_0, 1, 32, src, NULL, {0}, 0};
    CHECK(quant_fp8_weight(m, &q8, 0) < 0 && strstr(err_msg(), "q8_0"));
    free(src);
    model_free(m);
}

// Two loads' projection weights hold the same dtype and bytes (codes, scales).
static int same_weight(const struct weight *a, const struct weight *b) {
    if (!a->data || !b->data) return a->data == b->data;
    if (a->dtype != b->dtype || a->rows != b->rows || a->cols != b->cols) return 0;
    if (a->dtype != DT_E4M3) return !memcmp(a->data, b->data, (size_t)(a->rows * a->cols) * dtype_size(a->dtype));
    return a->fp8.wscale == b->fp8.wscale && !memcmp(a->data, b->data, (size_t)(a->rows * a->cols)) &&
           !memcmp(a->fp8.scale, b->fp8.scale, (size_t)weight_fp8_n_scales(a) * sizeof(float));
}

// A dummy model drawn straight to e4m3 (model_load_ex, what --quantization fp8 does for dummy:NAME) holds
// the codes and scales of the bf16 draw quantized after the load: per channel and in blocks, a skipped
// layer kept in bf16, the untied output head (tiny-gpt-oss) quantized.
TEST(dummy_draws_fp8) {
    const char *names[2] = {"dummy:tiny", "dummy:tiny-gpt-oss"};
    for (int k = 0; k < 2; k++)
        for (int block = 0; block <= 128; block += 128) {
            struct quant_fp8_options o = {.quantize = true, .block = block};
            o.skip_layer[1] = o.any_skip = true;
            struct model *ref = NULL, *fast = NULL;
            CHECK_OK(model_load(&ref, names[k]));
            CHECK_OK(quant_fp8_apply(ref, &o));
            const struct model_fp8_draw d = {block, o.skip_layer, false};
            CHECK_OK(model_load_ex(&fast, names[k], &d));
            CHECK_OK(quant_fp8_apply(fast, &o));
            if (!ref || !fast) { model_free(ref); model_free(fast); continue; }
            int bad = 0, fp8 = 0;
            for (int l = 0; l < ref->cfg.n_layers; l++) {
                struct layer_weights *a = &ref->layers[l], *b = &fast->layers[l];
                const struct weight *pa[7] = {&a->wq, &a->wk, &a->wv, &a->wo, &a->w_gate, &a->w_up, &a->w_down};
                const struct weight *pb[7] = {&b->wq, &b->wk, &b->wv, &b->wo, &b->w_gate, &b->w_up, &b->w_down};
                for (int i = 0; i < 7; i++) {
                    bad += !same_weight(pa[i], pb[i]);
                    fp8 += pb[i]->data && pb[i]->dtype == DT_E4M3;
                    if (l == 1 && pb[i]->data) bad += pb[i]->dtype == DT_E4M3;  // (the skipped layer)
                }
            }
            bad += !same_weight(&ref->output, &fast->output);
            CHECK_EQ_INT(bad, 0);
            CHECK(fp8 > 0);
            CHECK(ref->weight_bytes == fast->weight_bytes);
            if (k == 1) CHECK_EQ_INT(fast->output.dtype, DT_E4M3);
            model_free(ref);
            model_free(fast);
        }
}

TEST(skip_list) {
    struct quant_fp8_options o = {0};
    CHECK_OK(quant_fp8_parse_skip(&o, "0,31,lm_head"));
    CHECK(o.skip_layer[0] && o.skip_layer[31] && o.skip_lm_head && !o.skip_layer[1]);
    CHECK(quant_fp8_parse_skip(&o, "0,x") < 0 && strstr(err_msg(), "'x'"));
    CHECK(quant_fp8_parse_skip(&o, "-1") < 0);
    CHECK(quant_fp8_parse_skip(&o, "") < 0);
}

TEST(backend_without_fp8_weights_refuses) {
    struct model *m;
    CHECK_OK(model_load(&m, "tests/data/hf/llama3_rope"));
    size_t before = m->weight_bytes, by[DT_COUNT];
    struct quant_fp8_options o = {.quantize = true};
    CHECK_OK(quant_fp8_apply(m, &o));
    CHECK(m->layers[1].w_down.dtype == DT_E4M3 && m->output.dtype == DT_E4M3 && m->token_embd.dtype == DT_BF16);
    CHECK(m->weight_dtype == DT_BF16);  // "auto" KV stays the model's own type
    CHECK(model_weight_bytes_by_dtype(m, by) == m->weight_bytes);
    CHECK(by[DT_E4M3] > 0 && by[DT_BF16] > 0 && m->weight_bytes < before);
    struct backend *b = backend_cpu_create(1);
    struct forward f;
    CHECK_OK(forward_init(&f, m, b, 8, 1));
    forward_free(&f);
    struct backend_ops ops = *b->ops;  // the same backend, without the ability
    const struct backend_ops *saved = b->ops;
    ops.fp8_weights = false;
    b->ops = &ops;
    CHECK(forward_init(&f, m, b, 8, 1) < 0);
    CHECK(strstr(err_msg(), "fp8_e4m3 weights") && strstr(err_msg(), "no FP8 weight GEMMs"));
    b->ops = saved;
    b->ops->destroy(b);
    model_free(m);
}

int main(void) {
    RUN(per_channel_and_block);
    RUN(dummy_draws_fp8);
    RUN(skip_list);
    RUN(backend_without_fp8_weights_refuses);
    return test_summary("quant_fp8");
}
