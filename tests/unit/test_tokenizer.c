// test_tokenizer.c — tokenizer tests (owns: checks of SPM against stories260K and a tiny SPM
// GGUF, byte-level BPE against hand-derived encodings of tests/data/tok_bpe* (made by
// tools/make_tok_fixtures.py), GGUF vs tokenizer.json agreement, detok UTF-8 safety, the byte
// stand-in, malformed-vocabulary errors, and a 1 MB SPM encode timing printed to stderr).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../src/base/check.h"
#include "../../src/model/gguf.h"
#include "../../src/model/tokenizer.h"
#include "../../src/model/tokenizer_impl.h"
#include "../test.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static struct tokenizer *load_gguf(const char *path) {
    struct gguf *g = NULL;
    struct tokenizer *t = NULL;
    CHECK_OK(gguf_open(&g, path));
    if (!g) return NULL;
    CHECK_OK(tokenizer_from_gguf(&t, g));
    gguf_close(g);  // the tokenizer copies what it needs
    return t;
}

static bool encode_eq(const struct tokenizer *t, const char *s, bool bos, bool special,
                      const int32_t *want, int n_want) {
    int32_t *ids = NULL;
    int n = -1;
    if (tokenizer_encode(t, s, strlen(s), bos, special, &ids, &n) < 0) {
        fprintf(stderr, "  encode '%s': %s\n", s, err_msg());
        return false;
    }
    bool ok = n == n_want && (n == 0 || memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    if (!ok) {
        fprintf(stderr, "  encode '%s' got [", s);
        for (int i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? ", " : "", ids[i]);
        fprintf(stderr, "] want [");
        for (int i = 0; i < n_want; i++) fprintf(stderr, "%s%d", i ? ", " : "", want[i]);
        fprintf(stderr, "]\n");
    }
    free(ids);
    return ok;
}
#define CHECK_ENC(t, s, bos, special, ...) do { static const int32_t w_[] = { __VA_ARGS__ }; \
    CHECK_MSG(encode_eq(t, s, bos, special, w_, N_OF(w_)), "%s", s); } while (0)
#define CHECK_ENC_EMPTY(t, s, bos) CHECK(encode_eq(t, s, bos, false, NULL, 0))

static bool round_trip(const struct tokenizer *t, const char *s, size_t len, bool bos) {
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(t, s, len, bos, false, &ids, &n) < 0) return false;
    char *buf = malloc(len + 16);
    size_t k = tokenizer_decode(t, ids, n, false, buf, len + 16);
    bool ok = k == len && memcmp(buf, s, len) == 0;
    if (!ok) fprintf(stderr, "  round trip '%.*s' -> '%.*s'\n", (int)len, s, (int)(k > len + 16 ? len + 16 : k), buf);
    free(buf);
    free(ids);
    return ok;
}

static const char *ROUND_TRIP[] = {
    "", " ", "  ", "hello", " leading", "trailing ", "multiple   spaces  here", "line\nbreak",
    "\n", "a\n\nb\n", "tab\tx", "é", "日本", "🙂", "mixed é 日本 🙂 text.", "Once upon a time, there was a girl.",
    "It's 12345 o'clock!!", "<s> not special", "\xff\xfe invalid \xc3", "x\r\ny",
};

// ---- SPM: stories260K ----

