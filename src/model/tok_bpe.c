// tok_bpe.c — byte-level BPE (owns: GPT-2's byte ↔ code point map, the merge table, the
// PCRE2 pre-split, the rank-ordered merge loop, GGUF pre-tokenizer presets and the HF
// tokenizer.json / tokenizer_config.json loader). Not here: specials, pieces, detok.
// Text is cut into words by each pre-split regex in turn (gaps between matches are words
// too, as HF's "Isolated" Split); each word starts as one symbol per byte and the adjacent
// pair with the lowest merge rank is merged (ties: leftmost) until none is left.
// Invariant: every merge in the table refers to existing tokens (checked at load).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "tokenizer_impl.h"

static const char RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// o200k (GGUF pre "gpt-4o": gpt-oss): words split where case turns from lower to upper, contractions kept
// on their word, digits in threes, a punctuation run taking the newlines and slashes after it.
static const char RE_GPT4O[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// ---- GPT-2 byte map: printable bytes map to themselves, the other 68 to U+0100.. ----

static uint32_t byte_to_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return (uint32_t)b;
    if (b <= 0x20) return 256u + (uint32_t)b;
    if (b <= 0xA0) return 256u + 33u + (uint32_t)(b - 0x7F);
    return 256u + 67u;  // 0xAD
}

