// bench_model.c — `octet bench model`: llama-bench's two numbers for one model on this
// machine: prompt processing (pp N: one N-token prefill) and token generation (tg N: N
// single-token decode steps), each after --depth D tokens already in the cache (default 0:
// from an empty cache; tg then follows a 1-token prompt) and repeated --reps times; prints a
// table on stdout, or with --json one JSON line per (cache type, depth) with median, spread and
// every rep in measurement order (the table then goes to stderr). Several cache types
// (--kv-cache-dtype auto,fp8) get one engine each in this process, sharing the weights, and are
// measured in turn, so their tg difference is taken rep by rep (paired) instead of across runs:
// the median over reps of (ms/token of this type - ms/token of the first), positive = slower.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"
#include "../engine/sampler.h"
#include "../model/model.h"
#include "bench_ids.h"
#include "cli.h"
#include "tools.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char USAGE[] =
    "usage: octet bench model --model PATH [--pp N] [--tg N] [--depth D[,D...]] [--reps N] [--json] [--output FILE]\n"
    "                         [--kv-cache-dtype D[,D...]] [model flags]\n"
    "  -n, --tg N     decode steps timed (default 128); --pp N prompt tokens timed (default 512)\n"
    "  --json         one JSON line per cache type and depth on stdout (the table goes to stderr)\n"
    "  -o, --output FILE  also write the JSON lines to FILE\n"
    "  --depth D,...  tokens already in the cache before each pp/tg test (llama-bench -d; default 0)\n"
    "  --kv-cache-dtype A,B  one engine per cache type in this process, measured in turn (A B A B ...)\n"
    "                 so drift cancels; tg rows then carry each type's paired difference to A: the median\n"
    "                 over reps of its ms/token minus A's (positive = slower than A)\n";

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median (the mean of the middle two for an even n), min and max of x[n], which stays in
// its order; scratch holds n doubles.
static double median_of(const double *x, int n, double *scratch, double *mn, double *mx) {
    memcpy(scratch, x, sizeof(double) * (size_t)n);
    qsort(scratch, (size_t)n, sizeof(double), cmp_d);
    if (mn) *mn = scratch[0];
    if (mx) *mx = scratch[n - 1];
    return n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
}

// Fills the cache with `depth` tokens (at least 1 when with_one), untimed; lg receives the last logits.
static int fill(struct runner *r, int depth, bool with_one, float *lg) {
    runner_reset(r);
    int n = depth > 0 ? depth : with_one ? 1 : 0;
    if (!n) return OCT_OK;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    if (!ids) return err_set(OCT_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) ids[i] = bench_fill_id(i, r->m->cfg.n_vocab);
    int rc = runner_feed(r, ids, n, false, lg);
    free(ids);
    return rc;
}

// Returns tokens/s of each rep in out[reps]: n prompt tokens after `depth` cached ones.
static int run_pp(struct runner *r, int n, int depth, int reps, double *out) {
    int32_t *ids = malloc(sizeof(int32_t) * n);
    float *lg = backend_host_alloc(r->b, sizeof(float) * (size_t)r->m->cfg.n_vocab);
    if (!ids || !lg) { free(ids); backend_host_free(r->b, lg); return err_set(OCT_ENOMEM, "out of memory"); }
    for (int i = 0; i < n; i++) ids[i] = bench_prompt_id(i, r->m->cfg.n_vocab);
    int rc = OCT_OK;
    for (int k = 0; k < reps && rc == OCT_OK; k++) {
        if ((rc = fill(r, depth, false, lg)) < 0) break;
        double t0 = now_s();
        rc = runner_feed(r, ids, n, false, lg);
        out[k] = n / (now_s() - t0);
    }
    free(ids); backend_host_free(r->b, lg);
    return rc;
}

// tokens/s of n greedy decode steps after `depth` cached tokens (1 when depth is 0).
static int run_tg(struct runner *r, int n, int depth, int reps, double *out) {
    float *lg = backend_host_alloc(r->b, sizeof(float) * (size_t)r->m->cfg.n_vocab);  // (pinned on a GPU)
    if (!lg) return err_set(OCT_ENOMEM, "out of memory");
    int rc = OCT_OK;
    for (int k = 0; k < reps && rc == OCT_OK; k++) {
        if ((rc = fill(r, depth, true, lg)) < 0) break;
        int32_t id;
        double t0 = now_s();
        for (int i = 0; i < n && rc == OCT_OK; i++) {
            id = logits_argmax(lg, r->m->cfg.n_vocab);
            rc = runner_feed(r, &id, 1, false, lg);
        }
        out[k] = n / (now_s() - t0);
    }
    backend_host_free(r->b, lg);
    return rc;
}

#define MAX_DEPTHS 16
#define MAX_DTYPES 4

// Splits "a,b,c" into at most max words of buf (cut in place); returns the count, or -1.
static int split_list(char *buf, char **out, int max) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max) return -1;
        out[n++] = t;
    }
    return n;
}

