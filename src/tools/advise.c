// advise.c — placeholder: this subcommand is being written (replaced by its owner).
#include <stdio.h>
#include "tools.h"
int cmd_advise(int argc, char **argv) { fprintf(stderr, "octet: advise is not built yet\n"); return 2; }
