// test_harmony_tools.c — tool calling for gpt-oss (vLLM's --enable-auto-tool-choice --tool-call-parser openai):
// the prompt against gpt-oss's own chat template, and the calls a reply makes.
// Prompt: tests/data/harmony_tools.json holds requests (tools of every JSON Schema shape the template treats
// apart, calls, results, escapes) and the text gpt-oss's chat_template.jinja renders for them in transformers'
// environment (tools/ref/harmony_tool_fixtures.py); octet's renderer must give the same text byte for byte,
// or refuse where the template fails. Beyond the template: every call of a reply is rendered, and a result
// is named by its tool_call_id. pyjson (Python's json.dumps text, which the template's tojson writes) is
// checked on reals and escapes.
// Reply: on tests/data/tok_harmony, a reply's messages to functions.NAME become tool_calls (recipient before or
// after the channel, <|constrain|>json or json, arguments re-serialised or kept raw when they are not JSON),
// its analysis the reasoning_content and its preambles the content; finish_reason "tool_calls"; streamed, the
// calls come in the last chunk; parallel_tool_calls false keeps the first; tool_choice none and built-in
// recipients (browser.search) give no call and no content; a reply's reasoning_content sent back is its
// analysis message; serve's flags pair openai with harmony only.
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/model/tokenizer.h"
#include "../../src/server/harmony_tools.h"
#include "../../src/server/openai.h"
#include "../../src/server/pyjson.h"
#include "../test.h"
#include "call_deltas.h"

int serve_check_flags(char **words, int n);

static struct tokenizer *tok;
static struct oai_context ctx;

// Renders a fixture's request as chat completions would (tools as tool_set_read reads them, messages with
// their calls); returns the prompt (malloc'd) or NULL with err_msg() set.
static char *render_request(json_t *req, const char *date) {
    json_t *ms = json_object_get(req, "messages");
    size_t n = json_array_size(ms);
    struct chat_msg *cm = calloc(n, sizeof *cm);
    struct tool_set ts;
    const char *param;
    char *out = NULL;
    if (tool_set_read(req, true, true, &ts, &param) < 0) { free(cm); return NULL; }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(ms, i), *c = json_object_get(m, "content");
        struct chat_tool_call *calls = NULL;
        cm[i].role = json_string_value(json_object_get(m, "role"));
        cm[i].content = json_is_string(c) ? json_string_value(c) : "";
        cm[i].tool_call_id = json_string_value(json_object_get(m, "tool_call_id"));
        cm[i].reasoning = json_string_value(json_object_get(m, "reasoning_content"));
        if (tool_calls_of_message(m, i, &calls, &cm[i].n_calls) < 0) goto done;
        cm[i].calls = calls;
    }
    struct chat_opts o = {.date = date, .reasoning_effort = json_string_value(json_object_get(req, "reasoning_effort")),
                          .tools = (const char *const *)ts.tools, .n_tools = ts.n_tools};
    size_t *spans = malloc(sizeof(size_t) * chat_template_n_spans(cm, (int)n, &o));
    if (chat_template_render_opts(CHAT_TEMPLATE_HARMONY, cm, (int)n, true, NULL, &o, &out, spans) < 0) out = NULL;
    free(spans);
done:
    for (size_t i = 0; i < n; i++) free((void *)cm[i].calls);
    free(cm);
    tool_set_free(&ts);
    return out;
}

TEST(prompts_as_the_template_renders_them) {
    json_error_t je;
    json_t *cases = json_load_file("tests/data/harmony_tools.json", 0, &je);
    CHECK_MSG(cases && json_array_size(cases) >= 10, "tests/data/harmony_tools.json: %s", je.text);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *want = json_string_value(json_object_get(c, "prompt"));
        char *got = render_request(json_object_get(c, "request"), json_string_value(json_object_get(c, "date")));
        if (want) {
            CHECK_MSG(got && !strcmp(got, want), "%s: got\n%s\n--- want\n%s", name, got ? got : err_msg(), want);
        } else {  // the template fails: octet refuses, naming the message or tool
            CHECK_MSG(!got && (strstr(err_msg(), "messages[1]") || strstr(err_msg(), "tools[0]")), "%s: %s", name,
                      got ? got : err_msg());
        }
        free(got);
    }
    json_decref(cases);
}