TEST(spm_stories_required) {
    struct tokenizer *t = load_gguf(SHARED_MODEL("stories260K.gguf"));
    if (!t) return;
    CHECK_EQ_INT(tokenizer_n_vocab(t), 512);
    CHECK_EQ_INT(tokenizer_bos(t), 1);
    CHECK_EQ_INT(tokenizer_eos(t), 2);
    CHECK(tokenizer_add_bos(t));
    CHECK(tokenizer_add_space_prefix(t));
    CHECK(tokenizer_chat_template(t) == NULL);
    CHECK(tokenizer_is_eog(t, 2) && !tokenizer_is_eog(t, 1) && !tokenizer_is_eog(t, 403));
    CHECK(!tokenizer_is_eog(t, -1) && !tokenizer_is_eog(t, 512));
    CHECK_ENC(t, "Once upon a time", true, false, 1, 403, 407, 261, 378);
    CHECK_ENC(t, "Once upon a time", false, false, 403, 407, 261, 378);
    CHECK_ENC(t, "", true, false, 1);
    CHECK_ENC_EMPTY(t, "", false);
    // Byte fallback: ü = C3 BC is not in the vocabulary (<0xNN> = 3 + NN); é is (485).
    CHECK_ENC(t, "ü", true, false, 1, 410, 3 + 0xC3, 3 + 0xBC);
    CHECK_ENC(t, "é", true, false, 1, 410, 485);
    CHECK_ENC(t, "日本", false, false, 410, 3 + 0xE6, 3 + 0x97, 3 + 0xA5, 3 + 0xE6, 3 + 0x9C, 3 + 0xAC);
    int32_t *ids = NULL;
    int n = 0;
    CHECK_OK(tokenizer_encode(t, "\xf0\x9f\x99\x82", 4, false, false, &ids, &n));
    CHECK(n >= 4 && ids[n - 4] == 3 + 0xF0 && ids[n - 1] == 3 + 0x82);
    free(ids);
    char buf[64];
    CHECK_EQ_INT(tokenizer_piece(t, 403, false, buf, sizeof buf), 5);
    CHECK(memcmp(buf, " Once", 5) == 0);  // raw piece keeps the space
    CHECK_EQ_INT(tokenizer_piece(t, 1, false, buf, sizeof buf), 0);
    CHECK_EQ_INT(tokenizer_piece(t, 1, true, buf, sizeof buf), 3);
    CHECK_EQ_INT(tokenizer_piece(t, 3 + 0x0A, false, buf, sizeof buf), 1);
    CHECK(buf[0] == '\n');
    CHECK_EQ_INT(tokenizer_piece(t, 403, false, buf, 2), 5);  // size reported, 2 bytes written
    CHECK_EQ_INT(tokenizer_piece(t, 9999, false, buf, sizeof buf), 0);
    const int32_t once[] = { 1, 403, 407, 261, 378 };
    size_t k = tokenizer_decode(t, once, 5, false, buf, sizeof buf);
    CHECK(k == 16 && memcmp(buf, "Once upon a time", 16) == 0);
    k = tokenizer_decode(t, once + 1, 4, false, buf, sizeof buf);  // without BOS: same
    CHECK(k == 16 && memcmp(buf, "Once upon a time", 16) == 0);
    tokenizer_free(t);
}

TEST(spm_stories_round_trip) {
    struct tokenizer *t = load_gguf(SHARED_MODEL("stories260K.gguf"));
    if (!t) return;
    for (int i = 0; i < N_OF(ROUND_TRIP); i++) {
        CHECK_MSG(round_trip(t, ROUND_TRIP[i], strlen(ROUND_TRIP[i]), true), "[%d]", i);
        CHECK_MSG(round_trip(t, ROUND_TRIP[i], strlen(ROUND_TRIP[i]), false), "[%d]", i);
    }
    CHECK(round_trip(t, "a\0b", 3, true));
    // Spaces: the prefix adds one ▁, decode removes exactly one.
    int32_t *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    CHECK_OK(tokenizer_encode(t, "hi", 2, false, false, &a, &na));
    CHECK_OK(tokenizer_encode(t, " hi", 3, false, false, &b, &nb));
    CHECK(nb > na || (nb == na && memcmp(a, b, (size_t)na * 4) != 0));
    free(a);
    free(b);
    tokenizer_free(t);
}

TEST(spm_special) {
    struct tokenizer *t = load_gguf(SHARED_MODEL("stories260K.gguf"));
    if (!t) return;
    int32_t *ids = NULL;
    int n = 0;
    CHECK_OK(tokenizer_encode(t, "<s>x</s>", 8, false, true, &ids, &n));
    CHECK(n >= 3 && ids[0] == 1 && ids[n - 1] == 2);
    free(ids);
    CHECK_OK(tokenizer_encode(t, "<s>x</s>", 8, false, false, &ids, &n));
    bool found = false;
    for (int i = 0; i < n; i++) found |= ids[i] == 1 || ids[i] == 2;
    CHECK(!found && n > 3);
    free(ids);
    tokenizer_free(t);
}

