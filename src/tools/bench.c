// bench.c — `octet bench`: dispatch to the benchmark programs.
#include <stdio.h>
#include <string.h>

#include "tools.h"

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "model")) return cmd_bench_model(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "attention")) return cmd_bench_attention(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "serve")) return cmd_bench_serve(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sweep")) return cmd_bench_sweep(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sampler")) return cmd_bench_sampler(argc - 1, argv + 1);
    fprintf(stderr, "usage: octet bench {model|attention|serve|sweep|sampler} ...\n");
    return 2;
}