TEST(calls_beyond_the_template) {
    // every call of a reply is its own message; a result is named by the call its tool_call_id gives
    struct chat_tool_call calls[2] = {{.name = "get_weather", .arguments = "{\"city\": \"Paris\"}", .id = "c1"},
                                      {.name = "get_time", .arguments = "{}", .id = "c2"}};
    struct chat_msg m[4] = {{.role = "user", .content = "Weather and time?"}, {.role = "assistant", .content = "", .calls = calls, .n_calls = 2},
                            {.role = "tool", .content = "12:00", .tool_call_id = "c2"}, {.role = "tool", .content = "sunny", .tool_call_id = "c1"}};
    const char *tools[1] = {"{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"d\"}}"};
    struct chat_opts o = {.date = "2026-12-06", .tools = tools, .n_tools = 1};
    char *text = NULL;
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_HARMONY, m, 4, true, NULL, &o, &text, NULL));
    const char *want =
        "<|start|>user<|message|>Weather and time?<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>"
        "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>"
        "<|start|>functions.get_time to=assistant<|channel|>commentary<|message|>\"12:00\"<|end|>"
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"sunny\"<|end|>"
        "<|start|>assistant";
    CHECK_MSG(text && strstr(text, want), "%s", text ? text : "(null)");
    free(text);
    // a result with an unknown id takes the reply's last call; one after a plain reply is refused
    m[2].tool_call_id = "zz";
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_HARMONY, m, 3, true, NULL, &o, &text, NULL));
    CHECK(text && strstr(text, "<|start|>functions.get_time to=assistant"));
    free(text);
    struct chat_msg late[3] = {{.role = "user", .content = "hi"}, {.role = "assistant", .content = "hello"},
                               {.role = "tool", .content = "x"}};
    text = NULL;
    CHECK(chat_template_render_opts(CHAT_TEMPLATE_HARMONY, late, 3, true, NULL, &o, &text, NULL) < 0 && !text &&
          strstr(err_msg(), "messages[2]"));
    // the template's failures name the field
    const char *bad[] = {
        "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"u\": {\"type\": \"string\", \"enum\": [\"a\"], \"default\": 1}}}}}",
        "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"u\": {\"type\": \"string\", \"description\": 5}}}}}",
        "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"u\": {\"type\": \"object\", \"properties\": {\"v\": {\"oneOf\": 3}}}}}}}",
    };
    const char *where[] = {".properties.u", ".properties.u", ".properties.u.v"};
    for (int k = 0; k < 3; k++) {
        struct text_buf b = {0};
        CHECK_MSG(harmony_tools_render(&bad[k], 1, &b) == OCT_EINVAL && strstr(err_msg(), where[k]), "%d: %s", k,
                  err_msg());
        text_buf_free(&b);
    }
    // the whole tools section is the client's text: one span
    struct chat_msg one[1] = {{.role = "user", .content = "hi"}};
    size_t spans[8];
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_HARMONY, one, 1, true, NULL, &o, &text, spans));
    CHECK(text && !strncmp(text + spans[0], "## functions", 12) && !strncmp(text + spans[1] - 24,
                                                                              "} // namespace functions", 24));
    free(text);
}

static void py(const char *json, const char *want) {
    json_error_t je;
    json_t *v = json_loads(json, JSON_DECODE_ANY, &je);
    struct text_buf b = {0};
    CHECK_MSG(v && pyjson_dump(v, &b) == 0 && b.p && !strcmp(b.p, want), "%s → %s, want %s", json,
              b.p ? b.p : "(null)", want);
    text_buf_free(&b);
    json_decref(v);
}

