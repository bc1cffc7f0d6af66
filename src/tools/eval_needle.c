// eval_needle.c — `octet eval needle`: needle-in-a-haystack at two levels.
//  --level attention: the synthetic decode-attention problem of needle_attn.c on the CPU
//    backend's ops, per length × head layout × KV dtype × FP8 math path: relative L2 error
//    against float64 and whether the needle's value is retrieved.
//  --level model: passkey retrieval (needle_model.c) over lengths × depths for any model,
//    accuracy per cell, a table, JSON and a gnuplot heatmap; --from-json redraws the table and
//    heatmap of an earlier --json result (e.g. one measured on the GPU machine).
#include <jansson.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../model/model.h"
#include "cli.h"
#include "needle_attn.h"
#include "needle_model.h"
#include "stats_util.h"
#include "tools.h"

#define MAX_LIST 32

static void usage(void) {
    fprintf(stderr,
            "usage: octet eval needle --level attention [--lengths 1024,4096,16384] [--heads 1,gqa]\n"
            "         [--kv-cache-dtype fp32,bf16,fp8_e4m3,fp8_e5m2] [--fp8-attention-math exact|emulate|both]\n"
            "         [--needle-weight 0.2] [--depth 50] [--scales one|calibrated] [--threshold 0.3] [--v-bias 0]\n"
            "         [--seed N] [--threads N] [--device cpu|cuda|auto]\n"
            "         [--fp8-attention-accumulation two-level,every:4,single] [--json]\n"
            "       octet eval needle --level model --model PATH [--lengths 1024,4096] [--depths 0,25,50,75,100]\n"
            "         [--trials 3] [-n|--max-new-tokens 10] [--seed N] [--json] [--heatmap FILE.png] [model flags]\n"
            "       octet eval needle --level model --from-json RESULT.json[,MORE.json] [--heatmap FILE.png]\n"
            "attention: 'gqa' = 32 query / 8 KV heads, '1' = one head; head_dim 128. Lengths up to 131072\n"
            "(each 131072-token GQA problem needs about 2 GB of memory). On a GPU each cache runs the\n"
            "decode kernel and the prefill kernel (the query as the last row of a 2-token chunk); e4m3\n"
            "prefill runs on FP8 tensor cores once per accumulation mode.\n");
}

static const char *const attn_dtypes_all[] = {"fp32", "bf16", "fp8_e4m3", "fp8_e5m2"};

struct attn_args {
    long lengths[MAX_LIST];
    int n_lengths;
    bool heads_single, heads_gqa, math_exact, math_emulate, json, calibrated;
    bool dtype_on[4];
    double weight, depth, threshold, v_bias;
    long seed, threads;
    char device[8];
    int accs[8], n_accs;
};

