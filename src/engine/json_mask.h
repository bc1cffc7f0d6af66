// json_mask.h — JSON mode (OpenAI's response_format {"type": "json_object"}, as vLLM constrains it): the tokens
// a step may draw so that the reply stays the beginning of a JSON object, and ends once it is whole. Owns: the
// vocabulary's bytes and classes read once from the tokenizer, the mask of one step and the reply's state as
// tokens are drawn; not: JSON's grammar (base/json_prefix.c), the draw (sampler.c).
#ifndef OCTET_JSON_MASK_H
#define OCTET_JSON_MASK_H

#include <stdint.h>

#include "../base/json_prefix.h"
#include "../model/tokenizer.h"

// A token's class: it ends the generation; it has no bytes (a control token); its bytes are whole UTF-8
// characters a string may hold as they are (no '"', '\' or control character); other bytes.
enum { JSON_TOK_EOG, JSON_TOK_NONE, JSON_TOK_PLAIN, JSON_TOK_TEXT };

struct json_vocab {
    int n_vocab;
    uint32_t *off;   // [n_vocab + 1] token i's bytes are bytes[off[i] .. off[i + 1])
    char *bytes;
    uint8_t *cls;    // [n_vocab] JSON_TOK_*
};

int json_vocab_build(struct json_vocab *v, const struct tokenizer *t);
void json_vocab_free(struct json_vocab *v);
// out = logits with -inf at every token that would not keep st a JSON beginning; the end-of-generation tokens
// and stop_ids are kept only once st is whole (then nothing else is). Returns the tokens kept.
// (n: the logits' length, the model's vocabulary, which may be longer than the tokenizer's: the ids past it
// are never kept.)
int json_mask(const struct json_vocab *v, const struct jp *st, const int32_t *stop_ids, int n_stop,
              const float *logits /*[n]*/, float *out /*[n]*/, int n);
// st after token id (an end-of-generation token or stop id: as it was). <0 where the token was not allowed.
int json_advance(const struct json_vocab *v, struct jp *st, const int32_t *stop_ids, int n_stop, int32_t id);

#endif
