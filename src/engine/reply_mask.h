// reply_mask.h — constrained replies (JSON mode, response_format {"type": "json_object"}; tool_choice "required"
// in the hermes format): the tokens a step may draw so that the reply stays the beginning of one its grammar
// allows (reply_grammar.h), and ends once it is whole. Owns: the vocabulary's bytes and classes read once from
// the tokenizer, the mask of one step and the reply's state as tokens are drawn; not: the grammar, the draw
// (sampler.c).
#ifndef OCTET_REPLY_MASK_H
#define OCTET_REPLY_MASK_H

#include <stdint.h>

#include "reply_grammar.h"
#include "../model/tokenizer.h"

// A token's class: it ends the generation; it has no bytes (a control token); its bytes are whole UTF-8
// characters a string may hold as they are (no '"', '\' or control character); other bytes.
enum { REPLY_TOK_EOG, REPLY_TOK_NONE, REPLY_TOK_PLAIN, REPLY_TOK_TEXT };

struct reply_vocab {
    int n_vocab;
    uint32_t *off;   // [n_vocab + 1] token i's bytes are bytes[off[i] .. off[i + 1])
    char *bytes;
    uint8_t *cls;    // [n_vocab] REPLY_TOK_*
};

int reply_vocab_build(struct reply_vocab *v, const struct tokenizer *t);
void reply_vocab_free(struct reply_vocab *v);
// out = logits with -inf at every token that would not keep st a reply's beginning; the end-of-generation
// tokens and stop_ids are kept only once st is whole (then also what may follow, another call). Returns the
// tokens kept.
// (n: the logits' length, the model's vocabulary, which may be longer than the tokenizer's: the ids past it
// are never kept.)
int reply_mask(const struct reply_vocab *v, const struct reply_state *st, const int32_t *stop_ids, int n_stop,
               const float *logits /*[n]*/, float *out /*[n]*/, int n);
// A request's masks of the states it met, each a bit set of the vocabulary: a reply's states repeat (every
// step inside one string, after each value at one depth), so most steps copy a mask instead of building it.
#define REPLY_CACHE_SLOTS 8
#define REPLY_KEY_BYTES 72
struct reply_cache {
    uint8_t key[REPLY_CACHE_SLOTS][REPLY_KEY_BYTES];  // a state's canonical bytes (reply_mask.c)
    uint64_t *bits[REPLY_CACHE_SLOTS];                // [ceil(n / 64)] the tokens kept (malloc'd)
    int kept[REPLY_CACHE_SLOTS];
    int used, next;                                   // slots filled; the one replaced next
    long hits, misses;
};
void reply_cache_free(struct reply_cache *c);
// reply_mask through c (the same out and count; n the same on every call). <0: out of memory.
int reply_mask_cached(const struct reply_vocab *v, struct reply_cache *c, const struct reply_state *st,
                      const int32_t *stop_ids, int n_stop, const float *logits /*[n]*/, float *out /*[n]*/, int n);
// st after token id (an end-of-generation token or stop id: as it was). <0 where the token was not allowed.
int reply_advance(const struct reply_vocab *v, struct reply_state *st, const int32_t *stop_ids, int n_stop,
                  int32_t id);

#endif
