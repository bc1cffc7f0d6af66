// pyjson.c — Python's json.dumps text of a JSON value (see the header).
#include "pyjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define A(s, n) do { if (text_buf_append(out, (s), (n)) < 0) return -1; } while (0)

int pyjson_escape(const char *s, size_t n, struct text_buf *out) {
    size_t run = 0;  // bytes passed through since the last escape
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') { run++; continue; }
        A(s + i - run, run);
        run = 0;
        char e[8];
        const char *sh = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                         : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (!sh) snprintf(e, sizeof e, "\\u%04x", c), sh = e;
        A(sh, strlen(sh));
    }
    A(s + n - run, run);
    return 0;
}

int pyjson_string(const char *s, size_t n, struct text_buf *out) {
    A("\"", 1);
    if (pyjson_escape(s, n, out) < 0) return -1;
    A("\"", 1);
    return 0;
}

// repr(x): the fewest significant digits that read back to x, in fixed notation when the decimal exponent
// is in [-4, 16) (with ".0" when there is no fraction), else d.ddde±XX.
static int py_real(double x, struct text_buf *out) {
    char t[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*e", p - 1, x);
        if (strtod(t, NULL) == x) break;
    }
    char *ep = strchr(t, 'e'), dig[24];
    if (!ep) return text_buf_append(out, t, strlen(t));  // (inf, nan: not JSON, never parsed by jansson)
    int e = atoi(ep + 1), nd = 0;
    const char *p = t;
    if (*p == '-') { A("-", 1); p++; }
    for (; p < ep; p++)
        if (*p != '.') dig[nd++] = *p;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    dig[nd] = 0;
    if (e >= -4 && e < 16) {
        if (e < 0) {
            A("0.", 2);
            for (int k = 0; k < -e - 1; k++) A("0", 1);
            A(dig, (size_t)nd);
        } else {
            for (int k = 0; k <= e; k++) A(k < nd ? &dig[k] : "0", 1);
            A(".", 1);
            if (nd > e + 1) A(dig + e + 1, (size_t)(nd - e - 1));
            else A("0", 1);
        }
        return 0;
    }
    A(dig, 1);
    if (nd > 1) { A(".", 1); A(dig + 1, (size_t)nd - 1); }
    return text_buf_printf(out, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
}

int pyjson_dump(const json_t *v, struct text_buf *out) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        int first = 1;
        A("{", 1);
        json_object_foreach((json_t *)v, k, x) {
            if (!first) A(", ", 2);
            first = 0;
            if (pyjson_string(k, strlen(k), out) < 0) return -1;
            A(": ", 2);
            if (pyjson_dump(x, out) < 0) return -1;
        }
        A("}", 1);
        return 0;
    }
    case JSON_ARRAY:
        A("[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) A(", ", 2);
            if (pyjson_dump(json_array_get(v, i), out) < 0) return -1;
        }
        A("]", 1);
        return 0;
    case JSON_STRING: return pyjson_string(json_string_value(v), json_string_length(v), out);
    case JSON_INTEGER: return text_buf_printf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    case JSON_REAL: return py_real(json_real_value(v), out);
    case JSON_TRUE: return text_buf_append(out, "true", 4);
    case JSON_FALSE: return text_buf_append(out, "false", 5);
    case JSON_NULL: return text_buf_append(out, "null", 4);
    }
    return -1;
}

int pyjson_str(const json_t *v, struct text_buf *out) {
    if (json_is_string(v)) return text_buf_append(out, json_string_value(v), json_string_length(v));
    if (json_is_true(v)) return text_buf_append(out, "True", 4);
    if (json_is_false(v)) return text_buf_append(out, "False", 5);
    if (json_is_null(v)) return text_buf_append(out, "None", 4);
    return pyjson_dump(v, out);
}