TEST(spm_detok_utf8) {
    struct tokenizer *t = load_gguf(SHARED_MODEL("stories260K.gguf"));
    if (!t) return;
    char out[64];
    struct detok d = {0};
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xE6, out, sizeof out), 0);  // 日 = E6 97 A5
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0x97, out, sizeof out), 0);
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xA5, out, sizeof out), 3);
    CHECK(memcmp(out, "日", 3) == 0);
    CHECK_EQ_INT(detok_flush(&d, out, sizeof out), 0);
    // A lead byte followed by ASCII: U+FFFD, then the ASCII.
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xE6, out, sizeof out), 0);
    CHECK_EQ_INT(detok_push(t, &d, 3 + 'A', out, sizeof out), 4);
    CHECK(memcmp(out, "\xef\xbf\xbd" "A", 4) == 0);
    // Bytes that can never start a sequence: U+FFFD at once.
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xFF, out, sizeof out), 3);
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0x80, out, sizeof out), 3);
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xC0, out, sizeof out), 3);
    // E0 80 is an overlong prefix: invalid as soon as the 2nd byte arrives.
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xE0, out, sizeof out), 0);
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0x80, out, sizeof out), 6);
    // Incomplete at end of stream.
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xF0, out, sizeof out), 0);
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0x9F, out, sizeof out), 0);
    CHECK_EQ_INT(detok_flush(&d, out, sizeof out), 3);
    CHECK(memcmp(out, "\xef\xbf\xbd", 3) == 0 && d.n_pending == 0);
    // A word token after a dangling lead byte.
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xC3, out, sizeof out), 0);
    size_t k = detok_push(t, &d, 403, out, sizeof out);
    CHECK(k == 8 && memcmp(out, "\xef\xbf\xbd Once", 8) == 0);
    // Streaming a whole encoding reproduces the text (raw pieces: with the prefix space).
    const char *s = "Hi 日本 🙂 é!";
    int32_t *ids = NULL;
    int n = 0;
    CHECK_OK(tokenizer_encode(t, s, strlen(s), true, false, &ids, &n));
    char acc[128];
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t w = detok_push(t, &d, ids[i], acc + total, sizeof acc - total);
        for (size_t j = 0; j < w; j++) CHECK((acc[total + j] & 0xC0) != 0x80 || j > 0);  // never starts mid-char
        total += w;
    }
    total += detok_flush(&d, acc + total, sizeof acc - total);
    CHECK(total == strlen(s) + 1 && acc[0] == ' ' && memcmp(acc + 1, s, strlen(s)) == 0);
    free(ids);
    // A tiny output buffer never receives part of a character.
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xE6, out, 2), 0);
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0x97, out, 2), 0);
    CHECK_EQ_INT(detok_push(t, &d, 3 + 0xA5, out, 2), 0);
    tokenizer_free(t);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(spm_speed_1mb) {
    struct tokenizer *t = load_gguf(SHARED_MODEL("stories260K.gguf"));
    if (!t) return;
    const char *para = "Once upon a time, there was a little girl named Lily. She loved to play outside "
                       "in the park with her friends. One day, she saw a big red ball under a tree! ";
    size_t pl = strlen(para), len = 1 << 20;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) text[i] = para[i % pl];
    text[len - 1] = '.';
    int32_t *ids = NULL;
    int n = 0;
    double t0 = now_s();
    CHECK_OK(tokenizer_encode(t, text, len, true, false, &ids, &n));
    double dt = now_s() - t0;
    fprintf(stderr, "  spm encode of 1 MiB: %.3f s, %d tokens (%.1f MB/s)\n", dt, n, 1.0 / dt);
    CHECK(dt < 10.0);  // a guard against quadratic behaviour only; the number is printed above
    char *back = malloc(len + 16);
    size_t k = tokenizer_decode(t, ids, n, false, back, len + 16);
    CHECK(k == len && memcmp(back, text, len) == 0);
    free(ids);
    tokenizer_free(t);
    // The same text through the byte-level BPE fixture (PCRE2 pre-split + merges).
    CHECK_OK(tokenizer_from_hf_json(&t, "tests/data/tok_bpe/tokenizer.json"));
    if (t) {
        t0 = now_s();
        CHECK_OK(tokenizer_encode(t, text, len, true, false, &ids, &n));
        dt = now_s() - t0;
        fprintf(stderr, "  bpe encode of 1 MiB: %.3f s, %d tokens (%.1f MB/s)\n", dt, n, 1.0 / dt);
        k = tokenizer_decode(t, ids, n, false, back, len + 16);
        CHECK(k == len && memcmp(back, text, len) == 0);
        free(ids);
        tokenizer_free(t);
    }
    free(back);
    free(text);
}

// ---- SPM: tiny vocabulary (merge order) ----
// ids: <unk> 0, <s> 1, </s> 2, <0xNN> 3+NN, ▁ 259, a 260, b 261, aa 262 (-1), ▁a 263 (-5), ab 264 (-0.5)

