// oai_tokenize.c — vLLM's /tokenize and /detokenize (see the header).
#include "oai_tokenize.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "oai_fields.h"

#define INVALID "invalid_request_error"

static json_t *load(const char *body, size_t n, struct oai_error *e) {
    json_error_t je;
    json_t *b = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je);
    if (!b) oai_error_set(e, 400, INVALID, NULL, NULL, "malformed JSON body: %s (line %d, column %d)", je.text,
                          je.line, je.column);
    else if (!json_is_object(b)) oai_error_set(e, 400, INVALID, NULL, NULL, "the body must be a JSON object");
    else return b;
    json_decref(b);
    return NULL;
}

// A boolean field of vLLM's that octet answers only at its default value.
static int only_default(json_t *b, const char *k, bool dflt, const char *why, struct oai_error *e) {
    json_t *v = oaf_opt(b, k);
    if (v && !json_is_boolean(v)) return oaf_bad(e, k, "'%s' must be a boolean", k);
    if (!v || json_is_true(v) == dflt) return 0;
    oai_error_set(e, 400, INVALID, k, "unsupported_parameter", "'%s' %s is unsupported: %s", k,
                  dflt ? "false" : "true", why);
    return -1;
}

// Every field of the body is one of names[] (NULL-terminated), else 400 naming the first that is not in its
// message (param stays null, as oaf_check_fields leaves it: the key does not outlive the body).
static int known(json_t *b, const char *const *names, struct oai_error *e) {
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v) {
        int i = 0;
        while (names[i] && strcmp(names[i], k)) i++;
        if (!names[i]) {
            oai_error_set(e, 400, INVALID, NULL, "unrecognized_parameter", "unrecognized request field '%.64s'", k);
            return -1;
        }
    }
    return 0;
}

int oai_tokenize(const struct oai_context *c, const char *body, size_t n, json_t **out, struct oai_error *e) {
    static const char *const PROMPT[] = {"model", "prompt", "add_special_tokens", "return_token_strs", NULL};
    static const char *const CHAT[] = {"model", "messages", "add_special_tokens", "return_token_strs",
                                       "add_generation_prompt", "continue_final_message", "tools",
                                       "chat_template_kwargs", "reasoning_effort", NULL};
    memset(e, 0, sizeof *e);
    *out = NULL;
    json_t *b = load(body, n, e), *sub = NULL;
    if (!b) return -1;
    const bool chat = json_object_get(b, "messages") != NULL;
    int rc = -1;
    if (known(b, chat ? CHAT : PROMPT, e) < 0 ||
        only_default(b, "return_token_strs", false, "the tokens' vocabulary strings are not returned", e) < 0 ||
        only_default(b, "add_special_tokens", !chat, chat ? "the chat template writes the special tokens"
                                                          : "a prompt's BOS is the model's default", e) < 0 ||
        (chat && only_default(b, "add_generation_prompt", true, "octet's templates always end with it", e) < 0) ||
        (chat && only_default(b, "continue_final_message", false, "octet's templates end with a new reply", e) < 0))
        goto done;
    // what oai_parse reads: the prompt or conversation (tools rendered, not parsed), however long it is
    sub = json_deep_copy(b);
    const char *vllm[] = {"add_special_tokens", "return_token_strs", "add_generation_prompt", "continue_final_message"};
    for (size_t i = 0; sub && i < sizeof vllm / sizeof *vllm; i++) json_object_del(sub, vllm[i]);
    if (sub && chat && json_object_get(sub, "tools")) json_object_set_new(sub, "tool_choice", json_string("none"));
    if (sub) json_object_set_new(sub, "max_tokens", json_integer(1));
    char *text = sub ? json_dumps(sub, JSON_COMPACT) : NULL;
    struct oai_context any = *c;
    any.max_model_len = INT_MAX / 2;
    struct oai_request r;
    if (!text) {
        oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    } else if (oai_parse(&any, chat ? OAI_CHAT : OAI_COMPLETION, text, strlen(text), &r, e) == 0) {
        json_t *ids = json_array();
        for (int i = 0; ids && i < r.n_prompt; i++) json_array_append_new(ids, json_integer(r.prompt_ids[i]));
        *out = ids ? json_pack("{s:i,s:i,s:o,s:n}", "count", r.n_prompt, "max_model_len", c->max_model_len, "tokens",
                               ids, "token_strs") : NULL;
        if (!*out) oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        rc = *out ? 0 : -1;
        oai_request_free(&r);
    }
    free(text);
done:
    json_decref(sub);
    json_decref(b);
    return rc;
}

int oai_detokenize(const struct oai_context *c, const char *body, size_t n, json_t **out, struct oai_error *e) {
    static const char *const FIELDS[] = {"model", "tokens", NULL};
    memset(e, 0, sizeof *e);
    *out = NULL;
    json_t *b = load(body, n, e);
    if (!b || known(b, FIELDS, e) < 0) { json_decref(b); return -1; }
    json_t *t = oaf_opt(b, "tokens");
    const int nv = tokenizer_n_vocab(c->tok);
    int rc = -1;
    if (oai_check_model(c, b, e) < 0) goto done;
    if (!json_is_array(t)) { oaf_bad(e, "tokens", "'tokens' must be an array of token ids"); goto done; }
    const size_t k = json_array_size(t);
    int32_t *ids = malloc(sizeof(int32_t) * (k ? k : 1));
    for (size_t i = 0; ids && i < k; i++) {
        json_t *x = json_array_get(t, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= nv) {
            oaf_bad(e, "tokens", "'tokens'[%zu] must be a token id in 0..%d", i, nv - 1);
            free(ids);
            goto done;
        }
        ids[i] = (int32_t)json_integer_value(x);
    }
    const size_t need = ids ? tokenizer_decode(c->tok, ids, (int)k, true, NULL, 0) : 0;
    char *buf = ids ? malloc(need + 1) : NULL;
    struct text_buf s = {0};
    if (buf) tokenizer_decode(c->tok, ids, (int)k, true, buf, need);
    if (buf && utf8_sanitize(buf, need, &s) == 0) *out = json_pack("{s:s%}", "prompt", s.p ? s.p : "", s.n);
    if (!*out) oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    rc = *out ? 0 : -1;
    text_buf_free(&s);
    free(buf);
    free(ids);
done:
    json_decref(b);
    return rc;
}