static int parse_attn(struct attn_args *a, int argc, char **argv) {
    static const char *const valued[] = {"--level", "--lengths", "--heads", "--kv-cache-dtype", "--fp8-attention-math",
                                         "--needle-weight", "--depth", "--scales", "--threshold", "--seed", "--threads",
                                         "--device", "--fp8-attention-accumulation", "--v-bias", "--json", NULL};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v;
        if (!strcmp(f, "--json")) { a->json = true; continue; }
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(); exit(0); }
        if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) return OCT_EINVAL;
        if (!strcmp(f, "--lengths")) TRY(stats_parse_int_list(f, v, 32, 1 << 20, a->lengths, MAX_LIST, &a->n_lengths));
        else if (!strcmp(f, "--heads")) {
            a->heads_single = strstr(v, "1") != NULL;
            a->heads_gqa = strstr(v, "gqa") != NULL;
            if ((!a->heads_single && !a->heads_gqa) || strspn(v, "1gqa,") != strlen(v))
                return err_set(OCT_EINVAL, "--heads: '%s' (choose 1, gqa or 1,gqa)", v);
        } else if (!strcmp(f, "--kv-cache-dtype")) {
            memset(a->dtype_on, 0, sizeof a->dtype_on);
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                const char *name = !strcmp(tok, "fp8") ? "fp8_e4m3" : !strcmp(tok, "auto") ? "fp32" : tok;
                int k = -1;
                for (int d = 0; d < 4; d++) if (!strcmp(name, attn_dtypes_all[d])) k = d;
                if (k < 0)
                    return err_set(OCT_EINVAL,
                                   "--kv-cache-dtype: '%s' (choose from fp32, bf16, fp8, fp8_e4m3, fp8_e5m2)", tok);
                a->dtype_on[k] = true;
            }
        } else if (!strcmp(f, "--fp8-attention-math")) {
            a->math_exact = !strcmp(v, "exact") || !strcmp(v, "both");
            a->math_emulate = !strcmp(v, "emulate") || !strcmp(v, "both");
            if (!a->math_exact && !a->math_emulate)
                return err_set(OCT_EINVAL, "--fp8-attention-math: '%s' (choose exact, emulate or both)", v);
        } else if (!strcmp(f, "--scales")) {
            if (strcmp(v, "one") && strcmp(v, "calibrated"))
                return err_set(OCT_EINVAL, "--scales: '%s' (choose one or calibrated)", v);
            a->calibrated = !strcmp(v, "calibrated");
        } else if (!strcmp(f, "--needle-weight")) {
            TRY(cli_float(f, v, &a->weight));
            if (!(a->weight > 0 && a->weight < 1))
                return err_set(OCT_EINVAL, "--needle-weight: %s is not in (0, 1)", v);
        } else if (!strcmp(f, "--depth")) {
            TRY(cli_float(f, v, &a->depth));
            if (!(a->depth >= 0 && a->depth <= 100)) return err_set(OCT_EINVAL, "--depth: %s is not in 0..100", v);
        } else if (!strcmp(f, "--v-bias")) {
            TRY(cli_float(f, v, &a->v_bias));
            if (!(fabs(a->v_bias) <= 100)) return err_set(OCT_EINVAL, "--v-bias: %s is not in -100..100", v);
        } else if (!strcmp(f, "--threshold")) {
            TRY(cli_float(f, v, &a->threshold));
        } else if (!strcmp(f, "--seed")) TRY(cli_int(f, v, 0, 1L << 62, &a->seed));
        else if (!strcmp(f, "--threads")) TRY(cli_int(f, v, 0, 1024, &a->threads));
        else if (!strcmp(f, "--device")) {
            if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto"))
                return err_set(OCT_EINVAL, "--device: unknown device '%s' (choose cpu, cuda or auto)", v);
            snprintf(a->device, sizeof a->device, "%s", v);
        } else if (!strcmp(f, "--fp8-attention-accumulation")) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            a->n_accs = 0;
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                if (a->n_accs == 8) return err_set(OCT_EINVAL, "%s: more than 8 modes", f);
                TRY(cli_parse_accum(f, tok, &a->accs[a->n_accs++]));
            }
            if (!a->n_accs) return err_set(OCT_EINVAL, "%s: empty list (choose two-level, every:N or single)", f);
        }
    }
    return OCT_OK;
}

