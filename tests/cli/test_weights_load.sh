#!/usr/bin/env bash
# test_weights_load.sh — --weights-load / --mmap / --no-mmap through the commands (src/tools/cli.c,
# src/model/weights_mem.c): the same greedy text mapped and read, bench model's line "octet: weights: ..."
# and its llama-bench field use_mmap saying which happened (read by default on the CPU), a bad value
# refused by name with the usage exit code. No timing thresholds.
set -u
. tests/lib.sh
BUILD=${BUILD:-build}
O=$BUILD/octet
MODEL=../shared/models/stories260K.gguf

# the same greedy text whichever way the file is held
t_read=$("$O" generate -m "$MODEL" -p "Once upon a time" -n 12 --device cpu --no-mmap 2>/dev/null)
t_map=$("$O" generate -m "$MODEL" -p "Once upon a time" -n 12 --device cpu --mmap 2>/dev/null)
t_eq=$("$O" generate -m "$MODEL" -p "Once upon a time" -n 12 --device cpu --weights-load=mmap 2>/dev/null)
if [ -n "$t_read" ] && [ "$t_read" = "$t_map" ] && [ "$t_eq" = "$t_map" ]; then ok; else
  bad "text differs: read '$t_read' mmap '$t_map' --weights-load=mmap '$t_eq'"; fi

# bench model: the startup line and use_mmap, per mode; auto on the CPU reads
for mode in auto read mmap; do
  err=$(mktemp)
  out=$("$O" bench model -m "$MODEL" -p 8 -n 0 -r 1 -t 1 --device cpu --weights-load "$mode" -o jsonl 2>"$err")
  want_map=false; want_line="read into memory"
  [ "$mode" = mmap ] && { want_map=true; want_line="mapped from the file"; }
  if echo "$out" | grep -q "\"use_mmap\":$want_map" && grep -q "^octet: weights: .*$want_line" "$err"; then ok; else
    bad "bench model --weights-load $mode: $(cat "$err") $out"; fi
  rm -f "$err"
done

# a bad value: exit 2, the flag and the choices named
err=$("$O" generate -m "$MODEL" -p x -n 1 --weights-load hugepages 2>&1); rc=$?
if [ $rc = 2 ] && echo "$err" | grep -q "weights-load: 'hugepages' (choose auto, mmap or read)"; then ok; else
  bad "bad value: rc $rc: $err"; fi
# a misspelled flag gets the suggestion
err=$("$O" generate -m "$MODEL" -p x -n 1 --no-mmmap 2>&1); rc=$?
if [ $rc = 2 ] && echo "$err" | grep -q "did you mean --no-mmap"; then ok; else bad "typo: rc $rc: $err"; fi

echo "test_weights_load: $pass passed, $fail failed"
