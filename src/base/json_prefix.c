// json_prefix.c — JSON's grammar a byte at a time (see the header).
#include "json_prefix.h"

#include <string.h>

enum {
    ST_VALUE, ST_ARR_FIRST, ST_OBJ_FIRST, ST_KEY, ST_COLON, ST_AFTER, ST_STR, ST_ESC, ST_UHEX, ST_SURR_BS,
    ST_SURR_U, ST_NUM, ST_LIT, ST_DONE, ST_FAIL,
};
// a number's parts: after '-', a leading 0, integer digits, '.', fraction digits, 'e', the exponent's sign, digits
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static const char *const LIT[3] = {"true", "false", "null"};

void jp_init(struct jp *s, bool object_only) {
    memset(s, 0, sizeof *s);
    s->object_only = object_only;
}

static bool ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int hexv(unsigned char c) {
    return digit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int fail(struct jp *s) { return s->st = ST_FAIL, -1; }
static int value_end(struct jp *s) { return s->st = s->depth ? ST_AFTER : ST_DONE, 0; }
static bool top_is_obj(const struct jp *s) { return s->obj[(s->depth - 1) / 64] >> ((s->depth - 1) % 64) & 1; }

static int open_level(struct jp *s, bool obj) {
    if (s->depth == JP_MAX_DEPTH) return fail(s);
    const uint64_t bit = 1ull << (s->depth % 64);
    s->obj[s->depth / 64] = obj ? s->obj[s->depth / 64] | bit : s->obj[s->depth / 64] & ~bit;
    s->depth++;
    s->st = obj ? ST_OBJ_FIRST : ST_ARR_FIRST;
    return 0;
}

static int close_level(struct jp *s) {
    s->depth--;
    return value_end(s);
}

// A string's byte (not an escape's): UTF-8 checked as it goes (no overlong forms, surrogates or values past
// U+10FFFF), control characters refused.
static int string_byte(struct jp *s, unsigned char c) {
    if (s->sub) {
        if (c < s->lo || c > s->hi) return fail(s);
        s->sub--, s->lo = 0x80, s->hi = 0xBF;
        return 0;
    }
    if (c == '"') {
        if (s->key) return s->st = ST_COLON, 0;
        return value_end(s);
    }
    if (c == '\\') return s->st = ST_ESC, 0;
    if (c < 0x20) return fail(s);
    if (c < 0x80) return 0;
    s->lo = 0x80, s->hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) s->sub = 1;
    else if (c >= 0xE0 && c <= 0xEF) s->sub = 2, s->lo = c == 0xE0 ? 0xA0 : 0x80, s->hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) s->sub = 3, s->lo = c == 0xF0 ? 0x90 : 0x80, s->hi = c == 0xF4 ? 0x8F : 0xBF;
    else return fail(s);
    return 0;
}

// A digit of \uXXXX; at the fourth, the code unit: a high surrogate wants a low one next, \u0000 and an
// unpaired low surrogate are refused (as jansson refuses them).
static int hex_byte(struct jp *s, unsigned char c) {
    const int v = hexv(c);
    if (v < 0) return fail(s);
    s->code = (uint16_t)(s->code << 4 | v);
    if (++s->sub < 4) return 0;
    const uint16_t u = s->code;
    s->sub = 0;
    if (s->low) {
        if (u < 0xDC00 || u > 0xDFFF) return fail(s);
        s->low = false;
        return s->st = ST_STR, 0;
    }
    if (u >= 0xD800 && u <= 0xDBFF) return s->st = ST_SURR_BS, 0;
    if ((u >= 0xDC00 && u <= 0xDFFF) || u == 0) return fail(s);
    return s->st = ST_STR, 0;
}

