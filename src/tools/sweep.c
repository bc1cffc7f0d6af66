// sweep.c — `octet bench sweep`: SPEC.md §5's single-request study in one command (owns:
// configurations, the length grid, per-config server lifetimes, fits, the tables, sweep.json
// and the charts; --throughput runs the load scenario per configuration instead).
// Every configuration gets a fresh server (prefix caches and warm-up do not leak between
// them) and the same prompts; comparisons are always against the first configuration.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/check.h"
#include "../model/tokenizer.h"
#include "../backend/backend.h"
#include "advise.h"
#include "bench_load.h"
#include "cli.h"
#include "fit.h"
#include "launch.h"
#include "plot.h"
#include "prompts.h"
#include "sweep.h"
#include "tools.h"

static void usage(void) {
    fprintf(stderr,
            "usage: octet bench sweep [--model M] [configurations] [flags]\n"
            "  (defaults: dummy:llama-3.1-8b with a GPU, else dummy:tiny; --kv-cache-dtype auto,fp8)\n"
            "configurations (each gets its own `octet serve --model M --port 0 FLAGS`):\n"
            "  --kv-cache-dtype A,B,...  one configuration per dtype (e.g. auto,fp8)\n"
            "  --config \"FLAGS\"          one configuration per occurrence (repeatable)\n"
            "  --serve-args \"FLAGS\"      flags added to every server (e.g. \"--threads 2\")\n"
            "  --base-url URL            measure a running server instead (one configuration)\n"
            "single-request sweep (default):\n"
            "  --input-lens A,B,...      prompt lengths (default: 256, 512, ... up to the max)\n"
            "  --min-input-len N         grid start (default 256)\n"
            "  --max-input-len N         grid end (default: 8192 without a GPU, else max_model_len - output len)\n"
            "  --output-len N            tokens per request (default 128; 2000 with --throughput)\n"
            "  --num-requests-per-len N  requests per length (default 1, after one warm-up)\n"
            "load scenario (--throughput): concurrency 8, 150 requests, 20000 in / 2000 out ±15%%\n"
            "  --num-prompts N  --input-len N  --max-concurrency N  --range-ratio R  --request-rate R\n"
            "common:\n"
            "  --output-dir DIR          sweep.json, itl.png, ttft.png, server logs (default sweep-out)\n"
            "  --tokenizer PATH          tokenizer for prompts (default: --model)\n"
            "  --logprobs N              request logprobs (a chunk per token from servers that skip empty ones)\n"
            "  --seed N  --api-key KEY  --startup-timeout S (300)  --request-timeout S  --quiet\n");
}

static int split_flags(const char *s, struct sweep_config *c) {
    char *dup = strdup(s), *save = NULL;
    if (!dup) return err_set(OCT_ENOMEM, "out of memory");
    for (char *t = strtok_r(dup, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (c->n_flags >= SWEEP_MAX_FLAGS) {
            free(dup);
            return err_set(OCT_EINVAL, "--config: more than %d words", SWEEP_MAX_FLAGS);
        }
        c->flags[c->n_flags++] = strdup(t);
    }
    free(dup);
    return OCT_OK;
}

static int add_config(struct sweep_args *a, const char *name, const char *flags) {
    if (a->n_configs >= SWEEP_MAX_CONFIGS) return err_set(OCT_EINVAL, "at most %d configurations", SWEEP_MAX_CONFIGS);
    struct sweep_config *c = &a->configs[a->n_configs++];
    snprintf(c->name, sizeof c->name, "%s", name);
    TRY(split_flags(flags, c));
    TRY(split_flags(a->serve_args ? a->serve_args : "", c));
    return OCT_OK;
}

static int parse_lens(const char *v, struct sweep_args *a) {
    char *dup = strdup(v), *save = NULL;
    a->n_lens = 0;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long n;
        if (a->n_lens >= SWEEP_MAX_LENS || cli_int("--input-lens", t, 1, 1 << 24, &n) < 0) {
            free(dup);
            if (a->n_lens >= SWEEP_MAX_LENS) return err_set(OCT_EINVAL, "--input-lens: more than %d", SWEEP_MAX_LENS);
            return OCT_EINVAL;
        }
        a->lens[a->n_lens++] = (int)n;
    }
    free(dup);
    return a->n_lens ? OCT_OK : err_set(OCT_EINVAL, "--input-lens: empty list");
}