TEST(spm_merge_order) {
    struct tokenizer *t = load_gguf("tests/data/tok_spm_tiny.gguf");
    if (!t) return;
    CHECK_ENC(t, "aaa", true, false, 1, 259, 262, 260);  // tie between the two "aa": leftmost
    CHECK_ENC(t, "aab", true, false, 1, 263, 264);       // "ab" (-0.5) first, then "▁a" (-5)
    CHECK_ENC(t, "c", true, false, 1, 259, 3 + 'c');     // not in vocab: byte fallback
    CHECK_ENC(t, "a a", false, false, 263, 263);
    tokenizer_free(t);
    t = load_gguf("tests/data/tok_spm_noprefix.gguf");
    if (!t) return;
    CHECK(!tokenizer_add_bos(t) && !tokenizer_add_space_prefix(t));
    CHECK_ENC(t, "aaa", false, false, 262, 260);
    CHECK_ENC(t, " a", false, false, 263);
    CHECK(round_trip(t, " a", 2, false));
    tokenizer_free(t);
}

// ---- byte-level BPE ----
// ids: byte b → b (its GPT-2 mapped symbol); merge rank r → 256 + r; then
// <|begin_of_text|> 289, <|end_of_text|> 290, <|eot_id|> 291, <|fim|> 292 (not special).
enum { R_GT = 256, R_HE, R_GTHE, R_IN, R_ING, R_AS, R_AT, R_AL, R_ALL, R_12, R_123, R_NLNL, R_SPSP,
       R_HE2, R_LL, R_HELL, R_HELLO, R_GW, R_OR, R_GWOR, R_LD, R_GWORLD, R_BANG2, R_EACUTE, R_CA,
       R_CAF, R_CAFE, R_GCAFE, R_45, R_456, R_ASU, R_DO, R_DON, BOT, EOTXT, EOT, FIM };

static void check_llama3_bpe(const struct tokenizer *t) {
    CHECK_EQ_INT(tokenizer_n_vocab(t), 293);
    CHECK_EQ_INT(tokenizer_bos(t), BOT);
    CHECK(tokenizer_add_bos(t) && !tokenizer_add_space_prefix(t));
    CHECK(tokenizer_is_eog(t, EOT) && tokenizer_is_eog(t, EOTXT) && !tokenizer_is_eog(t, BOT));
    CHECK(tokenizer_chat_template(t) && strstr(tokenizer_chat_template(t), "<|eot_id|>"));
    CHECK_ENC(t, "Hello world", false, false, R_HELLO, R_GWORLD);
    CHECK_ENC(t, "Hello, world!!", false, false, R_HELLO, ',', R_GWORLD, R_BANG2);
    CHECK_ENC(t, "!!!", false, false, R_BANG2, '!');                    // ties: leftmost
    CHECK_ENC(t, "it's", false, false, 'i', 't', R_AS);
    CHECK_ENC(t, "He'll", false, false, R_HE2, R_ALL);
    CHECK_ENC(t, "IT'S", false, false, 'I', 'T', R_ASU);                // (?i:'s) splits "'S" off
    CHECK_ENC(t, "don't", false, false, R_DON, R_AT);
    CHECK_ENC(t, "1234567", false, false, R_123, R_456, '7');           // digits in threes
    CHECK_ENC(t, "4512", false, false, R_45, '1', '2');                 // "451" "2", not "45" "12"
    CHECK_ENC(t, "a\n\nb", false, false, 'a', R_NLNL, 'b');
    CHECK_ENC(t, "a   b", false, false, 'a', R_SPSP, ' ', 'b');         // "  " + " b"
    CHECK_ENC(t, "x \n y", false, false, 'x', ' ', '\n', ' ', 'y');
    CHECK_ENC(t, "the the", false, false, 't', R_HE, R_GTHE);
    CHECK_ENC(t, "café café", false, false, R_CAFE, R_GCAFE);
    CHECK_ENC(t, "ring", false, false, 'r', R_ING);
    CHECK_ENC(t, "日本", false, false, 0xE6, 0x97, 0xA5, 0xE6, 0x9C, 0xAC);
    CHECK_ENC(t, "🙂", false, false, 0xF0, 0x9F, 0x99, 0x82);
    CHECK_ENC(t, "\xff\xfe", false, false, 0xFF, 0xFE);                 // invalid UTF-8 survives
    CHECK_ENC(t, "Hi", true, false, BOT, 'H', 'i');
    CHECK_ENC(t, "", true, false, BOT);
    CHECK_ENC_EMPTY(t, "", false);
    CHECK_ENC(t, "<|begin_of_text|>Hi<|eot_id|>", false, true, BOT, 'H', 'i', EOT);
    CHECK_ENC(t, "a<|fim|>b", false, false, 'a', FIM, 'b');             // added, not special: always
    int32_t *ids = NULL;
    int n = 0;
    const char *s = "<|begin_of_text|>Hi<|eot_id|>";
    CHECK_OK(tokenizer_encode(t, s, strlen(s), false, false, &ids, &n));
    bool special = false;
    for (int i = 0; i < n; i++) special |= ids[i] >= BOT;
    CHECK(!special);
    free(ids);
    for (int i = 0; i < N_OF(ROUND_TRIP); i++) CHECK_MSG(round_trip(t, ROUND_TRIP[i], strlen(ROUND_TRIP[i]), true), "[%d]", i);
    CHECK(round_trip(t, s, strlen(s), false));
    CHECK(round_trip(t, "a\0b\x7f\xad \xa0", 7, true));  // bytes mapped to U+0100..
    char buf[64];
    CHECK_EQ_INT(tokenizer_piece(t, R_GTHE, false, buf, sizeof buf), 4);
    CHECK(memcmp(buf, " the", 4) == 0);
    CHECK_EQ_INT(tokenizer_piece(t, R_NLNL, false, buf, sizeof buf), 2);
    CHECK(memcmp(buf, "\n\n", 2) == 0);
    CHECK_EQ_INT(tokenizer_piece(t, R_GCAFE, false, buf, sizeof buf), 6);
    CHECK(memcmp(buf, " café", 6) == 0);
    CHECK_EQ_INT(tokenizer_piece(t, BOT, false, buf, sizeof buf), 0);
    CHECK_EQ_INT(tokenizer_piece(t, BOT, true, buf, sizeof buf), 17);
    CHECK_EQ_INT(tokenizer_piece(t, FIM, false, buf, sizeof buf), 7);
    CHECK_EQ_INT(tokenizer_token_id(t, "\xc4\xa0the", 5), R_GTHE);  // "Ġthe"
    CHECK_EQ_INT(tokenizer_token_id(t, "nope", 4), -1);
    struct detok d = {0};
    CHECK_EQ_INT(detok_push(t, &d, 0xE6, buf, sizeof buf), 0);
    CHECK_EQ_INT(detok_push(t, &d, 0x97, buf, sizeof buf), 0);
    CHECK_EQ_INT(detok_push(t, &d, 0xA5, buf, sizeof buf), 3);
    CHECK_EQ_INT(detok_push(t, &d, EOT, buf, sizeof buf), 0);
}

