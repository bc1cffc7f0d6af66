// test_tool_calls.c — tool calling in Qwen's hermes format (src/server/tool_calls.c, chat_template.c's
// ChatML / Qwen3 renderer, openai.c's responses) on tests/data/tok_qwen3: the prompt with tools, earlier
// calls and their results exactly as Qwen3's template writes them (Qwen3 keeping the reasoning of the current
// tool loop's replies, a reasoning_content sent back in place of the one in the text), and a ChatML
// template's default system prompt (Qwen2.5's) found in its source and written where the conversation has
// none; the request rules (tool_choice auto needs the server's parser, none renders the tools
// without parsing, a named function's reply is its arguments (JSON mode; whole, streamed and cut off),
// "required" constrains the reply to calls, a template without a tool format refused, bad
// entries named); a reply's <tool_call> blocks as tool_calls, whole and streamed (the tag arriving a byte at a
// time), parallel_tool_calls false, and a block that does not parse left as content.
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/model/tokenizer.h"
#include "../../src/server/openai.h"
#include "../test.h"
#include "call_deltas.h"

static struct tokenizer *tok;
static struct oai_context ctx;

static const char *TOOL_W = "{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"parameters\": "
                            "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}";
static const char *TOOL_T = "{\"type\": \"function\", \"function\": {\"name\": \"time\", \"description\": \"Now.\"}}";

