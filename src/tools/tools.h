// tools.h — the subcommands main() dispatches to. Each takes argv after "octet" (argv[0]
// is the subcommand name) and returns the process exit code (0 ok, 1 failure, 2 usage).
#ifndef OCTET_TOOLS_H
#define OCTET_TOOLS_H

int cmd_generate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_serve(int argc, char **argv);   // src/tools/serve.c
// Checks words as `octet serve` flags (their values too) without loading or starting anything:
// what `bench sweep` hands its servers, checked before the first starts. <0: err_msg() names it.
int serve_check_flags(char **words, int n);
int cmd_bench(int argc, char **argv);   // src/tools/bench.c
int cmd_bench_model(int argc, char **argv); // src/tools/bench_model.c: llama-bench style pp/tg

int cmd_bench_attention(int argc, char **argv); // src/tools/bench_attention.c: one attention op's speed
int cmd_bench_serve(int argc, char **argv);  // src/tools/bench_serve.c: load generator (vllm bench serve)
int cmd_bench_sweep(int argc, char **argv);  // src/tools/sweep.c: ITL/TTFT sweep, fits, break-even
int cmd_bench_sampler(int argc, char **argv); // src/tools/bench_sampler.c: the host's cost of a draw
int cmd_advise(int argc, char **argv);       // src/tools/advise.c: plain-language FP8 recommendation
int cmd_calibrate(int argc, char **argv);    // src/tools/calibrate.c: K/V (Q) scales from text
int cmd_eval_needle(int argc, char **argv);  // src/tools/eval_needle.c: attention- and model-level needle
int cmd_inspect(int argc, char **argv);      // src/tools/inspect.c: per-layer diagnostics

#endif