TEST(bpe_json) {
    struct tokenizer *t = NULL;
    CHECK_OK(tokenizer_from_hf_json(&t, "tests/data/tok_bpe/tokenizer.json"));
    if (!t) return;
    CHECK_EQ_INT(tokenizer_eos(t), EOT);  // from tokenizer_config.json {"content": …}
    check_llama3_bpe(t);
    tokenizer_free(t);
}

TEST(bpe_gguf) {
    struct tokenizer *t = load_gguf("tests/data/tok_bpe.gguf");
    if (!t) return;
    CHECK_EQ_INT(tokenizer_eos(t), EOT);
    check_llama3_bpe(t);
    tokenizer_free(t);
}

TEST(bpe_gguf_equals_json) {
    struct tokenizer *a = load_gguf("tests/data/tok_bpe.gguf"), *b = NULL;
    CHECK_OK(tokenizer_from_hf_json(&b, "tests/data/tok_bpe/tokenizer.json"));
    if (!a || !b) { tokenizer_free(a); tokenizer_free(b); return; }
    static const char *more[] = { "Hello world, the café's 1234567 things!!\n\n  He'll DON'T",
        "<|eot_id|><|fim|>   \t\n x", "ünïcödé 日本語 🙂🙂 12 345 6789" };
    for (int i = 0; i < N_OF(ROUND_TRIP) + N_OF(more); i++) {
        const char *s = i < N_OF(ROUND_TRIP) ? ROUND_TRIP[i] : more[i - N_OF(ROUND_TRIP)];
        for (int sp = 0; sp < 2; sp++) {
            int32_t *x = NULL, *y = NULL;
            int nx = -1, ny = -2;
            CHECK_OK(tokenizer_encode(a, s, strlen(s), true, sp, &x, &nx));
            CHECK_OK(tokenizer_encode(b, s, strlen(s), true, sp, &y, &ny));
            CHECK_MSG(nx == ny && memcmp(x, y, (size_t)nx * 4) == 0, "'%s'", s);
            free(x);
            free(y);
        }
    }
    tokenizer_free(a);
    tokenizer_free(b);
}

