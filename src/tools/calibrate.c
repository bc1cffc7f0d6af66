// calibrate.c — placeholder: this subcommand is being written (replaced by its owner).
#include <stdio.h>
#include "tools.h"
int cmd_calibrate(int argc, char **argv) { fprintf(stderr, "octet: calibrate is not built yet\n"); return 2; }