int tok_bpe_unmap_cp(uint32_t cp) {
    if (cp < 256) return byte_to_cp((int)cp) == cp ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(0x7F + cp - 256 - 33);
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

static size_t put_cp(char *s, uint32_t cp) {  // cp < 0x800
    if (cp < 0x80) { s[0] = (char)cp; return 1; }
    s[0] = (char)(0xC0 | (cp >> 6));
    s[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

// ---- merges ----

static uint64_t merge_key(int left, int right) { return ((uint64_t)(uint32_t)(left + 1) << 32) | (uint32_t)right; }
static size_t merge_slot(uint64_t key, size_t mask) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask; }

static const struct tok_merge *merge_find(const struct tokenizer *t, int left, int right) {
    if (!t->merges || left < 0 || right < 0) return NULL;
    uint64_t key = merge_key(left, right);
    for (size_t i = merge_slot(key, t->merge_mask);; i = (i + 1) & t->merge_mask) {
        if (t->merges[i].key == key) return &t->merges[i];
        if (t->merges[i].key == 0) return NULL;
    }
}

int tok_bpe_init(struct tokenizer *t, const struct tok_spec *s) {
    for (int b = 0; b < 256; b++) {
        char u[2];
        t->byte_id[b] = tok_find(t, u, put_cp(u, byte_to_cp(b)));
    }
    size_t cap = 16;
    while (cap < (size_t)s->n_merges * 2) cap *= 2;
    t->merges = calloc(cap, sizeof *t->merges);
    if (!t->merges) return err_set(OCT_ENOMEM, "%s: out of memory (merges)", s->src);
    t->merge_mask = cap - 1;
    char *cat = NULL;
    size_t cat_cap = 0;
    for (int i = 0; i < s->n_merges; i++) {
        const char *ls = s->merge_left[i], *rs = s->merge_right[i];
        uint32_t ll = s->merge_left_len[i], rl = s->merge_right_len[i];
        int left = tok_find(t, ls, ll), right = tok_find(t, rs, rl);
        if (left < 0 || right < 0) {
            free(cat);
            return err_set(OCT_EINVAL, "%s: merges[%d] '%.*s %.*s': '%.*s' is not in the vocabulary", s->src, i,
                           (int)ll, ls, (int)rl, rs, left < 0 ? (int)ll : (int)rl, left < 0 ? ls : rs);
        }
        if ((size_t)ll + rl > cat_cap) {
            cat_cap = ((size_t)ll + rl) * 2;
            char *p = realloc(cat, cat_cap);
            if (!p) { free(cat); return err_set(OCT_ENOMEM, "%s: out of memory", s->src); }
            cat = p;
        }
        memcpy(cat, ls, ll);
        memcpy(cat + ll, rs, rl);
        int result = tok_find(t, cat, (size_t)ll + rl);
        if (result < 0) {
            free(cat);
            return err_set(OCT_EINVAL, "%s: merges[%d] '%.*s %.*s': the merged token is not in the vocabulary",
                           s->src, i, (int)ll, ls, (int)rl, rs);
        }
        uint64_t key = merge_key(left, right);
        size_t j = merge_slot(key, t->merge_mask);
        while (t->merges[j].key && t->merges[j].key != key) j = (j + 1) & t->merge_mask;
        if (t->merges[j].key) continue;  // duplicate merge: the lower rank stays
        t->merges[j] = (struct tok_merge){ key, i, result };
    }
    free(cat);
    t->n_regex = 0;
    for (int i = 0; i < s->n_regex; i++) {
        int code;
        PCRE2_SIZE off;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)s->regex[i], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                       &code, &off, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            return err_set(OCT_EINVAL, "%s: pre-tokenizer regex %d at offset %zu: %s", s->src, i, (size_t)off,
                           (const char *)msg);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
        t->re[t->n_regex++] = re;
    }
    return 0;
}

void tok_bpe_free(struct tokenizer *t) {
    free(t->merges);
    t->merges = NULL;
    for (int i = 0; i < t->n_regex; i++) pcre2_code_free(t->re[i]);
    t->n_regex = 0;
}

int tok_bpe_pre_preset(struct tok_spec *s, const char *pre) {
    static const char *llama3[] = { "default", "llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "smaug-bpe" };
    s->n_regex = 1;
    if (!pre) { s->regex[0] = RE_LLAMA3; return 0; }
    for (size_t i = 0; i < sizeof llama3 / sizeof llama3[0]; i++) {
        if (strcmp(pre, llama3[i]) == 0) {
            s->regex[0] = RE_LLAMA3;
            s->ignore_merges = true;
            s->add_bos = true;
            return 0;
        }
    }
    if (strcmp(pre, "gpt-2") == 0 || strcmp(pre, "gpt2") == 0) { s->regex[0] = RE_GPT2; return 0; }
    if (strcmp(pre, "qwen2") == 0) { s->regex[0] = RE_QWEN2; return 0; }
    if (strcmp(pre, "gpt-4o") == 0) { s->regex[0] = RE_GPT4O; return 0; }
    return err_set(OCT_EUNSUP, "%s: tokenizer.ggml.pre '%s' is not supported (llama-bpe, gpt-2, qwen2, gpt-4o)",
                   s->src, pre);
}

// ---- encoding ----

struct bpe_sym { int32_t id, prev, next; };
struct bpe_pair { int32_t rank, left, lid, rid; };

struct bpe_ctx {
    const struct tokenizer *t;
    struct tok_vec *out;
    struct bpe_sym *sym;
    size_t sym_cap;
    struct bpe_pair *heap;
    size_t n_heap, heap_cap;
    char *mapped;
    size_t mapped_cap;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
};

static bool pair_before(const struct bpe_pair *a, const struct bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int pair_push(struct bpe_ctx *c, int left, int right) {
    if (left < 0 || right < 0) return 0;
    const struct tok_merge *m = merge_find(c->t, c->sym[left].id, c->sym[right].id);
    if (!m) return 0;
    if (c->n_heap == c->heap_cap) {
        size_t cap = c->heap_cap ? c->heap_cap * 2 : 64;
        struct bpe_pair *p = realloc(c->heap, cap * sizeof *p);
        if (!p) return err_set(OCT_ENOMEM, "tokenizer: out of memory (bpe heap)");
        c->heap = p;
        c->heap_cap = cap;
    }
    struct bpe_pair e = { m->rank, left, c->sym[left].id, c->sym[right].id };
    size_t i = c->n_heap++;
    while (i > 0 && pair_before(&e, &c->heap[(i - 1) / 2])) {
        c->heap[i] = c->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    c->heap[i] = e;
    return 0;
}

static struct bpe_pair pair_pop(struct bpe_ctx *c) {
    struct bpe_pair top = c->heap[0], last = c->heap[--c->n_heap];
    size_t i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= c->n_heap) break;
        if (k + 1 < c->n_heap && pair_before(&c->heap[k + 1], &c->heap[k])) k++;
        if (!pair_before(&c->heap[k], &last)) break;
        c->heap[i] = c->heap[k];
        i = k;
    }
    if (c->n_heap) c->heap[i] = last;
    return top;
}

static int bpe_word(struct bpe_ctx *c, const char *w, size_t n) {
    const struct tokenizer *t = c->t;
    if (n == 0) return 0;
    if (t->ignore_merges) {  // a word that is itself a token is taken whole (Llama-3)
        if (n * 2 > c->mapped_cap) {
            char *p = realloc(c->mapped, n * 2);
            if (!p) return err_set(OCT_ENOMEM, "tokenizer: out of memory");
            c->mapped = p;
            c->mapped_cap = n * 2;
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += put_cp(c->mapped + m, byte_to_cp((unsigned char)w[i]));
        int id = tok_find(t, c->mapped, m);
        if (id >= 0) return tok_vec_push(c->out, id);
    }
    if (n > c->sym_cap) {
        struct bpe_sym *p = realloc(c->sym, n * sizeof *p);
        if (!p) return err_set(OCT_ENOMEM, "tokenizer: out of memory");
        c->sym = p;
        c->sym_cap = n;
    }
    for (size_t i = 0; i < n; i++)
        c->sym[i] = (struct bpe_sym){ t->byte_id[(unsigned char)w[i]], (int32_t)i - 1, (int32_t)i + 1 };
    c->sym[n - 1].next = -1;
    c->n_heap = 0;
    int rc = 0;
    for (size_t i = 1; i < n && rc == 0; i++) rc = pair_push(c, (int)i - 1, (int)i);
    while (c->n_heap && rc == 0) {
        struct bpe_pair p = pair_pop(c);
        struct bpe_sym *l = &c->sym[p.left];
        if (l->id != p.lid || l->next < 0 || c->sym[l->next].id != p.rid) continue;  // stale
        int r = l->next;
        l->id = merge_find(t, p.lid, p.rid)->result;
        l->next = c->sym[r].next;
        if (l->next >= 0) c->sym[l->next].prev = p.left;
        c->sym[r].id = -2;  // dead
        rc = pair_push(c, l->prev, p.left);
        if (rc == 0) rc = pair_push(c, p.left, l->next);
    }
    for (int i = 0; i >= 0 && rc == 0; i = c->sym[i].next) {
        int id = c->sym[i].id >= 0 ? c->sym[i].id : t->unk;
        if (id >= 0) rc = tok_vec_push(c->out, id);
    }
    return rc;
}

// Splits [s, s+n) with regex `level` and recurses; the last level feeds bpe_word.
static int split(struct bpe_ctx *c, int level, const char *s, size_t n) {
    if (n == 0) return 0;
    if (level == c->t->n_regex) return bpe_word(c, s, n);
    const pcre2_code *re = c->t->re[level];
    size_t pos = 0;
    int rc = 0;
    while (pos < n && rc == 0) {
        int m = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, c->md, c->mctx);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return err_set(OCT_EINVAL, "tokenizer: pre-split regex failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) {  // empty match: the next character belongs to the following gap
            if (ms >= n) break;
            size_t next = ms + tok_utf8_len((unsigned char)s[ms]);
            rc = split(c, level + 1, s + pos, (next > n ? n : next) - pos);
            pos = next > n ? n : next;
            continue;
        }
        if (ms > pos) rc = split(c, level + 1, s + pos, ms - pos);
        if (rc == 0) rc = split(c, level + 1, s + ms, me - ms);
        pos = me;
    }
    if (rc == 0 && pos < n) rc = split(c, level + 1, s + pos, n - pos);
    return rc;
}

// Length of the longest valid UTF-8 prefix of [s, s+n).
static size_t valid_utf8_prefix(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) need = 2;
        else if (c >= 0xE0 && c <= 0xEF) { need = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return i;
        if (i + need > n) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t j = 2; j < need; j++) if (s[i + j] < 0x80 || s[i + j] > 0xBF) return i;
        i += need;
    }
    return n;
}