static int parse(struct sweep_args *a, int argc, char **argv) {
    static const char *const flags[] = {"--model", "--kv-cache-dtype", "--config", "--serve-args", "--base-url",
        "--input-lens", "--min-input-len", "--max-input-len", "--output-len", "--num-requests-per-len",
        "--throughput", "--num-prompts", "--input-len", "--max-concurrency", "--range-ratio", "--request-rate",
        "--output-dir", "--tokenizer", "--seed", "--api-key", "--startup-timeout", "--request-timeout", "--quiet",
        "--logprobs", NULL};
    const char *dtypes = NULL, *configs[SWEEP_MAX_CONFIGS];
    int n_cfg = 0;
    long n;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v;
        if (!cli_known(f, flags)) return OCT_EINVAL;
        if (!strcmp(f, "--throughput")) { a->throughput = true; continue; }
        if (!strcmp(f, "--quiet")) { a->quiet = true; continue; }
        if (!(v = cli_value(argc, argv, &i))) return OCT_EINVAL;
        if (!strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "--kv-cache-dtype")) dtypes = v;
        else if (!strcmp(f, "--config")) {
            if (n_cfg >= SWEEP_MAX_CONFIGS) return err_set(OCT_EINVAL, "--config: at most %d", SWEEP_MAX_CONFIGS);
            configs[n_cfg++] = v;
        } else if (!strcmp(f, "--serve-args")) a->serve_args = v;
        else if (!strcmp(f, "--base-url")) a->base_url = v;
        else if (!strcmp(f, "--input-lens")) TRY(parse_lens(v, a));
        else if (!strcmp(f, "--output-dir")) a->output_dir = v;
        else if (!strcmp(f, "--tokenizer")) a->tokenizer = v;
        else if (!strcmp(f, "--api-key")) a->api_key = v;
        else if (!strcmp(f, "--min-input-len")) { TRY(cli_int(f, v, 1, 1 << 24, &n)); a->min_len = (int)n; }
        else if (!strcmp(f, "--max-input-len")) { TRY(cli_int(f, v, 1, 1 << 24, &n)); a->max_len = (int)n; }
        else if (!strcmp(f, "--output-len")) { TRY(cli_int(f, v, 1, 1 << 24, &n)); a->output_len = (int)n; }
        else if (!strcmp(f, "--num-requests-per-len")) { TRY(cli_int(f, v, 1, 10000, &n)); a->per_len = (int)n; }
        else if (!strcmp(f, "--logprobs")) { TRY(cli_int(f, v, 0, 20, &n)); a->logprobs = (int)n; }
        else if (!strcmp(f, "--num-prompts")) { TRY(cli_int(f, v, 1, 1 << 24, &n)); a->num_prompts = (int)n; }
        else if (!strcmp(f, "--input-len")) { TRY(cli_int(f, v, 1, 1 << 24, &n)); a->input_len = (int)n; }
        else if (!strcmp(f, "--max-concurrency")) { TRY(cli_int(f, v, 1, 1 << 20, &n)); a->max_conc = (int)n; }
        else if (!strcmp(f, "--seed")) { TRY(cli_int(f, v, 0, 1L << 62, &n)); a->seed = (unsigned long long)n; }
        else if (!strcmp(f, "--range-ratio")) {
            TRY(cli_float(f, v, &a->range_ratio));
            if (a->range_ratio < 0 || a->range_ratio >= 1)
                return err_set(OCT_EINVAL, "%s: '%s' must be in [0, 1)", f, v);
        } else if (!strcmp(f, "--request-rate")) {
            if (!strcmp(v, "inf")) a->rate = INFINITY;
            else if (cli_float(f, v, &a->rate) < 0 || !(a->rate > 0))
                return err_set(OCT_EINVAL, "%s: '%s' must be > 0 or inf", f, v);
        } else if (!strcmp(f, "--startup-timeout") || !strcmp(f, "--request-timeout")) {
            double d;
            TRY(cli_float(f, v, &d));
            if (d < 0) return err_set(OCT_EINVAL, "%s: '%s' must be >= 0", f, v);
            *(f[2] == 's' ? &a->startup_timeout_s : &a->request_timeout_s) = d;
        }
    }
    if (a->base_url) {
        if (dtypes || n_cfg || a->serve_args)
            return err_set(OCT_EINVAL,
                           "--base-url measures one running server: drop --kv-cache-dtype/--config/--serve-args");
        a->n_configs = 1;
        snprintf(a->configs[0].name, sizeof a->configs[0].name, "external");
    } else {
        // the embedded default: the seed's study on dummy weights of a real shape
        if (!a->model) a->model = backend_cuda_available() ? "dummy:llama-3.1-8b" : "dummy:tiny";
        if (!dtypes && !n_cfg) dtypes = "auto,fp8";
        if (dtypes) {
            char *dup = strdup(dtypes), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                char fl[200];
                snprintf(fl, sizeof fl, "--kv-cache-dtype %s", t);
                if (add_config(a, t, fl) < 0) { free(dup); return OCT_EINVAL; }
            }
            free(dup);
        }
        for (int i = 0; i < n_cfg; i++) TRY(add_config(a, configs[i], configs[i]));
        if (a->n_configs == 0) TRY(add_config(a, "default", ""));
    }
    if (a->throughput) {
        if (!a->output_len) a->output_len = 2000;
    } else if (!a->output_len) {
        a->output_len = 128;
    }
    if (!a->throughput && !a->base_url && !a->n_lens && !a->max_len && !backend_cuda_available()) {
        a->max_len = SWEEP_CPU_MAX_LEN;  // a CPU's 32k prefills take minutes each
        a->cpu_grid = true;
    }
    return OCT_OK;
}

