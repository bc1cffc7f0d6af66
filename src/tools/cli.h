// cli.h — the command line shared by every subcommand (owns: argv normalization —
// --flag=value, `octet serve MODEL` —, the subcommand's name for messages, unknown-flag
// errors with a "did you mean", the one-line error + --help pointer, and parsing of the
// model/engine flags --model, --kv-cache-dtype, --kv-cache-dtype-skip-layers, --kv-scales,
// --kv-block-tokens, --device, --threads, --max-model-len, --max-num-batched-tokens,
// --fp8-attention-*, --batch-invariant, --enforce-eager, --tensor-parallel-size, --dtype
// into struct runner_options, --weights-load / --mmap / --no-mmap (how the model's files are held),
// and the FP8 weight flags (--quantization fp8 ...) of generate, serve and eval into struct
// quant_fp8_options).
// Short aliases mean one thing everywhere: -m --model, -c the context (--max-model-len, or
// --ctx where a command has one), -n tokens to generate, -t --threads, -o the output.
#ifndef OCTET_CLI_H
#define OCTET_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../engine/runner.h"
#include "../model/quant_fp8.h"

struct cli_model_args {
    const char *model;
    struct runner_options ro;
    struct quant_fp8_options fp8;  // --quantization fp8, --quantization-block, -skip-layers, --fp8-gate-dtype
    enum weights_load weights;     // --weights-load (--mmap, --no-mmap); auto: per device (cli_weights_load)
};

// Rewrites main's argv (argv[0] "octet", argv[1] the command) into the form every parser
// reads: "--flag=value" becomes "--flag" "value" (except as the value of a free-text flag
// such as --prompt or --serve-args), and `octet serve MODEL ...` becomes `--model MODEL`.
// Per-command aliases become the command's own spelling (`serve --kv-cache-memory-bytes`,
// vLLM's name, is --kv-cache-memory). Records the subcommand ("generate", "bench model", ...)
// for cli_usage_error and the suggestions. The new argv lives until exit. Also checks, up
// front, the model flags `bench sweep` passes to the servers it starts (<0 with a message).
int cli_normalize(int argc, char **argv, int *out_argc, char ***out_argv);
// The subcommand being parsed ("octet" before cli_normalize).
const char *cli_command(void);
// Prints the pending error as "octet CMD: MESSAGE" and a pointer to `octet CMD --help`;
// returns 2 (the usage exit code).
int cli_usage_error(void);

void cli_model_args_default(struct cli_model_args *a);
// If argv[*i] is one of the shared flags, consumes it (and its value) and returns 1;
// returns 0 if not ours; <0 with err_msg() on a bad value.
int cli_parse_model_flag(struct cli_model_args *a, int argc, char **argv, int *i);
// Value of flag argv[*i] (advances *i), or NULL with an error set.
const char *cli_value(int argc, char **argv, int *i);
int cli_int(const char *flag, const char *s, long lo, long hi, long *out);
int cli_float(const char *flag, const char *s, double *out);
void cli_print_model_flags(void);
// model_load of a->model with the FP8 weight flags applied (quant_fp8_apply) and the files held as
// cli_weights_load says; prints the weight bytes by dtype when any weight is fp8. <0 + err_msg().
int cli_model_load(struct model **m, const struct cli_model_args *a);
// "octet: weights: 2.21 GB read into memory, 2.21 GB of it in 2 MiB pages (--weights-load read)" (how the
// model's files are held; nothing for a dummy model): serve's startup report and bench model print it.
void cli_print_weights_load(FILE *f, const struct model *m);
// --weights-load resolved for a->ro.device: auto is read (2 MiB-page memory) on the CPU, mmap on CUDA
// (--device auto: CUDA when backend_cuda_available()).
enum weights_load cli_weights_load(const struct cli_model_args *a);
// --fp8-attention-accumulation: two-level -> 0, every:N -> N (every:1 = two-level), single -> ATTN_ACC_SINGLE.
int cli_parse_accum(const char *flag, const char *v, int *out);
// The flag's spelling of an accumulation mode, in buf.
const char *cli_accum_name(int acc, char *buf, size_t n);
// True if f is one of the NULL-terminated names; otherwise sets "unknown flag 'f'" with the
// nearest known flag (names, plus the model flags for commands that take them) as a
// "did you mean", or "unexpected argument" for a word that is not a flag.
bool cli_known(const char *f, const char *const *names);
// The name in the NULL-terminated list within a typo's distance of word (the nearest), or NULL.
const char *cli_nearest(const char *word, const char *const *names);
// Levenshtein distance with adjacent transpositions (optimal string alignment).
int cli_edit_distance(const char *a, const char *b);

// Checks a comma-separated --kv-cache-dtype list ("auto,fp8") without running anything.
int cli_check_kv_dtypes(const char *list);
// The --kv-cache-dtype of a command that measures an FP8 cache's scales (calibrate, inspect): fp8, fp8_e4m3,
// fp8_e5m2 or fp8_per_token_head; OCT_EINVAL naming the value otherwise.
int cli_kv_fp8_target(const char *v);
// What a --kv-cache-dtype value runs as on a model whose weights are model_dt: "auto (bf16)"
// for auto, the value itself otherwise.
const char *cli_kv_dtype_label(const char *dtype, enum dtype model_dt, char *buf, size_t n);
// The cache type a --kv-cache-dtype value resolves to on weights of model_dt, by flag name
// ("bf16", "fp8_e4m3", ...).
const char *cli_kv_dtype_resolved(const char *dtype, enum dtype model_dt);

#endif
