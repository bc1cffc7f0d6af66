// server_unit.c — unit checks of the server's pure parts, built and run by
// test_server.sh: text_output (stop strings held back across token boundaries, partial
// UTF-8, stop ids, flush), chat_template (detection and each family's exact rendering),
// openai (request defaults and derived stop strings) and metrics (cumulative buckets; every
// metric name matches ^[a-zA-Z_][a-zA-Z0-9_]*$ and has its # HELP and # TYPE lines).
// Uses the byte tokenizer (ids 0..255 are bytes), so token boundaries are explicit.
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/model/tokenizer.h"
#include "../../src/server/chat_template.h"
#include "../../src/server/metrics.h"
#include "../../src/server/openai.h"
#include "../../src/server/text_output.h"

static int n_pass, n_fail;
#define CHECK(c, ...) do { if (c) n_pass++; else { n_fail++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

// Feeds text byte by byte; returns the released text after each push joined by '|'.
static char *feed(const struct tokenizer *t, const char *text, const char *const *stops, int n_stops, int *hit) {
    struct text_output o;
    text_output_init(&o, t, stops, n_stops, NULL, 0);
    struct text_buf all = {0};
    *hit = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && !*hit; p++) {
        struct text_buf b = {0};
        *hit = text_output_push(&o, *p, &b);
        if (b.n) { text_buf_append(&all, b.p, b.n); text_buf_append(&all, "|", 1); }
        text_buf_free(&b);
    }
    if (!*hit) {
        struct text_buf b = {0};
        text_output_finish(&o, &b);
        if (b.n) { text_buf_append(&all, b.p, b.n); text_buf_append(&all, "|", 1); }
        text_buf_free(&b);
    }
    text_output_free(&o);
    text_buf_append(&all, "", 0);
    return all.p;
}

static void test_text_output(const struct tokenizer *t) {
    int hit;
    const char *s1[] = {"STOP"};
    char *r = feed(t, "Hi STOP no", s1, 1, &hit);
    CHECK(hit == 1 && !strcmp(r, "H|i| |"), "stop: '%s' hit %d", r, hit);
    free(r);
    r = feed(t, "a STx b", s1, 1, &hit);  // a prefix that fails is released at once
    CHECK(hit == 0 && !strcmp(r, "a| |STx| |b|"), "failed prefix: '%s'", r);
    free(r);
    r = feed(t, "ab ST", s1, 1, &hit);    // a held prefix at the end is released by finish
    CHECK(hit == 0 && !strcmp(r, "a|b| |ST|"), "tail: '%s'", r);
    free(r);
    const char *s2[] = {"xyz", "yq"};
    r = feed(t, "0xyq1", s2, 2, &hit);    // the earliest completed stop wins
    CHECK(hit == 1 && !strcmp(r, "0|x|"), "two stops: '%s'", r);
    free(r);
    const char *s3[] = {"aab"};
    r = feed(t, "aaab", s3, 1, &hit);     // overlapping prefix
    CHECK(hit == 1 && !strcmp(r, "a|"), "overlap: '%s'", r);
    free(r);
    r = feed(t, "caf\xc3\xa9!", NULL, 0, &hit);  // no partial UTF-8 is released
    CHECK(!strcmp(r, "c|a|f|\xc3\xa9|!|"), "utf8: '%s'", r);
    free(r);
    r = feed(t, "ok\xc3", NULL, 0, &hit); // a dangling lead byte becomes U+FFFD at the end
    CHECK(!strcmp(r, "o|k|\xef\xbf\xbd|"), "flush: '%s'", r);
    free(r);
    // a stop id ends the output and releases what was held
    int32_t stop_id = '#';
    struct text_output o;
    text_output_init(&o, t, s1, 1, &stop_id, 1);
    struct text_buf b = {0};
    text_output_push(&o, 'S', &b);
    int rc = text_output_push(&o, '#', &b);
    CHECK(rc == 1 && b.n == 1 && b.p[0] == 'S', "stop id rc %d", rc);
    text_buf_free(&b);
    text_output_free(&o);
    struct text_buf u = {0};
    utf8_sanitize("a\xff\xe2\x82", 4, &u);
    CHECK(!strcmp(u.p, "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"), "sanitize '%s'", u.p);
    text_buf_free(&u);
}