int tok_bpe_encode(const struct tokenizer *t, const char *text, size_t len, struct tok_vec *out) {
    struct bpe_ctx c = { .t = t, .out = out };
    pcre2_jit_stack *js = NULL;
    int rc = 0;
    if (t->n_regex) {
        c.md = pcre2_match_data_create(4, NULL);
        c.mctx = pcre2_match_context_create(NULL);
        js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        if (!c.md || !c.mctx) { rc = err_set(OCT_ENOMEM, "tokenizer: out of memory (pcre2)"); goto done; }
        if (js) pcre2_jit_stack_assign(c.mctx, NULL, js);
    }
    // PCRE2 needs valid UTF-8: split around invalid bytes, each of which is its own word.
    for (size_t i = 0; i < len && rc == 0;) {
        size_t v = valid_utf8_prefix((const unsigned char *)text + i, len - i);
        if (v) rc = split(&c, 0, text + i, v);
        i += v;
        if (i < len && rc == 0) rc = bpe_word(&c, text + i++, 1);
    }
done:
    free(c.sym); free(c.heap); free(c.mapped);
    if (c.md) pcre2_match_data_free(c.md);
    if (c.mctx) pcre2_match_context_free(c.mctx);
    if (js) pcre2_jit_stack_free(js);
    return rc;
}