TEST(qwen3_prompt_with_tools) {
    struct chat_tool_call calls[2] = {{.name = "weather", .arguments = "{\"city\": \"Oslo\"}"}, {.name = "time", .arguments = "{}"}};
    struct chat_msg m[6] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Oslo?"},
                            {.role = "assistant", .content = "<think>\nneed data\n</think>\n\nChecking.", .calls = calls, .n_calls = 2},
                            {.role = "tool", .content = "-3 C"}, {.role = "tool", .content = "09:00"}, {.role = "assistant", .content = "<think>ok</think>Cold."}};
    const char *tools[2] = {TOOL_W, TOOL_T};
    struct chat_opts o = {.tools = tools, .n_tools = 2};
    size_t ns = chat_template_n_spans(m, 6, &o);
    size_t *spans = malloc(ns * sizeof *spans);
    char *text = NULL;
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_QWEN3, m, 6, true, NULL, &o, &text, spans));
    const char *want =
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"city\": {\"type\": \"string\"}}}}}\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"time\", \"description\": \"Now.\"}}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nOslo?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nneed data\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"weather\", "
        "\"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"time\", \"arguments\": {}}\n"
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n-3 C\n</tool_response>\n<tool_response>\n09:00\n</tool_response>"
        "<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nok\n</think>\n\nCold.<|im_end|>\n"
        "<|im_start|>assistant\n";
    CHECK_MSG(text && !strcmp(text, want), "got:\n%s", text ? text : "(null)");
    // the spans cover the client's text only, in order: never a tag of the template's
    size_t prev = 0;
    for (size_t i = 0; text && i < ns && spans[i] < strlen(text); i += 2) {
        CHECK(spans[i] >= prev && spans[i + 1] >= spans[i]);
        CHECK(!memmem(text + spans[i], spans[i + 1] - spans[i], "<|im_", 5));
        prev = spans[i + 1];
    }
    free(text);
    // before the last user message a reply loses its reasoning; without tools its calls still render
    struct chat_msg h[3] = {{.role = "user", .content = "a"}, {.role = "assistant", .content = "<think>r</think>\n\nb", .calls = calls, .n_calls = 1}, {.role = "user", .content = "c"}};
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_QWEN3, h, 3, false, NULL, NULL, &text, NULL));
    CHECK_MSG(text && !strcmp(text, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb\n<tool_call>\n"
                                    "{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
                                    "<|im_end|>\n<|im_start|>user\nc<|im_end|>\n"), "%s", text ? text : "(null)");
    free(text);
    // the current loop's replies: an empty reasoning is dropped, except in the last message, which always opens
    // with a block; the reasoning ends at the first </think>, the text starts after the last
    struct chat_msg e[4] = {{.role = "user", .content = "a"}, {.role = "assistant", .content = "<think></think>x", .calls = calls + 1, .n_calls = 1},
                            {.role = "tool", .content = "r"}, {.role = "assistant", .content = "y"}};
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_QWEN3, e, 4, false, NULL, NULL, &text, NULL));
    CHECK_MSG(text && !strcmp(text, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nx\n<tool_call>\n"
                                    "{\"name\": \"time\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n"
                                    "<tool_response>\nr\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                                    "</think>\n\ny<|im_end|>\n"), "%s", text ? text : "(null)");
    free(text);
    e[3].content = "<think>\np</think>q</think>\n\nz";
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_QWEN3, e, 4, false, NULL, NULL, &text, NULL));
    CHECK_MSG(text && strstr(text, "<|im_start|>assistant\n<think>\np\n</think>\n\nz<|im_end|>\n"), "%s",
              text ? text : "(null)");
    free(text);
    // a reasoning_content sent back is the reply's reasoning (newlines trimmed), and its text is then whole
    struct chat_msg g[5] = {{.role = "user", .content = "a"},
                            {.role = "assistant", .content = "<think>k</think>z", .reasoning = "old"},
                            {.role = "user", .content = "c"},
                            {.role = "assistant", .content = "b", .calls = calls + 1, .n_calls = 1, .reasoning = "\nr1\n"},
                            {.role = "assistant", .content = "\n\nx</think>y", .reasoning = ""}};
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_QWEN3, g, 5, false, NULL, NULL, &text, NULL));
    CHECK_MSG(text && !strcmp(text, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>k</think>z"
                                    "<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n<think>\nr1\n"
                                    "</think>\n\nb\n<tool_call>\n{\"name\": \"time\", \"arguments\": {}}\n"
                                    "</tool_call><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                                    "x</think>y<|im_end|>\n"), "%s", text ? text : "(null)");
    free(text);
    // a call with no text before it opens the turn directly
    struct chat_msg q[1] = {{.role = "assistant", .content = "", .calls = calls + 1, .n_calls = 1}};
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_CHATML, q, 1, false, NULL, NULL, &text, NULL));
    CHECK(text && !strcmp(text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"time\", \"arguments\": {}}\n"
                                "</tool_call><|im_end|>\n"));
    free(text);
    // families without the format refuse tools, tool messages and calls, naming them
    CHECK(chat_template_render_opts(CHAT_TEMPLATE_LLAMA3, m, 2, true, NULL, &o, &text, NULL) < 0 &&
          strstr(err_msg(), "tools") && strstr(err_msg(), "llama3"));
    CHECK(chat_template_render_opts(CHAT_TEMPLATE_LLAMA3, m + 3, 1, true, NULL, NULL, &text, NULL) < 0 &&
          strstr(err_msg(), "messages[0].role: 'tool'"));
    CHECK(chat_template_render_opts(CHAT_TEMPLATE_GEMMA, m + 2, 1, true, NULL, NULL, &text, NULL) < 0 &&
          strstr(err_msg(), "messages[0].tool_calls"));
    free(spans);
}

static const char *MSGS = "\"messages\":[{\"role\":\"user\",\"content\":\"Oslo?\"}]";

// Parses a chat body built from MSGS and extra fields; returns the HTTP status (0 = parsed, r kept).
static int parse(const char *extra, struct oai_request *r, struct oai_error *e) {
    char body[2048];
    snprintf(body, sizeof body, "{%s%s}", MSGS, extra);
    return oai_parse(&ctx, OAI_CHAT, body, strlen(body), r, e) == 0 ? 0 : e->status;
}

// The status and error of a body that must be refused, naming param and containing want.
static void refused(const char *extra, const char *param, const char *want) {
    struct oai_request r;
    struct oai_error e;
    int st = parse(extra, &r, &e);
    CHECK_MSG(st == 400, "%s: status %d", extra, st);
    if (!st) { oai_request_free(&r); return; }
    CHECK_MSG(e.param && !strcmp(e.param, param), "%s: param %s", extra, e.param ? e.param : "(null)");
    CHECK_MSG(strstr(e.message, want), "%s: '%s' lacks '%s'", extra, e.message, want);
}

