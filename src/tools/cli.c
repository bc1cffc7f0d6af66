// cli.c — argv normalization, unknown-flag suggestions, usage errors, and the model/engine
// flags every model-running subcommand accepts.
#include "cli.h"
#include "tools.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../base/check.h"
#include "../model/model.h"

static char g_cmd[64] = "octet";

// Subcommands that take the model flags (so a misspelled model flag gets a suggestion).
static const char *const model_commands[] = {"generate", "serve", "eval ppl", "eval needle", "calibrate",
                                             "inspect", "bench model", NULL};

// Flags whose value is free text that may itself look like "--x=y".
static const char *const free_text_flags[] = {"--prompt", "-p", "--stop", "--config", "--serve-args",
                                              "--api-key", NULL};

static const char *const model_flag_names[] = {"--model", "--kv-cache-dtype", "--kv-cache-dtype-skip-layers",
    "--kv-scales", "--kv-block-tokens", "--block-size", "--device", "--threads", "--max-model-len",
    "--max-num-batched-tokens", "--fp8-attention-math", "--fp8-attention-accumulation", "--batch-invariant",
    "--enforce-eager", "--tensor-parallel-size", "--dtype", "--quantization", "--quantization-block",
    "--quantization-skip-layers", "--fp8-gate-dtype", "--weights-load", "--mmap", "--no-mmap", NULL};

// Commands that load their model through cli_model_load, and so honour the FP8 weight flags ("bench sweep"
// checks them in the --serve-args it hands to `octet serve`).
static const char *const fp8_commands[] = {"generate", "serve", "eval ppl", "eval needle", "bench sweep",
                                           "bench model", NULL};

