// tool_calls.c — the hermes tool-call format: requests' tools in, replies' calls out (tool_calls.h).
#include "tool_calls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "oai_fields.h"
#include "pyjson.h"

static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";

void tool_set_free(struct tool_set *t) {
    for (int i = 0; i < t->n_tools; i++) free(t->tools[i]);
    for (int i = 0; t->names && i < t->n_tools; i++) free(t->names[i]);
    free(t->tools);
    free(t->names);
    free(t->named);
    memset(t, 0, sizeof *t);
}

// One entry of tools: {"type": "function", "function": {"name": string, ...}}.
static int check_tool(json_t *tool, size_t i) {
    json_t *ty = json_object_get(tool, "type"), *fn = json_object_get(tool, "function");
    json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
    if (!json_is_object(tool) || !json_is_string(ty) || strcmp(json_string_value(ty), "function") ||
        !json_is_string(name) || !json_string_length(name))
        return err_set(OCT_EINVAL, "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ...}}", i);
    return 0;
}

static bool has_function(json_t *tools, json_t *name) {
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) if (json_equal(json_object_get(json_object_get(tool, "function"), "name"), name))
        return true;
    return false;
}

int tool_set_read(json_t *body, bool parser, bool has_tools, struct tool_set *t, const char **param) {
    memset(t, 0, sizeof *t);
    json_t *tools = oaf_opt(body, "tools"), *choice = oaf_opt(body, "tool_choice");
    json_t *par = oaf_opt(body, "parallel_tool_calls");
    *param = "tools";
    if (tools && !json_is_array(tools)) return err_set(OCT_EINVAL, "'tools' must be an array");
    size_t n = tools ? json_array_size(tools) : 0;
    *param = "parallel_tool_calls";
    if (par && !json_is_boolean(par)) return err_set(OCT_EINVAL, "'parallel_tool_calls' must be a boolean");
    t->single = par && json_is_false(par);
    *param = "tool_choice";
    const char *c = choice && json_is_string(choice) ? json_string_value(choice) : NULL;
    json_t *fn = json_object_get(choice, "function"), *named = json_object_get(fn, "name");
    if (choice && !c && (!json_is_string(json_object_get(choice, "type")) || !json_is_string(named) ||
                         strcmp(json_string_value(json_object_get(choice, "type")), "function")))
        return err_set(OCT_EINVAL, "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": "
                       "\"function\", \"function\": {\"name\": ...}}");
    if (c && strcmp(c, "auto") && strcmp(c, "none") && strcmp(c, "required"))
        return err_set(OCT_EINVAL, "'tool_choice' must be \"auto\", \"none\", \"required\" or a function");
    t->required = c && !strcmp(c, "required");
    if ((named || t->required) && !n)
        return err_set(OCT_EINVAL, "'tool_choice' %s%s%s, but 'tools' is empty", named ? "names the function '" :
                       "\"required\" asks for a call", named ? json_string_value(named) : "", named ? "'" : "");
    if (!n) return 0;
    *param = "tools";
    if (!has_tools) return err_set(OCT_EUNSUP, "'tools' is unsupported: the model's chat template has no tool format "
                                   "octet renders (ChatML and Qwen3's hermes format, gpt-oss's harmony)");
    for (size_t i = 0; i < n; i++) TRY(check_tool(json_array_get(tools, i), i));
    if (named) {  // one of the tools'
        *param = "tool_choice";
        if (!has_function(tools, named))
            return err_set(OCT_EINVAL, "'tool_choice' names the function '%s', which 'tools' does not have",
                           json_string_value(named));
        if (!(t->named = strdup(json_string_value(named)))) return err_set(OCT_ENOMEM, "out of memory");
    }
    t->parse = !named && (!c || strcmp(c, "none"));
    if (t->parse && !t->required && !parser) {
        *param = "tool_choice";
        return err_set(OCT_EUNSUP, "\"auto\" tool choice requires the server to run with --enable-auto-tool-choice "
                       "--tool-call-parser (hermes, or openai for gpt-oss)");
    }
    if (!(t->tools = calloc(n, sizeof *t->tools)) || !(t->names = calloc(n, sizeof *t->names)))
        return err_set(OCT_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *tool = json_array_get(tools, i);
        struct text_buf b = {0};  // (transformers' tojson: Python's json.dumps text)
        const int rc = pyjson_dump(tool, &b);
        t->tools[t->n_tools] = b.p;  // (freed by tool_set_free, whole or not)
        t->names[t->n_tools] = strdup(json_string_value(json_object_get(json_object_get(tool, "function"), "name")));
        if (rc < 0 || !t->names[t->n_tools++]) return err_set(OCT_ENOMEM, "out of memory");
    }
    return 0;
}

