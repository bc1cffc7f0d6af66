// inspect.c — `octet inspect`: per-layer FP8 diagnostics on a text. One reference pass
// (auto cache) observes K, V, Q and the SwiGLU gate of every layer (inspect_stats.c);
// then one pass per layer with only that layer's KV in FP8 gives its sensitivity (mean
// KLD of the next-token distributions vs the reference), and the worst layers become a
// --kv-cache-dtype-skip-layers suggestion. Optional per-layer histogram PNGs (gnuplot).
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/check.h"
#include "../engine/sampler.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "cli.h"
#include "inspect_stats.h"
#include "stats_util.h"
#include "tools.h"

static const char *const kind_name[INSPECT_KINDS] = {"q", "k", "v", "gate"};

static void usage(void) {
    fprintf(stderr,
            "usage: octet inspect --model PATH --file TEXT [--num-tokens N] [--ctx N]\n"
            "       [--kv-cache-dtype fp8|fp8_e4m3|fp8_e5m2|fp8_per_token_head] [--kv-scales FILE]\n"
            "       [--output-dir DIR] [--json]\n"
            "       [--kld-threshold 0.02] [--skip-fraction 0.1] [model flags]\n"
            "  -f, --file TEXT  -o, --output-dir DIR  -c, --ctx N (tokens per chunk, default 512)\n"
            "Layers are numbered from 0, as --kv-cache-dtype-skip-layers takes them.\n"
            "Per layer: max|x|, p50/p99/p99.9 of |x|, fractions saturated / subnormal / flushed to zero\n"
            "at the current scales, FP8 round-trip error, and the KLD when only that layer's KV is FP8.\n");
    cli_print_model_flags();
}

struct inspect_args {
    struct cli_model_args a;
    const char *file, *out_dir, *target;
    long num_tokens, ctx;
    double kld_threshold, skip_fraction;
    bool json;
};

static int parse(struct inspect_args *c, int argc, char **argv) {
    static const char *const valued[] = {"--file", "-f", "--num-tokens", "--ctx", "-c", "--output-dir", "-o",
                                         "--kld-threshold", "--skip-fraction", "--json", NULL};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v;
        if (!strcmp(f, "--json")) { c->json = true; continue; }
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(); exit(0); }
        if (!strcmp(f, "--kv-cache-dtype")) {
            if (!(v = cli_value(argc, argv, &i))) return OCT_EINVAL;
            TRY(cli_kv_fp8_target(v));
            c->target = v;
            continue;
        }
        bool is_ctx = !strcmp(f, "--ctx") || !strcmp(f, "-c");  // -c is the chunk here
        int rc = is_ctx ? 0 : cli_parse_model_flag(&c->a, argc, argv, &i);
        if (rc < 0) return rc;
        if (rc == 1) continue;
        if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) return OCT_EINVAL;
        if (!strcmp(f, "--file") || !strcmp(f, "-f")) c->file = v;
        else if (!strcmp(f, "--output-dir") || !strcmp(f, "-o")) c->out_dir = v;
        else if (!strcmp(f, "--num-tokens")) TRY(cli_int(f, v, 2, 1L << 30, &c->num_tokens));
        else if (!strcmp(f, "--ctx") || !strcmp(f, "-c")) TRY(cli_int(f, v, 2, 1 << 24, &c->ctx));
        else if (!strcmp(f, "--kld-threshold")) TRY(cli_float(f, v, &c->kld_threshold));
        else if (!strcmp(f, "--skip-fraction")) {
            TRY(cli_float(f, v, &c->skip_fraction));
            if (!(c->skip_fraction >= 0 && c->skip_fraction <= 1))
                return err_set(OCT_EINVAL, "--skip-fraction: %s is not in 0..1", v);
        }
    }
    if (!c->a.model || !c->file) return err_set(OCT_EINVAL, "--model and --file are required");
    if (c->a.ro.max_ctx > 0) return err_set(OCT_EINVAL, "--max-model-len: inspect's context is --ctx (-c)");
    return OCT_OK;
}

// The scored rows: every `stride`-th token, so that stored reference logits stay bounded.
struct scoring {
    int32_t *ids;
    int n_ids, ctx, stride, n_rows, n_vocab;
    float *ref;     // [n_rows][n_vocab] reference logits
    float *chunk;   // [ctx][n_vocab] scratch
};

