// test_golden.c — stories260K end to end against the independent NumPy reference
// (tests/golden/*.json from tools/ref/): tokenization, greedy tokens, logits (fp32
// cache, 1e-3), teacher-forced logits, perplexity by llama.cpp's method, and the FP8
// caches' KLD / top-1 agreement / perplexity bounds against fp32.
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/engine/runner.h"
#include "../../src/engine/sampler.h"
#include "../../src/model/model.h"
#include "../../src/model/tokenizer.h"
#include "../test.h"

static json_t *greedy, *pplj;
static struct model *model;

static struct runner_options opts(const char *dtype) {
    struct runner_options o;
    runner_options_default(&o);
    snprintf(o.kv.dtype, sizeof o.kv.dtype, "%s", dtype);
    o.max_ctx = 512;
    o.n_threads = 2;
    return o;
}

static double max_abs_diff_row(const float *got, json_t *want, int n) {
    double w = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs(got[i] - json_number_value(json_array_get(want, (size_t)i)));
        if (d > w) w = d;
    }
    return w;
}

TEST(greedy_matches_reference) {
    json_t *prompts = json_object_get(greedy, "prompts");
    CHECK_EQ_INT(json_array_size(prompts), 3);
    struct runner_options o = opts("fp32");
    struct runner r;
    CHECK_OK(runner_init(&r, model, &o));
    float logits[512];
    for (size_t p = 0; p < json_array_size(prompts); p++) {
        json_t *e = json_array_get(prompts, p);
        const char *text = json_string_value(json_object_get(e, "text"));
        json_t *pid = json_object_get(e, "prompt_ids"), *gid = json_object_get(e, "gen_ids"), *lg = json_object_get(e, "logits");
        int32_t *ids;
        int n;
        CHECK_OK(tokenizer_encode(model->tok, text, strlen(text), true, false, &ids, &n));
        CHECK_EQ_INT(n, json_array_size(pid));
        for (int i = 0; i < n; i++) CHECK_EQ_INT(ids[i], json_integer_value(json_array_get(pid, (size_t)i)));
        runner_reset(&r);
        CHECK_OK(runner_feed(&r, ids, n, false, logits));
        int mismatches = 0;
        double worst = 0;
        for (size_t k = 0; k < json_array_size(gid); k++) {
            if (k < json_array_size(lg)) {
                double d = max_abs_diff_row(logits, json_array_get(lg, k), 512);
                if (d > worst) worst = d;
            }
            int32_t id = logits_argmax(logits, 512);
            if (id != json_integer_value(json_array_get(gid, k))) mismatches++;
            id = (int32_t)json_integer_value(json_array_get(gid, k));  // stay on the reference path
            CHECK_OK(runner_feed(&r, &id, 1, false, logits));
        }
        CHECK_MSG(mismatches == 0, "prompt %zu: %d of 32 greedy tokens differ", p, mismatches);
        CHECK_MSG(worst < 1e-3, "prompt %zu: logits differ by %g", p, worst);
        free(ids);
    }
    runner_free(&r);
}

TEST(teacher_forced_logits) {
    json_t *tf = json_object_get(greedy, "teacher_forced");
    json_t *ids_j = json_object_get(tf, "ids"), *lg = json_object_get(tf, "logits");
    int n = (int)json_array_size(ids_j);
    int32_t ids[64];
    for (int i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(ids_j, (size_t)i));
    // one pass, and chunked passes of 7 tokens: both must match the reference, and each other exactly
    float *all = malloc((size_t)n * 512 * sizeof(float)), *chunked = malloc((size_t)n * 512 * sizeof(float));
    for (int variant = 0; variant < 2; variant++) {
        struct runner_options o = opts("fp32");
        o.max_step_tokens = variant ? 7 : 512;
        struct runner r;
        CHECK_OK(runner_init(&r, model, &o));
        CHECK_OK(runner_feed(&r, ids, n, true, variant ? chunked : all));
        runner_free(&r);
    }
    double worst = 0;
    for (int p = 0; p < n; p++) {
        double d = max_abs_diff_row(all + (size_t)p * 512, json_array_get(lg, (size_t)p), 512);
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst < 1e-3, "teacher-forced logits differ by %g", worst);
    CHECK_MSG(memcmp(all, chunked, (size_t)n * 512 * sizeof(float)) == 0, "chunked prefill differs from one pass");
    free(all);
    free(chunked);
}

