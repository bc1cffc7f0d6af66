// prompts.h — random prompts for the serving benchmarks (owns: loading just a model's
// tokenizer, and making text from random token ids that re-encodes to a chosen length;
// not: sending it anywhere).
// Invariant: generated text is valid UTF-8 without control characters or special-token
// strings, so any server accepts it as a JSON string and tokenizes it as plain text.
#ifndef OCTET_PROMPTS_H
#define OCTET_PROMPTS_H

#include <stdbool.h>

#include "../base/rng.h"

struct tokenizer;

// Loads the tokenizer of `path` without its weights: a GGUF file, a safetensors directory
// (tokenizer.json), or dummy:NAME (the byte-level stand-in at the preset's vocab size).
// Returns <0 with a message when path is none of these.
int prompts_load_tokenizer(const char *path, struct tokenizer **out);

struct prompt_gen {
    const struct tokenizer *tok;  // borrowed
    int *ids;                     // [n_ids] the "clean" vocabulary ids prompts are drawn from
    int n_ids;
    bool add_bos;                 // the server adds BOS: it counts toward the length
    struct rng rng;
};

int prompt_gen_init(struct prompt_gen *g, const struct tokenizer *t, unsigned long long seed);
void prompt_gen_free(struct prompt_gen *g);
// Makes a prompt that the tokenizer encodes (with BOS, if the model adds one) to n_tokens
// tokens, or as close as a few trim/extend rounds get; *text is malloc'd, *got the length
// it encodes to.
int prompt_gen_make(struct prompt_gen *g, int n_tokens, char **text, int *got);

#endif
