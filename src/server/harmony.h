// harmony.h — gpt-oss's generated messages → what a client sees (owns: the header/channel state of a
// reply in OpenAI's harmony format; not: the text itself, which text_output decodes). A reply is a
// series of messages, each `[<|start|>assistant]<|channel|>NAME<|message|>TEXT<|end|>`, the last
// ending `<|return|>` (or `<|call|>`) instead of `<|end|>`. Every generated token is routed: the text
// of the analysis channel is the reasoning (vLLM's reasoning_content), the final and commentary
// channels' text is the content, and the headers and control tokens are neither.
#ifndef OCTET_HARMONY_H
#define OCTET_HARMONY_H

#include <stdbool.h>
#include <stdint.h>

#include "../model/tokenizer.h"

// Where a reasoning reply's token belongs (also the <think> blocks' router in openai.c).
enum reply_part { REPLY_CONTROL = 0, REPLY_CONTENT, REPLY_REASONING };

struct harmony {
    const struct tokenizer *tok;
    int32_t start, end, message, channel, constrain;  // the format's special tokens
    bool body;          // inside a message's text (after <|message|>)
    bool in_name;       // reading the channel's name (after <|channel|>)
    char name[32];      // the channel's name so far (truncated)
    int n_name;
    enum reply_part route;  // where the current message's text goes
};

// The ids of the harmony special tokens; <0 (err_msg() naming the first one missing) if the vocabulary
// lacks any, so a tokenizer that cannot speak the format is refused before serving.
int harmony_init(struct harmony *h, const struct tokenizer *tok);
// Where generated token id belongs (a reply starts after the prompt's `<|start|>assistant`).
enum reply_part harmony_push(struct harmony *h, int32_t id);

#endif
