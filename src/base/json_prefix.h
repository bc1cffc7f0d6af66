// json_prefix.h — whether bytes are the beginning of a JSON text, read a byte at a time in a state small enough
// to copy for every token of a vocabulary (owns: that state and RFC 8259's grammar, UTF-8 inside strings
// included; not: which tokens a step may draw, engine/reply_mask.c). The text is one value, an object when
// object_only (OpenAI's JSON mode), with whitespace before and inside it; nothing may follow it. Escapes are
// checked as jansson checks them (\u0000 and unpaired surrogates refused), nesting to JP_MAX_DEPTH levels.
// A run of whitespace between two tokens of the grammar holds at most 2 + 4 × depth bytes (a newline and
// json.dumps(indent=4)'s indentation fit), so a constrained reply cannot spin in whitespace.
#ifndef OCTET_JSON_PREFIX_H
#define OCTET_JSON_PREFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JP_MAX_DEPTH 256

struct jp {
    uint8_t st;          // where the text is (json_prefix.c)
    uint8_t sub;         // number: its part; literal: bytes matched; \u: digits read; UTF-8: bytes to come
    uint8_t lit;         // the literal being read (0 true, 1 false, 2 null)
    uint8_t lo, hi;      // UTF-8: the range of the next continuation byte
    uint16_t ws;         // whitespace bytes in the run so far
    bool key;            // the string is an object's key
    bool object_only;
    bool low;            // the \u being read must be a low surrogate
    uint16_t code;       // \u: the digits' value so far
    uint16_t depth;
    uint64_t obj[JP_MAX_DEPTH / 64];  // bit d: level d is an object (else an array)
};

void jp_init(struct jp *s, bool object_only);
// Reads p[0..n). Returns 0 while the bytes so far begin a JSON text, -1 once they cannot (and stays so).
int jp_feed(struct jp *s, const char *p, size_t n);
// Inside a string's text with no UTF-8 character begun: any bytes that are whole UTF-8 characters without '"',
// '\' or control characters leave the state as it is (the vocabulary mask's fast path).
bool jp_in_text(const struct jp *s);
// The bytes so far are a whole JSON text (its value has ended: a number only ends at the next byte, so a
// bare number is never whole, and object_only texts are never numbers).
bool jp_complete(const struct jp *s);

#endif