static const char *TOOLS = ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"weather\"}}]";

// The prompt a chat body renders to (special tokens as text) into text[0..cap); false (with the 400's message
// printed) if the body is refused.
static bool prompt_of(const char *body, char *text, size_t cap) {
    struct oai_request r;
    struct oai_error e;
    if (oai_parse(&ctx, OAI_CHAT, body, strlen(body), &r, &e) < 0) {
        fprintf(stderr, "  %s\n", e.message);
        return false;
    }
    size_t k = tokenizer_decode(tok, r.prompt_ids, r.n_prompt, true, text, cap);
    text[k < cap ? k : cap - 1] = 0;
    oai_request_free(&r);
    return true;
}

TEST(default_system_prompt) {
    // a ChatML template's own system text (Qwen2.5's shape: a tools branch that names it bare, a branch that
    // writes the system message's expression, then the literal one) is found; Qwen3's and plain ChatML have none
    const char *q25 = "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}"
                      "{{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen, a test.' }}{%- endif %}{%- else %}"
                      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] "
                      "+ '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, a test.<|im_end|>\\n' }}"
                      "{%- endif %}{%- endif %}";
    char d[64];
    CHECK_EQ_INT((int)chat_template_default_system(q25, d, sizeof d), 21);
    CHECK(!strcmp(d, "You are Qwen, a test."));
    CHECK_EQ_INT((int)chat_template_default_system(q25, d, 10), 0);  // (too long for the room: none)
    CHECK_EQ_INT((int)chat_template_default_system("{%- if messages[0].role == 'system' %}{{- '<|im_start|>system"
                                                   "\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}",
                                                   d, sizeof d), 0);
    CHECK_EQ_INT((int)chat_template_default_system("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                                                   "<|im_end|>\n{% endfor %}", d, sizeof d), 0);
    // rendered where the conversation has no system message, before the tools too; never over the client's
    struct chat_opts o = {.default_system = "You are Qwen, a test."};
    struct chat_msg u[1] = {{.role = "user", .content = "hi"}}, su[2] = {{.role = "system", .content = "Mine."},
                                                                        {.role = "user", .content = "hi"}};
    char *text = NULL;
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_CHATML, u, 1, true, NULL, &o, &text, NULL));
    CHECK_MSG(text && !strcmp(text, "<|im_start|>system\nYou are Qwen, a test.<|im_end|>\n<|im_start|>user\nhi"
                                    "<|im_end|>\n<|im_start|>assistant\n"), "%s", text ? text : "(null)");
    free(text);
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_CHATML, su, 2, true, NULL, &o, &text, NULL));
    CHECK(text && !strstr(text, "a test") && strstr(text, "<|im_start|>system\nMine.<|im_end|>"));
    free(text);
    const char *tools[1] = {TOOL_T};
    o.tools = tools;
    o.n_tools = 1;
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_CHATML, u, 1, true, NULL, &o, &text, NULL));
    const char *want = "<|im_start|>system\nYou are Qwen, a test.\n\n# Tools\n\n";
    CHECK_MSG(text && !strncmp(text, want, strlen(want)), "%s", text ? text : "(null)");
    free(text);
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_CHATML, su, 2, true, NULL, &o, &text, NULL));
    want = "<|im_start|>system\nMine.\n\n# Tools";
    CHECK_MSG(text && !strstr(text, "a test") && !strncmp(text, want, strlen(want)), "%s", text ? text : "(null)");
    free(text);
}