int cmd_bench_model(int argc, char **argv) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    long pp = 512, tg = 128, reps = 5;
    long depth[MAX_DEPTHS] = {0};
    int n_depth = 1, n_dt = 1;
    char dt_buf[128] = "", *dts[MAX_DTYPES] = {NULL};
    const char *json_out = NULL;
    bool json = false;
    static const char *const valued[] = {"--pp", "--tg", "-n", "--reps", "--depth", "--output", "-o", "--json", NULL};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kv-cache-dtype") && i + 1 < argc && strchr(argv[i + 1], ',')) {  // several: compared
            snprintf(dt_buf, sizeof dt_buf, "%s", argv[++i]);
            n_dt = split_list(dt_buf, dts, MAX_DTYPES);
            if (n_dt < 1) {
                err_set(OCT_EINVAL, "--kv-cache-dtype: at most %d cache types to compare", MAX_DTYPES);
                goto bad;
            }
            for (int k = 0; k < n_dt; k++) if (kv_options_set_dtype(&a.ro.kv, dts[k]) < 0) goto bad;
            continue;
        }
        int rc = cli_parse_model_flag(&a, argc, argv, &i);
        if (rc < 0) goto bad;
        if (rc == 1) continue;
        const char *f = argv[i], *v;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fputs(USAGE, stderr);
            cli_print_model_flags();
            return 0;
        }
        if (!strcmp(f, "--json")) {
            if (i + 1 < argc && argv[i + 1][0] != '-') {
                err_set(OCT_EINVAL, "--json takes no value (JSON lines go to stdout; --output %s writes a file)",
                        argv[i + 1]);
                goto bad;
            }
            json = true;
            continue;
        }
        if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) goto bad;
        if (!strcmp(f, "--pp")) { if (cli_int(f, v, 1, 1 << 20, &pp) < 0) goto bad; }
        else if (!strcmp(f, "--tg") || !strcmp(f, "-n")) { if (cli_int(f, v, 1, 1 << 20, &tg) < 0) goto bad; }
        else if (!strcmp(f, "--reps")) { if (cli_int(f, v, 1, 1000, &reps) < 0) goto bad; }
        else if (!strcmp(f, "--depth")) {
            char buf[256], *w[MAX_DEPTHS];
            snprintf(buf, sizeof buf, "%s", v);
            n_depth = split_list(buf, w, MAX_DEPTHS);
            if (n_depth < 0) { err_set(OCT_EINVAL, "--depth: at most %d values", MAX_DEPTHS); goto bad; }
            if (!n_depth) { err_set(OCT_EINVAL, "--depth: give one or more token counts, e.g. 0,4096"); goto bad; }
            for (int d = 0; d < n_depth; d++) if (cli_int(f, w[d], 0, 1 << 24, &depth[d]) < 0) goto bad;
        }
        else if (!strcmp(f, "--output") || !strcmp(f, "-o")) json_out = v;
        else { err_set(OCT_EINVAL, "unknown flag '%s'", f); goto bad; }
    }
    if (!a.model) { err_set(OCT_EINVAL, "--model is required"); goto bad; }
    if (!dts[0]) dts[0] = a.ro.kv.dtype;
    long dmax = 0;
    for (int d = 0; d < n_depth; d++) if (depth[d] > dmax) dmax = depth[d];
    struct model *m;
    if (model_load(&m, a.model) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); return 1; }
    long need = dmax + (pp > tg + 1 ? pp : tg + 1);
    if (a.ro.max_ctx <= 0) a.ro.max_ctx = (int)need;
    if (a.ro.max_ctx < need) {
        fprintf(stderr,
                "octet bench model: depth %ld + the test's tokens need a context of %ld, above --max-model-len %d\n",
                dmax, need, a.ro.max_ctx);
        model_free(m);
        return 2;
    }
    if (a.ro.max_step_tokens < pp) a.ro.max_step_tokens = (int)pp;
    // [dtype][depth][rep] tokens/s; the engines share the model's uploaded weights
    const size_t cells = (size_t)n_dt * n_depth * reps;
    struct runner r[MAX_DTYPES];
    int n_up = 0;
    double *t_pp = calloc(cells, sizeof(double)), *t_tg = calloc(cells, sizeof(double));
    double *diff = calloc((size_t)reps, sizeof(double));
    FILE *jf = NULL;
    int rc = 1;
    if (!t_pp || !t_tg || !diff) { err_set(OCT_ENOMEM, "out of memory"); goto fail; }
    for (; n_up < n_dt; n_up++) {
        struct runner_options o = a.ro;
        if (kv_options_set_dtype(&o.kv, dts[n_up]) < 0 || runner_init(&r[n_up], m, &o) < 0) goto fail;
        double warm;
        run_pp(&r[n_up], (int)pp, 0, 1, &warm);  // warm-up (page faults, thread start)
    }
