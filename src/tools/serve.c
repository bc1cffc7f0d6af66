// serve.c — placeholder until the server lands (being written now).
#include <stdio.h>
#include "tools.h"
int cmd_serve(int argc, char **argv) { fprintf(stderr, "octet serve: not built yet\n"); return 2; }
