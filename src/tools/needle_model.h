// needle_model.h — model-level passkey retrieval (owns: the prompt recipe — filler
// sentences with "The pass key is NNNNN…" at a chosen depth, then the question — and the
// greedy check that the answer contains the number; not: the runner or model).
// Invariant: a prompt built for length L has at most L tokens, and the needle starts at
// the sentence boundary nearest depth% of the filler.
#ifndef OCTET_NEEDLE_MODEL_H
#define OCTET_NEEDLE_MODEL_H

#include <stdint.h>

#include "../engine/runner.h"

struct tokenizer;

// Token pieces of the recipe, tokenized once per tokenizer.
struct passkey_recipe {
    const struct tokenizer *tok;
    int32_t *intro, *question; // BOS (if the model adds one) + task statement; the question
    int n_intro, n_question;
    int32_t *filler[5];         // the five filler sentences
    int n_filler[5];
};

int passkey_recipe_init(struct passkey_recipe *rc, const struct tokenizer *t);
void passkey_recipe_free(struct passkey_recipe *rc);

// Builds the prompt for `key` (a decimal string) at depth_pct (0..100) with at most
// `length` tokens. *ids is malloc'd; *needle_at is the needle's first token index.
int passkey_prompt(const struct passkey_recipe *rc, int length, int depth_pct, const char *key,
                   int32_t **ids, int *n_ids, int *needle_at);

struct passkey_cell {
    int length, depth, trials, correct;
    int prompt_tokens;          // length of the last prompt built (≤ length)
    char sample[96];            // the last trial's generated text (for the table)
};

struct passkey_opts {
    int trials;         // prompts per cell, each with a fresh 5-digit key
    int max_new;        // greedy tokens generated per prompt
    uint64_t seed;      // keys are a function of (seed, length, depth)
};

// Runs one cell through r; a trial is correct if the generated text contains the key.
int passkey_run_cell(struct runner *r, const struct passkey_recipe *rc, int length, int depth_pct,
                     const struct passkey_opts *o, struct passkey_cell *out);

#endif
