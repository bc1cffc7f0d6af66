// sweep_report.c — the sweep's prompts, fits and outputs (owns: the length grid, points →
// fits, the printed tables, sweep.json / throughput.json and the two charts).
// JSON numbers are raw (ms, tokens); tables round for reading. Failed requests are listed
// with their errors in the JSON and counted in the tables, never silently dropped.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/check.h"
#include "../model/tokenizer.h"
#include "advise.h"
#include "plot.h"
#include "prompts.h"
#include "sweep.h"

static int build_grid(struct sweep_args *a, int max_model_len) {
    if (a->n_lens == 0) {
        int hi = a->max_len ? a->max_len : (max_model_len > 0 ? max_model_len - a->output_len : 0);
        if (hi <= 0)
            return err_set(OCT_EINVAL, "the server reports no max_model_len: give --max-input-len or --input-lens");
        if (hi < a->min_len)
            return err_set(OCT_EINVAL, "--max-input-len %d is below --min-input-len %d", hi, a->min_len);
        for (long l = a->min_len; l <= hi && a->n_lens < SWEEP_MAX_LENS; l *= 2) a->lens[a->n_lens++] = (int)l;
        if (a->lens[a->n_lens - 1] < hi && a->n_lens < SWEEP_MAX_LENS) a->lens[a->n_lens++] = hi;
    }
    int k = 0;
    for (int i = 0; i < a->n_lens; i++) {
        if (max_model_len > 0 && a->lens[i] + a->output_len > max_model_len) {
            fprintf(stderr,
                    "octet: warning: skipping input length %d: with %d output tokens it exceeds max_model_len %d\n",
                    a->lens[i], a->output_len, max_model_len);
            continue;
        }
        a->lens[k++] = a->lens[i];
    }
    a->n_lens = k;
    return k ? OCT_OK : err_set(OCT_EINVAL, "no input length fits the server's max_model_len %d", max_model_len);
}

int sweep_prepare(struct sweep_args *a, struct sweep_data *d, int max_model_len, const char *served_model) {
    if (d->ready) return OCT_OK;
    if (!a->throughput) TRY(build_grid(a, max_model_len));
    struct tokenizer *tok = NULL;
    TRY(bench_pick_tokenizer(a->tokenizer, a->model ? a->model : served_model, &tok));
    struct prompt_gen g;
    int rc = prompt_gen_init(&g, tok, a->seed);
    if (rc < 0) { tokenizer_free(tok); return rc; }
    int warm_len = a->throughput ? (a->input_len < 256 ? a->input_len : 256) : a->lens[0];
    d->warmup.output_len = a->output_len < 16 ? a->output_len : 16;
    rc = prompt_gen_make(&g, warm_len, &d->warmup.prompt, &d->warmup.prompt_len);
    d->n_reqs = a->throughput ? a->num_prompts : a->n_lens * a->per_len;
    d->reqs = calloc((size_t)d->n_reqs, sizeof *d->reqs);
    d->cost = a->throughput ? NULL : calloc((size_t)d->n_reqs, sizeof *d->cost);
    if (rc == OCT_OK && (!d->reqs || (!a->throughput && !d->cost))) rc = err_set(OCT_ENOMEM, "out of memory");
    if (rc == OCT_OK && a->throughput) {
        if (!a->quiet)
            fprintf(stderr, "octet: making %d prompts of %d±%.0f%% tokens\n",
                    d->n_reqs, a->input_len, 100 * a->range_ratio);
        struct bench_random_spec sp = {d->n_reqs, a->input_len, a->output_len, a->range_ratio, a->seed};
        rc = bench_random_requests(&g, &sp, d->reqs);
    } else {
        for (int i = 0; rc == OCT_OK && i < d->n_reqs; i++) {
            d->reqs[i].output_len = a->output_len;
            rc = prompt_gen_make(&g, a->lens[i / a->per_len], &d->reqs[i].prompt, &d->reqs[i].prompt_len);
            d->cost[i] = sweep_cost_model(a->lens[i / a->per_len], a->output_len);
        }
    }
    prompt_gen_free(&g);
    tokenizer_free(tok);
    if (rc < 0) { sweep_data_free(d); return err_wrap(rc, "prompts: "); }
    d->ready = true;
    return OCT_OK;
}

