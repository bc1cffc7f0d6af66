// test_sampler.c — greedy, temperature, top-k, top-p, min-p and seeding; tiny temperatures are
// greedy; NaN or +inf logits are an error; logit_bias, min_tokens and the repetition, frequency
// and presence penalties as vLLM defines them.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/engine/sampler.h"
#include "../test.h"

static const float logits[6] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};

static int draw(struct sampling_params p, int n, int *counts) {
    struct sampler s;
    if (sampler_init(&s, &p, 6) < 0) return -1;
    memset(counts, 0, 6 * sizeof(int));
    for (int i = 0; i < n; i++) counts[sampler_sample(&s, logits)]++;
    sampler_free(&s);
    return 0;
}

TEST(greedy_lowest_id_on_tie) {
    struct sampling_params p;
    sampling_params_default(&p);
    p.temperature = 0;
    int c[6];
    CHECK_OK(draw(p, 10, c));
    CHECK_EQ_INT(c[1], 10);
}

TEST(temperature_matches_softmax) {
    struct sampling_params p;
    sampling_params_default(&p);
    p.seed = 42;
    int c[6], n = 200000;
    CHECK_OK(draw(p, n, c));
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(logits[i]);
    for (int i = 0; i < 6; i++) {
        double want = exp(logits[i]) / z, got = (double)c[i] / n;
        CHECK_NEAR(got, want, 4 * sqrt(want * (1 - want) / n) + 1e-4);
    }
}

TEST(filters) {
    struct sampling_params p;
    sampling_params_default(&p);
    int c[6];
    p.top_k = 2;  // ids 1 and 3 only
    CHECK_OK(draw(p, 2000, c));
    CHECK(c[1] > 0 && c[3] > 0 && c[1] + c[3] == 2000);
    sampling_params_default(&p);
    p.top_p = 0.5f;  // 1 and 3 hold ~0.33 each: nucleus = {1, 3}
    CHECK_OK(draw(p, 2000, c));
    CHECK(c[1] + c[3] == 2000);
    sampling_params_default(&p);
    p.min_p = 0.3f;  // keeps p >= 0.3 * p_max: ids 1, 3, 2 (e^-1 = 0.37)
    CHECK_OK(draw(p, 4000, c));
    CHECK(c[0] == 0 && c[4] == 0 && c[5] == 0 && c[2] > 0);
}

TEST(seed_reproducible) {
    struct sampling_params p;
    sampling_params_default(&p);
    p.seed = 9;
    int a[6], b[6];
    CHECK_OK(draw(p, 1000, a));
    CHECK_OK(draw(p, 1000, b));
    CHECK(memcmp(a, b, sizeof a) == 0);
    p.seed = 10;
    CHECK_OK(draw(p, 1000, b));
    CHECK(memcmp(a, b, sizeof a) != 0);
}

TEST(bad_params) {
    struct sampling_params p;
    sampling_params_default(&p);
    p.temperature = -1;
    CHECK(sampling_params_check(&p) < 0 && strstr(err_msg(), "temperature"));
    sampling_params_default(&p);
    p.top_p = 0;
    CHECK(sampling_params_check(&p) < 0 && strstr(err_msg(), "top_p"));
    p.top_p = 1.5f;
    CHECK(sampling_params_check(&p) < 0);
    sampling_params_default(&p);
    p.min_p = -0.1f;
    CHECK(sampling_params_check(&p) < 0 && strstr(err_msg(), "min_p"));
}

TEST(logprob_and_kld) {
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(logits[i]);
    CHECK_NEAR(logits_logprob(logits, 6, 2), 2.0 - log(z), 1e-9);
    CHECK_NEAR(logits_kld(logits, logits, 6), 0, 1e-12);
    float shifted[6];
    for (int i = 0; i < 6; i++) shifted[i] = logits[i] + 5;  // same distribution
    CHECK_NEAR(logits_kld(logits, shifted, 6), 0, 1e-9);
    float other[6] = {0, 0, 0, 0, 0, 0};
    CHECK(logits_kld(logits, other, 6) > 0.1);
}

