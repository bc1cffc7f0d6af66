// oai_response.c — responses in OpenAI's wire format as a request's tokens arrive (openai.h's
// oai_response_*): whole bodies and streamed chunks of legacy completions and chat completions, with
// logprobs, usage, reasoning_content (harmony's channels, <think> blocks) and tool calls (hermes and
// harmony, whole or streamed through call_stream.c); the /v1/models body.
#include "openai.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"

// The logprobs object with its lists empty: chat has one list of entries, completions four parallel lists.
static json_t *empty_logprobs(enum oai_kind kind) {
    if (kind == OAI_CHAT) return json_pack("{s:[]}", "content");
    return json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
}

void oai_response_init(struct oai_response *s, const struct oai_context *c, const struct oai_request *r,
                       bool streaming) {
    static _Atomic unsigned long long seq;
    memset(s, 0, sizeof *s);
    s->c = c;
    s->r = r;
    s->streaming = streaming;
    s->created = (long long)time(NULL);
    snprintf(s->id, sizeof s->id, "%s-%llx%06llx", r->kind == OAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)oai_random_u64() >> 24, atomic_fetch_add(&seq, 1) & 0xffffff);
    text_output_init(&s->out, c->tok, (const char *const *)r->stops, r->n_stops, r->stop_ids, r->n_stop_ids);
    s->out.min_tokens = r->gen.sp.min_tokens;
    s->out.n_include = r->include_stop ? r->n_user_stops : 0;
    // (oai_parse's harmony_init check of the vocabulary passed, so this one does too)
    s->harmony = r->kind == OAI_CHAT && c->tmpl == CHAT_TEMPLATE_HARMONY && harmony_init(&s->hm, c->tok) == 0;
    if (r->kind == OAI_CHAT && !s->harmony && c->reasoning) {
        s->think_open = tokenizer_token_id(c->tok, "<think>", 7);
        s->think_close = tokenizer_token_id(c->tok, "</think>", 8);
        s->think = s->think_close >= 0 ? 1 : 0;
    }
    text_output_init(&s->rout, c->tok, NULL, 0, NULL, 0);
    call_stream_init(&s->cs, s->id, r->tools.single);
    if (r->logprobs && !streaming)
        s->lp = empty_logprobs(r->kind);
    if (r->echo && !streaming) text_buf_append(&s->text, r->echo_text, r->n_echo);  // (the completion follows)
}

void oai_response_free(struct oai_response *s) {
    text_output_free(&s->out);
    text_buf_free(&s->text);
    text_output_free(&s->rout);
    text_buf_free(&s->rtext);
    call_stream_free(&s->cs);
    if (s->harmony) harmony_free(&s->hm);
    json_decref(s->lp);
    s->lp = NULL;
}

static json_t *jstr(const char *p, size_t n) {
    struct text_buf b = {0};
    if (utf8_sanitize(p, n, &b) < 0) return NULL;
    json_t *j = json_stringn(b.p, b.n);
    text_buf_free(&b);
    return j;
}

// The token's raw bytes, whole however long (*p: buf, or malloc'd when it does not fit; NULL
// out of memory).
static size_t token_piece(const struct oai_response *s, int32_t id, char *buf, size_t cap, char **p) {
    size_t k = tokenizer_piece(s->c->tok, id, false, buf, cap);
    *p = buf;
    if (k > cap && (*p = malloc(k))) tokenizer_piece(s->c->tok, id, false, *p, k);
    return k;
}

static json_t *token_str(const struct oai_response *s, int32_t id) {
    char buf[256], *p;
    size_t k = token_piece(s, id, buf, sizeof buf, &p);
    json_t *j = p ? jstr(p, k) : NULL;
    if (p != buf) free(p);
    return j;
}

static json_t *token_bytes(const struct oai_response *s, int32_t id) {
    char buf[256], *p;
    size_t k = token_piece(s, id, buf, sizeof buf, &p);
    json_t *a = p ? json_array() : NULL;
    for (size_t i = 0; a && i < k; i++) json_array_append_new(a, json_integer((unsigned char)p[i]));
    if (p != buf) free(p);
    return a;
}

static double lp_val(float x) { return isfinite(x) ? x : -9999.0; }

