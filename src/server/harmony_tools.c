// harmony_tools.c — the tools section of gpt-oss's developer message (see the header). The rules are the
// template's, quirks included: a nested object's members each start on a new line indented by 16 spaces (the
// macro's own indentation, which its trim markers leave in), a oneOf's alternatives end " | \n", a oneOf
// alternative's default sits 20 spaces after it, an array of objects whose type text is over 50 characters is
// any[], a one-entry type list is its raw name ("integer"), a default takes a comma except beside a oneOf.
#include "harmony_tools.h"

#include <jansson.h>
#include <string.h>

#include "../base/check.h"
#include "pyjson.h"

#define A(s) do { if (text_buf_append(out, (s), strlen(s)) < 0) return OCT_ENOMEM; } while (0)
#define AB(p, n) do { if (text_buf_append(out, (p), (n)) < 0) return OCT_ENOMEM; } while (0)

// Jinja's truth of a value: null, false, 0, "", [] and {} are false; absent is undefined (false).
static bool truthy(const json_t *v) {
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT: return json_object_size(v) > 0;
    case JSON_ARRAY: return json_array_size(v) > 0;
    case JSON_STRING: return json_string_length(v) > 0;
    case JSON_INTEGER: return json_integer_value(v) != 0;
    case JSON_REAL: return json_real_value(v) != 0;
    case JSON_TRUE: return true;
    default: return false;
    }
}

// spec.key (Jinja's attribute lookup: undefined unless spec is an object holding key).
static json_t *get(const json_t *spec, const char *key) {
    return json_is_object(spec) ? json_object_get(spec, key) : NULL;
}

static bool is(const json_t *v, const char *s) { return json_is_string(v) && !strcmp(json_string_value(v), s); }

// Where the error names the schema node: tools[tool] and the property path so far.
struct where {
    int tool;
    char path[160];
};

static int fail(const struct where *w, const char *what) {
    return err_set(OCT_EINVAL, "tools[%d].function.parameters%s: %s (gpt-oss's chat template cannot render it)",
                   w->tool, w->path, what);
}

// `name not in (required or [])`.
static int not_required(const json_t *req, const char *name, const struct where *w, bool *out) {
    if (!truthy(req)) { *out = true; return 0; }
    if (json_is_array(req)) {
        size_t i;
        json_t *r;
        json_array_foreach(req, i, r) if (is(r, name)) { *out = false; return 0; }
        *out = true;
        return 0;
    }
    if (json_is_string(req)) { *out = !strstr(json_string_value(req), name); return 0; }
    if (json_is_object(req)) { *out = !json_object_get(req, name); return 0; }
    return fail(w, "'required' is neither a list, a string nor an object");
}

// "// " + s where the template concatenates it (a string; anything else fails as it does in Jinja).
static int comment(const json_t *s, const char *field, const struct where *w, struct text_buf *out) {
    if (!json_is_string(s)) {
        char m[64];
        snprintf(m, sizeof m, "'%s' is not a string", field);
        return fail(w, m);
    }
    A("// ");
    AB(json_string_value(s), json_string_length(s));
    return 0;
}

// `list | join(sep)`: each entry's str().
static int join(const json_t *list, const char *sep, struct text_buf *out) {
    for (size_t i = 0; i < json_array_size(list); i++) {
        if (i) A(sep);
        if (pyjson_str(json_array_get(list, i), out) < 0) return OCT_ENOMEM;
    }
    return 0;
}

