// calibrate.c — `octet calibrate`: K/V (and Q) scales from the user's own text. Runs the
// text through the model with an unquantized (auto) cache, observes the pre-quantization
// Q/K/V of every layer through the forward probe, and writes scale = stat(|x|) / fp8_max
// per tensor or per KV head as an octet-kv-scales/1 file for --kv-scales.
// Owns only flag handling and the summary; the statistics live in calib_scales.c.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../model/kv_cache.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "calib_choose.h"
#include "calib_scales.h"
#include "cli.h"
#include "stats_util.h"
#include "tools.h"

static void usage(void) {
    fprintf(stderr,
            "usage: octet calibrate --model PATH --file TEXT --output scales.json\n"
            "       [--granularity tensor|head] [--method max|percentile:99.9]\n"
            "       [--num-tokens N] [--ctx N] [--kv-cache-dtype fp8|fp8_e4m3|fp8_e5m2|fp8_per_token_head]\n"
            "       [--threads N]\n"
            "       [--k-offset none|mean]\n"
            "  -f, --file TEXT  -o, --output FILE  -c, --ctx N (tokens per chunk, default 512)\n"
            "Scale = statistic(|x|) / fp8_max (448 for e4m3, 57344 for e5m2), from the K and V\n"
            "each layer writes to its cache (Q too, for reference). Load with --kv-scales.\n"
            "--k-offset mean also writes each K channel's mean (a second pass over the text\n"
            "measures |K - mean| for the K scales): FP8 layers store K - mean, which leaves\n"
            "attention unchanged and shrinks what e4m3 must round.\n"
            "Without --granularity, --method or --k-offset, each layer's K and V keep whichever of\n"
            "1.0, max, percentile:99.9 and percentile:99.99, per tensor or per head, with or without\n"
            "K offsets, changes the layer's attention output least on the text (a table compares them).\n"
            "--kv-cache-dtype fp8_per_token_head computes its scales as tokens are written: the file's\n"
            "K offsets (--k-offset mean, the default for it) are what it uses.\n");
}

struct calib_args {
    struct cli_model_args a;
    const char *file, *output, *method_str, *target;
    bool k_offset, fixed;  // fixed: a --granularity, --method or --k-offset was given
    enum calib_granularity g;
    struct calib_method method;
    long num_tokens, ctx;
};

static int parse(struct calib_args *c, int argc, char **argv) {
    static const char *const valued[] = {"--file", "-f", "--output", "-o", "--granularity", "--method",
                                         "--num-tokens", "--ctx", "-c", "--kv-cache-dtype", "--k-offset", NULL};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v;
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
        if (!strcmp(f, "--granularity") || !strcmp(f, "--method") || !strcmp(f, "--k-offset")) c->fixed = true;
        if (!strcmp(f, "--file") || !strcmp(f, "-f")) c->file = v;
        else if (!strcmp(f, "--output") || !strcmp(f, "-o")) c->output = v;
        else if (!strcmp(f, "--granularity")) TRY(calib_parse_granularity(v, &c->g));
        else if (!strcmp(f, "--method")) { TRY(calib_parse_method(v, &c->method)); c->method_str = v; }
        else if (!strcmp(f, "--num-tokens")) TRY(cli_int(f, v, 1, 1L << 30, &c->num_tokens));
        else if (!strcmp(f, "--k-offset")) {
            if (strcmp(v, "none") && strcmp(v, "mean"))
                return err_set(OCT_EINVAL, "--k-offset: unknown value '%s' (choose none or mean)", v);
            c->k_offset = !strcmp(v, "mean");
        }
        else if (!strcmp(f, "--ctx") || !strcmp(f, "-c")) TRY(cli_int(f, v, 2, 1 << 24, &c->ctx));
    }
    if (!c->a.model || !c->file || !c->output) return err_set(OCT_EINVAL, "--model, --file and --output are required");
    if (c->a.ro.max_ctx > 0) return err_set(OCT_EINVAL, "--max-model-len: calibrate's context is --ctx (-c)");
    if (c->a.ro.kv.scales_path[0])  // it observes the unquantized cache: scales would change nothing
        return err_set(OCT_EINVAL, "--kv-scales: calibrate writes scales (--output) and reads none");
    return OCT_OK;
}

static void print_summary(const struct calib_scales *s, const char *dtype) {
    printf("| layer | k_scale (min..max over heads) | v_scale (min..max) | max|K| | max|V| |\n");
    printf("|---:|---|---|---:|---:|\n");
    for (int l = 0; l < s->n_layers; l++) {
        const float *k = s->k + (size_t)l * s->n_kv_heads, *v = s->v + (size_t)l * s->n_kv_heads;
        float kmin = k[0], kmax = k[0], vmin = v[0], vmax = v[0];
        for (int h = 1; h < s->n_kv_heads; h++) {
            kmin = k[h] < kmin ? k[h] : kmin; kmax = k[h] > kmax ? k[h] : kmax;
            vmin = v[h] < vmin ? v[h] : vmin; vmax = v[h] > vmax ? v[h] : vmax;
        }
        printf("| %d | %.4g..%.4g | %.4g..%.4g | %.4g | %.4g |\n",
               l, kmin, kmax, vmin, vmax, s->k_amax[l], s->v_amax[l]);
    }
    printf("(scales for --kv-cache-dtype %s)\n", dtype);
}