// Runs every chunk through r (BOS first). Stores the scored rows into ref when store, or
// returns their mean KLD against ref in *kld.
static int run_chunks(struct runner *r, struct scoring *sc, bool store, double *kld) {
    int bos = tokenizer_bos(r->m->tok), row = 0, nv = sc->n_vocab;
    double sum = 0;
    for (int at = 0; at < sc->n_ids; at += sc->ctx) {
        int n = sc->n_ids - at < sc->ctx ? sc->n_ids - at : sc->ctx;
        int32_t saved = sc->ids[at];
        if (bos >= 0) sc->ids[at] = bos;
        runner_reset(r);
        int rc = runner_feed(r, sc->ids + at, n, true, sc->chunk);
        sc->ids[at] = saved;
        TRY(rc);
        for (int t = 0; t < n; t++) {
            if ((at + t) % sc->stride) continue;
            float *dst = sc->ref + (size_t)row * nv, *src = sc->chunk + (size_t)t * nv;
            if (store) memcpy(dst, src, (size_t)nv * sizeof(float));
            else sum += logits_kld(dst, src, nv);
            row++;
        }
    }
    sc->n_rows = row;
    if (kld) *kld = row ? sum / row : 0;
    return OCT_OK;
}

static int layer_kld(struct model *m, const struct runner_options *base, const char *dtype, int only_layer,
                     struct scoring *sc, double *kld) {
    struct runner_options ro = *base;
    snprintf(ro.kv.dtype, sizeof ro.kv.dtype, "%s", dtype);
    if (only_layer >= 0) {
        memset(ro.kv.skip, 0, sizeof ro.kv.skip);
        ro.kv.skip_sliding = false;
        for (int l = 0; l < m->cfg.n_layers; l++) ro.kv.skip[l] = l != only_layer;
    }
    struct runner r;
    TRY(runner_init(&r, m, &ro));
    int rc = run_chunks(&r, sc, false, kld);
    runner_free(&r);
    return rc;
}

static json_t *acc_json(const struct inspect_acc *a) {
    json_t *o = json_object();
    double n = a->real.n ? (double)a->real.n : 1;
    json_object_set_new(o, "max_abs", json_real(a->real.max_abs));
    json_object_set_new(o, "p50", json_real(stats_hist_quantile(&a->real, 0.5)));
    json_object_set_new(o, "p99", json_real(stats_hist_quantile(&a->real, 0.99)));
    json_object_set_new(o, "p999", json_real(stats_hist_quantile(&a->real, 0.999)));
    json_object_set_new(o, "frac_saturated", json_real(a->n_sat / n));
    json_object_set_new(o, "frac_subnormal", json_real(a->n_sub / n));
    json_object_set_new(o, "frac_zero", json_real(a->n_flush / n));
    json_object_set_new(o, "rt_rel_err", json_real(a->sq > 0 ? sqrt(a->sq_err / a->sq) : 0));
    json_object_set_new(o, "scale_min", json_real(isfinite(a->scale_min) ? a->scale_min : 0));
    json_object_set_new(o, "scale_max", json_real(a->scale_max));
    json_object_set_new(o, "n", json_integer((json_int_t)a->real.n));
    return o;
}

// Histogram series of h at 4 bins per octave: "log2(center) count" lines.
static void emit_series(FILE *gp, const struct stats_hist *h) {
    int agg = STATS_BINS_PER_OCTAVE / 4, any = 0;
    for (int i = 0; i < STATS_N_BINS; i += agg) {
        uint64_t c = 0;
        for (int j = i; j < i + agg; j++) c += h->bins[j];
        if (!c) continue;
        double center = (double)(i + agg / 2) / STATS_BINS_PER_OCTAVE + STATS_MIN_EXP;
        fprintf(gp, "%.4f %llu\n", center, (unsigned long long)c);
        any = 1;
    }
    if (!any) fprintf(gp, "0 1e-9\n");
    fprintf(gp, "e\n");
}