// logits_argmax against the one-pass definition (first index of the maximum, NaNs skipped, a
// NaN first entry kept) on ties, signed zeros, infinities, NaNs and every length 1..40
static int argmax_ref(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}
TEST(argmax_matches_definition) {
    float x[40];
    unsigned st = 7;
    const float special[6] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f};
    int bad = 0;
    for (int trial = 0; trial < 4000; trial++) {
        int n = 1 + trial % 40;
        for (int i = 0; i < n; i++) {
            st = st * 1103515245u + 12345u;
            unsigned r = (st >> 8) % 16;
            x[i] = r < 6 ? special[r] : (float)(int)(r % 5) - 2.0f;  // many ties
        }
        bad += logits_argmax(x, n) != argmax_ref(x, n);
    }
    CHECK_EQ_INT(bad, 0);
}

// logits_top_k against selection (the largest unused logit, the lowest id on ties), k = 0..12 on
// rows with many ties, and k past the row's length
TEST(top_k_matches_selection) {
    float x[30];
    int32_t ids[16], want[16];
    unsigned st = 11;
    int bad = 0;
    for (int trial = 0; trial < 3000; trial++) {
        int n = 1 + trial % 30, k = trial % 13;
        for (int i = 0; i < n; i++) {
            st = st * 1103515245u + 12345u;
            x[i] = (float)((st >> 8) % 7) - 3.0f;
        }
        int kk = k < n ? k : n;
        for (int j = 0; j < kk; j++) {
            int best = -1;
            for (int v = 0; v < n; v++) {
                bool used = false;
                for (int u = 0; u < j; u++) used |= want[u] == v;
                if (!used && (best < 0 || x[v] > x[best])) best = v;
            }
            want[j] = best;
        }
        bad += logits_top_k(x, n, k, ids) != kk;
        for (int j = 0; j < kk; j++) bad += ids[j] != want[j];
    }
    CHECK_EQ_INT(bad, 0);
    float m;
    double ls;
    logits_log_norm(logits, 6, &m, &ls);
    CHECK(m == 3.0f);
    CHECK((double)logits[2] - m - ls == logits_logprob(logits, 6, 2));
}

// The sampler sorts only the likeliest candidates; this is the whole-vocabulary sort it replaced
// (on the same probabilities). Both draw from identically seeded samplers: the ids must agree
// draw for draw.
static int ref_cmp(const void *a, const void *b, void *ctx) {
    const float *pr = ctx;
    float pa = pr[*(const int32_t *)a], pb = pr[*(const int32_t *)b];
    if (pa != pb) return pa < pb ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}