static bool in_list(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

// "--name=value" with a plain flag name before '=': the length of "--name", else 0.
static size_t flag_eq_split(const char *s) {
    if (strncmp(s, "--", 2) != 0) return 0;
    const char *eq = strchr(s, '=');
    if (!eq || eq == s + 2) return 0;
    for (const char *p = s + 2; p < eq; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_') return 0;
    return (size_t)(eq - s);
}

// Per-command spellings of one flag: vLLM's and llama.cpp's names beside octet's, and the
// short aliases of commands whose parsers do not take the model flags.
static const struct { const char *cmd, *alias, *name; } aliases[] = {
    {"serve", "--kv-cache-memory-bytes", "--kv-cache-memory"},
    {"generate", "--n-predict", "--max-tokens"},    // llama-cli
    {"generate", "--ctx-size", "--max-model-len"},
    {"serve", "--ctx-size", "--max-model-len"},     // llama-server
    {"eval ppl", "--ctx-size", "--ctx"},            // llama-perplexity
    {"calibrate", "--ctx-size", "--ctx"},
    {"inspect", "--ctx-size", "--ctx"},
    {"bench sweep", "-m", "--model"},
    {"bench sweep", "-o", "--output-dir"},
    {"eval needle", "-t", "--threads"},
    {"bench model", "-p", "--pp"},                  // llama-bench
    {"bench model", "--n-prompt", "--pp"},
    {"bench model", "--n-gen", "--tg"},
    {"bench model", "-d", "--depth"},
    {"bench model", "--n-depth", "--depth"},
    {"bench model", "-r", "--reps"},
    {"bench model", "--repetitions", "--reps"},
    {"bench model", "-ctk", "--cache-type-k"},
    {"bench model", "-ctv", "--cache-type-v"},
};

// Splits s at blanks and checks the words as `octet serve` flags (serve.c), as the sweep's servers get them.
static int check_flag_string(const char *s) {
    char *dup = strdup(s), *save = NULL, *words[128];
    if (!dup) return err_set(OCT_ENOMEM, "out of memory");
    int n = 0;
    for (char *t = strtok_r(dup, " \t", &save); t && n < 128; t = strtok_r(NULL, " \t", &save)) words[n++] = t;
    char *w[256], *names[128];  // "--x=y" split as cli_normalize does for the server
    int m = 0, n_names = 0, rc = OCT_OK;
    for (int i = 0; i < n && rc == OCT_OK; i++) {
        size_t k = flag_eq_split(words[i]);
        if (!k) { w[m++] = words[i]; continue; }
        if (!(names[n_names] = strndup(words[i], k))) rc = err_set(OCT_ENOMEM, "out of memory");
        else { w[m++] = names[n_names++]; w[m++] = words[i] + k + 1; }
    }
    if (rc == OCT_OK) rc = serve_check_flags(w, m);
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(dup);
    return rc;
}

// `bench sweep` hands --kv-cache-dtype, --config and --serve-args to servers it starts much
// later: every flag among them (model and server flags, with their values) is checked here,
// before any of them runs.
static int check_sweep_flags(int argc, char **argv) {
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return OCT_OK;
    for (int i = 2; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--kv-cache-dtype")) TRY(cli_check_kv_dtypes(argv[++i]));
        else if (!strcmp(argv[i], "--config") || !strcmp(argv[i], "--serve-args")) TRY(check_flag_string(argv[++i]));
    }
    return OCT_OK;
}

int cli_normalize(int argc, char **argv, int *out_argc, char ***out_argv) {
    static char **nv, **owned;  // kept for the life of the process (a second call frees the first's)
    static int n_owned;
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    free(owned);
    free(nv);
    nv = owned = NULL;
    n_owned = 0;
    *out_argc = argc;
    *out_argv = argv;
    if (argc < 2) return OCT_OK;
    const char *cmd = argv[1];
    if ((!strcmp(cmd, "bench") || !strcmp(cmd, "eval")) && argc > 2 && argv[2][0] != '-')
        snprintf(g_cmd, sizeof g_cmd, "%s %s", cmd, argv[2]);
    else
        snprintf(g_cmd, sizeof g_cmd, "%s", cmd);
    nv = calloc((size_t)argc * 2 + 2, sizeof *nv);
    owned = calloc((size_t)argc, sizeof *owned);
    if (!nv || !owned) return err_set(OCT_ENOMEM, "out of memory");
    int n = 0;
    nv[n++] = argv[0];
    nv[n++] = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        if (i == 2 && !strcmp(cmd, "serve") && s[0] != '-') {  // vllm serve MODEL
            nv[n++] = "--model";
            nv[n++] = argv[i];
            continue;
        }
        size_t k = flag_eq_split(s);
        bool is_value = i > 2 && flag_eq_split(argv[i - 1]) == 0 && in_list(argv[i - 1], free_text_flags);
        if (k && !is_value) {
            char *name = strndup(s, k);
            if (!name) return err_set(OCT_ENOMEM, "out of memory");
            nv[n++] = owned[n_owned++] = name;
            nv[n++] = argv[i] + k + 1;
        } else {
            nv[n++] = argv[i];
        }
    }
    nv[n] = NULL;
    for (int i = 2; i < n; i++)
        for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++)
            if (!strcmp(g_cmd, aliases[k].cmd) && !strcmp(nv[i], aliases[k].alias)) nv[i] = (char *)aliases[k].name;
    *out_argc = n;
    *out_argv = nv;
    return strcmp(g_cmd, "bench sweep") ? OCT_OK : check_sweep_flags(n, nv);
}

const char *cli_command(void) { return g_cmd; }

int cli_usage_error(void) {
    fprintf(stderr, "octet %s: %s\n", g_cmd, err_msg());
    fprintf(stderr, "Run 'octet %s --help' for its flags.\n", g_cmd);
    return 2;
}

int cli_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 1000;
    int d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