// The 1/5/15-minute load averages, or -1s when /proc/loadavg cannot be read.
static void read_loadavg(double l[3]) {
    l[0] = l[1] = l[2] = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = l[1] = l[2] = -1;
    fclose(f);
}

// Busy and total jiffies of all cores from /proc/stat's first line; false when unreadable.
static bool cpu_jiffies(double *busy, double *total) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return false;
    unsigned long long v[8] = {0};  // user nice system idle iowait irq softirq steal
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7]);
    fclose(f);
    if (n < 4) return false;
    *busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
    *total = *busy + (double)(v[3] + v[4]);
    return true;
}

// Before any server starts: a machine already busy makes every timing slower and noisier. Busy is
// measured over SWEEP_BUSY_SAMPLE_S now (the load average lags by minutes: a job that just ended
// still counts in it); the load average is recorded beside it.
#define SWEEP_BUSY_SAMPLE_S 1.0
static void check_machine(struct sweep_args *a) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    a->n_cpus = n > 0 ? (int)n : 1;
    read_loadavg(a->load_start);
    double b0, t0, b1, t1;
    a->busy_cores = -1;
    if (cpu_jiffies(&b0, &t0)) {
        struct timespec ts = {(time_t)SWEEP_BUSY_SAMPLE_S,
                              (long)((SWEEP_BUSY_SAMPLE_S - (int)SWEEP_BUSY_SAMPLE_S) * 1e9)};
        nanosleep(&ts, NULL);
        if (cpu_jiffies(&b1, &t1) && t1 > t0) a->busy_cores = (b1 - b0) / (t1 - t0) * a->n_cpus;
    }
    a->busy = a->busy_cores >= 0 ? a->busy_cores >= 0.5 * a->n_cpus : a->load_start[0] >= 0.5 * a->n_cpus;
    if (a->busy)
        fprintf(stderr, "octet: warning: this machine is busy (%.1f of its %d cores in use by other work, load average "
                "%.2f): the timings will be slower and noisier than an idle machine's; compare them with a "
                "recorded run only on an idle machine\n", a->busy_cores, a->n_cpus, a->load_start[0]);
}

// The cache dtype(s) octet serve reported in its log ("KV cache dtype per layer: bf16 bf16 ..."):
// one name when every layer agrees, else the distinct names joined by '+'.
static void resolved_kv_dtype(const char *log, char *out, size_t cap) {
    out[0] = 0;
    FILE *f = fopen(log, "r");
    if (!f) return;
    char line[4096];
    const char *key = "KV cache dtype per layer:";
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, key);
        if (!p) continue;
        char *save = NULL;
        for (char *t = strtok_r(p + strlen(key), " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            char pad[80];
            snprintf(pad, sizeof pad, "+%s+", t);
            char have[80];
            snprintf(have, sizeof have, "+%s+", out);
            if (strstr(have, pad)) continue;
            size_t n = strlen(out);
            snprintf(out + n, cap - n, "%s%s", n ? "+" : "", t);
        }
        break;
    }
    fclose(f);
}