static int eval_attention(int argc, char **argv) {
    struct attn_args a = {.lengths = {1024, 4096, 16384}, .n_lengths = 3, .heads_single = true, .heads_gqa = true,
                          .math_exact = true, .math_emulate = true, .dtype_on = {true, true, true, true},
                          .weight = 0.2, .depth = 50, .threshold = 0.3, .seed = 1234, .device = "auto",
                          .accs = {0}, .n_accs = 1};
    if (parse_attn(&a, argc, argv) < 0) return cli_usage_error();
    struct backend *b = backend_create(a.device, (int)a.threads);
    if (!b) { fprintf(stderr, "octet eval needle: %s\n", err_msg()); return 1; }
    b->enforce_eager = true;  // single ops, not forward steps: nothing to capture
    bool gpu = strcmp(b->ops->name, "cpu") != 0;
    static const enum dtype dts[4] = {DT_F32, DT_BF16, DT_E4M3, DT_E5M2};
    json_t *rows = json_array();
    int rc = 0, n_rows = 0;
    if (!a.json) {
        printf("| length | heads | kv dtype | attention | needle weight (mean) | rel L2 vs f64 | cos(needle) "
               "| best distractor | retrieved |\n");
        printf("|---:|---|---|---|---:|---:|---:|---:|---|\n");
    }
    for (int li = 0; li < a.n_lengths && !rc; li++)
        for (int hv = 0; hv < 2 && !rc; hv++) {
            if ((hv == 0 && !a.heads_single) || (hv == 1 && !a.heads_gqa)) continue;
            struct needle_shape s = hv ? (struct needle_shape){32, 8, 128, (float)a.v_bias}
                                       : (struct needle_shape){1, 1, 128, (float)a.v_bias};
            struct needle_problem p;
            if (needle_problem_init(&p, s, (int)a.lengths[li], a.depth / 100.0, a.weight, (uint64_t)a.seed) < 0) {
                rc = 1;
                break;
            }
            for (int d = 0; d < 4 && !rc; d++) {
                if (!a.dtype_on[d]) continue;
                bool fp8 = dts[d] == DT_E4M3 || dts[d] == DT_E5M2;
                // runs: CPU = exact and/or emulate; GPU = decode kernel, then prefill kernel
                // (FP8 e4m3 once per accumulation mode)
                // CPU = exact, then emulate (for e4m3 once per accumulation mode: the CPU models
                // the GPU kernel's wgmma accumulation)
                int n_runs = 1 + (dts[d] == DT_E4M3 ? a.n_accs : 1);
                for (int ri = 0; ri < n_runs; ri++) {
                    int mth = gpu ? 0 : ri > 0;
                    // emulation only changes FP8 caches; plain dtypes run the exact path once
                    if (!gpu && mth == 1 && (!fp8 || !a.math_emulate)) continue;
                    if (!gpu && mth == 0 && fp8 && !a.math_exact) continue;
                    if (!gpu && mth == 1 && !fp8 && ri > 1) continue;
                    int acc = ri > 0 && dts[d] == DT_E4M3 ? a.accs[ri - 1] : 0;
                    char mn[64], an[24];
                    if (!gpu && mth == 1 && acc != 0)
                        snprintf(mn, sizeof mn, "emulate %s", cli_accum_name(acc, an, sizeof an));
                    else if (!gpu) snprintf(mn, sizeof mn, "%s", mth ? "emulate" : "exact");
                    else if (ri == 0) snprintf(mn, sizeof mn, "gpu decode");
                    else if (dts[d] == DT_E4M3)
                        snprintf(mn, sizeof mn, "gpu prefill wgmma %s", cli_accum_name(acc, an, sizeof an));
                    else snprintf(mn, sizeof mn, "gpu prefill");
                    struct needle_result res;
                    struct needle_run run = {dts[d], mth ? ATTN_FP8_EMULATE : ATTN_FP8_EXACT, acc,
                                             gpu && ri > 0 ? 2 : 1, a.calibrated, a.threshold};
                    if (needle_problem_run(&p, b, &run, &res) < 0) { rc = 1; break; }
                    const char *hn = hv ? "gqa" : "1";
                    json_t *o = json_object();
                    json_object_set_new(o, "length", json_integer(p.length));
                    json_object_set_new(o, "heads", json_string(hn));
                    json_object_set_new(o, "n_heads", json_integer(s.n_heads));
                    json_object_set_new(o, "n_kv_heads", json_integer(s.n_kv_heads));
                    json_object_set_new(o, "head_dim", json_integer(s.head_dim));
                    json_object_set_new(o, "kv_cache_dtype", json_string(attn_dtypes_all[d]));
                    json_object_set_new(o, "attention_math", json_string(mn));
                    json_object_set_new(o, "device", json_string(b->ops->name));
                    if (fp8 && mth + (gpu ? ri : 0) > 0 && dts[d] == DT_E4M3)
                        json_object_set_new(o, "accumulation", json_string(cli_accum_name(acc, an, sizeof an)));
                    json_object_set_new(o, "needle_pos", json_integer(p.needle_pos));
                    json_object_set_new(o, "needle_weight", json_real(p.needle_weight));
                    json_object_set_new(o, "rel_l2", json_real(res.rel_l2));
                    json_object_set_new(o, "cos_needle", json_real(res.cos_needle));
                    json_object_set_new(o, "cos_distractor", json_real(res.cos_distractor));
                    json_object_set_new(o, "retrieved", json_boolean(res.retrieved));
                    json_object_set_new(o, "attn_ms", json_real(res.attn_ms));
                    json_array_append_new(rows, o);
                    n_rows++;
                    if (!a.json)
                        printf("| %d | %s | %s | %s | %.3f | %.3e | %.4f | %.4f | %s |\n", p.length,
                               hv ? "32q/8kv" : "1", attn_dtypes_all[d], fp8 || gpu ? mn : "-", p.needle_weight,
                               res.rel_l2, res.cos_needle, res.cos_distractor, res.retrieved ? "yes" : "NO");
                    fflush(stdout);
                }
            }
            if (a.json) fprintf(stderr, "needle: length %d, heads %s done\n", p.length, hv ? "gqa" : "1");
            needle_problem_free(&p);
        }
    b->ops->destroy(b);
    if (rc) {
        fprintf(stderr, "octet eval needle: %s\n", err_msg());
        json_decref(rows);
        return 1;
    }
    json_t *o = json_object();
    json_object_set_new(o, "level", json_string("attention"));
    json_object_set_new(o, "kv_scales", json_string(a.calibrated ? "calibrated" : "one"));
    json_object_set_new(o, "target_needle_weight", json_real(a.weight));
    json_object_set_new(o, "depth", json_real(a.depth));
    json_object_set_new(o, "threshold", json_real(a.threshold));
    json_object_set_new(o, "seed", json_integer(a.seed));
    json_object_set_new(o, "v_bias", json_real(a.v_bias));
    json_object_set_new(o, "rows", rows);
    if (a.json) {
        char *js = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
        puts(js);
        free(js);
    }
    json_decref(o);
    return n_rows ? 0 : 1;
}

