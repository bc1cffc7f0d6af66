// tokenizer.c — the algorithm-neutral half of the tokenizer (owns: building and validating
// struct tokenizer from a tok_spec, the GGUF loader, the byte stand-in, special-token
// partitioning, encode dispatch, pieces, whole-sequence decode and the incremental
// UTF-8-safe detokenizer). Not here: the SPM merge loop (tok_spm.c), byte-level BPE and
// the tokenizer.json loader (tok_bpe.c).
// Invariant: after tok_build succeeds every stored id is in [0, n_vocab).
#include "tokenizer_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "gguf.h"

int tok_vec_push(struct tok_vec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p) return err_set(OCT_ENOMEM, "tokenizer: out of memory (%zu ids)", cap);
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return 0;
}

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

int tok_find(const struct tokenizer *t, const char *s, size_t len) {
    if (!t->by_text.slots) return -1;
    for (size_t i = hash_bytes(s, len) & t->by_text.mask;; i = (i + 1) & t->by_text.mask) {
        uint32_t v = t->by_text.slots[i];
        if (!v) return -1;
        int id = (int)v - 1;
        if (t->len[id] == len && memcmp(tok_text(t, id), s, len) == 0) return id;
    }
}

static int build_text_map(struct tokenizer *t) {
    size_t cap = 16;
    while (cap < (size_t)t->n_vocab * 2) cap *= 2;
    t->by_text.slots = calloc(cap, sizeof *t->by_text.slots);
    if (!t->by_text.slots) return err_set(OCT_ENOMEM, "tokenizer: out of memory (text map)");
    t->by_text.mask = cap - 1;
    for (int id = 0; id < t->n_vocab; id++) {
        if (t->len[id] == 0 || t->type[id] == TOK_TYPE_UNUSED) continue;
        if (tok_find(t, tok_text(t, id), t->len[id]) >= 0) continue;  // first id wins
        size_t i = hash_bytes(tok_text(t, id), t->len[id]) & t->by_text.mask;
        while (t->by_text.slots[i]) i = (i + 1) & t->by_text.mask;
        t->by_text.slots[i] = (uint32_t)id + 1;
    }
    return 0;
}

static int parse_byte_token(const char *s, uint32_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

struct special_key { unsigned char first; uint32_t len; int32_t id; };

static int cmp_special(const void *a, const void *b) {
    const struct special_key *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;  // longest first
    return x->id < y->id ? -1 : x->id > y->id;
}

static bool is_special_type(int ty) {
    return ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNKNOWN;
}

static int build_specials(struct tokenizer *t) {
    int n = 0;
    for (int id = 0; id < t->n_vocab; id++) n += t->len[id] && is_special_type(t->type[id]);
    struct special_key *keys = malloc(((size_t)n + 1) * sizeof *keys);
    t->special = malloc(((size_t)n + 1) * sizeof *t->special);
    if (!keys || !t->special) { free(keys); return err_set(OCT_ENOMEM, "tokenizer: out of memory (specials)"); }
    n = 0;
    for (int id = 0; id < t->n_vocab; id++)
        if (t->len[id] && is_special_type(t->type[id]))
            keys[n++] = (struct special_key){ (unsigned char)tok_text(t, id)[0], t->len[id], id };
    qsort(keys, (size_t)n, sizeof *keys, cmp_special);
    for (int i = 0; i < n; i++) t->special[i] = keys[i].id;
    t->n_special = n;
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < n && keys[k].first < b) k++;
        t->special_idx[b] = k;
    }
    free(keys);
    return 0;
}

