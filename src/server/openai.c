// openai.c — request validation and response shaping in OpenAI's wire format (legacy
// completions and chat completions, whole and streamed). Field rules follow OpenAI's API
// reference and vLLM's behaviour where OpenAI is silent (token-id prompts, top_k, min_p,
// ignore_eos). Every error names the offending field in "param".
#include "openai.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"

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

// Looks up an optional field; JSON null counts as absent.
static json_t *opt(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

static int bad(struct oai_error *e, const char *param, const char *fmt, const char *what) {
    oai_error_set(e, 400, INVALID, param, NULL, fmt, param, what);
    return -1;
}

static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *out, bool *present,
                   struct oai_error *e) {
    json_t *v = opt(o, k);
    if (present) *present = v != NULL;
    if (!v) return 0;
    if (!json_is_integer(v)) return bad(e, k, "'%s' must be an integer%s", "");
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        oai_error_set(e, 400, INVALID, k, NULL, "'%s' is %lld; it must be in %lld..%lld", k, x, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int get_num(json_t *o, const char *k, double *out, struct oai_error *e) {
    json_t *v = opt(o, k);
    if (!v) return 0;
    if (!json_is_number(v)) return bad(e, k, "'%s' must be a number%s", "");
    *out = json_number_value(v);
    return 0;
}

static int get_bool(json_t *o, const char *k, bool *out, struct oai_error *e) {
    json_t *v = opt(o, k);
    if (!v) return 0;
    if (!json_is_boolean(v)) return bad(e, k, "'%s' must be a boolean%s", "");
    *out = json_is_true(v);
    return 0;
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

static int parse_prompt(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *p = opt(b, "prompt");
    if (!p) return bad(e, "prompt", "'%s' is required%s", "");
    if (json_is_array(p) && json_array_size(p) == 1 && !json_is_integer(json_array_get(p, 0)))
        p = json_array_get(p, 0);  // a batch of one
    if (json_is_string(p)) {
        bool bos = tokenizer_add_bos(c->tok);
        return tokenize(c, json_string_value(p), json_string_length(p), bos, false, r, "prompt", e);
    }
    if (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0)))
        return token_ids(c, p, r, e);
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
    if (!cm || !texts) { oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
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
    }
    if (chat_template_render(c->tmpl, cm, (int)n, true, NULL, &prompt) < 0) {
        oai_error_set(e, 400, INVALID, "messages", NULL, "%s", err_msg());
        goto done;
    }
    if (chat_template_has_bos(c->tmpl)) {
        // re-render with the BOS text in place, and let the tokenizer parse it as special
        char bos[64] = "";
        int id = tokenizer_bos(c->tok);
        if (id >= 0) {
            size_t k = tokenizer_piece(c->tok, id, true, bos, sizeof bos - 1);
            bos[k < sizeof bos - 1 ? k : sizeof bos - 1] = 0;
        }
        free(prompt);
        prompt = NULL;
        if (chat_template_render(c->tmpl, cm, (int)n, true, bos, &prompt) < 0) {
            oai_error_set(e, 500, "server_error", NULL, NULL, "%s", err_msg());
            goto done;
        }
        rc = tokenize(c, prompt, strlen(prompt), false, true, r, "messages", e);
    } else {
        rc = tokenize(c, prompt, strlen(prompt), tokenizer_add_bos(c->tok), true, r, "messages", e);
    }
done:
    if (texts) for (size_t i = 0; i < n; i++) text_buf_free(&texts[i]);
    free(texts);
    free(cm);
    free(prompt);
    return rc;
}

static int parse_stop(json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *s = opt(b, "stop");
    if (!s) return 0;
    if (json_is_string(s)) {
        if (json_string_length(s) == 0) return bad(e, "stop", "'%s' must not be empty%s", "");
        r->stops[r->n_stops++] = strdup(json_string_value(s));
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
    return 0;
}

static uint64_t random_seed(void) {
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t k = atomic_fetch_add(&counter, 1);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (k * 0x9E3779B97F4A7C15ull);
    x ^= x >> 31;
    return x * 0xBF58476D1CE4E5B9ull;
}

static int parse_fields(const struct oai_context *c, json_t *b, struct oai_request *r, struct oai_error *e) {
    json_t *model = opt(b, "model");
    if (model && !json_is_string(model)) return bad(e, "model", "'%s' must be a string%s", "");
    if (model && strcmp(json_string_value(model), c->served_name) && strcmp(json_string_value(model), c->model_path)) {
        oai_error_set(e, 404, "not_found_error", "model", "model_not_found",
                      "The model '%s' does not exist (this server serves '%s')",
                      json_string_value(model), c->served_name);
        return -1;
    }
    long long n = 1;
    if (get_int(b, "n", 1, 1, &n, NULL, e) < 0) {
        oai_error_set(e, 400, INVALID, "n", NULL, "'n' must be 1 (only one choice per request is supported)");
        return -1;
    }
    double t = 1.0, tp = 1.0, mp = 0.0;
    long long tk = 0, seed = 0;
    bool has_seed = false;
    if (get_num(b, "temperature", &t, e) < 0 || get_num(b, "top_p", &tp, e) < 0 || get_num(b, "min_p", &mp, e) < 0)
        return -1;
    if (!(t >= 0) || !isfinite(t)) {
        oai_error_set(e, 400, INVALID, "temperature", NULL, "'temperature' is %g; it must be >= 0", t);
        return -1;
    }
    if (!(tp > 0 && tp <= 1)) {
        oai_error_set(e, 400, INVALID, "top_p", NULL, "'top_p' is %g; it must be in (0, 1]", tp);
        return -1;
    }
    if (!(mp >= 0 && mp <= 1)) {
        oai_error_set(e, 400, INVALID, "min_p", NULL, "'min_p' is %g; it must be in [0, 1]", mp);
        return -1;
    }
    if (get_int(b, "top_k", -1, 1 << 30, &tk, NULL, e) < 0) return -1;
    if (get_int(b, "seed", INT64_MIN, INT64_MAX, &seed, &has_seed, e) < 0) return -1;
    r->gen.sp = (struct sampling_params){.temperature = (float)t, .top_k = (int)tk, .top_p = (float)tp,
                                         .min_p = (float)mp, .seed = has_seed ? (uint64_t)seed : random_seed()};
    if (get_bool(b, "ignore_eos", &r->gen.ignore_eos, e) < 0 || get_bool(b, "stream", &r->stream, e) < 0) return -1;
    json_t *so = opt(b, "stream_options");
    if (so) {
        if (!json_is_object(so)) return bad(e, "stream_options", "'%s' must be an object%s", "");
        if (!r->stream) return bad(e, "stream_options", "'%s' is only allowed when 'stream' is true%s", "");
        if (get_bool(so, "include_usage", &r->include_usage, e) < 0) { e->param = "stream_options"; return -1; }
    }
    r->gen.top_logprobs = -1;
    long long k = 0;
    bool has = false;
    if (r->kind == OAI_COMPLETION) {
        if (get_int(b, "logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, &k, &has, e) < 0) return -1;
        if (has) r->logprobs = true, r->gen.top_logprobs = (int)k;
    } else {
        if (get_bool(b, "logprobs", &r->logprobs, e) < 0) return -1;
        if (get_int(b, "top_logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, &k, &has, e) < 0) return -1;
        if (has && !r->logprobs) return bad(e, "top_logprobs", "'%s' requires 'logprobs': true%s", "");
        if (r->logprobs) r->gen.top_logprobs = (int)k;
    }
    return parse_stop(b, r, e);
}

// Sets max_tokens: checks an explicit value against the context, else picks the default.
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
    long long mt = 0;
    bool has = false;
    json_t *v = opt(b, k);
    if (v && json_is_integer(v) && json_integer_value(v) <= 0) {
        oai_error_set(e, 400, INVALID, k, NULL, "'%s' is %lld; it must be at least 1", k,
                      (long long)json_integer_value(v));
        return -1;
    }
    if (get_int(b, k, 1, INT32_MAX, &mt, &has, e) < 0) return -1;
    if (!has) { r->gen.max_tokens = r->kind == OAI_COMPLETION && room > 16 ? 16 : room; return 0; }
    if (mt > room) {
        oai_error_set(e, 400, INVALID, k, "context_length_exceeded",
                      "This model's maximum context length is %d tokens. However, you requested %lld tokens "
                      "(%d in the prompt, %lld for the completion)",
                      c->max_model_len, r->n_prompt + mt, r->n_prompt, mt);
        return -1;
    }
    r->gen.max_tokens = (int)mt;
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
    if (kind == OAI_CHAT) {
        const char *eot = chat_template_end_of_turn(c->tmpl);
        int id = tokenizer_token_id(c->tok, eot, strlen(eot));
        if (id >= 0) r->stop_ids[r->n_stop_ids++] = id;
        else r->stops[r->n_stops++] = strdup(eot);
    }
    for (int i = 0; i < r->n_stops; i++)
        if (!r->stops[i]) { oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
    r->gen.prompt = r->prompt_ids;
    r->gen.n_prompt = r->n_prompt;
    rc = 0;
done:
    json_decref(b);
    if (rc < 0) oai_request_free(r);
    return rc;
}

void oai_request_free(struct oai_request *r) {
    free(r->prompt_ids);
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    r->prompt_ids = NULL;
    r->n_stops = 0;
}

// ---- responses ------------------------------------------------------------------------

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
             (unsigned long long)random_seed() >> 24, atomic_fetch_add(&seq, 1) & 0xffffff);
    text_output_init(&s->out, c->tok, (const char *const *)r->stops, r->n_stops, r->stop_ids, r->n_stop_ids);
    if (r->logprobs && !streaming)
        s->lp = empty_logprobs(r->kind);
}

void oai_response_free(struct oai_response *s) {
    text_output_free(&s->out);
    text_buf_free(&s->text);
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

static json_t *token_str(const struct oai_response *s, int32_t id) {
    char piece[256];
    size_t k = tokenizer_piece(s->c->tok, id, false, piece, sizeof piece);
    return jstr(piece, k < sizeof piece ? k : sizeof piece);
}

static json_t *token_bytes(const struct oai_response *s, int32_t id) {
    unsigned char piece[256];
    size_t k = tokenizer_piece(s->c->tok, id, false, (char *)piece, sizeof piece);
    json_t *a = json_array();
    for (size_t i = 0; i < k && i < sizeof piece; i++) json_array_append_new(a, json_integer(piece[i]));
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

// A streaming chunk carrying text (may be empty), logprobs (may be NULL) and finish reason.
static json_t *chunk(struct oai_response *s, const char *text, size_t n, json_t *lp, const char *finish) {
    json_t *choice;
    if (s->r->kind == OAI_CHAT) {
        json_t *delta = json_object();
        if (!s->sent_role) { json_object_set_new(delta, "role", json_string("assistant")); s->sent_role = true; }
        if (n || !finish) json_object_set_new(delta, "content", jstr(text, n));
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "delta", delta, "logprobs", lp ? lp : json_null(),
                           "finish_reason", finish ? json_string(finish) : json_null());
    } else {
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "text", jstr(text, n), "logprobs", lp ? lp : json_null(),
                           "finish_reason", finish ? json_string(finish) : json_null());
    }
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", s->id, "object",
                          s->r->kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)s->created, "model", s->c->served_name, "choices", choice);
    if (o && s->r->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

int oai_response_token(struct oai_response *s, const struct gen_event *ev, json_t **out) {
    *out = NULL;
    if (s->out.stopped) return 1;
    size_t offset = s->out.n_decoded;
    struct text_buf t = {0};
    int rc = text_output_push(&s->out, ev->token, s->streaming ? &t : &s->text);
    if (rc < 0) return -1;
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
    // a possible stop string): clients and benchmarks timestamp tokens, not bytes
    if (s->streaming) *out = chunk(s, t.p, t.n, lp, NULL);
    text_buf_free(&t);
    return rc;
}

static json_t *usage(const struct oai_response *s, int n_cached) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", s->r->n_prompt, "completion_tokens", s->n_generated,
                     "total_tokens", s->r->n_prompt + s->n_generated,
                     "prompt_tokens_details", "cached_tokens", n_cached);
}

json_t *oai_response_first_chunk(struct oai_response *s) {
    return s->r->kind == OAI_CHAT ? chunk(s, "", 0, NULL, NULL) : NULL;
}

json_t *oai_response_usage_chunk(const struct oai_response *s, int n_cached) {
    return json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", s->id, "object",
                     s->r->kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)s->created, "model", s->c->served_name, "choices", "usage", usage(s, n_cached));
}

