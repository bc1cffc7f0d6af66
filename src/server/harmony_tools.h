// harmony_tools.h — a chat request's tools as gpt-oss's chat template writes them into its developer message
// (owns: the TypeScript-like "functions" namespace, each JSON Schema rendered as the template's
// render_typescript_type macro renders it, whitespace included; not: the rest of the prompt, chat_template.c).
#ifndef OCTET_HARMONY_TOOLS_H
#define OCTET_HARMONY_TOOLS_H

#include "text_output.h"

// Appends "## functions\n\nnamespace functions {\n\n" ... "} // namespace functions" for tools[0..n) (each
// tool's JSON text, {"type": "function", "function": {"name", "description", "parameters"}}). Returns 0, or
// <0 with err_msg() naming the tool and field where the template itself fails (a tool without a string
// description, a non-string default of an enum, ...), or OCT_ENOMEM.
int harmony_tools_render(const char *const *tools, int n, struct text_buf *out);

#endif
