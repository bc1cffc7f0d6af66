// openai.c — request validation in OpenAI's wire format (legacy completions and chat completions;
// the responses are oai_response.c's). Field rules follow OpenAI's API reference and vLLM's
// behaviour where OpenAI is silent (token-id prompts, top_k, min_p, ignore_eos). Every error names
// the offending field in "param".
#include "openai.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"
#include "oai_fields.h"

#define INVALID "invalid_request_error"

void oai_error_set(struct oai_error *e, int status, const char *type, const char *param, const char *code,
                   const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->param = param;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

char *oai_error_body(const struct oai_error *e) {
    struct text_buf msg = {0};
    utf8_sanitize(e->message, strlen(e->message), &msg);  // messages may quote user bytes
    json_t *o = json_pack("{s:{s:s?,s:s,s:s?,s:s?}}", "error", "message", msg.p, "type", e->type ? e->type : INVALID,
                          "param", e->param, "code", e->code);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    text_buf_free(&msg);
    return s;
}

// ---- parsing --------------------------------------------------------------------------
// (field reads and the policy for fields octet does not implement: oai_fields.c)

#define opt oaf_opt

static int bad(struct oai_error *e, const char *param, const char *fmt, const char *what) {
    oai_error_set(e, 400, INVALID, param, NULL, fmt, param, what);
    return -1;
}

static int tokenize(const struct oai_context *c, const char *text, size_t n, bool add_bos, bool special,
                    struct oai_request *r, const char *param, struct oai_error *e) {
    if (tokenizer_encode(c->tok, text, n, add_bos, special, &r->prompt_ids, &r->n_prompt) < 0) {
        oai_error_set(e, 400, INVALID, param, NULL, "'%s' could not be tokenized: %s", param, err_msg());
        return -1;
    }
    return 0;
}

static int token_ids(const struct oai_context *c, json_t *a, struct oai_request *r, struct oai_error *e) {
    size_t n = json_array_size(a);
    r->prompt_ids = malloc((n ? n : 1) * sizeof(int32_t));
    if (!r->prompt_ids) { oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); return -1; }
    int n_vocab = tokenizer_n_vocab(c->tok);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(a, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= n_vocab) {
            oai_error_set(e, 400, INVALID, "prompt", NULL, "'prompt'[%zu] must be a token id in 0..%d", i, n_vocab - 1);
            return -1;
        }
        r->prompt_ids[i] = (int32_t)json_integer_value(t);
    }
    r->n_prompt = (int)n;
    return 0;
}

static int oom(struct oai_error *e) {
    oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return -1;
}

// echo of a token-id prompt: its decoded text (as vLLM echoes it).
static int echo_ids(const struct oai_context *c, struct oai_request *r, struct oai_error *e) {
    size_t k = tokenizer_decode(c->tok, r->prompt_ids, r->n_prompt, false, NULL, 0);
    if (!(r->echo_text = malloc(k + 1))) return oom(e);
    tokenizer_decode(c->tok, r->prompt_ids, r->n_prompt, false, r->echo_text, k);
    r->echo_text[k] = 0;
    r->n_echo = k;
    return 0;
}

static int parse_prompt(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *p = opt(b, "prompt");
    if (!p) return bad(e, "prompt", "'%s' is required%s", "");
    if (json_is_array(p) && json_array_size(p) == 1 && !json_is_integer(json_array_get(p, 0)))
        p = json_array_get(p, 0);  // a batch of one
    if (json_is_string(p)) {
        bool bos = tokenizer_add_bos(c->tok);
        if (r->echo) {
            r->n_echo = json_string_length(p);
            if (!(r->echo_text = malloc(r->n_echo + 1))) return oom(e);
            memcpy(r->echo_text, json_string_value(p), r->n_echo + 1);
        }
        return tokenize(c, json_string_value(p), json_string_length(p), bos, false, r, "prompt", e);
    }
    if (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0))) {
        TRY(token_ids(c, p, r, e));
        return r->echo ? echo_ids(c, r, e) : 0;
    }
    if (json_is_array(p) && json_array_size(p) > 1)
        return bad(e, "prompt", "'%s': batched prompts are not supported (send one prompt per request)%s", "");
    return bad(e, "prompt", "'%s' must be a string or an array of token ids%s", "");
}