static bool is_eog_text(const char *s, uint32_t len) {
    static const char *names[] = { "<|eot_id|>", "<|end_of_text|>", "<|im_end|>", "<end_of_turn>",
        "<|endoftext|>", "<|eom_id|>", "<|end|>", "<EOT>", "<|END_OF_TURN_TOKEN|>", "<|return|>" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return true;
    return false;
}

static int check_id(const struct tok_spec *s, const char *what, int id) {
    if (id < -1 || id >= s->n_vocab)
        return err_set(OCT_EINVAL, "%s: %s %d out of range [0, %d)", s->src, what, id, s->n_vocab);
    return 0;
}

int tok_build(struct tokenizer **out, const struct tok_spec *s) {
    *out = NULL;
    if (s->n_vocab <= 0 || s->n_vocab > (1 << 26))
        return err_set(OCT_EINVAL, "%s: vocabulary size %d out of range", s->src, s->n_vocab);
    TRY(check_id(s, "bos token id", s->bos));
    TRY(check_id(s, "eos token id", s->eos));
    TRY(check_id(s, "unknown token id", s->unk));
    TRY(check_id(s, "eot token id", s->eot));
    TRY(check_id(s, "eom token id", s->eom));
    struct tokenizer *t = calloc(1, sizeof *t);
    if (!t) return err_set(OCT_ENOMEM, "%s: out of memory", s->src);
    size_t n = (size_t)s->n_vocab, arena_bytes = 0;
    for (size_t i = 0; i < n; i++) arena_bytes += (s->text[i] ? s->text_len[i] : 0) + 1;
    t->kind = s->kind;
    t->n_vocab = s->n_vocab;
    t->arena = malloc(arena_bytes);
    t->off = malloc(n * sizeof *t->off);
    t->len = malloc(n * sizeof *t->len);
    t->scores = malloc(n * sizeof *t->scores);
    t->type = malloc(n);
    t->byte_val = calloc(n, 1);
    t->eog = calloc(n, 1);
    int rc = 0;
    if (!t->arena || !t->off || !t->len || !t->scores || !t->type || !t->byte_val || !t->eog) {
        rc = err_set(OCT_ENOMEM, "%s: out of memory (%d tokens)", s->src, s->n_vocab);
        goto fail;
    }
    if (arena_bytes > UINT32_MAX) { rc = err_set(OCT_EINVAL, "%s: token texts too large", s->src); goto fail; }
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t l = s->text[i] ? s->text_len[i] : 0;
        if (l) memcpy(t->arena + pos, s->text[i], l);
        t->arena[pos + l] = 0;
        t->off[i] = (uint32_t)pos;
        t->len[i] = l;
        pos += l + 1;
        t->scores[i] = s->scores ? s->scores[i] : 0.0f;
        int ty = s->types ? s->types[i] : TOK_TYPE_NORMAL;
        if (!s->text[i]) ty = TOK_TYPE_UNUSED;
        if (ty < 0 || ty >= TOK_TYPE_COUNT) {
            rc = err_set(OCT_EINVAL, "%s: token_type[%zu] = %d is not a known token type (0..6)",
                         s->src, i, ty);
            goto fail;
        }
        t->type[i] = (uint8_t)ty;
        if (ty == TOK_TYPE_BYTE) {
            int b = parse_byte_token(tok_text(t, (int)i), l);
            if (b < 0) {
                rc = err_set(OCT_EINVAL, "%s: token %zu '%s' has type BYTE but is not of the form <0xNN>",
                             s->src, i, tok_text(t, (int)i));
                goto fail;
            }
            t->byte_val[i] = (uint8_t)b;
            if (s->kind != TOK_KIND_BPE && t->byte_id[b] < 0) t->byte_id[b] = (int)i;
        }
        if (is_eog_text(tok_text(t, (int)i), l)) t->eog[i] = 1;
    }
    t->bos = s->bos;
    t->eos = s->eos;
    t->unk = s->unk;
    if (s->eos >= 0) t->eog[s->eos] = 1;
    if (s->eot >= 0) t->eog[s->eot] = 1;
    if (s->eom >= 0) t->eog[s->eom] = 1;
    t->add_bos = s->add_bos;
    t->add_space_prefix = s->add_space_prefix && s->kind == TOK_KIND_SPM;
    t->ignore_merges = s->ignore_merges;
    if (s->chat_template && !(t->chat_template = strdup(s->chat_template))) {
        rc = err_set(OCT_ENOMEM, "%s: out of memory", s->src);
        goto fail;
    }
    if ((rc = build_text_map(t)) < 0 || (rc = build_specials(t)) < 0) goto fail;
    if (s->kind == TOK_KIND_BPE && (rc = tok_bpe_init(t, s)) < 0) goto fail;
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return rc;
}

void tokenizer_free(struct tokenizer *t) {
    if (!t) return;
    tok_bpe_free(t);
    free(t->arena); free(t->off); free(t->len); free(t->scores); free(t->type);
    free(t->byte_val); free(t->eog); free(t->by_text.slots); free(t->special);
    free(t->chat_template);
    free(t);
}

