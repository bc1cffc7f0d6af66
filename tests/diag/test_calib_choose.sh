#!/usr/bin/env bash
# `octet calibrate` choosing per layer and per K/V by attention-output error (calib_choose.c):
# calibrated on the first half of tests/data/heldout.txt, the fp8 cache's perplexity on the
# disjoint second half is never worse than scale 1.0's, on stories260K and on equivalent copies
# whose K and V are 1000x larger and 1000x smaller (tools/scale_kv_gguf.py); the comparison table
# is printed and the file names each layer's kept candidates; fp8_per_token_head is labelled as such.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
. tests/lib.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
head -c 12380 tests/data/heldout.txt >"$tmp/calib.txt"; tail -c +12381 tests/data/heldout.txt >"$tmp/eval.txt"
python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x1000.gguf" --factor 1000 >/dev/null 2>"$tmp/err" || bad "scale_kv_gguf: $(cat "$tmp/err")"
python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x0.001.gguf" --factor 0.001 >/dev/null 2>"$tmp/err" || bad "scale_kv_gguf: $(cat "$tmp/err")"
ppl() {  # model, then eval flags; prints the held-out perplexity
  local m=$1; shift
  "$OCTET" eval ppl --model "$m" --file "$tmp/eval.txt" --ctx 256 --json "$@" 2>>"$tmp/err" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["ppl"])'
}
for m in original x1000 x0.001; do
  path=$MODEL; [ "$m" != original ] && path="$tmp/$m.gguf"
  : >"$tmp/err"
  if ! "$OCTET" calibrate --model "$path" --file "$tmp/calib.txt" --output "$tmp/$m.json" >"$tmp/$m.out" 2>>"$tmp/err"; then
    bad "calibrate $m: $(cat "$tmp/err")"; continue
  fi
  one=$(ppl "$path" --kv-cache-dtype fp8); cal=$(ppl "$path" --kv-cache-dtype fp8 --kv-scales "$tmp/$m.json")
  echo "$m: held-out ppl fp8 scale 1.0 $one, chosen scales $cal" >&2
  if python3 -c 'import sys; a,b=map(float,sys.argv[1:]); assert b<=a, (a,b)' "$one" "$cal"; then ok
  else bad "$m: chosen scales ppl $cal worse than scale 1.0's $one; $(cat "$tmp/err")"; fi
done
# the table: a K and a V row per layer (5 layers), 1.0 among the columns, one kept mark per row
if grep -q "| layer | | 1.0 |" "$tmp/original.out" && [ "$(grep -c '^| [0-9] | [KV] |.*\*' "$tmp/original.out")" = 10 ]; then ok
else bad "calibrate prints no comparison table: $(head -5 "$tmp/original.out")"; fi
# the file: per-head arrays, each layer's kept names, k_offset only where a "+off" K was kept
if python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["method"]=="min-attention-error" and d["kv_cache_dtype"]=="fp8_e4m3"
for l in d["layers"]:
    assert len(l["k_scale"])==4 and len(l["v_scale"])==4 and "k_choice" in l and "v_choice" in l, l
    assert ("k_offset" in l) == l["k_choice"].endswith("+off"), l["k_choice"]
    assert not l["v_choice"].endswith("+off")' "$tmp/original.json" 2>"$tmp/pyerr"; then ok
else bad "chosen scales file: $(cat "$tmp/pyerr")"; fi
# x1000: scale 1.0 saturates K and V, so no layer keeps it
if python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert all(not l[k].startswith("1.0") for l in d["layers"] for k in ("k_choice","v_choice")), d' "$tmp/x1000.json" 2>"$tmp/pyerr"
then ok; else bad "x1000 keeps scale 1.0: $(cat "$tmp/pyerr")"; fi
# fp8_per_token_head: K offsets (its scales are per token), labelled with its own name
if "$OCTET" calibrate --model "$MODEL" --file "$tmp/calib.txt" --kv-cache-dtype fp8_per_token_head \
     --output "$tmp/d.json" >"$tmp/d.out" 2>"$tmp/err" && grep -q "fp8_per_token_head" "$tmp/d.out" &&
   ! grep -q "fp8_e4m3" "$tmp/d.out" &&
   python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kv_cache_dtype"]=="fp8_per_token_head"
assert all("k_offset" in l for l in d["layers"])' "$tmp/d.json" 2>"$tmp/pyerr"; then ok
else bad "calibrate fp8_per_token_head: $(cat "$tmp/err" "$tmp/pyerr" "$tmp/d.out")"; fi
echo "calib_choose: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
