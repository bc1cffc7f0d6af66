// oai_fields.h — typed reads of a request body's fields and the table of the fields octet knows
// (owns: the number rules and the field policy; not: what a field means to the engine, which is
// openai.c's). Integer fields take an integral float too (1.0, as vLLM and Python do); numbers
// are range-checked in the JSON's own double before they are narrowed to float, and messages
// quote the value as it was sent. A field octet does not implement is refused with 400 naming
// it ("unsupported"), never silently ignored; harmless bookkeeping fields (user, metadata...)
// are accepted.
#ifndef OCTET_OAI_FIELDS_H
#define OCTET_OAI_FIELDS_H

#include <jansson.h>
#include <stdbool.h>

#include "openai.h"

// Looks up an optional field; JSON null counts as absent.
json_t *oaf_opt(json_t *o, const char *k);
// Sets a 400 invalid_request_error for param with a printf message; returns -1.
int oaf_bad(struct oai_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// x as the shortest decimal that reads back as the same double (1e+39, 0.1).
void oaf_num_str(double x, char *buf, size_t n);

// An integer field in [lo, hi] (an integral float is taken). *present (may be NULL) says
// whether it was there; *out is untouched when it was not.
int oaf_int(json_t *o, const char *k, long long lo, long long hi, long long *out, bool *present,
            struct oai_error *e);
// A number field in [lo, hi] (lo excluded when lo_open); *out untouched when absent.
int oaf_num(json_t *o, const char *k, double lo, bool lo_open, double hi, double *out, struct oai_error *e);
int oaf_bool(json_t *o, const char *k, bool *out, struct oai_error *e);

// Refuses what octet does not implement (completions' tools, the legacy functions, suffix, best_of > 1, JSON
// schema response formats, beam search, guided decoding...) and any field it does not know, naming the field; accepts
// harmless ones. Returns 0 or -1 with *e set.
int oaf_check_fields(json_t *body, enum oai_kind kind, struct oai_error *e);

#endif
