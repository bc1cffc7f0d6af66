// bench.c — `octet bench`: dispatch to the benchmark programs.
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tools.h"

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "model")) return cmd_bench_model(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "attention")) return cmd_bench_attention(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "serve")) return cmd_bench_serve(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sweep")) return cmd_bench_sweep(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sampler")) return cmd_bench_sampler(argc - 1, argv + 1);
    bool help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
    if (argc >= 2 && !help) {
        static const char *const subs[] = {"model", "attention", "serve", "sweep", "sampler", NULL};
        const char *near = cli_nearest(argv[1], subs);
        fprintf(stderr, "octet bench: unknown benchmark '%s'%s%s%s\n", argv[1], near ? " (did you mean " : "",
                near ? near : "", near ? "?)" : "");
    }
    fprintf(stderr, "usage: octet bench {model|attention|serve|sweep|sampler} ...\n");
    return help ? 0 : 2;
}