int tokenizer_n_vocab(const struct tokenizer *t) { return t->n_vocab; }
int tokenizer_bos(const struct tokenizer *t) { return t->bos; }
int tokenizer_eos(const struct tokenizer *t) { return t->eos; }
bool tokenizer_add_bos(const struct tokenizer *t) { return t->add_bos; }
bool tokenizer_add_space_prefix(const struct tokenizer *t) { return t->add_space_prefix; }
const char *tokenizer_chat_template(const struct tokenizer *t) { return t->chat_template; }
bool tokenizer_is_eog(const struct tokenizer *t, int id) {
    return id >= 0 && id < t->n_vocab && t->eog[id];
}
int tokenizer_token_id(const struct tokenizer *t, const char *text, size_t len) {
    return text ? tok_find(t, text, len) : -1;
}

// ---- byte stand-in ----

int tokenizer_bytes(struct tokenizer **out, int n_vocab) {
    *out = NULL;
    if (n_vocab < 258)
        return err_set(OCT_EINVAL, "tokenizer_bytes: n_vocab %d < 258 (256 bytes + BOS + EOS)", n_vocab);
    const char **text = calloc((size_t)n_vocab, sizeof *text);
    uint32_t *len = calloc((size_t)n_vocab, sizeof *len);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    char *names = malloc(256 * 7);
    int rc;
    if (!text || !len || !types || !names) {
        rc = err_set(OCT_ENOMEM, "tokenizer_bytes: out of memory");
        goto done;
    }
    for (int b = 0; b < 256; b++) {
        snprintf(names + b * 7, 7, "<0x%02X>", b);
        text[b] = names + b * 7;
        len[b] = 6;
        types[b] = TOK_TYPE_BYTE;
    }
    text[256] = "<s>"; len[256] = 3; types[256] = TOK_TYPE_CONTROL;
    text[257] = "</s>"; len[257] = 4; types[257] = TOK_TYPE_CONTROL;
    struct tok_spec s = { .kind = TOK_KIND_BYTES, .src = "tokenizer_bytes", .n_vocab = n_vocab,
        .text = text, .text_len = len, .types = types, .bos = 256, .eos = 257, .unk = -1,
        .eot = -1, .eom = -1, .add_bos = true };
    rc = tok_build(out, &s);
done:
    free(text); free(len); free(types); free(names);
    return rc;
}

// ---- encoding ----

static int encode_fragment(const struct tokenizer *t, const char *s, size_t n, bool *prev_special,
                           struct tok_vec *v) {
    if (n == 0) return 0;
    int rc = t->kind == TOK_KIND_SPM ? tok_spm_encode(t, s, n, t->add_space_prefix && *prev_special, v)
                                     : tok_bpe_encode(t, s, n, v);
    *prev_special = false;
    return rc;
}

// tokenizer_encode's work; with literal ranges, tokenizer_encode_literal's.
static int encode(const struct tokenizer *t, const char *text, size_t len, bool add_bos, bool parse_special,
                  const size_t *literal, int n_literal, int32_t **ids, int *n_ids) {
    if (!t || !ids || !n_ids || (!text && len))
        return err_set(OCT_EINVAL, "tokenizer_encode: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    if (len > (size_t)INT_MAX / 2) return err_set(OCT_EINVAL, "tokenizer_encode: text of %zu bytes too long", len);
    struct tok_vec v = {0};
    int rc = 0;
    if (add_bos && t->bos >= 0) rc = tok_vec_push(&v, t->bos);
    if (t->kind == TOK_KIND_BYTES) {
        for (size_t i = 0; i < len && rc == 0; i++) rc = tok_vec_push(&v, (unsigned char)text[i]);
    } else {
        // Split out special/added tokens (leftmost, longest first), llama.cpp-style: CONTROL and
        // UNKNOWN tokens only with parse_special, USER_DEFINED (added, non-special) always.
        bool prev_special = true;
        size_t frag = 0, i = 0;
        int lit = 0;  // the first literal range not wholly before i
        while (i < len && rc == 0) {
            unsigned char c = (unsigned char)text[i];
            int match = -1;
            while (lit < n_literal && literal[2 * lit + 1] <= i) lit++;
            bool in_lit = lit < n_literal && literal[2 * lit] <= i;
            size_t room = lit < n_literal && !in_lit ? literal[2 * lit] - i : len - i;  // (up to the next range)
            for (int k = t->special_idx[c]; k < t->special_idx[c + 1]; k++) {
                int id = t->special[k];
                bool special_here = parse_special && !in_lit && t->len[id] <= room;
                if (!special_here && t->type[id] != TOK_TYPE_USER_DEFINED) continue;
                if (t->len[id] <= len - i && memcmp(text + i, tok_text(t, id), t->len[id]) == 0) {
                    match = id;
                    break;
                }
            }
            if (match < 0) { i++; continue; }
            rc = encode_fragment(t, text + frag, i - frag, &prev_special, &v);
            if (rc == 0) rc = tok_vec_push(&v, match);
            prev_special = true;
            i += t->len[match];
            frag = i;
        }
        if (rc == 0) rc = encode_fragment(t, text + frag, len - frag, &prev_special, &v);
    }
    if (rc < 0) { free(v.v); return rc; }
    if (v.n > INT_MAX) { free(v.v); return err_set(OCT_EINVAL, "tokenizer_encode: too many tokens"); }
    *ids = v.v ? v.v : malloc(sizeof(int32_t));
    if (!*ids) return err_set(OCT_ENOMEM, "tokenizer_encode: out of memory");
    *n_ids = (int)v.n;
    return 0;
}

int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, bool add_bos,
                     bool parse_special, int32_t **ids, int *n_ids) {
    return encode(t, text, len, add_bos, parse_special, NULL, 0, ids, n_ids);
}

