// test_needle.c — the needle evaluations (src/tools/needle_attn.c, needle_model.c): the
// synthetic attention problem is deterministic, hits its target needle weight, and is
// retrieved with small error by fp32, bf16 and both FP8 formats on both attention paths at
// short length; passkey prompts respect their length and depth and the model run works.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/model/model.h"
#include "../../src/model/tokenizer.h"
#include "../../src/tools/needle_attn.h"
#include "../../src/tools/needle_model.h"
#include "../test.h"

#define MODEL SHARED_MODEL("stories260K.gguf")

TEST(attention_problem_is_deterministic) {
    struct needle_problem a, b;
    struct needle_shape s = {4, 2, 64, 0.0f};
    CHECK_OK(needle_problem_init(&a, s, 300, 0.5, 0.2, 7));
    CHECK_OK(needle_problem_init(&b, s, 300, 0.5, 0.2, 7));
    CHECK(a.k && b.k && !memcmp(a.k, b.k, 300 * 2 * 64 * sizeof(float)) && !memcmp(a.ref, b.ref, 4 * 64 * sizeof(double)));
    CHECK_EQ_INT(a.needle_pos, 150);
    CHECK_NEAR(a.needle_weight, 0.2, 0.1);  // exact for each group's first head, close for the rest
    needle_problem_free(&a);
    needle_problem_free(&b);
    CHECK(needle_problem_init(&a, s, 300, 0.5, 1.5, 7) < 0 && strstr(err_msg(), "--needle-weight"));
    CHECK(needle_problem_init(&a, s, 8, 0.5, 0.2, 7) < 0);
}

TEST(attention_retrieval_short) {
    struct backend *b = backend_cpu_create(2);
    CHECK(b != NULL);
    if (!b) return;
    struct needle_shape shapes[2] = {{1, 1, 128, 0.0f}, {32, 8, 128, 0.0f}};
    for (int si = 0; si < 2; si++) {
        struct needle_problem p;
        CHECK_OK(needle_problem_init(&p, shapes[si], 1024, 0.5, 0.2, 1234));
        static const enum dtype dts[4] = {DT_F32, DT_BF16, DT_E4M3, DT_E5M2};
        static const double tol[4] = {1e-5, 1e-2, 0.2, 0.4};
        for (int d = 0; d < 4; d++)
            for (int math = 0; math < 2; math++) {
                struct needle_result r;
                struct needle_run run = {.dt = dts[d], .math = math ? ATTN_FP8_EMULATE : ATTN_FP8_EXACT, .cos_threshold = 0.3};
                CHECK_OK(needle_problem_run(&p, b, &run, &r));
                CHECK_MSG(r.retrieved, "%s math %d heads %d: cos %g vs distractor %g", dtype_name(dts[d]), math,
                          shapes[si].n_heads, r.cos_needle, r.cos_distractor);
                CHECK_MSG(r.rel_l2 < tol[d], "%s math %d: rel L2 %g", dtype_name(dts[d]), math, r.rel_l2);
                if (dts[d] == DT_E4M3) CHECK(r.rel_l2 > 1e-4);  // FP8 really quantized
            }
        // calibrated scales keep e4m3 as accurate
        struct needle_result r1, rc;
        struct needle_run one = {.dt = DT_E4M3, .cos_threshold = 0.3}, cal = {.dt = DT_E4M3, .calibrated = true, .cos_threshold = 0.3};
        CHECK_OK(needle_problem_run(&p, b, &one, &r1));
        CHECK_OK(needle_problem_run(&p, b, &cal, &rc));
        CHECK(rc.retrieved && rc.rel_l2 < 0.1);
        needle_problem_free(&p);
    }
    b->ops->destroy(b);
}