TEST(python_json_text) {
    py("0.1", "0.1");
    py("2.0", "2.0");
    py("-0.0", "-0.0");
    py("1e16", "1e+16");
    py("1e15", "1000000000000000.0");
    py("123456789.125", "123456789.125");
    py("0.0001", "0.0001");
    py("0.00001", "1e-05");
    py("1.5e-300", "1.5e-300");
    py("1.7976931348623157e308", "1.7976931348623157e+308");
    py("5e-324", "5e-324");
    py("0.30000000000000004", "0.30000000000000004");
    py("-42", "-42");
    py("[1, {\"a\": [true, false, null]}, []]", "[1, {\"a\": [true, false, null]}, []]");
    py("{\"z\": 1, \"a\": {}}", "{\"z\": 1, \"a\": {}}");  // (keys in their order)
    py("\"q\\\" b\\\\ \\/ \\n\\r\\t\\b\\f \\u0001 \\u007f é\"", "\"q\\\" b\\\\ / \\n\\r\\t\\b\\f \\u0001 \x7f é\"");
    struct text_buf b = {0};
    json_t *v = json_pack("[b,b,n,s,i]", 1, 0, "x", 3);
    for (size_t i = 0; i < json_array_size(v); i++) pyjson_str(json_array_get(v, i), &b), text_buf_append(&b, "|", 1);
    CHECK(b.p && !strcmp(b.p, "True|False|None|x|3|"));
    json_decref(v);
    text_buf_free(&b);
}

static const char *TOOLS = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
                           "\"Weather.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                           "\"string\"}},\"required\":[\"city\"]}}}]";

// Feeds text's tokens to a response of a chat body made of extra and TOOLS; returns the final body (whole) or
// last chunk (streaming, *content the content deltas before it, its delta's tool_calls every chunk's deltas
// joined).
static json_t *reply(const char *text, const char *extra, bool streaming, struct text_buf *content) {
    char body[1024];
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],%s%s}", TOOLS,
             extra);
    struct oai_request r;
    struct oai_error e;
    if (oai_parse(&ctx, OAI_CHAT, body, strlen(body), &r, &e) < 0) { fprintf(stderr, "  %s\n", e.message); return NULL; }
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(tok, text, strlen(text), false, true, &ids, &n) < 0) return NULL;
    struct oai_response s;
    oai_response_init(&s, &ctx, &r, streaming);
    json_t *joined = json_array();
    for (int i = 0; i < n; i++) {
        struct gen_event ev = {.kind = GEN_TOKEN, .token = ids[i]};
        json_t *ch = NULL;
        int rc = oai_response_token(&s, &ev, &ch);
        json_t *d = json_object_get(json_array_get(json_object_get(ch, "choices"), 0), "delta");
        if (json_is_string(json_object_get(d, "content")))
            text_buf_append(content, json_string_value(json_object_get(d, "content")),
                            strlen(json_string_value(json_object_get(d, "content"))));
        if (json_object_get(d, "tool_calls")) join_call_deltas(joined, json_object_get(d, "tool_calls"));
        json_decref(ch);
        if (rc) break;
    }
    json_t *o = NULL;
    oai_response_finish(&s, "stop", 0, &o);
    json_t *d = streaming ? json_object_get(json_array_get(json_object_get(o, "choices"), 0), "delta") : NULL;
    if (json_object_get(d, "tool_calls")) join_call_deltas(joined, json_object_get(d, "tool_calls"));
    if (d && json_array_size(joined)) json_object_set(d, "tool_calls", joined);
    json_decref(joined);
    oai_response_free(&s);
    oai_request_free(&r);
    free(ids);
    return o;
}