static void test_chat_template(void) {
    CHECK(chat_template_detect(NULL) == CHAT_TEMPLATE_CHATML, "NULL");
    CHECK(chat_template_detect("{% for m in messages %}{{'<|im_start|>' + m.role}}") == CHAT_TEMPLATE_CHATML, "chatml");
    CHECK(chat_template_detect("{{ '<|start_header_id|>' + message['role'] }}") == CHAT_TEMPLATE_LLAMA3, "llama3");
    CHECK(chat_template_detect("{{ bos_token + '[INST] ' + content }}") == CHAT_TEMPLATE_LLAMA2, "llama2");
    CHECK(chat_template_detect("{{ '<start_of_turn>' + role }}") == CHAT_TEMPLATE_GEMMA, "gemma");
    CHECK(chat_template_detect("{{ something else }}") == CHAT_TEMPLATE_CHATML, "unknown → chatml");
    struct chat_msg m[] = {{"system", "Be brief.", NULL, 0}, {"user", "Hi", NULL, 0}, {"assistant", "Hello", NULL, 0}, {"user", " Bye ", NULL, 0}};
    static const struct { enum chat_template_kind k; const char *bos, *want; } cases[] = {
        {CHAT_TEMPLATE_CHATML, NULL,
         "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n"
         "<|im_start|>user\n Bye <|im_end|>\n<|im_start|>assistant\n"},
        {CHAT_TEMPLATE_LLAMA3, "<|begin_of_text|>",
         "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
         "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
         "Bye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
        {CHAT_TEMPLATE_LLAMA2, "<s>", "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]"},
        {CHAT_TEMPLATE_GEMMA, "<bos>",
         "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
         "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        int rc = chat_template_render(cases[i].k, m, 4, true, cases[i].bos, &out);
        CHECK(rc == 0 && out && !strcmp(out, cases[i].want), "%s render:\n%s\nwant:\n%s", chat_template_name(cases[i].k),
              out ? out : "(null)", cases[i].want);
        free(out);
    }
    char *out = NULL;
    struct chat_msg badm[] = {{"wizard", "x", NULL, 0}};
    CHECK(chat_template_render(CHAT_TEMPLATE_CHATML, badm, 1, true, NULL, &out) < 0 && !out, "unknown role accepted");
    CHECK(chat_template_render(CHAT_TEMPLATE_CHATML, m + 1, 1, false, NULL, &out) == 0 &&
          !strcmp(out, "<|im_start|>user\nHi<|im_end|>\n"), "no generation prompt: %s", out);
    free(out);
}

static void test_openai(const struct tokenizer *t) {
    struct oai_context c = {.tok = t, .served_name = "m", .model_path = "/p/m.gguf", .max_model_len = 20,
                            .tmpl = CHAT_TEMPLATE_CHATML};
    struct oai_request r;
    struct oai_error e;
    const char *b1 = "{\"model\":\"/p/m.gguf\",\"prompt\":\"abc\",\"stop\":[\"x\",\"yz\"]}";
    CHECK(oai_parse(&c, OAI_COMPLETION, b1, strlen(b1), &r, &e) == 0, "parse: %s", e.message);
    CHECK(r.n_prompt >= 3 && r.gen.max_tokens == 16 && r.n_stops == 2 && r.gen.top_logprobs == -1 && !r.stream,
          "defaults: n_prompt %d max_tokens %d stops %d", r.n_prompt, r.gen.max_tokens, r.n_stops);
    oai_request_free(&r);
    const char *b2 = "{\"prompt\":\"abcdefghij\"}";  // 10+ tokens: the default 16 is clamped to the room left
    CHECK(oai_parse(&c, OAI_COMPLETION, b2, strlen(b2), &r, &e) == 0 && r.gen.max_tokens == 20 - r.n_prompt,
          "clamp: %d", r.gen.max_tokens);
    oai_request_free(&r);
    const char *b3 = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":1}";
    c.max_model_len = 200;
    CHECK(oai_parse(&c, OAI_CHAT, b3, strlen(b3), &r, &e) == 0 && r.n_stops + r.n_stop_ids == 1, "chat: %s", e.message);
    CHECK(r.n_stops == 1 && !strcmp(r.stops[0], "<|im_end|>"), "chat end-of-turn stop");
    oai_request_free(&r);
    const char *b4 = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}";
    CHECK(oai_parse(&c, OAI_CHAT, b4, strlen(b4), &r, &e) == 0 && r.gen.max_tokens == 200 - r.n_prompt, "chat default");
    oai_request_free(&r);
    const char *b5 = "{\"prompt\":\"a\",\"n\":3.5}";
    CHECK(oai_parse(&c, OAI_COMPLETION, b5, strlen(b5), &r, &e) < 0 && e.status == 400 && !strcmp(e.param, "n"), "n=3.5");
    char *body = oai_error_body(&e);
    CHECK(body && strstr(body, "\"param\":\"n\"") && strstr(body, "\"code\":null"), "error body %s", body);
    free(body);
}

// Whether a fresh rendering of m contains s.
static int metrics_text_has(struct metrics *m, const struct engine_stats *es, const char *s) {
    struct text_buf t = {0};
    int has = metrics_render(m, es, &t) == 0 && t.p && strstr(t.p, s) != NULL;
    text_buf_free(&t);
    return has;
}

static void test_metrics(void) {
    struct metrics m;
    metrics_init(&m, "a\"b");
    metrics_observe_ttft(&m, 0.003);
    metrics_observe_ttft(&m, 1e9);
    metrics_observe_finished(&m, 0.4, "length");
    struct engine_stats es = {.n_running = 2, .n_blocks_total = 10, .n_blocks_free = 7};
    struct text_buf t = {0};
    CHECK(metrics_render(&m, &es, &t) == 0, "render");
    CHECK(strstr(t.p, "octet_time_to_first_token_seconds_bucket{le=\"0.001\",model_name=\"a\\\"b\"} 0\n") &&
          strstr(t.p, "octet_time_to_first_token_seconds_bucket{le=\"0.005\",model_name=\"a\\\"b\"} 1\n") &&
          strstr(t.p, "octet_time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"a\\\"b\"} 2\n") &&
          strstr(t.p, "octet_time_to_first_token_seconds_count{model_name=\"a\\\"b\"} 2\n") &&
          strstr(t.p, "octet_request_success_total{finished_reason=\"length\",model_name=\"a\\\"b\"} 1\n") &&
          strstr(t.p, "octet_num_requests_running{model_name=\"a\\\"b\"} 2\n"), "metrics text:\n%s", t.p);
    // every sample's metric name is a plain Prometheus name with HELP and TYPE lines
    regex_t re;
    regcomp(&re, "^[a-zA-Z_][a-zA-Z0-9_]*$", REG_EXTENDED | REG_NOSUB);
    int n_samples = 0, n_bad = 0;
    for (char *line = strtok(t.p, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char name[128];
        size_t k = strcspn(line, "{ ");
        if (k >= sizeof name) { n_bad++; continue; }
        memcpy(name, line, k);
        name[k] = 0;
        n_samples++;
        if (regexec(&re, name, 0, NULL, 0)) { n_bad++; fprintf(stderr, "bad metric name '%s'\n", name); continue; }
        // a histogram's samples carry _bucket/_sum/_count after the declared name
        char base[128];
        snprintf(base, sizeof base, "%s", name);
        struct text_buf q = {0};
        for (int pass = 0; pass < 2; pass++) {
            q.n = 0;
            text_buf_printf(&q, "# TYPE %s ", base);
            if (metrics_text_has(&m, &es, q.p)) break;
            char *u = strrchr(base, '_');
            if (pass == 0 && u && (!strcmp(u, "_bucket") || !strcmp(u, "_sum") || !strcmp(u, "_count"))) *u = 0;
        }
        char help[160];
        snprintf(help, sizeof help, "# HELP %s ", base);
        if (!metrics_text_has(&m, &es, q.p) || !metrics_text_has(&m, &es, help)) {
            n_bad++;
            fprintf(stderr, "metric '%s' lacks # HELP or # TYPE\n", name);
        }
        text_buf_free(&q);
    }
    regfree(&re);
    CHECK(n_samples > 20 && n_bad == 0, "%d of %d metric samples have a bad name or no HELP/TYPE", n_bad, n_samples);
    text_buf_free(&t);
    metrics_free(&m);
}

int main(void) {
    struct tokenizer *t;
    if (tokenizer_bytes(&t, 258) < 0) { fprintf(stderr, "no byte tokenizer\n"); return 1; }
    test_text_output(t);
    test_chat_template();
    test_openai(t);
    test_metrics();
    tokenizer_free(t);
    printf("server_unit: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