int tokenizer_encode_literal(const struct tokenizer *t, const char *text, size_t len, bool add_bos,
                             const size_t *literal, int n_literal, int32_t **ids, int *n_ids) {
    for (int k = 0; k < n_literal; k++)
        if (literal[2 * k] > literal[2 * k + 1] || literal[2 * k + 1] > len ||
            (k && literal[2 * k] < literal[2 * k - 1]))
            return err_set(OCT_EINVAL, "tokenizer_encode_literal: range %d is out of order", k);
    return encode(t, text, len, add_bos, true, literal, n_literal, ids, n_ids);
}

// ---- pieces ----

static void put(char *buf, size_t cap, size_t *n, const char *src, size_t k) {
    if (k && *n < cap) memcpy(buf + *n, src, k <= cap - *n ? k : cap - *n);
    *n += k;
}

size_t tokenizer_piece(const struct tokenizer *t, int id, bool render_special, char *buf, size_t cap) {
    if (!t || id < 0 || id >= t->n_vocab) return 0;
    if (!buf) cap = 0;
    size_t n = 0;
    const char *s = tok_text(t, id);
    uint32_t len = t->len[id];
    switch (t->type[id]) {
    case TOK_TYPE_BYTE:
        put(buf, cap, &n, (const char *)&t->byte_val[id], 1);
        return n;
    case TOK_TYPE_UNUSED:
        return 0;
    case TOK_TYPE_CONTROL:
        if (render_special) put(buf, cap, &n, s, len);
        return n;
    case TOK_TYPE_UNKNOWN:
        if (t->kind == TOK_KIND_SPM) put(buf, cap, &n, "\xe2\x96\x85", 3);  // ▅, as llama.cpp
        else if (render_special) put(buf, cap, &n, s, len);
        return n;
    case TOK_TYPE_USER_DEFINED:
        if (t->kind != TOK_KIND_SPM) { put(buf, cap, &n, s, len); return n; }
        break;
    default:
        break;
    }
    if (t->kind == TOK_KIND_SPM) {  // ▁ (e2 96 81) → ' '
        for (uint32_t i = 0; i < len;) {
            if (i + 2 < len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) { put(buf, cap, &n, " ", 1); i += 3; }
            else put(buf, cap, &n, s + i++, 1);
        }
    } else if (t->kind == TOK_KIND_BPE) {  // undo GPT-2's byte → code point map
        for (uint32_t i = 0; i < len;) {
            unsigned char c = (unsigned char)s[i];
            uint32_t cp = c, k = 1;
            if (c >= 0xC0 && c < 0xE0 && i + 1 < len) { cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu); k = 2; }
            int b = k == 2 || c < 0x80 ? tok_bpe_unmap_cp(cp) : -1;
            if (b >= 0) { char ch = (char)b; put(buf, cap, &n, &ch, 1); i += k; }
            else {  // not a mapped code point: copy the whole UTF-8 sequence as is
                size_t l = tok_utf8_len(c);
                if (l > len - i) l = len - i;
                put(buf, cap, &n, s + i, l);
                i += (uint32_t)l;
            }
        }
    } else {
        put(buf, cap, &n, s, len);
    }
    return n;
}