// Checks a reply's choice: content (NULL: null), finish_reason, and its calls "name=arguments;...".
static void check_reply(json_t *o, bool streaming, const char *content, const char *finish, const char *calls) {
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    json_t *m = json_object_get(ch, streaming ? "delta" : "message"), *tc = json_object_get(m, "tool_calls");
    const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
    CHECK_MSG(fr && !strcmp(fr, finish), "finish_reason %s, want %s", fr ? fr : "(null)", finish);
    if (!streaming) {
        json_t *c = json_object_get(m, "content");
        CHECK_MSG(content ? json_is_string(c) && !strcmp(json_string_value(c), content) : json_is_null(c),
                  "content %s, want %s", json_is_string(c) ? json_string_value(c) : "null", content ? content : "null");
    }
    struct text_buf b = {0};
    size_t k;
    json_t *c;
    json_array_foreach(tc, k, c) {
        json_t *fn = json_object_get(c, "function");
        text_buf_printf(&b, "%s=%s;", json_string_value(json_object_get(fn, "name")),
                        json_string_value(json_object_get(fn, "arguments")));
        const char *id = json_string_value(json_object_get(c, "id"));
        CHECK(id && !strncmp(id, "call_chatcmpl-", 14) && !strcmp(json_string_value(json_object_get(c, "type")),
                                                                   "function"));
    }
    CHECK_MSG(calls ? b.p && !strcmp(b.p, calls) : !tc, "calls %s, want %s", b.p ? b.p : "(none)",
              calls ? calls : "(none)");
    text_buf_free(&b);
}

TEST(calls_in_replies) {
    const char *a = "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
                    "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>";
    const char *b = " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\", "
                    "\"days\": [1,2]}<|call|>";
    const char *pre = "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.get_weather"
                      "<|channel|>commentary json<|message|>{bad json<|call|>";
    const char *two = "<|channel|>commentary to=functions.get_weather json<|message|>{\"city\":\"A\"}<|end|>"
                      "<|start|>assistant<|channel|>commentary to=functions.get_time json<|message|>{}<|call|>";
    const char *empty = "<|channel|>commentary to=functions.get_time json<|message|><|call|>";
    const char *web = "<|channel|>analysis<|message|>Search.<|end|><|start|>assistant to=browser.search<|channel|>"
                      "commentary json<|message|>{\"query\":\"x\"}<|call|>";
    for (int st = 0; st < 2; st++) {
        struct text_buf c = {0};
        json_t *o = reply(a, "", st, &c);
        check_reply(o, st, NULL, "tool_calls", "get_weather={\"city\": \"Paris\"};");
        json_t *m = json_object_get(json_array_get(json_object_get(o, "choices"), 0), st ? "delta" : "message");
        CHECK(st || !strcmp(json_string_value(json_object_get(m, "reasoning_content")), "Need the weather."));
        json_decref(o);
        o = reply(b, "", st, &c);
        check_reply(o, st, NULL, "tool_calls", "get_weather={\"city\": \"Oslo\", \"days\": [1, 2]};");
        json_decref(o);
        text_buf_free(&c);
        o = reply(pre, "", st, &c);
        check_reply(o, st, "Checking.", "tool_calls", "get_weather={bad json;");
        CHECK(!st || (c.p && !strcmp(c.p, "Checking.")));
        json_decref(o);
        o = reply(two, "", st, &c);
        check_reply(o, st, NULL, "tool_calls", "get_weather={\"city\": \"A\"};get_time={};");
        json_decref(o);
        o = reply(two, ",\"parallel_tool_calls\":false", st, &c);
        check_reply(o, st, NULL, "tool_calls", "get_weather={\"city\": \"A\"};");
        json_decref(o);
        o = reply(a, ",\"tool_choice\":\"none\"", st, &c);  // not parsed: neither a call nor content
        check_reply(o, st, "", "stop", NULL);
        json_decref(o);
        o = reply(empty, "", st, &c);  // (a call with no text: its arguments "", streamed or not)
        check_reply(o, st, NULL, "tool_calls", "get_time=;");
        json_decref(o);
        o = reply(web, "", st, &c);  // a built-in tool's message is not the client's
        check_reply(o, st, "", "stop", NULL);
        json_decref(o);
        text_buf_free(&c);
    }
}

