// bench_model.c — `octet bench model`: llama-bench's measurements for one model on this machine, in its
// flags and output formats: prompt processing (pp N: one N-token prefill, -p N,...; -p 0 skips it) and
// token generation (tg N: N single-token decode steps, -n N,...; -n 0 skips it), each after -d D
// tokens already in the cache (default 0: from an empty cache; tg then follows a 1-token prompt),
// repeated -r times after an untimed warm-up (one pp and one decode step per engine; --no-warmup),
// reported as mean ± sample standard deviation (llama-bench's numbers) with the median, min and max.
// Several cache types (--kv-cache-dtype auto,fp8, or llama-bench's --cache-type-k / --cache-type-v
// lists) get one engine each in this process, sharing the weights, and are measured in turn, so their
// tg difference is taken rep by rep (paired): the median over reps of (ms/token of this type − ms/token
// of the first), positive = slower.
// Outputs: a table on stdout (default); --json: one JSON line per (cache type, depth) with every rep in
// measurement order (the table then goes to stderr); -o md | json | jsonl: llama-bench's markdown table,
// JSON array or JSON lines (its field names: n_prompt, n_gen, n_depth, avg_ts, stddev_ts, samples_ts...).
// -o FILE (any other value) or --output FILE also writes the JSON lines (or the -o format's text) to FILE.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    "usage: octet bench model --model PATH [-p N,...] [-n N,...] [-d D,...] [-r N] [-t N] [-o md|json|jsonl|FILE]\n"
    "                         [--json] [--output FILE] [--kv-cache-dtype D,... | -ctk T,... [-ctv T,...]]\n"
    "                         [--no-warmup] [model flags]\n"
    "  -p, --pp, --n-prompt N,...   prompt tokens of each pp test (default 512; 0: no pp test)\n"
    "  -n, --tg, --n-gen N,...      decode steps of each tg test (default 128; 0: no tg test)\n"
    "  -d, --depth, --n-depth D,... tokens already in the cache before each test (llama-bench -d; default 0)\n"
    "  -r, --reps, --repetitions N  timed repetitions of each test (default 5), after one untimed warm-up\n"
    "  --no-warmup    skip the warm-up (one pp and one decode step per engine)\n"
    "  -o md|json|jsonl  llama-bench's output formats on stdout: its markdown table (t/s = mean ± stddev,\n"
    "                 and the median), a JSON array, or JSON lines (n_prompt, n_gen, n_depth, type_k,\n"
    "                 type_v, avg_ts, stddev_ts, median_ts, samples_ts, avg_ns, stddev_ns, samples_ns ...)\n"
    "  -o FILE, --output FILE  also write the JSON lines (or the -o format's text) to FILE\n"
    "  --json         one JSON line per cache type and depth on stdout (the table goes to stderr);\n"
    "                 one pp and one tg test at most (several -p / -n values: -o json)\n"
    "  --kv-cache-dtype A,B  one engine per cache type in this process, measured in turn (A B A B ...)\n"
    "                 so drift cancels; tg rows then carry each type's paired difference to A: the median\n"
    "                 over reps of its ms/token minus A's (positive = slower than A)\n"
    "  -ctk, --cache-type-k T,...  llama-bench's spelling of the same list (f32, f16, bf16 or octet's\n"
    "                 names); -ctv, --cache-type-v T,...: V follows K when omitted; octet's cache stores\n"
    "                 K and V in one type, so a V type other than its K type is refused\n";

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct stats { double median, min, max, mean, stddev; };

// Median (the mean of the middle two for an even n), min, max, mean and sample standard deviation
// (n − 1; 0 for one value) of x[n], which stays in its order; scratch holds n doubles.
static struct stats stats_of(const double *x, int n, double *scratch) {
    struct stats s = {0};
    memcpy(scratch, x, sizeof(double) * (size_t)n);
    qsort(scratch, (size_t)n, sizeof(double), cmp_d);
    s.min = scratch[0];
    s.max = scratch[n - 1];
    s.median = n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
    for (int i = 0; i < n; i++) s.mean += x[i] / n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - s.mean) * (x[i] - s.mean);
    s.stddev = n > 1 ? sqrt(ss / (n - 1)) : 0;
    return s;
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