double sweep_cost_model(int len, int out) {
    // the linear terms equal the quadratic one at 1024 tokens: a middle ground between a small model
    // on a CPU (attention dominates from a few hundred tokens) and an 8B model on a GPU (the matrices
    // dominate to tens of thousands); the ETA only needs the shape, the rate is measured
    double L = len;
    return L * L + 1024.0 * L + (double)out * (1024.0 + L);
}

// Decode time per generated token after the first: (last event - first output) / (tokens - 1).
// Equal to the mean gap between chunks when every token is its own chunk, and still right
// when a server holds back text-less tokens or incomplete UTF-8 (fewer chunks than tokens).
double sweep_mean_itl_ms(const struct bench_outcome *o) {
    if (!o->ok || o->output_len < 2 || o->latency_s <= o->ttft_s) return NAN;
    return (o->latency_s - o->ttft_s) / (o->output_len - 1) * 1000;
}

// The mean gap between token chunks in each quarter of the output, in order (null with fewer
// than 4 gaps): a decode that starts slower than it ends (a clock governor recovering from a
// power-capped prefill, say) shows here while the mean ITL hides it.
static json_t *itl_quarters_json(const struct bench_outcome *o) {
    if (o->n_itl < 4 || !o->itl_s) return json_null();
    json_t *a = json_array();
    for (int k = 0; k < 4; k++) {
        int lo = o->n_itl * k / 4, hi = o->n_itl * (k + 1) / 4;
        double sum = 0;
        for (int i = lo; i < hi; i++) sum += o->itl_s[i];
        json_array_append_new(a, json_real(sum / (hi - lo) * 1000));
    }
    return a;
}

void sweep_fit(struct sweep_result *r) {
    int n = r->n_out;
    r->x_ttft = calloc((size_t)n + 1, sizeof(double)); r->ttft_ms = calloc((size_t)n + 1, sizeof(double));
    r->x_itl = calloc((size_t)n + 1, sizeof(double)); r->itl_ms = calloc((size_t)n + 1, sizeof(double));
    if (!r->x_ttft || !r->ttft_ms || !r->x_itl || !r->itl_ms) return;
    for (int i = 0; i < n; i++) {
        const struct bench_outcome *o = &r->out[i];
        if (!o->ok) continue;
        r->x_ttft[r->n_ttft] = o->input_len;
        r->ttft_ms[r->n_ttft++] = o->ttft_s * 1000;
        double itl = sweep_mean_itl_ms(o);
        if (!isnan(itl)) {
            r->x_itl[r->n_itl] = o->input_len;
            r->itl_ms[r->n_itl++] = itl;
        }
    }
    r->itl_ok = fit_line(r->x_itl, r->itl_ms, r->n_itl, &r->itl) == OCT_OK;
    // the four quarters of one request's tokens run at nearly one context length, so their spread is
    // the machine's noise (another process, a clock governor), not the model's
    double *sp = calloc((size_t)n + 1, sizeof(double));
    int k = 0;
    for (int i = 0; sp && i < n; i++) {
        const struct bench_outcome *o = &r->out[i];
        if (!o->ok || o->n_itl < 8 || !o->itl_s) continue;
        double q[4], lo = INFINITY, hi = 0, mean = 0;
        for (int j = 0; j < 4; j++) {
            int a = o->n_itl * j / 4, b = o->n_itl * (j + 1) / 4;
            q[j] = 0;
            for (int t = a; t < b; t++) q[j] += o->itl_s[t];
            q[j] /= b - a;
            lo = q[j] < lo ? q[j] : lo;
            hi = q[j] > hi ? q[j] : hi;
            mean += q[j] / 4;
        }
        if (mean > 0) sp[k++] = 100 * (hi - lo) / mean;
    }
    r->itl_spread_pct = NAN;
    if (k) {
        for (int i = 1; i < k; i++)  // insertion sort: a few points
            for (int j = i; j > 0 && sp[j - 1] > sp[j]; j--) { double t = sp[j]; sp[j] = sp[j - 1]; sp[j - 1] = t; }
        r->itl_spread_pct = k % 2 ? sp[k / 2] : (sp[k / 2 - 1] + sp[k / 2]) / 2;
    }
    free(sp);
    r->ttft_ok = fit_quad(r->x_ttft, r->ttft_ms, r->n_ttft, &r->ttft) == OCT_OK;
}