// The CPU's model of the GPU's wgmma P·V accumulation (14 bits, cut toward zero): with V channels
// sharing a sign, keeping the sum in the MMA accumulator ("single") loses accuracy as the context
// grows, promoting it per tile ("two-level") or every 4 tiles does not. The GPU measured the same
// shape (bench/accuracy/RESULTS.md, "FP8 accumulation in the tensor-core prefill").
TEST(wgmma_accumulation_model) {
    struct backend *b = backend_cpu_create(2);
    CHECK(b != NULL);
    if (!b) return;
    struct needle_shape s = {1, 1, 128, 4.0f};
    static const int lens[2] = {2048, 16384};
    double e[2][3];
    static const int accs[3] = {0, 4, ATTN_ACC_SINGLE};
    for (int li = 0; li < 2; li++) {
        struct needle_problem p;
        CHECK_OK(needle_problem_init(&p, s, lens[li], 0.5, 0.2, 1234));
        for (int ai = 0; ai < 3; ai++) {
            struct needle_result r;
            struct needle_run run = {.dt = DT_E4M3, .math = ATTN_FP8_EMULATE, .accum = accs[ai], .cos_threshold = 0.3};
            CHECK_OK(needle_problem_run(&p, b, &run, &r));
            e[li][ai] = r.rel_l2;
        }
        needle_problem_free(&p);
        fprintf(stderr, "  L=%d rel L2: two-level %.4f every:4 %.4f single %.4f\n", lens[li], e[li][0], e[li][1], e[li][2]);
    }
    for (int li = 0; li < 2; li++) CHECK_NEAR(e[li][1], e[li][0], 0.1 * e[li][0]);  // every:4 ~ two-level
    CHECK_MSG(e[1][2] > 1.5 * e[1][0], "16k: single %g vs two-level %g", e[1][2], e[1][0]);
    CHECK_MSG(e[1][2] - e[1][0] > 2 * (e[0][2] - e[0][0]), "single's excess does not grow with length: %g -> %g",
              e[0][2] - e[0][0], e[1][2] - e[1][0]);
    b->ops->destroy(b);
}

TEST(passkey_prompts) {
    struct model *m;
    CHECK_OK(model_load(&m, MODEL));
    if (!m) return;
    struct passkey_recipe rc;
    CHECK_OK(passkey_recipe_init(&rc, m->tok));
    int prev_at = -1;
    for (int depth = 0; depth <= 100; depth += 25) {
        int32_t *ids;
        int n, at;
        CHECK_OK(passkey_prompt(&rc, 400, depth, "12345", &ids, &n, &at));
        CHECK_MSG(n <= 400 && n >= 390, "prompt of %d tokens", n);
        CHECK(at > prev_at);
        prev_at = at;
        if (depth == 0) CHECK_EQ_INT(at, rc.n_intro);
        char buf[4096];
        size_t len = tokenizer_decode(m->tok, ids, n, false, buf, sizeof buf - 1);
        buf[len < sizeof buf ? len : sizeof buf - 1] = 0;
        CHECK(strstr(buf, "The pass key is 12345. Remember it. 12345 is the pass key.") != NULL);
        CHECK(strstr(buf, "What is the pass key? The pass key is") != NULL);
        if (depth == 100) CHECK(strstr(buf, "12345 is the pass key. What is the pass key?") != NULL);
        free(ids);
    }
    int32_t *ids;
    int n, at;
    CHECK(passkey_prompt(&rc, 20, 50, "12345", &ids, &n, &at) < 0 && strstr(err_msg(), "--lengths"));
    // the model run: stories260K has no passkey skill, so only the mechanics are checked
    struct runner_options ro;
    runner_options_default(&ro);
    ro.max_ctx = 300;
    struct runner r;
    CHECK_OK(runner_init(&r, m, &ro));
    struct passkey_cell cell;
    struct passkey_opts po = {2, 6, 1};
    CHECK_OK(passkey_run_cell(&r, &rc, 256, 50, &po, &cell));
    CHECK(cell.trials == 2 && cell.correct >= 0 && cell.correct <= 2 && cell.prompt_tokens <= 256 && cell.sample[0]);
    runner_free(&r);
    passkey_recipe_free(&rc);
    model_free(m);
}

int main(void) {
    RUN(attention_problem_is_deterministic);
    RUN(attention_retrieval_short);
    RUN(wgmma_accumulation_model);
    RUN(passkey_prompts);
    return test_summary("needle");
}
