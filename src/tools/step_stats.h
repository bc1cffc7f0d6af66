// step_stats.h — where a served load's time went, from octet's /metrics (step_stats.c): the engine's
// steps by kind (decode, prefill, mixed), read before and after the measured requests, their difference
// printed as a table and kept in the sweep's JSON. A server without these counters (another engine)
// gives none, which is not an error.
#ifndef OCTET_STEP_STATS_H
#define OCTET_STEP_STATS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "../engine/engine.h"

struct step_stats {
    bool ok;                                         // read from the server
    struct engine_step_stats k[ENGINE_STEP_KINDS];
};

// The counters in a /metrics text (Prometheus exposition). ok false when it holds none of them.
void step_stats_parse(const char *text, struct step_stats *s);
// GET base_url/metrics and parse it; s->ok false when the server does not answer with them.
void step_stats_scrape(const char *base_url, const char *api_key, struct step_stats *s);
// after - before (ok only when both are).
struct step_stats step_stats_diff(const struct step_stats *after, const struct step_stats *before);
// One table row per kind that ran, labelled with name (in a column of name_width characters): steps, ms a
// step (forward + host), tokens a step, and the kind's share of the steps' time. Prints nothing when !s->ok.
void step_stats_print(FILE *f, const char *name, int name_width, const struct step_stats *s);
// {"decode": {"steps", "decode_tokens", "prefill_tokens", "forward_s", "host_s"}, ...}, or NULL when !s->ok.
json_t *step_stats_json(const struct step_stats *s);

#endif