static int ref_sample(struct sampler *s, const float *lg) {
    int n = s->n_vocab;
    logits_softmax(lg, n, s->p.temperature, s->probs);
    for (int i = 0; i < n; i++) s->idx[i] = i;
    int n_keep = n;
    if ((s->p.top_k > 0 && s->p.top_k < n) || s->p.top_p < 1 || s->p.min_p > 0) {
        qsort_r(s->idx, (size_t)n, sizeof(int32_t), ref_cmp, s->probs);
        if (s->p.top_k > 0 && s->p.top_k < n_keep) n_keep = s->p.top_k;
        if (s->p.top_p < 1) {
            double cum = 0;
            for (int i = 0; i < n_keep; i++) { cum += s->probs[s->idx[i]]; if (cum >= s->p.top_p) { n_keep = i + 1; break; } }
        }
        if (s->p.min_p > 0) {
            float thr = s->p.min_p * s->probs[s->idx[0]];
            int k = 1;
            while (k < n_keep && s->probs[s->idx[k]] >= thr) k++;
            n_keep = k;
        }
    }
    double total = 0;
    for (int i = 0; i < n_keep; i++) total += s->probs[s->idx[i]];
    double r = rng_double(&s->rng) * total, cum = 0;
    for (int i = 0; i < n_keep; i++) { cum += s->probs[s->idx[i]]; if (r < cum) return s->idx[i]; }
    return s->idx[n_keep - 1];
}
TEST(filters_match_whole_sort) {
    enum { NV = 3000 };
    static float lg[NV];
    unsigned st = 5;
    const float temps[3] = {0.3f, 1.0f, 2.5f}, tops[4] = {1.0f, 0.5f, 0.95f, 0.9999999f}, minps[3] = {0.0f, 0.05f, 1e-6f};
    const int topks[4] = {0, 1, 40, 2999};
    int bad = 0, cases = 0;
    for (int c = 0; c < 3 * 4 * 3 * 4; c++) {
        struct sampling_params p;
        sampling_params_default(&p);
        p.temperature = temps[c % 3];
        p.top_p = tops[c / 3 % 4];
        p.min_p = minps[c / 12 % 3];
        p.top_k = topks[c / 36 % 4];
        p.seed = (uint64_t)c;
        struct sampler a, b;
        CHECK_OK(sampler_init(&a, &p, NV));
        CHECK_OK(sampler_init(&b, &p, NV));
        for (int draw = 0; draw < 6; draw++) {
            for (int i = 0; i < NV; i++) {  // a few large logits over a flat tail, with ties
                st = st * 1103515245u + 12345u;
                unsigned r = st >> 8;
                lg[i] = r % 97 == 0 ? 8.0f + (float)(r % 5) : (float)(r % 23) * 0.25f - 3.0f;
            }
            bad += sampler_sample(&a, lg) != ref_sample(&b, lg);
            cases++;
        }
        sampler_free(&a);
        sampler_free(&b);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(cases, 864);
}

// logits_softmax's fast e^x: within 5e-7 relative of exp() over [-87, 0] (normalised), 0 below, NaN kept
TEST(softmax_exp_accuracy) {
    enum { N = 4001 };
    static float lg[N], pr[N];
    for (int i = 0; i < N; i++) lg[i] = -87.0f * i / (N - 1);  // logit 0 is the max: probs[i] = e^lg[i] / Σ
    logits_softmax(lg, N, 1.0f, pr);
    double z = 0, worst = 0;
    for (int i = 0; i < N; i++) z += exp((double)lg[i]);
    for (int i = 0; i < N; i++) {
        double want = exp((double)lg[i]) / z, rel = fabs(pr[i] - want) / want;
        if (want > 1e-37 && rel > worst) worst = rel;
    }
    CHECK(worst < 5e-7);
    float two[3] = {0.0f, -100.0f, -INFINITY}, p2[3];
    logits_softmax(two, 3, 1.0f, p2);
    CHECK(p2[0] == 1.0f && p2[1] == 0.0f && p2[2] == 0.0f);
    float nan3[3] = {1.0f, NAN, 0.0f}, p3[3];
    logits_softmax(nan3, 3, 1.0f, p3);
    CHECK(isnan(p3[1]));
}

// 0 < T below SAMPLER_GREEDY_EPS (down to denormals, where 1/T is inf) draws the argmax.
TEST(tiny_temperature_is_greedy) {
    const float ts[] = {1e-39f, 1.4e-45f, 2.9e-39f, 1e-6f, 9.9e-6f};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        struct sampling_params p;
        sampling_params_default(&p);
        p.temperature = ts[i];
        p.seed = i;
        int c[6];
        CHECK_OK(draw(p, 50, c));
        CHECK_MSG(c[1] == 50, "T=%g: argmax drawn %d of 50", ts[i], c[1]);
    }
}

// A row with NaN or +inf is an error (greedy or not), never a token.
TEST(nan_logits_are_an_error) {
    float bad[6] = {1.0f, 3.0f, NAN, 3.0f, -1.0f, 0.5f}, inf[6] = {1.0f, INFINITY, 2.0f, 3.0f, -1.0f, 0.5f};
    for (int greedy = 0; greedy < 2; greedy++) {
        struct sampling_params p;
        sampling_params_default(&p);
        p.temperature = greedy ? 0 : 0.7f;
        struct sampler s;
        CHECK_OK(sampler_init(&s, &p, 6));
        CHECK(sampler_sample(&s, bad) < 0 && strstr(err_msg(), "NaN"));
        CHECK(sampler_sample(&s, inf) < 0);
        float masked[6] = {1.0f, -INFINITY, 2.0f, 3.0f, -INFINITY, 0.5f};  // -inf is a masked token
        int id = sampler_sample(&s, masked);
        CHECK(id >= 0 && id != 1 && id != 4);
        sampler_free(&s);
    }
}

// The greedy pick after processing, with output[0..n_out) and prompt[0..n_prompt).
static int pick(struct sampling_params p, const float *lg, const int32_t *prompt, int n_prompt, const int32_t *out,
                int n_out) {
    struct sampler s;
    if (sampler_init(&s, &p, 6) < 0) return -1;
    int id = sampler_sample_seq(&s, lg, prompt, n_prompt, out, n_out);
    int again = sampler_sample(&s, lg);  // (no sequence: the counts were reset, the bias stays)
    sampler_free(&s);
    return again == (p.n_bias ? id : 1) ? id : -2;
}