TEST(request_rules) {
    struct oai_request r;
    struct oai_error e;
    char extra[512];
    ctx.tool_parser = false;
    refused(TOOLS, "tool_choice", "--enable-auto-tool-choice --tool-call-parser (hermes");
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"none\"", TOOLS);  // rendered, not parsed
    CHECK_EQ_INT(parse(extra, &r, &e), 0);
    CHECK(r.tools.n_tools == 1 && !r.tools.parse);
    char text[4096];
    size_t k = tokenizer_decode(tok, r.prompt_ids, r.n_prompt, true, text, sizeof text);
    text[k < sizeof text ? k : sizeof text - 1] = 0;
    CHECK_MSG(strstr(text, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"weather\"}}\n</tools>"), "%s",
              text);
    oai_request_free(&r);
    ctx.tool_parser = true;
    CHECK_EQ_INT(parse(TOOLS, &r, &e), 0);
    CHECK(r.tools.parse && !r.tools.single);
    oai_request_free(&r);
    // "required": the reply is calls of the tools' functions in the hermes format (constrained), parsed; no
    // parser flag needed, and not for an empty tools list or with min_tokens
    ctx.tool_parser = false;
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\",\"parallel_tool_calls\":false", TOOLS);
    CHECK_EQ_INT(parse(extra, &r, &e), 0);
    CHECK(r.tools.required && r.tools.parse && r.gen.reply && r.gen.reply->kind == REPLY_HERMES_CALLS &&
          r.gen.reply->n_names == 1 && !strcmp(r.gen.reply->names[0], "weather") && r.gen.reply->single);
    oai_request_free(&r);
    ctx.tool_parser = true;
    refused(",\"tool_choice\":\"required\"", "tool_choice", "'tools' is empty");
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\",\"min_tokens\":2", TOOLS);
    refused(extra, "tool_choice", "min_tokens");
    // a named function: rendered, not parsed, the reply its arguments (JSON mode); no parser flag needed
    ctx.tool_parser = false;
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"weather\"}}",
             TOOLS);
    CHECK_EQ_INT(parse(extra, &r, &e), 0);
    CHECK(r.tools.named && !strcmp(r.tools.named, "weather") && !r.tools.parse && r.gen.reply &&
          r.gen.reply->kind == REPLY_JSON_OBJECT);
    k = tokenizer_decode(tok, r.prompt_ids, r.n_prompt, true, text, sizeof text);
    text[k < sizeof text ? k : sizeof text - 1] = 0;
    CHECK(strstr(text, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"weather\"}}\n</tools>"));
    oai_request_free(&r);
    ctx.tool_parser = true;
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"wind\"}}", TOOLS);
    refused(extra, "tool_choice", "'wind', which 'tools' does not have");
    refused(",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"wind\"}}", "tool_choice",
            "'tools' is empty");
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":{\"type\":\"function\"}", TOOLS);
    refused(extra, "tool_choice", "must be");
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"weather\"}},"
             "\"min_tokens\":2", TOOLS);
    refused(extra, "tool_choice", "min_tokens");
    refused(",\"tools\":[{\"type\":\"function\",\"function\":{}}]", "tools", "tools[0] must be");
    refused(",\"tools\":{}", "tools", "must be an array");
    snprintf(extra, sizeof extra, "%s,\"parallel_tool_calls\":1", TOOLS);
    refused(extra, "parallel_tool_calls", "boolean");
    refused(",\"functions\":[{\"name\":\"f\"}]", "functions", "legacy functions");
    // an assistant message's calls must be well formed; its content may be null
    const char *bad = "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\","
                      "\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}";
    CHECK_EQ_INT(oai_parse(&ctx, OAI_CHAT, bad, strlen(bad), &r, &e) == 0 ? 0 : e.status, 400);
    CHECK(strstr(e.message, "messages[0].tool_calls[0]"));
    const char *good = "{\"messages\":[{\"role\":\"user\",\"content\":\"Oslo?\"},{\"role\":\"assistant\",\"content\":"
                       "null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"weather\","
                       "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
                       "\"content\":\"-3 C\"}]}";
    CHECK(prompt_of(good, text, sizeof text));
    CHECK_MSG(strstr(text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"weather\", \"arguments\": "
                           "{\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
                           "-3 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"), "%s", text);
    // the arguments are rendered as Python's json.dumps writes them (above: sent compact), "" as {}; text that
    // is not JSON is refused, naming it
    const char *empty = "{\"messages\":[{\"role\":\"user\",\"content\":\"Now?\"},{\"role\":\"assistant\","
                        "\"content\":\"\",\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"time\","
                        "\"arguments\":\"\"}}]}]}";
    CHECK(prompt_of(empty, text, sizeof text));
    CHECK_MSG(strstr(text, "{\"name\": \"time\", \"arguments\": {}}"), "%s", text);
    const char *notjson = "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":"
                          "\"function\",\"function\":{\"name\":\"time\",\"arguments\":\"{oops\"}}]}]}";
    CHECK_EQ_INT(oai_parse(&ctx, OAI_CHAT, notjson, strlen(notjson), &r, &e) == 0 ? 0 : e.status, 400);
    CHECK_MSG(strstr(e.message, "messages[0].tool_calls[0].function.arguments is not JSON"), "%s", e.message);
    // completions have no tools; a template without the format refuses them
    const char *cb = "{\"prompt\":\"hi\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}";
    CHECK_EQ_INT(oai_parse(&ctx, OAI_COMPLETION, cb, strlen(cb), &r, &e) == 0 ? 0 : e.status, 400);
    ctx.tmpl = CHAT_TEMPLATE_LLAMA3;
    refused(TOOLS, "tools", "no tool format");
    ctx.tmpl = CHAT_TEMPLATE_QWEN3;
}

