// test_reasoning.c — replies that reason before they answer, in the server: gpt-oss's harmony format
// (src/server/chat_template.c's renderer, harmony.c's reply router) on tests/data/tok_harmony, a byte-level
// BPE with the harmony special tokens whose template sits in chat_template.jinja as transformers writes it;
// and Qwen3's <think> blocks on tests/data/tok_qwen3 (its turn tokens and think tags).
// Harmony: the template is read from the .jinja file and detected, and gptoss checkpoints without one get
// harmony; the prompt is the model card's format (system message with date and reasoning effort, the
// user's system prompt as developer instructions, earlier replies in the final channel); reasoning_effort
// is taken for harmony, refused elsewhere and for bad values; a reply's analysis channel becomes
// reasoning_content and its final channel the content, whole and streamed, headers in neither; stop
// strings apply to the content only; <|return|> and <|call|> end a reply.
// Qwen3: chat_template_kwargs.enable_thinking false closes the think block in the prompt (other keys and
// families refused); earlier replies lose their block; --reasoning-parser qwen3 / deepseek_r1 split a
// reply's block into reasoning_content (null where there was none).
#include <stdlib.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/model/tokenizer.h"
#include "../../src/server/openai.h"
#include "../test.h"

static struct tokenizer *tok;
static struct oai_context ctx;

TEST(template_from_jinja_file) {
    const char *j = tokenizer_chat_template(tok);
    CHECK(j && strstr(j, "<|channel|>final"));
    CHECK_EQ_INT(chat_template_detect(j), CHAT_TEMPLATE_HARMONY);
    CHECK_EQ_INT(chat_template_pick(NULL, "gptoss"), CHAT_TEMPLATE_HARMONY);
    CHECK(!strcmp(chat_template_name(CHAT_TEMPLATE_HARMONY), "harmony"));
    CHECK(!chat_template_has_bos(CHAT_TEMPLATE_HARMONY));
    // the other families' signatures still win where they appear
    CHECK_EQ_INT(chat_template_detect("<|im_start|>{{ m }}<|im_end|>"), CHAT_TEMPLATE_CHATML);
    CHECK_EQ_INT(chat_template_detect("<|user|>{{ m }}<|end|>"), CHAT_TEMPLATE_PHI3);
}

TEST(prompt_format) {
    struct chat_msg m[4] = {{.role = "system", .content = "Answer briefly."}, {.role = "user", .content = "2+2?"}, {.role = "assistant", .content = "4"}, {.role = "user", .content = "3+3?"}};
    struct chat_opts o = {.reasoning_effort = "low", .date = "2026-12-06"};
    char *text = NULL;
    size_t spans[8];
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_HARMONY, m, 4, true, NULL, &o, &text, spans));
    const char *want =
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
        "Knowledge cutoff: 2024-06\nCurrent date: 2026-12-06\n\nReasoning: low\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
        "<|start|>developer<|message|># Instructions\n\nAnswer briefly.\n\n<|end|>"
        "<|start|>user<|message|>2+2?<|end|>"
        "<|start|>assistant<|channel|>final<|message|>4<|end|>"
        "<|start|>user<|message|>3+3?<|end|>"
        "<|start|>assistant";
    CHECK_MSG(text && !strcmp(text, want), "got:\n%s", text ? text : "(null)");
    // each content's span holds exactly its text, in order
    for (int i = 0; text && i < 4; i++)
        CHECK(spans[2 * i + 1] - spans[2 * i] == strlen(m[i].content) &&
              !memcmp(text + spans[2 * i], m[i].content, strlen(m[i].content)));
    free(text);
    // defaults: medium effort, today's date; a developer message is the instructions too
    m[0].role = "developer";
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_HARMONY, m, 2, false, NULL, NULL, &text, NULL));
    CHECK(text && strstr(text, "Reasoning: medium\n") && strstr(text, "Current date: 20") &&
          strstr(text, "# Instructions\n\nAnswer briefly.") && !strstr(text, "<|start|>assistant"));
    free(text);
    // a system message after the first is refused, naming it
    struct chat_msg late[2] = {{.role = "user", .content = "hi"}, {.role = "system", .content = "be terse"}};
    text = NULL;
    CHECK(chat_template_render_opts(CHAT_TEMPLATE_HARMONY, late, 2, true, NULL, NULL, &text, NULL) < 0 &&
          strstr(err_msg(), "messages[1]") && !text);
}

// Parses a chat body; returns the HTTP status (0 = parsed, r kept).
static int parse(const char *body, struct oai_request *r, struct oai_error *e) {
    return oai_parse(&ctx, OAI_CHAT, body, strlen(body), r, e) == 0 ? 0 : e->status;
}

