// test_constrained_reply.c — constrained replies (JSON mode; tool_choice "required" in the hermes format): JSON's
// byte grammar (src/base/json_prefix.c) against jansson on thousands of mutated texts (every prefix of a text
// jansson reads is accepted, and a text the grammar calls whole is one jansson reads, as an object where only
// objects are asked; UTF-8 in strings checked as jansson checks it); the hermes calls' grammar
// (src/engine/reply_grammar.c: names that are prefixes of others, one call or several, what it refuses); the
// vocabulary mask (src/engine/reply_mask.c) against feeding every token of Qwen3's and stories260K's
// vocabularies to the state by hand, from states inside strings, numbers, literals, escapes, UTF-8 characters
// and every part of a call; and the engine on stories260K, whose constrained replies, greedy and sampled,
// concurrent, are beginnings the grammar allows token by token and whole where they stop (a logit_bias on
// "}", which the mask keeps only where the grammar lets it come, makes some of them stop): an object jansson
// reads, calls the hermes parser reads.
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/base/json_prefix.h"
#include "../../src/engine/engine.h"
#include "../../src/engine/reply_mask.h"
#include "../../src/server/tool_calls.h"
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

static const char *const NAMES[3] = {"get", "get_time", "weather"};
static const struct reply_spec JSON_SPEC = {.kind = REPLY_JSON_OBJECT};
static const struct reply_spec CALLS = {.kind = REPLY_HERMES_CALLS, .names = NAMES, .n_names = 3};
static const struct reply_spec ONE_CALL = {.kind = REPLY_HERMES_CALLS, .names = NAMES, .n_names = 3, .single = true};

// Feeds text a byte at a time: -1 at the first byte refused, else whether it is whole.
static int feed_all(const struct reply_spec *spec, const char *text) {
    struct reply_state st;
    reply_state_init(&st, spec);
    for (size_t i = 0; text[i]; i++)
        if (reply_feed(&st, text + i, 1) < 0) return -1;
    return reply_whole(&st);
}