struct model_args {
    struct cli_model_args a;
    long lengths[MAX_LIST], depths[MAX_LIST], trials, max_new, seed;
    int n_lengths, n_depths;
    bool json;
    const char *heatmap, *from_json;
};

static int parse_model(struct model_args *m, int argc, char **argv) {
    static const char *const valued[] = {"--level", "--lengths", "--depths", "--trials", "--max-new-tokens", "-n",
                                         "--seed", "--heatmap", "--from-json", "--json", NULL};
    for (int i = 1; i < argc; i++) {
        int rc = cli_parse_model_flag(&m->a, argc, argv, &i);
        if (rc < 0) return rc;
        if (rc == 1) continue;
        const char *f = argv[i], *v;
        if (!strcmp(f, "--json")) { m->json = true; continue; }
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(); exit(0); }
        if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) return OCT_EINVAL;
        if (!strcmp(f, "--lengths")) TRY(stats_parse_int_list(f, v, 16, 1 << 24, m->lengths, MAX_LIST, &m->n_lengths));
        else if (!strcmp(f, "--depths")) TRY(stats_parse_int_list(f, v, 0, 100, m->depths, MAX_LIST, &m->n_depths));
        else if (!strcmp(f, "--trials")) TRY(cli_int(f, v, 1, 100000, &m->trials));
        else if (!strcmp(f, "--max-new-tokens") || !strcmp(f, "-n")) TRY(cli_int(f, v, 1, 256, &m->max_new));
        else if (!strcmp(f, "--seed")) TRY(cli_int(f, v, 0, 1L << 62, &m->seed));
        else if (!strcmp(f, "--heatmap")) m->heatmap = v;
        else if (!strcmp(f, "--from-json")) m->from_json = v;
    }
    if (m->from_json && m->a.model) return err_set(OCT_EINVAL, "--from-json redraws a result: it takes no --model");
    if (m->from_json && m->json) return err_set(OCT_EINVAL, "--from-json prints a table (and --heatmap), not --json");
    if (!m->a.model && !m->from_json) return err_set(OCT_EINVAL, "--model is required with --level model");
    return OCT_OK;
}

static void write_heatmap(const char *path, const struct model_args *m, const struct passkey_cell *cells,
                          const char *title) {
    FILE *gp = stats_gnuplot_open("the heatmap");
    if (!gp) return;
    fprintf(gp, "set terminal pngcairo size 900,520 font 'sans,10'\nset output '%s'\n", path);
    fprintf(gp, "set title \"%s\" noenhanced\nset xlabel 'context length (tokens)'\n"
                "set ylabel 'needle depth (%%)'\n", title);
    fprintf(gp, "set cbrange [0:1]\nset cblabel 'accuracy'\n"
                "set palette defined (0 '#c0392b', 0.5 '#f1c40f', 1 '#27ae60')\n");
    fprintf(gp, "set xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5]\nset xtics (", m->n_lengths - 1, m->n_depths - 1);
    for (int i = 0; i < m->n_lengths; i++) fprintf(gp, "%s'%ld' %d", i ? ", " : "", m->lengths[i], i);
    fprintf(gp, ")\nset ytics (");
    for (int i = 0; i < m->n_depths; i++) fprintf(gp, "%s'%ld' %d", i ? ", " : "", m->depths[i], i);
    fprintf(gp, ")\nset style fill solid 1.0 noborder\n"
                "plot '-' using 1:2:(0.5):(0.5):3 with boxxyerror fc palette notitle, "
                "'-' using 1:2:(sprintf('%%.2f', $3)) with labels notitle\n");
    for (int pass = 0; pass < 2; pass++) {
        for (int li = 0; li < m->n_lengths; li++)
            for (int di = 0; di < m->n_depths; di++) {
                const struct passkey_cell *c = &cells[li * m->n_depths + di];
                fprintf(gp, "%d %d %.4f\n", li, di, (double)c->correct / c->trials);
            }
        fprintf(gp, "e\n");
    }
    if (stats_gnuplot_close(gp) != 0 || !stats_is_png(path))
        fprintf(stderr, "octet: warning: gnuplot did not write %s\n", path);
}

