// oai_tokenize.h — vLLM's /tokenize and /detokenize (owns: their bodies' rules and answers; not: HTTP, or the
// prompt's rendering, which is oai_parse's). /tokenize returns the ids a prompt (as /v1/completions feeds it)
// or a conversation (its chat template rendered as /v1/chat/completions renders it, the generation prompt
// included) would be fed as, however long: {"count", "max_model_len", "tokens", "token_strs": null}.
// /detokenize returns ids' text, special tokens written out: {"prompt"}. A field that would change the answer
// and is not implemented (add_special_tokens other than the default, add_generation_prompt false,
// continue_final_message, return_token_strs) is refused naming it.
#ifndef OCTET_OAI_TOKENIZE_H
#define OCTET_OAI_TOKENIZE_H

#include <jansson.h>

#include "openai.h"

// 0 with *out the answer's body, or <0 with *e set.
int oai_tokenize(const struct oai_context *c, const char *body, size_t n, json_t **out, struct oai_error *e);
int oai_detokenize(const struct oai_context *c, const char *body, size_t n, json_t **out, struct oai_error *e);

#endif