TEST(hermes_calls_grammar) {
    const char *one = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\", \"n\": [1]}}\n</tool_call>";
    char two[512];
    snprintf(two, sizeof two, "%s\n<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>", one);
    CHECK(feed_all(&CALLS, one) == 1 && feed_all(&ONE_CALL, one) == 1 && feed_all(&CALLS, two) == 1);
    CHECK(feed_all(&ONE_CALL, two) == -1);  // (one call only)
    char part[512];
    for (size_t k = 0; k < strlen(two); k++) {  // every beginning is allowed, whole only where a call ends
        snprintf(part, sizeof part, "%.*s", (int)k, two);
        const int w = feed_all(&CALLS, part);
        CHECK_MSG(w == (k == strlen(one)), "'%s': %d", part, w);
    }
    static const char *bad[] = {"<tool_call> {", "<tool_call>\n{\"name\": \"gett", "<tool_call>\n{\"name\": \"weat\"",
                                "<tool_call>\n{\"name\": \"time\"", "<tool_call>\n{\"name\": \"get\", \"arguments\": [",
                                "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}</tool_call>", "{\"a\": 1}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_MSG(feed_all(&CALLS, bad[i]) == -1, "%s", bad[i]);
    CHECK(feed_all(&JSON_SPEC, "{\"a\": 1}") == 1 && feed_all(&JSON_SPEC, one) == -1);
    const char *quote[1] = {"a\"b"};
    const struct reply_spec escaped = {.kind = REPLY_HERMES_CALLS, .names = quote, .n_names = 1};
    CHECK(reply_spec_check(&escaped) < 0 && strstr(err_msg(), "escapes"));
}

// reply_mask from the state after prefix, against each token fed to that state by hand.
static void mask_by_hand(const struct reply_vocab *v, const struct reply_spec *spec, const char *prefix,
                         const int32_t *stops, int n_stop) {
    struct reply_state st;
    reply_state_init(&st, spec);
    CHECK_MSG(reply_feed(&st, prefix, strlen(prefix)) == 0, "%s", prefix);
    float *lg = malloc(sizeof(float) * (size_t)(v->n_vocab + 3)), *out = malloc(sizeof(float) * (size_t)(v->n_vocab + 3));
    for (int i = 0; i < v->n_vocab + 3; i++) lg[i] = (float)(i % 17);
    const int kept = reply_mask(v, &st, stops, n_stop, lg, out, v->n_vocab + 3);  // (3 ids past the tokenizer's)
    int want = 0, wrong = 0;
    for (int i = 0; i < v->n_vocab + 3; i++) {
        bool ok = false;
        if (i < v->n_vocab) {
            bool end = v->cls[i] == REPLY_TOK_EOG;
            for (int k = 0; k < n_stop; k++) end |= stops[k] == i;
            struct reply_state s = st;
            const uint32_t nb = v->off[i + 1] - v->off[i];
            ok = end ? reply_whole(&st) : nb && reply_feed(&s, v->bytes + v->off[i], nb) == 0;
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
    static const char *calls[] = {"", "<tool", "<tool_call>\n{\"name\": \"", "<tool_call>\n{\"name\": \"get",
                                  "<tool_call>\n{\"name\": \"get\", \"argu", "<tool_call>\n{\"name\": \"get\", "
                                  "\"arguments\": {\"x\": \"te", "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</to",
                                  "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>"};
    struct tokenizer *toks[2] = {NULL, NULL};
    CHECK_OK(tokenizer_from_hf_json(&toks[0], "tests/data/tok_qwen3/tokenizer.json"));
    struct model *m = NULL;
    CHECK_OK(model_load(&m, SHARED_MODEL("stories260K.gguf")));
    toks[1] = m ? m->tok : NULL;
    for (int t = 0; t < 2 && toks[t]; t++) {
        struct reply_vocab v;
        CHECK_OK(reply_vocab_build(&v, toks[t]));
        const int32_t stop = tokenizer_eos(toks[t]) >= 0 ? tokenizer_eos(toks[t]) + 1 : 5;  // (a stop id beside EOS)
        for (size_t k = 0; k < sizeof states / sizeof *states; k++) mask_by_hand(&v, &JSON_SPEC, states[k], &stop, 1);
        for (size_t k = 0; k < sizeof calls / sizeof *calls; k++) {
            mask_by_hand(&v, &CALLS, calls[k], &stop, 1);
            mask_by_hand(&v, &ONE_CALL, calls[k], &stop, 1);
        }
        reply_vocab_free(&v);
    }
    tokenizer_free(toks[0]);
    model_free(m);
}

// Replies of N requests at once on stories260K under spec (greedy, then seeded draws at two temperatures;
// "}" pushed in half of them: a story model ends no object of its own): each a beginning the spec allows,
// token by token, and whole where it stopped; returns how many stopped.
static int engine_replies(struct engine *e, const struct model *m, const struct reply_spec *spec) {
    enum { N = 8 };
    int32_t prompt[3] = {1, 400, 300};
    struct req_handle *h[N];
    struct logit_bias close[2] = {{.id = -1, .bias = 4.0f}, {.id = -1, .bias = 30.0f}};
    for (int i = 0; i < tokenizer_n_vocab(m->tok); i++) {
        char p[8];
        if (tokenizer_piece(m->tok, i, false, p, sizeof p) == 1 && p[0] == '}') close[0].id = close[1].id = i;
    }
    CHECK(close[0].id >= 0);
    for (int q = 0; q < N; q++) {
        struct gen_request g = {.prompt = prompt, .n_prompt = 3, .max_tokens = 400, .top_logprobs = -1, .reply = spec};
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
        struct reply_state st;
        reply_state_init(&st, spec);
        bool prefix = true;
        while (h[q] && req_next(h[q], &ev, 60000) == 1 && ev.kind == GEN_TOKEN) {
            char piece[64];
            size_t k = tokenizer_piece(m->tok, ev.token, false, piece, sizeof piece);
            if (tokenizer_is_eog(m->tok, ev.token)) continue;
            prefix &= reply_feed(&st, piece, k) == 0;
            if (n + k < sizeof text) memcpy(text + n, piece, k), n += k;
        }
        text[n] = 0;
        CHECK_MSG(ev.kind == GEN_FINISHED && prefix, "reply %d (%d): '%s'", q, ev.kind, text);
        if (ev.kind == GEN_FINISHED && !strcmp(ev.finish_reason, "stop")) {  // whole: jansson or the hermes parser
            size_t cn;                                                      // reads it
            json_t *v = spec->kind == REPLY_JSON_OBJECT ? json_loads(text, 0, NULL)
                                                        : tool_calls_parse(text, n, false, "x", &cn);
            CHECK_MSG(reply_whole(&st) && (spec->kind == REPLY_JSON_OBJECT ? json_is_object(v)
                                           : json_array_size(v) >= 1 && cn == 0), "reply %d stopped at '%s'", q, text);
            json_decref(v);
            stopped++;
        }
        if (h[q]) req_release(h[q]);
    }
    return stopped;
}

TEST(engine_replies) {
    struct model *m;
    CHECK_OK(model_load(&m, SHARED_MODEL("stories260K.gguf")));
    struct engine_options o;
    engine_options_default(&o);
    o.max_model_len = 512;
    o.n_threads = 2;
    o.sample_threads = 2;
    struct engine *e;
    CHECK_OK(engine_create(&e, m, &o));
    CHECK_MSG(engine_replies(e, m, &JSON_SPEC) > 0, "no JSON reply ended its object within 400 tokens");
    CHECK_MSG(engine_replies(e, m, &ONE_CALL) > 0, "no reply of one call ended within 400 tokens");
    engine_replies(e, m, &CALLS);  // (several calls: each reply checked as it goes, whether or not it stops)
    const char *quote[1] = {"a\"b"};
    const struct reply_spec escaped = {.kind = REPLY_HERMES_CALLS, .names = quote, .n_names = 1};
    int32_t prompt[2] = {1, 400};
    struct gen_request g = {.prompt = prompt, .n_prompt = 2, .max_tokens = 4, .top_logprobs = -1, .reply = &escaped};
    sampling_params_default(&g.sp);
    CHECK(engine_submit(e, &g) == NULL && strstr(err_msg(), "escapes"));
    engine_destroy(e);
    model_free(m);
}

// A reasoning block first (--reasoning-parser): the first token may open it or begin the grammar; inside it
// everything may come; its close starts the grammar, masked as from the beginning.
TEST(think_block_first) {
    struct tokenizer *t;
    CHECK_OK(tokenizer_from_hf_json(&t, "tests/data/tok_qwen3/tokenizer.json"));
    const int32_t open = tokenizer_token_id(t, "<think>", 7), close = tokenizer_token_id(t, "</think>", 8);
    CHECK(open >= 0 && close >= 0);
    struct reply_vocab v;
    CHECK_OK(reply_vocab_build(&v, t));
    const struct reply_spec spec = {.kind = REPLY_JSON_OBJECT, .think = true, .think_open = open, .think_close = close};
    const int n = v.n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)n), *a = malloc(sizeof(float) * (size_t)n);
    float *b = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) lg[i] = (float)(i % 11);
    struct reply_state st, plain;
    reply_state_init(&st, &spec);
    reply_state_init(&plain, &JSON_SPEC);
    const int first = reply_mask(&v, &st, NULL, 0, lg, a, n), grammar = reply_mask(&v, &plain, NULL, 0, lg, b, n);
    CHECK_MSG(first == grammar + 1 && a[open] == lg[open] && b[open] == -INFINITY && a[close] == -INFINITY,
              "first %d, grammar %d", first, grammar);
    CHECK_OK(reply_advance(&v, &st, NULL, 0, open));
    CHECK_EQ_INT(reply_mask(&v, &st, NULL, 0, lg, a, n), n);  // (inside: anything, an end too)
    CHECK_OK(reply_advance(&v, &st, NULL, 0, 100));  // (any token of the block's text)
    CHECK_OK(reply_advance(&v, &st, NULL, 0, close));
    CHECK_EQ_INT(reply_mask(&v, &st, NULL, 0, lg, a, n), grammar);
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)n));
    // DeepSeek-R1: the reply begins inside the block
    const struct reply_spec r1 = {.kind = REPLY_JSON_OBJECT, .think = true, .think_first = true, .think_open = open,
                                  .think_close = close};
    reply_state_init(&st, &r1);
    CHECK_EQ_INT(reply_mask(&v, &st, NULL, 0, lg, a, n), n);
    free(lg);
    free(a);
    free(b);
    reply_vocab_free(&v);
    tokenizer_free(t);
}