void sweep_result_free(struct sweep_result *r) {
    bench_outcomes_free(r->out, r->n_out);
    free(r->out); free(r->x_ttft); free(r->ttft_ms); free(r->x_itl); free(r->itl_ms);
}

void sweep_data_free(struct sweep_data *d) {
    free(d->warmup.prompt);
    d->warmup.prompt = NULL;
    bench_requests_free(d->reqs, d->n_reqs);
    free(d->reqs);
    free(d->cost);
    d->reqs = NULL;
    d->cost = NULL;
    d->n_reqs = 0;
}

// Mean of the successful requests' values at each grid length (for the points table).
static double mean_at(const struct sweep_result *r, int want_len, bool itl, const struct sweep_data *d) {
    double s = 0;
    int k = 0;
    for (int i = 0; i < r->n_out; i++) {
        const struct bench_outcome *o = &r->out[i];
        if (!o->ok || d->reqs[i].prompt_len != want_len) continue;
        if (itl) {
            double v = sweep_mean_itl_ms(o);
            if (isnan(v)) continue;
            s += v;
        } else {
            s += o->ttft_s * 1000;
        }
        k++;
    }
    return k ? s / k : NAN;
}

static json_t *fits_json(const struct sweep_result *r, const struct sweep_result *base, bool is_base) {
    json_t *o = json_object();
    if (r->itl_ok) {
        json_t *f = json_object();
        json_object_set_new(f, "slope_ms_per_token", json_real(r->itl.slope));
        json_object_set_new(f, "slope_se_ms_per_token",
                            isnan(r->itl.slope_se) ? json_null() : json_real(r->itl.slope_se));
        json_object_set_new(f, "intercept_ms", json_real(r->itl.intercept));
        json_object_set_new(f, "intercept_se_ms",
                            isnan(r->itl.intercept_se) ? json_null() : json_real(r->itl.intercept_se));
        json_object_set_new(f, "r2", json_real(r->itl.r2));
        json_object_set_new(f, "n", json_integer(r->itl.n));
        json_object_set_new(o, "itl_fit", f);
    } else {
        json_object_set_new(o, "itl_fit", json_null());
    }
    if (r->ttft_ok) {
        json_t *f = json_object();
        json_object_set_new(f, "a", json_real(r->ttft.a));
        json_object_set_new(f, "b", json_real(r->ttft.b));
        json_object_set_new(f, "c", json_real(r->ttft.c));
        json_object_set_new(f, "r2", json_real(r->ttft.r2));
        json_object_set_new(f, "n", json_integer(r->ttft.n));
        json_object_set_new(o, "ttft_fit", f);
    } else {
        json_object_set_new(o, "ttft_fit", json_null());
    }
    if (!is_base && base && base->itl_ok && r->itl_ok) {
        json_t *v = json_object();
        struct fit_break b = fit_break_even(&base->itl, &r->itl);
        char s[32];
        json_object_set_new(v, "slope_ratio_pct",
                            base->itl.slope != 0 ? json_real(100 * r->itl.slope / base->itl.slope) : json_null());
        double se = fit_ratio_se(&r->itl, &base->itl);
        json_object_set_new(v, "slope_ratio_pct_se", isnan(se) ? json_null() : json_real(100 * se));
        json_object_set_new(v, "intercept_delta_ms", json_real(r->itl.intercept - base->itl.intercept));
        json_object_set_new(v, "break_even", json_string(fit_break_str(b, s, sizeof s)));
        json_object_set_new(v, "break_even_tokens", b.kind == FIT_BREAK_AT ? json_real(b.x) : json_null());
        json_object_set_new(o, "vs_first", v);
    }
    return o;
}

// The configuration column of the tables: wide enough for the longest name (--config names are their
// flags, which differ at the end), at least 24 and at most 72 characters.
static int name_width(const struct sweep_args *a) {
    int w = 24;
    for (int c = 0; c < a->n_configs; c++) {
        const int n = (int)strlen(a->configs[c].name);
        if (n > w) w = n < 72 ? n : 72;
    }
    return w;
}