// tokens/s of one rep in *out: n prompt tokens after `depth` cached ones.
static int run_pp(struct runner *r, int n, int depth, double *out) {
    int32_t *ids = malloc(sizeof(int32_t) * n);
    float *lg = backend_host_alloc(r->b, sizeof(float) * (size_t)r->m->cfg.n_vocab);
    if (!ids || !lg) { free(ids); backend_host_free(r->b, lg); return err_set(OCT_ENOMEM, "out of memory"); }
    for (int i = 0; i < n; i++) ids[i] = bench_prompt_id(i, r->m->cfg.n_vocab);
    int rc = fill(r, depth, false, lg);
    if (rc == OCT_OK) {
        double t0 = now_s();
        rc = runner_feed(r, ids, n, false, lg);
        *out = n / (now_s() - t0);
    }
    free(ids); backend_host_free(r->b, lg);
    return rc;
}

// tokens/s of one rep in *out: n greedy decode steps after `depth` cached tokens (1 when depth is 0).
static int run_tg(struct runner *r, int n, int depth, double *out) {
    float *lg = backend_host_alloc(r->b, sizeof(float) * (size_t)r->m->cfg.n_vocab);  // (pinned on a GPU)
    if (!lg) return err_set(OCT_ENOMEM, "out of memory");
    int rc = fill(r, depth, true, lg);
    double t0 = now_s();
    for (int i = 0; i < n && rc == OCT_OK; i++) {
        int32_t id = logits_argmax(lg, r->m->cfg.n_vocab);
        rc = runner_feed(r, &id, 1, false, lg);
    }
    *out = n / (now_s() - t0);
    backend_host_free(r->b, lg);
    return rc;
}

#define MAX_DEPTHS 16
#define MAX_DTYPES 4
#define MAX_SIZES 8

// Splits "a,b,c" into at most max words of buf (cut in place); returns the count, or -1.
static int split_list(char *buf, char **out, int max) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max) return -1;
        out[n++] = t;
    }
    return n;
}

// "N,N,..." of flag f into out[max], each in lo..hi; returns the count, or -1 with the error set.
static int int_list(const char *f, const char *v, long lo, long hi, long *out, int max) {
    char buf[256], *w[MAX_DEPTHS];
    snprintf(buf, sizeof buf, "%s", v);
    int n = split_list(buf, w, max < MAX_DEPTHS ? max : MAX_DEPTHS);
    if (n < 0) return err_set(OCT_EINVAL, "%s: at most %d values", f, max);
    if (!n) return err_set(OCT_EINVAL, "%s: give one or more numbers, e.g. 0,4096", f);
    for (int i = 0; i < n; i++) TRY(cli_int(f, w[i], lo, hi, &out[i]));
    return n;
}

// llama.cpp's cache type names -> octet's (f16 -> fp16 ...); its quantized caches are refused by name.
static int cache_type_name(const char *f, const char *t, char *out, size_t n) {
    static const char *const llama[][2] = {{"f32", "fp32"}, {"f16", "fp16"}, {"bf16", "bf16"}};
    for (size_t i = 0; i < sizeof llama / sizeof llama[0]; i++)
        if (!strcmp(t, llama[i][0])) { snprintf(out, n, "%s", llama[i][1]); return OCT_OK; }
    if ((t[0] == 'q' || !strncmp(t, "iq", 2)) && strchr(t, '_'))
        return err_set(OCT_EUNSUP, "%s: cache type '%s' is llama.cpp's; octet's cache holds f32, f16, bf16 or FP8 "
                       "(fp8, fp8_e4m3, fp8_e5m2, fp8_per_token_head)", f, t);
    snprintf(out, n, "%s", t);
    return OCT_OK;
}