// Appends this token's logprobs to lp (the format of the request kind).
static void add_logprobs(const struct oai_response *s, json_t *lp, const struct gen_event *ev, size_t text_offset) {
    if (s->r->kind == OAI_CHAT) {
        json_t *tops = json_array();
        for (int i = 0; i < ev->n_top && i < s->r->gen.top_logprobs; i++)
            json_array_append_new(tops,
                                  json_pack("{s:o,s:f,s:o}", "token", token_str(s, ev->top_ids[i]), "logprob",
                                            lp_val(ev->top_logprobs[i]), "bytes", token_bytes(s, ev->top_ids[i])));
        json_array_append_new(json_object_get(lp, "content"),
                              json_pack("{s:o,s:f,s:o,s:o}", "token", token_str(s, ev->token), "logprob",
                                        lp_val(ev->logprob), "bytes", token_bytes(s, ev->token), "top_logprobs", tops));
    } else {
        json_t *tops = json_object();
        for (int i = 0; i < ev->n_top && i < s->r->gen.top_logprobs; i++) {
            json_t *k = token_str(s, ev->top_ids[i]);
            if (k && !json_object_get(tops, json_string_value(k)))
                json_object_set_new(tops, json_string_value(k), json_real(lp_val(ev->top_logprobs[i])));
            json_decref(k);
        }
        json_array_append_new(json_object_get(lp, "tokens"), token_str(s, ev->token));
        json_array_append_new(json_object_get(lp, "token_logprobs"), json_real(lp_val(ev->logprob)));
        json_array_append_new(json_object_get(lp, "top_logprobs"), tops);
        json_array_append_new(json_object_get(lp, "text_offset"), json_integer((json_int_t)text_offset));
    }
}

// A streaming chunk carrying text (may be empty), reasoning (chat: rn > 0 puts reasoning_content in the delta
// instead of an empty content), logprobs (may be NULL) and finish reason.
static json_t *chunk_r(struct oai_response *s, const char *text, size_t n, const char *rtext, size_t rn, json_t *lp,
                       const char *finish) {
    json_t *choice;
    if (s->r->kind == OAI_CHAT) {
        json_t *delta = json_object();
        if (!s->sent_role) { json_object_set_new(delta, "role", json_string("assistant")); s->sent_role = true; }
        json_t *calls = call_stream_take(&s->cs);
        if (rn) json_object_set_new(delta, "reasoning_content", jstr(rtext, rn));
        if (n || (!finish && !rn && !calls)) json_object_set_new(delta, "content", jstr(text, n));
        if (calls) json_object_set_new(delta, "tool_calls", calls);
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "delta", delta, "logprobs", lp ? lp : json_null(),
                           "finish_reason", finish ? json_string(finish) : json_null());
    } else {
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "text", jstr(text, n), "logprobs", lp ? lp : json_null(),
                           "finish_reason", finish ? json_string(finish) : json_null());
    }
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", s->id, "object",
                          s->r->kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)s->created, "model", s->c->served_name, "choices", choice);
    if (o && s->r->include_usage)  // (continuous: the prompt, and the tokens generated up to this chunk)
        json_object_set_new(o, "usage", !s->r->continuous_usage ? json_null()
                                        : json_pack("{s:i,s:i,s:i}", "prompt_tokens", s->r->n_prompt,
                                                    "completion_tokens", s->n_generated, "total_tokens",
                                                    s->r->n_prompt + s->n_generated));
    return o;
}

static json_t *chunk(struct oai_response *s, const char *text, size_t n, json_t *lp, const char *finish) {
    return chunk_r(s, text, n, NULL, 0, lp, finish);
}

static bool is_stop_id(const struct oai_request *r, int32_t id) {
    for (int i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == id) return true;
    return false;
}

// Where a <think> block's reply puts token id (the tags themselves are neither).
static enum reply_part think_route(struct oai_response *s, int32_t id) {
    if (s->think == 1) {
        s->think = id == s->think_open || s->c->reasoning == OAI_REASONING_DEEPSEEK_R1 ? 2 : 3;
        if (id == s->think_open) return REPLY_CONTROL;
    }
    if (s->think == 2 && id == s->think_close) {
        s->think = 3;
        return REPLY_CONTROL;
    }
    return s->think == 2 ? REPLY_REASONING : REPLY_CONTENT;
}

// A token of a call's text: the call's arguments, and streamed, the call's next delta.
static int harmony_tool_token(struct oai_response *s, int32_t id) {
    struct harmony_call *c = s->hm.n_calls ? &s->hm.calls[s->hm.n_calls - 1] : NULL;
    const size_t before = c ? c->args.n : 0;
    if (!c || harmony_call_text(&s->hm, id) < 0) return c ? -1 : 0;
    return s->streaming ? call_stream_args(&s->cs, c->args.p + before, c->args.n - before) : 0;
}

