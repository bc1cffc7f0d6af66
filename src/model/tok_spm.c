// tok_spm.c — SentencePiece-style encoding, as llama.cpp's llm_tokenizer_spm (owns: the
// score-driven merge loop only; vocabulary, specials and the prefix rule live in tokenizer.c).
// Text is escaped (' ' → ▁), split into UTF-8 characters, then the adjacent pair whose
// concatenation is a vocabulary token with the highest score is merged repeatedly (ties:
// leftmost) using a binary heap; leftover symbols not in the vocabulary become <0xNN> tokens.
// Invariant: symbols always tile the escaped text, so a pair is a contiguous span.
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "tokenizer_impl.h"

struct spm_sym { int32_t prev, next; uint32_t start, n; };
struct spm_bigram { float score; int32_t left; uint32_t size; };

struct spm_heap { struct spm_bigram *v; size_t n, cap; };

static bool before(const struct spm_bigram *a, const struct spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(struct spm_heap *h, struct spm_bigram e) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        struct spm_bigram *p = realloc(h->v, cap * sizeof *p);
        if (!p) return err_set(OCT_ENOMEM, "tokenizer: out of memory (spm heap)");
        h->v = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && before(&e, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = e;
    return 0;
}

static struct spm_bigram heap_pop(struct spm_heap *h) {
    struct spm_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

// Only ordinary tokens take part in merges: control, byte and unused tokens are never
// produced from plain text (SentencePiece's rule; keeps "<0x41>" typed literally as text).
static bool mergeable(const struct tokenizer *t, int id) {
    int ty = t->type[id];
    return ty == TOK_TYPE_NORMAL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNDEFINED;
}

static int try_bigram(const struct tokenizer *t, const char *buf, const struct spm_sym *sym,
                      int left, int right, struct spm_heap *h) {
    if (left < 0 || right < 0) return 0;
    uint32_t size = sym[left].n + sym[right].n;
    int id = tok_find(t, buf + sym[left].start, size);
    if (id < 0 || !mergeable(t, id)) return 0;
    return heap_push(h, (struct spm_bigram){ t->scores[id], left, size });
}

int tok_spm_encode(const struct tokenizer *t, const char *text, size_t len, bool prefix,
                   struct tok_vec *out) {
    size_t n_space = 0;
    for (size_t i = 0; i < len; i++) n_space += text[i] == ' ';
    size_t cap = len + 2 * n_space + 3;
    char *buf = malloc(cap);
    struct spm_sym *sym = malloc((len + 1) * sizeof *sym);
    struct spm_heap h = {0};
    int rc = 0;
    if (!buf || !sym) { rc = err_set(OCT_ENOMEM, "tokenizer: out of memory (spm, %zu bytes)", len); goto done; }
    size_t n = 0;
    if (prefix) { memcpy(buf, "\xe2\x96\x81", 3); n = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(buf + n, "\xe2\x96\x81", 3); n += 3; }
        else buf[n++] = text[i];
    }
    int n_sym = 0;
    for (size_t i = 0; i < n;) {
        // One symbol per UTF-8 character; a broken sequence is split into single bytes so
        // it cannot swallow the start of a following ▁ (llama.cpp would, and then decode it
        // back as the bytes of ▁ rather than a space).
        size_t l = tok_utf8_len((unsigned char)buf[i]);
        if (l > n - i) l = 1;
        for (size_t j = 1; j < l; j++)
            if (((unsigned char)buf[i + j] & 0xC0) != 0x80) { l = 1; break; }
        sym[n_sym] = (struct spm_sym){ n_sym - 1, n_sym + 1, (uint32_t)i, (uint32_t)l };
        n_sym++;
        i += l;
    }
    if (n_sym == 0) goto done;
    sym[n_sym - 1].next = -1;
    for (int i = 1; i < n_sym && rc == 0; i++) rc = try_bigram(t, buf, sym, i - 1, i, &h);
    while (h.n && rc == 0) {
        struct spm_bigram b = heap_pop(&h);
        struct spm_sym *l = &sym[b.left];
        if (l->n == 0 || l->next < 0) continue;
        struct spm_sym *r = &sym[l->next];
        if (r->n == 0 || l->n + r->n != b.size) continue;  // stale: one side already merged
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        rc = try_bigram(t, buf, sym, l->prev, b.left, &h);
        if (rc == 0) rc = try_bigram(t, buf, sym, b.left, l->next, &h);
    }
    for (int i = 0; i >= 0 && rc == 0; i = sym[i].next) {
        int id = tok_find(t, buf + sym[i].start, sym[i].n);
        if (id >= 0 && mergeable(t, id)) { rc = tok_vec_push(out, id); continue; }
        for (uint32_t j = 0; j < sym[i].n && rc == 0; j++) {  // byte fallback
            int bid = t->byte_id[(unsigned char)buf[sym[i].start + j]];
            if (bid < 0) bid = t->unk;
            if (bid >= 0) rc = tok_vec_push(out, bid);
        }
    }
done:
    free(buf);
    free(sym);
    free(h.v);
    return rc;
}