// The cache types of --cache-type-k K and --cache-type-v V (either may be NULL) into dts (text in buf).
static int cache_types(const char *k, const char *v, char *buf, size_t bufn, char **dts, int *n_dt) {
    char kb[128], vb[128], *kw[MAX_DTYPES], *vw[MAX_DTYPES];
    snprintf(kb, sizeof kb, "%s", k ? k : v);
    snprintf(vb, sizeof vb, "%s", v ? v : k);
    int nk = split_list(kb, kw, MAX_DTYPES), nv = split_list(vb, vw, MAX_DTYPES);
    if (nk < 1 || nv < 1) return err_set(OCT_EINVAL, "--cache-type-k/-v: 1 to %d cache types", MAX_DTYPES);
    if (nk != nv)
        return err_set(OCT_EINVAL, "--cache-type-k has %d types and --cache-type-v %d: give V as many as K (or omit "
                       "it: V follows K)", nk, nv);
    size_t at = 0;
    for (int i = 0; i < nk; i++) {
        char kn[32], vn[32];
        TRY(cache_type_name("--cache-type-k", kw[i], kn, sizeof kn));
        TRY(cache_type_name("--cache-type-v", vw[i], vn, sizeof vn));
        if (strcmp(kn, vn))
            return err_set(OCT_EUNSUP, "--cache-type-k %s with --cache-type-v %s: octet's cache stores K and V in one "
                           "type (give the same type, or --cache-type-k alone)", kw[i], vw[i]);
        size_t len = strlen(kn) + 1;
        if (at + len > bufn) return err_set(OCT_EINVAL, "--cache-type-k: list too long");
        memcpy(buf + at, kn, len);
        dts[i] = buf + at;
        at += len;
    }
    *n_dt = nk;
    return OCT_OK;
}

// One test: a prefill of n tokens (pp) or n decode steps (tg).
struct test { bool tg; int n; };

struct bench {
    const char *model;
    struct model *m;
    char **dts;
    int n_dt, n_depth, n_test, reps, threads;
    const long *depth;
    struct test tests[2 * MAX_SIZES];
    double *ts;        // [dtype][depth][test][rep] tokens/s
    const char *backend, *when;
    bool use_mmap;     // the model's files mapped (llama-bench's field), not read into memory
};
#define TS(B, k, d, t) ((B)->ts + ((((size_t)(k) * (B)->n_depth + (d)) * (B)->n_test + (t)) * (B)->reps))

static const char *llama_type(const char *resolved) {  // octet's resolved name -> llama-bench's type_k
    return !strcmp(resolved, "fp32") ? "f32" : !strcmp(resolved, "fp16") ? "f16" : resolved;
}

static void test_label(const struct bench *B, int d, int t, char *buf, size_t n) {
    int k = snprintf(buf, n, "%s%d", B->tests[t].tg ? "tg" : "pp", B->tests[t].n);
    if (B->depth[d] && k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, " @ d%ld", B->depth[d]);
}

// The paired difference of cache type k's test t at depth d to type 0's: median over reps of ms/token.
static double paired_ms(const struct bench *B, int k, int d, int t, double *scratch) {
    double diff[1000];
    const double *x = TS(B, k, d, t), *base = TS(B, 0, d, t);
    for (int j = 0; j < B->reps; j++) diff[j] = 1e3 / x[j] - 1e3 / base[j];
    return stats_of(diff, B->reps, scratch).median;
}

// octet's table (stdout, or stderr with --json).
static void print_table(const struct bench *B, FILE *tab, double *scratch) {
    char lab[MAX_DTYPES][48], name[48];
    for (int k = 0; k < B->n_dt; k++) cli_kv_dtype_label(B->dts[k], B->m->weight_dtype, lab[k], sizeof lab[k]);
    fprintf(tab, "| model | kv dtype | threads | test | tok/s (median) | mean ± stddev | min | max | ms/token | tg vs "
            "%s, paired: median of per-rep ms/token differences |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n", lab[0]);
    for (int d = 0; d < B->n_depth; d++)
        for (int k = 0; k < B->n_dt; k++)
            for (int t = 0; t < B->n_test; t++) {
                struct stats s = stats_of(TS(B, k, d, t), B->reps, scratch);
                char vs[64] = "";
                if (k && B->tests[t].tg) {
                    double dm = paired_ms(B, k, d, t, scratch);
                    snprintf(vs, sizeof vs, "%+.1f us/token (%s)", dm * 1e3, dm > 0 ? "slower" : dm < 0 ? "faster"
                             : "same");
                }
                test_label(B, d, t, name, sizeof name);
                fprintf(tab, "| %s | %s | %d | %s | %.1f | %.1f ± %.1f | %.1f | %.1f | %.3f | %s |\n", B->model,
                        lab[k], B->threads, name, s.median, s.mean, s.stddev, s.min, s.max, 1e3 / s.median, vs);
            }
}