// Feeds a reasoning reply's token to the output its channel or block says (stop ids always to the content's,
// which holds them), a call's to its arguments (kept only where the calls are parsed); a header's tokens and
// the tags only count towards min_tokens. Returns text_output_push's result.
static int split_token(struct oai_response *s, int32_t id, struct text_buf *t, struct text_buf *rt) {
    int w = s->harmony ? harmony_push(&s->hm, id) : (int)think_route(s, id);
    if (w < 0) return -1;
    if (s->streaming && s->r->tools.parse && s->harmony && s->cs_open < s->hm.n_calls &&  // (a call opened)
        call_stream_open(&s->cs, s->hm.calls[s->cs_open++].name) < 0)
        return -1;
    if (w == REPLY_CONTENT || is_stop_id(s->r, id)) return text_output_push(&s->out, id, t);
    text_output_skip(&s->out);
    if (w == REPLY_TOOL && s->r->tools.parse) return harmony_tool_token(s, id);
    return w == REPLY_REASONING ? (text_output_push(&s->rout, id, rt) < 0 ? -1 : 0) : 0;
}

// A tool_choice that names a function: the reply's text is its arguments, streamed as the call's deltas (the
// call opens at the first token); *t is emptied (no content).
static int named_text(struct oai_response *s, struct text_buf *t) {
    int rc = s->cs_open++ ? 0 : call_stream_open(&s->cs, s->r->tools.named);
    if (rc == 0) rc = call_stream_args(&s->cs, t->p, t->n);
    t->n = 0;
    return rc;
}

int oai_response_token(struct oai_response *s, const struct gen_event *ev, json_t **out) {
    *out = NULL;
    if (s->out.stopped) return 1;
    size_t offset = s->out.n_chars;  // (OpenAI's text_offset counts characters)
    struct text_buf t = {0}, rt = {0};
    int rc = s->harmony || s->think ? split_token(s, ev->token, s->streaming ? &t : &s->text,
                                                  s->streaming ? &rt : &s->rtext)
                        : text_output_push(&s->out, ev->token, s->streaming ? &t : &s->text);
    if (rc < 0) { text_buf_free(&t); text_buf_free(&rt); return -1; }
    s->n_generated++;
    json_t *lp = NULL;
    if (s->r->logprobs) {
        if (s->streaming) {
            lp = empty_logprobs(s->r->kind);
            add_logprobs(s, lp, ev, offset);
        } else {
            add_logprobs(s, s->lp, ev, offset);
        }
    }
    // one chunk per generated token, even when its text is held back (incomplete UTF-8,
    // a possible stop string, a tool call): clients and benchmarks timestamp tokens, not bytes
    struct text_buf tc = {0};
    const bool hermes = s->r->tools.parse && !s->harmony;  // (harmony's calls are messages of their own)
    if (s->streaming && hermes && call_stream_text(&s->cs, t.p, t.n, &tc) < 0) rc = -1;
    if (s->streaming && hermes) text_buf_free(&t), t = tc;
    if (s->streaming && s->r->tools.named && named_text(s, &t) < 0) rc = -1;
    if (s->streaming) *out = chunk_r(s, t.p, t.n, rt.p, rt.n, lp, NULL);
    text_buf_free(&t);
    text_buf_free(&rt);
    return rc;
}

static json_t *usage(const struct oai_response *s, int n_cached) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", s->r->n_prompt, "completion_tokens", s->n_generated,
                     "total_tokens", s->r->n_prompt + s->n_generated,
                     "prompt_tokens_details", "cached_tokens", n_cached);
}

json_t *oai_response_first_chunk(struct oai_response *s) {
    if (s->r->kind == OAI_CHAT) return chunk(s, "", 0, NULL, NULL);
    return s->r->echo ? chunk(s, s->r->echo_text, s->r->n_echo, NULL, NULL) : NULL;
}

json_t *oai_response_usage_chunk(const struct oai_response *s, int n_cached) {
    return json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", s->id, "object",
                     s->r->kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)s->created, "model", s->c->served_name, "choices", "usage", usage(s, n_cached));
}

