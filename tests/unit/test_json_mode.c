// test_json_mode.c — JSON mode (response_format json_object): the byte grammar (src/base/json_prefix.c)
// against jansson on thousands of mutated texts (every prefix of a text jansson reads is accepted, and a text
// the grammar calls whole is one jansson reads, as an object where only objects are asked; UTF-8 in strings
// checked as jansson checks it); the vocabulary mask (src/engine/json_mask.c) against feeding every token of
// Qwen3's and stories260K's vocabularies to the state by hand, from states inside strings, numbers, literals,
// escapes and UTF-8 characters; and the engine on stories260K, whose replies under JSON mode, greedy and
// sampled, concurrent, are JSON objects' beginnings token by token and whole objects where they stop (a
// logit_bias on "}", which the mask keeps only where the grammar lets it come, makes some of them stop).
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/base/json_prefix.h"
#include "../../src/engine/engine.h"
#include "../../src/engine/json_mask.h"
#include "../../src/model/model.h"
#include "../test.h"
#include "json_mutants.h"

// Every prefix of t[0..n) begins a JSON text; returns whether all of it is whole.
static int prefixes_ok(const char *t, size_t n, bool obj, bool *whole) {
    struct jp s;
    jp_init(&s, obj);
    for (size_t i = 0; i < n; i++)
        if (jp_feed(&s, t + i, 1) < 0) return -1;
    *whole = jp_complete(&s);
    return 0;
}

TEST(grammar_against_jansson) {
    unsigned seed = 777;
    int n_valid = 0, n_whole = 0, n_bad = 0;
    for (int it = 0; it < 30000; it++) {
        char t[300];
        size_t n = json_mutant(t, sizeof t, &seed);
        while (n && strchr(" \t\n\r", t[n - 1])) n--;  // (the grammar lets nothing follow the value,
        size_t lead = 0;                                  // and 2 bytes of whitespace come before it)
        while (lead < n && strchr(" \t\n\r", t[lead])) lead++;
        if (lead > 2) memmove(t, t + lead - 2, n + 1 - (lead - 2)), n -= lead - 2;
        for (int obj = 0; obj < 2; obj++) {
            json_error_t e;
            json_t *v = json_loadb(t, n, JSON_DECODE_ANY, &e);
            if (!v && e.text[0] == 0) snprintf(e.text, sizeof e.text, "?");
            const bool number = v && (json_is_number(v)), reads = v && (!obj || json_is_object(v));
            bool whole = false;
            const int ok = prefixes_ok(t, n, obj, &whole);
            if (reads) {  // every prefix begins a JSON text, and all of it is whole (a bare number: not yet)
                CHECK_MSG(ok == 0 && whole == !number, "obj %d '%.*s': ok %d whole %d", obj, (int)n, t, ok, whole);
                n_valid++;
            }
            const bool range = !v && (strstr(e.text, "overflow") || strstr(e.text, "too big"));  // (JSON has no limit)
            if (ok == 0 && whole && !range) {  // what the grammar calls whole, jansson reads
                CHECK_MSG(reads, "obj %d '%.*s' whole, but jansson: %s", obj, (int)n, t, v ? "not an object" : e.text);
                n_whole++;
            }
            n_bad += !v;
            json_decref(v);
        }
    }
    CHECK_MSG(n_valid > 5000 && n_whole > 5000 && n_bad > 5000, "%d valid, %d whole, %d not JSON", n_valid, n_whole, n_bad);
    // UTF-8 inside strings as jansson reads it: overlong forms, surrogates, past U+10FFFF, stray bytes refused
    static const char *utf8[] = {"\"\xC0\x80\"", "\"\xE0\x80\x80\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"",
                                 "\"\xF5\x80\x80\x80\"", "\"\x80\"", "\"\xC3\"", "\"\xE4\xB8\"", "\"\xC3\xA9\"",
                                 "\"\xED\x9F\xBF\"", "\"\xF0\x90\x80\x80\"", "\"\xF4\x8F\xBF\xBF\""};
    for (size_t i = 0; i < sizeof utf8 / sizeof *utf8; i++) {
        json_t *v = json_loads(utf8[i], JSON_DECODE_ANY, NULL);
        bool whole = false;
        const bool ok = prefixes_ok(utf8[i], strlen(utf8[i]), false, &whole) == 0 && whole;
        CHECK_MSG(ok == (v != NULL), "utf8 case %zu: grammar %d, jansson %d", i, ok, v != NULL);
        json_decref(v);
    }
}

// json_mask from the state after prefix, against each token fed to that state by hand.
static void mask_by_hand(const struct json_vocab *v, const char *prefix, const int32_t *stops, int n_stop) {
    struct jp st;
    jp_init(&st, true);
    CHECK_MSG(jp_feed(&st, prefix, strlen(prefix)) == 0, "%s", prefix);
    float *lg = malloc(sizeof(float) * (size_t)(v->n_vocab + 3)), *out = malloc(sizeof(float) * (size_t)(v->n_vocab + 3));
    for (int i = 0; i < v->n_vocab + 3; i++) lg[i] = (float)(i % 17);
    const int kept = json_mask(v, &st, stops, n_stop, lg, out, v->n_vocab + 3);  // (3 ids past the tokenizer's)
    int want = 0, wrong = 0;
    for (int i = 0; i < v->n_vocab + 3; i++) {
        bool ok = false;
        if (i < v->n_vocab) {
            bool end = v->cls[i] == JSON_TOK_EOG;
            for (int k = 0; k < n_stop; k++) end |= stops[k] == i;
            struct jp s = st;
            const uint32_t nb = v->off[i + 1] - v->off[i];
            ok = end ? jp_complete(&st) : nb && !jp_complete(&st) && jp_feed(&s, v->bytes + v->off[i], nb) == 0;
        }
        want += ok;
        wrong += ok != (out[i] == lg[i]) || (!ok && out[i] != -INFINITY);
    }
    CHECK_MSG(!wrong && kept == want, "after '%s': %d wrong, %d kept, %d allowed", prefix, wrong, kept, want);
    free(lg);
    free(out);
}