// --json: one line per (cache type, depth), its pp and tg test (at most one of each).
static json_t *octet_lines(const struct bench *B, double *scratch) {
    json_t *rows = json_array();
    for (int d = 0; d < B->n_depth; d++)
        for (int k = 0; k < B->n_dt; k++) {
            json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i}", "model", B->model, "kv_cache_dtype", B->dts[k],
                                  "kv_cache_dtype_resolved", cli_kv_dtype_resolved(B->dts[k], B->m->weight_dtype),
                                  "threads", B->threads, "depth", (int)B->depth[d], "reps", B->reps);
            for (int t = 0; t < B->n_test; t++) {
                const char *p = B->tests[t].tg ? "tg" : "pp";
                const double *x = TS(B, k, d, t);
                struct stats s = stats_of(x, B->reps, scratch);
                char key[40];
#define SETF(suffix, val) (snprintf(key, sizeof key, "%s%s", p, suffix), json_object_set_new(o, key, json_real(val)))
                json_object_set_new(o, p, json_integer(B->tests[t].n));
                SETF("_tok_s_median", s.median);
                SETF("_tok_s_min", s.min);
                SETF("_tok_s_max", s.max);
                SETF("_tok_s_mean", s.mean);
                SETF("_tok_s_stddev", s.stddev);
#undef SETF
                json_t *reps = json_array();
                for (int j = 0; j < B->reps; j++) json_array_append_new(reps, json_real(x[j]));
                snprintf(key, sizeof key, "%s_tok_s_reps", p);
                json_object_set_new(o, key, reps);
                if (B->tests[t].tg) {
                    json_object_set_new(o, "tg_ms_per_token", json_real(1e3 / s.median));
                    if (k) {
                        json_object_set_new(o, "vs_kv_cache_dtype", json_string(B->dts[0]));
                        json_object_set_new(o, "tg_ms_diff_paired_median", json_real(paired_ms(B, k, d, t, scratch)));
                    }
                }
            }
            json_array_append_new(rows, o);
        }
    return rows;
}