TEST(bpe_json_gpt2_regex) {
    struct tokenizer *t = NULL;
    CHECK_OK(tokenizer_from_hf_json(&t, "tests/data/tok_bpe_gpt2/tokenizer.json"));
    if (!t) return;
    CHECK_EQ_INT(tokenizer_bos(t), -1);  // no config, no post-processor
    CHECK(!tokenizer_add_bos(t));
    CHECK(tokenizer_chat_template(t) == NULL);
    CHECK_ENC(t, "4512", true, false, R_45, R_12);          // GPT-2 keeps digit runs whole
    CHECK_ENC(t, "1234567", false, false, R_123, R_456, '7');
    CHECK_ENC(t, "IT'S", false, false, 'I', 'T', '\'', 'S'); // GPT-2's contractions are lower-case
    CHECK_ENC(t, "Hello world", false, false, R_HELLO, R_GWORLD);
    CHECK_ENC(t, "café café", false, false, R_CAFE, R_GCAFE); // via merges (no ignore_merges)
    CHECK_ENC(t, "a   b", false, false, 'a', R_SPSP, ' ', 'b');
    for (int i = 0; i < N_OF(ROUND_TRIP); i++) CHECK_MSG(round_trip(t, ROUND_TRIP[i], strlen(ROUND_TRIP[i]), false), "[%d]", i);
    tokenizer_free(t);
}

// A byte-level BPE of the 256 byte symbols and three merges that cross a llama-bpe split but not a gpt-4o
// one: "oW" (o200k splits "HelloWorld" before the W, llama-bpe keeps the word whole), "t'" (o200k keeps a
// contraction on its word, llama-bpe splits "'s" off) and "\n/" (o200k's punctuation run takes a slash
// after its newline) — so each encoding shows where the pre-tokenizer of `pre` cut.
static struct tokenizer *tiny_bpe(const char *pre) {
    static char sym[256][3];
    static const char *text[259];
    static uint32_t len[259];
    for (int b = 0; b < 256; b++) {  // the GPT-2 byte map: printable bytes are themselves, the rest U+0100..
        bool print = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int n = 0;
        for (int c = 0; c < b; c++) n += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
        unsigned cp = print ? (unsigned)b : 256u + (unsigned)n;
        if (cp < 0x80) { sym[b][0] = (char)cp; len[b] = 1; }
        else { sym[b][0] = (char)(0xC0 | cp >> 6); sym[b][1] = (char)(0x80 | (cp & 0x3F)); len[b] = 2; }
        text[b] = sym[b];
    }
    static const char *ml[] = {"o", "t", "\xc4\x8a"}, *mr[] = {"W", "'", "/"};  // (U+010A: the newline's symbol)
    static const char *mt[] = {"oW", "t'", "\xc4\x8a/"};
    static uint32_t mll[3], mrl[3];
    for (int i = 0; i < 3; i++) {
        text[256 + i] = mt[i], len[256 + i] = (uint32_t)strlen(mt[i]);
        mll[i] = (uint32_t)strlen(ml[i]), mrl[i] = (uint32_t)strlen(mr[i]);
    }
    struct tok_spec s = {.kind = TOK_KIND_BPE, .src = "tiny", .n_vocab = 259, .text = text, .text_len = len,
                         .n_merges = 3, .merge_left = ml, .merge_right = mr, .merge_left_len = mll,
                         .merge_right_len = mrl, .bos = -1, .eos = -1, .unk = -1, .eot = -1, .eom = -1};
    struct tokenizer *t = NULL;
    CHECK_OK(tok_bpe_pre_preset(&s, pre));
    CHECK_OK(tok_build(&t, &s));
    return t;
}

TEST(bpe_gpt4o_pre_splits) {
    struct tokenizer *o = tiny_bpe("gpt-4o"), *l = tiny_bpe("llama-bpe");
    if (!o || !l) { tokenizer_free(o); tokenizer_free(l); return; }
    CHECK_ENC(o, "HelloWorld", false, false, 'H', 'e', 'l', 'l', 'o', 'W', 'o', 'r', 'l', 'd');
    CHECK_ENC(l, "HelloWorld", false, false, 'H', 'e', 'l', 'l', 256, 'o', 'r', 'l', 'd');
    CHECK_ENC(o, "it's", false, false, 'i', 257, 's');
    CHECK_ENC(l, "it's", false, false, 'i', 't', '\'', 's');
    CHECK_ENC(o, "IT'S", false, false, 'I', 'T', '\'', 'S');  // (no lower-case "t'" merge for "T'")
    CHECK_ENC(o, "a.\n/b", false, false, 'a', '.', 258, 'b');
    CHECK_ENC(l, "a.\n/b", false, false, 'a', '.', '\n', '/', 'b');
    CHECK_ENC(o, "1234567", false, false, '1', '2', '3', '4', '5', '6', '7');
    for (int i = 0; i < N_OF(ROUND_TRIP); i++) CHECK_MSG(round_trip(o, ROUND_TRIP[i], strlen(ROUND_TRIP[i]), false), "[%d]", i);
    tokenizer_free(o);
    tokenizer_free(l);
}

