// json_mutants.h — JSON texts and their mutants for the differential tests of the streaming JSON readers
// (test_json_stream.c, test_json_mode.c): a seed text with 0-2 random ASCII bytes deleted, inserted or
// replaced (a deterministic generator; a UTF-8 character's bytes are never touched), so that about half
// are still JSON and the rest fail at every kind of place.
#ifndef OCTET_TEST_JSON_MUTANTS_H
#define OCTET_TEST_JSON_MUTANTS_H

#include <string.h>

static const char *const JSON_SEEDS[] = {
    "{\"city\": \"Oslo\", \"days\": [1, 2, 3], \"unit\": null}",
    "{\"q\":\"a\\\"b\\\\c\\u00e9\\n\\/\",\"n\":-1.5e-3,\"t\":true,\"f\":false,\"o\":{\"x\":[{},[]]}}",
    "[0, -0, 1e2, 2.5E+3, \"s\", [null], {\"k\": \"v\"}, 0.5e-7]",
    "{\"a\": {\"b\": [1, {\"c\": \"\\ud83d\\ude00 é 中 😀\"}]}, \"z\": 0.000123}",
    "  \"top\"  ", "123", "{}", "[]", "true",
};

static unsigned json_rnd(unsigned *s) { return *s = *s * 1103515245u + 12345u, *s >> 16; }

// A mutant of a seed into t (cap bytes); returns its length.
static size_t json_mutant(char *t, size_t cap, unsigned *seed) {
    static const char alphabet[] = "{}[]\",:\\ u0123456789.eE+-tfnalsrxD\n\t";
    const char *s = JSON_SEEDS[json_rnd(seed) % (sizeof JSON_SEEDS / sizeof *JSON_SEEDS)];
    size_t n = strlen(s);
    memcpy(t, s, n + 1);
    for (int m = (int)(json_rnd(seed) % 3); m > 0 && n > 1 && n < cap - 2; m--) {
        const size_t at = json_rnd(seed) % n;
        const char c = alphabet[json_rnd(seed) % (sizeof alphabet - 1)];
        const unsigned op = json_rnd(seed) % 3;
        if ((unsigned char)t[at] >= 0x80) continue;
        if (op == 0) memmove(t + at, t + at + 1, n - at), n--;                       // delete
        else if (op == 1) memmove(t + at + 1, t + at, n - at + 1), t[at] = c, n++;  // insert
        else t[at] = c;                                                             // replace
    }
    return n;
}

#endif
