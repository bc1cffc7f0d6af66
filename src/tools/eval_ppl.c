// eval_ppl.c — `octet eval ppl`: perplexity by llama.cpp's method (non-overlapping
// chunks of --ctx tokens, BOS first, score the second half of each chunk) and, against
// a reference KV dtype and/or a reference model (--ref-model: FP8 weights against the original),
// mean/p99 KL divergence and top-1 agreement of the next-token distributions over the same
// scored positions. Ends with llama-perplexity's line,
// "Final estimate: PPL = x +/- y", y its standard error (ppl times the standard error of the
// mean negative log-likelihood over the scored tokens).
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/check.h"
#include "../engine/sampler.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "cli.h"
#include "stats_util.h"
#include "tools.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(void) {
    fprintf(stderr, "usage: octet eval ppl --model PATH --file TEXT [--ctx N] [--chunks N]\n"
                    "       [--kv-cache-dtype D] [--ref-kv-cache-dtype D2] [--ref-model PATH2] [--json]\n"
                    "  --ref-model PATH2  reference logits from PATH2 (no --quantization applied): FP8 against BF16\n"
                    "  -f, --file TEXT  -c, --ctx N (tokens per chunk, default 512; llama-perplexity's -c)\n");
    cli_print_model_flags();
}

static int eval_ppl(int argc, char **argv) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    const char *file = NULL, *ref_dtype = NULL, *ref_model = NULL;
    long ctx = 512, max_chunks = 0;
    bool json = false;
    static const char *const valued[] = {"--file", "-f", "--ctx", "-c", "--chunks", "--ref-kv-cache-dtype",
                                         "--ref-model", "--json", NULL};
    for (int i = 1; i < argc; i++) {
        bool is_ctx = !strcmp(argv[i], "--ctx") || !strcmp(argv[i], "-c");  // -c is the chunk here
        int rc = is_ctx ? 0 : cli_parse_model_flag(&a, argc, argv, &i);
        if (rc < 0) goto bad;
        if (rc == 1) continue;
        const char *f = argv[i], *v;
        if (!strcmp(f, "--json")) json = true;
        else if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(); return 0; }
        else if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) goto bad;
        else if (!strcmp(f, "--file") || !strcmp(f, "-f")) file = v;
        else if (!strcmp(f, "--ctx") || !strcmp(f, "-c")) {
            if (cli_int(f, v, 4, 1 << 20, &ctx) < 0) goto bad;
        } else if (!strcmp(f, "--chunks")) {
            if (cli_int(f, v, 0, 1 << 20, &max_chunks) < 0) goto bad;
        } else if (!strcmp(f, "--ref-kv-cache-dtype")) {
            enum dtype d;
            if (kv_dtype_parse(v, DT_F32, &d) < 0) goto bad;
            ref_dtype = v;
        } else if (!strcmp(f, "--ref-model")) {
            ref_model = v;
        } else {
            err_set(OCT_EINVAL, "unknown flag '%s'", f);
            goto bad;
        }
    }
    if (!a.model || !file) { err_set(OCT_EINVAL, "--model and --file are required"); goto bad; }
    if (a.ro.max_ctx > 0) {  // it would be overridden by the chunk length
        err_set(OCT_EINVAL, "--max-model-len: eval ppl's context is --ctx (-c), the chunk length");
        goto bad;
    }

    size_t text_len;
    char *text = stats_read_file("--file", file, &text_len);
    if (!text) { fprintf(stderr, "octet: %s\n", err_msg()); return 1; }
    struct model *m;
    if (cli_model_load(&m, &a) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); free(text); return 1; }
    int rc = 1, n_ids = 0, nv = m->cfg.n_vocab;
    int32_t *ids = NULL;
    float *lg = NULL, *lr = NULL;
    double *klds = NULL;
    struct runner r = {0}, rr = {0};
    struct model *mr = NULL;  // --ref-model: the reference logits' own model
    const bool ref = ref_dtype || ref_model;
    if (tokenizer_encode(m->tok, text, text_len, true, false, &ids, &n_ids) < 0) goto fail;
    if (ctx > m->cfg.max_pos) {
        err_set(OCT_EINVAL, "--ctx %ld exceeds the model's context length %d", ctx, m->cfg.max_pos);
        goto fail;
    }
    long n_chunks = n_ids / ctx;
    if (max_chunks > 0 && n_chunks > max_chunks) n_chunks = max_chunks;
    if (n_chunks < 1) {
        err_set(OCT_EINVAL, "%s has %d tokens: fewer than one chunk of --ctx %ld", file, n_ids, ctx);
        goto fail;
    }
    a.ro.max_ctx = (int)ctx;
    if (runner_init(&r, m, &a.ro) < 0) goto fail;
    if (ref_model && model_load(&mr, ref_model) < 0) goto fail;
    if (mr && mr->cfg.n_vocab != nv) {
        err_set(OCT_EINVAL, "--ref-model %s has %d tokens in its vocabulary, %s %d", ref_model, mr->cfg.n_vocab,
                m->name, nv);
        goto fail;
    }
    if (ref) {
        struct runner_options ro = a.ro;
        if (ref_dtype) snprintf(ro.kv.dtype, sizeof ro.kv.dtype, "%s", ref_dtype);
        if (runner_init(&rr, mr ? mr : m, &ro) < 0) goto fail;
    }
    lg = malloc((size_t)ctx * nv * sizeof(float));
    lr = ref ? malloc((size_t)ctx * nv * sizeof(float)) : NULL;
    int first = (int)ctx / 2, per_chunk = (int)ctx - 1 - first;
    klds = malloc((size_t)n_chunks * per_chunk * sizeof(double));
    if (!lg || (ref && !lr) || !klds) { err_set(OCT_ENOMEM, "out of memory"); goto fail; }
    double nll = 0, nll2 = 0, nll_ref = 0;
    long n_scored = 0, agree = 0;
    int bos = tokenizer_bos(m->tok);
    bool tty = isatty(2);
    for (long c = 0; c < n_chunks; c++) {
        int32_t *chunk = ids + c * ctx;
        int32_t saved = chunk[0];
        if (bos >= 0) chunk[0] = bos;
        runner_reset(&r);
        int frc = runner_feed(&r, chunk, (int)ctx, true, lg);
        if (frc == OCT_OK && ref) { runner_reset(&rr); frc = runner_feed(&rr, chunk, (int)ctx, true, lr); }
        chunk[0] = saved;
        if (frc < 0) goto fail;
        for (int j = first; j < ctx - 1; j++) {
            const float *row = lg + (size_t)j * nv;
            int next = ids[c * ctx + j + 1];
            double lp = logits_logprob(row, nv, next);
            nll -= lp;
            nll2 += lp * lp;
            if (ref) {
                const float *rrow = lr + (size_t)j * nv;
                nll_ref -= logits_logprob(rrow, nv, next);
                klds[n_scored] = logits_kld(rrow, row, nv);
                agree += logits_argmax(rrow, nv) == logits_argmax(row, nv);
            }
            n_scored++;
        }
        if (!json)
            fprintf(stderr, tty ? "\r[%ld/%ld] ppl %.4f" : "[%ld/%ld] ppl %.4f\n",
                    c + 1, n_chunks, exp(nll / n_scored));
    }
    if (!json && tty) fputc('\n', stderr);
    double ppl = exp(nll / n_scored), mean_nll = nll / n_scored;
    double var = nll2 / n_scored - mean_nll * mean_nll;  // of the per-token log-likelihood
    double ppl_se = n_scored > 1 && var > 0 ? ppl * sqrt(var / (double)(n_scored - 1)) : 0;
    char dt_label[48];
    cli_kv_dtype_label(a.ro.kv.dtype, m->weight_dtype, dt_label, sizeof dt_label);
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(m->name));
    json_object_set_new(o, "ppl", json_real(ppl));
    json_object_set_new(o, "ppl_stderr", json_real(ppl_se));
    json_object_set_new(o, "n_tokens", json_integer(n_scored));
    json_object_set_new(o, "n_chunks", json_integer(n_chunks));
    json_object_set_new(o, "ctx", json_integer(ctx));
    json_object_set_new(o, "kv_cache_dtype", json_string(a.ro.kv.dtype));
    json_object_set_new(o, "kv_cache_dtype_resolved",
                        json_string(cli_kv_dtype_resolved(a.ro.kv.dtype, m->weight_dtype)));
    if (ref) {
        double mean = 0;
        for (long i = 0; i < n_scored; i++) mean += klds[i];
        mean /= n_scored;
        qsort(klds, (size_t)n_scored, sizeof(double), cmp_double);
        long p99i = (long)ceil(0.99 * n_scored) - 1;
        if (p99i < 0) p99i = 0;
        const char *rd = ref_dtype ? ref_dtype : a.ro.kv.dtype;
        if (ref_model) json_object_set_new(o, "ref_model", json_string(ref_model));
        json_object_set_new(o, "ref_kv_cache_dtype", json_string(rd));
        json_object_set_new(o, "ref_kv_cache_dtype_resolved", json_string(cli_kv_dtype_resolved(rd, m->weight_dtype)));
        json_object_set_new(o, "ref_ppl", json_real(exp(nll_ref / n_scored)));
        json_object_set_new(o, "kld_mean", json_real(mean));
        json_object_set_new(o, "kld_p99", json_real(klds[p99i]));
        json_object_set_new(o, "top1_agree", json_real((double)agree / n_scored));
    }
    if (json) {
        char *s = json_dumps(o, JSON_COMPACT);
        puts(s);
        free(s);
    } else {
        printf("ppl (%s) = %.4f over %ld tokens in %ld chunks of %ld\n", dt_label, ppl, n_scored, n_chunks, ctx);
        char ref_label[48], ref_name[1200];
        snprintf(ref_name, sizeof ref_name, "%s%s%s", ref_model ? "model " : "", ref_model ? ref_model : "",
                 ref_model ? ", KV " : "");
        if (ref)
            printf("vs %s%s: ppl %.4f, KLD mean %.6g, p99 %.6g, top-1 agreement %.4f\n",
                   ref_name, cli_kv_dtype_label(ref_dtype ? ref_dtype : a.ro.kv.dtype, m->weight_dtype, ref_label,
                                                sizeof ref_label),
                   json_real_value(json_object_get(o, "ref_ppl")), json_real_value(json_object_get(o, "kld_mean")),
                   json_real_value(json_object_get(o, "kld_p99")), json_real_value(json_object_get(o, "top1_agree")));
        printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_se);
    }
    json_decref(o);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "octet: %s\n", err_msg());
done:
    if (r.m) runner_free(&r);
    if (rr.m) runner_free(&rr);
    model_free(mr);
    free(ids); free(lg); free(lr); free(klds); free(text);
    model_free(m);
    return rc;
bad:
    return cli_usage_error();
}

int cmd_eval(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "ppl")) return eval_ppl(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "needle")) return cmd_eval_needle(argc - 1, argv + 1);
    bool help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
    if (argc >= 2 && !help) {
        static const char *const subs[] = {"ppl", "needle", NULL};
        const char *near = cli_nearest(argv[1], subs);
        fprintf(stderr, "octet eval: unknown evaluation '%s'%s%s%s\n", argv[1], near ? " (did you mean " : "",
                near ? near : "", near ? "?)" : "");
    }
    fprintf(stderr, "usage: octet eval {ppl|needle} ...\n");
    return help ? 0 : 2;
}