int tool_calls_of_message(json_t *m, size_t i, struct chat_tool_call **calls, int *n) {
    *calls = NULL;
    *n = 0;
    json_t *tc = oaf_opt(m, "tool_calls");
    if (!tc) return 0;
    if (!json_is_array(tc)) return err_set(OCT_EINVAL, "messages[%zu].tool_calls must be an array", i);
    size_t k = json_array_size(tc);
    if (!k) return 0;
    if (!(*calls = calloc(k, sizeof **calls))) return err_set(OCT_ENOMEM, "out of memory");
    for (size_t j = 0; j < k; j++) {
        json_t *c = json_array_get(tc, j), *fn = json_object_get(c, "function"), *ty = json_object_get(c, "type");
        json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        if (!json_is_object(c) || (ty && (!json_is_string(ty) || strcmp(json_string_value(ty), "function"))) ||
            !json_is_string(name) || !json_is_string(args)) {
            free(*calls);
            *calls = NULL;
            return err_set(OCT_EINVAL, "messages[%zu].tool_calls[%zu] must be {\"type\": \"function\", \"function\": "
                           "{\"name\": string, \"arguments\": string}}", i, j);
        }
        // the arguments as the template's tojson writes the object vLLM parses them into ("" is {}); the
        // normalised text replaces the client's in m, which keeps it alive
        json_error_t je;
        json_t *obj = json_string_length(args) ? json_loadb(json_string_value(args), json_string_length(args),
                                                            JSON_DECODE_ANY, &je) : json_object();
        struct text_buf t = {0};
        int rc = obj ? pyjson_dump(obj, &t) : OCT_EINVAL;
        json_decref(obj);
        if (rc == 0 && json_object_set_new(fn, "arguments", json_string(t.p)) < 0) rc = OCT_ENOMEM;
        text_buf_free(&t);
        if (rc < 0) {
            free(*calls);
            *calls = NULL;
            return rc == OCT_EINVAL ? err_set(rc, "messages[%zu].tool_calls[%zu].function.arguments is not JSON: %s",
                                              i, j, je.text) : err_set(OCT_ENOMEM, "out of memory");
        }
        (*calls)[j].name = json_string_value(name);
        (*calls)[j].arguments = json_string_value(json_object_get(fn, "arguments"));
        (*calls)[j].id = json_string_value(json_object_get(c, "id"));  // (NULL unless a string)
    }
    *n = (int)k;
    return 0;
}

void tool_call_id(const char *id_base, int k, char *buf, size_t cap) {
    snprintf(buf, cap, "call_%.48s_%d", id_base, k);
}

json_t *tool_call_json(const char *id_base, int k, const char *name, const json_t *args, const char *raw, size_t n) {
    struct text_buf a = {0};
    char id[96];
    tool_call_id(id_base, k, id, sizeof id);
    json_t *c = NULL;
    if (args ? pyjson_dump(args, &a) == 0 : utf8_sanitize(raw, n, &a) == 0)
        c = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function", "name", name, "arguments",
                      a.p ? a.p : "");
    text_buf_free(&a);
    return c;
}

json_t *tool_calls_parse(const char *text, size_t n, bool single, const char *id_base, size_t *content_n) {
    const char *end = text + n, *p = memmem(text, n, OPEN, sizeof OPEN - 1);
    *content_n = n;
    if (!p) return NULL;
    json_t *calls = json_array();
    size_t first = (size_t)(p - text);
    for (int k = 0; calls && p; k++) {
        const char *body = p + sizeof OPEN - 1, *close = memmem(body, (size_t)(end - body), CLOSE, sizeof CLOSE - 1);
        const char *stop = close ? close : end;
        json_error_t je;
        json_t *call = json_loadb(body, (size_t)(stop - body), JSON_DECODE_ANY, &je);
        json_t *name = json_object_get(call, "name"), *args = json_object_get(call, "arguments");
        bool ok = json_is_string(name) && args;
        if (ok && (!single || k == 0))
            ok = json_array_append_new(calls, tool_call_json(id_base, k, json_string_value(name), args, NULL, 0)) == 0;
        json_decref(call);
        if (!ok) {
            json_decref(calls);
            return NULL;
        }
        if (!close) break;
        p = memmem(close, (size_t)(end - close), OPEN, sizeof OPEN - 1);
    }
    if (calls) *content_n = first;
    return calls;
}