static void free_args(struct sweep_args *a) {
    for (int c = 0; c < a->n_configs; c++)
        for (int i = 0; i < a->configs[c].n_flags; i++) free(a->configs[c].flags[i]);
}

// Starts configuration c's server (or points at --base-url); fills url and the served name.
static int open_target(struct sweep_args *a, int c, struct launched_server *srv, char *url, size_t cap) {
    if (a->base_url) {
        snprintf(url, cap, "%s", a->base_url);
        size_t n = strlen(url);
        while (n > 0 && url[n - 1] == '/') url[--n] = 0;
        return OCT_OK;
    }
    char log[1024];
    snprintf(log, sizeof log, "%s/server_%d.log", a->output_dir, c);
    if (!a->quiet) fprintf(stderr, "octet: [%s] starting octet serve --model %s %s\n", a->configs[c].name, a->model,
                           sweep_flags_str(&a->configs[c]));
    TRY(launch_server(srv, a->model, a->configs[c].flags, a->configs[c].n_flags, log, a->startup_timeout_s));
    snprintf(url, cap, "%s", srv->base_url);
    return OCT_OK;
}

const char *sweep_flags_str(const struct sweep_config *c) {
    static _Thread_local char buf[1024];
    buf[0] = 0;
    for (int i = 0; i < c->n_flags; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof buf - n, "%s%s", i ? " " : "", c->flags[i]);
    }
    return buf;
}

static struct bench_load_options load_options(const struct sweep_args *a, const char *url, const char *model) {
    struct bench_load_options o = {.url = url, .model = model, .api_key = a->api_key, .max_concurrency = 1,
        .request_rate = INFINITY, .seed = a->seed, .ignore_eos = true, .logprobs = a->logprobs,
        .timeout_s = a->request_timeout_s};
    return o;
}

// Runs one configuration: warm-up, then reqs (sweep: one at a time; throughput: the load).
static int run_config(struct sweep_args *a, int c, struct sweep_data *d, struct sweep_result *r) {
    struct launched_server srv = {0};
    char url[512], full[600], model[512] = "";
    int rc = open_target(a, c, &srv, url, sizeof url);
    if (rc == OCT_OK) rc = bench_discover(url, a->api_key, model, sizeof model, &r->max_model_len);
    if (rc < 0) {
        snprintf(r->error, sizeof r->error, "%s", err_msg());
        launch_stop(&srv);
        return rc;
    }
    snprintf(r->served_model, sizeof r->served_model, "%s", model);
    TRY(sweep_prepare(a, d, r->max_model_len, model));  // first call builds prompts; later ones reuse
    snprintf(full, sizeof full, "%s/v1/completions", url);
    struct bench_load_options o = load_options(a, full, model);
    double dur;
    struct bench_outcome warm;
    rc = bench_load_run(&o, &d->warmup, 1, &warm, &dur);
    if (rc == OCT_OK && !warm.ok)  // the same server would fail the measured requests too: stop here
        rc = err_set(OCT_EIO, "the warm-up request failed: %s", warm.error);
    bench_outcomes_free(&warm, 1);
    if (rc < 0) {
        snprintf(r->error, sizeof r->error, "%s", err_msg());
        launch_stop(&srv);
        return rc;
    }
    char label[160];
    if (!a->base_url) {  // "auto" is whatever the server chose: name it in every table, legend and JSON
        char log[1024];
        snprintf(log, sizeof log, "%s/server_%d.log", a->output_dir, c);
        resolved_kv_dtype(log, r->kv_resolved, sizeof r->kv_resolved);
        struct sweep_config *cf = &a->configs[c];
        size_t n = strlen(cf->name);
        if (r->kv_resolved[0] && strstr(cf->name, "auto") && n + strlen(r->kv_resolved) + 4 < sizeof cf->name)
            snprintf(cf->name + n, sizeof cf->name - n, " (%s)", r->kv_resolved);
    }
    snprintf(label, sizeof label, "%s %s [%d/%d]", a->throughput ? "load" : "sweep", a->configs[c].name, c + 1,
             a->n_configs);
    o.progress_label = a->quiet ? NULL : label;
    o.progress_cost = a->throughput ? NULL : d->cost;
    for (int i = 0; o.progress_cost && i < d->n_reqs; i++)  // the configurations after this one: the same requests
        o.progress_later += (a->n_configs - 1 - c) * d->cost[i];
    if (a->throughput) { o.max_concurrency = a->max_conc; o.request_rate = a->rate; }
    r->out = calloc((size_t)d->n_reqs, sizeof *r->out);
    r->n_out = d->n_reqs;
    struct step_stats before, after;
    step_stats_scrape(url, a->api_key, &before);
    if (!r->out) rc = err_set(OCT_ENOMEM, "out of memory");
    else rc = bench_load_run(&o, d->reqs, d->n_reqs, r->out, &r->duration_s);
    step_stats_scrape(url, a->api_key, &after);
    r->steps = step_stats_diff(&after, &before);
    launch_stop(&srv);
    if (rc < 0) { snprintf(r->error, sizeof r->error, "%s", err_msg()); return rc; }
    bench_metrics_compute(r->out, d->n_reqs, r->duration_s, &r->m);
    const char *first = "";
    for (int i = 0; i < d->n_reqs && !first[0]; i++) if (!r->out[i].ok) first = r->out[i].error;
    if (r->m.completed == 0) {  // nothing to fit or plot
        snprintf(r->error, sizeof r->error, "all %d requests failed (the first: %.900s)", d->n_reqs, first);
        return err_set(OCT_EIO, "%s", r->error);
    }
    if (r->m.failed > 0)
        fprintf(stderr, "octet: [%s] warning: %d of %d requests failed (the first: %s); the fits use the rest\n",
                a->configs[c].name, r->m.failed, d->n_reqs, first);
    r->ran = true;
    if (d->cost)  // later configurations' ETAs follow this one's measured cost per length
        for (int i = 0; i < d->n_reqs; i++)
            if (r->out[i].ok && r->out[i].latency_s > 0) d->cost[i] = r->out[i].latency_s;
    if (!a->throughput) sweep_fit(r);
    return OCT_OK;
}