static size_t utf8_chars(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static int ts_type(const json_t *spec, struct where *w, struct text_buf *out);

// An object's members: {\nname?: \n                TYPE, name: \n                TYPE}
static int ts_object(const json_t *spec, struct where *w, struct text_buf *out) {
    const json_t *props = get(spec, "properties");
    if (!truthy(props)) { A("object"); return 0; }
    if (!json_is_object(props)) return fail(w, "'properties' is not an object");
    A("{\n");
    const char *k;
    json_t *v;
    size_t i = 0, n = json_object_size(props), at = strlen(w->path);
    json_object_foreach((json_t *)props, k, v) {
        bool opt;
        TRY(not_required(get(spec, "required"), k, w, &opt));
        A(k);
        if (opt) A("?");
        A(": \n                ");
        snprintf(w->path + at, sizeof w->path - at, ".%s", k);
        TRY(ts_type(v, w, out));
        w->path[at] = 0;
        if (++i < n) A(", ");
    }
    A("}");
    return 0;
}

static int ts_one_of(const json_t *spec, struct where *w, struct text_buf *out) {
    const json_t *alts = get(spec, "oneOf");
    if (!json_is_array(alts)) return fail(w, "'oneOf' is not a list");
    for (size_t i = 0; i < json_array_size(alts); i++) {
        const json_t *v = json_array_get(alts, i);
        TRY(ts_type(v, w, out));
        if (truthy(get(v, "description"))) TRY(comment(get(v, "description"), "description", w, out));
        if (get(v, "default")) {
            A("                    // default: ");
            if (pyjson_dump(get(v, "default"), out) < 0) return OCT_ENOMEM;
        }
        if (i + 1 < json_array_size(alts)) A(" | \n");
    }
    return 0;
}

static int ts_array(const json_t *spec, struct where *w, struct text_buf *out) {
    const json_t *items = get(spec, "items"), *it = get(items, "type");
    if (!items) A("any[]");
    else if (is(it, "string")) A("string[]");
    else if (is(it, "number") || is(it, "integer")) A("number[]");
    else if (is(it, "boolean")) A("boolean[]");
    else {
        struct text_buf in = {0};
        int rc = ts_type(items, w, &in);
        const char *t = in.p ? in.p : "";
        const bool any = !strcmp(t, "object | object") || utf8_chars(t, in.n) > 50;
        if (rc == 0 && (any ? text_buf_append(out, "any[]", 5) < 0
                            : text_buf_append(out, t, in.n) < 0 || text_buf_append(out, "[]", 2) < 0))
            rc = OCT_ENOMEM;
        text_buf_free(&in);
        TRY(rc);
    }
    if (truthy(get(spec, "nullable"))) A(" | null");
    return 0;
}

// The template's render_typescript_type(spec).
static int ts_type(const json_t *spec, struct where *w, struct text_buf *out) {
    const json_t *ty = get(spec, "type");
    if (is(ty, "array")) return ts_array(spec, w, out);
    if (json_is_array(ty) && json_array_size(ty) > 0) return join(ty, " | ", out);
    if (truthy(get(spec, "oneOf"))) return ts_one_of(spec, w, out);
    if (is(ty, "string")) {
        const json_t *en = get(spec, "enum");
        if (truthy(en)) {
            if (!json_is_array(en)) return fail(w, "'enum' is not a list");
            A("\"");
            TRY(join(en, "\" | \"", out));
            A("\"");
        } else {
            A("string");
            if (truthy(get(spec, "nullable"))) A(" | null");
        }
        return 0;
    }
    if (is(ty, "number") || is(ty, "integer")) A("number");
    else if (is(ty, "boolean")) A("boolean");
    else if (is(ty, "object")) return ts_object(spec, w, out);
    else A("any");
    return 0;
}

// One top-level parameter: [// description\n]name[?]: TYPE[default],\n
static int ts_param(const char *name, const json_t *spec, const json_t *req, struct where *w, struct text_buf *out) {
    if (truthy(get(spec, "description"))) { TRY(comment(get(spec, "description"), "description", w, out)); A("\n"); }
    bool opt;
    TRY(not_required(req, name, w, &opt));
    A(name);
    if (opt) A("?");
    A(": ");
    TRY(ts_type(spec, w, out));
    const json_t *def = get(spec, "default");
    if (def) {
        const bool en = truthy(get(spec, "enum")), one = !en && truthy(get(spec, "oneOf"));
        A(one ? "// default: " : ", // default: ");
        if (en || one) {
            if (!json_is_string(def)) return fail(w, "the default of an enum or oneOf is not a string");
            AB(json_string_value(def), json_string_length(def));
        } else if (pyjson_dump(def, out) < 0) {
            return OCT_ENOMEM;
        }
    }
    A(",\n");
    return 0;
}

static int render_tool(const json_t *fn, int i, struct text_buf *out) {
    struct where w = {.tool = i};
    const json_t *desc = get(fn, "description"), *params = get(fn, "parameters"), *props = get(params, "properties");
    if (!json_is_string(desc))
        return err_set(OCT_EINVAL, "tools[%d].function.description: gpt-oss's chat template needs a string "
                       "description for every tool", i);
    A("// ");
    AB(json_string_value(desc), json_string_length(desc));
    A("\ntype ");
    A(json_string_value(get(fn, "name")));
    A(" = ");
    if (!truthy(params) || !truthy(props)) { A("() => any;\n\n"); return 0; }
    if (!json_is_object(props)) return fail(&w, "'properties' is not an object");
    A("(_: {\n");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v) {
        snprintf(w.path, sizeof w.path, ".properties.%s", k);
        TRY(ts_param(k, v, get(params, "required"), &w, out));
    }
    A("}) => any;\n\n");
    return 0;
}

int harmony_tools_render(const char *const *tools, int n, struct text_buf *out) {
    A("## functions\n\nnamespace functions {\n\n");
    for (int i = 0; i < n; i++) {
        json_error_t je;
        json_t *t = json_loads(tools[i], 0, &je);
        if (!t) return err_set(OCT_EINVAL, "tools[%d]: %s", i, je.text);
        int rc = render_tool(get(t, "function"), i, out);
        json_decref(t);
        TRY(rc);
    }
    A("} // namespace functions");
    return 0;
}
