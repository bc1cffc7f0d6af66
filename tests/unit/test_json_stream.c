// test_json_stream.c — streamed JSON and streamed tool calls (src/server/json_stream.c, call_stream.c):
// values fed in pieces of every size come out as Python's json.dumps(v, ensure_ascii=False) writes them (the
// expected texts were printed by Python 3.11); thousands of mutated texts give, through the stream, exactly
// what jansson's whole parse and pyjson give, or fail where jansson fails, and their top-level members' spans
// are those values; and a hermes reply streamed in pieces gives the whole reply's content and calls (ids,
// names, arguments) when joined as a client joins deltas, or all of it as content where its first call is not
// one.
#include <stdlib.h>
#include <string.h>

#include "../../src/server/call_stream.h"
#include "../../src/server/pyjson.h"
#include "../../src/server/tool_calls.h"
#include "../test.h"
#include "call_deltas.h"
#include "json_mutants.h"

// Streams text in pieces of `piece` bytes; returns the last event (after json_stream_finish where the text
// ran out), *out what was written, *rest the bytes not read.
static int stream(const char *text, size_t n, size_t piece, struct text_buf *out, size_t *rest) {
    struct json_stream j;
    json_stream_init(&j);
    size_t at = 0;
    int ev = JSE_MORE;
    while (at < n && ev != JSE_DONE && ev != JSE_FAIL) {
        size_t k = n - at < piece ? n - at : piece, used;
        ev = json_stream_push(&j, text + at, k, out, &used);
        at += used;
    }
    if (ev != JSE_DONE && ev != JSE_FAIL) ev = json_stream_finish(&j, out);
    *rest = n - at;
    json_stream_free(&j);
    return ev;
}