TEST(reasoning_effort) {
    struct oai_request r;
    struct oai_error e;
    CHECK_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"reasoning_effort\":\"high\"}", &r, &e), 0);
    char text[2048];
    size_t k = tokenizer_decode(tok, r.prompt_ids, r.n_prompt, true, text, sizeof text);
    text[k < sizeof text ? k : sizeof text - 1] = 0;
    CHECK_MSG(strstr(text, "Reasoning: high\n") && strstr(text, "<|start|>user<|message|>hi<|end|><|start|>assistant"),
              "%s", text);
    // the template's own tags are the special tokens (system, user, and the assistant's opening)
    int start = tokenizer_token_id(tok, "<|start|>", 9), n_start = 0;
    for (int i = 0; i < r.n_prompt; i++) n_start += r.prompt_ids[i] == start;
    CHECK_EQ_INT(n_start, 3);
    // <|return|> and <|call|> end the reply
    int ret = tokenizer_token_id(tok, "<|return|>", 10), call = tokenizer_token_id(tok, "<|call|>", 8), seen = 0;
    for (int i = 0; i < r.n_stop_ids; i++) seen |= (r.stop_ids[i] == ret) | (r.stop_ids[i] == call) << 1;
    CHECK_EQ_INT(seen, 3);
    oai_request_free(&r);
    CHECK_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"reasoning_effort\":\"max\"}", &r, &e),
                 400);
    CHECK(e.param && !strcmp(e.param, "reasoning_effort"));
    // a family with no reasoning effort refuses it; completions never take it
    ctx.tmpl = CHAT_TEMPLATE_CHATML;
    CHECK_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"reasoning_effort\":\"low\"}", &r, &e),
                 400);
    CHECK(strstr(e.message, "chatml"));
    ctx.tmpl = CHAT_TEMPLATE_HARMONY;
    const char *cb = "{\"prompt\":\"hi\",\"reasoning_effort\":\"low\"}";
    CHECK_EQ_INT(oai_parse(&ctx, OAI_COMPLETION, cb, strlen(cb), &r, &e) == 0 ? 0 : e.status, 400);
}

static const char *REPLY = "<|channel|>analysis<|message|>Think there.<|end|><|start|>assistant<|channel|>final"
                           "<|message|>Hi there, friend<|return|>";

// Feeds REPLY's tokens to a response of body; returns the final JSON (whole) or the chunks' deltas
// concatenated into *content / *reasoning (streaming), and how many tokens were consumed before the stop.
static json_t *reply_of(const char *text, const char *body, bool streaming, struct text_buf *content,
                        struct text_buf *reasoning, int *consumed) {
    struct oai_request r;
    struct oai_error e;
    if (parse(body, &r, &e)) { fprintf(stderr, "  %s\n", e.message); return NULL; }
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(ctx.tok, text, strlen(text), false, true, &ids, &n) < 0) return NULL;
    struct oai_response s;
    oai_response_init(&s, &ctx, &r, streaming);
    json_t *o = NULL;
    *consumed = 0;
    for (int i = 0; i < n; i++) {
        struct gen_event ev = {.kind = GEN_TOKEN, .token = ids[i]};
        json_t *ch = NULL;
        int rc = oai_response_token(&s, &ev, &ch);
        ++*consumed;
        for (json_t *c = ch; c; c = NULL) {
            json_t *d = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
            json_t *ct = json_object_get(d, "content"), *rs = json_object_get(d, "reasoning_content");
            if (json_is_string(ct)) text_buf_append(content, json_string_value(ct), json_string_length(ct));
            if (json_is_string(rs)) text_buf_append(reasoning, json_string_value(rs), json_string_length(rs));
        }
        json_decref(ch);
        if (rc) break;
    }
    oai_response_finish(&s, "length", 0, &o);
    if (streaming) {
        json_t *d = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "delta");
        json_t *ct = json_object_get(d, "content"), *rs = json_object_get(d, "reasoning_content");
        if (json_is_string(ct)) text_buf_append(content, json_string_value(ct), json_string_length(ct));
        if (json_is_string(rs)) text_buf_append(reasoning, json_string_value(rs), json_string_length(rs));
    }
    oai_response_free(&s);
    oai_request_free(&r);
    free(ids);
    return o;
}

static json_t *reply(const char *body, bool streaming, struct text_buf *content, struct text_buf *reasoning,
                     int *consumed) {
    return reply_of(REPLY, body, streaming, content, reasoning, consumed);
}

static const char *BODY = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