// JSON mode (and a named tool_choice, which is JSON mode) would constrain the channels' headers too: refused,
// naming why.
TEST(json_mode_refused) {
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"response_format\":{\"type\":"
                       "\"json_object\"}}";
    struct oai_request r;
    struct oai_error e;
    CHECK(oai_parse(&ctx, OAI_CHAT, body, strlen(body), &r, &e) < 0 && e.status == 400 && e.param &&
          !strcmp(e.param, "response_format") && strstr(e.message, "channels"));
    char named[1024];  // (a named function's reply would be its arguments alone: the same)
    snprintf(named, sizeof named, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],%s,\"tool_choice\":"
             "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}}", TOOLS);
    CHECK(oai_parse(&ctx, OAI_CHAT, named, strlen(named), &r, &e) < 0 && e.status == 400 && e.param &&
          !strcmp(e.param, "tool_choice") && strstr(e.message, "channels"));
}

TEST(reasoning_sent_back) {
    // a reply's reasoning_content (or vLLM's "reasoning") is its analysis message beside its calls
    const char *names[2] = {"reasoning_content", "reasoning"};
    for (int k = 0; k < 2; k++) {
        char body[1024];
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Paris?\"},{\"role\":"
                 "\"assistant\",\"content\":null,\"%s\":\"Look it up.\",\"tool_calls\":[{\"id\":\"c1\",\"type\":"
                 "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\","
                 "\"tool_call_id\":\"c1\",\"content\":\"sun\"}],%s}", names[k], TOOLS);
        struct oai_request r;
        struct oai_error e;
        CHECK_MSG(oai_parse(&ctx, OAI_CHAT, body, strlen(body), &r, &e) == 0, "%s", e.message);
        char text[4096];
        size_t n = tokenizer_decode(tok, r.prompt_ids, r.n_prompt, true, text, sizeof text);
        text[n < sizeof text ? n : sizeof text - 1] = 0;
        CHECK_MSG(strstr(text, "<|start|>assistant<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant "
                               "to=functions.get_weather<|channel|>commentary json<|message|>{}<|call|>"), "%s", text);
        oai_request_free(&r);
    }
}

TEST(serve_flags) {
    char *ok[] = {"--enable-auto-tool-choice", "--tool-call-parser", "openai"};
    CHECK_OK(serve_check_flags(ok, 3));
    char *bad[] = {"--enable-auto-tool-choice", "--tool-call-parser", "pythonic"};
    CHECK(serve_check_flags(bad, 3) < 0 && strstr(err_msg(), "openai"));
    // without the parser, "auto" is refused with what to run
    ctx.tool_parser = false;
    char body[512];
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],%s}", TOOLS);
    struct oai_request r;
    struct oai_error e;
    CHECK(oai_parse(&ctx, OAI_CHAT, body, strlen(body), &r, &e) < 0 && strstr(e.message, "openai"));
    ctx.tool_parser = true;
}

int main(void) {
    if (tokenizer_from_hf_json(&tok, "tests/data/tok_harmony/tokenizer.json") < 0) {
        fprintf(stderr, "%s\n", err_msg());
        return 1;
    }
    ctx = (struct oai_context){.tok = tok, .served_name = "gpt-oss", .model_path = "gpt-oss", .max_model_len = 8192,
                               .tmpl = CHAT_TEMPLATE_HARMONY, .tool_parser = true, .tool_parser_harmony = true};
    RUN(prompts_as_the_template_renders_them);
    RUN(calls_beyond_the_template);
    RUN(python_json_text);
    RUN(calls_in_replies);
    RUN(reasoning_sent_back);
    RUN(json_mode_refused);
    RUN(serve_flags);
    tokenizer_free(tok);
    return test_summary("harmony_tools");
}
