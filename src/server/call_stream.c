// call_stream.c — a streamed reply's tool calls as OpenAI's deltas (see the header).
#include "call_stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tool_calls.h"

static const char OPEN[] = "<tool_call>";

enum {
    M_CONTENT,  // before the first call: text is content
    M_CALL,     // inside a call's text
    M_BETWEEN,  // after a call: text is dropped until the next <tool_call>
    M_PLAIN,    // the first call was not one: all text is content
    M_DEAD,     // the calls have ended (a failed call, or the first one of a single reply): text is dropped
    M_HARMONY,  // gpt-oss: calls are opened by call_stream_open
};

int call_stream_init(struct call_stream *s, const char *id_base, bool single) {
    memset(s, 0, offsetof(struct call_stream, js));
    s->id_base = id_base;
    s->single = single;
    json_stream_init(&s->js);
    s->norm = (struct text_buf){0};
    s->args_at = s->args_end = SIZE_MAX;
    s->name_at = s->sent = 0;
    s->announced = s->failed = s->muted = false;
    s->n_calls = s->n_done = 0;
    s->broken = false;
    s->deltas = NULL;
    s->name = NULL;
    return 0;
}

void call_stream_free(struct call_stream *s) {
    text_buf_free(&s->held);
    json_stream_free(&s->js);
    text_buf_free(&s->norm);
    free(s->name);
    s->name = NULL;
    json_decref(s->deltas);
    s->deltas = NULL;
}

// Adds a tool_calls entry for the current call: the first (with name) or a piece of its arguments; a piece
// joins the entry before it when that one is the same call's.
static int add_delta(struct call_stream *s, const char *name, const char *args, size_t n) {
    const int k = s->n_calls - 1;
    struct text_buf a = {0};
    if (utf8_sanitize(args, n, &a) < 0) return -1;
    json_t *last = s->deltas ? json_array_get(s->deltas, json_array_size(s->deltas) - 1) : NULL;
    json_t *fn = json_object_get(last, "function"), *prev = json_object_get(fn, "arguments");
    int rc = -1;
    if (!name && prev && json_integer_value(json_object_get(last, "index")) == k) {
        struct text_buf j = {0};
        if (text_buf_append(&j, json_string_value(prev), json_string_length(prev)) == 0 &&
            text_buf_append(&j, a.p ? a.p : "", a.n) == 0)
            rc = json_object_set_new(fn, "arguments", json_stringn(j.p, j.n));
        text_buf_free(&j);
    } else {
        if (!s->deltas && !(s->deltas = json_array())) goto out;
        json_t *e;
        if (name) {
            char id[96];
            tool_call_id(s->id_base, k, id, sizeof id);
            e = json_pack("{s:i,s:s,s:s,s:{s:s,s:s%}}", "index", k, "id", id, "type", "function", "function", "name",
                          name, "arguments", a.p ? a.p : "", a.n);
        } else {
            e = json_pack("{s:i,s:{s:s%}}", "index", k, "function", "arguments", a.p ? a.p : "", a.n);
        }
        rc = json_array_append_new(s->deltas, e);
    }
out:
    text_buf_free(&a);
    return rc;
}

// Bytes of p[0..n) that end on a whole UTF-8 character (an unfinished one waits for its other bytes).
static size_t utf8_whole(const char *p, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const unsigned char c = (unsigned char)p[n - back];
        if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
        const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return len > back ? n - back : n;
    }
    return n;
}

// Sends the current call's arguments written so far (args[0..n); all of them when final).
static int send_args(struct call_stream *s, const char *args, size_t n, bool final) {
    if (!s->announced) return 0;
    const size_t upto = final ? n : utf8_whole(args, n);
    if (upto <= s->sent) return 0;
    int rc = add_delta(s, NULL, args + s->sent, upto - s->sent);
    s->sent = upto;
    return rc;
}

static int hermes_send(struct call_stream *s, bool final) {
    if (s->args_at == SIZE_MAX) return 0;
    const size_t end = s->args_end != SIZE_MAX ? s->args_end : s->norm.n;
    return send_args(s, s->norm.p + s->args_at, end - s->args_at, final || s->args_end != SIZE_MAX);
}