// A message's content: a string, or an array of {"type":"text","text":...} parts.
static int content_text(json_t *m, size_t i, struct text_buf *out, struct oai_error *e) {
    json_t *ct = opt(m, "content");
    if (!ct) return text_buf_append(out, "", 0);
    if (json_is_string(ct)) return text_buf_append(out, json_string_value(ct), json_string_length(ct));
    if (json_is_array(ct)) {
        for (size_t j = 0; j < json_array_size(ct); j++) {
            json_t *part = json_array_get(ct, j);
            json_t *ty = json_object_get(part, "type"), *tx = json_object_get(part, "text");
            if (!json_is_string(ty) || strcmp(json_string_value(ty), "text") || !json_is_string(tx)) {
                oai_error_set(e, 400, INVALID, "messages", NULL,
                              "messages[%zu].content[%zu]: only {\"type\":\"text\",\"text\":...} parts are supported",
                              i, j);
                return -1;
            }
            if (text_buf_append(out, json_string_value(tx), json_string_length(tx)) < 0) return -1;
        }
        return text_buf_append(out, "", 0);
    }
    oai_error_set(e, 400, INVALID, "messages", NULL,
                  "messages[%zu].content must be a string or an array of text parts", i);
    return -1;
}

static int parse_messages(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *ms = opt(b, "messages");
    if (!ms) return bad(e, "messages", "'%s' is required%s", "");
    if (!json_is_array(ms) || json_array_size(ms) == 0)
        return bad(e, "messages", "'%s' must be a non-empty array%s", "");
    size_t n = json_array_size(ms);
    struct chat_msg *cm = calloc(n, sizeof *cm);
    struct text_buf *texts = calloc(n, sizeof *texts);
    int rc = -1;
    char *prompt = NULL;
    size_t *spans = NULL, n_spans = 0;
    const char *param;
    if (!cm || !texts) { oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
    int trc = tool_set_read(b, c->tool_parser, chat_template_has_tools(c->tmpl), &r->tools, &param);
    if (trc < 0) {
        oai_error_set(e, 400, INVALID, param, trc == OCT_EUNSUP ? "unsupported_parameter" : NULL, "%s", err_msg());
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(ms, i), *role = json_object_get(m, "role");
        if (!json_is_object(m) || !json_is_string(role)) {
            oai_error_set(e, 400, INVALID, "messages", NULL, "messages[%zu] must be an object with a string 'role'", i);
            goto done;
        }
        if (content_text(m, i, &texts[i], e) < 0) {
            if (!e->status) oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
            goto done;
        }
        cm[i].role = json_string_value(role);
        cm[i].content = texts[i].p;
        struct chat_tool_call *calls;
        if (tool_calls_of_message(m, i, &calls, &cm[i].n_calls) < 0) {
            oai_error_set(e, 400, INVALID, "messages", NULL, "%s", err_msg());
            goto done;
        }
        cm[i].calls = calls;
        cm[i].tool_call_id = json_string_value(json_object_get(m, "tool_call_id"));  // (NULL unless a string)
        cm[i].reasoning = json_string_value(json_object_get(m, "reasoning_content"));  // (vLLM's: or "reasoning")
        if (!cm[i].reasoning) cm[i].reasoning = json_string_value(json_object_get(m, "reasoning"));
    }
    // the BOS text in place where the family puts it (the tokenizer parses it as special)
    char bos[64] = "";
    int id = tokenizer_bos(c->tok);
    if (id >= 0 && chat_template_has_bos(c->tmpl)) {
        size_t k = tokenizer_piece(c->tok, id, true, bos, sizeof bos - 1);
        bos[k < sizeof bos - 1 ? k : sizeof bos - 1] = 0;
    }
    // reasoning_effort: harmony's system message says it; no other family has a place for it
    struct chat_opts co = {.tools = (const char *const *)r->tools.tools, .n_tools = r->tools.n_tools,
                           .default_system = c->default_system};
    n_spans = chat_template_n_spans(cm, (int)n, &co);
    if (!(spans = malloc(sizeof(size_t) * n_spans))) { oom(e); goto done; }
    for (size_t i = 0; i < n_spans; i++) spans[i] = SIZE_MAX;  // (a system text a family drops has none)
    json_t *effort = opt(b, "reasoning_effort");
    if (effort && c->tmpl != CHAT_TEMPLATE_HARMONY) {
        oai_error_set(e, 400, INVALID, "reasoning_effort", "unsupported_parameter",
                      "'reasoning_effort' is unsupported: the model's chat template (%s) has no reasoning effort",
                      chat_template_name(c->tmpl));
        goto done;
    }
    if (effort) {
        const char *v = json_is_string(effort) ? json_string_value(effort) : "";
        if (strcmp(v, "low") && strcmp(v, "medium") && strcmp(v, "high")) {
            bad(e, "reasoning_effort", "'%s' must be \"low\", \"medium\" or \"high\"%s", "");
            goto done;
        }
        co.reasoning_effort = v;
    }
    // chat_template_kwargs: Qwen3's enable_thinking; nothing else changes a native renderer's text
    json_t *kw = opt(b, "chat_template_kwargs"), *kv;
    const char *key;
    if (kw && !json_is_object(kw)) {
        bad(e, "chat_template_kwargs", "'%s' must be an object%s", "");
        goto done;
    }
    json_object_foreach(kw, key, kv) {
        if (strcmp(key, "enable_thinking") || c->tmpl != CHAT_TEMPLATE_QWEN3) {
            oai_error_set(e, 400, INVALID, "chat_template_kwargs", "unsupported_parameter",
                          "'chat_template_kwargs' key '%.64s' is unsupported: the model's chat template (%s) takes "
                          "%s", key, chat_template_name(c->tmpl),
                          c->tmpl == CHAT_TEMPLATE_QWEN3 ? "only enable_thinking" : "none");
            goto done;
        }
        if (!json_is_boolean(kv)) {
            bad(e, "chat_template_kwargs", "'%s'.enable_thinking must be a boolean%s", "");
            goto done;
        }
        co.no_thinking = json_is_false(kv);
    }
    if (chat_template_render_opts(c->tmpl, cm, (int)n, true, bos, &co, &prompt, spans) < 0) {
        oai_error_set(e, 400, INVALID, "messages", NULL, "%s", err_msg());
        goto done;
    }
    for (size_t i = 0; i < n_spans; i++)
        if (spans[i] == SIZE_MAX) spans[i] = strlen(prompt);
    // special tokens only in the template's own text, unless the server allows them in content
    bool add_bos = !chat_template_has_bos(c->tmpl) && tokenizer_add_bos(c->tok);
    int n_lit = c->special_in_content ? 0 : (int)(n_spans / 2);
    if (tokenizer_encode_literal(c->tok, prompt, strlen(prompt), add_bos, spans, n_lit, &r->prompt_ids,
                                 &r->n_prompt) < 0)
        oai_error_set(e, 400, INVALID, "messages", NULL, "'messages' could not be tokenized: %s", err_msg());
    else
        rc = 0;
done:
    if (texts) for (size_t i = 0; i < n; i++) text_buf_free(&texts[i]);
    free(texts);
    for (size_t i = 0; cm && i < n; i++) free((void *)cm[i].calls);
    free(cm);
    free(spans);
    free(prompt);
    return rc;
}

static int parse_stop(json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *s = opt(b, "stop");
    if (!s) return 0;
    if (json_is_string(s)) {
        if (json_string_length(s) == 0) return bad(e, "stop", "'%s' must not be empty%s", "");
        r->stops[r->n_stops++] = strdup(json_string_value(s));
        r->n_user_stops = 1;
        return 0;
    }
    if (!json_is_array(s) || json_array_size(s) > OAI_MAX_STOPS)
        return bad(e, "stop", "'%s' must be a string or an array of at most 4 strings%s", "");
    for (size_t i = 0; i < json_array_size(s); i++) {
        json_t *x = json_array_get(s, i);
        if (!json_is_string(x) || json_string_length(x) == 0 || memchr(json_string_value(x), 0, json_string_length(x)))
            return bad(e, "stop", "'%s' entries must be non-empty strings%s", "");
        r->stops[r->n_stops++] = strdup(json_string_value(x));
    }
    r->n_user_stops = r->n_stops;
    return 0;
}

uint64_t oai_random_u64(void) {
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t k = atomic_fetch_add(&counter, 1);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (k * 0x9E3779B97F4A7C15ull);
    x ^= x >> 31;
    return x * 0xBF58476D1CE4E5B9ull;
}

// logit_bias: {"token id": bias in [-100, 100]} (OpenAI's range; ids checked against the vocabulary).
static int parse_logit_bias(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *lb = opt(b, "logit_bias");
    if (!lb) return 0;
    if (!json_is_object(lb)) return oaf_bad(e, "logit_bias", "'logit_bias' must be an object of token id: bias");
    size_t n = json_object_size(lb);
    if (n && !(r->bias = malloc(sizeof *r->bias * n))) return oom(e);
    const char *key;
    json_t *v;
    int k = 0, n_vocab = tokenizer_n_vocab(c->tok);
    json_object_foreach(lb, key, v) {
        char *end;
        long id = strtol(key, &end, 10);
        if (!*key || *end || id < 0 || id >= n_vocab)
            return oaf_bad(e, "logit_bias", "'logit_bias' key '%.32s' must be a token id in 0..%d", key, n_vocab - 1);
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(x >= -100 && x <= 100)) {
            char sv[32] = "not a number";
            if (json_is_number(v)) oaf_num_str(x, sv, sizeof sv);
            return oaf_bad(e, "logit_bias", "'logit_bias' for token %ld is %s; it must be a number in [-100, 100]",
                           id, sv);
        }
        r->bias[k++] = (struct logit_bias){.id = (int32_t)id, .bias = (float)x};
    }
    r->gen.sp.bias = r->bias;
    r->gen.sp.n_bias = k;
    return 0;
}