// -o json / jsonl: llama-bench's objects, one per (cache type, depth, test).
static json_t *llama_objects(const struct bench *B, double *scratch) {
    json_t *rows = json_array();
    int64_t params = 0;
    for (int i = 0; i < 3; i++) {
        const struct weight *w = i == 0 ? &B->m->token_embd : i == 1 ? &B->m->output_norm : &B->m->output;
        if (i < 2 || B->m->output.data != B->m->token_embd.data) params += w->rows * w->cols;
    }
    for (int l = 0; l < B->m->cfg.n_layers; l++) {
        struct weight *ws[LAYER_N_WEIGHTS];
        layer_weight_list(&B->m->layers[l], ws);
        for (int i = 0; i < LAYER_N_WEIGHTS; i++) if (ws[i]->data) params += ws[i]->rows * ws[i]->cols;
    }
    for (int d = 0; d < B->n_depth; d++)
        for (int k = 0; k < B->n_dt; k++)
            for (int t = 0; t < B->n_test; t++) {
                const double *x = TS(B, k, d, t);
                struct stats s = stats_of(x, B->reps, scratch);
                const char *ty = llama_type(cli_kv_dtype_resolved(B->dts[k], B->m->weight_dtype));
                int n = B->tests[t].n;
                double ns[1000], ns_mean = 0, ns_ss = 0;
                for (int j = 0; j < B->reps; j++) ns_mean += (ns[j] = n / x[j] * 1e9) / B->reps;
                for (int j = 0; j < B->reps; j++) ns_ss += (ns[j] - ns_mean) * (ns[j] - ns_mean);
                json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:s}",
                                      "model_filename", B->model, "model_type", B->m->cfg.arch,
                                      "weight_type", dtype_name(B->m->weight_dtype), "model_size",
                                      (json_int_t)B->m->weight_bytes, "model_n_params", (json_int_t)params,
                                      "backends", B->backend, "n_threads", B->threads, "type_k", ty, "type_v", ty,
                                      "kv_cache_dtype", B->dts[k], "n_prompt", B->tests[t].tg ? 0 : n,
                                      "n_gen", B->tests[t].tg ? n : 0, "n_depth", (int)B->depth[d], "test_time",
                                      B->when);
                json_object_set_new(o, "use_mmap", json_boolean(B->use_mmap));
                json_object_set_new(o, "avg_ns", json_real(ns_mean));
                json_object_set_new(o, "stddev_ns", json_real(B->reps > 1 ? sqrt(ns_ss / (B->reps - 1)) : 0));
                json_object_set_new(o, "avg_ts", json_real(s.mean));
                json_object_set_new(o, "stddev_ts", json_real(s.stddev));
                json_object_set_new(o, "median_ts", json_real(s.median));
                json_t *sn = json_array(), *st = json_array();
                for (int j = 0; j < B->reps; j++) {
                    json_array_append_new(sn, json_real(ns[j]));
                    json_array_append_new(st, json_real(x[j]));
                }
                json_object_set_new(o, "samples_ns", sn);
                json_object_set_new(o, "samples_ts", st);
                if (k && B->tests[t].tg) {
                    json_object_set_new(o, "vs_kv_cache_dtype", json_string(B->dts[0]));
                    json_object_set_new(o, "tg_ms_diff_paired_median", json_real(paired_ms(B, k, d, t, scratch)));
                }
                json_array_append_new(rows, o);
            }
    return rows;
}

// -o md: llama-bench's table (t/s = mean ± stddev), with the median beside it.
static void print_md(const struct bench *B, FILE *f, double *scratch) {
    double gib = B->m->weight_bytes / (1024.0 * 1024.0 * 1024.0);
    fprintf(f, "| model | size | backend | threads | type_k | type_v | test | t/s | median t/s |\n"
            "| --- | ---: | --- | ---: | --- | --- | ---: | ---: | ---: |\n");
    for (int d = 0; d < B->n_depth; d++)
        for (int k = 0; k < B->n_dt; k++)
            for (int t = 0; t < B->n_test; t++) {
                struct stats s = stats_of(TS(B, k, d, t), B->reps, scratch);
                const char *ty = llama_type(cli_kv_dtype_resolved(B->dts[k], B->m->weight_dtype));
                char name[48];
                test_label(B, d, t, name, sizeof name);
                fprintf(f, "| %s %s | %.2f GiB | %s | %d | %s | %s | %s | %.2f ± %.2f | %.2f |\n", B->m->cfg.arch,
                        dtype_name(B->m->weight_dtype), gib, B->backend, B->threads, ty, ty, name, s.mean, s.stddev,
                        s.median);
            }
}

enum fmt { FMT_TABLE, FMT_MD, FMT_JSON, FMT_JSONL };

