// call_deltas.h — joins a streamed reply's tool_calls deltas as an OpenAI client does (the tests of streamed
// calls): entry i of the joined array is the call of index i, its id, type and name from its first delta (which
// must carry them, and only it), its arguments the concatenation of every delta's.
#ifndef OCTET_TEST_CALL_DELTAS_H
#define OCTET_TEST_CALL_DELTAS_H

#include <jansson.h>
#include <string.h>

#include "../test.h"

static void join_call_deltas(json_t *joined, const json_t *deltas) {
    size_t k;
    json_t *d;
    json_array_foreach(deltas, k, d) {
        const size_t i = (size_t)json_integer_value(json_object_get(d, "index"));
        json_t *fn = json_object_get(d, "function"), *a = json_object_get(fn, "arguments");
        CHECK_MSG(json_is_integer(json_object_get(d, "index")) && i <= json_array_size(joined) && json_is_string(a),
                  "delta %zu: index %zu of %zu calls", k, i, json_array_size(joined));
        if (i > json_array_size(joined) || !json_is_string(a)) continue;
        const bool first = i == json_array_size(joined);
        CHECK_MSG(first == (json_object_get(d, "id") != NULL && json_object_get(fn, "name") != NULL &&
                            json_object_get(d, "type") != NULL), "call %zu: id, type and name in its first delta only", i);
        if (first) {
            json_array_append_new(joined, json_pack("{s:O,s:O,s:{s:O,s:O}}", "id", json_object_get(d, "id"), "type",
                                                    json_object_get(d, "type"), "function", "name",
                                                    json_object_get(fn, "name"), "arguments", a));
            continue;
        }
        json_t *jf = json_object_get(json_array_get(joined, i), "function");
        const char *prev = json_string_value(json_object_get(jf, "arguments"));
        size_t np = strlen(prev), na = json_string_length(a);
        char *cat = malloc(np + na + 1);
        memcpy(cat, prev, np);
        memcpy(cat + np, json_string_value(a), na + 1);
        json_object_set_new(jf, "arguments", json_stringn(cat, np + na));
        free(cat);
    }
}

#endif
