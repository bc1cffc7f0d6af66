// reply_grammar.c — a constrained reply's grammar a byte at a time (see the header).
#include "reply_grammar.h"

#include <stdlib.h>
#include <string.h>

#include "../base/check.h"

// A hermes call's parts: the literal up to the name, the name, the literal up to the arguments, the arguments
// (an object), the literal that closes the call, the "\n" before another call.
enum { P_OPEN, P_NAME, P_MID, P_ARGS, P_CLOSE, P_NEXT, P_FAIL };
static const char *const LIT[] = {"<tool_call>\n{\"name\": \"", NULL, ", \"arguments\": ", NULL, "}\n</tool_call>",
                                  "\n"};

int reply_spec_check(const struct reply_spec *spec) {
    if (spec->kind != REPLY_HERMES_CALLS) return 0;
    if (spec->n_names < 1 || spec->n_names > REPLY_MAX_NAMES)
        return err_set(OCT_EINVAL, "a reply of calls names 1 to %d functions (got %d)", REPLY_MAX_NAMES, spec->n_names);
    for (int i = 0; i < spec->n_names; i++)
        for (const char *p = spec->names[i]; *p; p++)
            if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
                return err_set(OCT_EINVAL, "the function name '%s' needs escapes in JSON: a reply of calls cannot "
                               "be constrained to it", spec->names[i]);
    return 0;
}

struct reply_spec *reply_spec_copy(const struct reply_spec *spec) {
    if (reply_spec_check(spec) < 0) return NULL;
    size_t bytes = sizeof(struct reply_spec) + sizeof(char *) * (size_t)spec->n_names;
    for (int i = 0; i < spec->n_names; i++) bytes += strlen(spec->names[i]) + 1;
    struct reply_spec *c = malloc(bytes);
    if (!c) { err_set(OCT_ENOMEM, "out of memory"); return NULL; }
    *c = *spec;
    char **names = (char **)(c + 1), *text = (char *)(names + spec->n_names);
    for (int i = 0; i < spec->n_names; i++) {
        names[i] = strcpy(text, spec->names[i]);
        text += strlen(text) + 1;
    }
    c->names = (const char *const *)names;
    return c;
}

void reply_spec_free(struct reply_spec *spec) { free(spec); }

void reply_state_init(struct reply_state *s, const struct reply_spec *spec) {
    memset(s, 0, sizeof *s);
    s->spec = spec;
    s->part = P_OPEN;
    s->phase = !spec->think ? REPLY_PHASE_GRAMMAR : spec->think_first ? REPLY_PHASE_THINK : REPLY_PHASE_FIRST;
    jp_init(&s->json, true);
}

static int fail(struct reply_state *s) { return s->part = P_FAIL, -1; }

// The part after `part` begins.
static void enter(struct reply_state *s, int part) {
    s->part = (uint8_t)part;
    s->off = 0;
    if (part == P_NAME) s->cand = s->spec->n_names == 64 ? ~0ull : (1ull << s->spec->n_names) - 1;
    if (part == P_ARGS) jp_init(&s->json, true);
}

// A byte of a call's name: it must go on some name that matched so far; '"' ends a whole one.
static int name_byte(struct reply_state *s, char c) {
    uint64_t keep = 0;
    for (int i = 0; i < s->spec->n_names; i++) {
        if (!(s->cand >> i & 1)) continue;
        const char *nm = s->spec->names[i];
        const size_t len = strlen(nm);
        if (c == '"' ? len == s->off : len > s->off && nm[s->off] == c) keep |= 1ull << i;
    }
    if (!keep) return fail(s);
    if (c == '"') enter(s, P_MID);
    else s->cand = keep, s->off++;
    return 0;
}

static int hermes_byte(struct reply_state *s, char c) {
    switch (s->part) {
    case P_NAME: return name_byte(s, c);
    case P_ARGS:
        if (jp_feed(&s->json, &c, 1) < 0) return fail(s);
        if (jp_complete(&s->json)) enter(s, P_CLOSE);
        return 0;
    case P_FAIL: return -1;
    case P_NEXT:
        if (s->spec->single) return fail(s);
        s->whole = false;
        /* fallthrough */
    default:  // a literal
        if (c != LIT[s->part][s->off]) return fail(s);
        if (LIT[s->part][++s->off]) return 0;
        if (s->part == P_CLOSE) s->whole = true;
        enter(s, s->part == P_NEXT ? P_OPEN : s->part + 1);
        return 0;
    }
}

int reply_feed(struct reply_state *s, const char *p, size_t n) {
    if (s->spec->kind == REPLY_JSON_OBJECT) {
        const int rc = jp_feed(&s->json, p, n);
        s->whole = rc == 0 && jp_complete(&s->json);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        if (hermes_byte(s, p[i]) < 0) return -1;
    return 0;
}

bool reply_whole(const struct reply_state *s) { return s->whole; }

bool reply_in_text(const struct reply_state *s) {
    return (s->spec->kind == REPLY_JSON_OBJECT || s->part == P_ARGS) && jp_in_text(&s->json);
}
