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

// A state's canonical bytes: every field the mask depends on (not the spec, the request's own), the object
// bits above the depth cleared so that states equal in meaning are equal in bytes.
static void state_key(const struct reply_state *s, uint8_t k[REPLY_KEY_BYTES]) {
    const struct jp *j = &s->json;
    memset(k, 0, REPLY_KEY_BYTES);
    uint8_t *p = k;
    *p++ = s->phase, *p++ = s->part, *p++ = s->whole;
    memcpy(p, &s->off, 2), p += 2;
    memcpy(p, &s->cand, 8), p += 8;
    *p++ = j->st, *p++ = j->sub, *p++ = j->lit, *p++ = j->lo, *p++ = j->hi, *p++ = j->key, *p++ = j->object_only;
    *p++ = j->low;
    memcpy(p, &j->ws, 2), p += 2;
    memcpy(p, &j->code, 2), p += 2;
    memcpy(p, &j->depth, 2), p += 2;
    for (int w = 0; w < JP_MAX_DEPTH / 64; w++) {  // (27 bytes so far, then 32 of object bits: 59 of the 72)
        const int below = j->depth - 64 * w;
        const uint64_t bits = below <= 0 ? 0 : below >= 64 ? j->obj[w] : j->obj[w] & ((1ull << below) - 1);
        memcpy(p, &bits, 8), p += 8;
    }
}

void reply_cache_free(struct reply_cache *c) {
    for (int i = 0; i < REPLY_CACHE_SLOTS; i++) free(c->bits[i]);
    memset(c, 0, sizeof *c);
}

int reply_mask_cached(const struct reply_vocab *v, struct reply_cache *c, const struct reply_state *st,
                      const int32_t *stop_ids, int n_stop, const float *logits, float *out, int n) {
    if (st->phase == REPLY_PHASE_THINK) return reply_mask(v, st, stop_ids, n_stop, logits, out, n);  // (all)
    uint8_t key[REPLY_KEY_BYTES];
    state_key(st, key);
    int s = 0;
    while (s < c->used && memcmp(c->key[s], key, REPLY_KEY_BYTES)) s++;
    if (s == c->used) {  // a state not met yet: its mask, kept in a free slot or in place of the oldest
        c->misses++;
        s = c->used < REPLY_CACHE_SLOTS ? c->used : c->next++ % REPLY_CACHE_SLOTS;
        const size_t words = ((size_t)n + 63) / 64;
        if (!c->bits[s] && !(c->bits[s] = malloc(sizeof(uint64_t) * words))) return -1;
        if (s == c->used) c->used++;
        memcpy(c->key[s], key, REPLY_KEY_BYTES);
        memset(c->bits[s], 0, sizeof(uint64_t) * words);
        struct step k;
        step_init(&k, st);
        c->kept[s] = 0;
        for (int i = 0; i < n && i < v->n_vocab; i++)
            if (allowed(v, &k, i, stop_ids, n_stop)) c->bits[s][i / 64] |= 1ull << (i % 64), c->kept[s]++;
    } else {
        c->hits++;
    }
    const uint64_t *b = c->bits[s];
    for (int i = 0; i < n; i++) out[i] = b[i / 64] >> (i % 64) & 1 ? logits[i] : -INFINITY;
    return c->kept[s];
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