static int plot_layer(const char *path, const struct inspect_stats *st, int l, const char *model, enum dtype dt) {
    FILE *gp = stats_gnuplot_open("histogram PNGs");
    if (!gp) return 1;
    double lmax = log2(stats_fp8_max(dt)), lnorm = log2(stats_fp8_min_normal(dt)), lsub = dt == DT_E4M3 ? -9 : -16;
    fprintf(gp, "set terminal pngcairo size 1200,800 font 'sans,9'\nset output '%s'\n", path);
    fprintf(gp, "set multiplot layout 2,2 title \"%s, layer %d: |x / scale| on a log2 axis, original vs %s-rounded "
                "(lines: smallest subnormal, smallest normal, max)\" noenhanced\n", model, l, dtype_name(dt));
    fprintf(gp, "set logscale y\nset yrange [0.8:*]\nset xlabel 'log2 |x / scale|'\nset ylabel 'count'\nset grid\n"
                "set style fill transparent solid 0.35 noborder\n");
    static const enum probe_kind order[4] = {PROBE_K, PROBE_V, PROBE_Q, PROBE_GATE};
    for (int p = 0; p < 4; p++) {
        const struct inspect_acc *a = inspect_acc_of(st, l, order[p]);
        double n = a->real.n ? (double)a->real.n : 1;
        bool q = order[p] == PROBE_Q;  // Q is rounded to e4m3 at a dynamic scale
        enum dtype kdt = q ? DT_E4M3 : dt;
        double km = q ? log2(448.0) : lmax, kn = q ? -6 : lnorm, ks = q ? -9 : lsub;
        double lo = ks, hi = km;
        for (int i = 0; i < STATS_N_BINS; i++)
            if (a->scaled.bins[i] || a->rounded.bins[i]) {
                double x = (double)i / STATS_BINS_PER_OCTAVE + STATS_MIN_EXP;
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
            }
        fprintf(gp, "set xrange [%g:%g]\n", floor(lo) - 1, ceil(hi) + 1);
        fprintf(gp, "unset arrow\nset arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb 'gray40'\n", ks, ks);
        fprintf(gp, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb 'gray40'\n", kn, kn);
        fprintf(gp, "set arrow from %g, graph 0 to %g, graph 1 nohead lc rgb 'red'\n", km, km);
        const char *what = order[p] == PROBE_GATE ? "gate, scale 1" : q ? "q, dynamic scale" : kind_name[order[p]];
        fprintf(gp, "set title \"%s (%s): %.3g%% sat, %.3g%% subnormal, %.3g%% zero, rt err %.3g\" noenhanced\n",
                what, dtype_name(kdt), 100 * a->n_sat / n, 100 * a->n_sub / n, 100 * a->n_flush / n,
                a->sq > 0 ? sqrt(a->sq_err / a->sq) : 0.0);
        fprintf(gp, "plot '-' using 1:2 with boxes lc rgb '#2e86c1' title 'original', "
                    "'-' using 1:2 with steps lw 2 lc rgb '#e67e22' title 'FP8-rounded'\n");
        emit_series(gp, &a->scaled);
        emit_series(gp, &a->rounded);
    }
    fprintf(gp, "unset multiplot\n");
    int rc = stats_gnuplot_close(gp);
    if (rc != 0 || !stats_is_png(path)) {
        fprintf(stderr, "octet: warning: gnuplot did not write %s\n", path);
        return 1;
    }
    return 0;
}

static int cmp_desc(const void *a, const void *b, void *ctx) {
    const double *k = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    return (k[y] > k[x]) - (k[y] < k[x]);
}

int cmd_inspect(int argc, char **argv) {
    struct inspect_args c = {.target = "fp8", .num_tokens = 1024, .kld_threshold = 0.02, .skip_fraction = 0.1};
    cli_model_args_default(&c.a);
    if (parse(&c, argc, argv) < 0) return cli_usage_error();
    size_t text_len;
    char *text = stats_read_file("--file", c.file, &text_len);
    if (!text) { fprintf(stderr, "octet inspect: %s\n", err_msg()); return 1; }
    struct model *m = NULL;
    struct runner r = {0};
    struct inspect_stats st = {0};
    struct scoring sc = {0};
    double *kld = NULL;
    int *rank = NULL, rc = 1, n_png = 0;
    json_t *pngs = json_array();
    if (cli_model_load(&m, &c.a) < 0) goto fail;
    if (tokenizer_encode(m->tok, text, text_len, true, false, &sc.ids, &sc.n_ids) < 0) goto fail;
    if (sc.n_ids < 2) { err_set(OCT_EINVAL, "--file %s: too little text (%d tokens)", c.file, sc.n_ids); goto fail; }
    if (sc.n_ids > c.num_tokens) sc.n_ids = (int)c.num_tokens;
    long ctx = c.ctx > 0 ? c.ctx : (m->cfg.max_pos < 512 ? m->cfg.max_pos : 512);
    if (ctx > m->cfg.max_pos) {
        err_set(OCT_EINVAL, "--ctx %ld exceeds the model's context length %d", ctx, m->cfg.max_pos);
        goto fail;
    }
    sc.ctx = (int)(ctx < sc.n_ids ? ctx : sc.n_ids);
    sc.n_vocab = m->cfg.n_vocab;
    long budget = 32L << 20;  // floats of stored reference logits
    sc.stride = (int)(((long)sc.n_ids * sc.n_vocab + budget - 1) / budget);
    if (sc.stride < 1) sc.stride = 1;
    sc.ref = malloc((size_t)((sc.n_ids + sc.stride - 1) / sc.stride) * sc.n_vocab * sizeof(float));
    sc.chunk = malloc((size_t)sc.ctx * sc.n_vocab * sizeof(float));
    int L = m->cfg.n_layers;
    kld = calloc((size_t)L, sizeof(double));
    rank = malloc((size_t)L * sizeof(int));
    if (!sc.ref || !sc.chunk || !kld || !rank) { err_set(OCT_ENOMEM, "inspect: out of memory"); goto fail; }
    c.a.ro.max_ctx = sc.ctx;
    enum dtype dt;
    kv_dtype_parse(c.target, DT_F32, &dt);
    bool dynamic = kv_dtype_token_scales(c.target);
    const char *label = dynamic ? c.target : dtype_name(dt);  // fp8_per_token_head is e4m3 with its own scales

    // 1. reference pass: observe every layer, keep the reference logits
    struct runner_options ro_ref = c.a.ro;
    snprintf(ro_ref.kv.dtype, sizeof ro_ref.kv.dtype, "auto");
    if (runner_init(&r, m, &ro_ref) < 0) goto fail;
    if (inspect_stats_init(&st, &m->cfg, dt, &r.kv) < 0) goto fail;
    st.token_scales = dynamic;
    r.fw.probe = inspect_probe;
    r.fw.probe_ctx = &st;
    fprintf(stderr, "inspect: %d tokens (chunks of %d), reference pass\n", sc.n_ids, sc.ctx);
    if (run_chunks(&r, &sc, true, NULL) < 0) goto fail;
    runner_free(&r);

    // 2. sensitivity: only layer l in FP8, then all layers
    for (int l = 0; l < L; l++) {
        if (layer_kld(m, &c.a.ro, c.target, l, &sc, &kld[l]) < 0) goto fail;
        fprintf(stderr, "inspect: layer %d (of 0..%d) only in %s: KLD %.3g\n", l, L - 1, c.target, kld[l]);
        rank[l] = l;
    }
    double kld_all;
    if (layer_kld(m, &c.a.ro, c.target, -1, &sc, &kld_all) < 0) goto fail;
    qsort_r(rank, (size_t)L, sizeof(int), cmp_desc, kld);
    int n_top = (int)ceil(c.skip_fraction * L);
    bool skip[MODEL_MAX_LAYERS] = {0};
    for (int i = 0; i < L; i++) skip[rank[i]] = i < n_top || kld[rank[i]] > c.kld_threshold;
    char skip_str[2048] = "";
    for (int l = 0, n = 0; l < L; l++)
        if (skip[l]) n += snprintf(skip_str + n, sizeof skip_str - (size_t)n, "%s%d", n ? "," : "", l);

    // 3. PNGs
    if (c.out_dir) {
        if (mkdir(c.out_dir, 0777) != 0 && errno != EEXIST) {
            err_set(OCT_EIO, "--output-dir %s: cannot create (%s)", c.out_dir, strerror(errno));
            goto fail;
        }
        for (int l = 0; l < L; l++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/layer_%02d.png", c.out_dir, l);
            if (plot_layer(path, &st, l, m->name, dt) != 0) break;
            json_array_append_new(pngs, json_string(path));
            n_png++;
        }
    }

    json_t *o = json_object(), *layers = json_array(), *ranking = json_array();
    char ref_json[48];
    json_object_set_new(o, "model", json_string(m->name));
    json_object_set_new(o, "kv_cache_dtype", json_string(label));
    json_object_set_new(o, "reference_kv_cache_dtype", json_string(cli_kv_dtype_label("auto", m->weight_dtype,
                                                                                       ref_json, sizeof ref_json)));
    json_object_set_new(o, "kv_scales", json_string(c.a.ro.kv.scales_path));
    json_object_set_new(o, "num_tokens", json_integer(sc.n_ids));
    json_object_set_new(o, "scored_tokens", json_integer(sc.n_rows));
    json_object_set_new(o, "kld_all_layers", json_real(kld_all));
    for (int l = 0; l < L; l++) {
        json_t *e = json_object();
        json_object_set_new(e, "layer", json_integer(l));
        json_object_set_new(e, "sensitivity_kld", json_real(kld[l]));
        for (int k = 0; k < INSPECT_KINDS; k++)
            json_object_set_new(e, kind_name[k], acc_json(inspect_acc_of(&st, l, (enum probe_kind)k)));
        json_array_append_new(layers, e);
        json_array_append_new(ranking, json_integer(rank[l]));
    }
    json_object_set_new(o, "layers", layers);
    json_object_set_new(o, "ranking", ranking);
    json_object_set_new(o, "kld_threshold", json_real(c.kld_threshold));
    json_object_set_new(o, "skip_layers", json_string(skip_str));
    json_object_set_new(o, "pngs", pngs);
    pngs = NULL;
    if (c.json) {
        char *js = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
        puts(js);
        free(js);
    } else {
        printf("%s, %d tokens; FP8 = %s at %s (Q: dynamic, gate: 1.0)\n", m->name, sc.n_ids, label,
               dynamic ? "each row's own scale" : "the current scales");
        printf("| layer | kind | max|x| | p50 | p99 | p99.9 | saturated | subnormal | zero | rt rel err |\n");
        printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        static const enum probe_kind order[4] = {PROBE_K, PROBE_V, PROBE_Q, PROBE_GATE};
        for (int l = 0; l < L; l++)
            for (int k = 0; k < 4; k++) {
                const struct inspect_acc *a = inspect_acc_of(&st, l, order[k]);
                double n = a->real.n ? (double)a->real.n : 1;
                printf("| %d | %s | %.4g | %.3g | %.3g | %.3g | %.3g%% | %.3g%% | %.3g%% | %.3g |\n",
                       l, kind_name[order[k]], a->real.max_abs, stats_hist_quantile(&a->real, 0.5),
                       stats_hist_quantile(&a->real, 0.99), stats_hist_quantile(&a->real, 0.999),
                       100 * a->n_sat / n, 100 * a->n_sub / n, 100 * a->n_flush / n,
                       a->sq > 0 ? sqrt(a->sq_err / a->sq) : 0.0);
            }
        char ref_label[48];
        printf("\nsensitivity (mean KLD vs the %s cache when only that layer's KV is %s), most sensitive first:\n",
               cli_kv_dtype_label("auto", m->weight_dtype, ref_label, sizeof ref_label), label);
        for (int i = 0; i < L; i++) printf("  layer %d  KLD %.4g\n", rank[i], kld[rank[i]]);
        printf("all layers %s: KLD %.4g\n", label, kld_all);
        printf("suggested: --kv-cache-dtype-skip-layers %s   (top %.0f%% and any layer above KLD %g)\n", skip_str,
               100 * c.skip_fraction, c.kld_threshold);
        if (n_png) printf("histograms: %d PNGs in %s\n", n_png, c.out_dir);
    }
    json_decref(o);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "octet inspect: %s\n", err_msg());
done:
    json_decref(pngs);
    inspect_stats_free(&st);
    if (r.m) runner_free(&r);
    free(sc.ids); free(sc.ref); free(sc.chunk); free(kld); free(rank); free(text);
    model_free(m);
    return rc;
}
