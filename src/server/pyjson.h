// pyjson.h — JSON values written as Python's json.dumps(v, ensure_ascii=False) writes them, the form chat
// templates see through transformers' tojson filter (owns: that text form; not: parsing, which is jansson's).
// Separators ", " and ": ", keys in their order, integers as written, reals as Python's repr (the shortest
// digits that read back to the same double: 0.1, 2.0, 1e+20, 2.5e-05), strings with only '"', '\' and the
// control characters escaped (\n \r \t \b \f, others \u00xx), everything else as UTF-8.
#ifndef OCTET_PYJSON_H
#define OCTET_PYJSON_H

#include <jansson.h>

#include "text_output.h"

// Appends v's text. Returns 0 or -1 (out of memory).
int pyjson_dump(const json_t *v, struct text_buf *out);
// Appends s[0..n) as a JSON string literal (quotes included); pyjson_escape: its characters only.
int pyjson_escape(const char *s, size_t n, struct text_buf *out);
int pyjson_string(const char *s, size_t n, struct text_buf *out);
// Appends what Python's str() gives for v where it is a scalar (a string as is, True/False/None, numbers as
// above); arrays and objects as pyjson_dump.
int pyjson_str(const json_t *v, struct text_buf *out);

#endif