// The closest of list to f (long flag names only when flags): updates *best/*best_d.
static void nearest(const char *f, const char *const *list, bool flags, const char **best, int *best_d) {
    for (; *list; list++) {
        if (flags && ((*list)[0] != '-' || (*list)[1] != '-')) continue;
        int d = cli_edit_distance(f, *list);
        if (d < *best_d) { *best_d = d; *best = *list; }
    }
}

// A typo's distance: at most 2 edits, or a quarter of the word.
static bool typo_close(const char *f, int d) { return d <= 2 || (size_t)d * 4 <= strlen(f); }

const char *cli_nearest(const char *word, const char *const *names) {
    const char *best = NULL;
    int best_d = 1000;
    nearest(word, names, false, &best, &best_d);
    return best && typo_close(word, best_d) ? best : NULL;
}

bool cli_known(const char *f, const char *const *names) {
    if (in_list(f, names)) return true;
    if (f[0] != '-') {
        err_set(OCT_EINVAL, "unexpected argument '%s' (every value follows its flag, as in --prompt TEXT)", f);
        return false;
    }
    const char *best = NULL;
    int best_d = 1000;
    nearest(f, names, true, &best, &best_d);
    if (in_list(g_cmd, model_commands)) nearest(f, model_flag_names, true, &best, &best_d);
    if (best && typo_close(f, best_d))
        err_set(OCT_EINVAL, "unknown flag '%s' (did you mean %s?)", f, best);
    else
        err_set(OCT_EINVAL, "unknown flag '%s'", f);
    return false;
}

void cli_model_args_default(struct cli_model_args *a) {
    memset(a, 0, sizeof *a);
    runner_options_default(&a->ro);
}

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) { err_set(OCT_EINVAL, "%s needs a value", argv[*i]); return NULL; }
    return argv[++*i];
}

int cli_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return err_set(OCT_EINVAL, "%s: '%s' is not an integer in %ld..%ld", flag, s, lo, hi);
    *out = v;
    return OCT_OK;
}

int cli_float(const char *flag, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) return err_set(OCT_EINVAL, "%s: '%s' is not a number", flag, s);
    *out = v;
    return OCT_OK;
}

// --quantization fp8 (vLLM's flag), --quantization-block 128, --quantization-skip-layers L,
// --fp8-gate-dtype e4m3|e5m2: 1 when taken, <0 + err_msg().
static int parse_fp8_flag(struct cli_model_args *a, const char *f, int argc, char **argv, int *i) {
    const char *v = cli_value(argc, argv, i);
    if (!v) return OCT_EINVAL;
    if (!in_list(g_cmd, fp8_commands))
        return err_set(OCT_EUNSUP, "%s: not taken by octet %s (generate, serve, eval and bench model run FP8 weights)",
                       f, g_cmd);
    long n;
    if (!strcmp(f, "--quantization-block")) {
        TRY(cli_int(f, v, 0, 1 << 16, &n));
        if (n != 0 && n != 128) return err_set(OCT_EINVAL, "%s %ld: 0 (per output channel) or 128 (128x128 blocks)",
                                               f, n);
        a->fp8.block = (int)n;
    } else if (!strcmp(f, "--quantization-skip-layers")) {
        TRY(quant_fp8_parse_skip(&a->fp8, v));
    } else if (!strcmp(f, "--fp8-gate-dtype")) {
        if (strcmp(v, "e4m3") && strcmp(v, "e5m2") && strcmp(v, "fp8_e4m3") && strcmp(v, "fp8_e5m2"))
            return err_set(OCT_EINVAL, "%s: '%s' (choose e4m3 or e5m2)", f, v);
        a->fp8.gate_e5m2 = strstr(v, "e5m2") != NULL;
    } else if (!strcmp(v, "fp8")) {
        a->fp8.quantize = true;
    } else {
        return err_set(OCT_EUNSUP, "%s %s: not supported (fp8: e4m3 weights with per-channel or 128x128 block "
                       "scales; GGUF files bring their own quantized types)", f, v);
    }
    return 1;
}