// Perplexity over tests/data/heldout.txt at ctx 256 by llama.cpp's method.
static int ppl_of(const char *dtype, int ctx, double *ppl, double *kld_mean, double *top1) {
    FILE *f = fopen("tests/data/heldout.txt", "rb");
    if (!f) return -1;
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    int32_t *ids;
    int n;
    TRY(tokenizer_encode(model->tok, text, len, true, false, &ids, &n));
    struct runner_options o = opts(dtype), oref = opts("fp32");
    o.max_ctx = oref.max_ctx = ctx;
    struct runner r, rr;
    TRY(runner_init(&r, model, &o));
    TRY(runner_init(&rr, model, &oref));
    float *lg = malloc((size_t)ctx * 512 * 4), *lr = malloc((size_t)ctx * 512 * 4);
    double nll = 0, kl = 0;
    long scored = 0, agree = 0;
    for (int c = 0; c < n / ctx; c++) {
        int32_t saved = ids[c * ctx];
        ids[c * ctx] = 1;
        runner_reset(&r);
        runner_reset(&rr);
        TRY(runner_feed(&r, ids + c * ctx, ctx, true, lg));
        TRY(runner_feed(&rr, ids + c * ctx, ctx, true, lr));
        ids[c * ctx] = saved;
        for (int j = ctx / 2; j < ctx - 1; j++) {
            const float *a = lg + (size_t)j * 512, *b = lr + (size_t)j * 512;
            nll -= logits_logprob(a, 512, ids[c * ctx + j + 1]);
            kl += logits_kld(b, a, 512);
            agree += logits_argmax(a, 512) == logits_argmax(b, 512);
            scored++;
        }
    }
    *ppl = exp(nll / scored);
    *kld_mean = kl / scored;
    *top1 = (double)agree / scored;
    free(lg); free(lr); free(ids);
    runner_free(&r);
    runner_free(&rr);
    return 0;
}

TEST(perplexity_and_fp8_bounds) {
    double want = json_number_value(json_object_get(json_object_get(json_object_get(pplj, "results"), "256"), "ppl"));
    double p32, k32, t32, p8, k8, t8, p5, k5, t5;
    CHECK_OK(ppl_of("fp32", 256, &p32, &k32, &t32));
    CHECK_NEAR(p32, want, 1e-3 * want);
    CHECK(k32 < 1e-12 && t32 == 1.0);
    CHECK_OK(ppl_of("fp8", 256, &p8, &k8, &t8));
    CHECK_OK(ppl_of("fp8_e5m2", 256, &p5, &k5, &t5));
    fprintf(stderr, "  ppl fp32 %.4f (ref %.4f)  fp8 %.4f (KLD %.2e, top1 %.4f)  e5m2 %.4f (KLD %.2e, top1 %.4f)\n",
            p32, want, p8, k8, t8, p5, k5, t5);
    // Bounds sit just above what e4m3/e5m2 rounding of K costs on this model (head_dim 8,
    // |K| up to ~27): tools/ref shows the same +2.5-3% in float64 with K alone rounded.
    CHECK_MSG(fabs(p8 / p32 - 1) < 0.035, "fp8 ppl %.4f vs fp32 %.4f", p8, p32);
    CHECK_MSG(k8 < 0.03, "fp8 KLD %g", k8);
    CHECK_MSG(t8 > 0.90, "fp8 top-1 agreement %g", t8);
    CHECK_MSG(fabs(p5 / p32 - 1) < 0.12, "e5m2 ppl %.4f vs fp32 %.4f", p5, p32);
    CHECK_MSG(k5 < 0.15 && t5 > 0.8, "e5m2 KLD %g top-1 %g", k5, t5);
}

int main(void) {
    json_error_t je;
    greedy = json_load_file("tests/golden/stories260K_greedy.json", 0, &je);
    pplj = json_load_file("tests/golden/stories260K_ppl.json", 0, &je);
    if (!greedy || !pplj) { fprintf(stderr, "golden fixtures: %s\n", je.text); return 1; }
    if (model_load(&model, SHARED_MODEL("stories260K.gguf")) < 0) { fprintf(stderr, "%s\n", err_msg()); return 1; }
    RUN(greedy_matches_reference);
    RUN(teacher_forced_logits);
    RUN(perplexity_and_fp8_bounds);
    model_free(model);
    json_decref(greedy);
    json_decref(pplj);
    return test_summary("golden");
}
