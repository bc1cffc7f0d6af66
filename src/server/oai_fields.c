// oai_fields.c — typed field reads and the field policy (see the header).
#include "oai_fields.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID "invalid_request_error"

json_t *oaf_opt(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

int oaf_bad(struct oai_error *e, const char *param, const char *fmt, ...) {
    e->status = 400;
    e->type = INVALID;
    e->param = param;
    e->code = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

void oaf_num_str(double x, char *buf, size_t n) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, x);
        if (strtod(buf, NULL) == x) return;
    }
}

int oaf_int(json_t *o, const char *k, long long lo, long long hi, long long *out, bool *present,
            struct oai_error *e) {
    json_t *v = oaf_opt(o, k);
    if (present) *present = v != NULL;
    if (!v) return 0;
    char s[32];
    if (json_is_real(v)) {  // an integral float (1.0) is the integer
        double d = json_real_value(v);
        oaf_num_str(d, s, sizeof s);
        if (d != floor(d)) return oaf_bad(e, k, "'%s' is %s; it must be an integer", k, s);
        if (!(d >= (double)lo && d <= (double)hi))
            return oaf_bad(e, k, "'%s' is %s; it must be in %lld..%lld", k, s, lo, hi);
        *out = (long long)d;
        return 0;
    }
    if (!json_is_integer(v)) return oaf_bad(e, k, "'%s' must be an integer", k);
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return oaf_bad(e, k, "'%s' is %lld; it must be in %lld..%lld", k, x, lo, hi);
    *out = x;
    return 0;
}

int oaf_num(json_t *o, const char *k, double lo, bool lo_open, double hi, double *out, struct oai_error *e) {
    json_t *v = oaf_opt(o, k);
    if (!v) return 0;
    if (!json_is_number(v)) return oaf_bad(e, k, "'%s' must be a number", k);
    double x = json_number_value(v);
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
        char s[32], a[32], b[32];
        oaf_num_str(x, s, sizeof s);
        oaf_num_str(lo, a, sizeof a);
        oaf_num_str(hi, b, sizeof b);
        return oaf_bad(e, k, "'%s' is %s; it must be in %s%s, %s]", k, s, lo_open ? "(" : "[", a, b);
    }
    *out = x;
    return 0;
}