TEST(channels_whole) {
    struct text_buf c = {0}, rs = {0};
    int used = 0, n_all = 0;
    int32_t *ids = NULL;
    CHECK_OK(tokenizer_encode(tok, REPLY, strlen(REPLY), false, true, &ids, &n_all));
    free(ids);
    json_t *o = reply(BODY, false, &c, &rs, &used);
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0), *msg = json_object_get(ch, "message");
    const char *content = json_string_value(json_object_get(msg, "content"));
    const char *reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
    CHECK_MSG(content && !strcmp(content, "Hi there, friend"), "content: %s", content ? content : "(null)");
    CHECK_MSG(reasoning && !strcmp(reasoning, "Think there."), "reasoning: %s", reasoning ? reasoning : "(null)");
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop"));
    CHECK_EQ_INT(used, n_all);  // (<|return|>, the last token, stopped it)
    json_decref(o);
    // a stop string cuts the content, never the reasoning, which holds it too
    o = reply("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":\"there\"}", false, &c, &rs, &used);
    msg = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    content = json_string_value(json_object_get(msg, "content"));
    reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
    CHECK_MSG(content && !strcmp(content, "Hi "), "content: %s", content ? content : "(null)");
    CHECK_MSG(reasoning && !strcmp(reasoning, "Think there."), "reasoning: %s", reasoning ? reasoning : "(null)");
    CHECK(used < n_all);
    json_decref(o);
    text_buf_free(&c);
    text_buf_free(&rs);
}

TEST(channels_streamed) {
    struct text_buf c = {0}, rs = {0};
    int used = 0;
    json_t *o = reply(BODY, true, &c, &rs, &used);
    CHECK(o != NULL);
    CHECK_MSG(c.p && !strcmp(c.p, "Hi there, friend"), "content: %s", c.p ? c.p : "(null)");
    CHECK_MSG(rs.p && !strcmp(rs.p, "Think there."), "reasoning: %s", rs.p ? rs.p : "(null)");
    json_decref(o);
    text_buf_free(&c);
    text_buf_free(&rs);
    // a model that names no channel: its text is the content
    struct harmony h;
    CHECK_OK(harmony_init(&h, tok));
    CHECK_EQ_INT(harmony_push(&h, tokenizer_token_id(tok, "<|message|>", 11)), REPLY_CONTROL);
    CHECK_EQ_INT(harmony_push(&h, 'a'), REPLY_CONTENT);
}

TEST(vocabulary_without_harmony_tokens) {
    struct tokenizer *plain = NULL;
    CHECK_OK(tokenizer_from_hf_json(&plain, "tests/data/tok_bpe/tokenizer.json"));
    struct harmony h;
    CHECK(plain && harmony_init(&h, plain) < 0 && strstr(err_msg(), "<|"));
    struct oai_context c2 = ctx;
    c2.tok = plain;
    struct oai_request r;
    struct oai_error e;
    CHECK(plain && oai_parse(&c2, OAI_CHAT, BODY, strlen(BODY), &r, &e) < 0 && e.status == 500);
    tokenizer_free(plain);
}

// ---- Qwen3's <think> blocks ----

static struct tokenizer *qtok;

TEST(qwen3_prompt) {
    const char *j = tokenizer_chat_template(qtok);
    CHECK_EQ_INT(chat_template_detect(j), CHAT_TEMPLATE_QWEN3);
    CHECK(!strcmp(chat_template_name(CHAT_TEMPLATE_QWEN3), "qwen3") && !chat_template_has_bos(CHAT_TEMPLATE_QWEN3));
    struct chat_msg m[3] = {{.role = "user", .content = "2+2?"}, {.role = "assistant", .content = "<think>\nadd\n</think>\n\n4"}, {.role = "user", .content = "3+3?"}};
    struct chat_opts o = {.no_thinking = true};
    char *text = NULL;
    size_t spans[6];
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_QWEN3, m, 3, true, NULL, &o, &text, spans));
    const char *want = "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
                       "<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    CHECK_MSG(text && !strcmp(text, want), "got:\n%s", text ? text : "(null)");
    CHECK(text && spans[3] - spans[2] == 1 && text[spans[2]] == '4');
    free(text);
    // thinking on (the default): the prompt ends at the assistant's turn; ChatML keeps a reply whole
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_QWEN3, m, 3, true, NULL, NULL, &text, NULL));
    CHECK(text && strstr(text, "<|im_start|>assistant\n") && !strstr(text, "</think>"));
    free(text);
    CHECK_OK(chat_template_render_opts(CHAT_TEMPLATE_CHATML, m, 3, true, NULL, &o, &text, NULL));
    CHECK(text && strstr(text, "<think>\nadd\n</think>\n\n4<|im_end|>") && !strstr(text, "\n\n</think>\n\n<"));
    free(text);
}