// The one call of a reply whose tool_choice names a function, its text the arguments.
static json_t *named_call(const struct oai_response *s) {
    struct text_buf a = {0};
    json_t *call = NULL, *calls = NULL;
    if (call_stream_rewrite(s->text.p ? s->text.p : "", s->text.n, &a) == 0) calls = json_array();
    if (calls && (call = tool_call_json(s->id, 0, s->r->tools.named, NULL, a.p ? a.p : "", a.n)))
        json_array_append_new(calls, call);
    text_buf_free(&a);
    if (calls && !call) json_decref(calls), calls = NULL;
    return calls;
}

int oai_response_finish(struct oai_response *s, const char *finish, int n_cached, json_t **out) {
    if (s->out.stopped) finish = "stop";
    struct text_buf t = {0}, rt = {0};
    if (text_output_finish(&s->out, s->streaming ? &t : &s->text) < 0 ||
        ((s->harmony || s->think) && text_output_finish(&s->rout, s->streaming ? &rt : &s->rtext) < 0)) {
        text_buf_free(&t);
        text_buf_free(&rt);
        return -1;
    }
    json_t *calls = NULL;
    size_t content_n = 0;
    if (s->streaming) {  // (hermes: the held tail through the call stream, then what it held)
        struct text_buf tc = {0};
        const bool hermes = s->r->tools.parse && !s->harmony;
        int rc = hermes ? call_stream_text(&s->cs, t.p, t.n, &tc) : s->r->tools.named ? named_text(s, &t) : 0;
        if (rc == 0 && (s->r->tools.parse || s->r->tools.named)) rc = call_stream_finish(&s->cs, &tc);
        if (hermes) text_buf_free(&t), t = tc;
        else text_buf_free(&tc);
        *out = rc < 0 ? NULL
                      : chunk_r(s, t.p, t.n, rt.p, rt.n, NULL,
                                s->r->tools.parse && call_stream_called(&s->cs) ? "tool_calls" : finish);
        text_buf_free(&t);
        text_buf_free(&rt);
        return *out ? 0 : -1;
    }
    if (s->r->tools.parse && s->harmony)
        calls = harmony_calls(&s->hm, s->r->tools.single, s->id), content_n = s->text.n;
    else if (s->r->tools.parse)
        calls = tool_calls_parse(s->text.p ? s->text.p : "", s->text.n, s->r->tools.single, s->id, &content_n);
    else if (s->r->tools.named)  // (the arguments as the streamed deltas join; no content)
        calls = named_call(s);
    json_t *lp = s->lp ? json_incref(s->lp) : json_null(), *choice;
    if (s->r->kind == OAI_CHAT) {
        json_t *content = !calls ? jstr(s->text.p ? s->text.p : "", s->text.n)
                          : content_n ? jstr(s->text.p, content_n) : json_null();  // (vLLM: null, no text before)
        const char *fr = calls && !s->r->tools.named ? "tool_calls" : finish;  // (forced: OpenAI's and vLLM's "stop")
        choice = json_pack("{s:i,s:{s:s,s:o},s:o,s:s}", "index", 0, "message", "role", "assistant", "content",
                           content, "logprobs", lp, "finish_reason", fr);
        if (choice && calls) json_object_set(json_object_get(choice, "message"), "tool_calls", calls);
        json_decref(calls);
        if (choice && (s->harmony || s->think))  // (vLLM: null where the reply had no block)
            json_object_set_new(json_object_get(choice, "message"), "reasoning_content",
                                s->harmony || s->rout.n_pushed ? jstr(s->rtext.p ? s->rtext.p : "", s->rtext.n)
                                                               : json_null());
    } else
        choice = json_pack("{s:i,s:o,s:o,s:s}", "index", 0, "text", jstr(s->text.p ? s->text.p : "", s->text.n),
                           "logprobs", lp, "finish_reason", finish);
    *out = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:o}", "id", s->id, "object",
                     s->r->kind == OAI_CHAT ? "chat.completion" : "text_completion", "created", (json_int_t)s->created,
                     "model", s->c->served_name, "choices", choice, "usage", usage(s, n_cached));
    return *out ? 0 : -1;
}

json_t *oai_models(const struct oai_context *c, long long created) {
    return json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:s,s:i}]}", "object", "list", "data", "id", c->served_name, "object",
                     "model", "created", (json_int_t)created, "owned_by", "octet", "root", c->served_name,
                     "max_model_len", c->max_model_len);
}