int cmd_bench_model(int argc, char **argv) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    long pp[MAX_SIZES] = {512}, tg[MAX_SIZES] = {128}, reps = 5;
    long depth[MAX_DEPTHS] = {0};
    int n_pp = 1, n_tg = 1, n_depth = 1, n_dt = 1;
    char dt_buf[128] = "", *dts[MAX_DTYPES] = {NULL};
    const char *json_out = NULL, *ctk = NULL, *ctv = NULL;
    bool json = false, warmup = true, kv_list = false;
    enum fmt fmt = FMT_TABLE;
    static const char *const valued[] = {"--pp", "--tg", "-n", "--reps", "--depth", "--output", "-o", "--json",
                                         "--cache-type-k", "--cache-type-v", "--no-warmup", NULL};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kv-cache-dtype") && i + 1 < argc && strchr(argv[i + 1], ',')) {  // several: compared
            snprintf(dt_buf, sizeof dt_buf, "%s", argv[++i]);
            n_dt = split_list(dt_buf, dts, MAX_DTYPES);
            if (n_dt < 1) {
                err_set(OCT_EINVAL, "--kv-cache-dtype: at most %d cache types to compare", MAX_DTYPES);
                goto bad;
            }
            for (int k = 0; k < n_dt; k++) if (kv_options_set_dtype(&a.ro.kv, dts[k]) < 0) goto bad;
            kv_list = true;
            continue;
        }
        if (!strcmp(argv[i], "--kv-cache-dtype")) kv_list = true;
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
        if (!strcmp(f, "--no-warmup")) { warmup = false; continue; }
        if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) goto bad;
        if (!strcmp(f, "--pp")) { if ((n_pp = int_list(f, v, 0, 1 << 20, pp, MAX_SIZES)) < 0) goto bad; }
        else if (!strcmp(f, "--tg") || !strcmp(f, "-n")) {
            if ((n_tg = int_list(f, v, 0, 1 << 20, tg, MAX_SIZES)) < 0) goto bad;
        }
        else if (!strcmp(f, "--reps")) { if (cli_int(f, v, 1, 1000, &reps) < 0) goto bad; }
        else if (!strcmp(f, "--depth")) { if ((n_depth = int_list(f, v, 0, 1 << 24, depth, MAX_DEPTHS)) < 0) goto bad; }
        else if (!strcmp(f, "-o") && (!strcmp(v, "md") || !strcmp(v, "json") || !strcmp(v, "jsonl")))
            fmt = !strcmp(v, "md") ? FMT_MD : !strcmp(v, "json") ? FMT_JSON : FMT_JSONL;
        else if (!strcmp(f, "-o") && (!strcmp(v, "csv") || !strcmp(v, "sql"))) {
            err_set(OCT_EUNSUP, "-o %s: octet writes md, json or jsonl (llama-bench's csv and sql are not here)", v);
            goto bad;
        }
        else if (!strcmp(f, "--output") || !strcmp(f, "-o")) json_out = v;
        else if (!strcmp(f, "--cache-type-k")) ctk = v;
        else if (!strcmp(f, "--cache-type-v")) ctv = v;
        else { err_set(OCT_EINVAL, "unknown flag '%s'", f); goto bad; }
    }
    if (!a.model) { err_set(OCT_EINVAL, "--model is required"); goto bad; }
    if ((ctk || ctv) && kv_list) {
        err_set(OCT_EINVAL, "--kv-cache-dtype and --cache-type-k/-v name the same thing: give one of them");
        goto bad;
    }
    if (ctk || ctv) {
        if (cache_types(ctk, ctv, dt_buf, sizeof dt_buf, dts, &n_dt) < 0) goto bad;
        for (int k = 0; k < n_dt; k++) if (kv_options_set_dtype(&a.ro.kv, dts[k]) < 0) goto bad;
    }
    if (json && fmt != FMT_TABLE) {
        err_set(OCT_EINVAL, "--json and -o md|json|jsonl: give one output format");
        goto bad;
    }
    struct bench B = {.model = a.model, .dts = dts, .n_dt = n_dt, .n_depth = n_depth, .reps = (int)reps,
                      .depth = depth};
    long pmax = 0, tmax = 0;
    for (int i = 0; i < n_pp; i++)
        if (pp[i]) B.tests[B.n_test++] = (struct test){false, (int)pp[i]}, pmax = pp[i] > pmax ? pp[i] : pmax;
    for (int i = 0; i < n_tg; i++)
        if (tg[i]) B.tests[B.n_test++] = (struct test){true, (int)tg[i]}, tmax = tg[i] > tmax ? tg[i] : tmax;
    if (!B.n_test) { err_set(OCT_EINVAL, "-p 0 and -n 0: nothing to measure"); goto bad; }
    if (json && (B.n_test > 2 || (B.n_test == 2 && B.tests[0].tg == B.tests[1].tg))) {
        err_set(OCT_EINVAL, "--json lines hold one pp and one tg test; use -o json or -o jsonl for several -p / -n");
        goto bad;
    }
    if (!dts[0]) dts[0] = a.ro.kv.dtype;
    long dmax = 0;
    for (int d = 0; d < n_depth; d++) if (depth[d] > dmax) dmax = depth[d];
    struct model *m;
    if (cli_model_load(&m, &a) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); return 1; }
    B.m = m;
    cli_print_weights_load(stderr, m);
    struct weights_load_info wl;
    model_weights_load_info(m, &wl);
    B.use_mmap = wl.n_files && wl.how == WEIGHTS_LOAD_MMAP;
    long need = dmax + (pmax > tmax + 1 ? pmax : tmax + 1);
    if (a.ro.max_ctx <= 0) a.ro.max_ctx = (int)need;
    if (a.ro.max_ctx < need) {
        fprintf(stderr,
                "octet bench model: depth %ld + the test's tokens need a context of %ld, above --max-model-len %d\n",
                dmax, need, a.ro.max_ctx);
        model_free(m);
        return 2;
    }
    if (a.ro.max_step_tokens < pmax) a.ro.max_step_tokens = (int)pmax;
    B.threads = a.ro.n_threads > 0 ? a.ro.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    B.when = when;
    // [dtype][depth][test][rep] tokens/s; the engines share the model's uploaded weights
    const size_t cells = (size_t)n_dt * n_depth * B.n_test * reps;
    struct runner r[MAX_DTYPES];
    int n_up = 0;
    B.ts = calloc(cells, sizeof(double));
    double *scratch = malloc(sizeof(double) * (size_t)reps);
    FILE *jf = NULL;
    int rc = 1;
    if (!B.ts || !scratch) { err_set(OCT_ENOMEM, "out of memory"); goto fail; }
    for (; n_up < n_dt; n_up++) {
        struct runner_options o = a.ro;
        if (kv_options_set_dtype(&o.kv, dts[n_up]) < 0 || runner_init(&r[n_up], m, &o) < 0) goto fail;
        double w;
        if (warmup && pmax && run_pp(&r[n_up], (int)pmax, 0, &w) < 0) goto fail;  // page faults, thread start
        if (warmup && tmax && run_tg(&r[n_up], 1, 0, &w) < 0) goto fail;
    }
    B.backend = r[0].b->ops->name;
    for (int d = 0; d < n_depth; d++)
        for (int j = 0; j < reps; j++)
            for (int k = 0; k < n_dt; k++)  // in turn, so slow drift hits every cache type alike
                for (int t = 0; t < B.n_test; t++) {
                    double *out = TS(&B, k, d, t) + j;
                    if ((B.tests[t].tg ? run_tg(&r[k], B.tests[t].n, (int)depth[d], out)
                                       : run_pp(&r[k], B.tests[t].n, (int)depth[d], out)) < 0)
                        goto fail;
                }
    if (json_out && !(jf = fopen(json_out, "w"))) {
        err_set(OCT_EIO, "--output: cannot write %s", json_out);
        goto fail;
    }
    if (fmt == FMT_MD) {
        print_md(&B, stdout, scratch);
        if (jf) print_md(&B, jf, scratch);
    } else if (fmt == FMT_TABLE) {
        print_table(&B, json ? stderr : stdout, scratch);
    }
    if (fmt != FMT_MD) {
        json_t *rows = fmt == FMT_TABLE ? octet_lines(&B, scratch) : llama_objects(&B, scratch);
        if (fmt == FMT_JSON) {
            char *js = json_dumps(rows, JSON_INDENT(2));
            printf("%s\n", js);
            if (jf) fprintf(jf, "%s\n", js);
            free(js);
        } else {
            for (size_t i = 0; i < json_array_size(rows); i++) {
                char *js = json_dumps(json_array_get(rows, i), JSON_COMPACT);
                if (json || fmt == FMT_JSONL) printf("%s\n", js);
                if (jf) fprintf(jf, "%s\n", js);
                free(js);
            }
        }
        json_decref(rows);
    }
    if (jf) fclose(jf);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "octet: %s\n", err_msg());
done:
    for (int k = 0; k < n_up; k++) runner_free(&r[k]);
    free(B.ts);
    free(scratch);
    model_free(m);
    return rc;
bad:
    return cli_usage_error();
}