int cmd_bench_sweep(int argc, char **argv) {
    static struct sweep_args a;
    memset(&a, 0, sizeof a);
    a.min_len = 256; a.per_len = 1; a.num_prompts = 150; a.input_len = 20000; a.max_conc = 8;
    a.range_ratio = 0.15; a.rate = INFINITY; a.output_dir = "sweep-out"; a.startup_timeout_s = 300;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(); return 0; }
    if (parse(&a, argc, argv) < 0) {
        free_args(&a);
        return cli_usage_error();  // one line and a pointer to --help
    }
    check_machine(&a);
    if (a.cpu_grid && !a.quiet)
        fprintf(stderr, "octet: no GPU: input lengths up to %d tokens (--max-input-len or --input-lens for longer)\n",
                SWEEP_CPU_MAX_LEN);
    mkdir(a.output_dir, 0755);
    struct stat sb;
    if (stat(a.output_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "octet bench sweep: --output-dir: cannot create %s\n", a.output_dir);
        free_args(&a);
        return 1;
    }
    struct sweep_data d = {0};
    struct sweep_result *res = calloc((size_t)a.n_configs, sizeof *res);
    int n_ran = 0, n_clean = 0;
    for (int c = 0; res && c < a.n_configs; c++) {
        if (run_config(&a, c, &d, &res[c]) < 0) {
            if (!res[c].error[0]) snprintf(res[c].error, sizeof res[c].error, "%s", err_msg());
            fprintf(stderr, "octet: [%s] failed: %s\n", a.configs[c].name, res[c].error);
            if (!d.ready) break;  // no prompts: later configurations cannot run either
        } else {
            n_ran++;
            n_clean += res[c].m.failed == 0;  // a configuration with failed requests makes the exit status 1
        }
    }
    read_loadavg(a.load_end);
    int rc = n_clean == a.n_configs ? 0 : 1;
    if (res && n_ran > 0 && sweep_report(&a, &d, res) < 0) {
        fprintf(stderr, "octet bench sweep: %s\n", err_msg());
        rc = 1;
    }
    for (int c = 0; res && c < a.n_configs; c++) sweep_result_free(&res[c]);
    free(res);
    sweep_data_free(&d);
    free_args(&a);
    return rc;
}