static void print_fit_table(const struct sweep_args *a, const struct sweep_result *res) {
    const int nw = name_width(a);
    printf("\n%-*s %13s %11s %7s %11s %11s %10s %7s %13s %11s\n", nw, "configuration", "ITL slope", "intercept",
           "R2", "TTFT a", "b", "c", "R2", "slope %", "break-even");
    printf("%-*s %13s %11s %7s %11s %11s %10s %7s %13s %11s\n", nw, "", "ms/token", "ms", "",
           "ms/tok^2", "ms/tok", "ms", "", "vs first (±se)", "tokens");
    for (int c = 0; c < a->n_configs; c++) {
        const struct sweep_result *r = &res[c];
        printf("%-*.*s ", nw, nw, a->configs[c].name);
        if (!r->ran) { printf("failed: %s\n", r->error); continue; }
        if (r->itl_ok) printf("%13.4e %11.4f %7.4f ", r->itl.slope, r->itl.intercept, r->itl.r2);
        else printf("%13s %11s %7s ", "n/a", "n/a", "");
        if (r->ttft_ok) printf("%11.3e %11.3e %10.3f %7.4f ", r->ttft.a, r->ttft.b, r->ttft.c, r->ttft.r2);
        else printf("%11s %11s %10s %7s ", "n/a", "n/a", "n/a", "");
        if (c == 0) printf("%13s %11s\n", "100.0%", "-");
        else if (res[0].itl_ok && r->itl_ok && res[0].itl.slope != 0) {
            char s[32], pct[32];
            double se = fit_ratio_se(&r->itl, &res[0].itl);
            if (isnan(se)) snprintf(pct, sizeof pct, "%.1f%%", 100 * r->itl.slope / res[0].itl.slope);
            else snprintf(pct, sizeof pct, "%.1f±%.1f%%", 100 * r->itl.slope / res[0].itl.slope, 100 * se);
            const char *be = fit_break_str(fit_break_even(&res[0].itl, &r->itl), s, sizeof s);
            printf("%*s %11s\n", 13 + (isnan(se) ? 0 : 1), pct, be);
        } else {
            printf("%13s %11s\n", "n/a", "n/a");
        }
    }
}

static void print_points_table(const struct sweep_args *a, const struct sweep_data *d, const struct sweep_result *res) {
    printf("\n%-10s", "input len");
    for (int c = 0; c < a->n_configs; c++) printf(" %13.13s", a->configs[c].name);
    printf("   |");
    for (int c = 0; c < a->n_configs; c++) printf(" %13.13s", a->configs[c].name);
    printf("\n%-10s", "");
    for (int c = 0; c < a->n_configs; c++) printf(" %13s", "ITL ms");
    printf("   |");
    for (int c = 0; c < a->n_configs; c++) printf(" %13s", "TTFT ms");
    printf("\n");
    for (int l = 0; l < a->n_lens; l++) {
        int len = d->reqs[l * a->per_len].prompt_len;
        printf("%-10d", len);
        for (int c = 0; c < a->n_configs; c++) printf(" %13.4f", res[c].ran ? mean_at(&res[c], len, true, d) : NAN);
        printf("   |");
        for (int c = 0; c < a->n_configs; c++) printf(" %13.2f", res[c].ran ? mean_at(&res[c], len, false, d) : NAN);
        printf("\n");
    }
}

static void plots(const struct sweep_args *a, const struct sweep_result *res, json_t *j) {
    struct plot_series s[SWEEP_MAX_CONFIGS];
    char path[1024], title[1024];
    int n = 0;
    for (int c = 0; c < a->n_configs; c++) {
        if (!res[c].ran) continue;
        s[n] = (struct plot_series){a->configs[c].name, res[c].x_itl, res[c].itl_ms, res[c].n_itl,
                                    res[c].itl_ok ? 1 : 0, {res[c].itl.intercept, res[c].itl.slope, 0}};
        n++;
    }
    snprintf(title, sizeof title, "Mean ITL vs input length (%s, concurrency 1, %d output tokens)",
             a->model ? a->model : res[0].served_model, a->output_len);
    snprintf(path, sizeof path, "%s/itl.png", a->output_dir);
    json_t *p = json_object();
    if (plot_png(path, title, "input length (tokens)", "mean inter-token latency (ms)", s, n) == OCT_OK)
        json_object_set_new(p, "itl", json_string("itl.png"));
    else
        fprintf(stderr, "octet: warning: %s\n", err_msg());
    n = 0;
    for (int c = 0; c < a->n_configs; c++) {
        if (!res[c].ran) continue;
        s[n] = (struct plot_series){a->configs[c].name, res[c].x_ttft, res[c].ttft_ms, res[c].n_ttft,
                                    res[c].ttft_ok ? 2 : 0, {res[c].ttft.c, res[c].ttft.b, res[c].ttft.a}};
        n++;
    }
    snprintf(title, sizeof title, "TTFT vs input length (%s, concurrency 1)",
             a->model ? a->model : res[0].served_model);
    snprintf(path, sizeof path, "%s/ttft.png", a->output_dir);
    if (plot_png(path, title, "input length (tokens)", "time to first token (ms)", s, n) == OCT_OK)
        json_object_set_new(p, "ttft", json_string("ttft.png"));
    else
        fprintf(stderr, "octet: warning: %s\n", err_msg());
    json_object_set_new(j, "plots", p);
}