static void print_table(const struct model_args *m, const struct passkey_cell *cells, const char *heading) {
    long correct = 0, total = 0;
    printf("passkey accuracy, %s (rows: depth %%, columns: length)\n| depth |", heading);
    for (int li = 0; li < m->n_lengths; li++) printf(" %ld |", m->lengths[li]);
    printf("\n|---:|");
    for (int li = 0; li < m->n_lengths; li++) printf("---:|");
    printf("\n");
    for (int di = 0; di < m->n_depths; di++) {
        printf("| %ld |", m->depths[di]);
        for (int li = 0; li < m->n_lengths; li++) {
            const struct passkey_cell *c = &cells[li * m->n_depths + di];
            printf(" %.2f |", (double)c->correct / c->trials);
            correct += c->correct;
            total += c->trials;
        }
        printf("\n");
    }
    printf("mean accuracy %.3f over %ld trials\n", total ? (double)correct / total : 0, total);
}

// Index of v in list[0..*n), appended when absent; -1 when the list is full.
static int list_index(long *list, int *n, long v) {
    for (int i = 0; i < *n; i++) if (list[i] == v) return i;
    if (*n == MAX_LIST) return -1;
    list[*n] = v;
    return (*n)++;
}

// Reads earlier `--json` results (a comma-separated list of files, one object each; gpu_run.sh's
// one-object-a-line files are split first) of one KV cache type into m's lengths/depths and a
// full grid of cells, so a grid measured in parts draws as one. Names the first problem found.
static int load_results(struct model_args *m, struct passkey_cell **out, char *title, size_t tn) {
    enum { MAX_FILES = 16, MAX_CELLS = MAX_LIST * MAX_LIST };
    json_t *docs[MAX_FILES] = {0};
    int nf = 0, rc = OCT_EINVAL;
    struct passkey_cell *cells = NULL, *flat = calloc(MAX_CELLS, sizeof *flat);
    size_t n = 0;
    char paths[1024];
    const char *dtype = NULL;
    if (!flat) return err_set(OCT_ENOMEM, "out of memory");
    if (snprintf(paths, sizeof paths, "%s", m->from_json) >= (int)sizeof paths) {
        err_set(rc, "--from-json: list too long");
        goto done;
    }
    m->n_lengths = m->n_depths = 0;
    for (char *save = NULL, *path = strtok_r(paths, ",", &save); path; path = strtok_r(NULL, ",", &save)) {
        json_error_t e;
        if (nf == MAX_FILES) { err_set(rc, "--from-json: more than %d files", MAX_FILES); goto done; }
        json_t *o = docs[nf++] = json_load_file(path, 0, &e);
        if (!o) { err_set(rc, "--from-json %s: %s (line %d)", path, e.text, e.line); goto done; }
        const char *level = json_string_value(json_object_get(o, "level"));
        const char *dt = json_string_value(json_object_get(o, "kv_cache_dtype"));
        json_t *arr = json_object_get(o, "cells");
        if (!level || strcmp(level, "model") || !dt || !json_array_size(arr)) {
            err_set(rc, "--from-json %s: not a result of `eval needle --level model --json` "
                    "(level, kv_cache_dtype, cells)", path);
            goto done;
        }
        if (dtype && strcmp(dtype, dt)) {
            err_set(rc, "--from-json %s: kv_cache_dtype %s, the first file's is %s", path, dt, dtype);
            goto done;
        }
        if (!dtype) {  // the first file names the model; a lone file's "name" (gpu_run.sh adds one) too
            const char *model = json_string_value(json_object_get(o, "model"));
            const char *name = json_string_value(json_object_get(o, "name"));
            if (strchr(m->from_json, ',')) name = NULL;  // several files: the title names the model alone
            snprintf(title, tn, "%s, kv %s%s%s", model ? model : "?", dt, name ? ", " : "", name ? name : "");
        }
        dtype = dt;
        for (size_t i = 0; i < json_array_size(arr); i++) {
            json_t *c = json_array_get(arr, i);
            json_t *L = json_object_get(c, "length"), *D = json_object_get(c, "depth");
            json_t *A = json_object_get(c, "accuracy"), *T = json_object_get(c, "trials");
            double acc = json_number_value(A);
            if (!json_is_integer(L) || !json_is_integer(D) || !json_is_number(A) || !(acc >= 0 && acc <= 1) ||
                !json_is_integer(T) || json_integer_value(T) < 1 || json_integer_value(T) > 1000000) {
                err_set(rc, "--from-json %s: cell %zu needs integer length, depth and trials (>= 1) "
                        "and accuracy in [0, 1]", path, i);
                goto done;
            }
            long len = (long)json_integer_value(L), dep = (long)json_integer_value(D);
            if (list_index(m->lengths, &m->n_lengths, len) < 0 || list_index(m->depths, &m->n_depths, dep) < 0 ||
                n == MAX_CELLS) {
                err_set(rc, "--from-json %s: more than %d lengths or depths", path, MAX_LIST);
                goto done;
            }
            flat[n++] = (struct passkey_cell){.length = (int)len, .depth = (int)dep,
                                              .trials = (int)json_integer_value(T),
                                              .correct = (int)lround(acc * (double)json_integer_value(T))};
        }
    }
    if (!nf) { err_set(rc, "--from-json: no file named"); goto done; }
    if ((size_t)m->n_lengths * m->n_depths != n) {
        err_set(rc, "--from-json %s: %zu cells do not fill the %d lengths x %d depths grid once",
                m->from_json, n, m->n_lengths, m->n_depths);
        goto done;
    }
    if (!(cells = calloc(n, sizeof *cells))) { err_set(OCT_ENOMEM, "out of memory"); goto done; }
    for (size_t i = 0; i < n; i++) {
        int li = list_index(m->lengths, &m->n_lengths, flat[i].length);
        int di = list_index(m->depths, &m->n_depths, flat[i].depth);
        struct passkey_cell *p = &cells[li * m->n_depths + di];
        if (p->trials) {
            err_set(rc, "--from-json %s: cell (length %d, depth %d) appears twice",
                    m->from_json, flat[i].length, flat[i].depth);
            goto done;
        }
        *p = flat[i];
    }
    *out = cells;
    cells = NULL;
    rc = OCT_OK;
done:
    for (int i = 0; i < nf; i++) json_decref(docs[i]);
    free(flat);
    free(cells);
    return rc;
}