// The cache gives the masks reply_mask gives, bit for bit, along random walks of allowed tokens (JSON objects,
// calls, a <think> block first), and mostly from its slots.
TEST(cached_masks_are_the_masks) {
    struct tokenizer *t;
    CHECK_OK(tokenizer_from_hf_json(&t, "tests/data/tok_qwen3/tokenizer.json"));
    struct reply_vocab v;
    CHECK_OK(reply_vocab_build(&v, t));
    const int n = v.n_vocab + 3;
    const int32_t open = tokenizer_token_id(t, "<think>", 7), close = tokenizer_token_id(t, "</think>", 8);
    const struct reply_spec think = {.kind = REPLY_JSON_OBJECT, .think = true, .think_open = open, .think_close = close};
    const struct reply_spec *specs[4] = {&JSON_SPEC, &CALLS, &ONE_CALL, &think};
    float *lg = malloc(sizeof(float) * (size_t)n), *a = malloc(sizeof(float) * (size_t)n);
    float *b = malloc(sizeof(float) * (size_t)n);
    unsigned seed = 99;
    long hits = 0, steps = 0;
    for (int sp = 0; sp < 4; sp++)
        for (int walk = 0; walk < 6; walk++) {
            struct reply_state st;
            reply_state_init(&st, specs[sp]);
            struct reply_cache cache = {0};
            const int32_t stop = 7;
            for (int step = 0; step < 120; step++) {
                for (int i = 0; i < n; i++) lg[i] = (float)(json_rnd(&seed) % 1000) / 100.0f;
                const int ka = reply_mask(&v, &st, &stop, 1, lg, a, n);
                const int kb = reply_mask_cached(&v, &cache, &st, &stop, 1, lg, b, n);
                CHECK_MSG(ka == kb && !memcmp(a, b, sizeof(float) * (size_t)n), "spec %d walk %d step %d", sp, walk, step);
                if (ka == 0 || reply_whole(&st)) break;
                int pick = -1;  // (an allowed token, a structural one more often than the text would have it)
                for (int tries = 0; tries < 64 && pick < 0; tries++) {
                    const int i = (int)(json_rnd(&seed) % (unsigned)v.n_vocab);
                    if (a[i] != -INFINITY && (v.cls[i] != REPLY_TOK_PLAIN || tries > 8)) pick = i;
                }
                for (int i = 0; i < n && pick < 0; i++)
                    if (a[i] != -INFINITY) pick = i;
                CHECK_OK(reply_advance(&v, &st, &stop, 1, pick));
                steps++;
            }
            hits += cache.hits;
            reply_cache_free(&cache);
        }
    CHECK_MSG(hits > steps / 3, "%ld hits in %ld steps", hits, steps);
    free(lg);
    free(a);
    free(b);
    reply_vocab_free(&v);
    tokenizer_free(t);
}

int main(void) {
    RUN(grammar_against_jansson);
    RUN(hermes_calls_grammar);
    RUN(mask_against_each_token);
    RUN(think_block_first);
    RUN(cached_masks_are_the_masks);
    RUN(engine_replies);
    return test_summary("constrained_reply");
}
