// text_output.c — incremental detokenization plus stop-string hold-back (see the header
// for the invariant). The held tail is at most max(len(stop)) - 1 bytes plus one token's
// text, so every push costs O(held * n_stops). A token's text is never cut, however long.
#include "text_output.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int text_buf_append(struct text_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int text_buf_printf(struct text_buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) return -1;
    if ((size_t)k < sizeof small) return text_buf_append(b, small, (size_t)k);
    char *big = malloc((size_t)k + 1);
    if (!big) return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    int rc = text_buf_append(b, big, (size_t)k);
    free(big);
    return rc;
}

void text_buf_free(struct text_buf *b) {
    free(b->p);
    *b = (struct text_buf){0};
}

void text_output_init(struct text_output *o, const struct tokenizer *tok, const char *const *stops,
                      int n_stops, const int32_t *stop_ids, int n_stop_ids) {
    *o = (struct text_output){.tok = tok, .stops = stops, .n_stops = n_stops,
                              .stop_ids = stop_ids, .n_stop_ids = n_stop_ids};
}

void text_output_free(struct text_output *o) { text_buf_free(&o->held); }

// Releases held[0..k) to out and keeps the rest.
static int release(struct text_output *o, size_t k, struct text_buf *out) {
    if (!o->held.p) return text_buf_append(out, "", 0);  // (nothing decoded yet: a stop id first)
    if (text_buf_append(out, o->held.p, k) < 0) return -1;
    memmove(o->held.p, o->held.p + k, o->held.n - k);
    o->held.n -= k;
    o->held.p[o->held.n] = 0;
    return 0;
}

// Scans the held text: a complete stop string (ending past stop_floor) ends the output;
// otherwise everything but the longest tail that is a proper prefix of some stop string is
// released.
static int scan(struct text_output *o, struct text_buf *out) {
    const char *h = o->held.p;
    size_t n = o->held.n, hit = (size_t)-1, hit_len = 0, base = o->n_decoded - n;  // (base: h's offset)
    for (int j = 0; j < o->n_stops && o->stop_floor != SIZE_MAX; j++) {
        size_t ls = strlen(o->stops[j]);
        for (size_t from = 0; from + ls <= n;) {
            const char *p = memmem(h + from, n - from, o->stops[j], ls);
            if (!p) break;
            size_t at = (size_t)(p - h);
            if (base + at + ls > o->stop_floor) {
                if (at < hit) hit = at, hit_len = j < o->n_include ? ls : 0;  // (the earliest; a tie: the first)
                break;
            }
            from = at + 1;
        }
    }
    if (hit != (size_t)-1) {
        if (text_buf_append(out, h, hit + hit_len) < 0) return -1;
        o->held.n = 0;
        o->held.p[0] = 0;
        o->stopped = true;
        return 1;
    }
    size_t keep = 0;
    for (int j = 0; j < o->n_stops; j++) {
        size_t ls = strlen(o->stops[j]);
        for (size_t k = (ls - 1 < n ? ls - 1 : n); k > keep; k--)
            if (!memcmp(h + n - k, o->stops[j], k)) { keep = k; break; }
    }
    return release(o, n - keep, out);
}

static size_t count_chars(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;  // (lead bytes: valid UTF-8)
    return c;
}

int text_output_push(struct text_output *o, int32_t id, struct text_buf *out) {
    if (o->stopped) return 1;
    bool may_stop = o->n_pushed++ >= o->min_tokens;
    for (int j = 0; j < o->n_stop_ids && may_stop; j++)
        if (id == o->stop_ids[j]) { o->stopped = true; return release(o, o->held.n, out) < 0 ? -1 : 1; }
    // the piece and the pending bytes, each invalid byte possibly U+FFFD (3 bytes)
    size_t cap = 3 * (tokenizer_piece(o->tok, id, false, NULL, 0) + sizeof o->d.pending) + 16;
    char small[512], *piece = cap <= sizeof small ? small : malloc(cap);
    if (!piece) return -1;
    size_t k = detok_push(o->tok, &o->d, id, piece, cap);
    if (k > cap) k = cap;
    o->n_decoded += k;
    o->n_chars += count_chars(piece, k);
    int rc = text_buf_append(&o->held, piece, k);
    if (piece != small) free(piece);
    if (rc < 0) return -1;
    // (until the output holds min_tokens tokens no stop string may end; then none within their text)
    if (o->n_pushed <= o->min_tokens) o->stop_floor = o->n_pushed < o->min_tokens ? SIZE_MAX : o->n_decoded;
    if (o->held.n == 0) return 0;
    return scan(o, out);
}

void text_output_skip(struct text_output *o) {
    if (o->stopped) return;
    o->n_pushed++;
    if (o->n_pushed <= o->min_tokens) o->stop_floor = o->n_pushed < o->min_tokens ? SIZE_MAX : o->n_decoded;
}

int text_output_finish(struct text_output *o, struct text_buf *out) {
    if (o->stopped) return 0;
    char tail[16];
    size_t k = detok_flush(&o->d, tail, sizeof tail);
    o->n_decoded += k;
    o->n_chars += count_chars(tail, k);
    if (text_buf_append(&o->held, tail, k) < 0) return -1;
    if (o->held.n == 0) return 0;
    // a stop string can still complete within the flushed bytes
    int rc = scan(o, out);
    if (rc != 0) return rc < 0 ? -1 : 0;
    return release(o, o->held.n, out);
}

// Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one.
static int utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if ((size_t)len > n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

int utf8_sanitize(const char *s, size_t n, struct text_buf *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        int k = utf8_seq(u + i, n - i);
        if (k) { if (text_buf_append(out, s + i, (size_t)k) < 0) return -1; i += (size_t)k; }
        else { if (text_buf_append(out, "\xEF\xBF\xBD", 3) < 0) return -1; i++; }
    }
    if (!out->p) return text_buf_append(out, "", 0);
    return 0;
}