// ---- HF tokenizer.json ----

// "a b" (split at the first space after position 0) or ["a", "b"].
static int parse_merge(json_t *m, const char **l, uint32_t *ll, const char **r, uint32_t *rl) {
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m), sp = 1;
        while (sp < n && s[sp] != ' ') sp++;
        if (n < 3 || sp >= n - 1) return -1;
        *l = s; *ll = (uint32_t)sp; *r = s + sp + 1; *rl = (uint32_t)(n - sp - 1);
        return 0;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *l = json_string_value(json_array_get(m, 0)); *ll = (uint32_t)json_string_length(json_array_get(m, 0));
        *r = json_string_value(json_array_get(m, 1)); *rl = (uint32_t)json_string_length(json_array_get(m, 1));
        return 0;
    }
    return -1;
}

static int add_pre(struct tok_spec *s, json_t *p) {
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return err_set(OCT_EINVAL, "%s: pre_tokenizer without a \"type\"", s->src);
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "pretokenizers"), *e;
        size_t i;
        if (!json_is_array(list))
            return err_set(OCT_EINVAL, "%s: pre_tokenizer Sequence without pretokenizers", s->src);
        json_array_foreach(list, i, e) TRY(add_pre(s, e));
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            return err_set(OCT_EUNSUP, "%s: ByteLevel add_prefix_space=true is not supported", s->src);
        json_t *ur = json_object_get(p, "use_regex");
        if (!ur || json_is_true(ur)) {  // HF: ByteLevel's own regex is GPT-2's
            if (s->n_regex == TOK_MAX_REGEX) return err_set(OCT_EUNSUP, "%s: too many pre-tokenizers", s->src);
            s->regex[s->n_regex++] = RE_GPT2;
        }
        return 0;
    }
    if (strcmp(type, "Split") == 0) {
        json_t *pat = json_object_get(p, "pattern");
        const char *re = json_string_value(json_object_get(pat, "Regex"));
        const char *beh = json_string_value(json_object_get(p, "behavior"));
        if (!re) return err_set(OCT_EUNSUP, "%s: Split pre_tokenizer needs pattern.Regex", s->src);
        if ((beh && strcmp(beh, "Isolated") != 0) || json_is_true(json_object_get(p, "invert")))
            return err_set(OCT_EUNSUP, "%s: Split behavior '%s' / invert is not supported (Isolated only)",
                           s->src, beh ? beh : "?");
        if (s->n_regex == TOK_MAX_REGEX) return err_set(OCT_EUNSUP, "%s: too many pre-tokenizers", s->src);
        s->regex[s->n_regex++] = re;
        return 0;
    }
    return err_set(OCT_EUNSUP, "%s: pre_tokenizer type '%s' is not supported (ByteLevel, Split, Sequence)",
                   s->src, type);
}

// A token name in tokenizer_config.json: "…" or {"content": "…"}.
static const char *config_token(json_t *cfg, const char *key, size_t *len) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return NULL;
    *len = json_string_length(v);
    return json_string_value(v);
}

static int config_id(const struct tokenizer *t, json_t *cfg, const char *key, const char *cfg_path, int *id) {
    size_t len;
    const char *name = config_token(cfg, key, &len);
    if (!name) return 0;
    *id = tok_find(t, name, len);
    if (*id < 0) return err_set(OCT_EINVAL, "%s: %s '%s' is not in the vocabulary", cfg_path, key, name);
    return 0;
}

// The chat template of chat_template.jinja beside `path` (where newer transformers versions write it), when
// tokenizer_config.json has none.
static int read_jinja(struct tokenizer *t, const char *path, size_t dir) {
    char *p = malloc(dir + 32);
    if (!p) return err_set(OCT_ENOMEM, "out of memory");
    memcpy(p, path, dir);
    strcpy(p + dir, "chat_template.jinja");
    FILE *f = fopen(p, "rb");
    int rc = 0;
    if (f) {
        long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
        char *text = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n + 1) : NULL;
        if (n < 0) rc = err_set(OCT_EIO, "%s: cannot size the file", p);
        else if (!text) rc = err_set(OCT_ENOMEM, "out of memory");
        else if (fread(text, 1, (size_t)n, f) != (size_t)n) rc = err_set(OCT_EIO, "%s: read error", p);
        else if (memchr(text, 0, (size_t)n)) rc = err_set(OCT_EINVAL, "%s: not a text file (a NUL byte)", p);
        else {
            text[n] = 0;
            free(t->chat_template);
            t->chat_template = text;
            text = NULL;
        }
        free(text);
        fclose(f);
    }
    free(p);
    return rc;
}