// stop_token_ids: token ids that end the output (vLLM's field); the chat end-of-turn id joins later.
static int parse_stop_ids(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *a = opt(b, "stop_token_ids");
    size_t n = a ? json_array_size(a) : 0;
    if (a && !json_is_array(a)) return oaf_bad(e, "stop_token_ids", "'stop_token_ids' must be an array of token ids");
    if (!(r->stop_ids = malloc(sizeof(int32_t) * (n + 2)))) return oom(e);  // (+ the template's)
    int n_vocab = tokenizer_n_vocab(c->tok);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(a, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= n_vocab)
            return oaf_bad(e, "stop_token_ids", "'stop_token_ids'[%zu] must be a token id in 0..%d", i, n_vocab - 1);
        r->stop_ids[r->n_stop_ids++] = (int32_t)json_integer_value(t);
    }
    return 0;
}

// The sampling fields, each checked in the JSON's own number before it becomes a float.
static int parse_sampling(json_t *b, struct oai_request *r, struct oai_error *e) {
    double t = 1.0, tp = 1.0, mp = 0.0, pp = 0, fp = 0, rp = 1;
    long long tk = 0, seed = 0;
    bool has_seed = false;
    // (1e30: far beyond any use, and within a float)
    if (oaf_num(b, "temperature", 0, false, 1e30, &t, e) < 0 || oaf_num(b, "top_p", 0, true, 1, &tp, e) < 0 ||
        oaf_num(b, "min_p", 0, false, 1, &mp, e) < 0 || oaf_num(b, "presence_penalty", -2, false, 2, &pp, e) < 0 ||
        oaf_num(b, "frequency_penalty", -2, false, 2, &fp, e) < 0 ||
        oaf_num(b, "repetition_penalty", 1e-30, false, 1e30, &rp, e) < 0)
        return -1;
    if (oaf_int(b, "top_k", -1, 1 << 30, &tk, NULL, e) < 0) return -1;
    if (oaf_int(b, "seed", INT64_MIN, INT64_MAX, &seed, &has_seed, e) < 0) return -1;
    struct sampling_params *sp = &r->gen.sp;
    sampling_params_default(sp);
    sp->temperature = (float)t;  // (below 1e-5 it is greedy, as in vLLM: tiny values need no care)
    sp->top_k = (int)tk;
    sp->top_p = tp < FLT_MIN ? FLT_MIN : (float)tp;  // (a positive top_p keeps at least the likeliest token)
    sp->min_p = (float)mp;
    sp->presence_penalty = (float)pp;
    sp->frequency_penalty = (float)fp;
    sp->repetition_penalty = (float)rp;
    sp->seed = has_seed ? (uint64_t)seed : oai_random_u64();
    return 0;
}