// ---- byte stand-in ----

TEST(bytes) {
    struct tokenizer *t = NULL;
    CHECK(tokenizer_bytes(&t, 257) < 0 && t == NULL && strstr(err_msg(), "258"));
    CHECK_OK(tokenizer_bytes(&t, 300));
    if (!t) return;
    CHECK_EQ_INT(tokenizer_n_vocab(t), 300);
    CHECK_EQ_INT(tokenizer_bos(t), 256);
    CHECK_EQ_INT(tokenizer_eos(t), 257);
    CHECK(tokenizer_add_bos(t) && tokenizer_is_eog(t, 257) && !tokenizer_is_eog(t, 256));
    CHECK_ENC(t, "hi\xff", true, true, 256, 'h', 'i', 0xFF);
    CHECK_ENC(t, "<s>", false, true, '<', 's', '>');
    char buf[16];
    CHECK_EQ_INT(tokenizer_piece(t, 'h', false, buf, sizeof buf), 1);
    CHECK_EQ_INT(tokenizer_piece(t, 256, false, buf, sizeof buf), 0);
    CHECK_EQ_INT(tokenizer_piece(t, 299, true, buf, sizeof buf), 0);
    CHECK(round_trip(t, "日本 🙂", strlen("日本 🙂"), true));
    struct detok d = {0};
    CHECK_EQ_INT(detok_push(t, &d, 0xE6, buf, sizeof buf), 0);
    CHECK_EQ_INT(detok_push(t, &d, 0x97, buf, sizeof buf), 0);
    CHECK_EQ_INT(detok_push(t, &d, 0xA5, buf, sizeof buf), 3);
    tokenizer_free(t);
}

// ---- randomized: round trips and detok output validity, deterministic LCG ----

static uint32_t lcg(uint32_t *st) { *st = *st * 1664525u + 1013904223u; return *st >> 8; }

static bool valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t l = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!l || i + l > n) return false;
        for (size_t j = 1; j < l; j++) if ((s[i + j] & 0xC0) != 0x80) return false;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) ||
            (c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F)) return false;
        i += l;
    }
    return true;
}

TEST(randomized) {
    struct tokenizer *tk[3] = { load_gguf(SHARED_MODEL("stories260K.gguf")), NULL, NULL };
    CHECK_OK(tokenizer_from_hf_json(&tk[1], "tests/data/tok_bpe/tokenizer.json"));
    CHECK_OK(tokenizer_bytes(&tk[2], 300));
    static const char *parts[] = { " ", "  ", "\n", "a", "the", "Once", "'s", "12", "é", "日", "🙂", "\xff",
                                   "\xe6\x97", "!", "<s>", "<|eot_id|>", "\t", "\r\n", "X" };
    uint32_t st = 12345;
    for (int k = 0; k < 3; k++) {
        struct tokenizer *t = tk[k];
        if (!t) continue;
        for (int it = 0; it < 300; it++) {
            char s[256];
            size_t n = 0;
            int np = (int)(lcg(&st) % 12);
            for (int p = 0; p < np; p++) {
                const char *q = parts[lcg(&st) % N_OF(parts)];
                memcpy(s + n, q, strlen(q));
                n += strlen(q);
            }
            CHECK_MSG(round_trip(t, s, n, lcg(&st) & 1), "tokenizer %d '%.*s'", k, (int)n, s);
            struct detok d = {0};
            unsigned char out[1024];
            size_t w = 0;
            for (int i = 0; i < 20; i++)
                w += detok_push(t, &d, (int)(lcg(&st) % (uint32_t)(tokenizer_n_vocab(t) + 2)) - 1,
                                (char *)out + w, sizeof out - w);
            w += detok_flush(&d, (char *)out + w, sizeof out - w);
            CHECK_MSG(valid_utf8(out, w), "tokenizer %d detok output", k);
        }
        tokenizer_free(t);
    }
}

// ---- malformed vocabularies ----

