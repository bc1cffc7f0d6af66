// sweep.c — placeholder: this subcommand is being written (replaced by its owner).
#include <stdio.h>
#include "tools.h"
int cmd_bench_sweep(int argc, char **argv) { fprintf(stderr, "octet: bench_sweep is not built yet\n"); return 2; }