#define AT(arr, k, d, j) (arr)[((size_t)(k) * n_depth + (d)) * reps + (j)]
    for (int d = 0; d < n_depth; d++)
        for (int j = 0; j < reps; j++)
            for (int k = 0; k < n_dt; k++)  // in turn, so slow drift hits every cache type alike
                if (run_pp(&r[k], (int)pp, (int)depth[d], 1, &AT(t_pp, k, d, j)) < 0 ||
                    run_tg(&r[k], (int)tg, (int)depth[d], 1, &AT(t_tg, k, d, j)) < 0)
                    goto fail;
    int threads = a.ro.n_threads;
    if (json_out && !(jf = fopen(json_out, "w"))) {
        err_set(OCT_EIO, "--output: cannot write %s", json_out);
        goto fail;
    }
    FILE *tab = json ? stderr : stdout;
    char lab[MAX_DTYPES][48];
    for (int k = 0; k < n_dt; k++) cli_kv_dtype_label(dts[k], m->weight_dtype, lab[k], sizeof lab[k]);
    fprintf(tab, "| model | kv dtype | threads | test | tok/s (median) | min | max | ms/token | tg vs %s, paired: "
            "median of per-rep ms/token differences |\n|---|---|---|---|---|---|---|---|---|\n", lab[0]);
    json_t *rows = json_array();
    double *sorted = malloc(sizeof(double) * (size_t)reps);
    if (!sorted) { err_set(OCT_ENOMEM, "out of memory"); json_decref(rows); goto fail; }
    for (int d = 0; d < n_depth; d++)
        for (int k = 0; k < n_dt; k++) {
            const double *xp = &AT(t_pp, k, d, 0), *xt = &AT(t_tg, k, d, 0), *base = &AT(t_tg, 0, d, 0);
            // ms/token, this type - the first, rep by rep (the arrays stay in measurement order)
            for (int j = 0; j < reps; j++) diff[j] = 1e3 / xt[j] - 1e3 / base[j];
            double pmin, pmax, tmin, tmax, dmed = median_of(diff, (int)reps, sorted, NULL, NULL);
            double pmed = median_of(xp, (int)reps, sorted, &pmin, &pmax);
            double tmed = median_of(xt, (int)reps, sorted, &tmin, &tmax);
            char at[32] = "", vs[64] = "";
            if (depth[d]) snprintf(at, sizeof at, " @ d%ld", depth[d]);
            if (k) snprintf(vs, sizeof vs, "%+.1f us/token (%s)", dmed * 1e3, dmed > 0 ? "slower" : dmed < 0 ? "faster"
                            : "same");
            fprintf(tab, "| %s | %s | %d | pp%ld%s | %.1f | %.1f | %.1f | %.3f | |\n", a.model, lab[k], threads, pp,
                    at, pmed, pmin, pmax, 1e3 / pmed);
            fprintf(tab, "| %s | %s | %d | tg%ld%s | %.1f | %.1f | %.1f | %.3f | %s |\n", a.model, lab[k], threads, tg,
                    at, tmed, tmin, tmax, 1e3 / tmed, vs);
            json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                                  "model", a.model, "kv_cache_dtype", dts[k],
                                  "kv_cache_dtype_resolved", cli_kv_dtype_resolved(dts[k], m->weight_dtype),
                                  "threads", threads, "depth", (int)depth[d], "pp", (int)pp, "tg", (int)tg,
                                  "reps", (int)reps, "pp_tok_s_median", pmed, "pp_tok_s_min", pmin,
                                  "pp_tok_s_max", pmax, "tg_tok_s_median", tmed, "tg_tok_s_min", tmin,
                                  "tg_tok_s_max", tmax, "tg_ms_per_token", 1e3 / tmed);
            json_t *rp = json_array(), *rt = json_array();
            for (int j = 0; j < reps; j++) {
                json_array_append_new(rp, json_real(xp[j]));
                json_array_append_new(rt, json_real(xt[j]));
            }
            json_object_set_new(o, "pp_tok_s_reps", rp);
            json_object_set_new(o, "tg_tok_s_reps", rt);
            if (k) {
                json_object_set_new(o, "vs_kv_cache_dtype", json_string(dts[0]));
                json_object_set_new(o, "tg_ms_diff_paired_median", json_real(dmed));
            }
            json_array_append_new(rows, o);
        }
    free(sorted);
#undef AT
    for (size_t i = 0; i < json_array_size(rows); i++) {
        char *js = json_dumps(json_array_get(rows, i), JSON_COMPACT);
        if (json) printf("%s\n", js);
        if (jf) fprintf(jf, "%s\n", js);
        free(js);
    }
    json_decref(rows);
    if (jf) fclose(jf);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "octet: %s\n", err_msg());
done:
    for (int k = 0; k < n_up; k++) runner_free(&r[k]);
    free(t_pp); free(t_tg); free(diff);
    model_free(m);
    return rc;
bad:
    return cli_usage_error();
}
