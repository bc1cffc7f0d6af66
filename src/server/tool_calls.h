// tool_calls.h — tool calling as vLLM's --enable-auto-tool-choice does it. Owns: a chat request's tools,
// tool_choice and parallel_tool_calls read into what the chat template renders; the calls of earlier replies
// read from their messages; the OpenAI form of a call; the calls a reply makes in the hermes format of
// Qwen2.5 and Qwen3 (--tool-call-parser hermes), found in its whole text (every <tool_call>JSON</tool_call>).
// Not: a streamed reply's calls (call_stream.c), the template's text (chat_template.c), gpt-oss's calls
// (harmony.c finds them by the message's recipient, --tool-call-parser openai), HTTP, or the response bodies.
#ifndef OCTET_TOOL_CALLS_H
#define OCTET_TOOL_CALLS_H

#include <jansson.h>
#include <stdbool.h>

#include "chat_template.h"
#include "text_output.h"

// One request's tools.
struct tool_set {
    char **tools;       // [n_tools] each tool object's JSON text as the template's tojson writes it (malloc'd)
    int n_tools;
    char **names;       // [n_tools] each tool's function name (malloc'd)
    bool parse;         // tool_choice "auto" (the default with tools) or "required": the reply's calls are
                        // returned as tool_calls
    bool required;      // tool_choice "required": the reply is calls (hermes: constrained to them)
    bool single;        // parallel_tool_calls false: only the first call is returned
    char *named;        // tool_choice {"type": "function", "function": {"name"}}: the reply is that function's
                        // arguments, a JSON object (JSON mode), returned as its one call (malloc'd; NULL: not)
};

// Reads a chat body's tools, tool_choice and parallel_tool_calls. parser: the server runs a tool-call parser
// (needed for tool_choice "auto", not for a named function, as in vLLM); has_tools: the chat template renders
// tools. "required" and a named function need no parser either (their replies are constrained). Returns 0, or
// -1 with err_msg() set and *param the field at fault.
int tool_set_read(json_t *body, bool parser, bool has_tools, struct tool_set *t, const char **param);
void tool_set_free(struct tool_set *t);

// messages[i].tool_calls (an assistant message's): [{"type": "function", "function": {"name", "arguments"}}]
// into *calls (malloc'd; the strings are the JSON's, alive while m is). The arguments are read as JSON and
// written back into m as Python's json.dumps writes them (what vLLM hands a template: "" as {}), so a prompt
// does not depend on the client's spacing. Absent: *n 0. Returns 0 or <0 with err_msg() naming the entry
// (arguments that are not JSON included).
int tool_calls_of_message(json_t *m, size_t i, struct chat_tool_call **calls, int *n);

// One OpenAI tool call: {"id": "call_<id_base>_<k>", "type": "function", "function": {"name", "arguments"}},
// the arguments args as Python's json.dumps writes them (pyjson.h, as vLLM's parsers re-serialise them), or
// where args is NULL the text raw[0..n) as generated (made valid UTF-8). NULL: out of memory.
// A call's id: "call_<id_base>_<k>".
void tool_call_id(const char *id_base, int k, char *buf, size_t cap);
json_t *tool_call_json(const char *id_base, int k, const char *name, const json_t *args, const char *raw, size_t n);

// The calls in a reply's text. Returns a JSON array of tool_call_json's calls, the first only when single, and
// *content_n the bytes of text before the first <tool_call>; NULL where the text has no call or one does not
// parse as {"name": string, "arguments": ...} (then all of it is content, as vLLM's hermes parser leaves it).
json_t *tool_calls_parse(const char *text, size_t n, bool single, const char *id_base, size_t *content_n);

#endif
