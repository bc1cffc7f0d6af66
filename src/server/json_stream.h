// json_stream.h — one JSON value's text, read as a model generates it, written again as Python's
// json.dumps(v, ensure_ascii=False) writes the value (pyjson.h's form) as soon as each part of it is decided:
// whitespace dropped, ", " and ": " as separators, strings' escapes decoded and written again (a character at
// a time, so a long string streams), each number and literal once it has ended (jansson reads it, pyjson writes
// it, as the whole reply's path does). So the pieces a streamed tool call sends concatenate to the arguments the
// whole reply returns. Owns: that lexing and rewriting, and where an object's top-level members begin and end
// (the hermes parser finds a call's "name" and "arguments" by them); not: where the value sits in the reply or
// what is sent (call_stream.c).
//
// Where the text is not JSON as jansson reads it (a control character in a string, an unpaired surrogate,
// \u0000, a bad number or literal, nesting past jansson's 2048 levels) the stream stops at the first byte that
// makes it so. Two things a whole parse treats otherwise are passed as written: a key repeated in one object
// (jansson and Python keep its last value, at its first place) and text after the value.
#ifndef OCTET_JSON_STREAM_H
#define OCTET_JSON_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "text_output.h"

#define JSON_STREAM_MAX_DEPTH 2048  // jansson's JSON_PARSER_MAX_DEPTH

// What json_stream_push stopped at.
enum jse {
    JSE_NOMEM = -1,
    JSE_MORE = 0,   // all of the text was read; the value goes on
    JSE_VALUE,      // a top-level object's member value is about to begin (member: its key as written, quoted);
                    // nothing of it has been read
    JSE_END,        // that value has ended: all of it is written
    JSE_DONE,       // the whole value has ended (and stays so)
    JSE_FAIL,       // not JSON from the byte at *used on (and stays so); raw holds the bytes read before it
                    // but not written (a number, literal or escape unfinished)
};

struct json_stream {
    int state;
    bool key;            // the string being read is an object's key
    bool told;           // JSE_VALUE was returned for the member value about to begin
    bool cap;            // writing a top-level object's key: member gets the bytes too
    uint32_t hi;         // a high surrogate waiting for its low half
    int depth;
    char open[JSON_STREAM_MAX_DEPTH];  // '{' or '[' a level
    struct text_buf raw;               // a number, literal or escape being read, as generated
    char member[64];                   // the current top-level member's key as written (truncated)
    int n_member;
};

void json_stream_init(struct json_stream *j);
void json_stream_free(struct json_stream *j);
// Reads text[0..n) until an event, appending what became decided to out; *used: the bytes read.
// Returns the event (JSE_MORE when all n were read) or JSE_NOMEM.
int json_stream_push(struct json_stream *j, const char *text, size_t n, struct text_buf *out, size_t *used);
// The text has ended (a top-level number or literal ends here). Returns JSE_DONE, JSE_FAIL (the value is not
// whole) or JSE_NOMEM.
int json_stream_finish(struct json_stream *j, struct text_buf *out);

#endif