int cli_parse_model_flag(struct cli_model_args *a, int argc, char **argv, int *i) {
    const char *f = argv[*i], *v;
    long n;
    if (!strcmp(f, "--model") || !strcmp(f, "-m")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        a->model = v;
    } else if (!strcmp(f, "--kv-cache-dtype")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(kv_options_set_dtype(&a->ro.kv, v));
    } else if (!strcmp(f, "--kv-cache-dtype-skip-layers")) {
        // takes one or more following non-flag words: "0 2 23" or "0,2,23" or sliding_window
        if (*i + 1 >= argc) return err_set(OCT_EINVAL, "%s needs a value", f);
        while (*i + 1 < argc && argv[*i + 1][0] != '-') TRY(kv_options_set_skip(&a->ro.kv, argv[++*i]));
    } else if (!strcmp(f, "--kv-scales")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        snprintf(a->ro.kv.scales_path, sizeof a->ro.kv.scales_path, "%s", v);
    } else if (!strcmp(f, "--kv-block-tokens") || !strcmp(f, "--block-size")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(cli_int(f, v, 1, 1024, &n));
        a->ro.kv.kv_block_tokens = (int)n;
    } else if (!strcmp(f, "--device")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto"))
            return err_set(OCT_EINVAL, "--device: unknown device '%s' (choose cpu, cuda or auto)", v);
        snprintf(a->ro.device, sizeof a->ro.device, "%s", v);
    } else if (!strcmp(f, "--threads") || !strcmp(f, "-t")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(cli_int(f, v, 0, 1024, &n));
        a->ro.n_threads = (int)n;
    } else if (!strcmp(f, "--max-model-len") || !strcmp(f, "-c")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(cli_int(f, v, 1, 1 << 24, &n));
        a->ro.max_ctx = (int)n;
    } else if (!strcmp(f, "--max-num-batched-tokens")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(cli_int(f, v, 1, 1 << 20, &n));
        a->ro.max_step_tokens = (int)n;
    } else if (!strcmp(f, "--fp8-attention-math")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        if (!strcmp(v, "exact")) a->ro.fp8_math = ATTN_FP8_EXACT;
        else if (!strcmp(v, "emulate")) a->ro.fp8_math = ATTN_FP8_EMULATE;
        else return err_set(OCT_EINVAL, "--fp8-attention-math: '%s' (choose exact or emulate)", v);
    } else if (!strcmp(f, "--fp8-attention-accumulation")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(cli_parse_accum(f, v, &a->ro.fp8_accum));
    } else if (!strcmp(f, "--batch-invariant")) {
        a->ro.batch_invariant = true;
    } else if (!strcmp(f, "--enforce-eager")) {
        a->ro.enforce_eager = true;
    } else if (!strcmp(f, "--tensor-parallel-size") || !strcmp(f, "-tp")) {  // vLLM's names
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(cli_int(f, v, 1, 1 << 16, &n));
        if (n != 1)
            return err_set(OCT_EUNSUP, "%s %ld: tensor parallelism is not supported yet (octet runs a model on "
                           "one device; use 1)", f, n);
    } else if (!strcmp(f, "--dtype")) {  // vLLM's weight/activation type: octet computes in the weights' types
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        if (strcmp(v, "auto"))
            return err_set(OCT_EUNSUP, "--dtype %s: not supported yet (octet computes in the types the weights "
                           "are stored in; only auto; the KV cache's type is --kv-cache-dtype)", v);
    } else if (!strcmp(f, "--weights-load")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(weights_load_parse(v, &a->weights));
    } else if (!strcmp(f, "--mmap") || !strcmp(f, "--no-mmap")) {  // llama.cpp's spellings
        a->weights = f[2] == 'n' ? WEIGHTS_LOAD_READ : WEIGHTS_LOAD_MMAP;
    } else if (!strcmp(f, "--quantization") || !strcmp(f, "--quantization-block") ||
               !strcmp(f, "--quantization-skip-layers") || !strcmp(f, "--fp8-gate-dtype")) {
        return parse_fp8_flag(a, f, argc, argv, i);
    } else {
        return 0;
    }
    return 1;
}