// Reads tokenizer_config.json beside `path` into t (bos, eos, add_bos, chat_template), and
// chat_template.jinja where the config holds no template.
static int read_config(struct tokenizer *t, const char *path) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path + 1) : 0;
    char *cfg_path = malloc(dir + 32);
    if (!cfg_path) return err_set(OCT_ENOMEM, "out of memory");
    memcpy(cfg_path, path, dir);
    strcpy(cfg_path + dir, "tokenizer_config.json");
    FILE *f = fopen(cfg_path, "rb");
    if (!f) { free(cfg_path); return read_jinja(t, path, dir); }
    fclose(f);
    json_error_t je;
    json_t *cfg = json_load_file(cfg_path, 0, &je);
    int rc = 0;
    if (!cfg || !json_is_object(cfg)) {
        rc = err_set(OCT_EINVAL, "%s: line %d: %s", cfg_path, je.line, cfg ? "not a JSON object" : je.text);
        goto done;
    }
    if ((rc = config_id(t, cfg, "bos_token", cfg_path, &t->bos)) < 0) goto done;
    if ((rc = config_id(t, cfg, "eos_token", cfg_path, &t->eos)) < 0) goto done;
    if (t->eos >= 0) t->eog[t->eos] = 1;
    json_t *ab = json_object_get(cfg, "add_bos_token");
    if (json_is_boolean(ab)) t->add_bos = json_is_true(ab);
    json_t *ct = json_object_get(cfg, "chat_template"), *e;
    size_t i;
    if (json_is_array(ct)) {  // [{"name": "default", "template": "…"}, …]
        json_t *pick = json_array_get(ct, 0);
        json_array_foreach(ct, i, e) {
            const char *nm = json_string_value(json_object_get(e, "name"));
            if (nm && strcmp(nm, "default") == 0) pick = e;
        }
        ct = json_object_get(pick, "template");
    }
    if (json_is_string(ct)) {
        free(t->chat_template);
        if (!(t->chat_template = strdup(json_string_value(ct)))) rc = err_set(OCT_ENOMEM, "out of memory");
    }
    if (rc == 0 && !t->chat_template) rc = read_jinja(t, path, dir);
done:
    json_decref(cfg);
    free(cfg_path);
    return rc;
}

