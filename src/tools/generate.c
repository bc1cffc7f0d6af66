// generate.c — `octet generate`: one prompt, one sequence, text out (or JSON with ids).
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"
#include "../engine/sampler.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "cli.h"
#include "tools.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(void) {
    fprintf(stderr, "usage: octet generate --model PATH --prompt TEXT [--max-tokens N] [--temperature T]\n"
                    "       [--top-k K] [--top-p P] [--min-p P] [--seed S] [--stop STR]... [--ignore-eos] [--json]\n"
                    "  -p, --prompt TEXT  -n, --max-tokens N (default 64)\n"
                    "The text goes to stdout and ends with a newline; the timing line goes to stderr.\n");
    cli_print_model_flags();
}

#define MAX_STOPS 8

int cmd_generate(int argc, char **argv) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    struct sampling_params sp;
    sampling_params_default(&sp);
    sp.temperature = 0;  // greedy unless asked
    const char *prompt = NULL, *stops[MAX_STOPS];
    int n_stops = 0;
    long max_tokens = 64;
    bool json = false, ignore_eos = false;
    static const char *const valued[] = {"--prompt", "-p", "--max-tokens", "-n", "--temperature", "--top-p",
                                         "--min-p", "--top-k", "--seed", "--stop",
                                         "--json", "--ignore-eos", NULL};
    for (int i = 1; i < argc; i++) {
        int rc = cli_parse_model_flag(&a, argc, argv, &i);
        if (rc < 0) goto bad;
        if (rc == 1) continue;
        const char *f = argv[i], *v;
        double d;
        long n;
        if (!strcmp(f, "--json")) json = true;
        else if (!strcmp(f, "--ignore-eos")) ignore_eos = true;
        else if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(); return 0; }
        else if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) goto bad;
        else if (!strcmp(f, "--prompt") || !strcmp(f, "-p")) prompt = v;
        else if (!strcmp(f, "--max-tokens") || !strcmp(f, "-n")) {
            if (cli_int(f, v, 0, 1 << 24, &max_tokens) < 0) goto bad;
        } else if (!strcmp(f, "--temperature")) {
            if (cli_float(f, v, &d) < 0) goto bad;
            sp.temperature = (float)d;
        } else if (!strcmp(f, "--top-p")) {
            if (cli_float(f, v, &d) < 0) goto bad;
            sp.top_p = (float)d;
        } else if (!strcmp(f, "--min-p")) {
            if (cli_float(f, v, &d) < 0) goto bad;
            sp.min_p = (float)d;
        } else if (!strcmp(f, "--top-k")) {
            if (cli_int(f, v, -1, 1 << 30, &n) < 0) goto bad;
            sp.top_k = (int)n;
        } else if (!strcmp(f, "--seed")) {
            if (cli_int(f, v, 0, __LONG_MAX__, &n) < 0) goto bad;
            sp.seed = (uint64_t)n;
        } else if (!strcmp(f, "--stop")) {
            if (n_stops == MAX_STOPS) {
                err_set(OCT_EINVAL, "at most %d --stop strings", MAX_STOPS);
                goto bad;
            }
            stops[n_stops++] = v;
        } else {
            err_set(OCT_EINVAL, "unknown flag '%s'", f);
            goto bad;
        }
    }
    if (!a.model || !prompt) { err_set(OCT_EINVAL, "--model and --prompt are required"); goto bad; }
    if (sampling_params_check(&sp) < 0) goto bad;

    struct model *m;
    if (cli_model_load(&m, &a) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); return 1; }
    int32_t *ids = NULL;
    int n_ids = 0, rc = 1;
    struct runner r;
    struct sampler s = {0};
    float *logits = malloc((size_t)m->cfg.n_vocab * sizeof(float));
    int32_t *out = malloc(((size_t)max_tokens + 1) * sizeof(int32_t));
    size_t text_cap = (size_t)max_tokens * 64 + 64, text_len = 0;
    char *text = malloc(text_cap);
    if (!logits || !out || !text) { fprintf(stderr, "octet: out of memory\n"); goto done_model; }
    bool bos = tokenizer_add_bos(m->tok);
    if (tokenizer_encode(m->tok, prompt, strlen(prompt), bos, false, &ids, &n_ids) < 0) goto fail_model;
    if (n_ids == 0) { err_set(OCT_EINVAL, "the prompt is empty after tokenization"); goto fail_model; }
    int need_ctx = n_ids + (int)max_tokens;
    if (a.ro.max_ctx <= 0) a.ro.max_ctx = need_ctx < m->cfg.max_pos ? need_ctx : m->cfg.max_pos;
    if (n_ids + max_tokens > a.ro.max_ctx) {
        err_set(OCT_EINVAL, "prompt (%d tokens) + max tokens (%ld) exceeds the context limit %d",
                n_ids, max_tokens, a.ro.max_ctx);
        goto fail_model;
    }
    if (runner_init(&r, m, &a.ro) < 0) goto fail_model;
    if (sampler_init(&s, &sp, m->cfg.n_vocab) < 0) goto fail_runner;

    double t0 = now_s();
    if (runner_feed(&r, ids, n_ids, false, logits) < 0) goto fail_runner;
    double t1 = now_s();
    int n_out = 0;
    struct detok dt = {0};
    const char *finish = "length";
    while (n_out < max_tokens) {
        int id = sampler_sample(&s, logits);
        if (id < 0) goto fail_runner;  // (NaN or +inf logits: the sampler names them)
        out[n_out++] = id;
        if (!ignore_eos && tokenizer_is_eog(m->tok, id)) { finish = "stop"; break; }
        // the piece and the pending bytes, each invalid byte possibly U+FFFD (3 bytes): never cut
        const size_t cap = 3 * (tokenizer_piece(m->tok, id, false, NULL, 0) + sizeof dt.pending) + 16;
        if (text_len + cap + 16 > text_cap) {
            char *t2 = realloc(text, text_cap * 2 + cap);
            if (!t2) { err_set(OCT_ENOMEM, "out of memory"); goto fail_runner; }
            text = t2;
            text_cap = text_cap * 2 + cap;
        }
        char *piece = text + text_len;
        size_t k = detok_push(m->tok, &dt, id, piece, cap);
        if (k > cap) k = cap;
        text_len += k;
        if (!json) { fwrite(piece, 1, k, stdout); fflush(stdout); }
        bool stopped = false;
        for (int j = 0; j < n_stops && !stopped; j++) {
            text[text_len] = 0;
            char *hit = strstr(text, stops[j]);
            if (hit) { text_len = (size_t)(hit - text); stopped = true; }
        }
        if (stopped) { finish = "stop"; break; }
        if (n_out == max_tokens) break;
        if (runner_feed(&r, &id, 1, false, logits) < 0) goto fail_runner;
    }
    double t2 = now_s();
    char tail[16];
    size_t k = detok_flush(&dt, tail, sizeof tail);
    memcpy(text + text_len, tail, k);
    text_len += k;
    if (!json && k) fwrite(tail, 1, k, stdout);
    char dt_label[48];
    cli_kv_dtype_label(a.ro.kv.dtype, m->weight_dtype, dt_label, sizeof dt_label);
    double pp_tps = n_ids / (t1 - t0), tg_tps = n_out > 1 ? (n_out - 1) / (t2 - t1) : 0;
    long kv_bpt = kv_cache_bytes_per_token(&r.kv);
    if (json) {
        json_t *o = json_object(), *pa = json_array(), *ta = json_array();
        for (int i = 0; i < n_ids; i++) json_array_append_new(pa, json_integer(ids[i]));
        for (int i = 0; i < n_out; i++) json_array_append_new(ta, json_integer(out[i]));
        json_object_set_new(o, "prompt_tokens", pa);
        json_object_set_new(o, "tokens", ta);
        json_object_set_new(o, "text", json_stringn(text, text_len));
        json_object_set_new(o, "finish_reason", json_string(finish));
        json_object_set_new(o, "kv_cache_dtype", json_string(a.ro.kv.dtype));
        json_object_set_new(o, "kv_cache_dtype_resolved",
                            json_string(cli_kv_dtype_resolved(a.ro.kv.dtype, m->weight_dtype)));
        json_object_set_new(o, "kv_bytes_per_token", json_integer(kv_bpt));
        json_object_set_new(o, "prompt_tok_per_s", json_real(pp_tps));
        json_object_set_new(o, "decode_tok_per_s", json_real(tg_tps));
        char *sj = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        puts(sj);
        free(sj);
        json_decref(o);
    } else {
        printf("\n");
        fflush(stdout);  // the text's last line before the timing line, also when both go to one pipe
        fprintf(stderr, "octet: prompt %d tok at %.1f tok/s, decode %d tok at %.1f tok/s, KV %ld bytes/token (%s)\n",
                n_ids, pp_tps, n_out, tg_tps, kv_bpt, dt_label);
    }
    rc = 0;
    goto done_runner;
fail_runner:
    fprintf(stderr, "octet: %s\n", err_msg());
done_runner:
    sampler_free(&s);
    runner_free(&r);
    goto done_model;
fail_model:
    fprintf(stderr, "octet: %s\n", err_msg());
done_model:
    free(ids); free(logits); free(out); free(text);
    model_free(m);
    return rc;
bad:
    return cli_usage_error();
}