static void check_bad_gguf(const char *path, const char *needle) {
    struct gguf *g = NULL;
    struct tokenizer *t = (struct tokenizer *)1;
    CHECK_OK(gguf_open(&g, path));
    if (!g) return;
    int rc = tokenizer_from_gguf(&t, g);
    CHECK_MSG(rc < 0 && t == NULL && strstr(err_msg(), needle), "%s: rc %d, '%s' lacks '%s'", path, rc, err_msg(), needle);
    gguf_close(g);
}

TEST(bad_gguf) {
    check_bad_gguf("tests/data/tok_bad_scores.gguf", "tokenizer.ggml.scores has");
    check_bad_gguf("tests/data/tok_bad_types.gguf", "tokenizer.ggml.token_type has");
    check_bad_gguf("tests/data/tok_bad_type_value.gguf", "token_type[");
    check_bad_gguf("tests/data/tok_bad_bos.gguf", "bos token id 9999");
    check_bad_gguf("tests/data/tok_bad_byte.gguf", "BYTE");
    check_bad_gguf("tests/data/tok_bad_merge.gguf", "'zzz' is not in the vocabulary");
    check_bad_gguf("tests/data/tok_bad_model.gguf", "wordpiece");
}

static char tmp_dir[64];

static int bad_json(const char *json, const char *config, const char *needle) {
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", tmp_dir);
    unlink(path);
    if (config) { FILE *f = fopen(path, "w"); fputs(config, f); fclose(f); }
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp_dir);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    struct tokenizer *t = (struct tokenizer *)1;
    int rc = tokenizer_from_hf_json(&t, path);
    CHECK_MSG(rc < 0 && t == NULL && strstr(err_msg(), needle), "rc %d, '%s' lacks '%s'", rc, err_msg(), needle);
    if (rc == 0) tokenizer_free(t);
    return rc;
}

#define V "{\"a\":0,\"b\":1,\"ab\":2}"
TEST(bad_json) {
    strcpy(tmp_dir, "/tmp/octet_tok_XXXXXX");
    if (!mkdtemp(tmp_dir)) { CHECK(0); return; }
    struct tokenizer *t = (struct tokenizer *)1;
    CHECK(tokenizer_from_hf_json(&t, "/nonexistent/tokenizer.json") == OCT_EIO && t == NULL);
    bad_json("{\"model\": {", NULL, "line");
    bad_json("{\"model\": {\"type\":\"WordPiece\",\"vocab\":" V ",\"merges\":[]}}", NULL, "WordPiece");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]}}", NULL, "model.vocab['a']");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}", NULL, "model.vocab['a']");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}", NULL, "id 0 is used");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[\"a c\"]}}", NULL, "'c' is not in the vocabulary");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[\"b a\"]}}", NULL, "merged token");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[\"ab\"]}}", NULL, "model.merges[0]");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[[\"a\"]]}}", NULL, "model.merges[0]");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[]},\"added_tokens\":[{\"id\":99999999,"
             "\"content\":\"x\"}]}", NULL, "added_tokens[0]");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Split\","
             "\"pattern\":{\"Regex\":\"([\"},\"behavior\":\"Isolated\"}}", NULL, "regex");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\"}}",
             NULL, "Metaspace");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[]}}", "{\"bos_token\": \"<nope>\"}", "<nope>");
    bad_json("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[]}}", "[1,", "tokenizer_config.json");
    // A good minimal file, for contrast: merges as pairs, the default (Llama-3) regex.
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp_dir);
    FILE *f = fopen(path, "w");
    fputs("{\"model\": {\"type\":\"BPE\",\"vocab\":" V ",\"merges\":[[\"a\",\"b\"]]}}", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", tmp_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp_dir);
    CHECK_OK(tokenizer_from_hf_json(&t, path));
    if (t && t != (struct tokenizer *)1) {
        CHECK_ENC(t, "abab", false, false, 2, 2);
        CHECK_ENC_EMPTY(t, "x", false);  // no symbol for x and no unk: dropped
        tokenizer_free(t);
    }
    unlink(path);
    rmdir(tmp_dir);
}

int main(void) {
    RUN(spm_stories_required);
    RUN(spm_stories_round_trip);
    RUN(spm_special);
    RUN(spm_detok_utf8);
    RUN(spm_speed_1mb);
    RUN(spm_merge_order);
    RUN(bpe_json);
    RUN(bpe_gguf);
    RUN(bpe_gguf_equals_json);
    RUN(bpe_json_gpt2_regex);
    RUN(bpe_gpt4o_pre_splits);
    RUN(bytes);
    RUN(randomized);
    RUN(bad_gguf);
    RUN(bad_json);
    return test_summary("tokenizer");
}
