// json_mask.c — the tokens that keep a reply a JSON object's beginning (see the header).
#include "json_mask.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"

// Whether p[0..n) is whole UTF-8 characters with no '"', '\' or control character (a string's text as is).
static bool plain(const unsigned char *p, size_t n) {
    struct jp s;
    jp_init(&s, false);
    const char q = '"';
    if (jp_feed(&s, &q, 1) < 0) return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] == '"' || p[i] == '\\' || jp_feed(&s, (const char *)p + i, 1) < 0) return false;
    return jp_in_text(&s);
}

int json_vocab_build(struct json_vocab *v, const struct tokenizer *t) {
    memset(v, 0, sizeof *v);
    const int n = tokenizer_n_vocab(t);
    size_t cap = 1 << 16, used = 0;
    v->off = malloc(sizeof *v->off * ((size_t)n + 1));
    v->cls = malloc((size_t)n);
    v->bytes = malloc(cap);
    if (!v->off || !v->cls || !v->bytes) goto oom;
    for (int i = 0; i < n; i++) {
        char buf[256];
        size_t k = tokenizer_piece(t, i, false, buf, sizeof buf);
        if (used + k > cap) {
            while (used + k > cap) cap *= 2;
            char *b = realloc(v->bytes, cap);
            if (!b) goto oom;
            v->bytes = b;
        }
        if (k > sizeof buf) tokenizer_piece(t, i, false, v->bytes + used, k);
        else memcpy(v->bytes + used, buf, k);
        v->off[i] = (uint32_t)used;
        v->cls[i] = tokenizer_is_eog(t, i) ? JSON_TOK_EOG : !k ? JSON_TOK_NONE
                    : plain((const unsigned char *)v->bytes + used, k) ? JSON_TOK_PLAIN : JSON_TOK_TEXT;
        used += k;
    }
    v->off[n] = (uint32_t)used;
    v->n_vocab = n;
    return 0;
oom:
    json_vocab_free(v);
    return err_set(OCT_ENOMEM, "out of memory (JSON mode's vocabulary)");
}

void json_vocab_free(struct json_vocab *v) {
    free(v->off);
    free(v->bytes);
    free(v->cls);
    memset(v, 0, sizeof *v);
}

static bool is_stop(int32_t id, const int32_t *stop_ids, int n_stop) {
    for (int i = 0; i < n_stop; i++)
        if (stop_ids[i] == id) return true;
    return false;
}

// What a step's tokens are checked against: st, whether it is whole or inside a string's text, and which
// first bytes it takes (most tokens fail at their first byte outside strings: a table look-up, not a copy).
struct step {
    const struct jp *st;
    bool whole, text;
    bool first[256];
};

static void step_init(struct step *k, const struct jp *st) {
    k->st = st;
    k->whole = jp_complete(st);
    k->text = jp_in_text(st);
    for (int c = 0; c < 256; c++) {
        struct jp s = *st;
        const char b = (char)c;
        k->first[c] = jp_feed(&s, &b, 1) == 0;
    }
}

// Whether token i may follow the step's state (whole: only an end).
static bool allowed(const struct json_vocab *v, const struct step *k, int i, const int32_t *stop_ids, int n_stop) {
    if (v->cls[i] == JSON_TOK_EOG || is_stop(i, stop_ids, n_stop)) return k->whole;
    if (k->whole || v->cls[i] == JSON_TOK_NONE) return false;
    if (v->cls[i] == JSON_TOK_PLAIN && k->text) return true;
    const unsigned char *p = (const unsigned char *)v->bytes + v->off[i];
    if (!k->first[p[0]]) return false;
    struct jp s = *k->st;
    return jp_feed(&s, (const char *)p, v->off[i + 1] - v->off[i]) == 0;
}

int json_mask(const struct json_vocab *v, const struct jp *st, const int32_t *stop_ids, int n_stop, const float *logits,
              float *out, int n) {
    struct step k;
    step_init(&k, st);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        const bool ok = i < v->n_vocab && allowed(v, &k, i, stop_ids, n_stop);
        out[i] = ok ? logits[i] : -INFINITY;
        kept += ok;
    }
    return kept;
}

int json_advance(const struct json_vocab *v, struct jp *st, const int32_t *stop_ids, int n_stop, int32_t id) {
    struct step k;
    if (id >= 0 && id < v->n_vocab) step_init(&k, st);
    if (id < 0 || id >= v->n_vocab || !allowed(v, &k, id, stop_ids, n_stop))
        return err_set(OCT_EINVAL, "token %d does not continue the JSON reply", id);
    if (v->cls[id] == JSON_TOK_EOG || is_stop(id, stop_ids, n_stop)) return 0;
    return jp_feed(st, v->bytes + v->off[id], v->off[id + 1] - v->off[id]);
}