TEST(calls_in_text) {
    size_t cn = 0;
    const char *t = "Sure.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>\n"
                    "<tool_call>\n{\"name\": \"time\", \"arguments\": {}}\n</tool_call>";
    json_t *c = tool_calls_parse(t, strlen(t), false, "x", &cn);
    CHECK(c && json_array_size(c) == 2 && cn == 6);
    json_t *f = json_object_get(json_array_get(c, 0), "function");
    CHECK(!strcmp(json_string_value(json_object_get(f, "name")), "weather"));
    CHECK(!strcmp(json_string_value(json_object_get(f, "arguments")), "{\"city\": \"Oslo\"}"));  // (json.dumps')
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(c, 1), "id")), "call_x_1"));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(c, 1), "type")), "function"));
    json_decref(c);
    c = tool_calls_parse(t, strlen(t), true, "x", &cn);
    CHECK(c && json_array_size(c) == 1);
    json_decref(c);
    const char *open = "<tool_call>\n{\"name\": \"time\", \"arguments\": {}}";  // (the last may be unclosed)
    c = tool_calls_parse(open, strlen(open), false, "x", &cn);
    CHECK(c && json_array_size(c) == 1 && cn == 0);
    json_decref(c);
    const char *bad[] = {"plain text", "<tool_call>\n{\"name\": \"f\"\n</tool_call>", "<tool_call>{\"arguments\": {}}"
                         "</tool_call>", "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>"};
    for (int i = 0; i < 4; i++) {
        cn = 0;
        CHECK_MSG(!tool_calls_parse(bad[i], strlen(bad[i]), false, "x", &cn) && cn == strlen(bad[i]), "%s", bad[i]);
    }
    // streamed: the text before the tag passes, the tag's possible beginning waits, a near miss is released
    struct call_stream s;
    struct text_buf out = {0};
    call_stream_init(&s, "x", false);
    const char *pieces[] = {"Hel", "lo <to", "ols> <tool", "_ca", "ll>\n{", "\"name\""};
    for (int i = 0; i < 6; i++) CHECK_OK(call_stream_text(&s, pieces[i], strlen(pieces[i]), &out));
    CHECK(out.p && !strcmp(out.p, "Hello <tools> ") && !call_stream_take(&s));
    text_buf_free(&out);
    call_stream_free(&s);
}