TEST(penalties_and_bias) {
    struct sampling_params p;
    sampling_params_default(&p);
    p.temperature = 0;
    int32_t one[1] = {1}, three3[2] = {3, 3}, pr[2] = {1, 3};
    p.presence_penalty = 0.5f;  // id 1: 3 - 0.5 → id 3 wins
    CHECK_EQ_INT(pick(p, logits, NULL, 0, one, 1), 3);
    CHECK_EQ_INT(pick(p, logits, one, 1, NULL, 0), 1);  // the prompt does not count
    sampling_params_default(&p);
    p.temperature = 0;
    p.frequency_penalty = 0.3f;  // id 3: 3 - 2 * 0.3 = 2.4 → id 1
    CHECK_EQ_INT(pick(p, logits, NULL, 0, three3, 2), 1);
    p.frequency_penalty = -0.3f;  // negative: encourages repeats; id 3 wins the tie-break it lost
    CHECK_EQ_INT(pick(p, logits, NULL, 0, three3, 2), 3);
    sampling_params_default(&p);
    p.temperature = 0;
    p.repetition_penalty = 2.0f;  // prompt ids 1 and 3: 3 / 2 = 1.5 → id 2 (2.0)
    CHECK_EQ_INT(pick(p, logits, pr, 2, NULL, 0), 2);
    CHECK_EQ_INT(pick(p, logits, one, 1, three3, 2), 2);  // prompt or output, each once
    float neg[6] = {-0.5f, -0.6f, -3.0f, -3.0f, -3.0f, -3.0f};
    p.repetition_penalty = 1.5f;  // negative logits are multiplied: -0.75 < -0.6
    struct sampler s;
    CHECK_OK(sampler_init(&s, &p, 6));
    int32_t zero[1] = {0};
    CHECK_EQ_INT(sampler_sample_seq(&s, neg, zero, 1, NULL, 0), 1);
    CHECK_EQ_INT(sampler_sample_seq(&s, neg, NULL, 0, NULL, 0), 0);
    sampler_free(&s);
    // logit_bias: added to the logit
    struct logit_bias b[2] = {{.id = 4, .bias = 10.0f}, {.id = 1, .bias = -100.0f}};
    sampling_params_default(&p);
    p.temperature = 0;
    p.bias = b;
    p.n_bias = 1;
    CHECK_EQ_INT(pick(p, logits, NULL, 0, NULL, 0), 4);
    b[0].bias = -100.0f;  // ids 1 and 4 out: drawn with temperature, never seen
    p.n_bias = 2;
    p.temperature = 1.0f;
    int c[6];
    CHECK_OK(draw(p, 3000, c));
    CHECK(c[1] == 0 && c[4] == 0 && c[3] > 0);
    b[0].id = 6;
    CHECK(sampler_init(&s, &p, 6) < 0 && strstr(err_msg(), "vocabulary"));
}

// min_tokens: the mask ids cannot be drawn before the output holds that many tokens.
TEST(min_tokens_masks_stops) {
    struct sampling_params p;
    sampling_params_default(&p);
    p.temperature = 0;
    int32_t mask[2] = {1, 3}, out[2] = {0, 0};
    p.mask_ids = mask;
    p.n_mask = 2;
    p.min_tokens = 2;
    struct sampler s;
    CHECK_OK(sampler_init(&s, &p, 6));
    CHECK_EQ_INT(sampler_sample_seq(&s, logits, NULL, 0, out, 0), 2);
    CHECK_EQ_INT(sampler_sample_seq(&s, logits, NULL, 0, out, 1), 2);
    CHECK_EQ_INT(sampler_sample_seq(&s, logits, NULL, 0, out, 2), 1);
    float all[6] = {-INFINITY, 2.0f, -INFINITY, 1.0f, -INFINITY, -INFINITY};
    CHECK(sampler_sample_seq(&s, all, NULL, 0, out, 0) < 0 && strstr(err_msg(), "masked"));
    sampler_free(&s);
    p.repetition_penalty = 0;
    CHECK(sampler_init(&s, &p, 6) < 0 && strstr(err_msg(), "repetition_penalty"));
}

int main(void) {
    RUN(greedy_lowest_id_on_tie);
    RUN(argmax_matches_definition);
    RUN(top_k_matches_selection);
    RUN(filters_match_whole_sort);
    RUN(softmax_exp_accuracy);
    RUN(temperature_matches_softmax);
    RUN(filters);
    RUN(seed_reproducible);
    RUN(bad_params);
    RUN(logprob_and_kld);
    RUN(tiny_temperature_is_greedy);
    RUN(nan_logits_are_an_error);
    RUN(penalties_and_bias);
    RUN(min_tokens_masks_stops);
    return test_summary("sampler");
}
