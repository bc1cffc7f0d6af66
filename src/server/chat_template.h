// chat_template.h — chat messages → one prompt string (owns: detection of well-known
// template families from the model's Jinja text, and a native renderer for each; not:
// tokenization, nor a Jinja interpreter). A template we do not recognise falls back to ChatML; a
// checkpoint without one gets its architecture family's. Invariant: rendering is a pure function of
// (kind, messages, flags, options); only harmony's default date reads the clock.
#ifndef OCTET_CHAT_TEMPLATE_H
#define OCTET_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

enum chat_template_kind {
    CHAT_TEMPLATE_CHATML = 0,   // <|im_start|>role\n...<|im_end|>\n (the fallback)
    CHAT_TEMPLATE_LLAMA3,       // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
    CHAT_TEMPLATE_LLAMA2,       // <s>[INST] <<SYS>>..<</SYS>> user [/INST] answer </s>
    CHAT_TEMPLATE_GEMMA,        // <start_of_turn>user\n...<end_of_turn>\n
    CHAT_TEMPLATE_PHI3,         // <|user|>\n...<|end|>\n<|assistant|>\n
    CHAT_TEMPLATE_HARMONY,      // gpt-oss: <|start|>role<|message|>...<|end|>, answers in channels
    CHAT_TEMPLATE_QWEN3,        // ChatML with Qwen3's thinking switch (enable_thinking) and <think> blocks
};

// What a family's prompt may say beyond the messages (harmony's system message). NULL fields take
// the defaults: reasoning_effort "medium", date today's (UTC, YYYY-MM-DD).
struct chat_opts {
    const char *reasoning_effort;   // "low" | "medium" | "high"
    const char *date;
    bool no_thinking;               // qwen3 (enable_thinking false): the reply's <think> block closed at once
    const char *default_system;     // ChatML: the system text the template writes where the conversation has
                                    // none (chat_template_default_system), or NULL
    const char *const *tools;       // [n_tools] each tool's JSON text (tojson's: ", " and ": " separators)
    int n_tools;                    // > 0 only where chat_template_has_tools
};

// A call an earlier reply made: the function's name and its arguments' JSON text as the client sent it.
struct chat_tool_call {
    const char *name, *arguments;
    const char *id;             // the call's id (NULL: none given)
};

struct chat_msg {
    const char *role;           // "system" | "user" | "assistant" (developer → system) | "tool" (a call's result,
    const char *content;        // where chat_template_has_tools)
    const struct chat_tool_call *calls; // assistant: the calls the reply made, [n_calls]
    int n_calls;
    const char *tool_call_id;   // tool: the call it answers (NULL: none given)
    const char *reasoning;      // assistant: its reasoning_content as the client sends it back (NULL: none);
                                // Qwen3 and harmony render it where their templates do, the others drop it
};

// Picks the family by signature substrings of the Jinja source (NULL → ChatML).
enum chat_template_kind chat_template_detect(const char *jinja);
const char *chat_template_name(enum chat_template_kind k);
// The family's own template for a checkpoint that carries none, by struct model_config.arch
// (llama → llama3, mistral and mixtral → llama2's [INST], qwen2/qwen3/qwen3moe → ChatML, gemma2/gemma3 → gemma,
// phi3 → phi3, gptoss → harmony); ChatML for any other.
enum chat_template_kind chat_template_for_arch(const char *arch);
// What serving uses: the checkpoint's own template (chat_template_detect) where it has one, else its
// family's (chat_template_for_arch).
enum chat_template_kind chat_template_pick(const char *jinja, const char *arch);
// The text that ends an assistant turn ("<|im_end|>", "<|eot_id|>"…): a stop string/token.
const char *chat_template_end_of_turn(enum chat_template_kind k);
// Every text that ends a reply (stop strings/tokens) into out[0..2): the end of turn, and for harmony
// also <|call|> (a tool call, which ends sampling too). Returns how many.
int chat_template_stops(enum chat_template_kind k, const char *out[2]);
// Whether the family renders tools, tool calls and their results: ChatML and Qwen3 in the hermes format of
// Qwen2.5 and Qwen3's templates (the tools in the system message inside <tools></tools>, a call as
// <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, results as a user turn's <tool_response>s);
// harmony as gpt-oss's template does (the tools as a TypeScript namespace in the developer message, a call
// as a message to functions.NAME, a result as a message from it).
bool chat_template_has_tools(enum chat_template_kind k);
// The system message a ChatML template writes when the conversation has none, copied into out[0..cap) (NUL-
// terminated): the literal text of its '<|im_start|>system\n...<|im_end|>' (Qwen2.5: "You are Qwen, created by
// Alibaba Cloud. You are a helpful assistant."; Qwen2: "You are a helpful assistant."). Returns its length, or
// 0 where the template writes none (Qwen3's, most others) or it does not fit.
size_t chat_template_default_system(const char *jinja, char *out, size_t cap);
// The entries spans needs for msgs and o (2 a content: two a message, for a reply's kept reasoning and its
// text, and every tool's, every call's name and arguments).
size_t chat_template_n_spans(const struct chat_msg *msgs, int n, const struct chat_opts *o);
// True if the rendered text starts with the BOS token's text (then encode without adding
// BOS, parsing special tokens); false: the caller adds BOS as the model's default says.
bool chat_template_has_bos(enum chat_template_kind k);

// Renders msgs[0..n) into a malloc'd string (*out, caller frees). bos_text is the BOS
// token's text ("<s>", "<|begin_of_text|>", "<bos>"), used only where the family puts it.
// Returns 0, or <0 with err_msg() naming the bad message (unknown role).
int chat_template_render(enum chat_template_kind k, const struct chat_msg *msgs, int n,
                         bool add_generation_prompt, const char *bos_text, char **out);
// The same, and where each message's content went: spans[2i], spans[2i+1] (byte offsets into
// *out, ascending) for the i-th content in the text; spans has room for chat_template_n_spans entries (2n
// suffice without tools, calls, or a Qwen3 reply after the last user message). The rest of the text is the
// template's own (its special tokens).
int chat_template_render_spans(enum chat_template_kind k, const struct chat_msg *msgs, int n,
                               bool add_generation_prompt, const char *bos_text, char **out, size_t *spans);
// The same with the family's options (o may be NULL). Qwen3 renders ChatML, earlier replies without their
// <think> block (the text after the last </think>), and with no_thinking an empty block after the
// generation prompt. Harmony renders its system message (model
// identity, knowledge cutoff, date, reasoning effort, channels), a first system or developer message
// as the developer message's instructions, earlier assistant replies in the final channel; a system
// or developer message anywhere else is refused. With tools (o->n_tools) ChatML and Qwen3 put them in the
// system message; an assistant message's calls and the tool messages render in the hermes format, and Qwen3
// keeps the <think> block of the replies after the last user message (the current tool loop). Harmony puts
// them in the developer message, and a reply with calls, its calls and their results as its template does
// (chat_template.c's render_harmony says where octet goes beyond it); a template failure (a tool without a
// description, a result before any call) is an error naming the field.
int chat_template_render_opts(enum chat_template_kind k, const struct chat_msg *msgs, int n,
                              bool add_generation_prompt, const char *bos_text, const struct chat_opts *o,
                              char **out, size_t *spans);

#endif