// A number's byte: 1 where the number ended before it (the byte is then read in the state after it).
static int number_byte(struct jp *s, unsigned char c) {
    const bool e = c == 'e' || c == 'E';
    switch (s->sub) {
    case N_MINUS: return c == '0' ? (s->sub = N_ZERO, 0) : digit(c) ? (s->sub = N_INT, 0) : fail(s);
    case N_ZERO:
        if (digit(c)) return fail(s);  // (no leading zeros)
        /* fallthrough */
    case N_INT:
        if (digit(c)) return 0;
        if (c == '.') return s->sub = N_DOT, 0;
        if (e) return s->sub = N_E, 0;
        break;
    case N_DOT: return digit(c) ? (s->sub = N_FRAC, 0) : fail(s);
    case N_FRAC:
        if (digit(c)) return 0;
        if (e) return s->sub = N_E, 0;
        break;
    case N_E: return c == '+' || c == '-' ? (s->sub = N_ESIGN, 0) : digit(c) ? (s->sub = N_EXP, 0) : fail(s);
    case N_ESIGN: return digit(c) ? (s->sub = N_EXP, 0) : fail(s);
    case N_EXP:
        if (digit(c)) return 0;
        break;
    }
    value_end(s);
    return 1;
}

static int byte(struct jp *s, unsigned char c) {
    const bool between = s->st <= ST_AFTER;  // (between the grammar's tokens: where whitespace may be)
    if (between && ws(c)) return ++s->ws > 2 + 4 * s->depth ? fail(s) : 0;
    if (s->st != ST_NUM) s->ws = 0;  // (a number's end: the run after it begins with this byte)
    for (;;) {
        switch (s->st) {
        case ST_VALUE:
            if (ws(c)) return 0;
            if (s->object_only && !s->depth && c != '{') return fail(s);
            if (c == '{' || c == '[') return open_level(s, c == '{');
            if (c == '"') return s->key = false, s->st = ST_STR, s->sub = 0, 0;
            if (c == '-' || digit(c)) return s->st = ST_NUM, s->sub = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT, 0;
            for (int k = 0; k < 3; k++)
                if (c == (unsigned char)LIT[k][0]) return s->st = ST_LIT, s->lit = (uint8_t)k, s->sub = 1, 0;
            return fail(s);
        case ST_ARR_FIRST:
            if (ws(c)) return 0;
            if (c == ']') return close_level(s);
            s->st = ST_VALUE;
            continue;
        case ST_OBJ_FIRST:
        case ST_KEY:
            if (ws(c)) return 0;
            if (c == '}' && s->st == ST_OBJ_FIRST) return close_level(s);
            if (c == '"') return s->key = true, s->st = ST_STR, s->sub = 0, 0;
            return fail(s);
        case ST_COLON:
            if (ws(c)) return 0;
            return c == ':' ? (s->st = ST_VALUE, 0) : fail(s);
        case ST_AFTER:
            if (ws(c)) return 0;
            if (c == ',') return s->st = top_is_obj(s) ? ST_KEY : ST_VALUE, 0;
            if (c == (top_is_obj(s) ? '}' : ']')) return close_level(s);
            return fail(s);
        case ST_STR: return string_byte(s, c);
        case ST_ESC:
            if (c == 'u') return s->st = ST_UHEX, s->sub = 0, s->code = 0, 0;
            return c && strchr("\"\\/bfnrt", c) ? (s->st = ST_STR, 0) : fail(s);
        case ST_UHEX: return hex_byte(s, c);
        case ST_SURR_BS: return c == '\\' ? (s->st = ST_SURR_U, 0) : fail(s);
        case ST_SURR_U: return c == 'u' ? (s->st = ST_UHEX, s->low = true, s->sub = 0, s->code = 0, 0) : fail(s);
        case ST_NUM:
            if (number_byte(s, c) <= 0) return s->st == ST_FAIL ? -1 : 0;
            continue;  // (the number ended before c)
        case ST_LIT:
            if (c != (unsigned char)LIT[s->lit][s->sub]) return fail(s);
            if (!LIT[s->lit][++s->sub]) return value_end(s);
            return 0;
        default: return fail(s);  // (done: nothing may follow; failed)
        }
    }
}

int jp_feed(struct jp *s, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (byte(s, (unsigned char)p[i]) < 0) return -1;
    return s->st == ST_FAIL ? -1 : 0;
}

bool jp_complete(const struct jp *s) { return s->st == ST_DONE; }

bool jp_in_text(const struct jp *s) { return s->st == ST_STR && !s->sub; }