int oaf_bool(json_t *o, const char *k, bool *out, struct oai_error *e) {
    json_t *v = oaf_opt(o, k);
    if (!v) return 0;
    if (!json_is_boolean(v)) return oaf_bad(e, k, "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return 0;
}

// ---- the field policy ----

enum { BOTH = 0, COMPL, CHAT };
enum rule {
    HANDLED,        // openai.c reads and implements it
    HARMLESS,       // bookkeeping: accepted, no effect on the output
    TRUE_ONLY,      // a boolean whose only supported value is true (octet's behaviour)
    FALSE_ONLY,     // ... false
    NEVER,          // any non-null value is unsupported
    CUSTOM,         // checked by name below
};
struct field { const char *name; unsigned char where, rule; };

static const struct field fields[] = {
    {"model", BOTH, HANDLED}, {"max_tokens", BOTH, HANDLED}, {"max_completion_tokens", BOTH, HANDLED},
    {"temperature", BOTH, HANDLED}, {"top_p", BOTH, HANDLED}, {"top_k", BOTH, HANDLED}, {"min_p", BOTH, HANDLED},
    {"seed", BOTH, HANDLED}, {"n", BOTH, HANDLED}, {"stream", BOTH, HANDLED}, {"stream_options", BOTH, HANDLED},
    {"stop", BOTH, HANDLED}, {"logprobs", BOTH, HANDLED}, {"ignore_eos", BOTH, HANDLED},
    {"logit_bias", BOTH, HANDLED}, {"presence_penalty", BOTH, HANDLED}, {"frequency_penalty", BOTH, HANDLED},
    {"repetition_penalty", BOTH, HANDLED}, {"min_tokens", BOTH, HANDLED}, {"stop_token_ids", BOTH, HANDLED},
    {"prompt", COMPL, HANDLED}, {"echo", COMPL, HANDLED}, {"messages", CHAT, HANDLED},
    {"top_logprobs", CHAT, HANDLED},
    {"user", BOTH, HARMLESS}, {"metadata", BOTH, HARMLESS}, {"store", BOTH, HARMLESS},
    {"service_tier", BOTH, HARMLESS}, {"prompt_cache_key", BOTH, HARMLESS}, {"safety_identifier", BOTH, HARMLESS},
    {"request_id", BOTH, HARMLESS},
    {"skip_special_tokens", BOTH, TRUE_ONLY}, {"spaces_between_special_tokens", BOTH, TRUE_ONLY},
    {"add_generation_prompt", CHAT, TRUE_ONLY},
    {"include_stop_str_in_output", BOTH, HANDLED}, {"use_beam_search", BOTH, FALSE_ONLY},
    {"echo", CHAT, FALSE_ONLY}, {"continue_final_message", CHAT, FALSE_ONLY},
    {"return_tokens_as_token_ids", BOTH, FALSE_ONLY},
    {"best_of", COMPL, CUSTOM}, {"suffix", COMPL, CUSTOM}, {"response_format", BOTH, CUSTOM},
    {"tools", CHAT, HANDLED}, {"tool_choice", CHAT, HANDLED}, {"parallel_tool_calls", CHAT, HANDLED},
    {"tools", COMPL, CUSTOM}, {"tool_choice", COMPL, CUSTOM}, {"parallel_tool_calls", COMPL, CUSTOM},
    {"functions", BOTH, CUSTOM}, {"function_call", BOTH, CUSTOM},
    {"prompt_logprobs", BOTH, NEVER}, {"guided_json", BOTH, NEVER}, {"guided_regex", BOTH, NEVER},
    {"guided_choice", BOTH, NEVER}, {"guided_grammar", BOTH, NEVER}, {"guided_decoding_backend", BOTH, NEVER},
    {"structured_outputs", BOTH, NEVER}, {"allowed_token_ids", BOTH, NEVER}, {"bad_words", BOTH, NEVER},
    {"logits_processors", BOTH, NEVER}, {"length_penalty", BOTH, NEVER}, {"truncate_prompt_tokens", BOTH, NEVER},
    {"add_special_tokens", BOTH, NEVER}, {"priority", BOTH, NEVER}, {"modalities", BOTH, NEVER},
    {"audio", BOTH, NEVER}, {"prediction", BOTH, NEVER},
    {"reasoning_effort", CHAT, HANDLED}, {"reasoning_effort", COMPL, NEVER},
    {"web_search_options", BOTH, NEVER}, {"chat_template", BOTH, NEVER},
    {"chat_template_kwargs", CHAT, HANDLED}, {"chat_template_kwargs", COMPL, NEVER},
    {"documents", BOTH, NEVER}, {"verbosity", BOTH, NEVER}, {"mm_processor_kwargs", BOTH, NEVER},
    {"vllm_xargs", BOTH, NEVER},
};

static int unsupported(struct oai_error *e, const char *param, const char *what) {
    oai_error_set(e, 400, INVALID, param, "unsupported_parameter", "'%s' is unsupported: %s", param, what);
    return -1;
}

static bool no_tools(json_t *b) {
    json_t *t = oaf_opt(b, "tools"), *f = oaf_opt(b, "functions");
    return (!t || (json_is_array(t) && !json_array_size(t))) && (!f || (json_is_array(f) && !json_array_size(f)));
}

static int custom(json_t *b, const char *k, json_t *v, struct oai_error *e) {
    if (!strcmp(k, "best_of")) {
        long long n = 1;
        if (oaf_int(b, k, 1, 1 << 30, &n, NULL, e) < 0) return -1;
        return n == 1 ? 0 : unsupported(e, k, "only one candidate per request is generated (best_of 1)");
    }
    if (!strcmp(k, "suffix")) {
        if (!json_is_string(v)) return oaf_bad(e, k, "'%s' must be a string", k);
        return json_string_length(v) == 0 ? 0 : unsupported(e, k, "octet does not insert text after a completion");
    }
    if (!strcmp(k, "response_format")) {
        json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
        if (!json_is_string(t)) return oaf_bad(e, k, "'%s' must be an object with a string 'type'", k);
        if (!strcmp(json_string_value(t), "text") || !strcmp(json_string_value(t), "json_object")) return 0;
        if (!strcmp(json_string_value(t), "json_schema"))
            return unsupported(e, k, "octet does not constrain output to a JSON schema (\"text\" or \"json_object\")");
        return oaf_bad(e, k, "'%s'.type must be text, json_object or json_schema", k);
    }
    // (chat's tools, tool_choice and parallel_tool_calls are tool_calls.c's; completions and the legacy
    // functions / function_call have no tool calling)
    const char *why = !strcmp(k, "functions") || !strcmp(k, "function_call")
                          ? "the legacy functions API is not implemented (use tools)"
                          : "completions have no tool calling (use /v1/chat/completions)";
    if (!strcmp(k, "tools") || !strcmp(k, "functions")) {
        if (!json_is_array(v)) return oaf_bad(e, k, "'%s' must be an array", k);
        return json_array_size(v) == 0 ? 0 : unsupported(e, k, why);
    }
    if (!strcmp(k, "tool_choice") || !strcmp(k, "function_call")) {
        bool none = json_is_string(v) && !strcmp(json_string_value(v), "none");
        bool auto_ = json_is_string(v) && !strcmp(json_string_value(v), "auto");
        return none || (auto_ && no_tools(b)) ? 0 : unsupported(e, k, why);
    }
    // parallel_tool_calls: means nothing without tools (which are refused above when present)
    if (!json_is_boolean(v)) return oaf_bad(e, k, "'%s' must be a boolean", k);
    return 0;
}

int oaf_check_fields(json_t *body, enum oai_kind kind, struct oai_error *e) {
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        const struct field *f = NULL;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0] && !f; i++)
            if (!strcmp(fields[i].name, k) &&
                (fields[i].where == BOTH || fields[i].where == (kind == OAI_CHAT ? CHAT : COMPL)))
                f = &fields[i];
        if (!f) {  // (param: the table's own copy of a name of the other endpoint; the body's text dies)
            const char *other = NULL;
            for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
                if (!strcmp(fields[i].name, k)) other = fields[i].name;
            const char *where = !other ? "" : kind == OAI_CHAT ? " (a /v1/completions field)"
                                                               : " (a /v1/chat/completions field)";
            oai_error_set(e, 400, INVALID, other, "unrecognized_parameter", "unrecognized request field '%.64s'%s", k,
                          where);
            return -1;
        }
        if (json_is_null(v) || f->rule == HANDLED || f->rule == HARMLESS) continue;
        if (f->rule == TRUE_ONLY || f->rule == FALSE_ONLY) {
            if (!json_is_boolean(v)) return oaf_bad(e, f->name, "'%s' must be a boolean", f->name);
            if (json_is_true(v) != (f->rule == TRUE_ONLY))
                return unsupported(e, f->name, f->rule == TRUE_ONLY ? "only true is supported"
                                                                    : "only false is supported");
            continue;
        }
        if (f->rule == NEVER) return unsupported(e, f->name, "octet does not implement it");
        if (custom(body, f->name, v, e) < 0) return -1;
    }
    return 0;
}
