// harmony.h — gpt-oss's generated messages → what a client sees (owns: the header/channel state of a
// reply in OpenAI's harmony format, and the tool calls found in it; not: the text itself, which text_output
// decodes). A reply is a series of messages, each `[<|start|>assistant]HEADER<|message|>TEXT<|end|>`, the
// last ending `<|return|>` (or `<|call|>`) instead of `<|end|>`; the header names the channel
// (`<|channel|>analysis`) and may name a recipient (`to=functions.get_weather`, before or after the channel)
// and a content type (`json`, `<|constrain|>json`). Every generated token is routed: the text of the analysis
// channel is the reasoning (vLLM's reasoning_content); the text of a message to a recipient is not the
// client's to read (to `functions.NAME`: a tool call, whose text is its arguments; to a built-in tool: neither);
// the final and commentary channels' other text is the content; the headers and control tokens are none.
#ifndef OCTET_HARMONY_H
#define OCTET_HARMONY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../model/tokenizer.h"
#include "text_output.h"

// Where a reasoning reply's token belongs (also the <think> blocks' router in openai.c).
enum reply_part { REPLY_CONTROL = 0, REPLY_CONTENT, REPLY_REASONING, REPLY_TOOL };

// A call the reply made: the function's name (after "functions.") and its arguments' text as generated.
struct harmony_call {
    char name[72];
    struct text_buf args;
};

struct harmony {
    const struct tokenizer *tok;
    int32_t start, end, message, channel, constrain;  // the format's special tokens
    bool body;          // inside a message's text (after <|message|>)
    bool in_name;       // reading the channel's name (after <|channel|>)
    char name[32];      // the channel's name so far (truncated)
    int n_name;
    char head[192];     // the whole header so far (role, recipient, channel, content type; truncated)
    int n_head;
    enum reply_part route;  // where the current message's text goes
    struct harmony_call *calls;     // [n_calls] the calls so far (the last one may still be growing)
    int n_calls, cap_calls;
};

// The ids of the harmony special tokens; <0 (err_msg() naming the first one missing) if the vocabulary
// lacks any, so a tokenizer that cannot speak the format is refused before serving.
int harmony_init(struct harmony *h, const struct tokenizer *tok);
void harmony_free(struct harmony *h);
// Where generated token id belongs (a reply starts after the prompt's `<|start|>assistant`). A message to
// functions.NAME opens a call (h->calls[h->n_calls - 1]) at its <|message|>; <0: out of memory.
int harmony_push(struct harmony *h, int32_t id);
// Appends a REPLY_TOOL token's bytes to the current call's arguments. Returns 0 or -1 (out of memory).
int harmony_call_text(struct harmony *h, int32_t id);
// The calls as OpenAI tool_calls (tool_calls.h's tool_call_json: arguments re-serialised where they parse as
// JSON, else as generated), the first only when single; NULL when the reply made none (or out of memory).
json_t *harmony_calls(const struct harmony *h, bool single, const char *id_base);

#endif
