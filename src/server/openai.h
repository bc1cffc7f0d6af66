// openai.h — OpenAI-shaped JSON ↔ engine requests (owns: validation of request bodies
// for /v1/completions and /v1/chat/completions, building gen_request + stop strings,
// and every response/chunk/error body; not: HTTP, sockets or the engine's queues).
// Invariant: a body either parses into a request the engine will accept (prompt fits
// max_model_len with max_tokens) or yields an oai_error naming the field at fault; a field
// octet does not implement is refused (oai_fields.h), never ignored.
#ifndef OCTET_OPENAI_H
#define OCTET_OPENAI_H

#include <jansson.h>
#include <stdbool.h>

#include "../engine/engine.h"
#include "../engine/reply_grammar.h"
#include "call_stream.h"
#include "chat_template.h"
#include "harmony.h"
#include "text_output.h"
#include "tool_calls.h"

#define OAI_MAX_STOPS 4
#define OAI_MAX_N 128  // choices a request may ask for (OpenAI's limit)

enum oai_kind { OAI_COMPLETION = 0, OAI_CHAT };

// vLLM's --reasoning-parser for <think> blocks: none (the reply's text as generated); qwen3 (a reply that
// opens with <think> reasons until </think>); deepseek_r1 (every reply reasons until </think>, its template
// having opened the block). The block's text is the reply's reasoning_content, the rest its content.
enum oai_reasoning { OAI_REASONING_NONE = 0, OAI_REASONING_QWEN3, OAI_REASONING_DEEPSEEK_R1 };

struct oai_error {
    int status;             // HTTP status (400, 401, 404, 405, 413, 500, 503)
    const char *type;       // "invalid_request_error", "not_found_error", "server_error"…
    const char *param;      // the field at fault, or NULL
    const char *code;       // "model_not_found", "invalid_api_key"…, or NULL
    char message[512];
};

// What the server knows about its model (all borrowed, alive while the server runs).
struct oai_context {
    const struct tokenizer *tok;
    const char *served_name;    // the name clients use in "model"
    const char *model_path;     // also accepted in "model"
    int max_model_len;
    enum chat_template_kind tmpl;
    bool special_in_content;    // chat: parse special-token text inside message content too
                                // (default false: only the template's own text holds special tokens)
    enum oai_reasoning reasoning;   // chat: how a reply's <think> block is told apart (harmony: by channel)
    bool tool_parser;           // --enable-auto-tool-choice --tool-call-parser: replies' calls as tool_calls
    bool tool_parser_harmony;   // the parser named is openai (gpt-oss's harmony calls), not hermes
    const char *default_system; // ChatML: the template's system text for a conversation without one, or NULL
};

struct oai_request {
    enum oai_kind kind;
    struct gen_request gen;     // gen.prompt points at prompt_ids
    int32_t *prompt_ids;        // [n_prompt] malloc'd
    int n_prompt;
    char *stops[OAI_MAX_STOPS + 2]; // malloc'd; +2 for the chat template's end-of-turn texts
    int n_stops;
    int32_t *stop_ids;          // [n_stop_ids] malloc'd: stop_token_ids, then (chat) the end-of-turn
    int n_stop_ids;             // tokens the vocabulary has; gen.stop_ids points here
    struct logit_bias *bias;    // [gen.sp.n_bias] malloc'd; gen.sp.bias points here
    bool echo;                  // completions: "echo": true
    char *echo_text;            // with echo: the prompt's text (malloc'd)
    size_t n_echo;
    int n;                      // choices asked for (each its own engine request: http.c)
    bool stream, include_usage;
    bool continuous_usage;      // stream_options.continuous_usage_stats (vLLM's, with include_usage): every
                                // chunk carries the usage so far
    bool include_stop;          // vLLM's include_stop_str_in_output: a stop string that ends the text is in it
    int n_user_stops;           // stops[0..n_user_stops) are the request's (a chat template's end strings follow)
    bool logprobs;              // completions: "logprobs" given; chat: "logprobs": true
    struct tool_set tools;      // chat: the tools rendered, and whether the reply's calls are parsed
    struct reply_spec reply;    // a constrained reply (gen.reply points here; names: tools.names)
};

// A seed for a request without one, and the randomness of response ids (a counter mixed with the clock).
uint64_t oai_random_u64(void);

void oai_error_set(struct oai_error *e, int status, const char *type, const char *param, const char *code,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
// The error body {"error":{"message","type","param","code"}} (malloc'd JSON text).
char *oai_error_body(const struct oai_error *e);

// A body's optional "model": the served name or the model's path (404 model_not_found otherwise, 400 when not
// a string). 0 or -1 with *e set.
int oai_check_model(const struct oai_context *c, json_t *body, struct oai_error *e);
// Parses and validates a request body. Returns 0, or <0 with *e filled (r is then freed).
int oai_parse(const struct oai_context *c, enum oai_kind kind, const char *body, size_t n,
              struct oai_request *r, struct oai_error *e);
void oai_request_free(struct oai_request *r);

// One response as it is produced, streamed (chunk by chunk) or whole.
struct oai_response {
    const struct oai_context *c;
    const struct oai_request *r;
    char id[48];
    long long created;
    struct text_output out;
    struct text_buf text;       // whole mode: the released text so far
    // chat whose replies reason first (harmony's analysis channel, or a <think> block under a reasoning parser):
    // the reasoning is decoded apart (reasoning_content, vLLM's field); out and text hold the rest
    bool harmony;
    struct harmony hm;
    int think;                  // --reasoning-parser: 0 off, 1 before the reply's first token, 2 inside
    int32_t think_open, think_close;    // the block, 3 after it; <think> and </think>
    struct text_output rout;
    struct text_buf rtext;      // whole mode: the reasoning released so far
    struct call_stream cs;      // streaming with r->tools.parse: the calls as they are generated
    int cs_open;                // harmony: calls opened in cs
    json_t *lp;                 // whole mode: logprobs accumulated (NULL if not asked)
    bool streaming, sent_role;
    int n_generated;            // tokens consumed up to (and including) a stop
};

void oai_response_init(struct oai_response *s, const struct oai_context *c, const struct oai_request *r,
                       bool streaming);
void oai_response_free(struct oai_response *s);
// Feeds one GEN_TOKEN event. Streaming: *chunk gets the chunk to send, or NULL when
// this token released no text and carries no logprobs. Returns 1 once a stop string or
// stop token was hit (the caller aborts the request; later tokens are ignored), 0, or <0.
int oai_response_token(struct oai_response *s, const struct gen_event *ev, json_t **chunk);
// The end (finish_reason "stop", "length" or "abort"). Streaming: *chunk gets the last
// chunk (held-back text and finish_reason). Whole: *chunk gets the full response body.
int oai_response_finish(struct oai_response *s, const char *finish_reason, int n_cached, json_t **chunk);
// Streaming: the opening chunk. Chat: delta {"role":"assistant","content":""}; completions
// with echo: the prompt's text; other completions: NULL.
json_t *oai_response_first_chunk(struct oai_response *s);
// stream_options.include_usage: the final chunk with empty choices and usage.
json_t *oai_response_usage_chunk(const struct oai_response *s, int n_cached);

// GET /v1/models body.
json_t *oai_models(const struct oai_context *c, long long created);

#endif
