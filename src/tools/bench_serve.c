// bench_serve.c — placeholder: this subcommand is being written (replaced by its owner).
#include <stdio.h>
#include "tools.h"
int cmd_bench_serve(int argc, char **argv) { fprintf(stderr, "octet: bench_serve is not built yet\n"); return 2; }
