// cli.c — parsing of the model/engine flags every model-running subcommand accepts.
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"

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
    } else if (!strcmp(f, "--max-model-len")) {
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
    } else {
        return 0;
    }
    return 1;
}

void cli_print_model_flags(void) {
    fprintf(stderr,
            "model and cache flags:\n"
            "  --model PATH                 GGUF file, HF safetensors directory, or dummy:NAME\n"
            "  --kv-cache-dtype D           auto|fp32|fp16|bf16|fp8|fp8_e4m3|fp8_e5m2 (default auto)\n"
            "  --kv-cache-dtype-skip-layers L...  layer indices ('0 2 23' or '0,2,23') and/or sliding_window\n"
            "  --kv-scales FILE             per-layer K/V scales (JSON, see docs/kv_format.md)\n"
            "  --kv-block-tokens N          tokens per KV block (default: 16 on the CPU, 64 on CUDA)\n"
            "  --device D                   cpu | cuda | auto (default: cuda when built with it and a GPU is present)\n"
            "  --threads N                  CPU threads (default: all cores)\n"
            "  --max-model-len N            context limit (default: the model's)\n"
            "  --max-num-batched-tokens N   tokens per forward step (default 512)\n"
            "  --fp8-attention-math M       exact (default) | emulate (round Q and P to e4m3 like the GPU)\n"
            "  --fp8-attention-accumulation A  two-level (default) | every:N | single: how the GPU's FP8\n"
            "                               tensor-core attention accumulates P.V over KV tiles\n"
            "  --batch-invariant            a token's logits do not depend on how its step was batched:\n"
            "                               chunked prefill == token-by-token decoding, bit for bit (the\n"
            "                               CPU always is; on the GPU it costs speed, see docs/architecture.md)\n"
            "  --enforce-eager              run every step eagerly: no CUDA graphs of decode steps\n");
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

bool cli_known(const char *f, const char *const *names) {
    for (; *names; names++)
        if (!strcmp(f, *names)) return true;
    err_set(OCT_EINVAL, "unknown flag '%s'", f);
    return false;
}