// The call's "name" has been read (norm[name_at..)): kept, NULL unless a string.
static int hermes_name(struct call_stream *s) {
    json_error_t e;
    json_t *v = json_loadb(s->norm.p + s->name_at, s->norm.n - s->name_at, JSON_DECODE_ANY, &e);
    if (!json_is_string(v)) {
        json_decref(v);
        return 1;
    }
    s->name = strdup(json_string_value(v));
    json_decref(v);
    return s->name ? 0 : -1;
}

// Once the name is read and the arguments have begun, the call is announced (with the arguments written so far).
static int hermes_announce(struct call_stream *s) {
    if (s->announced || !s->name || s->args_at == SIZE_MAX) return 0;
    s->n_calls++;
    if (add_delta(s, s->name, "", 0) < 0) return -1;
    s->announced = true;
    return 0;
}

// A call that is not one: content from its tag on while nothing of the calls was sent, else the end of them.
static int hermes_fail(struct call_stream *s, struct text_buf *content) {
    if (s->n_calls) {
        s->mode = M_DEAD;
        s->broken = true;
        return 0;
    }
    s->mode = M_PLAIN;
    int rc = text_buf_append(content, s->held.p ? s->held.p : "", s->held.n);
    s->held.n = 0;
    return rc;
}

// Text inside a call (held has it too). Returns the bytes read, the rest being after the call; SIZE_MAX on
// out of memory.
static size_t hermes_call(struct call_stream *s, const char *p, size_t n, struct text_buf *content) {
    size_t at = 0;
    while (at < n) {
        size_t used;
        const int ev = json_stream_push(&s->js, p + at, n - at, &s->norm, &used);
        at += used;
        int rc = 0;
        const bool is_name = !strcmp(s->js.member, "\"name\""), is_args = !strcmp(s->js.member, "\"arguments\"");
        if (ev == JSE_NOMEM) return SIZE_MAX;
        if (ev == JSE_VALUE && ((is_name && s->name_at) || (is_args && s->args_at != SIZE_MAX))) {
            rc = 1;  // (a second name or arguments)
        } else if (ev == JSE_VALUE) {
            if (is_name) s->name_at = s->norm.n;
            if (is_args) s->args_at = s->norm.n;
        } else if (ev == JSE_END && is_name) {
            rc = hermes_name(s);
        } else if (ev == JSE_END && is_args) {
            s->args_end = s->norm.n;
        } else if (ev == JSE_DONE) {
            if (hermes_announce(s) < 0) return SIZE_MAX;
            if (!s->announced || s->args_end == SIZE_MAX) rc = 1;
            else if (hermes_send(s, true) < 0) return SIZE_MAX;
            else {
                s->n_done++;
                s->mode = s->single ? M_DEAD : M_BETWEEN;
                s->held.n = 0;
                return at;
            }
        } else if (ev == JSE_FAIL) {
            rc = 1;
        }
        if (rc == 0) rc = hermes_announce(s) < 0 ? -1 : hermes_send(s, false);
        if (rc < 0) return SIZE_MAX;
        if (rc > 0) return hermes_fail(s, content) < 0 ? SIZE_MAX : n;  // (held has the rest)
    }
    return n;
}

// A new call begins after its tag.
static void hermes_begin(struct call_stream *s) {
    json_stream_free(&s->js);
    json_stream_init(&s->js);
    s->norm.n = 0;
    s->args_at = s->args_end = SIZE_MAX;
    s->name_at = s->sent = 0;
    free(s->name);
    s->name = NULL;
    s->announced = false;
    s->mode = M_CALL;
    s->held.n = 0;
}

