// json_stream.c — a JSON value rewritten in Python's json.dumps form as it arrives (see the header).
#include "json_stream.h"

#include <jansson.h>
#include <stddef.h>
#include <string.h>

#include "pyjson.h"

enum {
    S_VALUE,      // a value begins (whitespace first)
    S_ARR_FIRST,  // after '[': a value or ']'
    S_OBJ_FIRST,  // after '{': a key or '}'
    S_KEY,        // after ',' in an object: a key
    S_COLON,      // after a key
    S_AFTER,      // after a value inside a container: ',' or the closing bracket
    S_STR,        // inside a string
    S_ESC,        // after '\' in a string
    S_UHEX,       // reading \uXXXX's digits
    S_SURR,       // after a high surrogate: the '\' of its low half
    S_SURR_U,     // its 'u'
    S_NUM,        // reading a number
    S_LIT,        // reading true, false or null
    S_DONE,
    S_FAIL,
};

void json_stream_init(struct json_stream *j) {
    memset(j, 0, offsetof(struct json_stream, open));
    j->raw = (struct text_buf){0};
    j->member[0] = 0;
    j->n_member = 0;
}

void json_stream_free(struct json_stream *j) { text_buf_free(&j->raw); }

static int emit(struct json_stream *j, struct text_buf *out, const char *s, size_t n) {
    for (size_t i = 0; j->cap && i < n && j->n_member + 1 < (int)sizeof j->member; i++) j->member[j->n_member++] = s[i];
    j->member[j->n_member] = 0;
    return text_buf_append(out, s, n);
}

static bool in_member(const struct json_stream *j) { return j->depth == 1 && j->open[0] == '{'; }

// A value (a scalar, or a container just closed) has ended: JSE_END where it was a top-level member's.
static int value_end(struct json_stream *j) {
    j->state = j->depth ? S_AFTER : S_DONE;
    return j->depth == 0 ? JSE_DONE : in_member(j) ? JSE_END : JSE_MORE;
}

// A number or literal in raw has ended: written as pyjson writes what jansson reads (JSE_FAIL if it reads none).
static int scalar_end(struct json_stream *j, struct text_buf *out) {
    json_error_t e;
    json_t *v = j->raw.n ? json_loadb(j->raw.p, j->raw.n, JSON_DECODE_ANY, &e) : NULL;
    if (!v || json_is_string(v) || json_is_object(v) || json_is_array(v)) {
        json_decref(v);
        return j->state = S_FAIL, JSE_FAIL;
    }
    int rc = pyjson_dump(v, out);
    json_decref(v);
    if (rc < 0) return JSE_NOMEM;
    j->raw.n = 0;
    return value_end(j);
}