static json_t *config_json(const struct sweep_args *a, int c, const struct sweep_result *r) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(a->configs[c].name));
    json_t *fl = json_array();
    for (int i = 0; i < a->configs[c].n_flags; i++) json_array_append_new(fl, json_string(a->configs[c].flags[i]));
    json_object_set_new(o, "flags", fl);
    json_object_set_new(o, "ok", json_boolean(r->ran));
    json_object_set_new(o, "kv_cache_dtype_resolved", r->kv_resolved[0] ? json_string(r->kv_resolved) : json_null());
    if (!r->ran) json_object_set_new(o, "error", json_string(r->error));
    json_object_set_new(o, "completed", json_integer(r->m.completed));
    json_object_set_new(o, "failed", json_integer(r->m.failed));
    json_t *errs = json_array();
    for (int i = 0; i < r->n_out; i++)
        if (!r->out[i].ok) json_array_append_new(errs, json_string(r->out[i].error[0] ? r->out[i].error : "(unknown)"));
    json_object_set_new(o, "errors", errs);
    json_t *st = step_stats_json(&r->steps);  // (an octet server's steps over the measured requests)
    if (st) json_object_set_new(o, "steps", st);
    return o;
}

static json_t *loadavg_json(const double l[3]) {
    if (l[0] < 0) return json_null();
    return json_pack("[f,f,f]", l[0], l[1], l[2]);
}

// The machine the sweep ran on: the binary's version, the CPU, its cores and how busy it was.
static json_t *host_json(const struct sweep_args *a) {
    json_t *h = json_object();
    char line[512], cpu[256] = "", exe[1024], cmd[1100];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    FILE *f = NULL;
    if (n > 0 && !memchr(exe, '\'', (size_t)n)) {  // this binary's commit, as `octet --version` prints it
        exe[n] = 0;
        snprintf(cmd, sizeof cmd, "'%s' --version 2>/dev/null", exe);
        f = popen(cmd, "r");
    }
    if (f) {
        if (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            json_object_set_new(h, "octet", json_string(line));
        }
        pclose(f);
    }
    if ((f = fopen("/proc/cpuinfo", "r"))) {
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
                snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
                cpu[strcspn(cpu, "\n")] = 0;
                break;
            }
        fclose(f);
    }
    json_object_set_new(h, "cpu", cpu[0] ? json_string(cpu) : json_null());
    json_object_set_new(h, "cores", json_integer(a->n_cpus));
    json_object_set_new(h, "busy_cores_start", a->busy_cores >= 0 ? json_real(a->busy_cores) : json_null());
    json_object_set_new(h, "loadavg_start", loadavg_json(a->load_start));
    json_object_set_new(h, "loadavg_end", loadavg_json(a->load_end));
    json_object_set_new(h, "busy", json_boolean(a->busy));
    return h;
}

static json_t *header_json(const struct sweep_args *a, const struct sweep_result *res) {
    json_t *j = json_object();
    char date[40];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    json_object_set_new(j, "date", json_string(date));
    json_object_set_new(j, "model", json_string(a->model ? a->model : res[0].served_model));
    json_object_set_new(j, "served_model", json_string(res[0].served_model));
    json_object_set_new(j, "max_model_len", json_integer(res[0].max_model_len));
    json_object_set_new(j, "mode", json_string(a->throughput ? "throughput" : "single_request"));
    json_object_set_new(j, "output_len", json_integer(a->output_len));
    json_object_set_new(j, "seed", json_integer((json_int_t)a->seed));
    json_t *info = NULL;
    if (a->model && advise_model_info(a->model, false, &info) == OCT_OK) json_object_set_new(j, "model_info", info);
    json_object_set_new(j, "host", host_json(a));
    return j;
}