// The piece of `id` in *tmp (grown as needed); returns its length or (size_t)-1 on OOM.
static size_t piece_alloc(const struct tokenizer *t, int id, bool rs, char **tmp, size_t *tmp_cap) {
    size_t n = tokenizer_piece(t, id, rs, *tmp, *tmp_cap);
    if (n > *tmp_cap) {
        char *p = realloc(*tmp, n);
        if (!p) return (size_t)-1;
        *tmp = p;
        *tmp_cap = n;
        tokenizer_piece(t, id, rs, *tmp, *tmp_cap);
    }
    return n;
}

size_t tokenizer_decode(const struct tokenizer *t, const int32_t *ids, int n_ids, bool render_special,
                        char *buf, size_t cap) {
    if (!t || (!ids && n_ids > 0)) return 0;
    if (!buf) cap = 0;
    char *tmp = NULL;
    size_t tmp_cap = 0, n = 0;
    bool strip = t->add_space_prefix;
    for (int i = 0; i < n_ids; i++) {
        size_t k = piece_alloc(t, ids[i], render_special, &tmp, &tmp_cap);
        if (k == (size_t)-1) break;
        const char *p = tmp;
        if (strip && k > 0) {
            strip = false;
            if (p[0] == ' ') { p++; k--; }
        }
        put(buf, cap, &n, p, k);
    }
    free(tmp);
    return n;
}

// ---- incremental detokenizer ----

static size_t emit(char *out, size_t cap, size_t *w, const char *s, size_t k) {
    if (*w + k > cap) return 0;  // never split a character: drop what does not fit
    memcpy(out + *w, s, k);
    *w += k;
    return k;
}

size_t detok_push(const struct tokenizer *t, struct detok *d, int id, char *out, size_t cap) {
    if (!t || !d) return 0;
    if (!out) cap = 0;
    if (d->n_pending < 0 || d->n_pending > 3) d->n_pending = 0;
    char stack[256], *data = stack, *piece = stack + 4;
    size_t piece_cap = sizeof stack - 4;
    size_t np = (size_t)d->n_pending;
    memcpy(stack, d->pending, np);
    size_t k = tokenizer_piece(t, id, false, piece, piece_cap);
    if (k > piece_cap) {
        if (!(data = malloc(k + 4))) return 0;
        memcpy(data, d->pending, np);
        tokenizer_piece(t, id, false, data + np, k);
    } else {
        memmove(stack + np, piece, k);
    }
    size_t total = np + k, i = 0, w = 0;
    d->n_pending = 0;
    while (i < total) {
        unsigned char c = (unsigned char)data[i];
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c < 0x80) { emit(out, cap, &w, data + i, 1); i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) need = 2;
        else if (c >= 0xE0 && c <= 0xEF) { need = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else { emit(out, cap, &w, "\xef\xbf\xbd", 3); i++; continue; }
        size_t j = 1;
        bool ok = true, incomplete = false;
        for (; j < need; j++) {
            if (i + j >= total) { incomplete = true; break; }
            unsigned char b = (unsigned char)data[i + j];
            if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF)) { ok = false; break; }
        }
        if (incomplete) {  // a valid prefix that may still complete: keep it
            memcpy(d->pending, data + i, total - i);
            d->n_pending = (int)(total - i);
            break;
        }
        if (ok) { emit(out, cap, &w, data + i, need); i += need; }
        else { emit(out, cap, &w, "\xef\xbf\xbd", 3); i += j; }
    }
    if (data != stack) free(data);
    return w;
}

size_t detok_flush(struct detok *d, char *out, size_t cap) {
    if (!d) return 0;
    size_t w = 0;
    if (d->n_pending > 0 && out) emit(out, cap, &w, "\xef\xbf\xbd", 3);
    d->n_pending = 0;
    return w;
}

// ---- GGUF ----

static int gguf_id(const struct gguf *g, const char *key, int *out) {
    int64_t v;
    *out = -1;
    if (!gguf_has_key(g, key)) return 0;
    if (gguf_get_int(g, key, &v) < 0)
        return err_set(OCT_EINVAL, "%s: %s is not an integer", gguf_path(g), key);
    *out = v < -1 ? INT_MIN / 2 : v > INT_MAX / 2 ? INT_MAX / 2 : (int)v;
    if (*out < -1) return err_set(OCT_EINVAL, "%s: %s = %lld is negative", gguf_path(g), key, (long long)v);
    return 0;
}

