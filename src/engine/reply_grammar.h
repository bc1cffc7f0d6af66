// reply_grammar.h — what a constrained reply may be, read a byte at a time: a JSON object (JSON mode), or tool
// calls in the hermes format of Qwen2.5 and Qwen3, `<tool_call>\n{"name": "NAME", "arguments": OBJECT}\n
// </tool_call>` with NAME one of the request's functions, one call or several joined by "\n" (tool_choice
// "required"), after a free <think> block where the server parses one (the phase, which tokens move). Owns:
// that state, small enough to copy for every token of a vocabulary; not: JSON's grammar (base/json_prefix.c)
// or which tokens a step may draw (reply_mask.c).
#ifndef OCTET_REPLY_GRAMMAR_H
#define OCTET_REPLY_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/json_prefix.h"

#define REPLY_MAX_NAMES 64  // (the functions a call may name: a bit each)

enum reply_kind { REPLY_JSON_OBJECT = 1, REPLY_HERMES_CALLS };

// What a request asks of its reply.
struct reply_spec {
    enum reply_kind kind;
    const char *const *names;  // HERMES_CALLS: [n_names] the functions (plain text: no '"', '\' or controls)
    int n_names;
    bool single;               // HERMES_CALLS: one call (parallel_tool_calls false)
    // think: a reasoning block comes before the constrained part (--reasoning-parser): free text from
    // think_open (which the reply may begin with) to think_close; think_first: the reply begins inside it
    // (DeepSeek-R1)
    bool think, think_first;
    int32_t think_open, think_close;
};

// Where a reply is: its first token (which may open the block), inside the block, or in the grammar.
enum reply_phase { REPLY_PHASE_FIRST, REPLY_PHASE_THINK, REPLY_PHASE_GRAMMAR };

struct reply_state {
    const struct reply_spec *spec;
    uint8_t part;              // hermes: the part of a call being read (reply_grammar.c)
    uint16_t off;              // bytes of the part's literal, or of the name, read
    uint64_t cand;             // the names that still match the name's bytes
    bool whole;                // the reply so far is whole: its end may come
    uint8_t phase;             // enum reply_phase (tokens, not bytes, move it: reply_mask.c)
    struct jp json;            // the object (JSON mode), or the call's arguments
};

// A spec's check: names plain and at most REPLY_MAX_NAMES of them. 0 or <0 with err_msg().
int reply_spec_check(const struct reply_spec *spec);
// A checked copy that owns its names (one allocation; free with reply_spec_free), or NULL with err_msg().
struct reply_spec *reply_spec_copy(const struct reply_spec *spec);
void reply_spec_free(struct reply_spec *spec);
void reply_state_init(struct reply_state *s, const struct reply_spec *spec);
// Reads p[0..n). 0 while the reply so far begins one the spec allows; -1 once it cannot.
int reply_feed(struct reply_state *s, const char *p, size_t n);
bool reply_whole(const struct reply_state *s);
// Inside a JSON string's text with no UTF-8 character begun (jp_in_text).
bool reply_in_text(const struct reply_state *s);

#endif
