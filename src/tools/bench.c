// bench.c — `octet bench`: dispatch to the benchmark programs.
#include <stdio.h>
#include <string.h>

#include "tools.h"

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "model")) return cmd_bench_model(argc - 1, argv + 1);
    fprintf(stderr, "usage: octet bench model ...   (subcommands: model)\n");
    return 2;
}
