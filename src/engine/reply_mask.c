// reply_mask.c — the tokens that keep a constrained reply a beginning its grammar allows (see the header).
#include "reply_mask.h"

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

int reply_vocab_build(struct reply_vocab *v, const struct tokenizer *t) {
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
        v->cls[i] = tokenizer_is_eog(t, i) ? REPLY_TOK_EOG : !k ? REPLY_TOK_NONE
                    : plain((const unsigned char *)v->bytes + used, k) ? REPLY_TOK_PLAIN : REPLY_TOK_TEXT;
        used += k;
    }
    v->off[n] = (uint32_t)used;
    v->n_vocab = n;
    return 0;
oom:
    reply_vocab_free(v);
    return err_set(OCT_ENOMEM, "out of memory (the constrained replies' vocabulary)");
}

void reply_vocab_free(struct reply_vocab *v) {
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
    const struct reply_state *st;
    bool whole, text;
    bool first[256];
};

static void step_init(struct step *k, const struct reply_state *st) {
    k->st = st;
    k->whole = reply_whole(st);
    k->text = reply_in_text(st);
    for (int c = 0; c < 256; c++) {
        struct reply_state s = *st;
        const char b = (char)c;
        k->first[c] = reply_feed(&s, &b, 1) == 0;
    }
}

// Whether token i may follow the step's state (an end only where it is whole; anything inside a reasoning
// block; the block's opening, or the grammar's beginning, first).
static bool allowed(const struct reply_vocab *v, const struct step *k, int i, const int32_t *stop_ids, int n_stop) {
    if (k->st->phase == REPLY_PHASE_THINK) return true;
    if (k->st->phase == REPLY_PHASE_FIRST && i == k->st->spec->think_open) return true;
    if (v->cls[i] == REPLY_TOK_EOG || is_stop(i, stop_ids, n_stop)) return k->whole;
    if (v->cls[i] == REPLY_TOK_NONE) return false;
    if (v->cls[i] == REPLY_TOK_PLAIN && k->text) return true;
    const unsigned char *p = (const unsigned char *)v->bytes + v->off[i];
    if (!k->first[p[0]]) return false;
    struct reply_state s = *k->st;
    return reply_feed(&s, (const char *)p, v->off[i + 1] - v->off[i]) == 0;
}

int reply_mask(const struct reply_vocab *v, const struct reply_state *st, const int32_t *stop_ids, int n_stop,
               const float *logits, float *out, int n) {
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

int reply_advance(const struct reply_vocab *v, struct reply_state *st, const int32_t *stop_ids, int n_stop,
                  int32_t id) {
    struct step k;
    if (id >= 0 && id < v->n_vocab) step_init(&k, st);
    if (id < 0 || id >= v->n_vocab || !allowed(v, &k, id, stop_ids, n_stop))
        return err_set(OCT_EINVAL, "token %d does not continue the constrained reply", id);
    if (st->phase == REPLY_PHASE_THINK) {  // (the block's text is free; its close starts the grammar)
        if (id == st->spec->think_close) st->phase = REPLY_PHASE_GRAMMAR;
        return 0;
    }
    if (st->phase == REPLY_PHASE_FIRST) {
        st->phase = id == st->spec->think_open ? REPLY_PHASE_THINK : REPLY_PHASE_GRAMMAR;
        if (st->phase == REPLY_PHASE_THINK) return 0;
    }
    if (v->cls[id] == REPLY_TOK_EOG || is_stop(id, stop_ids, n_stop)) return 0;
    return reply_feed(st, v->bytes + v->off[id], v->off[id + 1] - v->off[id]);
}
