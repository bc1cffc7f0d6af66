// bench_model.c — `octet bench model`: llama-bench's two numbers for one model on this
// machine: prompt processing (pp N: one N-token prefill from an empty cache) and token
// generation (tg N: N single-token decode steps after a 1-token prompt), each repeated
// --reps times; prints a table and JSON with median and spread.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"
#include "../engine/sampler.h"
#include "../model/model.h"
#include "cli.h"
#include "tools.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

// Returns tokens/s of each rep in out[reps].
static int run_pp(struct runner *r, int n, int reps, double *out) {
    int32_t *ids = malloc(sizeof(int32_t) * n);
    float *lg = malloc(sizeof(float) * (size_t)r->m->cfg.n_vocab);
    if (!ids || !lg) { free(ids); free(lg); return err_set(OCT_ENOMEM, "out of memory"); }
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919 + 13) % r->m->cfg.n_vocab);
    int rc = OCT_OK;
    for (int k = 0; k < reps && rc == OCT_OK; k++) {
        runner_reset(r);
        double t0 = now_s();
        rc = runner_feed(r, ids, n, false, lg);
        out[k] = n / (now_s() - t0);
    }
    free(ids); free(lg);
    return rc;
}

static int run_tg(struct runner *r, int n, int reps, double *out) {
    float *lg = malloc(sizeof(float) * (size_t)r->m->cfg.n_vocab);
    if (!lg) return err_set(OCT_ENOMEM, "out of memory");
    int rc = OCT_OK;
    for (int k = 0; k < reps && rc == OCT_OK; k++) {
        runner_reset(r);
        int32_t id = 1;
        rc = runner_feed(r, &id, 1, false, lg);
        double t0 = now_s();
        for (int i = 0; i < n && rc == OCT_OK; i++) {
            id = logits_argmax(lg, r->m->cfg.n_vocab);
            rc = runner_feed(r, &id, 1, false, lg);
        }
        out[k] = n / (now_s() - t0);
    }
    free(lg);
    return rc;
}

int cmd_bench_model(int argc, char **argv) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    long pp = 512, tg = 128, reps = 5;
    const char *json_out = NULL;
    static const char *const valued[] = {"--pp", "--tg", "--reps", "--json", NULL};
    for (int i = 1; i < argc; i++) {
        int rc = cli_parse_model_flag(&a, argc, argv, &i);
        if (rc < 0) goto bad;
        if (rc == 1) continue;
        const char *f = argv[i], *v;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fprintf(stderr, "usage: octet bench model --model PATH [--pp N] [--tg N] [--reps N] [--json FILE] [model flags]\n");
            cli_print_model_flags();
            return 0;
        }
        if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) goto bad;
        if (!strcmp(f, "--pp")) { if (cli_int(f, v, 1, 1 << 20, &pp) < 0) goto bad; }
        else if (!strcmp(f, "--tg")) { if (cli_int(f, v, 1, 1 << 20, &tg) < 0) goto bad; }
        else if (!strcmp(f, "--reps")) { if (cli_int(f, v, 1, 1000, &reps) < 0) goto bad; }
        else if (!strcmp(f, "--json")) json_out = v;
        else { err_set(OCT_EINVAL, "unknown flag '%s'", f); goto bad; }
    }
    if (!a.model) { err_set(OCT_EINVAL, "--model is required"); goto bad; }
    struct model *m;
    if (model_load(&m, a.model) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); return 1; }
    if (a.ro.max_ctx <= 0) a.ro.max_ctx = (int)(pp > tg + 1 ? pp : tg + 1);
    if (a.ro.max_step_tokens < pp) a.ro.max_step_tokens = (int)pp;
    struct runner r;
    double *t_pp = calloc((size_t)reps, sizeof(double)), *t_tg = calloc((size_t)reps, sizeof(double));
    int rc = 1;
    if (runner_init(&r, m, &a.ro) < 0) goto fail;
    run_pp(&r, (int)pp, 1, t_pp);  // warm-up (page faults, thread start)
    if (run_pp(&r, (int)pp, (int)reps, t_pp) < 0 || run_tg(&r, (int)tg, (int)reps, t_tg) < 0) { runner_free(&r); goto fail; }
    int threads = a.ro.n_threads;
    runner_free(&r);
    qsort(t_pp, (size_t)reps, sizeof(double), cmp_d);
    qsort(t_tg, (size_t)reps, sizeof(double), cmp_d);
    printf("| model | kv dtype | threads | test | tok/s (median) | min | max |\n|---|---|---|---|---|---|---|\n");
    printf("| %s | %s | %d | pp%ld | %.1f | %.1f | %.1f |\n", a.model, a.ro.kv.dtype, threads, pp, t_pp[reps / 2], t_pp[0], t_pp[reps - 1]);
    printf("| %s | %s | %d | tg%ld | %.1f | %.1f | %.1f |\n", a.model, a.ro.kv.dtype, threads, tg, t_tg[reps / 2], t_tg[0], t_tg[reps - 1]);
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "model", a.model, "kv_cache_dtype", a.ro.kv.dtype,
                          "threads", threads, "pp", (int)pp, "tg", (int)tg, "reps", (int)reps,
                          "pp_tok_s_median", t_pp[reps / 2], "pp_tok_s_min", t_pp[0], "pp_tok_s_max", t_pp[reps - 1],
                          "tg_tok_s_median", t_tg[reps / 2], "tg_tok_s_min", t_tg[0], "tg_tok_s_max", t_tg[reps - 1]);
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s);
    if (json_out) {
        FILE *f = fopen(json_out, "w");
        if (f) { fprintf(f, "%s\n", s); fclose(f); }
        else fprintf(stderr, "octet: cannot write %s\n", json_out);
    }
    free(s);
    json_decref(o);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "octet: %s\n", err_msg());
done:
    free(t_pp); free(t_tg);
    model_free(m);
    return rc;
bad:
    fprintf(stderr, "octet bench model: %s\n", err_msg());
    return 2;
}