TEST(qwen3_chat_template_kwargs) {
    struct oai_context keep = ctx;
    ctx.tok = qtok;
    ctx.tmpl = CHAT_TEMPLATE_QWEN3;
    struct oai_request r;
    struct oai_error e;
    char text[1024];
    CHECK_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"chat_template_kwargs\":{\"enable_thinking\":false}}", &r, &e), 0);
    size_t k = tokenizer_decode(qtok, r.prompt_ids, r.n_prompt, true, text, sizeof text);
    text[k < sizeof text ? k : sizeof text - 1] = 0;
    CHECK_MSG(!strcmp(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
              "%s", text);
    oai_request_free(&r);
    CHECK_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}", &r, &e), 400);
    CHECK_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"chat_template_kwargs\":{\"tools_first\":true}}", &r, &e), 400);
    CHECK(strstr(e.message, "tools_first") && strstr(e.message, "only enable_thinking"));
    ctx.tmpl = CHAT_TEMPLATE_CHATML;
    CHECK_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"chat_template_kwargs\":{\"enable_thinking\":false}}", &r, &e), 400);
    CHECK(e.param && !strcmp(e.param, "chat_template_kwargs") && strstr(e.message, "chatml"));
    ctx = keep;
}

// A Qwen3 reply through a parser: its content and reasoning_content (NULL: JSON null).
static void think_reply(enum oai_reasoning p, const char *text, bool streaming, const char *want_c,
                        const char *want_r) {
    struct oai_context keep = ctx;
    ctx.tok = qtok;
    ctx.tmpl = CHAT_TEMPLATE_QWEN3;
    ctx.reasoning = p;
    struct text_buf c = {0}, rs = {0};
    int used = 0;
    json_t *o = reply_of(text, BODY, streaming, &c, &rs, &used);
    const char *got_c = c.p ? c.p : "", *got_r = rs.p;
    json_t *msg = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    if (!streaming) {
        got_c = json_string_value(json_object_get(msg, "content"));
        got_r = json_string_value(json_object_get(msg, "reasoning_content"));
        CHECK(want_r || !json_is_string(json_object_get(msg, "reasoning_content")));  // (null, or absent unparsed)
    }
    CHECK_MSG(o && got_c && !strcmp(got_c, want_c), "content [%s]", got_c ? got_c : "(null)");
    CHECK_MSG(want_r ? got_r && !strcmp(got_r, want_r) : !got_r, "reasoning [%s]", got_r ? got_r : "(null)");
    json_decref(o);
    text_buf_free(&c);
    text_buf_free(&rs);
    ctx = keep;
}

TEST(think_blocks) {
    const char *qr = "<think>\nA plan.\n</think>\n\nThe answer<|im_end|>";
    for (int st = 0; st < 2; st++) {
        think_reply(OAI_REASONING_QWEN3, qr, st, "\n\nThe answer", "\nA plan.\n");
        think_reply(OAI_REASONING_QWEN3, "The answer<|im_end|>", st, "The answer", NULL);  // (thinking off)
        think_reply(OAI_REASONING_DEEPSEEK_R1, "A plan.</think>The answer<|im_end|>", st, "The answer", "A plan.");
        think_reply(OAI_REASONING_NONE, qr, st, "<think>\nA plan.\n</think>\n\nThe answer", NULL);
    }
}

int main(void) {
    if (tokenizer_from_hf_json(&tok, "tests/data/tok_harmony/tokenizer.json") < 0) {
        fprintf(stderr, "%s\n", err_msg());
        return 1;
    }
    ctx = (struct oai_context){.tok = tok, .served_name = "gpt-oss", .model_path = "gpt-oss",
                               .max_model_len = 4096, .tmpl = CHAT_TEMPLATE_HARMONY};
    RUN(template_from_jinja_file);
    RUN(prompt_format);
    RUN(reasoning_effort);
    RUN(channels_whole);
    RUN(channels_streamed);
    RUN(vocabulary_without_harmony_tokens);
    if (tokenizer_from_hf_json(&qtok, "tests/data/tok_qwen3/tokenizer.json") < 0) {
        fprintf(stderr, "%s\n", err_msg());
        return 1;
    }
    RUN(qwen3_prompt);
    RUN(qwen3_chat_template_kwargs);
    RUN(think_blocks);
    tokenizer_free(qtok);
    tokenizer_free(tok);
    return test_summary("reasoning");
}
