// tokenizer_impl.h — private to tokenizer.c / tok_spm.c / tok_bpe.c (owns: the layout of
// struct tokenizer, the loader-neutral build spec, and the helpers the two algorithms share).
// Loaders (GGUF, tokenizer.json, the byte stand-in) fill a struct tok_spec and call
// tok_build, which validates everything once; after that every id in the struct is
// in [0, n_vocab) and every merge refers to existing tokens, so encoders never re-check.
#ifndef OCTET_TOKENIZER_IMPL_H
#define OCTET_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

enum tok_kind { TOK_KIND_SPM, TOK_KIND_BPE, TOK_KIND_BYTES };

// llama.cpp / GGUF token types.
enum tok_type {
    TOK_TYPE_UNDEFINED = 0, TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4, TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6, TOK_TYPE_COUNT
};

#define TOK_MAX_REGEX 8

// What a loader hands to tok_build. Strings are borrowed (copied by tok_build);
// a NULL array means "absent" (scores 0, types NORMAL).
struct tok_spec {
    enum tok_kind kind;
    const char *src;                  // file name for messages
    int n_vocab;
    const char **text;                // [n_vocab] token texts (NULL entry = hole)
    const uint32_t *text_len;         // [n_vocab]
    const float *scores;              // [n_vocab] or NULL
    const int32_t *types;             // [n_vocab] or NULL
    int n_merges;
    const char **merge_left, **merge_right;   // [n_merges] borrowed texts
    const uint32_t *merge_left_len, *merge_right_len;
    int bos, eos, unk, eot, eom;      // -1 if absent
    bool add_bos, add_space_prefix, ignore_merges;
    const char *chat_template;        // NUL-terminated or NULL
    int n_regex;
    const char *regex[TOK_MAX_REGEX]; // pre-split patterns, applied in order (BPE)
};

// Open-addressing map; slots hold value+1 (0 = empty).
struct tok_map {
    uint32_t *slots;
    size_t mask;
};

struct tok_merge { uint64_t key; int32_t rank, result; };

struct tokenizer {
    enum tok_kind kind;
    int n_vocab;
    char *arena;                      // all token texts, NUL-separated
    uint32_t *off, *len;              // [n_vocab] into arena
    float *scores;                    // [n_vocab]
    uint8_t *type;                    // [n_vocab] enum tok_type
    uint8_t *byte_val;                // [n_vocab] for TOK_TYPE_BYTE: the byte
    uint8_t *eog;                     // [n_vocab] 1 = end of generation
    struct tok_map by_text;           // text → id
    int bos, eos, unk;
    bool add_bos, add_space_prefix, ignore_merges;
    char *chat_template;
    int byte_id[256];                 // SPM: <0xNN> id; BPE: id of the mapped char; -1
    int32_t *special;                 // ids matched literally before splitting, sorted by
    int n_special;                    // (first byte, length descending)
    int special_idx[257];             // special[special_idx[b] .. special_idx[b+1]) start with b
    // BPE only
    struct tok_merge *merges;         // hash table, key = left<<32 | right; key 0 = empty
    size_t merge_mask;
    void *re[TOK_MAX_REGEX];          // pcre2_code_8 *
    int n_regex;
};

// Growable id vector (the encoders' output).
struct tok_vec { int32_t *v; size_t n, cap; };
int tok_vec_push(struct tok_vec *v, int32_t id);

int tok_build(struct tokenizer **out, const struct tok_spec *s);
int tok_find(const struct tokenizer *t, const char *s, size_t len); // -1 if absent
static inline const char *tok_text(const struct tokenizer *t, int id) { return t->arena + t->off[id]; }

// Length of the UTF-8 sequence starting with byte c (1 for invalid leads).
static inline size_t tok_utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

// SPM: encodes one raw-text fragment (no specials inside), prefix = prepend a space.
int tok_spm_encode(const struct tokenizer *t, const char *text, size_t len, bool prefix,
                   struct tok_vec *out);
// BPE: set-up after the vocabulary exists (merges table, byte ids, regexes) and teardown.
int tok_bpe_init(struct tokenizer *t, const struct tok_spec *s);
void tok_bpe_free(struct tokenizer *t);
// BPE: fills s->regex / ignore_merges / add_bos for a GGUF tokenizer.ggml.pre name
// (NULL = absent). Unknown names fail with OCT_EUNSUP naming the key.
int tok_bpe_pre_preset(struct tok_spec *s, const char *pre);
// BPE: encodes one raw-text fragment (pre-split + merges).
int tok_bpe_encode(const struct tokenizer *t, const char *text, size_t len, struct tok_vec *out);
// GPT-2 byte-level map: mapped code point → byte (-1 if not a mapped code point).
int tok_bpe_unmap_cp(uint32_t cp);

#endif