// Says when the timings are not an idle machine's: the load before the sweep, and the spread of
// each request's decode quarters (SWEEP_NOISY_PCT and above: another process took turns).
#define SWEEP_NOISY_PCT 25.0
static void print_noise(const struct sweep_args *a, const struct sweep_result *res) {
    printf("\nmachine: %d cores, %.1f in use by other work and load average %.2f before the sweep%s\n", a->n_cpus,
           a->busy_cores, a->load_start[0], a->busy ? " (busy: slower and noisier than an idle run)" : "");
    for (int c = 0; c < a->n_configs; c++)
        if (res[c].ran && res[c].itl_spread_pct >= SWEEP_NOISY_PCT)
            printf("warning: [%s] a request's decode speed varied by %.0f%% between the quarters of its tokens "
                   "(median over lengths): the machine was busy, so the ITL fit is noisy\n",
                   a->configs[c].name, res[c].itl_spread_pct);
}

static int report_sweep(const struct sweep_args *a, const struct sweep_data *d, struct sweep_result *res) {
    print_points_table(a, d, res);
    print_fit_table(a, res);
    print_noise(a, res);
    json_t *j = header_json(a, res);
    json_object_set_new(j, "num_requests_per_len", json_integer(a->per_len));
    json_t *lens = json_array();
    for (int l = 0; l < a->n_lens; l++) json_array_append_new(lens, json_integer(a->lens[l]));
    json_object_set_new(j, "input_lens", lens);
    json_t *cfgs = json_array();
    for (int c = 0; c < a->n_configs; c++) {
        const struct sweep_result *r = &res[c];
        json_t *o = config_json(a, c, r);
        json_t *pts = json_array();
        for (int i = 0; i < r->n_out; i++) {
            const struct bench_outcome *q = &r->out[i];
            if (!q->ok) continue;
            json_t *p = json_object();
            double itl = sweep_mean_itl_ms(q);
            json_object_set_new(p, "input_len", json_integer(q->input_len));
            json_object_set_new(p, "output_len", json_integer(q->output_len));
            json_object_set_new(p, "ttft_ms", json_real(q->ttft_s * 1000));
            json_object_set_new(p, "itl_ms", isnan(itl) ? json_null() : json_real(itl));
            json_object_set_new(p, "n_chunks", json_integer(q->n_itl + 1));
            json_object_set_new(p, "itl_quarters_ms", itl_quarters_json(q));
            json_object_set_new(p, "e2el_ms", json_real(q->latency_s * 1000));
            json_array_append_new(pts, p);
        }
        json_object_set_new(o, "points", pts);
        json_object_set_new(o, "itl_quarter_spread_pct", isnan(r->itl_spread_pct) ? json_null()
                                                                                  : json_real(r->itl_spread_pct));
        json_t *fits = fits_json(r, &res[0], c == 0);
        json_object_update(o, fits);
        json_decref(fits);
        json_array_append_new(cfgs, o);
    }
    json_object_set_new(j, "configs", cfgs);
    plots(a, res, j);
    struct advise_inputs in = {.sweep = j};
    json_t *advice = NULL;
    printf("\n");
    if (advise_report(&in, stdout, &advice) == OCT_OK) json_object_set_new(j, "advice", advice);
    json_t *pl = json_object_get(j, "plots");
    bool have_itl = json_object_get(pl, "itl") != NULL, have_ttft = json_object_get(pl, "ttft") != NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/sweep.json", a->output_dir);
    int rc = json_dump_file(j, path, JSON_INDENT(1)) == 0 ? OCT_OK : err_set(OCT_EIO, "cannot write %s", path);
    json_decref(j);
    if (rc == OCT_OK)
        fprintf(stderr, "octet: wrote %s/sweep.json%s%s\n", a->output_dir, have_itl ? ", itl.png" : "",
                have_ttft ? ", ttft.png" : "");
    return rc;
}