static int eval_model(int argc, char **argv) {
    struct model_args m = {.lengths = {1024, 4096}, .n_lengths = 2, .depths = {0, 25, 50, 75, 100}, .n_depths = 5,
                           .trials = 3, .max_new = 10, .seed = 1234};
    cli_model_args_default(&m.a);
    if (parse_model(&m, argc, argv) < 0) return cli_usage_error();
    if (m.from_json) {
        struct passkey_cell *cells = NULL;
        char heading[300], title[400];
        if (load_results(&m, &cells, heading, sizeof heading) < 0) {
            fprintf(stderr, "octet eval needle: %s\n", err_msg());
            return 1;
        }
        print_table(&m, cells, heading);
        snprintf(title, sizeof title, "passkey retrieval: %s", heading);
        if (m.heatmap) write_heatmap(m.heatmap, &m, cells, title);
        free(cells);
        return 0;
    }
    struct model *md = NULL;
    struct runner r = {0};
    struct passkey_recipe rc = {0};
    struct passkey_cell *cells = calloc((size_t)m.n_lengths * m.n_depths, sizeof *cells);
    int ret = 1;
    if (!cells) { err_set(OCT_ENOMEM, "out of memory"); goto fail; }
    if (cli_model_load(&md, &m.a) < 0) goto fail;
    long max_len = 0;
    for (int i = 0; i < m.n_lengths; i++) max_len = m.lengths[i] > max_len ? m.lengths[i] : max_len;
    if (m.a.ro.max_ctx == 0) {
        if (max_len + m.max_new > md->cfg.max_pos)
            fprintf(stderr, "octet: warning: length %ld exceeds the model's context length %d (out of distribution)\n",
                    max_len, md->cfg.max_pos);
        m.a.ro.max_ctx = (int)(max_len + m.max_new);
    } else if (max_len + m.max_new > m.a.ro.max_ctx) {
        err_set(OCT_EINVAL, "--lengths %ld + %ld new tokens exceed --max-model-len %d",
                max_len, m.max_new, m.a.ro.max_ctx);
        goto fail;
    }
    if (runner_init(&r, md, &m.a.ro) < 0) goto fail;
    if (passkey_recipe_init(&rc, md->tok) < 0) goto fail;
    long correct = 0, total = 0;
    for (int li = 0; li < m.n_lengths; li++)
        for (int di = 0; di < m.n_depths; di++) {
            struct passkey_cell *c = &cells[li * m.n_depths + di];
            struct passkey_opts po = {(int)m.trials, (int)m.max_new, (uint64_t)m.seed};
            if (passkey_run_cell(&r, &rc, (int)m.lengths[li], (int)m.depths[di], &po, c) < 0) goto fail;
            correct += c->correct;
            total += c->trials;
            fprintf(stderr, "[length %ld depth %ld%%] %d/%d  last answer: \"%s\"\n", m.lengths[li], m.depths[di],
                                 c->correct, c->trials, c->sample);
        }
    json_t *o = json_object(), *arr = json_array();
    json_object_set_new(o, "level", json_string("model"));
    json_object_set_new(o, "model", json_string(md->name));
    json_object_set_new(o, "kv_cache_dtype", json_string(m.a.ro.kv.dtype));
    json_object_set_new(o, "kv_cache_dtype_resolved", json_string(cli_kv_dtype_resolved(m.a.ro.kv.dtype,
                                                                                        md->weight_dtype)));
    char dt_label[48];
    cli_kv_dtype_label(m.a.ro.kv.dtype, md->weight_dtype, dt_label, sizeof dt_label);
    json_object_set_new(o, "fp8_attention_math",
                        json_string(m.a.ro.fp8_math == ATTN_FP8_EMULATE ? "emulate" : "exact"));
    char an[24];
    json_object_set_new(o, "fp8_attention_accumulation", json_string(cli_accum_name(m.a.ro.fp8_accum, an, sizeof an)));
    json_object_set_new(o, "device", json_string(r.b->ops->name));
    json_object_set_new(o, "trials", json_integer(m.trials));
    json_object_set_new(o, "seed", json_integer(m.seed));
    for (int i = 0; i < m.n_lengths * m.n_depths; i++) {
        json_t *c = json_object();
        json_object_set_new(c, "length", json_integer(cells[i].length));
        json_object_set_new(c, "depth", json_integer(cells[i].depth));
        json_object_set_new(c, "accuracy", json_real((double)cells[i].correct / cells[i].trials));
        json_object_set_new(c, "trials", json_integer(cells[i].trials));
        json_object_set_new(c, "prompt_tokens", json_integer(cells[i].prompt_tokens));
        json_array_append_new(arr, c);
    }
    json_object_set_new(o, "cells", arr);
    json_object_set_new(o, "mean_accuracy", json_real(total ? (double)correct / total : 0));
    if (m.json) {
        char *js = json_dumps(o, JSON_COMPACT);
        puts(js);
        free(js);
    } else {
        char heading[360];
        snprintf(heading, sizeof heading, "%s, kv %s", md->name, dt_label);
        print_table(&m, cells, heading);
    }
    json_decref(o);
    if (m.heatmap) {
        char title[400];
        snprintf(title, sizeof title, "passkey retrieval: %s, kv %s", md->name, dt_label);
        write_heatmap(m.heatmap, &m, cells, title);
    }
    ret = 0;
    goto done;
fail:
    fprintf(stderr, "octet eval needle: %s\n", err_msg());
done:
    passkey_recipe_free(&rc);
    if (r.m) runner_free(&r);
    model_free(md);
    free(cells);
    return ret;
}

int cmd_eval_needle(int argc, char **argv) {
    const char *level = "attention";
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--level")) level = argv[i + 1];
    if (!strcmp(level, "attention")) return eval_attention(argc, argv);
    if (!strcmp(level, "model")) return eval_model(argc, argv);
    err_set(OCT_EINVAL, "--level: unknown value '%s' (choose attention or model)", level);
    return cli_usage_error();
}
