// prompts.c — random-token prompts sized in the served model's tokens.
// Random ids decode to text whose re-encoding may merge differently (BPE) or split
// differently (SPM), so the text is re-encoded and trimmed or extended until it lands on
// the requested length (vLLM's random dataset does the same adjust loop).
#include "prompts.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/check.h"
#include "../model/gguf.h"
#include "../model/model.h"
#include "../model/tokenizer.h"

int prompts_load_tokenizer(const char *path, struct tokenizer **out) {
    *out = NULL;
    if (!strncmp(path, "dummy:", 6)) {
        struct model_config c;
        TRY(dummy_config(path + 6, &c));
        return tokenizer_bytes(out, c.n_vocab);
    }
    struct stat st;
    if (stat(path, &st) != 0) return err_set(OCT_EIO, "tokenizer %s: no such file, directory or dummy:NAME", path);
    if (S_ISDIR(st.st_mode)) {
        char tp[4096];
        snprintf(tp, sizeof tp, "%s/tokenizer.json", path);
        return tokenizer_from_hf_json(out, tp);
    }
    struct gguf *g;
    TRY(gguf_open(&g, path));
    int rc = tokenizer_from_gguf(out, g);
    gguf_close(g);
    return rc;
}

// True if the piece is non-empty, valid UTF-8, and free of control characters and '<|'.
static bool clean_piece(const char *p, size_t n) {
    if (!n || memmem(p, n, "<|", 2)) return false;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        int k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n || c == 0x7f || (k == 1 && c < 0x20) || (k == 2 && c < 0xC2)) return false;
        for (int j = 1; j < k; j++) if (((unsigned char)p[i + j] & 0xC0) != 0x80) return false;
        i += (size_t)k;
    }
    return true;
}

int prompt_gen_init(struct prompt_gen *g, const struct tokenizer *t, unsigned long long seed) {
    memset(g, 0, sizeof *g);
    int nv = tokenizer_n_vocab(t);
    g->ids = malloc((size_t)nv * sizeof *g->ids);
    if (!g->ids) return err_set(OCT_ENOMEM, "prompts: out of memory");
    char buf[256];
    for (int id = 0; id < nv; id++) {
        if (tokenizer_is_eog(t, id) || id == tokenizer_bos(t)) continue;
        size_t n = tokenizer_piece(t, id, false, buf, sizeof buf);
        if (n < sizeof buf && clean_piece(buf, n)) g->ids[g->n_ids++] = id;
    }
    if (g->n_ids == 0) {
        prompt_gen_free(g);
        return err_set(OCT_EINVAL, "prompts: the tokenizer has no plain-text tokens to draw from");
    }
    g->tok = t;
    g->add_bos = tokenizer_add_bos(t) && tokenizer_bos(t) >= 0;
    rng_seed(&g->rng, seed);
    return OCT_OK;
}

void prompt_gen_free(struct prompt_gen *g) {
    free(g->ids);
    g->ids = NULL;
    g->n_ids = 0;
}

struct sbuf { char *p; size_t n, cap; };

static int sbuf_add(struct sbuf *s, const char *p, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t c = s->cap ? s->cap * 2 : 1024;
        while (c < s->n + n + 1) c *= 2;
        char *q = realloc(s->p, c);
        if (!q) return err_set(OCT_ENOMEM, "prompts: out of memory");
        s->p = q;
        s->cap = c;
    }
    memcpy(s->p + s->n, p, n);
    s->n += n;
    s->p[s->n] = 0;
    return OCT_OK;
}

// Appends the pieces of k random clean ids.
static int add_random(struct prompt_gen *g, struct sbuf *s, int k) {
    char buf[256];
    for (int i = 0; i < k; i++) {
        int id = g->ids[rng_next(&g->rng) % (uint64_t)g->n_ids];
        size_t n = tokenizer_piece(g->tok, id, false, buf, sizeof buf);
        // the very first piece of an SPM prompt loses its leading space on decode
        const char *p = buf;
        if (s->n == 0 && tokenizer_add_space_prefix(g->tok) && n > 1 && buf[0] == ' ') { p++; n--; }
        TRY(sbuf_add(s, p, n));
    }
    return OCT_OK;
}

// Drops a trailing incomplete UTF-8 sequence (trimming by tokens can split a character).
static void utf8_trim_end(struct sbuf *s) {
    size_t i = s->n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s->p[i - 1] & 0xC0) == 0x80) { i--; back++; }
    if (i == 0) return;
    unsigned char c = (unsigned char)s->p[i - 1];
    int k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if ((size_t)k != back + 1) s->n = i - 1;
    s->p[s->n] = 0;
}

int prompt_gen_make(struct prompt_gen *g, int n_tokens, char **text, int *got) {
    *text = NULL;
    int want = n_tokens - (g->add_bos ? 1 : 0);
    if (want < 1) want = 1;
    struct sbuf s = {0};
    int rc = add_random(g, &s, want), n = 0, best_diff = 1 << 30;
    char *best = NULL;
    int best_n = 0;
    for (int round = 0; rc == OCT_OK && round < 12; round++) {
        int32_t *ids = NULL;
        if ((rc = tokenizer_encode(g->tok, s.p, s.n, g->add_bos, false, &ids, &n)) < 0) break;
        int diff = abs(n - n_tokens);
        if (diff < best_diff) {
            free(best);
            best = strdup(s.p);
            best_n = n;
            best_diff = diff;
        }
        if (diff == 0 || !best) { free(ids); break; }
        if (n > n_tokens) {  // keep the first tokens' text
            int skip = g->add_bos ? 1 : 0, keep = n_tokens - skip;
            size_t cap = s.n + 64;
            char *t = malloc(cap);
            if (!t) { free(ids); rc = err_set(OCT_ENOMEM, "prompts: out of memory"); break; }
            size_t m = tokenizer_decode(g->tok, ids + skip, keep, false, t, cap);
            s.n = 0;
            rc = sbuf_add(&s, t, m < cap ? m : cap - 1);
            free(t);
            utf8_trim_end(&s);
        } else {
            rc = add_random(g, &s, n_tokens - n);
        }
        free(ids);
    }
    free(s.p);
    if (rc < 0 || !best) { free(best); return rc < 0 ? rc : err_set(OCT_ENOMEM, "prompts: out of memory"); }
    *text = best;
    *got = best_n;
    return OCT_OK;
}