static int gguf_flag(const struct gguf *g, const char *key, bool *out) {
    if (!gguf_has_key(g, key)) return 0;
    if (gguf_get_bool(g, key, out) < 0) return err_set(OCT_EINVAL, "%s: %s is not a bool", gguf_path(g), key);
    return 0;
}

static bool str_eq(const char *s, size_t len, const char *lit) {
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

int tokenizer_from_gguf(struct tokenizer **out, const struct gguf *g) {
    if (!out || !g) return err_set(OCT_EINVAL, "tokenizer_from_gguf: NULL argument");
    *out = NULL;
    const char *path = gguf_path(g), *model, *pre = NULL, *tmpl = NULL;
    size_t model_len, pre_len = 0, tmpl_len = 0, n = 0, n_merges = 0;
    enum gguf_type et;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len) < 0)
        return err_set(OCT_EINVAL, "%s: tokenizer.ggml.model missing or not a string", path);
    struct tok_spec s = { .src = path, .bos = -1, .eos = -1, .unk = -1, .eot = -1, .eom = -1 };
    if (str_eq(model, model_len, "llama")) s.kind = TOK_KIND_SPM;
    else if (str_eq(model, model_len, "gpt2")) s.kind = TOK_KIND_BPE;
    else return err_set(OCT_EUNSUP, "%s: tokenizer.ggml.model '%.*s' is not supported (llama, gpt2)",
                        path, (int)model_len, model);
    if (gguf_get_arr_info(g, "tokenizer.ggml.tokens", &et, &n) < 0 || et != GGUF_STRING || n == 0)
        return err_set(OCT_EINVAL, "%s: tokenizer.ggml.tokens missing, empty or not a string array", path);
    if (n > (1 << 26)) return err_set(OCT_EINVAL, "%s: tokenizer.ggml.tokens has %zu entries", path, n);
    s.n_vocab = (int)n;
    if (gguf_has_key(g, "tokenizer.ggml.pre") && gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len) < 0)
        return err_set(OCT_EINVAL, "%s: tokenizer.ggml.pre is not a string", path);
    if (gguf_has_key(g, "tokenizer.chat_template") &&
        gguf_get_str(g, "tokenizer.chat_template", &tmpl, &tmpl_len) < 0)
        return err_set(OCT_EINVAL, "%s: tokenizer.chat_template is not a string", path);
    s.add_bos = s.kind == TOK_KIND_SPM;
    s.add_space_prefix = s.kind == TOK_KIND_SPM;
    if (s.kind == TOK_KIND_BPE) {
        char pre_z[64] = "";
        if (pre && pre_len < sizeof pre_z) { memcpy(pre_z, pre, pre_len); pre_z[pre_len] = 0; }
        else if (pre) return err_set(OCT_EUNSUP, "%s: tokenizer.ggml.pre too long", path);
        TRY(tok_bpe_pre_preset(&s, pre ? pre_z : NULL));
        if (gguf_get_arr_info(g, "tokenizer.ggml.merges", &et, &n_merges) < 0 || et != GGUF_STRING)
            return err_set(OCT_EINVAL, "%s: tokenizer.ggml.merges missing or not a string array", path);
        if (n_merges > (1 << 26)) return err_set(OCT_EINVAL, "%s: too many merges (%zu)", path, n_merges);
    }
    TRY(gguf_id(g, "tokenizer.ggml.bos_token_id", &s.bos));
    TRY(gguf_id(g, "tokenizer.ggml.eos_token_id", &s.eos));
    TRY(gguf_id(g, "tokenizer.ggml.unknown_token_id", &s.unk));
    TRY(gguf_id(g, "tokenizer.ggml.eot_token_id", &s.eot));
    TRY(gguf_id(g, "tokenizer.ggml.eom_token_id", &s.eom));
    TRY(gguf_flag(g, "tokenizer.ggml.add_bos_token", &s.add_bos));
    TRY(gguf_flag(g, "tokenizer.ggml.add_space_prefix", &s.add_space_prefix));

    int rc = 0;
    const char **text = calloc(n, sizeof *text), **ml = NULL, **mr = NULL;
    uint32_t *text_len = calloc(n, sizeof *text_len), *mll = NULL, *mrl = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    char *tmpl_z = NULL;
    if (n_merges) {
        ml = calloc(n_merges, sizeof *ml); mr = calloc(n_merges, sizeof *mr);
        mll = calloc(n_merges, sizeof *mll); mrl = calloc(n_merges, sizeof *mrl);
    }
    if (!text || !text_len || (n_merges && (!ml || !mr || !mll || !mrl))) {
        rc = err_set(OCT_ENOMEM, "%s: out of memory (tokenizer)", path);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        size_t l;
        if (gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &text[i], &l) < 0 || l > UINT32_MAX / 2) {
            rc = err_set(OCT_EINVAL, "%s: tokenizer.ggml.tokens[%zu] unreadable", path, i);
            goto done;
        }
        text_len[i] = (uint32_t)l;
    }
    if (gguf_has_key(g, "tokenizer.ggml.scores")) {
        size_t ns;
        const void *p;
        if (gguf_get_arr_info(g, "tokenizer.ggml.scores", &et, &ns) < 0 || et != GGUF_F32) {
            rc = err_set(OCT_EINVAL, "%s: tokenizer.ggml.scores is not an f32 array", path);
            goto done;
        }
        if (ns != n) {
            rc = err_set(OCT_EINVAL, "%s: tokenizer.ggml.scores has %zu entries but tokenizer.ggml.tokens has %zu",
                         path, ns, n);
            goto done;
        }
        if (!(scores = malloc(n * sizeof *scores))) { rc = err_set(OCT_ENOMEM, "%s: out of memory", path); goto done; }
        if (gguf_get_arr_data(g, "tokenizer.ggml.scores", &p) < 0) {
            rc = err_wrap(OCT_EINVAL, "%s: ", path);
            goto done;
        }
        memcpy(scores, p, n * sizeof *scores);
        s.scores = scores;
    }
    if (gguf_has_key(g, "tokenizer.ggml.token_type")) {
        size_t nt;
        const void *p;
        if (gguf_get_arr_info(g, "tokenizer.ggml.token_type", &et, &nt) < 0 || (et != GGUF_I32 && et != GGUF_U32)) {
            rc = err_set(OCT_EINVAL, "%s: tokenizer.ggml.token_type is not an i32 array", path);
            goto done;
        }
        if (nt != n) {
            rc = err_set(OCT_EINVAL, "%s: tokenizer.ggml.token_type has %zu entries but tokenizer.ggml.tokens has %zu",
                         path, nt, n);
            goto done;
        }
        if (!(types = malloc(n * sizeof *types))) { rc = err_set(OCT_ENOMEM, "%s: out of memory", path); goto done; }
        if (gguf_get_arr_data(g, "tokenizer.ggml.token_type", &p) < 0) {
            rc = err_wrap(OCT_EINVAL, "%s: ", path);
            goto done;
        }
        memcpy(types, p, n * sizeof *types);
        s.types = types;
    }
    for (size_t i = 0; i < n_merges; i++) {
        const char *m;
        size_t l, sp = 1;
        if (gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &m, &l) < 0) {
            rc = err_set(OCT_EINVAL, "%s: tokenizer.ggml.merges[%zu] unreadable", path, i);
            goto done;
        }
        while (sp < l && m[sp] != ' ') sp++;  // the first space after position 0, as llama.cpp
        if (l < 3 || sp >= l - 1 || l > UINT32_MAX / 2) {
            rc = err_set(OCT_EINVAL, "%s: tokenizer.ggml.merges[%zu] '%.*s' is not of the form 'left right'",
                         path, i, (int)(l > 64 ? 64 : l), m);
            goto done;
        }
        ml[i] = m; mll[i] = (uint32_t)sp;
        mr[i] = m + sp + 1; mrl[i] = (uint32_t)(l - sp - 1);
    }
    s.n_merges = (int)n_merges;
    s.merge_left = ml; s.merge_right = mr; s.merge_left_len = mll; s.merge_right_len = mrl;
    s.text = text;
    s.text_len = text_len;
    if (tmpl) {
        if (!(tmpl_z = strndup(tmpl, tmpl_len))) { rc = err_set(OCT_ENOMEM, "%s: out of memory", path); goto done; }
        s.chat_template = tmpl_z;
    }
    rc = tok_build(out, &s);
done:
    free(text); free(text_len); free(scores); free(types); free(tmpl_z);
    free(ml); free(mr); free(mll); free(mrl);
    return rc;
}
