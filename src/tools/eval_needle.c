// eval_needle.c — placeholder: this subcommand is being written (replaced by its owner).
#include <stdio.h>
#include "tools.h"
int cmd_eval_needle(int argc, char **argv) { fprintf(stderr, "octet: eval_needle is not built yet\n"); return 2; }