int oai_response_finish(struct oai_response *s, const char *finish, int n_cached, json_t **out) {
    if (s->out.stopped) finish = "stop";
    struct text_buf t = {0};
    if (text_output_finish(&s->out, s->streaming ? &t : &s->text) < 0) return -1;
    if (s->streaming) {
        *out = chunk(s, t.p, t.n, NULL, finish);
        text_buf_free(&t);
        return *out ? 0 : -1;
    }
    json_t *lp = s->lp ? json_incref(s->lp) : json_null(), *choice;
    if (s->r->kind == OAI_CHAT)
        choice = json_pack("{s:i,s:{s:s,s:o},s:o,s:s}", "index", 0, "message", "role", "assistant", "content",
                           jstr(s->text.p ? s->text.p : "", s->text.n), "logprobs", lp, "finish_reason", finish);
    else
        choice = json_pack("{s:i,s:o,s:o,s:s}", "index", 0, "text", jstr(s->text.p ? s->text.p : "", s->text.n),
                           "logprobs", lp, "finish_reason", finish);
    *out = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:o}", "id", s->id, "object",
                     s->r->kind == OAI_CHAT ? "chat.completion" : "text_completion", "created", (json_int_t)s->created,
                     "model", s->c->served_name, "choices", choice, "usage", usage(s, n_cached));
    return *out ? 0 : -1;
}

json_t *oai_models(const struct oai_context *c, long long created) {
    return json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:s,s:i}]}", "object", "list", "data", "id", c->served_name, "object",
                     "model", "created", (json_int_t)created, "owned_by", "octet", "root", c->model_path,
                     "max_model_len", c->max_model_len);
}
