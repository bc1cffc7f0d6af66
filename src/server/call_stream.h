// call_stream.h — a streamed chat reply's tool calls as OpenAI's deltas, sent while they are generated (as vLLM's
// streaming tool parsers do): a call's first delta carries its index, id, type and name (arguments ""), the
// later ones pieces of its arguments, written as Python's json.dumps writes the value (json_stream.h), so the
// pieces of a call concatenate to the arguments the whole reply returns, ids included. Owns: in the hermes
// format (--tool-call-parser hermes), where a call's text begins and ends (<tool_call>{"name": ..., "arguments":
// ...}</tool_call>), which text around the calls is content, and each call's name and arguments; for gpt-oss
// (--tool-call-parser openai) each call's arguments, the call itself being found by harmony.c. Not: the chunks
// (openai.c), or the whole reply's calls (tool_calls.c, harmony.c).
//
// Hermes: text passes as content until a <tool_call> begins; from there on only calls are sent (text between
// and after them is dropped, as the whole reply drops it). A call is announced once its name is read and its
// arguments have begun. Where the first call proves not to be one (not JSON, no string "name", no "arguments")
// before it was announced, its text and everything after it are content, as in the whole reply; a call that
// fails later (cut off, or not JSON past its arguments' start) ends the calls where it failed, and the reply's
// finish_reason is the generation's (the whole reply would then return all the text as content: a stream cannot
// take back what it sent). gpt-oss: a call's arguments that stop being JSON are sent from there on as generated
// (the whole reply returns such arguments as generated).
#ifndef OCTET_CALL_STREAM_H
#define OCTET_CALL_STREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "json_stream.h"
#include "text_output.h"

struct call_stream {
    const char *id_base;     // the response's id (tool_call_json's ids)
    bool single;             // parallel_tool_calls false: the first call only
    int mode;                // hermes: where the text is (call_stream.c)
    struct text_buf held;    // hermes: a tail that may become "<tool_call>"; in a call: the call's text so far
    struct json_stream js;   // the current call's JSON (hermes: its object; gpt-oss: its arguments)
    struct text_buf norm;    // what js wrote (gpt-oss: then the text as generated, once it failed)
    size_t args_at, args_end;  // hermes: the arguments' place in norm (SIZE_MAX: not begun / still growing)
    size_t name_at;          // hermes: the name's value in norm
    char *name;              // hermes: the name, once read (malloc'd)
    size_t sent;             // bytes of the current call's arguments sent
    bool announced;          // the current call's first delta is out
    bool failed;             // gpt-oss: the arguments are not JSON
    bool muted;              // gpt-oss: a call past the first with single
    int n_calls;             // calls announced
    int n_done;              // hermes: calls whose text is whole
    bool broken;             // hermes: a call failed after calls were sent
    json_t *deltas;          // [tool_calls entries] not yet taken (NULL: none)
};

// json_stream's buffers are allocated as text arrives; id_base must outlive s.
int call_stream_init(struct call_stream *s, const char *id_base, bool single);
void call_stream_free(struct call_stream *s);
// Hermes: the reply's next released text; appends to content what may be sent as content now.
int call_stream_text(struct call_stream *s, const char *text, size_t n, struct text_buf *content);
// gpt-oss: a message to functions.NAME has begun (its first delta), and the next bytes of its text (also the
// whole reply of a tool_choice that names a function: one call, opened at the reply's first token).
int call_stream_open(struct call_stream *s, const char *name);
int call_stream_args(struct call_stream *s, const char *text, size_t n);
// The reply has ended: the held text that is content (hermes), the last pieces of the last call.
int call_stream_finish(struct call_stream *s, struct text_buf *content);
// A call's whole arguments text as its streamed deltas join: json.dumps' form while it is JSON, as generated
// from where it stops being it (a reply cut off: its beginning). Appends to out; 0 or -1 (out of memory).
int call_stream_rewrite(const char *text, size_t n, struct text_buf *out);
// The reply made calls (finish_reason "tool_calls"): gpt-oss, any; hermes, whole ones and none broken.
bool call_stream_called(const struct call_stream *s);
// The tool_calls entries made since the last take ([{"index", ...}], consecutive pieces of a call as one), or
// NULL when there are none.
json_t *call_stream_take(struct call_stream *s);

#endif