// A code point read from an escape, written as pyjson writes it.
static int code_point(struct json_stream *j, struct text_buf *out, uint32_t c) {
    char u[4];
    size_t n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    static const unsigned char lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (size_t i = n; i-- > 1; c >>= 6) u[i] = (char)(0x80 | (c & 0x3F));  // (continuation bytes, last first)
    u[0] = (char)(n == 1 ? c : lead[n] | c);
    struct text_buf t = {0};
    int rc = pyjson_escape(u, n, &t) < 0 || emit(j, out, t.p, t.n) < 0 ? JSE_NOMEM : JSE_MORE;
    text_buf_free(&t);
    return rc;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_num(char c) { return (c >= '0' && c <= '9') || strchr("-+.eE", c) != NULL; }

// One byte c of a string (after its opening quote).
static int string_byte(struct json_stream *j, char c, struct text_buf *out) {
    if (c == '"') {
        if (emit(j, out, "\"", 1) < 0) return JSE_NOMEM;
        j->cap = false;
        if (j->key) return j->state = S_COLON, JSE_MORE;
        return value_end(j);
    }
    if (c == '\\') {
        j->raw.n = 0;
        if (text_buf_append(&j->raw, "\\", 1) < 0) return JSE_NOMEM;
        return j->state = S_ESC, JSE_MORE;
    }
    if ((unsigned char)c < 0x20) return j->state = S_FAIL, JSE_FAIL;  // (jansson: a control character)
    return emit(j, out, &c, 1) < 0 ? JSE_NOMEM : JSE_MORE;
}

// The byte after a '\' in a string.
static int escape_byte(struct json_stream *j, char c, struct text_buf *out) {
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = c ? strchr(from, c) : NULL;
    if (c == 'u') {
        if (text_buf_append(&j->raw, "u", 1) < 0) return JSE_NOMEM;
        return j->state = S_UHEX, JSE_MORE;
    }
    if (!k) return j->state = S_FAIL, JSE_FAIL;
    j->raw.n = 0;
    j->state = S_STR;
    return code_point(j, out, (unsigned char)to[k - from]);
}

// A digit of \uXXXX: at the fourth, the code unit (a surrogate pair's two units make one code point).
static int hex_byte(struct json_stream *j, char c, struct text_buf *out) {
    if (hexval(c) < 0) return j->state = S_FAIL, JSE_FAIL;
    if (text_buf_append(&j->raw, &c, 1) < 0) return JSE_NOMEM;
    const char *d = j->raw.p + j->raw.n, *u = memrchr(j->raw.p, 'u', j->raw.n);  // (hex digits have no 'u')
    if (d - u - 1 < 4) return JSE_MORE;
    uint32_t v = 0;
    for (int i = -4; i < 0; i++) v = v << 4 | (uint32_t)hexval(d[i]);
    if (j->hi) {
        if (v < 0xDC00 || v > 0xDFFF) return j->state = S_FAIL, JSE_FAIL;
        v = 0x10000 + ((j->hi - 0xD800) << 10) + (v - 0xDC00);
        j->hi = 0;
    } else if (v >= 0xD800 && v <= 0xDBFF) {
        j->hi = v;
        return j->state = S_SURR, JSE_MORE;
    } else if ((v >= 0xDC00 && v <= 0xDFFF) || v == 0) {  // (jansson: an unpaired low half; \u0000 not allowed)
        return j->state = S_FAIL, JSE_FAIL;
    }
    j->raw.n = 0;
    j->state = S_STR;
    return code_point(j, out, v);
}

static int open_container(struct json_stream *j, char c, struct text_buf *out) {
    if (j->depth == JSON_STREAM_MAX_DEPTH) return j->state = S_FAIL, JSE_FAIL;
    j->open[j->depth++] = c;
    j->state = c == '{' ? S_OBJ_FIRST : S_ARR_FIRST;
    return emit(j, out, &c, 1) < 0 ? JSE_NOMEM : JSE_MORE;
}

static int close_container(struct json_stream *j, char c, struct text_buf *out) {
    if (emit(j, out, &c, 1) < 0) return JSE_NOMEM;
    j->depth--;
    return value_end(j);
}

static int start_key(struct json_stream *j, struct text_buf *out) {
    j->key = true;
    j->state = S_STR;
    if ((j->cap = in_member(j))) j->n_member = 0;
    return emit(j, out, "\"", 1) < 0 ? JSE_NOMEM : JSE_MORE;
}

enum { AGAIN = -2, BEFORE = -3 };  // (structure_byte: the byte is read again in the state just set; JSE_VALUE)

static bool lit_prefix(const struct text_buf *r) {
    return !strncmp(r->p, "true", r->n) || !strncmp(r->p, "false", r->n) || !strncmp(r->p, "null", r->n);
}

// One byte in a state that does not read strings' contents: JSE_MORE (read), an event, AGAIN or BEFORE.
static int structure_byte(struct json_stream *j, char c, struct text_buf *out) {
    switch (j->state) {
    case S_VALUE:
        if (is_ws(c)) return JSE_MORE;
        if (in_member(j) && !j->told) return j->told = true, BEFORE;
        if (c == '{' || c == '[') return open_container(j, c, out);
        if (c == '"') {
            j->key = false;
            j->state = S_STR;
            return emit(j, out, "\"", 1) < 0 ? JSE_NOMEM : JSE_MORE;
        }
        if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
            j->raw.n = 0;
            j->state = c == 't' || c == 'f' || c == 'n' ? S_LIT : S_NUM;
            return text_buf_append(&j->raw, &c, 1) < 0 ? JSE_NOMEM : JSE_MORE;
        }
        return j->state = S_FAIL, JSE_FAIL;
    case S_ARR_FIRST:
        if (is_ws(c)) return JSE_MORE;
        if (c == ']') return close_container(j, c, out);
        return j->state = S_VALUE, AGAIN;
    case S_OBJ_FIRST:
    case S_KEY:
        if (is_ws(c)) return JSE_MORE;
        if (c == '}' && j->state == S_OBJ_FIRST) return close_container(j, c, out);
        if (c == '"') return start_key(j, out);
        return j->state = S_FAIL, JSE_FAIL;
    case S_COLON:
        if (is_ws(c)) return JSE_MORE;
        if (c != ':') return j->state = S_FAIL, JSE_FAIL;
        j->state = S_VALUE;
        j->told = false;
        return emit(j, out, ": ", 2) < 0 ? JSE_NOMEM : JSE_MORE;
    case S_AFTER:
        if (is_ws(c)) return JSE_MORE;
        if (c == ',') {
            j->state = j->open[j->depth - 1] == '{' ? S_KEY : S_VALUE;
            return emit(j, out, ", ", 2) < 0 ? JSE_NOMEM : JSE_MORE;
        }
        if ((c == '}' && j->open[j->depth - 1] == '{') || (c == ']' && j->open[j->depth - 1] == '['))
            return close_container(j, c, out);
        return j->state = S_FAIL, JSE_FAIL;
    case S_SURR:
    case S_SURR_U:
        if (c != (j->state == S_SURR ? '\\' : 'u')) return j->state = S_FAIL, JSE_FAIL;
        j->state = j->state == S_SURR ? S_SURR_U : S_UHEX;
        return text_buf_append(&j->raw, &c, 1) < 0 ? JSE_NOMEM : JSE_MORE;
    }
    return j->state = S_FAIL, JSE_FAIL;
}

