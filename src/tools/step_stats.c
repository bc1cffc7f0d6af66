// step_stats.c — the engine's step counters read from /metrics, their difference over a run, and the
// table and JSON of where the run's time went (step_stats.h).
#include "step_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "http_client.h"

// The value of a line that starts with name{kind="K"[,part="P"], or NAN.
static double line_value(const char *line, const char *name, const char *kind, const char *part) {
    char prefix[160];
    if (part) snprintf(prefix, sizeof prefix, "%s{kind=\"%s\",part=\"%s\",", name, kind, part);
    else snprintf(prefix, sizeof prefix, "%s{kind=\"%s\",", name, kind);
    if (strncmp(line, prefix, strlen(prefix))) return NAN;
    const char *close = strchr(line, '}');
    if (!close) return NAN;
    char *end;
    double v = strtod(close + 1, &end);
    return end == close + 1 ? NAN : v;
}

void step_stats_parse(const char *text, struct step_stats *s) {
    memset(s, 0, sizeof *s);
    int found = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, "octet_engine_step", 17)) continue;
        for (int k = 0; k < ENGINE_STEP_KINDS; k++) {
            const char *kn = engine_step_kind_names[k];
            struct engine_step_stats *t = &s->k[k];
            struct { double *d; long long *n; const char *name, *part; } f[5] = {
                {NULL, &t->steps, "octet_engine_steps_total", NULL},
                {&t->forward_s, NULL, "octet_engine_step_seconds_total", "forward"},
                {&t->host_s, NULL, "octet_engine_step_seconds_total", "host"},
                {NULL, &t->decode_tokens, "octet_engine_step_tokens_total", "decode"},
                {NULL, &t->prefill_tokens, "octet_engine_step_tokens_total", "prefill"}};
            for (int i = 0; i < 5; i++) {
                double v = line_value(line, f[i].name, kn, f[i].part);
                if (isnan(v)) continue;
                if (f[i].d) *f[i].d = v;
                else *f[i].n = (long long)v;
                found++;
            }
        }
    }
    s->ok = found > 0;
}

void step_stats_scrape(const char *base_url, const char *api_key, struct step_stats *s) {
    char url[1024], *body = NULL;
    long status = 0;
    snprintf(url, sizeof url, "%s/metrics", base_url);
    memset(s, 0, sizeof *s);
    if (http_get(url, api_key, 10, &body, &status) == 0 && status == 200) step_stats_parse(body, s);
    free(body);
}

struct step_stats step_stats_diff(const struct step_stats *after, const struct step_stats *before) {
    struct step_stats d = {.ok = after->ok && before->ok};
    for (int k = 0; d.ok && k < ENGINE_STEP_KINDS; k++) {
        const struct engine_step_stats *a = &after->k[k], *b = &before->k[k];
        d.k[k] = (struct engine_step_stats){a->steps - b->steps, a->decode_tokens - b->decode_tokens,
                                            a->prefill_tokens - b->prefill_tokens, a->forward_s - b->forward_s,
                                            a->host_s - b->host_s};
    }
    return d;
}

void step_stats_print(FILE *f, const char *name, int name_width, const struct step_stats *s) {
    if (!s->ok) return;
    double total = 0;
    for (int k = 0; k < ENGINE_STEP_KINDS; k++) total += s->k[k].forward_s + s->k[k].host_s;
    for (int k = 0; k < ENGINE_STEP_KINDS; k++) {
        const struct engine_step_stats *t = &s->k[k];
        if (!t->steps && t->forward_s + t->host_s <= 0) continue;
        const double n = t->steps > 0 ? (double)t->steps : NAN;
        fprintf(f, "%-*.*s %-8s %8lld %10.3f %10.3f %10.3f %9.1f %9.1f %7.1f%%\n", name_width, name_width, name,
                engine_step_kind_names[k], t->steps, 1e3 * (t->forward_s + t->host_s) / n, 1e3 * t->forward_s / n,
                1e3 * t->host_s / n, (double)t->decode_tokens / n, (double)t->prefill_tokens / n,
                total > 0 ? 100 * (t->forward_s + t->host_s) / total : 0.0);
    }
}

json_t *step_stats_json(const struct step_stats *s) {
    if (!s->ok) return NULL;
    json_t *o = json_object();
    for (int k = 0; k < ENGINE_STEP_KINDS; k++) {
        const struct engine_step_stats *t = &s->k[k];
        json_object_set_new(o, engine_step_kind_names[k],
                            json_pack("{s:I,s:I,s:I,s:f,s:f}", "steps", (json_int_t)t->steps, "decode_tokens",
                                      (json_int_t)t->decode_tokens, "prefill_tokens", (json_int_t)t->prefill_tokens,
                                      "forward_s", t->forward_s, "host_s", t->host_s));
    }
    return o;
}