TEST(mask_against_each_token) {
    static const char *states[] = {"", " ", "{", "{\"", "{\"ke", "{\"key\"", "{\"key\": ", "{\"a\": \"te",
                                   "{\"a\": \"\\", "{\"a\": \"\\u00", "{\"a\": \"\\ud83d", "{\"a\": \"\xE4\xB8",
                                   "{\"a\": -", "{\"a\": 0", "{\"a\": 12.5e", "{\"a\": tr", "{\"a\": [1, ",
                                   "{\"a\": [{}, {\"b\": null}", "{\"a\": 1}"};
    struct tokenizer *toks[2] = {NULL, NULL};
    CHECK_OK(tokenizer_from_hf_json(&toks[0], "tests/data/tok_qwen3/tokenizer.json"));
    struct model *m = NULL;
    CHECK_OK(model_load(&m, SHARED_MODEL("stories260K.gguf")));
    toks[1] = m ? m->tok : NULL;
    for (int t = 0; t < 2 && toks[t]; t++) {
        struct json_vocab v;
        CHECK_OK(json_vocab_build(&v, toks[t]));
        const int32_t stop = tokenizer_eos(toks[t]) >= 0 ? tokenizer_eos(toks[t]) + 1 : 5;  // (a stop id beside EOS)
        for (size_t k = 0; k < sizeof states / sizeof *states; k++) mask_by_hand(&v, states[k], &stop, 1);
        json_vocab_free(&v);
    }
    tokenizer_free(toks[0]);
    model_free(m);
}

TEST(engine_replies_are_json) {
    struct model *m;
    CHECK_OK(model_load(&m, SHARED_MODEL("stories260K.gguf")));
    struct engine_options o;
    engine_options_default(&o);
    o.max_model_len = 512;
    o.n_threads = 2;
    o.sample_threads = 2;
    struct engine *e;
    CHECK_OK(engine_create(&e, m, &o));
    enum { N = 8 };
    int32_t prompt[3] = {1, 400, 300};
    struct req_handle *h[N];
    // "}" pushed (a story model ends no object of its own): a little, and wherever the grammar lets it come
    struct logit_bias close[2] = {{.id = -1, .bias = 4.0f}, {.id = -1, .bias = 30.0f}};
    for (int i = 0; i < tokenizer_n_vocab(m->tok); i++) {
        char p[8];
        if (tokenizer_piece(m->tok, i, false, p, sizeof p) == 1 && p[0] == '}') close[0].id = close[1].id = i;
    }
    CHECK(close[0].id >= 0);
    for (int q = 0; q < N; q++) {  // concurrent: greedy, then seeded draws at two temperatures; "}" pushed in half
        struct gen_request g = {.prompt = prompt, .n_prompt = 3, .max_tokens = 400, .top_logprobs = -1,
                                .json_object = true};
        sampling_params_default(&g.sp);
        g.sp.temperature = q == 0 ? 0.0f : q < 4 ? 0.8f : 1.5f;
        g.sp.seed = (uint64_t)q;
        if (q % 2) g.sp.bias = &close[q % 4 == 3], g.sp.n_bias = 1;
        h[q] = engine_submit(e, &g);
        CHECK(h[q] != NULL);
    }
    int stopped = 0;
    for (int q = 0; q < N; q++) {
        char text[4096];
        size_t n = 0;
        struct gen_event ev = {0};
        struct jp st;
        jp_init(&st, true);
        bool prefix = true;
        while (h[q] && req_next(h[q], &ev, 60000) == 1 && ev.kind == GEN_TOKEN) {
            char piece[64];
            size_t k = tokenizer_piece(m->tok, ev.token, false, piece, sizeof piece);
            if (tokenizer_is_eog(m->tok, ev.token)) continue;
            prefix &= jp_feed(&st, piece, k) == 0;
            if (n + k < sizeof text) memcpy(text + n, piece, k), n += k;
        }
        text[n] = 0;
        const char *first = text + strspn(text, " \t\n\r");
        CHECK_MSG(ev.kind == GEN_FINISHED && prefix && *first == '{', "reply %d (%d): '%s'", q, ev.kind, text);
        if (ev.kind == GEN_FINISHED && !strcmp(ev.finish_reason, "stop")) {  // whole: an object jansson reads
            json_t *v = json_loads(text, 0, NULL);
            CHECK_MSG(json_is_object(v) && jp_complete(&st), "reply %d stopped at '%s'", q, text);
            json_decref(v);
            stopped++;
        }
        if (h[q]) req_release(h[q]);
    }
    CHECK_MSG(stopped > 0, "no reply of %d ended its object within 400 tokens", N);
    engine_destroy(e);
    model_free(m);
}

int main(void) {
    RUN(grammar_against_jansson);
    RUN(mask_against_each_token);
    RUN(engine_replies_are_json);
    return test_summary("json_mode");
}
