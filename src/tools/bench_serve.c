// bench_serve.c — `octet bench serve`: vLLM's `bench serve` for any OpenAI-compatible
// server (owns: its flags, the tokenizer choice, printing and saving the result; the load
// generator itself is bench_load.c). Random prompts are random token ids of the served
// model's tokenizer, re-encoded to the requested length (prompts.c).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../model/tokenizer.h"
#include "bench_load.h"
#include "cli.h"
#include "prompts.h"
#include "tools.h"

static void usage(void) {
    fprintf(stderr,
            "usage: octet bench serve [flags]   (a load generator; flags follow `vllm bench serve`)\n"
            "  --base-url URL            server (default http://127.0.0.1:8000; or --host/--port)\n"
            "  --endpoint PATH           /v1/completions (default) or /v1/chat/completions\n"
            "  --model NAME              model name sent (default: the first of GET /v1/models)\n"
            "  --tokenizer PATH          model path whose tokenizer makes the prompts (GGUF, HF dir,\n"
            "                            dummy:NAME; default: the model name if loadable, else bytes)\n"
            "  --dataset-name random     the only dataset\n"
            "  --random-input-len N      prompt tokens (default 1024)\n"
            "  --random-output-len N     max_tokens (default 128)\n"
            "  --random-range-ratio R    lengths uniform in [L(1-R), L(1+R)] (default 0)\n"
            "  --num-prompts N           requests (default 1000)\n"
            "  --max-concurrency N       cap on requests in flight (default none)\n"
            "  --request-rate R          requests/s, Poisson arrivals (default inf: all at once)\n"
            "  --seed N                  prompt and arrival seed (default 0)\n"
            "  --ignore-eos              generate exactly max_tokens\n"
            "  --logprobs N              request N logprobs per token (default none)\n"
            "  --save-result FILE.json   write the result (vLLM's keys); --result-filename is an alias\n"
            "  --api-key KEY             Authorization: Bearer KEY\n"
            "  --request-timeout S       per-request limit in seconds (default none)\n"
            "  --disable-tqdm            no progress output\n");
}

struct serve_args {
    char base_url[512];
    const char *endpoint, *model, *tokenizer, *save, *api_key, *host;
    long port, logprobs, input_len, output_len, num_prompts, max_conc, seed;
    double range_ratio, rate, timeout_s;
    bool ignore_eos, quiet;
};

