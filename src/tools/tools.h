// tools.h — the subcommands main() dispatches to. Each takes argv after "octet" (argv[0]
// is the subcommand name) and returns the process exit code (0 ok, 1 failure, 2 usage).
#ifndef OCTET_TOOLS_H
#define OCTET_TOOLS_H

int cmd_generate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_serve(int argc, char **argv);   // src/tools/serve.c
int cmd_bench(int argc, char **argv);   // src/tools/bench.c
int cmd_bench_model(int argc, char **argv); // src/tools/bench_model.c: llama-bench style pp/tg

#endif