// Feeds text's tokens to a response of body (streamed or whole); returns the final JSON, the streamed
// content concatenated into *content and the streamed tool_calls deltas joined into *calls.
static json_t *reply(const char *text, const char *extra, bool streaming, struct text_buf *content, json_t **calls) {
    struct oai_request r;
    struct oai_error e;
    *calls = NULL;
    if (parse(extra, &r, &e)) { fprintf(stderr, "  %s\n", e.message); return NULL; }
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(tok, text, strlen(text), false, true, &ids, &n) < 0) return NULL;
    struct oai_response s;
    oai_response_init(&s, &ctx, &r, streaming);
    json_t *o = NULL;
    for (int i = 0; i <= n; i++) {
        json_t *ch = NULL;
        if (i < n) {
            struct gen_event ev = {.kind = GEN_TOKEN, .token = ids[i]};
            if (oai_response_token(&s, &ev, &ch)) i = n - 1;  // (a stop: the finish next)
        } else {
            oai_response_finish(&s, "stop", 0, &o);
            ch = json_incref(o);
        }
        json_t *d = json_object_get(json_array_get(json_object_get(ch, "choices"), 0), "delta");
        json_t *ct = json_object_get(d, "content"), *tc = json_object_get(d, "tool_calls");
        if (json_is_string(ct)) text_buf_append(content, json_string_value(ct), json_string_length(ct));
        if (tc && !*calls) *calls = json_array();
        if (tc) join_call_deltas(*calls, tc);
        json_decref(ch);
    }
    oai_response_free(&s);
    oai_request_free(&r);
    free(ids);
    return o;
}

// Two responses' calls are the same but for their ids' response part: "call_<response id>_<k>" each.
static bool same_calls(json_t *a, json_t *b) {
    json_t *x = json_deep_copy(a), *y = json_deep_copy(b);
    bool same = json_array_size(x) == json_array_size(y);
    for (size_t k = 0; same && k < json_array_size(x); k++) {
        char tail[24];
        snprintf(tail, sizeof tail, "_%zu", k);
        for (int i = 0; i < 2; i++) {
            json_t *c = json_array_get(i ? y : x, k);
            const char *id = json_string_value(json_object_get(c, "id"));
            same &= id && !strncmp(id, "call_chatcmpl-", 14) && strlen(id) > strlen(tail) &&
                    !strcmp(id + strlen(id) - strlen(tail), tail);
            json_object_del(c, "id");
        }
    }
    same &= json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return same;
}