static int parse(struct serve_args *a, int argc, char **argv) {
    static const char *const flags[] = {"--base-url", "--endpoint", "--model", "--tokenizer", "--dataset-name",
        "--random-input-len", "--random-output-len", "--random-range-ratio", "--num-prompts", "--max-concurrency",
        "--request-rate", "--seed", "--ignore-eos", "--save-result", "--result-filename", "--api-key", "--host",
        "--port", "--request-timeout", "--disable-tqdm", "--backend", "--logprobs", NULL};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = NULL;
        if (!cli_known(f, flags)) return OCT_EINVAL;
        if (!strcmp(f, "--ignore-eos")) { a->ignore_eos = true; continue; }
        if (!strcmp(f, "--disable-tqdm")) { a->quiet = true; continue; }
        if (!(v = cli_value(argc, argv, &i))) return OCT_EINVAL;
        if (!strcmp(f, "--base-url")) snprintf(a->base_url, sizeof a->base_url, "%s", v);
        else if (!strcmp(f, "--endpoint")) a->endpoint = v;
        else if (!strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "--tokenizer")) a->tokenizer = v;
        else if (!strcmp(f, "--save-result") || !strcmp(f, "--result-filename")) a->save = v;
        else if (!strcmp(f, "--api-key")) a->api_key = v;
        else if (!strcmp(f, "--host")) a->host = v;
        else if (!strcmp(f, "--port")) TRY(cli_int(f, v, 1, 65535, &a->port));
        else if (!strcmp(f, "--random-input-len")) TRY(cli_int(f, v, 1, 1 << 24, &a->input_len));
        else if (!strcmp(f, "--random-output-len")) TRY(cli_int(f, v, 1, 1 << 24, &a->output_len));
        else if (!strcmp(f, "--num-prompts")) TRY(cli_int(f, v, 1, 1 << 24, &a->num_prompts));
        else if (!strcmp(f, "--max-concurrency")) TRY(cli_int(f, v, 1, 1 << 20, &a->max_conc));
        else if (!strcmp(f, "--seed")) TRY(cli_int(f, v, 0, 1L << 62, &a->seed));
        else if (!strcmp(f, "--logprobs")) TRY(cli_int(f, v, 0, 20, &a->logprobs));
        else if (!strcmp(f, "--random-range-ratio")) {
            TRY(cli_float(f, v, &a->range_ratio));
            if (a->range_ratio < 0 || a->range_ratio >= 1)
                return err_set(OCT_EINVAL, "%s: '%s' must be in [0, 1)", f, v);
        } else if (!strcmp(f, "--request-rate")) {
            if (!strcmp(v, "inf")) a->rate = INFINITY;
            else {
                TRY(cli_float(f, v, &a->rate));
                if (!(a->rate > 0)) return err_set(OCT_EINVAL, "%s: '%s' must be > 0 or inf", f, v);
            }
        } else if (!strcmp(f, "--request-timeout")) {
            TRY(cli_float(f, v, &a->timeout_s));
            if (a->timeout_s < 0) return err_set(OCT_EINVAL, "%s: '%s' must be >= 0", f, v);
        } else if (!strcmp(f, "--dataset-name")) {
            if (strcmp(v, "random")) return err_set(OCT_EINVAL, "--dataset-name: '%s' (only 'random' is supported)", v);
        } else if (!strcmp(f, "--backend")) {
            if (strcmp(v, "openai") && strcmp(v, "vllm") && strcmp(v, "openai-chat"))
                return err_set(OCT_EINVAL, "--backend: '%s' (choose openai, vllm or openai-chat)", v);
        }
    }
    if (a->host || a->port) {
        if (a->base_url[0]) return err_set(OCT_EINVAL, "--base-url and --host/--port are exclusive");
        snprintf(a->base_url, sizeof a->base_url, "http://%s:%ld",
                 a->host ? a->host : "127.0.0.1", a->port ? a->port : 8000);
    }
    if (!a->base_url[0]) snprintf(a->base_url, sizeof a->base_url, "http://127.0.0.1:8000");
    size_t n = strlen(a->base_url);
    while (n > 0 && a->base_url[n - 1] == '/') a->base_url[--n] = 0;
    return OCT_OK;
}

// The tokenizer that sizes prompts: --tokenizer, else the served model's name, else bytes.
int bench_pick_tokenizer(const char *explicit_path, const char *model, struct tokenizer **tok) {
    if (explicit_path) {
        if (prompts_load_tokenizer(explicit_path, tok) < 0) return err_wrap(OCT_EINVAL, "--tokenizer: ");
        return OCT_OK;
    }
    if (prompts_load_tokenizer(model, tok) == OCT_OK) return OCT_OK;
    fprintf(stderr, "octet: warning: cannot load a tokenizer for '%s' (%s); sizing prompts with the byte-level "
                    "stand-in, so the server may count other lengths (pass --tokenizer PATH)\n", model, err_msg());
    return tokenizer_bytes(tok, 258);
}