static void rel_cell(double v, double base, const char *fmt, bool first) {
    char s[64], t[48];
    snprintf(t, sizeof t, fmt, v);
    if (first || !(base != 0) || isnan(v)) snprintf(s, sizeof s, "%s", t);
    else snprintf(s, sizeof s, "%s (%+.1f%%)", t, 100 * (v - base) / base);
    printf(" %22s", s);
}

static int report_throughput(const struct sweep_args *a, struct sweep_result *res) {
    printf("\nload: %d requests, concurrency %d, ~%d input / ~%d output tokens ±%.0f%%\n", a->num_prompts, a->max_conc,
           a->input_len, a->output_len, 100 * a->range_ratio);
    const int nw = name_width(a);
    printf("%-*s %22s %22s %22s %22s %7s\n", nw, "configuration", "median TTFT (ms)", "median ITL (ms)",
           "duration (s)", "output tok/s", "failed");
    const struct bench_metrics *b = &res[0].m;
    json_t *j = header_json(a, res), *cfgs = json_array();
    for (int c = 0; c < a->n_configs; c++) {
        const struct bench_metrics *m = &res[c].m;
        printf("%-*.*s", nw, nw, a->configs[c].name);
        if (!res[c].ran) { printf(" failed: %s\n", res[c].error); }
        else {
            rel_cell(m->ttft_ms.median, b->ttft_ms.median, "%.2f", c == 0);
            rel_cell(m->itl_ms.median, b->itl_ms.median, "%.3f", c == 0);
            rel_cell(m->duration_s, b->duration_s, "%.2f", c == 0);
            rel_cell(m->output_throughput, b->output_throughput, "%.2f", c == 0);
            printf(" %7d\n", m->failed);
        }
        json_t *o = config_json(a, c, &res[c]);
        if (res[c].ran) {
            struct bench_load_options lo = {.model = res[c].served_model, .max_concurrency = a->max_conc,
                                            .request_rate = a->rate};
            json_t *r = bench_result_json(&lo, m, res[c].out, res[c].n_out);
            json_object_del(r, "itls");            // per-token arrays: too large to keep per config
            json_object_del(r, "generated_texts");
            json_object_set_new(o, "result", r);
            if (c > 0 && b->output_throughput > 0)
                json_object_set_new(o, "output_throughput_change_pct",
                                    json_real(100 * (m->output_throughput / b->output_throughput - 1)));
        }
        json_array_append_new(cfgs, o);
    }
    bool any_steps = false;
    for (int c = 0; c < a->n_configs; c++) any_steps |= res[c].ran && res[c].steps.ok;
    if (any_steps) {
        printf("\nwhere the engine's time went (its /metrics over the load; a step's time = forward + host):\n");
        printf("%-*s %-8s %8s %10s %10s %10s %9s %9s %8s\n", nw, "configuration", "step", "steps", "ms/step",
               "forward", "host", "decode", "prefill", "of time");
        printf("%-*s %-8s %8s %10s %10s %10s %9s %9s %8s\n", nw, "", "", "", "", "ms/step", "ms/step", "tok/step",
               "tok/step", "");
        for (int c = 0; c < a->n_configs; c++)
            if (res[c].ran) step_stats_print(stdout, a->configs[c].name, nw, &res[c].steps);
    }
    json_object_set_new(j, "num_prompts", json_integer(a->num_prompts));
    json_object_set_new(j, "input_len", json_integer(a->input_len));
    json_object_set_new(j, "range_ratio", json_real(a->range_ratio));
    json_object_set_new(j, "max_concurrency", json_integer(a->max_conc));
    json_object_set_new(j, "configs", cfgs);
    char path[1024];
    snprintf(path, sizeof path, "%s/throughput.json", a->output_dir);
    int rc = json_dump_file(j, path, JSON_INDENT(1)) == 0 ? OCT_OK : err_set(OCT_EIO, "cannot write %s", path);
    json_decref(j);
    if (rc == OCT_OK) fprintf(stderr, "octet: wrote %s\n", path);
    return rc;
}

int sweep_report(const struct sweep_args *a, const struct sweep_data *d, struct sweep_result *res) {
    return a->throughput ? report_throughput(a, res) : report_sweep(a, d, res);
}