TEST(replies_with_calls) {
    const char *t = "Let me check.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
                    "</tool_call>\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Bergen\"}}\n"
                    "</tool_call><|im_end|>";
    ctx.tool_parser = true;
    struct text_buf c = {0};
    json_t *calls;
    json_t *o = reply(t, TOOLS, false, &c, &calls);
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0), *msg = json_object_get(ch, "message");
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls"));
    CHECK(!strcmp(json_string_value(json_object_get(msg, "content")), "Let me check.\n"));
    json_t *tc = json_object_get(msg, "tool_calls");
    CHECK(json_array_size(tc) == 2);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(tc, 1), "function"),
                                                    "arguments")), "{\"city\": \"Bergen\"}"));
    // streamed: the same text before the calls, then the calls in pieces that join to the whole reply's
    json_t *whole = json_incref(tc);
    json_decref(o);
    o = reply(t, TOOLS, true, &c, &calls);
    CHECK_MSG(c.p && !strcmp(c.p, "Let me check.\n"), "%s", c.p ? c.p : "(null)");
    CHECK(json_array_size(calls) == 2 && same_calls(calls, whole));
    json_decref(whole);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(json_object_get(o, "choices"), 0),
                                                    "finish_reason")), "tool_calls"));
    json_decref(calls);
    json_decref(o);
    text_buf_free(&c);
    // parallel_tool_calls false: the first call only
    char extra[256];
    snprintf(extra, sizeof extra, "%s,\"parallel_tool_calls\":false", TOOLS);
    o = reply(t, extra, false, &c, &calls);
    msg = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    CHECK(json_array_size(json_object_get(msg, "tool_calls")) == 1);
    json_decref(o);
    // a block that is not a call stays content (whole and streamed), finish_reason as generated
    const char *broken = "Hmm <tool_call>{oops}</tool_call>";
    o = reply(broken, TOOLS, false, &c, &calls);
    ch = json_array_get(json_object_get(o, "choices"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(ch, "message"), "content")), broken));
    CHECK(!json_object_get(json_object_get(ch, "message"), "tool_calls"));
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop"));
    json_decref(o);
    o = reply(broken, TOOLS, true, &c, &calls);
    CHECK(c.p && !strcmp(c.p, broken) && !calls);
    json_decref(o);
    text_buf_free(&c);
    // JSON mode beside tools the reply may call: refused (tool_choice none renders them, and takes it)
    snprintf(extra, sizeof extra, "%s,\"response_format\":{\"type\":\"json_object\"}", TOOLS);
    struct oai_request rq;
    struct oai_error er;
    CHECK(parse(extra, &rq, &er) == 400 && er.param && !strcmp(er.param, "response_format"));
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"none\",\"response_format\":{\"type\":\"json_object\"}", TOOLS);
    CHECK(parse(extra, &rq, &er) == 0 && rq.gen.reply);
    if (rq.gen.reply) oai_request_free(&rq);
    // a named function: the reply's text is its arguments, one call, finish_reason as generated (OpenAI's
    // "stop"), the streamed deltas joined equal to it; cut off, its beginning in both
    const char *named = ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"weather\"}}],\"tool_choice\":"
                        "{\"type\":\"function\",\"function\":{\"name\":\"weather\"}}";
    const char *args[2] = {"{\"city\":\"Oslo\",\"days\":[1,2]}<|im_end|>", "{\"city\":\"Os"};
    const char *want[2] = {"{\"city\": \"Oslo\", \"days\": [1, 2]}", "{\"city\": \"Os"};
    for (int i = 0; i < 2; i++) {
        o = reply(args[i], named, false, &c, &calls);
        ch = json_array_get(json_object_get(o, "choices"), 0);
        msg = json_object_get(ch, "message");
        tc = json_object_get(msg, "tool_calls");
        json_t *f0 = json_object_get(json_array_get(tc, 0), "function");
        CHECK(json_array_size(tc) == 1 && !strcmp(json_string_value(json_object_get(f0, "name")), "weather"));
        CHECK_MSG(!strcmp(json_string_value(json_object_get(f0, "arguments")), want[i]), "%s",
                  json_string_value(json_object_get(f0, "arguments")));
        CHECK(json_is_null(json_object_get(msg, "content")) &&
              !strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop"));
        whole = json_incref(tc);
        json_decref(o);
        text_buf_free(&c);
        o = reply(args[i], named, true, &c, &calls);
        CHECK(!c.n && same_calls(calls, whole));
        CHECK(!strcmp(json_string_value(json_object_get(json_array_get(json_object_get(o, "choices"), 0),
                                                        "finish_reason")), "stop"));
        json_decref(whole);
        json_decref(calls);
        json_decref(o);
    }
    // tool_choice none: the reply's text as it came
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"none\"", TOOLS);
    o = reply(t, extra, false, &c, &calls);
    msg = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    CHECK(!json_object_get(msg, "tool_calls") && strstr(json_string_value(json_object_get(msg, "content")),
                                                        "<tool_call>"));
    json_decref(o);
}

int main(void) {
    if (tokenizer_from_hf_json(&tok, "tests/data/tok_qwen3/tokenizer.json") < 0) {
        fprintf(stderr, "%s\n", err_msg());
        return 1;
    }
    ctx = (struct oai_context){.tok = tok, .served_name = "qwen3", .model_path = "qwen3", .max_model_len = 4096,
                               .tmpl = CHAT_TEMPLATE_QWEN3};
    RUN(qwen3_prompt_with_tools);
    RUN(default_system_prompt);
    RUN(request_rules);
    RUN(calls_in_text);
    RUN(replies_with_calls);
    tokenizer_free(tok);
    return test_summary("tool_calls");
}
