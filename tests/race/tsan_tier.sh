#!/usr/bin/env bash
# tsan_tier.sh — the threaded parts under ThreadSanitizer (`make test-tsan`, part of test-full):
# the engine tests (scheduler thread, CPU thread pool, request queues) and the server's load test
# (64 streaming clients with preemption, then 100 that hang up mid-stream) against a TSan build
# of octet. Any TSan report fails (exit code 66 from the sanitizer). Usage: tests/race/tsan_tier.sh
# BUILD (a tree built with -fsanitize=thread). Prints "tsan: N passed, N failed" last.
set -u
BUILD=${1:?usage: tsan_tier.sh BUILD}
MODEL=../shared/models/stories260K.gguf
. tests/lib.sh  # pass/fail counters, ok, bad
tmp=$(mktemp -d); spid=""
cleanup() { [ -n "$spid" ] && kill -9 "$spid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export TSAN_OPTIONS="halt_on_error=0 exitcode=66"

"$BUILD/tests/test_engine" >"$tmp/engine.out" 2>&1; rc=$?
[ $rc = 0 ] && ok || bad "test_engine under TSan exited $rc: $(grep -m1 -A12 'WARNING: ThreadSanitizer' "$tmp/engine.out" || tail -5 "$tmp/engine.out")"

if cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra tests/server/load_test.c -o "$tmp/load_test" -lcurl -ljansson 2>"$tmp/cc"; then
  # its stdout through a FIFO, read until the "serving ... on URL" line it prints once it listens
  mkfifo "$tmp/serve.fifo"
  "$BUILD/octet" serve --model "$MODEL" --port 0 --served-model-name stories --num-kv-blocks 48 --max-model-len 512 \
    --max-num-batched-tokens 256 >"$tmp/serve.fifo" 2>"$tmp/serve.log" &
  spid=$!
  port=""
  exec {fd}<"$tmp/serve.fifo"
  while IFS= read -r -t 300 -u "$fd" line; do  # (a TSan build starts slowly)
    if [[ $line =~ on\ http://127\.0\.0\.1:([0-9]+)$ ]]; then port=${BASH_REMATCH[1]}; break; fi
  done
  cat <&"$fd" >/dev/null &  # the rest of its stdout, until it exits
  exec {fd}<&-
  if [ -n "$port" ]; then
    "$tmp/load_test" --url "http://127.0.0.1:$port" --model stories --clients 64 --distinct 16 --max-tokens 48 \
      --disconnect 100 --server-log "$tmp/serve.log" >"$tmp/load.out" 2>"$tmp/load.err" && ok || bad "load test under TSan: $(tail -5 "$tmp/load.err")"
    kill -TERM "$spid"; wait "$spid"; rc=$?; spid=""
    [ $rc = 0 ] && ok || bad "server under TSan exited $rc: $(grep -m1 -A16 'WARNING: ThreadSanitizer' "$tmp/serve.log" || tail -5 "$tmp/serve.log")"
  else bad "TSan server did not start: $(tail -5 "$tmp/serve.log")"; fi
else bad "load_test build: $(head -5 "$tmp/cc")"; fi
echo "tsan: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
