// harmony.c — the reply router of gpt-oss's harmony format (see the header).
#include "harmony.h"

#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "tool_calls.h"

static int special(const struct tokenizer *t, const char *text, int32_t *id) {
    *id = tokenizer_token_id(t, text, strlen(text));
    if (*id < 0)
        return err_set(OCT_EINVAL, "the harmony chat format needs the token %s, which the vocabulary lacks", text);
    return 0;
}

int harmony_init(struct harmony *h, const struct tokenizer *tok) {
    *h = (struct harmony){.tok = tok, .route = REPLY_CONTENT};
    int32_t ret, call;
    if (special(tok, "<|start|>", &h->start) < 0 || special(tok, "<|end|>", &h->end) < 0 ||
        special(tok, "<|message|>", &h->message) < 0 || special(tok, "<|channel|>", &h->channel) < 0 ||
        special(tok, "<|constrain|>", &h->constrain) < 0 || special(tok, "<|return|>", &ret) < 0 ||
        special(tok, "<|call|>", &call) < 0)
        return -1;
    return 0;
}

void harmony_free(struct harmony *h) {
    for (int i = 0; i < h->n_calls; i++) text_buf_free(&h->calls[i].args);
    free(h->calls);
    h->calls = NULL;
    h->n_calls = h->cap_calls = 0;
}

static void head_add(struct harmony *h, const char *s, size_t n) {
    for (size_t i = 0; i < n && h->n_head + 1 < (int)sizeof h->head; i++) h->head[h->n_head++] = s[i];
    h->head[h->n_head] = 0;
}

// The header's recipient: the word after "to=" (in the role part or after the channel's name), or NULL.
static const char *recipient(struct harmony *h, size_t *n) {
    for (const char *p = h->head; (p = strstr(p, "to=")); p += 3)
        if (p == h->head || strchr(" \t\n", p[-1])) {
            *n = strcspn(p + 3, " \t\n");
            return p + 3;
        }
    return NULL;
}

// At <|message|>: the route of the text that follows, and the call it opens.
static int open_message(struct harmony *h) {
    size_t n;
    const char *to = recipient(h, &n);
    if (!to) {  // analysis is the reasoning; final, commentary's preambles and unknown channels the content
        size_t k = strcspn(h->name, " ");
        h->route = h->n_name && k == 8 && !memcmp(h->name, "analysis", 8) ? REPLY_REASONING : REPLY_CONTENT;
        return 0;
    }
    if (n <= 10 || memcmp(to, "functions.", 10)) {  // a built-in tool's (browser, python): not the client's
        h->route = REPLY_CONTROL;
        return 0;
    }
    if (h->n_calls == h->cap_calls) {
        int cap = h->cap_calls ? 2 * h->cap_calls : 4;
        struct harmony_call *c = realloc(h->calls, sizeof *c * (size_t)cap);
        if (!c) return -1;
        h->calls = c;
        h->cap_calls = cap;
    }
    struct harmony_call *c = &h->calls[h->n_calls++];
    memset(c, 0, sizeof *c);
    n -= 10;
    if (n >= sizeof c->name) n = sizeof c->name - 1;
    memcpy(c->name, to + 10, n);
    h->route = REPLY_TOOL;
    return 0;
}

int harmony_push(struct harmony *h, int32_t id) {
    if (id == h->message) {
        h->body = true;
        h->in_name = false;
        if (open_message(h) < 0) return -1;
        h->n_head = 0;
        h->head[0] = 0;
        return REPLY_CONTROL;
    }
    if (id == h->start || id == h->end) {  // a message ends; the next one's header follows
        h->body = h->in_name = false;
        h->n_name = h->n_head = 0;
        h->name[0] = h->head[0] = 0;
        return REPLY_CONTROL;
    }
    if (id == h->channel || id == h->constrain) {  // (the content type, "json", follows the channel's name)
        h->in_name = id == h->channel;
        if (h->in_name) h->n_name = 0, h->name[0] = 0;
        head_add(h, " ", 1);
        return REPLY_CONTROL;
    }
    if (h->body) return (int)h->route;
    char piece[64];
    size_t k = tokenizer_piece(h->tok, id, false, piece, sizeof piece);
    if (k > sizeof piece) k = sizeof piece;
    head_add(h, piece, k);
    for (size_t i = 0; h->in_name && i < k && h->n_name + 1 < (int)sizeof h->name; i++) h->name[h->n_name++] = piece[i];
    h->name[h->n_name] = 0;
    return REPLY_CONTROL;
}

int harmony_call_text(struct harmony *h, int32_t id) {
    if (!h->n_calls) return 0;
    struct text_buf *a = &h->calls[h->n_calls - 1].args;
    char piece[64];
    size_t k = tokenizer_piece(h->tok, id, false, piece, sizeof piece);
    if (k <= sizeof piece) return text_buf_append(a, piece, k);
    char *big = malloc(k);
    if (!big) return -1;
    tokenizer_piece(h->tok, id, false, big, k);
    int rc = text_buf_append(a, big, k);
    free(big);
    return rc;
}

json_t *harmony_calls(const struct harmony *h, bool single, const char *id_base) {
    if (!h->n_calls) return NULL;
    json_t *calls = json_array();
    for (int k = 0; calls && k < (single ? 1 : h->n_calls); k++) {
        const struct harmony_call *c = &h->calls[k];
        json_error_t je;
        json_t *args = json_loadb(c->args.p ? c->args.p : "", c->args.n, JSON_DECODE_ANY, &je);
        json_t *one = tool_call_json(id_base, k, c->name, args, c->args.p ? c->args.p : "", c->args.n);
        json_decref(args);
        if (json_array_append_new(calls, one) < 0) { json_decref(calls); calls = NULL; }
    }
    return calls;
}