int cmd_calibrate(int argc, char **argv) {
    struct calib_args c = {.g = CALIB_TENSOR, .method_str = "max", .target = "fp8", .num_tokens = 4096};
    cli_model_args_default(&c.a);
    if (parse(&c, argc, argv) < 0) return cli_usage_error();
    size_t text_len;
    char *text = stats_read_file("--file", c.file, &text_len);
    if (!text) { fprintf(stderr, "octet calibrate: %s\n", err_msg()); return 1; }
    struct model *m = NULL;
    struct runner r = {0};
    struct calib_stats st = {0};
    struct calib_scales sc = {0};
    struct calib_choice ch = {0};
    int32_t *ids = NULL;
    int n_ids = 0, rc = 1;
    if (cli_model_load(&m, &c.a) < 0) goto fail;
    if (tokenizer_encode(m->tok, text, text_len, true, false, &ids, &n_ids) < 0) goto fail;
    if (n_ids < 2) { err_set(OCT_EINVAL, "--file %s: too little text (%d tokens)", c.file, n_ids); goto fail; }
    if (n_ids > c.num_tokens) n_ids = (int)c.num_tokens;
    long ctx = c.ctx > 0 ? c.ctx : (m->cfg.max_pos < 512 ? m->cfg.max_pos : 512);
    if (ctx > m->cfg.max_pos) {
        err_set(OCT_EINVAL, "--ctx %ld exceeds the model's context length %d", ctx, m->cfg.max_pos);
        goto fail;
    }
    if (ctx > n_ids) ctx = n_ids;
    c.a.ro.max_ctx = (int)ctx;
    snprintf(c.a.ro.kv.dtype, sizeof c.a.ro.kv.dtype, "auto");  // observe unquantized activations
    c.a.ro.kv.scales_path[0] = 0;
    if (runner_init(&r, m, &c.a.ro) < 0) goto fail;
    if (calib_stats_init(&st, &m->cfg) < 0) goto fail;
    bool dynamic = kv_dtype_token_scales(c.target);
    const char *no_off = kv_offsets_refused(&m->cfg);
    if (dynamic && !c.fixed && no_off) {
        err_set(OCT_EUNSUP, "%s needs no scales, and this model takes no K offsets: its attention %s; there is "
                "nothing to calibrate", c.target, no_off);
        goto fail;
    }
    if (dynamic && !c.fixed) c.k_offset = c.fixed = true;  // its scales are per token: only offsets apply
    if (c.k_offset && no_off) {
        err_set(OCT_EUNSUP, "--k-offset mean: this model's attention %s, so the shift q·o an offset gives all of a "
                "query's scores does not cancel", no_off);
        goto fail;
    }
    const char *label = dynamic ? c.target : NULL;  // the file names the cache it was made for
    enum dtype dt;
    kv_dtype_parse(c.target, DT_F32, &dt);
    if (!label) label = dtype_name(dt);
    if (!c.fixed) {
        fprintf(stderr, "calibrate: %d tokens in chunks of %ld, choosing per layer by attention error\n", n_ids, ctx);
        if (calib_choose(&ch, &r, ids, n_ids, (int)ctx, dt, &st) < 0) goto fail;
        if (calib_scales_write(c.output, &ch.result, m->name, "min-attention-error", st.n_tokens, label) < 0)
            goto fail;
        calib_choice_print(&ch, stdout);
        printf("\n");
        print_summary(&ch.result, label);
        fprintf(stderr, "calibrate: wrote %s (%ld tokens observed)\n", c.output, st.n_tokens);
        rc = 0;
        goto done;
    }
    fprintf(stderr, "calibrate: %d tokens in chunks of %ld, %s, %s\n", n_ids, ctx,
            c.g == CALIB_HEAD ? "per head" : "per tensor", c.method_str);
    if (calib_collect(&r, ids, n_ids, (int)ctx, &st) < 0) goto fail;
    if (c.k_offset) {  // offsets from the first pass, scales of K − offset from a second
        if (calib_offsets_from_mean(&st) < 0 || calib_collect(&r, ids, n_ids, (int)ctx, &st) < 0) goto fail;
        fprintf(stderr, "calibrate: K offsets = per-channel means; K scales measured on K - offset\n");
    }
    if (calib_scales_compute(&st, c.g, c.method, stats_fp8_max(dt), &sc) < 0) goto fail;
    if (calib_scales_write(c.output, &sc, m->name, c.method_str, st.n_tokens, label) < 0) goto fail;
    print_summary(&sc, label);
    if (dynamic) printf("(fp8_per_token_head uses its own scale per token and the file's K offsets)\n");
    fprintf(stderr, "calibrate: wrote %s (%ld tokens observed)\n", c.output, st.n_tokens);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "octet calibrate: %s\n", err_msg());
done:
    calib_scales_free(&sc);
    calib_choice_free(&ch);
    calib_stats_free(&st);
    if (r.m) runner_free(&r);
    free(ids);
    free(text);
    model_free(m);
    return rc;
}