int cli_model_load(struct model **m, const struct cli_model_args *a) {
    // (dummy models draw their projections straight to e4m3: a 70B's bf16 weights do not fit host memory)
    const struct model_fp8_draw draw = {a->fp8.block, a->fp8.skip_layer, a->fp8.skip_lm_head};
    const struct model_load_options lo = {a->fp8.quantize ? &draw : NULL, cli_weights_load(a)};
    TRY(model_load_opts(m, a->model, &lo));
    int rc = quant_fp8_apply(*m, &a->fp8);
    if (rc < 0) { model_free(*m); *m = NULL; return rc; }
    size_t bytes[DT_COUNT];
    model_weight_bytes_by_dtype(*m, bytes);
    char label[160];
    if (bytes[DT_E4M3])
        fprintf(stderr, "octet: weights by dtype: %s\n", model_weight_dtypes_label(*m, label, sizeof label));
    return OCT_OK;
}

void cli_print_weights_load(FILE *f, const struct model *m) {
    struct weights_load_info wl;
    model_weights_load_info(m, &wl);
    char label[256];
    if (wl.n_files) fprintf(f, "octet: weights: %s\n", weights_load_info_label(&wl, label, sizeof label));
}

enum weights_load cli_weights_load(const struct cli_model_args *a) {
    const char *d = a->ro.device;
    bool cuda = !strcmp(d, "cuda") || (strcmp(d, "cpu") && a->weights == WEIGHTS_LOAD_AUTO && backend_cuda_available());
    return weights_load_resolve(a->weights, cuda);
}

void cli_print_model_flags(void) {
    fprintf(stderr,
            "model and cache flags (every flag also takes --flag=value):\n"
            "  -m, --model PATH             GGUF file, HF safetensors directory, or dummy:NAME\n"
            "  --kv-cache-dtype D           auto|fp32|fp16|bf16|fp8|fp8_e4m3|fp8_e5m2|fp8_per_token_head\n"
            "                               (default auto: the weights' type, fp16 under GGUF Q8_0/Q4_K...;\n"
            "                               fp8_per_token_head: e4m3 with a scale per token and KV head, no\n"
            "                               calibration)\n"
            "  --kv-cache-dtype-skip-layers L...  layer indices from 0 ('0 2 23' or '0,2,23') and/or sliding_window\n"
            "  --kv-scales FILE             per-layer K/V scales (JSON, see docs/kv_format.md)\n"
            "  --kv-block-tokens N          tokens per KV block (default: 16 on the CPU, 64 on CUDA)\n"
            "  --device D                   cpu | cuda | auto (default: cuda when built with it and a GPU is present)\n"
            "  -t, --threads N              CPU threads (default: all cores)\n"
            "  -c, --max-model-len N        context limit (default: the model's)\n"
            "  --max-num-batched-tokens N   tokens per forward step (default 512; serve: 2048)\n"
            "  --fp8-attention-math M       exact (default) | emulate (round Q and P to e4m3 like the GPU)\n"
            "  --fp8-attention-accumulation A  two-level (default) | every:N | single: how the GPU's FP8\n"
            "                               tensor-core attention accumulates P.V over KV tiles\n"
            "  --batch-invariant            a token's logits do not depend on how its step was batched:\n"
            "                               chunked prefill == token-by-token decoding, bit for bit (the\n"
            "                               CPU always is; on the GPU it costs speed, see docs/architecture.md)\n"
            "  --enforce-eager              run every step eagerly: no CUDA graphs of decode steps\n"
            "  --tensor-parallel-size 1     vLLM's flag: only 1 (one device) is supported\n"
            "  --dtype auto                 vLLM's flag: only auto (the weights' own types) is supported\n"
            "  --quantization fp8           generate/serve/eval: projections and lm_head to e4m3 at load, dynamic\n"
            "                               per-token activation scales (docs/fp8_weights.md)\n"
            "  --quantization-block N       0: a scale per output channel (default); 128: per 128x128 block\n"
            "  --quantization-skip-layers L  layers kept in their dtype: '0,31,lm_head'\n"
            "  --fp8-gate-dtype D           e4m3 (default) | e5m2: the SwiGLU gate's activations in e5m2\n"
            "  --weights-load M             auto (default) | mmap | read: map the model's files, or read them into\n"
            "                               memory in 2 MiB pages; auto reads on the CPU (faster decode), maps on\n"
            "                               CUDA (the file only feeds the upload)\n"
            "  --mmap, --no-mmap            llama.cpp's flags: --weights-load mmap, --weights-load read\n");
}