int tokenizer_from_hf_json(struct tokenizer **out, const char *path) {
    if (!out || !path) return err_set(OCT_EINVAL, "tokenizer_from_hf_json: NULL argument");
    *out = NULL;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return err_set(OCT_EIO, "%s: line %d: %s", path, je.line, je.text);
    struct tok_spec s = { .kind = TOK_KIND_BPE, .src = path, .bos = -1, .eos = -1, .unk = -1, .eot = -1, .eom = -1 };
    const char **text = NULL, **ml = NULL, **mr = NULL;
    uint32_t *text_len = NULL, *mll = NULL, *mrl = NULL;
    int32_t *types = NULL;
    int rc = 0;
    json_t *model = json_object_get(root, "model"), *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges"), *added = json_object_get(root, "added_tokens"), *v;
    const char *mtype = json_string_value(json_object_get(model, "type")), *key;
    size_t i;
    if (!json_is_object(model)) { rc = err_set(OCT_EINVAL, "%s: no \"model\" object", path); goto done; }
    if (mtype && strcmp(mtype, "BPE") != 0) {
        rc = err_set(OCT_EUNSUP, "%s: model.type '%s' is not supported (BPE only)", path, mtype);
        goto done;
    }
    if (json_is_true(json_object_get(model, "byte_fallback"))) {
        rc = err_set(OCT_EUNSUP, "%s: model.byte_fallback (SentencePiece-style BPE) is not supported", path);
        goto done;
    }
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        rc = err_set(OCT_EINVAL, "%s: model.vocab must be an object and model.merges an array", path);
        goto done;
    }
    if (added && !json_is_array(added)) {
        rc = err_set(OCT_EINVAL, "%s: added_tokens is not an array", path);
        goto done;
    }
    long long max_id = -1;
    json_object_foreach(vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1 << 26)) {
            rc = err_set(OCT_EINVAL, "%s: model.vocab['%s'] is not a token id in [0, 2^26)", path, key);
            goto done;
        }
        if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
    }
    json_array_foreach(added, i, v) {
        json_t *id = json_object_get(v, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 26) ||
            !json_is_string(json_object_get(v, "content"))) {
            rc = err_set(OCT_EINVAL, "%s: added_tokens[%zu] needs an id in [0, 2^26) and a content string", path, i);
            goto done;
        }
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    if (max_id < 0) { rc = err_set(OCT_EINVAL, "%s: empty vocabulary", path); goto done; }
    size_t n = (size_t)max_id + 1, nm = json_array_size(merges);
    text = calloc(n, sizeof *text); text_len = calloc(n, sizeof *text_len); types = calloc(n, sizeof *types);
    ml = calloc(nm + 1, sizeof *ml); mr = calloc(nm + 1, sizeof *mr);
    mll = calloc(nm + 1, sizeof *mll); mrl = calloc(nm + 1, sizeof *mrl);
    if (!text || !text_len || !types || !ml || !mr || !mll || !mrl) {
        rc = err_set(OCT_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    json_object_foreach(vocab, key, v) {
        size_t id = (size_t)json_integer_value(v);
        if (text[id]) {
            rc = err_set(OCT_EINVAL, "%s: model.vocab: id %zu is used by both '%s' and '%s'", path, id, text[id], key);
            goto done;
        }
        text[id] = key;
        text_len[id] = (uint32_t)strlen(key);
        types[id] = TOK_TYPE_NORMAL;
    }
    json_array_foreach(added, i, v) {  // added tokens override the vocab entry of the same id
        size_t id = (size_t)json_integer_value(json_object_get(v, "id"));
        text[id] = json_string_value(json_object_get(v, "content"));
        text_len[id] = (uint32_t)json_string_length(json_object_get(v, "content"));
        types[id] = json_is_true(json_object_get(v, "special")) ? TOK_TYPE_CONTROL : TOK_TYPE_USER_DEFINED;
    }
    json_array_foreach(merges, i, v) {
        if (parse_merge(v, &ml[i], &mll[i], &mr[i], &mrl[i]) < 0) {
            rc = err_set(OCT_EINVAL, "%s: model.merges[%zu] is neither \"left right\" nor [left, right]", path, i);
            goto done;
        }
    }
    json_t *norm = json_object_get(root, "normalizer");
    const char *norm_type = json_string_value(json_object_get(norm, "type"));
    if (norm && !json_is_null(norm) && (!norm_type || strcmp(norm_type, "NFC") != 0)) {
        rc = err_set(OCT_EUNSUP, "%s: normalizer '%s' is not supported", path, norm_type ? norm_type : "?");
        goto done;
    }
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (!pre || json_is_null(pre)) { s.n_regex = 1; s.regex[0] = RE_LLAMA3; }
    else if ((rc = add_pre(&s, pre)) < 0) goto done;
    s.ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    s.n_vocab = (int)n;
    s.text = text; s.text_len = text_len; s.types = types;
    s.n_merges = (int)nm;
    s.merge_left = ml; s.merge_right = mr; s.merge_left_len = mll; s.merge_right_len = mrl;
    if ((rc = tok_build(out, &s)) < 0) goto done;
    struct tokenizer *t = *out;
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    if (unk) t->unk = tok_find(t, unk, strlen(unk));
    // BOS from a TemplateProcessing post-processor ("single": [{"SpecialToken": …}, …]).
    json_t *pp = json_object_get(root, "post_processor"), *first = NULL;
    const char *pp_type = json_string_value(json_object_get(pp, "type"));
    if (pp_type && strcmp(pp_type, "Sequence") == 0) {
        json_array_foreach(json_object_get(pp, "processors"), i, v) {
            const char *ty = json_string_value(json_object_get(v, "type"));
            if (ty && strcmp(ty, "TemplateProcessing") == 0) { pp = v; pp_type = ty; break; }
        }
    }
    if (pp_type && strcmp(pp_type, "TemplateProcessing") == 0)
        first = json_object_get(json_array_get(json_object_get(pp, "single"), 0), "SpecialToken");
    const char *first_id = json_string_value(json_object_get(first, "id"));
    if (first_id && (t->bos = tok_find(t, first_id, strlen(first_id))) >= 0) t->add_bos = true;
    if ((rc = read_config(t, path)) < 0) { tokenizer_free(t); *out = NULL; }
done:
    free(text); free(text_len); free(types); free(ml); free(mr); free(mll); free(mrl);
    json_decref(root);
    return rc;
}
