// main.c — argv → subcommand. Everything else lives in src/tools/.
#include <stdio.h>
#include <string.h>

#include "tools/tools.h"

static void usage(void) {
    fprintf(stderr,
            "octet — LLM inference with an FP8 KV cache\n"
            "usage: octet COMMAND [flags]\n"
            "  generate   run one prompt (--model, --prompt, --max-tokens, sampling, KV flags)\n"
            "  serve      OpenAI-compatible HTTP server (continuous batching, prefix caching)\n"
            "  bench      benchmarks: model (pp/tg speed), serve (load generator), sweep (ITL/TTFT study)\n"
            "  eval       ppl (perplexity, KLD vs a reference KV dtype) | needle (long-context retrieval)\n"
            "  calibrate  K/V scales from your own text (--kv-scales file)\n"
            "  inspect    per-layer K/V/Q/gate statistics and FP8 sensitivity\n"
            "  advise     should this model use an FP8 KV cache? (from sweep, calibration, shape)\n"
            "Run 'octet COMMAND --help' for the flags of a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) { usage(); return argc < 2 ? 2 : 0; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "generate")) return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate")) return cmd_calibrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "advise")) return cmd_advise(argc - 1, argv + 1);
    fprintf(stderr, "octet: unknown command '%s'\n", cmd);
    usage();
    return 2;
}