int call_stream_text(struct call_stream *s, const char *text, size_t n, struct text_buf *content) {
    while (n) {
        if (s->mode == M_PLAIN) return text_buf_append(content, text, n);
        if (s->mode == M_DEAD) return 0;
        if (s->mode == M_CALL) {
            if (text_buf_append(&s->held, text, n) < 0) return -1;
            const size_t used = hermes_call(s, text, n, content);
            if (used == SIZE_MAX) return -1;
            if (s->mode != M_BETWEEN) return 0;  // (the call goes on, failed, or was the single one)
            text += used, n -= used;
            continue;
        }
        // content or between calls: up to a <tool_call>, keeping a tail that may still become one
        if (text_buf_append(&s->held, text, n) < 0) return -1;
        n = 0;
        const char *h = s->held.p, *tag = memmem(h, s->held.n, OPEN, sizeof OPEN - 1);
        size_t pass = tag ? (size_t)(tag - h) : s->held.n;
        if (!tag)
            for (size_t k = sizeof OPEN - 2 < pass ? sizeof OPEN - 2 : pass; k > 0; k--)
                if (!memcmp(h + pass - k, OPEN, k)) { pass -= k; break; }
        if (s->mode == M_CONTENT && pass && text_buf_append(content, h, pass) < 0) return -1;
        if (!tag) {
            memmove(s->held.p, h + pass, s->held.n - pass + 1);
            s->held.n -= pass;
            return 0;
        }
        struct text_buf rest = {0};  // (the text after the tag, read as the call's)
        const size_t after = pass + sizeof OPEN - 1;
        if (text_buf_append(&rest, h + after, s->held.n - after) < 0) return -1;
        hermes_begin(s);
        int rc = text_buf_append(&s->held, OPEN, sizeof OPEN - 1) < 0 ||
                 call_stream_text(s, rest.p ? rest.p : "", rest.n, content) < 0 ? -1 : 0;
        text_buf_free(&rest);
        return rc;
    }
    return 0;
}

// The next bytes of a call's arguments through js into norm: as json.dumps writes them while they are JSON,
// as generated from where they stop being it (*failed); what follows a whole value is not the arguments'.
static int rewrite(struct json_stream *js, bool *failed, const char *text, size_t n, struct text_buf *norm) {
    size_t at = 0;
    while (!*failed && at < n) {
        size_t used;
        const int ev = json_stream_push(js, text + at, n - at, norm, &used);
        at += used;
        if (ev == JSE_NOMEM) return -1;
        if (ev == JSE_DONE) at = n;
        if (ev == JSE_FAIL && (*failed = true, text_buf_append(norm, js->raw.p ? js->raw.p : "", js->raw.n) < 0))
            return -1;
    }
    return *failed && at < n ? text_buf_append(norm, text + at, n - at) : 0;
}

// The arguments' text ended: a top-level number ends with it, an unfinished escape or literal is as generated.
static int rewrite_end(struct json_stream *js, bool failed, struct text_buf *norm) {
    const bool unfinished = !failed && json_stream_finish(js, norm) == JSE_FAIL && js->raw.n;
    return unfinished ? text_buf_append(norm, js->raw.p, js->raw.n) : 0;
}

int call_stream_rewrite(const char *text, size_t n, struct text_buf *out) {
    struct json_stream js;
    json_stream_init(&js);
    bool failed = false;
    int rc = rewrite(&js, &failed, text, n, out) < 0 || rewrite_end(&js, failed, out) < 0 ? -1 : 0;
    json_stream_free(&js);
    return rc;
}

// gpt-oss: the current call's last pieces (a top-level number ends with the text).
static int harmony_close(struct call_stream *s) {
    if (!s->announced || s->muted) return 0;
    if (rewrite_end(&s->js, s->failed, &s->norm) < 0) return -1;
    return send_args(s, s->norm.p, s->norm.n, true);
}

int call_stream_open(struct call_stream *s, const char *name) {
    if (harmony_close(s) < 0) return -1;
    json_stream_free(&s->js);
    json_stream_init(&s->js);
    s->norm.n = 0;
    s->sent = 0;
    s->failed = false;
    s->mode = M_HARMONY;
    s->muted = s->single && s->n_calls;
    if (s->muted) return 0;
    s->n_calls++;
    s->announced = true;
    return add_delta(s, name, "", 0);
}

int call_stream_args(struct call_stream *s, const char *text, size_t n) {
    if (!s->announced || s->muted) return 0;
    if (rewrite(&s->js, &s->failed, text, n, &s->norm) < 0) return -1;
    return send_args(s, s->norm.p, s->norm.n, false);
}

int call_stream_finish(struct call_stream *s, struct text_buf *content) {
    switch (s->mode) {
    case M_CONTENT: return text_buf_append(content, s->held.p ? s->held.p : "", s->held.n);
    case M_CALL: return hermes_fail(s, content);  // (its object unfinished: a finished one left M_CALL)
    case M_HARMONY: return harmony_close(s);
    }
    return 0;
}

bool call_stream_called(const struct call_stream *s) {
    return s->mode == M_HARMONY ? s->n_calls > 0 : s->n_done > 0 && !s->broken;
}

json_t *call_stream_take(struct call_stream *s) {
    json_t *d = s->deltas;
    s->deltas = NULL;
    return d;
}
