// test_step_stats.c — src/tools/step_stats.c: the engine's step counters read back from the server's
// own /metrics rendering (metrics_render) exactly, a text without them (another engine's) not ok, the
// difference of two readings, the JSON, and the printed rows (a row per kind that ran, its ms a step and
// share of the time).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/server/metrics.h"
#include "../../src/tools/step_stats.h"
#include "../test.h"

static struct engine_stats sample_stats(double scale) {
    struct engine_stats es = {.n_running = 3};
    es.step[ENGINE_STEP_DECODE] = (struct engine_step_stats){(long long)(100 * scale), (long long)(350 * scale), 0,
                                                             0.75 * scale, 0.05 * scale};
    es.step[ENGINE_STEP_PREFILL] = (struct engine_step_stats){(long long)(2 * scale), 0, (long long)(4000 * scale),
                                                              0.5 * scale, 0.001 * scale};
    es.step[ENGINE_STEP_MIXED] = (struct engine_step_stats){(long long)(8 * scale), (long long)(24 * scale),
                                                            (long long)(16000 * scale), 2.0 * scale, 0.004 * scale};
    return es;
}

static void render(const struct engine_stats *es, struct step_stats *out) {
    struct metrics m;
    metrics_init(&m, "dummy:\"tiny\"");  // (a label value the renderer escapes)
    struct text_buf t = {0};
    CHECK(metrics_render(&m, es, &t) == 0);
    step_stats_parse(t.p, out);
    text_buf_free(&t);
    metrics_free(&m);
}

TEST(round_trip_through_the_servers_rendering) {
    struct engine_stats es = sample_stats(1);
    struct step_stats s;
    render(&es, &s);
    CHECK(s.ok);
    for (int k = 0; k < ENGINE_STEP_KINDS; k++) {
        const struct engine_step_stats *a = &es.step[k], *b = &s.k[k];
        CHECK_EQ_INT(b->steps, a->steps);
        CHECK_EQ_INT(b->decode_tokens, a->decode_tokens);
        CHECK_EQ_INT(b->prefill_tokens, a->prefill_tokens);
        CHECK(fabs(b->forward_s - a->forward_s) < 1e-9 && fabs(b->host_s - a->host_s) < 1e-9);
    }
}

TEST(another_engines_metrics_give_none) {
    struct step_stats s;
    step_stats_parse("# HELP vllm:num_requests_running x\nvllm:num_requests_running{model_name=\"m\"} 1\n", &s);
    CHECK(!s.ok);
    step_stats_parse("", &s);
    CHECK(!s.ok);
    json_t *j = step_stats_json(&s);
    CHECK(j == NULL);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    step_stats_print(f, "peer", 24, &s);
    fclose(f);
    CHECK_EQ_INT((long long)n, 0);
    free(buf);
}

TEST(difference_json_and_rows) {
    struct engine_stats e1 = sample_stats(1), e3 = sample_stats(3);
    struct step_stats before, after;
    render(&e1, &before);
    render(&e3, &after);
    struct step_stats d = step_stats_diff(&after, &before);
    CHECK(d.ok);
    CHECK_EQ_INT(d.k[ENGINE_STEP_MIXED].steps, 16);
    CHECK_EQ_INT(d.k[ENGINE_STEP_MIXED].prefill_tokens, 32000);
    CHECK(fabs(d.k[ENGINE_STEP_DECODE].forward_s - 1.5) < 1e-9);
    struct step_stats none = {0};
    CHECK(!step_stats_diff(&after, &none).ok);  // a reading missing: no difference

    json_t *j = step_stats_json(&d);
    CHECK(j && json_integer_value(json_object_get(json_object_get(j, "decode"), "decode_tokens")) == 700);
    CHECK(j && fabs(json_real_value(json_object_get(json_object_get(j, "mixed"), "forward_s")) - 4.0) < 1e-9);
    json_decref(j);

    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    step_stats_print(f, "fp8", 24, &d);
    fclose(f);
    // mixed: 16 steps, (4.0 + 0.008) s / 16 = 250.500 ms a step, 3 decode and 2000 prefill tokens a step,
    // 4.008 of the 6.610 s in all = 60.6 %
    CHECK_MSG(buf && strstr(buf, "fp8                      mixed          16    250.500    250.000      0.500       3.0"
                                 "    2000.0    60.6%\n"), "rows:\n%s", buf);
    int rows = 0;
    for (char *p = buf; p && *p; p = strchr(p, '\n') + 1) rows++;
    CHECK_EQ_INT(rows, 3);
    free(buf);
}

int main(void) {
    RUN(round_trip_through_the_servers_rendering);
    RUN(another_engines_metrics_give_none);
    RUN(difference_json_and_rows);
    return test_summary("step_stats");
}