int cmd_bench_serve(int argc, char **argv) {
    struct serve_args a = {.endpoint = "/v1/completions", .input_len = 1024, .output_len = 128,
                           .num_prompts = 1000, .rate = INFINITY};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(); return 0; }
    if (parse(&a, argc, argv) < 0) return cli_usage_error();  // one line and a pointer to --help
    char model[512] = "";
    if (a.model) snprintf(model, sizeof model, "%s", a.model);
    else if (bench_discover(a.base_url, a.api_key, model, sizeof model, NULL) < 0) {
        fprintf(stderr, "octet bench serve: %s (is the server up? pass --model to skip discovery)\n", err_msg());
        return 1;
    }
    struct tokenizer *tok = NULL;
    if (bench_pick_tokenizer(a.tokenizer, model, &tok) < 0) {
        fprintf(stderr, "octet bench serve: %s\n", err_msg());
        return 1;
    }
    struct prompt_gen g;
    int n = (int)a.num_prompts, rc = 1;
    struct bench_request *reqs = calloc((size_t)n, sizeof *reqs);
    struct bench_outcome *out = calloc((size_t)n, sizeof *out);
    if (!reqs || !out || prompt_gen_init(&g, tok, (unsigned long long)a.seed) < 0) {
        fprintf(stderr, "octet bench serve: %s\n", reqs && out ? err_msg() : "out of memory");
        free(reqs); free(out); tokenizer_free(tok);
        return 1;
    }
    struct bench_random_spec sp = {n, (int)a.input_len, (int)a.output_len, a.range_ratio, (unsigned long long)a.seed};
    char url[1024];
    snprintf(url, sizeof url, "%s%s", a.base_url, a.endpoint);
    struct bench_load_options o = {.url = url, .model = model, .api_key = a.api_key,
        .chat = strstr(a.endpoint, "chat") != NULL, .max_concurrency = (int)a.max_conc, .request_rate = a.rate,
        .seed = (unsigned long long)a.seed, .ignore_eos = a.ignore_eos, .logprobs = (int)a.logprobs,
        .timeout_s = a.timeout_s, .progress_label = a.quiet ? NULL : "bench serve"};
    double dur = 0;
    if (!a.quiet)
        fprintf(stderr, "octet: making %d random prompts of %ld±%.0f%% tokens\n", n, a.input_len, 100 * a.range_ratio);
    if (bench_random_requests(&g, &sp, reqs) < 0) {
        fprintf(stderr, "octet bench serve: prompts: %s\n", err_msg());
        goto done;
    }
    if (!a.quiet) {
        fprintf(stderr, "octet: %s, model %s, %d prompts, concurrency %s, rate ", url, model, n,
                a.max_conc ? "capped" : "uncapped");
        if (isfinite(a.rate)) fprintf(stderr, "%.3g req/s\n", a.rate); else fprintf(stderr, "inf\n");
    }
    if (bench_load_run(&o, reqs, n, out, &dur) < 0) {
        fprintf(stderr, "octet bench serve: %s\n", err_msg());
        goto done;
    }
    struct bench_metrics m;
    bench_metrics_compute(out, n, dur, &m);
    // failed requests are reported, never dropped: the first few errors, then a count
    for (int i = 0, shown = 0; i < n; i++)
        if (!out[i].ok && shown++ < 5) fprintf(stderr, "octet: request %d failed: %s\n", i, out[i].error);
    bench_metrics_print(stdout, &m, (int)a.max_conc, a.rate);
    fflush(stdout);
    rc = 0;
    if (a.save) {
        json_t *j = bench_result_json(&o, &m, out, n);
        json_object_set_new(j, "tokenizer_id", json_string(a.tokenizer ? a.tokenizer : model));
        json_object_set_new(j, "random_input_len", json_integer(a.input_len));
        json_object_set_new(j, "random_output_len", json_integer(a.output_len));
        json_object_set_new(j, "random_range_ratio", json_real(a.range_ratio));
        if (json_dump_file(j, a.save, JSON_INDENT(1)) != 0) {
            fprintf(stderr, "octet bench serve: --save-result: cannot write %s\n", a.save);
            rc = 1;
        } else if (!a.quiet) {
            fprintf(stderr, "octet: saved %s\n", a.save);
        }
        json_decref(j);
    }
    if (m.failed > 0 && m.completed == 0) rc = 1;
done:
    bench_outcomes_free(out, n);
    bench_requests_free(reqs, n);
    free(reqs); free(out);
    prompt_gen_free(&g);
    tokenizer_free(tok);
    return rc;
}
