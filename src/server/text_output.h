// text_output.h — generated token ids → the text a client may see (owns: incremental
// detokenization state, stop-string matching and the held-back tail; not: the stop
// strings themselves, which the caller keeps alive). Invariant: released text never
// contains a stop string nor any part of one: a tail that could still grow into a stop
// string is held until it either completes (then it is dropped, with everything after it)
// or can no longer match (then it is released; one of the first n_include stop strings is released too,
// and only what follows it is dropped). Released text is always valid UTF-8.
// With min_tokens, a stop string or stop id counts only once the output holds more than that
// many tokens (a stop string that ends within their text is not one), as in vLLM.
#ifndef OCTET_TEXT_OUTPUT_H
#define OCTET_TEXT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../model/tokenizer.h"

// A growable byte buffer (always NUL-terminated when p != NULL).
struct text_buf {
    char *p;
    size_t n, cap;
};
int text_buf_append(struct text_buf *b, const char *s, size_t n);
int text_buf_printf(struct text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_buf_free(struct text_buf *b);

struct text_output {
    const struct tokenizer *tok;
    struct detok d;
    const char *const *stops;   // [n_stops] borrowed, non-empty strings
    int n_stops;
    const int32_t *stop_ids;    // [n_stop_ids] borrowed: tokens that end the output (end of turn)
    int n_stop_ids;
    struct text_buf held;       // decoded but not yet released
    size_t n_decoded;           // bytes decoded so far (released + held)
    size_t n_chars;             // characters (code points) decoded so far, for text_offset
    int min_tokens;             // stops count only after this many tokens (0 = always)
    int n_pushed;               // tokens pushed so far
    size_t stop_floor;          // a stop string must end past this byte offset (SIZE_MAX: none may yet;
                                // set as tokens arrive)
    int n_include;              // stops[0..n_include) are released with the text they end (vLLM's
                                // include_stop_str_in_output; a chat template's end string stays out)
    bool stopped;
};

// Starts a stream (min_tokens 0; set o->min_tokens before the first push for vLLM's min_tokens).
// Nothing is allocated until text arrives.
void text_output_init(struct text_output *o, const struct tokenizer *tok, const char *const *stops,
                      int n_stops, const int32_t *stop_ids, int n_stop_ids);
void text_output_free(struct text_output *o);
// Feeds one generated token and appends the text that became releasable to *out.
// Returns 1 when a stop string or stop id was hit (the text before it is released, the
// rest dropped; the caller should abort the request), 0 otherwise, <0 on out of memory.
// After a hit, further pushes release nothing.
int text_output_push(struct text_output *o, int32_t id, struct text_buf *out);
// Counts a generated token that holds no text of this output (a harmony header, another channel's
// text) towards min_tokens.
void text_output_skip(struct text_output *o);
// End of stream: releases the held tail and any incomplete UTF-8 (as U+FFFD).
int text_output_finish(struct text_output *o, struct text_buf *out);

// Copies n bytes into *out replacing every invalid UTF-8 sequence by U+FFFD (for token
// strings in logprobs, which may be partial characters).
int utf8_sanitize(const char *s, size_t n, struct text_buf *out);

#endif
