// harmony.c — the reply router of gpt-oss's harmony format (see the header).
#include "harmony.h"

#include <string.h>

#include "../base/check.h"

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

// A channel's name, up to its first space ("commentary to=functions.f"): analysis is the reasoning,
// every other channel (final, commentary's preambles, an unknown one) the content.
static enum reply_part route_of(const struct harmony *h) {
    size_t n = strcspn(h->name, " ");
    return n == 8 && !memcmp(h->name, "analysis", 8) ? REPLY_REASONING : REPLY_CONTENT;
}

enum reply_part harmony_push(struct harmony *h, int32_t id) {
    if (id == h->message) {
        h->body = true;
        h->in_name = false;
        h->route = h->n_name ? route_of(h) : REPLY_CONTENT;  // (no channel named: content)
        return REPLY_CONTROL;
    }
    if (id == h->start || id == h->end) {  // a message ends; the next one's header follows
        h->body = h->in_name = false;
        h->n_name = 0;
        h->name[0] = 0;
        return REPLY_CONTROL;
    }
    if (id == h->channel) {
        h->in_name = true;
        h->n_name = 0;
        h->name[0] = 0;
        return REPLY_CONTROL;
    }
    if (id == h->constrain) {  // (the content type, "json", follows the channel's name)
        h->in_name = false;
        return REPLY_CONTROL;
    }
    if (h->body) return h->route;
    if (h->in_name) {
        char piece[64];
        size_t k = tokenizer_piece(h->tok, id, false, piece, sizeof piece);
        if (k > sizeof piece) k = sizeof piece;
        for (size_t i = 0; i < k && h->n_name + 1 < (int)sizeof h->name; i++) h->name[h->n_name++] = piece[i];
        h->name[h->n_name] = 0;
    }
    return REPLY_CONTROL;
}
