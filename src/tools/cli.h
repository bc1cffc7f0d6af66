// cli.h — flags shared by every subcommand that runs a model (owns: parsing of
// --model, --kv-cache-dtype, --kv-cache-dtype-skip-layers, --kv-scales, --kv-block-tokens,
// --threads, --max-model-len, --fp8-attention-math into struct runner_options).
#ifndef OCTET_CLI_H
#define OCTET_CLI_H

#include <stdbool.h>

#include "../engine/runner.h"

struct cli_model_args {
    const char *model;
    struct runner_options ro;
};

void cli_model_args_default(struct cli_model_args *a);
// If argv[*i] is one of the shared flags, consumes it (and its value) and returns 1;
// returns 0 if not ours; <0 with err_msg() on a bad value.
int cli_parse_model_flag(struct cli_model_args *a, int argc, char **argv, int *i);
// Value of flag argv[*i] (advances *i), or NULL with an error set.
const char *cli_value(int argc, char **argv, int *i);
int cli_int(const char *flag, const char *s, long lo, long hi, long *out);
int cli_float(const char *flag, const char *s, double *out);
void cli_print_model_flags(void);
// --fp8-attention-accumulation: two-level -> 0, every:N -> N (every:1 = two-level), single -> ATTN_ACC_SINGLE.
int cli_parse_accum(const char *flag, const char *v, int *out);
// The flag's spelling of an accumulation mode, in buf.
const char *cli_accum_name(int acc, char *buf, size_t n);
// True if f is one of the NULL-terminated names; otherwise sets "unknown flag 'f'".
bool cli_known(const char *f, const char *const *names);

#endif
