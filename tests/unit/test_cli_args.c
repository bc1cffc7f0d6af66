// test_cli_args.c — the command line's shared layer (src/tools/cli.c): argv normalization
// (--flag=value, free-text values left whole, `serve MODEL`, per-command aliases), the
// "did you mean" distance and threshold, the up-front check of bench sweep's server flags,
// and the resolved cache-type labels.
#include "../../src/base/check.h"
#include "../../src/tools/cli.h"
#include "../test.h"

// Normalizes a NULL-terminated argv; returns the new argc (<0 when the check refused it).
static int norm(char **in, char ***out) {
    int n = 0, m;
    while (in[n]) n++;
    if (cli_normalize(n, in, &m, out) < 0) return -1;
    return m;
}

static int same(char **got, int n, const char *const *want) {
    for (int i = 0; i < n; i++)
        if (!want[i] || strcmp(got[i], want[i])) return 0;
    return want[n] == NULL;
}

TEST(flag_equals_value) {
    char *in[] = {"octet", "generate", "--model=m.gguf", "-p", "--x=y", "--max-tokens=8", "--stop", "--a=b",
                  "--kv-cache-dtype-skip-layers=0,2", NULL};
    static const char *const want[] = {"octet", "generate", "--model", "m.gguf", "-p", "--x=y", "--max-tokens", "8",
                                       "--stop", "--a=b", "--kv-cache-dtype-skip-layers", "0,2", NULL};
    char **out;
    int n = norm(in, &out);
    CHECK(n == 12 && same(out, n, want));
    CHECK(!strcmp(cli_command(), "generate"));
}

TEST(serve_positional_and_aliases) {
    char *in[] = {"octet", "serve", "m.gguf", "--kv-cache-memory-bytes=1000", "-c", "64", NULL};
    static const char *const want[] = {"octet", "serve", "--model", "m.gguf", "--kv-cache-memory", "1000", "-c", "64",
                                       NULL};
    char **out;
    int n = norm(in, &out);
    CHECK(n == 8 && same(out, n, want));
    char *in2[] = {"octet", "bench", "sweep", "-o", "d", "--config", "--kv-cache-dtype=fp8 --threads=2", NULL};
    static const char *const want2[] = {"octet", "bench", "sweep", "--output-dir", "d", "--config",
                                        "--kv-cache-dtype=fp8 --threads=2", NULL};
    n = norm(in2, &out);
    CHECK(n == 7 && same(out, n, want2));
    CHECK(!strcmp(cli_command(), "bench sweep"));
}

TEST(sweep_flags_checked_up_front) {
    char *bad_dtype[] = {"octet", "bench", "sweep", "--kv-cache-dtype", "auto,fp9", NULL};
    char **out;
    CHECK(norm(bad_dtype, &out) < 0 && strstr(err_msg(), "'fp9'"));
    char *bad_cfg[] = {"octet", "bench", "sweep", "--config", "--max-model-len=x", NULL};
    CHECK(norm(bad_cfg, &out) < 0 && strstr(err_msg(), "--max-model-len: 'x'"));
    char *bad_args[] = {"octet", "bench", "sweep", "--serve-args", "--threads 2 --kv-cache-dtype-skip-layers q", NULL};
    CHECK(norm(bad_args, &out) < 0 && strstr(err_msg(), "'q'"));
    char *fine[] = {"octet", "bench", "sweep", "--kv-cache-dtype=auto,fp8", "--serve-args", "--threads 2 --port 0",
                    NULL};
    CHECK(norm(fine, &out) == 7);
    char *help[] = {"octet", "bench", "sweep", "--kv-cache-dtype", "fp9", "--help", NULL};
    CHECK(norm(help, &out) == 6);
}

TEST(did_you_mean) {
    CHECK_EQ_INT(cli_edit_distance("--tempreature", "--temperature"), 1);  // a transposition is one edit
    CHECK_EQ_INT(cli_edit_distance("--modle", "--model"), 1);
    CHECK_EQ_INT(cli_edit_distance("abc", "abc"), 0);
    char *in[] = {"octet", "generate", NULL};
    char **out;
    norm(in, &out);
    static const char *const names[] = {"--prompt", "--temperature", "--top-p", NULL};
    CHECK(!cli_known("--tempreature", names) && strstr(err_msg(), "(did you mean --temperature?)"));
    CHECK(!cli_known("--thread", names) && strstr(err_msg(), "(did you mean --threads?)"));  // a model flag
    CHECK(!cli_known("--zzzzzz", names) && !strstr(err_msg(), "did you mean"));
    CHECK(!cli_known("word", names) && strstr(err_msg(), "unexpected argument 'word'"));
    CHECK(cli_known("--top-p", names));
    static const char *const cmds[] = {"generate", "serve", "bench", NULL};
    CHECK(cli_nearest("genrate", cmds) && !strcmp(cli_nearest("genrate", cmds), "generate"));
    CHECK(cli_nearest("xyz", cmds) == NULL);
}

TEST(vllm_flags) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    char *ok1[] = {"--tensor-parallel-size", "1", "--dtype", "auto"};
    int i = 0;
    CHECK(cli_parse_model_flag(&a, 4, ok1, &i) == 1 && i == 1);
    i = 2;
    CHECK(cli_parse_model_flag(&a, 4, ok1, &i) == 1 && i == 3);
    char *bad[] = {"--tensor-parallel-size", "2"};
    i = 0;
    CHECK(cli_parse_model_flag(&a, 2, bad, &i) < 0 && strstr(err_msg(), "not supported yet"));
    char *bad2[] = {"--dtype", "bfloat16"};
    i = 0;
    CHECK(cli_parse_model_flag(&a, 2, bad2, &i) < 0 && strstr(err_msg(), "not supported yet"));
}

TEST(resolved_labels) {
    char buf[48];
    CHECK(!strcmp(cli_kv_dtype_label("auto", DT_BF16, buf, sizeof buf), "auto (bf16)"));
    CHECK(!strcmp(cli_kv_dtype_label("auto", DT_F32, buf, sizeof buf), "auto (fp32)"));
    CHECK(!strcmp(cli_kv_dtype_label("fp8", DT_BF16, buf, sizeof buf), "fp8"));
    CHECK(!strcmp(cli_kv_dtype_resolved("fp8", DT_BF16), "fp8_e4m3"));
}

int main(void) {
    RUN(flag_equals_value);
    RUN(serve_positional_and_aliases);
    RUN(sweep_flags_checked_up_front);
    RUN(did_you_mean);
    RUN(vllm_flags);
    RUN(resolved_labels);
    return test_summary("cli_args");
}