TEST(rewrites_as_json_dumps) {
    static const char *cases[][2] = {
        {"{\"city\":\"Paris\"}", "{\"city\": \"Paris\"}"},
        {" { \"a\" : [ 1 , 2.50 , -0 , -0.0 , 1e5 , 1E-7 ] , \"b\" : { } , \"c\" : [ ] } ",
         "{\"a\": [1, 2.5, 0, -0.0, 100000.0, 1e-07], \"b\": {}, \"c\": []}"},
        {"{\"s\":\"q\\\"b\\\\s\\/n\\n t\\t r\\r b\\b f\\f\"}", "{\"s\": \"q\\\"b\\\\s/n\\n t\\t r\\r b\\b f\\f\"}"},
        {"{\"u\":\"\\u00e9\\u4e2d\\ud83d\\ude00\\u0001\\u001f\\u007f\"}", "{\"u\": \"é中😀\\u0001\\u001f\x7f\"}"},
        {"{\"raw\":\"é中😀\"}", "{\"raw\": \"é中😀\"}"},
        {"[true,false,null,\"x\",{\"k\":[{\"z\":null}]}]", "[true, false, null, \"x\", {\"k\": [{\"z\": null}]}]"},
        {"\"just a string\"", "\"just a string\""},
        {"42", "42"},
        {"-3.25e+2", "-325.0"},
        {"{\"n\":0.1,\"m\":100.0,\"big\":1e300,\"small\":5e-324,\"x\":1.7976931348623157e308}",
         "{\"n\": 0.1, \"m\": 100.0, \"big\": 1e+300, \"small\": 5e-324, \"x\": 1.7976931348623157e+308}"},
        {"{\"a\":{\"b\":{\"c\":{\"d\":[[[]]]}}}}", "{\"a\": {\"b\": {\"c\": {\"d\": [[[]]]}}}}"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const size_t n = strlen(cases[c][0]);
        for (size_t piece = 1; piece <= n; piece++) {
            struct text_buf out = {0};
            size_t rest;
            int ev = stream(cases[c][0], n, piece, &out, &rest);
            CHECK_MSG(ev == JSE_DONE && out.p && !strcmp(out.p, cases[c][1]), "case %zu piece %zu: %d '%s'", c, piece,
                      ev, out.p ? out.p : "");
            text_buf_free(&out);
        }
    }
    // not JSON: the stream stops at the byte that makes it so (what jansson refuses, in the middle of a value)
    static const char *bad[] = {"{\"a\":\"x\ny\"}", "{\"a\":\"\\ud800x\"}", "{\"a\":\"\\udc00\"}", "{\"a\":\"\\u0000\"}",
                                "{\"a\":01}", "{\"a\":tru}", "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{'a':1}", "{\"a\":-}",
                                "{\"a\":1.}", "{\"a\":\"\\x\"}", "{\"a\":12345678901234567890}"};
    for (size_t c = 0; c < sizeof bad / sizeof *bad; c++) {
        struct text_buf out = {0};
        size_t rest;
        CHECK_MSG(stream(bad[c], strlen(bad[c]), 3, &out, &rest) == JSE_FAIL, "%s", bad[c]);
        text_buf_free(&out);
    }
}

// A depth-1 member's key as the stream wrote it ("\"k\"") decoded.
static char *member_key(const char *quoted) {
    json_t *k = json_loads(quoted, JSON_DECODE_ANY, NULL);
    char *s = json_is_string(k) ? strdup(json_string_value(k)) : NULL;
    json_decref(k);
    return s;
}

TEST(same_as_whole_parse) {
    unsigned seed = 12345;
    int n_ok = 0, n_bad = 0;
    for (int it = 0; it < 20000; it++) {
        char t[256];
        const size_t n = json_mutant(t, sizeof t, &seed);
        json_error_t e;
        json_t *v = json_loadb(t, n, JSON_DECODE_ANY, &e), *u = json_loadb(t, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
        const bool dup = v && !u;
        json_decref(u);
        if (dup) { json_decref(v); continue; }
        // the stream, in random pieces, with its top-level members' spans
        struct json_stream j;
        json_stream_init(&j);
        struct text_buf out = {0};
        size_t at = 0, val_at = 0;
        int ev = JSE_MORE, spans_ok = 1;
        while (at < n && ev != JSE_DONE && ev != JSE_FAIL) {
            size_t k = 1 + json_rnd(&seed) % 6, used;
            if (k > n - at) k = n - at;
            ev = json_stream_push(&j, t + at, k, &out, &used);
            at += used;
            if (ev == JSE_VALUE) val_at = out.n;
            if (ev == JSE_END && v && json_is_object(v)) {  // the member's value, as pyjson writes it alone
                char *key = member_key(j.member);
                struct text_buf w = {0};
                pyjson_dump(json_object_get(v, key ? key : ""), &w);
                spans_ok &= key && w.p && out.n - val_at == w.n && !memcmp(out.p + val_at, w.p, w.n);
                free(key);
                text_buf_free(&w);
            }
        }
        if (ev != JSE_DONE && ev != JSE_FAIL) ev = json_stream_finish(&j, &out);
        json_stream_free(&j);
        bool rest_ws = true;
        for (size_t i = at; i < n; i++) rest_ws &= t[i] == ' ' || t[i] == '\n' || t[i] == '\t' || t[i] == '\r';
        if (v) {
            struct text_buf w = {0};
            pyjson_dump(v, &w);
            CHECK_MSG(ev == JSE_DONE && rest_ws && out.n == w.n && !memcmp(out.p, w.p, w.n) && spans_ok,
                      "'%.*s': %d, '%s' against '%s'", (int)n, t, ev, out.p ? out.p : "", w.p);
            text_buf_free(&w);
            n_ok++;
        } else {
            CHECK_MSG(ev == JSE_FAIL || !rest_ws, "'%.*s' (jansson: %s) streamed as '%s'", (int)n, t, e.text,
                      out.p ? out.p : "");
            n_bad++;
        }
        json_decref(v);
        text_buf_free(&out);
    }
    CHECK_MSG(n_ok > 2000 && n_bad > 2000, "%d valid, %d not", n_ok, n_bad);
}

// A hermes reply streamed through a call stream in pieces of `piece` bytes: its content, its calls joined.
static int hermes(const char *text, size_t piece, bool single, struct text_buf *content, json_t *joined, bool *called) {
    int takes = 0;
    struct call_stream s;
    call_stream_init(&s, "x", single);
    const size_t n = strlen(text);
    for (size_t at = 0; at < n; at += piece) {
        call_stream_text(&s, text + at, n - at < piece ? n - at : piece, content);
        json_t *d = call_stream_take(&s);
        if (d) join_call_deltas(joined, d), takes++;
        json_decref(d);
    }
    call_stream_finish(&s, content);
    json_t *d = call_stream_take(&s);
    if (d) join_call_deltas(joined, d);
    json_decref(d);
    *called = call_stream_called(&s);
    call_stream_free(&s);
    return takes;
}

TEST(hermes_stream_is_the_whole_reply) {
    static const char *texts[] = {
        "Let me check.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Bergen\"}}\n</tool_call>",
        "<tool_call>{\"name\":\"f\",\"arguments\":{\"x\":[1,2.50,1e3],\"s\":\"é \\u00e9 😀 \\ud83d\\ude00\"}}</tool_call>",
        "<tool_call>\n{\"arguments\": {\"a\": true}, \"name\": \"late_name\"}\n</tool_call>",
        "<tool_call>\n{\"name\": \"time\", \"arguments\": {}}",  // (no closing tag)
        "<tool_call>{\"name\": \"g\", \"arguments\": \"a string\"}</tool_call> and after",
        "before <tool_call>{\"name\": \"f\", \"arguments\": {\"q\": \"\\\"quoted\\\" \\\\ \\/\"}}</tool_call> between "
        "<tool_ <tool_call>{\"name\": \"h\", \"arguments\": {\"n\": null}}</tool_call>",
        "Hmm <tool_call>{oops}</tool_call> more <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\"}</tool_call>",
        "just text, <tool but no call",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}",  // (cut off)
    };
    for (size_t c = 0; c < sizeof texts / sizeof *texts; c++) {
        for (int single = 0; single < 2; single++) {
            size_t cn;
            json_t *whole = tool_calls_parse(texts[c], strlen(texts[c]), single, "x", &cn);
            for (size_t piece = 1; piece <= strlen(texts[c]); piece += piece < 8 ? 1 : 7) {
                struct text_buf content = {0};
                json_t *joined = json_array();
                bool called;
                const int takes = hermes(texts[c], piece, single, &content, joined, &called);
                if (c == 1 && piece == 1)  // (a byte at a time: the arguments go out as they come, not at the end)
                    CHECK_MSG(takes > 15, "%d deltas", takes);
                const char *ct = content.p ? content.p : "";
                if (whole) {
                    CHECK_MSG(called && json_equal(joined, whole) && strlen(ct) == cn && !strncmp(ct, texts[c], cn),
                              "text %zu single %d piece %zu: content '%s', calls %s", c, single, piece, ct,
                              json_dumps(joined, JSON_COMPACT));
                } else if (c == 10) {  // (a call cut off is sent as far as it went: the stream cannot take it back)
                    CHECK_MSG(!called && !content.n, "text %zu piece %zu", c, piece);
                } else {
                    CHECK_MSG(!called && json_array_size(joined) == 0 && !strcmp(ct, texts[c]),
                              "text %zu single %d piece %zu: content '%s', %zu calls", c, single, piece, ct,
                              json_array_size(joined));
                }
                text_buf_free(&content);
                json_decref(joined);
            }
            json_decref(whole);
        }
    }
}

int main(void) {
    RUN(rewrites_as_json_dumps);
    RUN(same_as_whole_parse);
    RUN(hermes_stream_is_the_whole_reply);
    return test_summary("json_stream");
}