int cli_parse_accum(const char *flag, const char *v, int *out) {
    if (!strcmp(v, "two-level")) { *out = 0; return OCT_OK; }
    if (!strcmp(v, "single")) { *out = ATTN_ACC_SINGLE; return OCT_OK; }
    if (!strncmp(v, "every:", 6)) {
        long n;
        if (cli_int(flag, v + 6, 1, 1 << 20, &n) == OCT_OK) { *out = n == 1 ? 0 : (int)n; return OCT_OK; }
    }
    return err_set(OCT_EINVAL, "%s: '%s' (choose two-level, every:N with N >= 1, or single)", flag, v);
}

const char *cli_accum_name(int acc, char *buf, size_t n) {
    if (acc == 0) snprintf(buf, n, "two-level");
    else if (acc < 0) snprintf(buf, n, "single");
    else snprintf(buf, n, "every:%d", acc);
    return buf;
}

int cli_check_kv_dtypes(const char *list) {
    char *dup = strdup(list), *save = NULL;
    if (!dup) return err_set(OCT_ENOMEM, "out of memory");
    int n = 0, rc = OCT_OK;
    enum dtype dt;
    for (char *t = strtok_r(dup, ",", &save); t && rc == OCT_OK; t = strtok_r(NULL, ",", &save), n++)
        rc = kv_dtype_parse(t, DT_F32, &dt);
    free(dup);
    if (rc == OCT_OK && n == 0) rc = err_set(OCT_EINVAL, "--kv-cache-dtype: empty list");
    return rc;
}

int cli_kv_fp8_target(const char *v) {
    if (!strcmp(v, "fp8") || !strcmp(v, "fp8_e4m3") || !strcmp(v, "fp8_e5m2") || kv_dtype_token_scales(v))
        return OCT_OK;
    return err_set(OCT_EINVAL, "--kv-cache-dtype: '%s' is not an FP8 type with scales (choose fp8, fp8_e4m3, fp8_e5m2 "
                   "or fp8_per_token_head)", v);
}

const char *cli_kv_dtype_resolved(const char *dtype, enum dtype model_dt) {
    enum dtype dt;
    if (kv_dtype_parse(dtype, model_dt, &dt) < 0) return dtype;
    if (kv_dtype_token_scales(dtype)) return "fp8_per_token_head";  // e4m3 with its own scales, not plain e4m3
    switch (dt) {
    case DT_F32: return "fp32";
    case DT_F16: return "fp16";
    case DT_BF16: return "bf16";
    case DT_E4M3: return "fp8_e4m3";
    case DT_E5M2: return "fp8_e5m2";
    default: return dtype_name(dt);
    }
}

const char *cli_kv_dtype_label(const char *dtype, enum dtype model_dt, char *buf, size_t n) {
    if (strcmp(dtype, "auto")) snprintf(buf, n, "%s", dtype);
    else snprintf(buf, n, "auto (%s)", cli_kv_dtype_resolved(dtype, model_dt));
    return buf;
}