int json_stream_push(struct json_stream *j, const char *text, size_t n, struct text_buf *out, size_t *used) {
    size_t i = 0;
    while (i < n) {
        const char c = text[i];
        int rc;
        switch (j->state) {
        case S_DONE: *used = i; return JSE_DONE;
        case S_FAIL: *used = i; return JSE_FAIL;
        case S_STR: rc = string_byte(j, c, out); break;
        case S_ESC: rc = escape_byte(j, c, out); break;
        case S_UHEX: rc = hex_byte(j, c, out); break;
        case S_NUM:
        case S_LIT:
            if (j->state == S_LIT ? c >= 'a' && c <= 'z' : is_num(c)) {
                rc = text_buf_append(&j->raw, &c, 1) < 0 ? JSE_NOMEM : JSE_MORE;
                if (j->state == S_LIT && rc == JSE_MORE && !lit_prefix(&j->raw)) rc = (j->state = S_FAIL, JSE_FAIL);
                break;
            }
            rc = scalar_end(j, out);
            if (rc == JSE_MORE) continue;  // c again, after the value
            *used = i;
            return rc;  // (c not read)
        default: rc = structure_byte(j, c, out);
        }
        if (rc == AGAIN) continue;
        if (rc == BEFORE || rc == JSE_FAIL || rc == JSE_NOMEM) {
            *used = i;
            return rc == BEFORE ? JSE_VALUE : rc;
        }
        i++;
        if (rc != JSE_MORE) {
            *used = i;
            return rc;
        }
    }
    *used = n;
    return JSE_MORE;
}

int json_stream_finish(struct json_stream *j, struct text_buf *out) {
    if ((j->state == S_NUM || j->state == S_LIT) && j->depth == 0) return scalar_end(j, out);
    if (j->state == S_DONE) return JSE_DONE;
    j->state = S_FAIL;
    return JSE_FAIL;
}