int oai_check_model(const struct oai_context *c, json_t *b, struct oai_error *e) {
    json_t *model = opt(b, "model");
    if (model && !json_is_string(model)) return bad(e, "model", "'%s' must be a string%s", "");
    if (model && strcmp(json_string_value(model), c->served_name) && strcmp(json_string_value(model), c->model_path)) {
        oai_error_set(e, 404, "not_found_error", "model", "model_not_found",
                      "The model '%s' does not exist (this server serves '%s')",
                      json_string_value(model), c->served_name);
        return -1;
    }
    return 0;
}

static int parse_fields(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    if (oai_check_model(c, b, e) < 0) return -1;
    long long n = 1;
    if (oaf_int(b, "n", 1, OAI_MAX_N, &n, NULL, e) < 0) return -1;
    r->n = (int)n;
    if (parse_sampling(b, r, e) < 0 || parse_logit_bias(c, b, r, e) < 0 || parse_stop_ids(c, b, r, e) < 0) return -1;
    if (oaf_bool(b, "ignore_eos", &r->gen.ignore_eos, e) < 0 || oaf_bool(b, "stream", &r->stream, e) < 0 ||
        oaf_bool(b, "include_stop_str_in_output", &r->include_stop, e) < 0)
        return -1;
    if (r->stream && r->n > 1) {
        oai_error_set(e, 400, INVALID, "n", "unsupported_value", "'n' is %d; streamed replies of more than one "
                      "choice are not implemented (n 1, or \"stream\": false)", r->n);
        return -1;
    }
    json_t *so = opt(b, "stream_options");
    if (so) {
        if (!json_is_object(so)) return bad(e, "stream_options", "'%s' must be an object%s", "");
        if (!r->stream) return bad(e, "stream_options", "'%s' is only allowed when 'stream' is true%s", "");
        const char *k;
        json_t *v;
        json_object_foreach(so, k, v) if (strcmp(k, "include_usage") && strcmp(k, "continuous_usage_stats")) {
            oai_error_set(e, 400, INVALID, "stream_options", "unrecognized_parameter", "'stream_options' has no field "
                          "'%.64s' (include_usage, continuous_usage_stats)", k);
            return -1;
        }
        bool cu = false;
        if (oaf_bool(so, "include_usage", &r->include_usage, e) < 0 ||
            oaf_bool(so, "continuous_usage_stats", &cu, e) < 0) { e->param = "stream_options"; return -1; }
        r->continuous_usage = cu && r->include_usage;  // (as vLLM: only beside include_usage)
    }
    r->gen.top_logprobs = -1;
    long long k = 0;
    bool has = false;
    if (r->kind == OAI_COMPLETION) {
        if (oaf_int(b, "logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, &k, &has, e) < 0) return -1;
        if (has) r->logprobs = true, r->gen.top_logprobs = (int)k;
        if (oaf_bool(b, "echo", &r->echo, e) < 0) return -1;
        if (r->echo && r->logprobs) {
            oai_error_set(e, 400, INVALID, "echo", "unsupported_value",
                          "'echo' with 'logprobs' is unsupported: octet does not compute the prompt's logprobs");
            return -1;
        }
    } else {
        if (oaf_bool(b, "logprobs", &r->logprobs, e) < 0) return -1;
        if (oaf_int(b, "top_logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, &k, &has, e) < 0) return -1;
        if (has && !r->logprobs) return bad(e, "top_logprobs", "'%s' requires 'logprobs': true%s", "");
        if (r->logprobs) r->gen.top_logprobs = (int)k;
    }
    return parse_stop(b, r, e);
}

// Sets max_tokens: checks an explicit value against the context, else picks the default; then
// min_tokens (at most max_tokens).
static int parse_max_tokens(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    int room = c->max_model_len - r->n_prompt;
    const char *pname = r->kind == OAI_CHAT ? "messages" : "prompt";
    if (r->n_prompt == 0) return bad(e, pname, "'%s' is empty after tokenization%s", "");
    if (room <= 0) {
        oai_error_set(e, 400, INVALID, pname, "context_length_exceeded",
                      "This model's maximum context length is %d tokens. However, your prompt has %d tokens, "
                      "which leaves no room for output", c->max_model_len, r->n_prompt);
        return -1;
    }
    const char *k = opt(b, "max_tokens") ? "max_tokens" : "max_completion_tokens";
    long long mt = 0, mn = 0;
    bool has = false;
    json_t *v = opt(b, k);
    if (v && json_is_number(v) && json_number_value(v) < 1) {
        char sv[32];
        oaf_num_str(json_number_value(v), sv, sizeof sv);
        return oaf_bad(e, k, "'%s' is %s; it must be at least 1", k, sv);
    }
    if (oaf_int(b, k, 1, INT32_MAX, &mt, &has, e) < 0) return -1;
    if (!has) {
        r->gen.max_tokens = r->kind == OAI_COMPLETION && room > 16 ? 16 : room;
    } else if (mt > room) {
        oai_error_set(e, 400, INVALID, k, "context_length_exceeded",
                      "This model's maximum context length is %d tokens. However, you requested %lld tokens "
                      "(%d in the prompt, %lld for the completion)",
                      c->max_model_len, r->n_prompt + mt, r->n_prompt, mt);
        return -1;
    } else {
        r->gen.max_tokens = (int)mt;
    }
    if (oaf_int(b, "min_tokens", 0, INT32_MAX, &mn, NULL, e) < 0) return -1;
    if (mn > r->gen.max_tokens)
        return oaf_bad(e, "min_tokens", "'min_tokens' is %lld; it must be at most max_tokens (%d)", mn,
                       r->gen.max_tokens);
    r->gen.sp.min_tokens = (int)mn;
    return 0;
}

// A constrained reply: JSON mode (response_format {"type": "json_object"}, checked by oaf_check_fields, or a
// tool_choice naming a function: the reply is its arguments), or tool_choice "required" (calls in the hermes
// format). The reply must be the model's text (not gpt-oss's channels; a <think> block under --reasoning-parser
// comes first, unconstrained), and none may come before min_tokens.
static int parse_constraint(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *f = oaf_opt(b, "response_format");
    const bool object = f && !strcmp(json_string_value(json_object_get(f, "type")), "json_object");
    if (!object && !r->tools.named && !r->tools.required) return 0;
    const char *p = object ? "response_format" : "tool_choice";
    const char *what = object ? "json_object" : r->tools.named ? "naming a function" : "\"required\"";
    const char *why = r->kind == OAI_CHAT && c->tmpl == CHAT_TEMPLATE_HARMONY ? "gpt-oss's reply is channels of text"
                      : object && r->tools.parse ? "the reply may call tools (tool_choice \"none\" renders them)"
                      : r->gen.sp.min_tokens ? "min_tokens would hold back the end of a whole reply" : NULL;
    r->reply = (struct reply_spec){.kind = r->tools.required ? REPLY_HERMES_CALLS : REPLY_JSON_OBJECT,
                                   .names = (const char *const *)r->tools.names, .n_names = r->tools.n_tools,
                                   .single = r->tools.single};
    if (r->kind == OAI_CHAT && c->reasoning) {  // (--reasoning-parser: the <think> block first, unconstrained)
        r->reply.think = true;
        r->reply.think_first = c->reasoning == OAI_REASONING_DEEPSEEK_R1;
        r->reply.think_open = tokenizer_token_id(c->tok, "<think>", 7);
        r->reply.think_close = tokenizer_token_id(c->tok, "</think>", 8);
    }
    if (!why && reply_spec_check(&r->reply) < 0) why = err_msg();
    if (why) {
        oai_error_set(e, 400, INVALID, p, "unsupported_parameter", "'%s' %s is unsupported here: %s", p, what, why);
        return -1;
    }
    r->gen.reply = &r->reply;
    return 0;
}

int oai_parse(const struct oai_context *c, enum oai_kind kind, const char *body, size_t n, struct oai_request *r,
              struct oai_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->kind = kind;
    json_error_t je;
    json_t *b = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je);
    int rc = -1;
    if (!b) {
        oai_error_set(e, 400, INVALID, NULL, NULL, "malformed JSON body: %s (line %d, column %d)",
                      je.text, je.line, je.column);
        goto done;
    }
    if (!json_is_object(b)) { oai_error_set(e, 400, INVALID, NULL, NULL, "the body must be a JSON object"); goto done; }
    if (parse_fields(c, b, r, e) < 0) goto done;
    if (kind == OAI_COMPLETION ? parse_prompt(c, b, r, e) < 0 : parse_messages(c, b, r, e) < 0) goto done;
    if (parse_max_tokens(c, b, r, e) < 0) goto done;
    if (oaf_check_fields(b, kind, e) < 0) goto done;  // (after the required fields' own errors)
    if (parse_constraint(c, b, r, e) < 0) goto done;
    struct harmony h;  // (a vocabulary without harmony's tokens cannot answer in it: serve refuses such a model)
    if (kind == OAI_CHAT && c->tmpl == CHAT_TEMPLATE_HARMONY && harmony_init(&h, c->tok) < 0) {
        oai_error_set(e, 500, "server_error", NULL, NULL, "%s", err_msg());
        goto done;
    }
    if (kind == OAI_CHAT) {
        const char *eot[2];
        for (int i = 0, k = chat_template_stops(c->tmpl, eot); i < k; i++) {
            int id = tokenizer_token_id(c->tok, eot[i], strlen(eot[i]));
            if (id >= 0) r->stop_ids[r->n_stop_ids++] = id;
            else r->stops[r->n_stops++] = strdup(eot[i]);
        }
    }
    for (int i = 0; i < r->n_stops; i++)
        if (!r->stops[i]) { oom(e); goto done; }
    r->gen.prompt = r->prompt_ids;
    r->gen.n_prompt = r->n_prompt;
    r->gen.stop_ids = r->stop_ids;
    r->gen.n_stop_ids = r->n_stop_ids;
    rc = 0;
done:
    json_decref(b);
    if (rc < 0) oai_request_free(r);
    return rc;
}

void oai_request_free(struct oai_request *r) {
    free(r->prompt_ids);
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->stop_ids);
    free(r->bias);
    free(r->echo_text);
    tool_set_free(&r->tools);
    r->prompt_ids = NULL;
    r->stop_ids = NULL;
    r->bias = NULL;
    r->echo_text = NULL;
    r->n_stops = r->n_stop_ids = 0;
}
